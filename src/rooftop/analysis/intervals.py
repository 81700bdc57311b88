"""When ops ran: per-device busy intervals of compute and of communication, and the steps' busy,
communication, overlap and idle times computed from them (the step table of ``rooftop profile``), in
O(log n) per step window from prefix sums. Intervals are kept as numpy arrays (16 bytes each, with their
prefix sums 24), merged and measured column-wise; every sum is taken in the same order as interval by
interval, so the figures are the same to the last bit."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rooftop.analysis.exact import array_partials
from rooftop.analysis.trace.events import Trace
from rooftop.analysis.trace.ops import Executions, OpExecution, groups_of
from rooftop.analysis.trace.steps import Step, detect_steps

COLLECTIVES = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute", "send", "recv")


def is_collective(opcode: str) -> bool:
    """Whether an HLO opcode (or instruction name) is a collective (its async halves included)."""
    return any(opcode.startswith(c) for c in COLLECTIVES)


@dataclass(frozen=True)
class StepReport:
    index: int
    duration_s: float
    busy_s: float
    comm_s: float
    overlap_s: float
    idle_s: float


def _merge(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for iv in sorted(intervals):
        s, e = iv
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append(iv if iv.__class__ is tuple else (s, e))  # the same pair, not a copy
    return out


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in intervals)


def _intersection(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


class Merged:
    """One device's merged intervals (sorted, disjoint) as two arrays, and the prefix sums of their lengths
    (``sums``, None where they cannot be bisected: :func:`_ordered`). The length inside a window is then
    O(log n) whatever the window: prefix sums between the first and the last interval that meet it, less
    the parts of those two outside it. (Steps may overlap, even all span the whole trace: clipping each
    step's intervals one by one would cost steps x intervals.)"""

    __slots__ = ("ends", "starts", "sums")

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        self.starts, self.ends = starts, ends
        ordered = bool(np.all(starts <= ends))
        self.sums = np.concatenate(([0.0], np.cumsum(ends - starts))) if ordered else None  # cumsum: in order

    @classmethod
    def of(cls, intervals: list[tuple[float, float]]) -> Merged:
        return cls(np.array([s for s, _ in intervals], float), np.array([e for _, e in intervals], float))

    def __len__(self) -> int:
        return len(self.starts)

    def pairs(self) -> list[tuple[float, float]]:
        return list(zip(self.starts.tolist(), self.ends.tolist(), strict=True))

    def within(self, lo: float, hi: float) -> float:
        first = int(np.searchsorted(self.ends, lo, "right"))
        stop = int(np.searchsorted(self.starts, hi, "left"))
        if first >= stop or self.sums is None:
            return 0.0 if first >= stop else _intersection([(lo, hi)], self.pairs())
        total = float(self.sums[stop]) - float(self.sums[first])
        total -= max(0.0, lo - float(self.starts[first])) + max(0.0, float(self.ends[stop - 1]) - hi)
        return max(0.0, total)

    def within_all(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """:meth:`within` of many windows at once (the same arithmetic, element by element)."""
        if not len(self.starts):
            return np.zeros(len(lo))
        assert self.sums is not None
        first = np.searchsorted(self.ends, lo, "right")
        stop = np.searchsorted(self.starts, hi, "left")
        f, last = np.minimum(first, len(self.starts) - 1), np.maximum(stop - 1, 0)
        total = self.sums[stop] - self.sums[first]
        total = total - (np.maximum(0.0, lo - self.starts[f]) + np.maximum(0.0, self.ends[last] - hi))
        return np.where(first < stop, np.maximum(0.0, total), 0.0)


#: the merged intervals of a device with none
_NONE = Merged(np.zeros(0), np.zeros(0))


class _Prefix(Merged):
    """:class:`Merged` built from a list of merged (sorted, disjoint) pairs."""

    def __init__(self, intervals: list[tuple[float, float]]) -> None:
        m = Merged.of(intervals)
        super().__init__(m.starts, m.ends)


def merge(starts: np.ndarray, ends: np.ndarray) -> Merged:
    """The union of intervals as :class:`Merged` (:func:`_merge`, column-wise: sorted by (start, end), an
    interval joins the one before unless it starts after every end so far)."""
    if not np.all(starts <= ends):  # a reversed interval: merged pair by pair, as it always was
        return Merged.of(_merge(zip(starts.tolist(), ends.tolist(), strict=True)))
    if not len(starts):
        return Merged(starts, ends)
    order = np.lexsort((ends, starts))
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    first = np.flatnonzero(np.concatenate(([True], s[1:] > reach[:-1])))
    return Merged(s[first], reach[np.append(first[1:], len(s)) - 1])


class DeviceIntervals(dict[str, Merged]):
    """device -> its merged intervals (:class:`Merged`)."""


def _ordered(merged: list[tuple[float, float]]) -> bool:
    """Whether merged intervals can be bisected: with no reversed interval (a negative duration, from a
    malformed begin/end pair) their starts and ends both increase."""
    return all(s <= e for s, e in merged)


_WALK = 64  # intervals summed one by one before the closed form (prefix sums) takes over


def _overlap(lo: float, hi: float, merged: list[tuple[float, float]] | Merged, prefix: Merged | None = None) -> float:
    """``_intersection([(lo, hi)], merged)`` in O(log n): ``merged`` is sorted and disjoint, ``prefix`` its
    prefix sums. Up to :data:`_WALK` intervals from the first one ending after ``lo`` are summed in the
    order of :func:`_intersection` (the same sum to the last bit); a window holding more (a collective
    spanning a whole trace of kernels, many times over) is measured by the prefix sums instead."""
    m = merged if isinstance(merged, Merged) else prefix
    if m is None or m.sums is None:
        return _intersection([(lo, hi)], merged.pairs() if isinstance(merged, Merged) else merged)
    first = int(np.searchsorted(m.ends, lo, "right"))
    total: float = 0.0
    n = len(m.starts)
    stop = min(first + _WALK, n)
    step = 4
    at = first
    while at < stop:  # a few at a time: most windows end within the first intervals
        upto = min(at + step, stop)
        for s, e in zip(m.starts[at:upto].tolist(), m.ends[at:upto].tolist(), strict=True):
            total += max(0.0, min(hi, e) - max(lo, s))
            if hi < e:
                return total
        at, step = upto, step * 4
    return total if first + _WALK >= n else m.within(lo, hi)


class Runs:
    """The executions of one op: positions ``index`` (in order) of an :class:`Executions`."""

    __slots__ = ("execs", "index")

    def __init__(self, execs: Executions, index: np.ndarray) -> None:
        self.execs, self.index = execs, index

    def __len__(self) -> int:
        return len(self.index)

    def busy_s(self) -> float:
        """Their busy seconds, summed exactly (``math.fsum``: the same whatever their order or grouping)."""
        return math.fsum(self.execs.busy_s[self.index].tolist())

    def devices(self) -> int:
        return len(np.unique(self.execs.device[self.index]))

    def events(self) -> int:
        return int(self.execs.events[self.index].sum())


def comm_overlap(runs: Runs | list[OpExecution], compute: Mapping[str, Merged]) -> float | None:
    """The fraction of the executions' time that compute on their device overlaps; None without time."""
    hidden, spans = overlap_parts(runs, compute)
    total = math.fsum(spans)
    return math.fsum(hidden) / total if total else None


def overlap_parts(runs: Runs | list[OpExecution], compute: Mapping[str, Merged]) -> tuple[list[float], list[float]]:
    """The exact partials (analysis/exact.py) of the seconds of the executions that compute on their device
    overlaps, and of the executions' spans: :func:`comm_overlap` is their ratio, and those of many hosts
    put together give the ratio over all of them."""
    if isinstance(runs, Runs):
        e, idx = runs.execs, runs.index
        starts, ends, device = e.start_s[idx], e.end_s[idx], e.device[idx]
        devices = e.devices
    else:
        starts = np.array([x.start_s for x in runs], float)
        ends = np.array([x.end_s for x in runs], float)
        names = {d: k for k, d in enumerate(dict.fromkeys(x.device for x in runs))}
        device, devices = np.array([names[x.device] for x in runs], np.int64), list(names)
    hidden = np.zeros(len(starts))
    for d in np.unique(device).tolist():
        mine = np.flatnonzero(device == d)
        hidden[mine] = _overlaps(starts[mine], ends[mine], compute.get(devices[d], _NONE))
    return array_partials(hidden), array_partials(ends - starts)


def _overlaps(lo: np.ndarray, hi: np.ndarray, m: Merged) -> np.ndarray:
    """:func:`_overlap` of many windows at once, the same sums: the walk of up to :data:`_WALK` intervals
    is taken a step at a time for every window still walking (a window done adds nothing more)."""
    if m.sums is None:
        return np.array([_overlap(a, b, m) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)], float)
    n = len(m.starts)
    first = np.searchsorted(m.ends, lo, "right")
    total = np.zeros(len(lo))
    walking = np.flatnonzero(first < n)
    for step in range(_WALK):
        if not len(walking):
            break
        j = first[walking] + step
        a, b = lo[walking], hi[walking]
        s, e = m.starts[j], m.ends[j]
        total[walking] += np.maximum(0.0, np.minimum(b, e) - np.maximum(a, s))
        walking = walking[(b >= e) & (j + 1 < n)]  # done: the window ends in this interval, or none is left
    long = walking if len(walking) else np.zeros(0, np.int64)  # walked the whole way, more intervals to go
    if len(long):
        total[long] = m.within_all(lo[long], hi[long])
    return total


def is_communication(e: OpExecution) -> bool:
    """A collective: its HLO instruction (or name) is one, or it is an NCCL/RCCL kernel (``ncclKernel_...``,
    ``ncclDevKernel_...``), which carries no HLO instruction."""
    return _is_communication(e.instruction, e.name)


def _is_communication(instruction: str | None, name: str) -> bool:
    return is_collective(instruction or name) or (instruction is None and "nccl" in name.lower())


def compute_intervals(execs: Executions) -> DeviceIntervals:
    """Per device, the merged intervals in which a non-collective op runs."""
    return device_intervals(execs)[0]


def device_intervals(execs: Executions, also: frozenset[str] = frozenset()) -> tuple[DeviceIntervals, DeviceIntervals]:
    """Per device, the merged intervals of its compute (non-collective ops) and of its communication
    (:func:`is_communication`, or a kernel name in ``also``: the caller knows it communicates), decided
    once per op."""
    comm = np.array([_is_communication(inst, name) or name in also for _, inst, name in execs.ops], bool)
    flag = comm[execs.op] if len(comm) else np.zeros(len(execs), bool)
    out = (DeviceIntervals(), DeviceIntervals())
    key = flag.astype(np.int64) * max(len(execs.devices), 1) + execs.device
    for members in groups_of(key):
        k = int(key[members[0]])
        out[k // max(len(execs.devices), 1)][execs.devices[k % max(len(execs.devices), 1)]] = merge(
            execs.start_s[members], execs.end_s[members]
        )
    return out


def _device_windows(
    compute: Merged, comm: Merged
) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(busy, communication, overlap) seconds of one device inside each window: O(log n) per window from
    prefix sums (overlap = compute + communication - their union); merged lists with a reversed
    interval (not bisectable: :func:`_ordered`) are clipped interval by interval instead."""
    if compute.sums is not None and comm.sums is not None:
        union = merge(np.concatenate((compute.starts, comm.starts)), np.concatenate((compute.ends, comm.ends)))

        def by_prefix(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            busy, cm = union.within_all(lo, hi), comm.within_all(lo, hi)
            overlap = np.minimum(cm, np.maximum(0.0, compute.within_all(lo, hi) + cm - busy))  # residues clamped
            return busy, cm, overlap

        return by_prefix
    compute_d, comm_d = _Clipper(compute.pairs()), _Clipper(comm.pairs())

    def by_clipping(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        out = []
        for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
            c, k = compute_d.clip(a, b), comm_d.clip(a, b)
            out.append((_intersection([(a, b)], _merge(c + k)), _length(k), _intersection(c, k)))
        return tuple(np.array([o[i] for o in out], float) for i in range(3))  # type: ignore[return-value]

    return by_clipping


class _Clipper:
    """The intervals of one device's merged (sorted, disjoint) list that meet a window, clipped to it,
    found by bisection: starts and ends both increase, so they are one contiguous run."""

    __slots__ = ("ends", "intervals", "starts")

    def __init__(self, intervals: list[tuple[float, float]]) -> None:
        self.intervals = intervals
        self.starts = [s for s, _ in intervals]
        self.ends = [e for _, e in intervals] if _ordered(intervals) else None

    def clip(self, lo: float, hi: float) -> list[tuple[float, float]]:
        if self.ends is None:  # not bisectable: every interval tested
            return [(max(s, lo), min(e, hi)) for s, e in self.intervals if e > lo and s < hi]
        first, stop = bisect.bisect_right(self.ends, lo), bisect.bisect_left(self.starts, hi)
        return [(max(s, lo), min(e, hi)) for s, e in self.intervals[first:stop]]


def step_reports(
    trace: Trace, execs: Executions, intervals: tuple[DeviceIntervals, DeviceIntervals] | None = None
) -> list[StepReport]:
    compute, comm = intervals or device_intervals(execs)
    steps = detect_steps(trace)
    return step_table(steps, device_step_sums(steps, compute, comm))


StepSums = tuple[np.ndarray, np.ndarray, np.ndarray]
"""(busy, communication, overlap) seconds of one device in each step window"""


def device_step_sums(steps: Sequence[Step], compute: Mapping[str, Merged], comm: Mapping[str, Merged]) -> dict[
        str, StepSums]:  # fmt: skip
    """Per device (those with compute or communication), its busy, communication and overlap seconds in each
    of ``steps``' windows. A device's figures depend on its own intervals and the windows alone, so those of
    many hosts can be computed apart and put together by :func:`step_table`."""
    lo = np.array([s.start_s for s in steps], float)
    hi = np.array([s.end_s for s in steps], float)
    return {d: _device_windows(compute.get(d, _NONE), comm.get(d, _NONE))(lo, hi) for d in set(compute) | set(comm)}


def step_table(steps: Sequence[Step], sums: Mapping[str, StepSums]) -> list[StepReport]:
    """The step rows: each device's :func:`device_step_sums`, summed over the devices in sorted order (the
    same sums to the last bit however the devices were measured), as means over the devices."""
    busy, cm, ov = np.zeros(len(steps)), np.zeros(len(steps)), np.zeros(len(steps))
    devices = sorted(sums) or ["-"]
    for d in devices:  # summed over devices in this order, as one window at a time would
        b, k, o = sums.get(d) or (0.0, 0.0, 0.0)
        busy, cm, ov = busy + b, cm + k, ov + o
    n = len(devices)
    out = []
    for step, on, comm_s, both in zip(steps, busy.tolist(), cm.tolist(), ov.tolist(), strict=True):
        dur = step.end_s - step.start_s
        out.append(StepReport(step.index, dur, on / n, comm_s / n, both / n, max(0.0, dur - on / n)))
    return out
