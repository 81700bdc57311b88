"""Where a GPU trace's device sits idle and why: idle gaps by cause, launch delays, a critical path.

Read from a loaded trace's tables (kernels, copies and memsets on device streams; the host events that
launched them, joined by ``correlation``: Kineto's ``cuda_runtime``/``cuda_driver`` events, an XPlane's
launch events on the host threads). On each stream, in start order, the gap before a kernel
(its start less the previous kernel's end on that stream) is idle time of the stream, with a cause:

- ``host``: the kernel's launch began after the previous kernel had ended: the stream waited for the host
  to enqueue work (HolisticTraceAnalysis's ``host_wait``);
- ``launch``: launched before the previous kernel ended, and the gap is shorter than ``launch_gap_s``: the
  delay of starting back-to-back kernels (HTA's ``kernel_wait``; its default threshold, 30 trace units,
  microseconds in a Kineto trace, is taken here as 30 us);
- ``collective``: launched in time, a longer gap while a collective kernel (NCCL/RCCL) ran on another
  stream of the device: the stream waited on it;
- ``other stream``: likewise while a non-collective kernel ran on another stream;
- ``other``: none of these (an event wait, a synchronisation; HTA's ``other`` holds this and the two above).

Per step (the kernels of a step: those the trace places in it, by their launch), the stream figures are
summed, and the device's own idle time (the step window less the union of its streams' busy intervals) is
split the same way by the kernel that ends each device-wide gap, with the time before the step's first
kernel and after its last one apart. A kernel without a launch in the trace (its runtime event is not
recorded) cannot be told host from launch: its gap counts as ``other``.

Launch delays: per kernel with a launch, its start less its launch's start (queueing and launch overhead).

Critical path, per device and step, walked back from the last kernel to end: each kernel's start waited
for the later of its launch and the previous kernel on its stream; where the wait was on neither (a gap
after both), the path goes to the kernel of another stream that ended last before it (a collective, or a
stream it synchronised on). The path's time is split into kernel time (compute, collective), host-bound and
launch gaps, and waits. HTA builds its critical path from the CPU call graph and CUDA events as well; this
one follows only the device side and the launches, so a host-side chain (Python, the dataloader) shows as
one host-bound gap.

Values only: report/idle.py writes the words.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from rooftop.analysis.trace.events import Trace
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

#: the gap under which a kernel launched before the previous one ended is a launch delay (HTA's default
#: consecutive_kernel_delay: 30 trace units, i.e. us in a Kineto trace)
LAUNCH_GAP_S = 30e-6
CAUSES = ("host", "launch", "collective", "other stream", "other")
_DEVICE_KINDS = ("kernel", "memcpy")
_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


@dataclass(frozen=True)
class Kernel:
    device: str
    stream: str
    name: str
    start_s: float
    end_s: float
    step: int | None
    launch_s: float | None  # the start of the runtime event that launched it; None when not recorded
    collective: bool


@dataclass(frozen=True)
class StreamIdle:
    """One stream's idle time in one step, by cause (CAUSES), and its gaps counted."""

    device: str
    stream: str
    step: int | None
    by_cause: dict[str, float]
    gaps: int

    @property
    def idle_s(self) -> float:
        return math.fsum(self.by_cause.values())


@dataclass(frozen=True)
class DeviceIdle:
    """A device in a step: the window, its busy time, its idle time by cause (CAUSES, plus ``before first
    kernel`` and ``after last kernel``)."""

    device: str
    step: int | None
    window_s: float
    busy_s: float
    by_cause: dict[str, float]

    @property
    def idle_s(self) -> float:
        return math.fsum(self.by_cause.values())


@dataclass(frozen=True)
class LaunchStats:
    """Kernel start less its launch's start, over the kernels with a recorded launch."""

    kernels: int
    without_launch: int
    mean_s: float | None
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None
    max_s: float | None


@dataclass(frozen=True)
class CriticalPath:
    """The device-side critical path of a step (module docstring): its span and its time by part."""

    device: str
    step: int | None
    span_s: float
    kernels: int
    by_part: dict[str, float]


@dataclass(frozen=True)
class IdleReport:
    """Idle time by cause per stream and step and per device and step, launch delays, critical paths."""

    source: str
    launch_gap_s: float
    streams: tuple[StreamIdle, ...]
    devices: tuple[DeviceIdle, ...]
    launches: LaunchStats
    paths: tuple[CriticalPath, ...]
    notes: tuple[Note, ...] = field(default=())

    def stream_totals(self, steps: Sequence[int | None] | None = None) -> dict[tuple[str, str], dict[str, float]]:
        """(device, stream) -> cause -> idle seconds summed over ``steps`` (every step when None)."""
        out: dict[tuple[str, str], dict[str, float]] = {}
        for s in self.streams:
            if steps is None or s.step in steps:
                acc = out.setdefault((s.device, s.stream), dict.fromkeys(CAUSES, 0.0))
                for k, v in s.by_cause.items():
                    acc[k] += v
        return out


def kernels_of(trace: Trace) -> list[Kernel]:
    """The device events (kernels, copies, memsets) of a trace with their launches (by correlation)."""
    ev = trace.events
    cols = [ev.column(c) for c in ("kind", "device", "line", "name", "start_s", "duration_s", "step",
                                   "correlation", "args")]  # fmt: skip
    launches: dict[str, float] = {}
    for kind, device, _, _, start, _, _, corr, args in zip(*cols, strict=True):
        if kind in _DEVICE_KINDS or corr is None or device.startswith("/device:"):
            continue
        cat = args.get("cat") if args else None  # Kineto: the runtime's category; XPlane: none (the host line)
        if cat is None or cat in _LAUNCH_CATS:
            launches.setdefault(corr, start)
    out = []
    for kind, device, line, name, start, dur, step, corr, _ in zip(*cols, strict=True):
        if kind in _DEVICE_KINDS and device.startswith("/device:"):
            low = name.lower()
            out.append(
                Kernel(
                    device,
                    line,
                    name,
                    start,
                    start + dur,
                    step,
                    launches.get(corr) if corr is not None else None,
                    "nccl" in low or "rccl" in low,
                )
            )
    out.sort(key=lambda k: (k.device, k.stream, k.start_s, k.end_s))
    return out


def _cause(k: Kernel, prev_end: float, gap: float, others: _Busy, launch_gap_s: float) -> str:
    if k.launch_s is None:
        return "other"
    if k.launch_s > prev_end:
        return "host"
    if gap < launch_gap_s:
        return "launch"
    return others.kind_over(k.device, k.stream, prev_end, k.start_s)


class _Busy:
    """Per device, the kernels by start with the running maximum of their ends, to ask what ran on other
    streams during a gap without a pass over every kernel: the walk back from the gap's end stops where no
    earlier kernel can reach into the gap."""

    def __init__(self, kernels: Sequence[Kernel]) -> None:
        by_device: dict[str, list[Kernel]] = defaultdict(list)
        for k in kernels:
            by_device[k.device].append(k)
        self.by_device = {d: sorted(ks, key=lambda k: k.start_s) for d, ks in by_device.items()}
        self.starts = {d: [k.start_s for k in ks] for d, ks in self.by_device.items()}
        self.reach = {d: list(itertools.accumulate((k.end_s for k in ks), max)) for d, ks in self.by_device.items()}

    def kind_over(self, device: str, stream: str, lo: float, hi: float) -> str:
        """``collective`` if a collective kernel of another stream overlaps [lo, hi], else ``other stream``
        if any kernel of another stream does, else ``other``."""
        ks, reach = self.by_device[device], self.reach[device]
        found = "other"
        i = bisect.bisect_left(self.starts[device], hi) - 1
        while i >= 0 and reach[i] > lo:
            k = ks[i]
            if k.stream != stream and k.end_s > lo:
                if k.collective:
                    return "collective"
                found = "other stream"
            i -= 1
        return found


def stream_idle(kernels: Sequence[Kernel], launch_gap_s: float = LAUNCH_GAP_S) -> list[StreamIdle]:
    """Each stream's gaps by cause, per step of the kernel after the gap (module docstring)."""
    busy = _Busy(kernels)
    acc: dict[tuple[str, str, int | None], dict[str, float]] = {}
    gaps: dict[tuple[str, str, int | None], int] = defaultdict(int)
    prev: Kernel | None = None
    for k in kernels:
        key = (k.device, k.stream, k.step)
        acc.setdefault(key, dict.fromkeys(CAUSES, 0.0))
        if prev is not None and (prev.device, prev.stream) == (k.device, k.stream):
            gap = k.start_s - prev.end_s
            acc[key][_cause(k, prev.end_s, gap, busy, launch_gap_s)] += gap
            gaps[key] += 1
        prev = k
    return [StreamIdle(d, s, step, by, gaps[(d, s, step)]) for (d, s, step), by in acc.items()]


def _merged(kernels: Sequence[Kernel]) -> list[tuple[float, float, Kernel]]:
    """The union of the kernels' intervals, each run with the kernel that opened it."""
    out: list[tuple[float, float, Kernel]] = []
    for k in sorted(kernels, key=lambda k: k.start_s):
        if out and k.start_s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], k.end_s), out[-1][2])
        else:
            out.append((k.start_s, k.end_s, k))
    return out


def device_idle(
    kernels: Sequence[Kernel], windows: dict[int, tuple[float, float]], launch_gap_s: float = LAUNCH_GAP_S
) -> list[DeviceIdle]:
    """Each device's idle time in each step window (``step -> (start, end)``), by the cause of the kernel
    that ends each device-wide gap; the time before the first kernel and after the last apart."""
    by: dict[tuple[str, int], list[Kernel]] = defaultdict(list)
    for k in kernels:
        if k.step in windows:
            by[(k.device, k.step)].append(k)
    out = []
    for (device, step), ks in sorted(by.items()):
        lo, hi = windows[step]
        runs = _merged([k for k in ks if k.end_s > lo and k.start_s < hi])
        causes = dict.fromkeys((*CAUSES, "before first kernel", "after last kernel"), 0.0)
        if not runs:
            continue
        causes["before first kernel"] = max(0.0, runs[0][0] - lo)
        causes["after last kernel"] = max(0.0, hi - runs[-1][1])
        busy = sum(min(e, hi) - max(s, lo) for s, e, _ in runs)
        for (_, end, _), (start, _, k) in itertools.pairwise(runs):
            gap = start - end
            cause = "other" if k.launch_s is None else "host" if k.launch_s > end else (
                "launch" if gap < launch_gap_s else "other")  # fmt: skip
            causes[cause] += gap
        out.append(DeviceIdle(device, step, hi - lo, busy, causes))
    return out


def _quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of sorted ``values`` by linear interpolation (numpy's default)."""
    pos = (len(values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def launch_stats(kernels: Sequence[Kernel]) -> LaunchStats:
    delays = sorted(k.start_s - k.launch_s for k in kernels if k.launch_s is not None)
    missing = sum(1 for k in kernels if k.launch_s is None)
    if not delays:
        return LaunchStats(0, missing, None, None, None, None, None)
    return LaunchStats(len(delays), missing, math.fsum(delays) / len(delays), _quantile(delays, 0.5),
                       _quantile(delays, 0.9), _quantile(delays, 0.99), delays[-1])  # fmt: skip


def critical_path(kernels: Sequence[Kernel], launch_gap_s: float = LAUNCH_GAP_S) -> list[CriticalPath]:
    """Per device and step, the device-side critical path (module docstring)."""
    by: dict[tuple[str, int | None], list[Kernel]] = defaultdict(list)
    for k in kernels:
        by[(k.device, k.step)].append(k)
    return [_path(device, step, ks, launch_gap_s) for (device, step), ks in sorted(by.items(), key=lambda x: str(x[0]))]


def _path(device: str, step: int | None, ks: list[Kernel], launch_gap_s: float) -> CriticalPath:
    by_end = sorted(ks, key=lambda k: (k.end_s, k.start_s))
    prev_on_stream: dict[int, Kernel | None] = {}
    last: dict[str, Kernel] = {}
    for kern in sorted(ks, key=lambda k: (k.start_s, k.end_s)):
        prev_on_stream[id(kern)] = last.get(kern.stream)
        last[kern.stream] = kern
    ends = [k.end_s for k in by_end]
    parts = dict.fromkeys(("compute", "collective", "host", "launch", "wait"), 0.0)
    node: Kernel | None = by_end[-1]
    first, count = by_end[-1].start_s, 0
    while node is not None:
        count += 1
        first = node.start_s
        parts["collective" if node.collective else "compute"] += node.end_s - node.start_s
        prev = prev_on_stream[id(node)]
        nxt = prev
        if prev is None:
            pass
        elif node.launch_s is not None and node.launch_s > prev.end_s:  # it waited for its launch: the host
            parts["host"] += max(0.0, node.start_s - prev.end_s)
        elif node.start_s - prev.end_s < launch_gap_s:
            parts["launch"] += max(0.0, node.start_s - prev.end_s)
        else:  # neither its launch nor its stream held it: the kernel of another stream that ended last
            nxt = _last_other(by_end, ends, node, prev.end_s) or prev
            parts["wait"] += max(0.0, node.start_s - nxt.end_s)
        node = nxt
    return CriticalPath(device, step, by_end[-1].end_s - first, count, parts)


def _last_other(by_end: list[Kernel], ends: list[float], node: Kernel, after: float) -> Kernel | None:
    """The kernel of another stream than ``node``'s that ended last at or before its start, after ``after``."""
    i = bisect.bisect_right(ends, node.start_s) - 1
    while i >= 0 and ends[i] > after:
        if by_end[i].stream != node.stream:
            return by_end[i]
        i -= 1
    return None


def step_windows(trace: Trace) -> dict[int, tuple[float, float]]:
    """step number -> (start, end) of the trace's step markers (ProfilerStep#N, JAX step annotations)."""
    out: dict[int, tuple[float, float]] = {}
    ev = trace.events
    for kind, step, start, dur in zip(ev.column("kind"), ev.column("step"), ev.column("start_s"),
                                      ev.column("duration_s"), strict=True):  # fmt: skip
        if kind == "step" and step is not None:
            lo, hi = out.get(step, (start, start + dur))
            out[step] = (min(lo, start), max(hi, start + dur))
    return out


def idle_report(trace: Trace, launch_gap_s: float = LAUNCH_GAP_S) -> IdleReport:
    """The idle views of a trace with device streams (module docstring)."""
    kernels = kernels_of(trace)
    notes: list[Note] = []
    if not kernels:
        notes.append(Reason.of(ReasonCode.IDLE_NO_KERNELS))
    missing = sum(1 for k in kernels if k.launch_s is None)
    if missing:
        notes.append(Reason.of(ReasonCode.IDLE_NO_LAUNCHES, missing=missing, kernels=len(kernels)))
    return IdleReport(trace.source, launch_gap_s, tuple(stream_idle(kernels, launch_gap_s)),
                      tuple(device_idle(kernels, step_windows(trace), launch_gap_s)), launch_stats(kernels),
                      tuple(critical_path(kernels, launch_gap_s)) if kernels else (), tuple(notes))  # fmt: skip
