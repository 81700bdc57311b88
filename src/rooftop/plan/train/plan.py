"""A training plan: the layout search, the best layouts' steps part by part, the best one at ideal
efficiency, why it wins, and what training on a number of tokens takes (``plan_training``, what
``rooftop train`` prints)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from rooftop.cost.efficiency import IDEAL
from rooftop.display import Displayed
from rooftop.errors import InvalidConfigError
from rooftop.plan.train.breakdown import StepPart, breakdown_of
from rooftop.plan.train.explain import Explanation, explain, no_layout_reason, tp_domains
from rooftop.plan.train.search import SearchResult, search
from rooftop.plan.train.step import StepResult, TrainingSetup, evaluate, layout_mesh
from rooftop.reasons import OptionError
from rooftop.units import SECONDS_PER_HOUR


@dataclass(frozen=True)
class TrainingTotals:
    """Training on ``tokens`` at the best layout's rate: seconds, chip-hours and dollars (None
    without tokens; dollars None without a price)."""

    tokens: float | None
    train_time_s: float | None
    chip_hours: float | None
    cost_usd: float | None
    price_usd_per_chip_hour: float | None


@dataclass(frozen=True, repr=False)  # the short repr of Displayed
class TrainingPlan(Displayed):
    """``ranked[0]`` is the best layout (the smallest that does not fit, ``fits`` false, when none
    does); ``parts[i]`` the step of ``ranked[i]`` part by part; ``ideal`` the best layout at ideal
    efficiency (every factor 1)."""

    setup: TrainingSetup
    search: SearchResult
    ranked: list[StepResult]
    parts: list[list[StepPart]]
    ideal: StepResult
    explanation: Explanation  # why the best wins, as figures (report/train_explain.py: in words)
    totals: TrainingTotals


def totals_for(setup: TrainingSetup, best: StepResult, tokens: float | None, price: float | None) -> TrainingTotals:
    """Seconds = tokens / the best step's tokens per second; chip-hours = seconds x chips / 3600;
    dollars = chip-hours x ``price`` (the chip's catalog price unless given)."""
    price = setup.chip.price_usd_per_hour if price is None else price
    if price is not None and price < 0:
        raise InvalidConfigError(f"the price per chip-hour must be >= 0, got {price}")
    if tokens is None:
        return TrainingTotals(None, None, None, None, price)
    if not tokens >= 1:
        raise InvalidConfigError(f"the tokens to train on must be > 0, got {tokens}")
    seconds = tokens / best.tokens_per_s
    chip_hours = seconds * setup.chips / SECONDS_PER_HOUR
    return TrainingTotals(tokens, seconds, chip_hours, chip_hours * price if price is not None else None, price)


def plan_training(
    setup: TrainingSetup,
    fix: Mapping[str, object] | None = None,
    objective: str = "time",
    top: int = 5,
    tokens: float | None = None,
    price_usd_per_chip_hour: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> TrainingPlan:
    """Search the layouts of ``setup`` (``fix`` pins degrees, ``objective`` ranks), then price the
    ``top`` best part by part, the best at ideal efficiency, and the totals for ``tokens``."""
    if top < 1:
        raise InvalidConfigError(f"top must be >= 1, got {top}")
    pinned = dict(fix or {})
    if "flash" in pinned or "dropout" in pinned:  # choices of the job, not of a layout
        setup = replace(setup, flash_attention=bool(pinned.pop("flash", setup.flash_attention)),
                        dropout=bool(pinned.pop("dropout", setup.dropout)))  # fmt: skip
    if "compile" in pinned:  # the job's: elementwise ops fused by a compiler, or run eagerly
        setup = replace(setup, fused_elementwise=bool(pinned.pop("compile")))
    if "grad_clip" in pinned:  # the framework's optimizer step, clipping on or off
        setup = replace(setup, framework=replace(setup.stack, grad_clip=bool(pinned.pop("grad_clip"))))
    result = search(setup, pinned, objective, top, progress)
    if not result.ranked and result.best_unfit is None:
        raise OptionError(*no_layout_reason(setup, pinned, result.unlayable))
    ranked = result.ranked or [result.best_unfit]  # type: ignore[list-item]  # checked just above
    best = ranked[0]
    parts = [breakdown_of(setup, r.parallelism) for r in ranked]
    mesh = layout_mesh(setup.topology, best.parallelism)
    ideal = evaluate(replace(setup, efficiency=IDEAL), best.parallelism, setup.pricer(mesh, 1.0))
    inside = None
    spanned = tp_domains(setup, best.parallelism)
    if spanned > 1 and "tp" not in pinned:  # the best that keeps tp inside one fast domain, to compare
        within = search(setup, {**pinned, "tp": best.parallelism.tp // spanned}, objective, 1)
        inside = within.ranked[0] if within.ranked else None
    why = explain(setup, best, ideal, inside)
    return TrainingPlan(
        setup, result, ranked, parts, ideal, why, totals_for(setup, best, tokens, price_usd_per_chip_hour)
    )
