"""One job on several chips or slices: each entry planned as ``rooftop train`` / ``rooftop serve`` plan
it (:func:`rooftop.plan.train.plan.plan_training`, :func:`rooftop.plan.serve.sweep.plan_serving`), its
answer reduced to the figures a buyer compares: step (training) or time per output token (serving), MFU
or throughput per chip, and dollars, with where the price comes from (the catalog's source, or that the
catalog has none)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rooftop.display import Displayed
from rooftop.errors import RooftopError
from rooftop.plan.energy import serving_energy, training_energy
from rooftop.reasons import Note, refusal
from rooftop.units import usd_per_million_tokens

if TYPE_CHECKING:
    from rooftop.hardware.chip import Chip
    from rooftop.plan.serve.sweep import ServingRequest
    from rooftop.plan.train.step import TrainingSetup

NO_PRICE = "no public price in the catalog"


@dataclass(frozen=True)
class Entry:
    """One chip or slice's answer. ``step_time_s``: the training step, or the decode step (the time per
    output token) when serving. ``note``: why an entry has no answer, or what limits it."""

    chip: str
    topology: str
    chips: int
    layout: str | None
    step_time_s: float | None
    mfu: float | None  # training
    ttft_s: float | None  # serving
    tokens_per_s: float | None
    tokens_per_s_per_chip: float | None
    fits: bool
    bound: str | None
    train_time_s: float | None  # training with --tokens
    cost_usd: float | None  # training with --tokens and a price
    usd_per_million_output_tokens: float | None  # serving, with a price
    price_usd_per_chip_hour: float | None
    price_source: str
    note: Note = ""
    kwh: float | None = None  # training with --tokens: the run's energy at board power (plan/energy.py)
    kwh_per_million_tokens: float | None = None  # per trained token, or per output token when serving
    usd_per_hour: float | None = None  # the slice's price per hour (chips x price per chip-hour)


@dataclass(frozen=True, repr=False)  # the short repr of Displayed
class Comparison(Displayed):
    job: str  # "train" or "serve"
    model: str
    entries: tuple[Entry, ...]
    settings: Mapping[str, object]


def price_of(chip: Chip) -> tuple[float | None, str]:
    """The catalog price per chip-hour and its source, or None and NO_PRICE."""
    figure = chip.sources.get("price.usd_per_chip_hour")
    if chip.price_usd_per_hour is None:
        return None, NO_PRICE
    return chip.price_usd_per_hour, figure.source if figure is not None else "the chip file"


def serving_cost(
    price: float | None, chips: int | None, tokens_per_s: float | None
) -> tuple[float | None, float | None]:
    """(dollars per hour, dollars per million tokens) of ``chips`` at ``price`` per chip-hour producing
    ``tokens_per_s``: price x chips, and that hour's dollars over the hour's tokens, x 1e6. None without a
    price (or chips); the second also None without tokens. The serving goal's figure, in its JSON and in
    ``rooftop compare``."""
    usd_h = price * chips if chips is not None and price is not None else None
    per_m = usd_per_million_tokens(usd_h, tokens_per_s) if usd_h is not None and tokens_per_s else None
    return usd_h, per_m


def _per_hour(price: float | None, chips: int) -> float | None:
    return price * chips if price is not None else None


def _failed(chip: Chip, topology: str, chips: int, why: Note) -> Entry:
    price, source = price_of(chip)
    return Entry(chip.name, topology, chips, None, None, None, None, None, None, False, None, None, None, None,
                 price, source, why)  # fmt: skip


def compare_training(
    setups: Sequence[TrainingSetup], fix: Mapping[str, object] | None = None, tokens: float | None = None
) -> Comparison:
    """The fastest layout of each setup (the same model, batch and sequence length on different slices)."""
    from rooftop.plan.train.plan import plan_training

    out = []
    for setup in setups:
        price, source = price_of(setup.chip)
        try:
            plan = plan_training(setup, fix, "time", 1, tokens)
        except RooftopError as exc:  # no valid layout on this slice: said in its row, the others still planned
            out.append(_failed(setup.chip, setup.topology.spec, setup.chips, refusal(exc)))
            continue
        best, totals = plan.ranked[0], plan.totals
        note = "" if best.fits else "fits nowhere: the smallest layout is shown"
        energy = training_energy(setup.chip, setup.chips, totals.train_time_s, tokens)
        out.append(Entry(setup.chip.name, setup.topology.spec, setup.chips, best.parallelism.label(), best.step_time_s,
                         best.mfu, None, best.tokens_per_s, best.tokens_per_s / setup.chips, best.fits, best.bound,
                         totals.train_time_s, totals.cost_usd, None, price, source, note, energy.kwh,
                         energy.kwh_per_million_tokens, _per_hour(price, setup.chips)))  # fmt: skip
    first = setups[0]
    settings = {"global_batch_tokens": first.tokens_per_step, "seq_len": first.seq_len, "tokens": tokens,
                "fix": dict(fix or {})}  # fmt: skip
    return Comparison("train", first.cfg.name, tuple(out), settings)


def compare_serving(requests: Sequence[ServingRequest]) -> Comparison:
    """The chosen serving point of each request (the same model and lengths on different slices)."""
    from rooftop.plan.serve.sweep import plan_serving

    out = []
    for req in requests:
        price, source = price_of(req.chip)
        chips = req.topology.num_chips
        try:
            plan = plan_serving(req)
        except RooftopError as exc:
            out.append(_failed(req.chip, req.topology.spec, chips, refusal(exc)))
            continue
        if plan.chosen is None:
            out.append(_failed(req.chip, req.topology.spec, chips, plan.chosen_reason or "no point meets the targets"))
            continue
        p = plan.points[plan.chosen]
        layout = " ".join(f"{k}={v}" for k, v in p.layout.as_dict().items() if v > 1) or "one chip per replica"
        energy = serving_energy(req.chip, chips, p.tokens_per_s)
        out.append(Entry(req.chip.name, req.topology.spec, chips, f"{layout} batch={p.batch}", p.step_time_s, None,
                         p.ttft_s, p.tokens_per_s, p.tokens_per_s_per_chip, p.fits, p.bound, None, None,
                         p.cost_output_usd_per_m, price, source, plan.chosen_reason, None,
                         energy.kwh_per_million_tokens, _per_hour(req.price, chips)))  # fmt: skip
    first = requests[0]
    settings = {"prompt_len": first.prompt_len, "gen_len": first.gen_len, "weight_dtype": first.dtypes.weights,
                "max_step_latency_s": first.max_step_latency_s}  # fmt: skip
    return Comparison("serve", first.cfg.name, tuple(out), settings)
