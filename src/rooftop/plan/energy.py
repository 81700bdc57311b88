"""Energy beside dollars: what a training run or a serving slice draws, from each chip's board power.

Every chip is taken at its catalog board power (``[power] watts``, the datasheet TDP for GPUs; see each
TPU file's note for what its figure covers) for the whole time it is held, as a job is billed:

- training: kWh = chips x watts x train_time_s / 3.6e6 (1 kWh = 3.6e6 J); per million tokens:
  kWh x 1e6 / tokens.
- serving: the slice draws chips x watts; a million output tokens take 1e6 / tokens_per_s seconds of it,
  so kWh per million output tokens = chips x watts / tokens_per_s x 1e6 / 3.6e6.

A chip at full board power the whole time is an upper bound on the chips' own energy (a step that waits on
memory or the network draws less); hosts, networking and cooling (a data center's PUE) are not counted
unless the chip's figure includes them, as its note says.
"""

from __future__ import annotations

from dataclasses import dataclass

from rooftop.hardware.chip import Chip
from rooftop.units import JOULES_PER_KWH, TOKENS_PER_MILLION, WATTS_PER_KW


@dataclass(frozen=True)
class Energy:
    """Energy of a job on ``chips`` chips of ``power_w_per_chip`` watts; None where a figure is missing."""

    power_w_per_chip: float | None
    power_source: str
    slice_kw: float | None  # what the chips draw together
    kwh: float | None  # training: the whole run
    kwh_per_million_tokens: float | None  # training: per trained token; serving: per output token


def _power(chip: Chip) -> tuple[float | None, str]:
    figure = chip.sources.get("power.watts")
    if chip.power_w is None:
        return None, "no board power in the chip file"
    return chip.power_w, figure.source if figure is not None else "the chip file"


def training_energy(chip: Chip, chips: int, train_time_s: float | None, tokens: float | None) -> Energy:
    """kWh of a run of ``train_time_s`` on ``chips`` chips, and per million of its ``tokens``."""
    watts, source = _power(chip)
    if watts is None:
        return Energy(None, source, None, None, None)
    kwh = chips * watts * train_time_s / JOULES_PER_KWH if train_time_s is not None else None
    per_m = kwh * TOKENS_PER_MILLION / tokens if kwh is not None and tokens else None
    return Energy(watts, source, chips * watts / WATTS_PER_KW, kwh, per_m)


def serving_energy(chip: Chip, chips: int, tokens_per_s: float | None) -> Energy:
    """kWh per million output tokens of a slice of ``chips`` chips emitting ``tokens_per_s``."""
    watts, source = _power(chip)
    if watts is None:
        return Energy(None, source, None, None, None)
    per_m = chips * watts / tokens_per_s * TOKENS_PER_MILLION / JOULES_PER_KWH if tokens_per_s else None
    return Energy(watts, source, chips * watts / WATTS_PER_KW, None, per_m)
