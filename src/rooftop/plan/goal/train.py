"""The smallest slice that trains on a number of tokens within a goal: ``--max-days`` and/or ``--max-cost``
instead of ``--chips``.

The slices walked are the chip's valid slices (hardware/slices.py), smallest first. Each one tried is
searched as ``rooftop train`` searches a slice (plan/train/search.search, the fastest layout that fits);
it meets the goal when a layout fits and tokens / its tokens per second is at most the days.

The walk: a first slice from the compute bound (no slice trains faster than at its peak, so below
tokens x training FLOPs per token / (peak x seconds) chips none meets the days), then jumps up by the
time it misses by (chips x days / max days: the time at a fixed MFU), doubling past a slice the model
does not fit on, until one meets; then bisection between the last slice that missed and the first that
met, down to two neighbours. The result is the met slice whose next smaller valid slice misses (the
bisection assumes that more chips never train slower, true of the planner within a few percent; a
smaller slice across a dip is not looked for). A cost goal is checked on the slice found: a larger
slice costs more (its MFU is not higher), a smaller one misses the days. With a cost goal alone, the
smallest slice the model fits on (the cheapest) is the one checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rooftop.errors import InvalidConfigError
from rooftop.hardware.chip import Chip
from rooftop.hardware.slices import SliceOption, valid_slices
from rooftop.hardware.topology import Topology
from rooftop.model.per_token import flops_per_token_train
from rooftop.plan.train.search import search
from rooftop.plan.train.step import TrainingSetup
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Option, OptionError, Reason, refusal
from rooftop.units import SECONDS_PER_HOUR

SECONDS_PER_DAY = 86_400.0
CHIPS, MAX_COST = Option("chips"), Option("max_cost")
#: most slices one goal search tries (each a full layout search); the walk needs ~10 on any chip
MAX_TRIES = 40


@dataclass(frozen=True)
class Trial:
    """One slice tried: its fastest fitting layout's days and dollars (None when nothing fits)."""

    chips: int
    topology: str
    layout: str | None
    days: float | None
    cost_usd: float | None
    meets: bool
    note: Note = ""
    step_time_s: float | None = None
    mfu: float | None = None


@dataclass(frozen=True)
class TrainGoal:
    """The answer: ``found`` the smallest slice meeting the goal (None when none does, ``reason`` says
    why), ``smaller`` the next smaller valid slice (tried, missing), and every slice tried in order."""

    chip: str
    max_days: float | None
    max_cost_usd: float | None
    tokens: float
    price_usd_per_chip_hour: float | None
    found: Trial | None
    smaller: Trial | None
    trials: tuple[Trial, ...]
    reason: Note


class _Walk:
    def __init__(
        self, chip: Chip, setup_for: Callable[[Topology], TrainingSetup], fix: Mapping[str, object],
        tokens: float, max_days: float | None, price: float | None,
    ) -> None:  # fmt: skip
        self.chip, self.setup_for, self.fix, self.tokens = chip, setup_for, dict(fix), tokens
        self.max_days, self.price = max_days, price
        self.options = valid_slices(chip)
        self.tried: dict[int, Trial] = {}

    def trial(self, i: int) -> Trial:
        if i not in self.tried:
            if len(self.tried) >= MAX_TRIES:
                raise OptionError(f"the goal search tried {MAX_TRIES} slices without settling; give ", CHIPS)
            self.tried[i] = self._run(self.options[i])
        return self.tried[i]

    def _run(self, option: SliceOption) -> Trial:
        try:
            setup = self.setup_for(option.topology(self.chip))
            result = search(setup, self.fix, "time", 1)
        except InvalidConfigError as exc:
            return Trial(option.chips, option.spec, None, None, None, False, refusal(exc))
        if not result.ranked:
            code = ReasonCode.NO_LAYOUT_FITS if result.best_unfit is not None else ReasonCode.NO_VALID_LAYOUT
            why = Reason.of(code)
            return Trial(option.chips, option.spec, None, None, None, False, why)
        best = result.ranked[0]
        seconds = self.tokens / best.tokens_per_s
        cost = seconds * option.chips / SECONDS_PER_HOUR * self.price if self.price is not None else None
        days = seconds / SECONDS_PER_DAY
        meets = self.max_days is None or days <= self.max_days
        label = best.parallelism.label()
        return Trial(option.chips, option.spec, label, days, cost, meets, "", best.step_time_s, best.mfu)

    def index_at_least(self, chips: float) -> int:
        for i, o in enumerate(self.options):
            if o.chips >= chips:
                return i
        return len(self.options) - 1

    def next_guess(self, i: int) -> int:
        """The slice to try after slice i missed: scaled by the time it misses by, or doubled."""
        t = self.trial(i)
        want = 2 * t.chips if t.days is None or self.max_days is None else t.chips * t.days / self.max_days * 1.02
        return max(i + 1, self.index_at_least(want))

    def smallest(self, start: int) -> tuple[int | None, int | None]:
        """(index of the smallest meeting slice, index of the slice below it) from ``start``."""
        lo, hi, i = -1, None, start
        while hi is None:
            if self.trial(i).meets:
                hi = i
            else:
                lo = i
                if i == len(self.options) - 1:
                    return None, lo
                i = self.next_guess(i)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if self.trial(mid).meets else (mid, hi)
        if lo == -1 and hi > 0:  # the start met: the slice below it must be tried to be the smallest
            lo = hi - 1
            while lo >= 0 and self.trial(lo).meets:
                hi, lo = lo, lo - 1
        return hi, lo if lo >= 0 else None


def compute_bound_chips(setup: TrainingSetup, tokens: float, max_days: float) -> float:
    """Chips below which no slice trains ``tokens`` in ``max_days``: tokens x training FLOPs per token /
    (the matrix peak x the seconds), at 100% of the peak."""
    flops = tokens * flops_per_token_train(setup.cfg, setup.seq_len)
    peak = setup.chip.flops_per_s(setup.dtypes.matmul or setup.dtypes.activations)
    return flops / (peak * max_days * SECONDS_PER_DAY)


def train_goal(
    chip: Chip, setup_for: Callable[[Topology], TrainingSetup], tokens: float, max_days: float | None,
    max_cost_usd: float | None, price: float | None, fix: Mapping[str, object] | None = None,
) -> TrainGoal:  # fmt: skip
    """The smallest valid slice of ``chip`` that trains ``tokens`` in ``max_days`` (module docstring);
    ``setup_for`` builds the job's setup on a topology."""
    if max_days is None and max_cost_usd is None:
        raise OptionError("a training goal needs ", Option("max_days"), " or ", MAX_COST)
    if max_cost_usd is not None and price is None:
        raise OptionError(MAX_COST, f" needs a price: {chip.name} has none in the catalog; pass ", Option("price"))
    walk = _Walk(chip, setup_for, fix or {}, tokens, max_days, price)
    start = 0
    if max_days is not None:
        first = setup_for(walk.options[0].topology(chip))
        start = walk.index_at_least(math.floor(compute_bound_chips(first, tokens, max_days)))
    hi, lo = walk.smallest(start)
    trials = tuple(walk.tried[i] for i in walk.tried)
    smaller = walk.tried.get(lo) if lo is not None else None
    goal = TrainGoal(chip.name, max_days, max_cost_usd, tokens, price, None, smaller, trials, "")
    if hi is None:
        most = walk.options[-1]
        timed = [x for x in trials if x.days is not None]
        fastest = min(timed, key=lambda x: x.days or 0.0) if timed else None
        last = trials[-1] if fastest is None and trials else None
        none = Reason.of(ReasonCode.GOAL_UNMET, chip=chip.name, most=most.chips, fastest=fastest, last=last)
        return _unmet(goal, none)
    found = walk.tried[hi]
    if max_cost_usd is not None and found.cost_usd is not None and found.cost_usd > max_cost_usd:
        over = Reason.of(ReasonCode.GOAL_OVER_BUDGET, max_days=max_days, found=found, max_cost_usd=max_cost_usd)
        return _unmet(goal, over)
    why = Reason.of(ReasonCode.GOAL_MET, found=found, smaller=smaller)
    return TrainGoal(chip.name, max_days, max_cost_usd, tokens, price, found, smaller, trials, why)


def _unmet(goal: TrainGoal, reason: Note) -> TrainGoal:
    return TrainGoal(goal.chip, goal.max_days, goal.max_cost_usd, goal.tokens, goal.price_usd_per_chip_hour, None,
                     goal.smaller, goal.trials, reason)  # fmt: skip
