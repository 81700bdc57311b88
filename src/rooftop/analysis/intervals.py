"""When ops ran: per-device busy intervals of compute and of communication, and the steps' busy,
communication, overlap and idle times computed from them (the step table of ``rooftop profile``), in
O(log n) per step window from prefix sums."""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from rooftop.analysis.trace.events import Trace
from rooftop.analysis.trace.ops import OpExecution, detect_steps

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


def comm_overlap(execs: list[OpExecution], compute: Mapping[str, list[tuple[float, float]]]) -> float | None:
    total = sum(e.end_s - e.start_s for e in execs)
    if not total:
        return None
    prefixes = compute.prefixes if isinstance(compute, DeviceIntervals) else _Prefixes(compute)
    hidden = sum(_overlap(e.start_s, e.end_s, compute.get(e.device, []), prefixes[e.device]) for e in execs)
    return hidden / total


class _Prefix:
    """The length of a merged (sorted, disjoint) interval list inside a window in O(log n), whatever the
    window: prefix sums of the lengths between the first and the last interval that meet it, less the
    parts of those two outside it. (Steps may overlap, even all span the whole trace: clipping each
    step's intervals one by one would cost steps x intervals.)"""

    __slots__ = ("ends", "starts", "sums")

    def __init__(self, intervals: list[tuple[float, float]]) -> None:
        self.starts = [s for s, _ in intervals]
        self.ends = [e for _, e in intervals]
        self.sums = [0.0, *itertools.accumulate(e - s for s, e in intervals)]

    def within(self, lo: float, hi: float) -> float:
        first, stop = bisect.bisect_right(self.ends, lo), bisect.bisect_left(self.starts, hi)
        if first >= stop:
            return 0.0
        total = self.sums[stop] - self.sums[first]
        total -= max(0.0, lo - self.starts[first]) + max(0.0, self.ends[stop - 1] - hi)
        return max(0.0, total)


class _Prefixes(dict[str, _Prefix | None]):
    """device -> the :class:`_Prefix` of its merged (sorted, disjoint) intervals, built on first use; None
    where they cannot be bisected (:func:`_ordered`)."""

    def __init__(self, intervals: Mapping[str, list[tuple[float, float]]]) -> None:
        super().__init__()
        self.intervals = intervals

    def __missing__(self, device: str) -> _Prefix | None:
        merged = self.intervals.get(device, [])
        prefix = self[device] = _Prefix(merged) if _ordered(merged) else None
        return prefix


def _ordered(merged: list[tuple[float, float]]) -> bool:
    """Whether merged intervals can be bisected: with no reversed interval (a negative duration, from a
    malformed begin/end pair) their starts and ends both increase."""
    return all(s <= e for s, e in merged)


class DeviceIntervals(dict[str, list[tuple[float, float]]]):
    """device -> merged intervals (sorted, disjoint), with their prefix sums (``prefixes``) for bisection,
    kept with them so that judging many ops bisects into the same lists."""

    def __init__(self, intervals: Mapping[str, list[tuple[float, float]]]) -> None:
        super().__init__(intervals)
        self.prefixes = _Prefixes(self)


_WALK = 64  # intervals summed one by one before the closed form (_Prefix) takes over


def _overlap(lo: float, hi: float, merged: list[tuple[float, float]], prefix: _Prefix | None) -> float:
    """``_intersection([(lo, hi)], merged)`` in O(log n): ``merged`` is sorted and disjoint, ``prefix`` its
    prefix sums. Up to :data:`_WALK` intervals from the first one ending after ``lo`` are summed in the
    order of :func:`_intersection` (the same sum to the last bit); a window holding more (a collective
    spanning a whole trace of kernels, many times over) is measured by the prefix sums instead."""
    if prefix is None:
        return _intersection([(lo, hi)], merged)
    first = bisect.bisect_right(prefix.ends, lo)
    total = 0.0
    for j in range(first, min(first + _WALK, len(merged))):
        s, e = merged[j]
        total += max(0.0, min(hi, e) - max(lo, s))
        if hi < e:
            return total
    return total if first + _WALK >= len(merged) else prefix.within(lo, hi)


def is_communication(e: OpExecution) -> bool:
    """A collective: its HLO instruction (or name) is one, or it is an NCCL/RCCL kernel (``ncclKernel_...``,
    ``ncclDevKernel_...``), which carries no HLO instruction."""
    return is_collective(e.instruction or e.name) or (e.instruction is None and "nccl" in e.name.lower())


def compute_intervals(execs: list[OpExecution]) -> DeviceIntervals:
    """Per device, the merged intervals in which a non-collective op runs."""
    return device_intervals(execs)[0]


def device_intervals(execs: list[OpExecution]) -> tuple[DeviceIntervals, DeviceIntervals]:
    """Per device, the merged intervals of its compute (non-collective ops) and of its communication,
    in one pass (:func:`is_communication` decided once per distinct instruction and name)."""
    out: tuple[dict[str, list[tuple[float, float]]], ...] = (defaultdict(list), defaultdict(list))
    kinds: dict[tuple[str | None, str], bool] = {}
    for e in execs:
        key = (e.instruction, e.name)
        comm = kinds.get(key)
        if comm is None:
            comm = kinds[key] = is_communication(e)
        out[comm][e.device].append((e.start_s, e.end_s))
    compute, comm_ = ({d: _merge(v) for d, v in part.items()} for part in out)
    return DeviceIntervals(compute), DeviceIntervals(comm_)


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


def _device_windows(
    compute: list[tuple[float, float]], comm: list[tuple[float, float]]
) -> Callable[[float, float], tuple[float, float, float]]:
    """(busy, communication, overlap) seconds of one device inside a window: O(log n) per window from
    prefix sums (overlap = compute + communication - their union); merged lists with a reversed
    interval (not bisectable: :func:`_ordered`) are clipped interval by interval instead."""
    if _ordered(compute) and _ordered(comm):
        c, k, u = _Prefix(compute), _Prefix(comm), _Prefix(_merge(compute + comm))

        def by_prefix(lo: float, hi: float) -> tuple[float, float, float]:
            busy, cm = u.within(lo, hi), k.within(lo, hi)
            return busy, cm, min(cm, max(0.0, c.within(lo, hi) + cm - busy))  # rounding residues clamped

        return by_prefix
    compute_d, comm_d = _Clipper(compute), _Clipper(comm)

    def by_clipping(lo: float, hi: float) -> tuple[float, float, float]:
        c, k = compute_d.clip(lo, hi), comm_d.clip(lo, hi)
        return _intersection([(lo, hi)], _merge(c + k)), _length(k), _intersection(c, k)

    return by_clipping


def step_reports(
    trace: Trace, execs: list[OpExecution], intervals: tuple[DeviceIntervals, DeviceIntervals] | None = None
) -> list[StepReport]:
    out = []
    compute, comm = intervals or device_intervals(execs)
    devices = sorted(set(compute) | set(comm)) or ["-"]
    windows = [_device_windows(compute.get(d, []), comm.get(d, [])) for d in devices]
    for step in detect_steps(trace):
        lo, hi = step.start_s, step.end_s
        busy = cm = ov = 0.0
        for device_window in windows:
            b, k, o = device_window(lo, hi)
            busy, cm, ov = busy + b, cm + k, ov + o
        n = len(devices)
        dur = step.end_s - step.start_s
        out.append(StepReport(step.index, dur, busy / n, cm / n, ov / n, max(0.0, dur - busy / n)))
    return out
