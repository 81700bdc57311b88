"""One goal on several chips, ranked: ``rooftop compare MODEL --chips-list h100,b200,tpu-v5p ...`` with a
training goal (``--tokens`` and ``--max-days`` / ``--max-cost``) or a serving goal (``--requests-per-s``
with ``--max-ttft`` / ``--max-step-latency``) instead of slices. Each chip gets the answer of its own goal
search (plan/goal/train.py, plan/goal/serve.py); the entries are ranked by dollars (training: the run;
serving: the deployment's dollars per hour), then chips, then energy; a chip that meets no goal comes
last with the reason."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from rooftop.errors import RooftopError
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Topology
from rooftop.plan.compare import Comparison, Entry, price_of, serving_cost
from rooftop.plan.energy import serving_energy, training_energy

if TYPE_CHECKING:  # each comparison imports its own planners when it runs: a serving one never loads training's
    from rooftop.plan.goal.serve import ServeGoal
    from rooftop.plan.serve.sweep import ServingRequest
    from rooftop.plan.train.step import TrainingSetup
    from rooftop.reasons import Note


def _missed(chip: Chip, why: Note) -> Entry:
    price, source = price_of(chip)
    return Entry(chip.name, "-", 0, None, None, None, None, None, None, False, None, None, None, None, price,
                 source, why)  # fmt: skip


def _rank(entries: list[Entry], dollars: Callable[[Entry], float | None]) -> tuple[Entry, ...]:
    def key(e: Entry) -> tuple[float, ...]:
        usd = dollars(e)
        met = e.step_time_s is not None
        return (0 if met else 1, math.inf if usd is None else usd, e.chips, e.kwh or e.kwh_per_million_tokens or 0.0)

    return tuple(sorted(entries, key=key))


def compare_training_goal(
    chips: Sequence[Chip],
    setup_for: Callable[[Chip, Topology | None], TrainingSetup],
    tokens: float,
    max_days: float | None,
    max_cost_usd: float | None,
    fix: Mapping[str, object] | None = None,
) -> Comparison:
    """Each chip's smallest slice meeting the goal; ranked by the run's dollars, then chips, then kWh."""
    from rooftop.plan.goal.train import SECONDS_PER_DAY, train_goal
    from rooftop.reasons import refusal  # a chip's refused goal keeps the options it names

    out = []
    for chip in chips:
        price, source = price_of(chip)
        try:
            base = setup_for(chip, None)
            goal = train_goal(base.chip, functools.partial(_on, base), tokens, max_days, max_cost_usd,
                              base.chip.price_usd_per_hour, fix)  # fmt: skip
        except RooftopError as exc:
            out.append(_missed(chip, refusal(exc)))
            continue
        f = goal.found
        if f is None or f.days is None:
            out.append(_missed(chip, goal.reason))
            continue
        seconds = f.days * SECONDS_PER_DAY
        energy = training_energy(chip, f.chips, seconds, tokens)
        out.append(Entry(chip.name, f.topology, f.chips, f.layout, f.step_time_s, f.mfu, None, tokens / seconds,
                         tokens / seconds / f.chips, True, None, seconds, f.cost_usd, None, price, source,
                         goal.reason, energy.kwh, energy.kwh_per_million_tokens,
                         price * f.chips if price is not None else None))  # fmt: skip
    settings = {"tokens": tokens, "max_days": max_days, "max_cost_usd": max_cost_usd, "fix": dict(fix or {}),
                "rank_by": "cost_usd, chips, kwh"}  # fmt: skip
    model = setup_for(chips[0], None).cfg.name if chips else ""
    return Comparison("train", model, _rank(out, _cost), settings)


def _on(base: TrainingSetup, topology: Topology) -> TrainingSetup:
    from dataclasses import replace

    return replace(base, topology=topology)


def compare_serving_goal(requests: Sequence[ServingRequest], describe: Callable[[ServeGoal], str]) -> Comparison:
    """Each chip's fewest chips serving the rate under the targets; ranked by dollars per hour, then chips,
    then kWh per million output tokens. ``describe`` writes each found goal's note (report/goal.serve_goal_reason)."""
    from rooftop.plan.goal.serve import serve_goal
    from rooftop.reasons import refusal

    out = []
    for req in requests:
        price, source = price_of(req.chip)
        try:
            goal = serve_goal(req, every_layout=False)
        except RooftopError as exc:
            out.append(_missed(req.chip, refusal(exc)))
            continue
        if goal.best is None:
            out.append(_missed(req.chip, goal.reason))
            continue
        b, s = goal.best, goal.best.state
        chips, tokens = b.layout.chips, s.tokens_per_s
        usd_h, per_m = serving_cost(req.price, chips, tokens)
        energy = serving_energy(req.chip, chips, tokens)
        out.append(Entry(req.chip.name, f"{b.layout.replicas} x {b.layout.chips_per_replica}", chips,
                         b.layout.label(), s.tpot_s, None, s.ttft_s, tokens, tokens / chips if tokens else None,
                         True, None, None, None, per_m, price, source, describe(goal), None,
                         energy.kwh_per_million_tokens, usd_h))  # fmt: skip
    first = requests[0]
    settings = {"prompt_len": first.prompt_len, "gen_len": first.gen_len, "weight_dtype": first.dtypes.weights,
                "max_step_latency_s": first.max_step_latency_s, "max_ttft_s": first.max_ttft_s,
                "requests_per_s": first.requests_per_s,
                "rank_by": "usd_per_hour, chips, kwh_per_million_tokens"}  # fmt: skip
    return Comparison("serve", first.cfg.name, _rank(out, _usd_per_hour), settings)


def _usd_per_hour(e: Entry) -> float | None:
    return e.usd_per_hour


def _cost(e: Entry) -> float | None:
    return e.cost_usd
