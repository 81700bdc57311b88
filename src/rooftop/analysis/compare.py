"""Measured vs roofline, op by op: the profiling loop in one function.

Each op the trace ran (grouped per module and HLO instruction, several kernels of one
execution counted once: trace/ops.py op_executions) is joined with the same instruction of the
module's HLO (analysis/hlo/analyze.py: its Cost and Estimate on the chip). Per op:

- measured_s: mean duration of one execution on one device;
- lower_bound_s: the roofline time of one execution (max of compute, memory, network);
- efficiency = lower_bound_s / measured_s (1 is at the roofline);
- lost_s: total measured time minus executions x lower bound, the time to win back; ops
  are ranked by it;
- verdict: "faster than roofline" (efficiency above FASTER_THAN_ROOFLINE: the chip figures or the op's
  count are off, not the op), "overlapped transfer" (the done of an async pair that waited less than the
  transfer's roofline: the transfer overlapped other ops), "near roofline" (efficiency >= NEAR_ROOFLINE),
  "compute-slow" or "memory-slow"
  (by the op's bound), "latency-bound collective" (a collective whose estimate is
  latency-bound), "exposed communication" (a collective mostly not overlapped by compute on
  its device), "slow hidden communication" (overlapped but far from its bandwidth time),
  "no modelled cost" (bookkeeping ops the roofline prices at zero) or "unknown cost" with why.

When both halves of an async pair were timed (TPU ``XLA Ops`` lines time ``copy-start`` and ``copy-done``
apart), the pair's work is priced once, on the done (where the wait is), and the start is "no modelled
cost"; a GPU trace times the start's kernels, which take the pair's cost as before.

Per step: duration, busy time, communication time (collective instructions, and NCCL/RCCL kernels),
how much of it overlaps compute, idle gaps (means over devices). Memory: peak and a timeline when the
profile has samples.

``judge`` (one op's executions against its Estimate) and ``assemble`` (ops -> ProfileReport) are shared
with the PyTorch path, which prices ops from their aten shapes instead of HLO (analysis/profile.py).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from rooftop.analysis.gcpause import paused_gc
from rooftop.analysis.hlo.analyze import HloAnalysis, TimedOp
from rooftop.analysis.trace.events import Trace
from rooftop.analysis.trace.ops import OpExecution, detect_steps, op_executions
from rooftop.cost.roofline import Estimate

NEAR_ROOFLINE = 0.6  # efficiency at or above which an op is "near roofline"
ASYNC_START = re.compile(r"-start(\.[0-9]+)?$")
ASYNC_DONE = re.compile(r"-done(\.[0-9]+)?$")
#: efficiency above which an op is "faster than roofline": past timer noise (a few %), the roofline is wrong
FASTER_THAN_ROOFLINE = 1.05
EXPOSED = 0.5  # a collective overlapped by compute less than this fraction of its time is "exposed"
COLLECTIVES = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute", "send", "recv")
CATEGORIES = (
    ("attention", ("attention", "attn", "softmax", "flash", "fmha", "scaled_dot_product")),
    ("mlp", ("mlp", "ffn", "feed_forward", "feedforward", "w_in", "w_out", "gate_proj", "up_proj", "down_proj")),
    ("optimizer", ("optimizer", "adam", "sgd", "update")),
    ("loss", ("loss", "cross_entropy", "logits")),
)


@dataclass(frozen=True)
class OpReport:
    name: str
    module: str | None
    opcode: str | None
    category: str
    count: int
    devices: int
    measured_s: float
    total_s: float
    lower_bound_s: float | None
    efficiency: float | None
    lost_s: float
    bound: str | None
    verdict: str
    why: str
    flops: float | None
    bytes: float | None
    mesh_axes: tuple[str, ...] | None  # the mesh axes a collective runs over (None: not a collective)
    collective: str | None = None  # in words: "all-reduce over data (groups of 4, stride 2)"


@dataclass(frozen=True)
class StepReport:
    index: int
    duration_s: float
    busy_s: float
    comm_s: float
    overlap_s: float
    idle_s: float


@dataclass(frozen=True)
class ProfileReport:
    source: str
    chip: str
    ops: tuple[OpReport, ...]
    steps: tuple[StepReport, ...]
    categories: Mapping[str, Mapping[str, float]]
    sharding: tuple[str, ...]
    memory: Mapping[str, object]
    notes: tuple[str, ...] = field(default=())

    def priced_fraction(self) -> float | None:
        """The share of the measured op time that has a roofline (ops of unknown cost are the rest); None
        for a profile with no op time."""
        total = sum(o.total_s for o in self.ops)
        return sum(o.total_s for o in self.ops if o.lower_bound_s is not None) / total if total > 0 else None

    def overlap(self) -> dict[str, float]:
        comm = sum(s.comm_s for s in self.steps)
        hidden = sum(s.overlap_s for s in self.steps)
        return {"comm_s": comm, "overlapped_s": hidden, "exposed_s": max(0.0, comm - hidden),
                "overlap_fraction": hidden / comm if comm else 0.0}  # fmt: skip


def _base_module(name: str | None) -> str | None:
    return re.sub(r"\([0-9]+\)$", "", name) if name else name  # "jit_f(12)" -> "jit_f" (ASCII digits)


def _instruction_key(name: str) -> str:
    """The async ``-done`` half of a collective is timed with its ``-start`` half."""
    return name.replace("-done", "-start")


def _done_of(name: str) -> str | None:
    """``copy-done.4`` for ``copy-start.4`` (XLA numbers the halves of a pair alike); None for other names."""
    return name.replace("-start", "-done", 1) if ASYNC_START.search(name) else None


def _is_collective(opcode: str) -> bool:
    return any(opcode.startswith(c) for c in COLLECTIVES)


def category_of(op_name: str, opcode: str) -> str:
    """attention / mlp / optimizer / loss from the op's source scope (JAX name stack), or
    communication for collectives, else other."""
    if _is_collective(opcode):
        return "communication"
    low = op_name.lower()
    for cat, words in CATEGORIES:
        if any(w in low for w in words):
            return cat
    return "other"


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


class _Joiner:
    """Finds the HLO instruction (TimedOp) of a trace op and its source scope."""

    def __init__(self, analyses: Mapping[str, HloAnalysis], op_names: Mapping[str, Mapping[str, str]]) -> None:
        self.analyses = analyses
        self.op_names = op_names
        self.by_name = {m: {t.op.name: t for t in a.ops} for m, a in analyses.items()}

    def find(self, module: str | None, instruction: str | None) -> tuple[TimedOp | None, str]:
        if instruction is None:
            return None, "the trace event names no HLO instruction"
        mod = module if module in self.by_name else _base_module(module)  # "jit_dot(21)": one of several programs
        if mod not in self.by_name:
            if len(self.by_name) == 1 and module is None:
                mod = next(iter(self.by_name))
            else:
                return None, f"no HLO for module {mod!r} (the profile holds none; give --hlo)"
        table = self.by_name[mod]
        timed = table.get(instruction) or table.get(_instruction_key(instruction))
        if timed is None:
            return None, f"instruction {instruction!r} is not a top-level instruction of {mod}'s HLO"
        return timed, ""

    def scope(self, module: str | None, instruction: str) -> str:
        names = self.op_names.get(module or "") or self.op_names.get(_base_module(module) or "", {})
        return names.get(instruction, "")


def _verdict(est: Estimate, opcode: str, eff: float, exposed_fraction: float | None) -> tuple[str, str]:
    if eff > FASTER_THAN_ROOFLINE:
        return "faster than roofline", (
            f"ran in {1 / eff:.0%} of its {est.bound} roofline time, which no op can: the chip's figures "
            "(datasheet or calibrated) or the op's FLOP/byte count are off (operands served from a cache, an "
            "assumed dtype, work the cost rule counts twice)"
        )
    if _is_collective(opcode):
        latency = any(t.collective is not None and t.collective.bound == "latency" for t in est.terms)
        if latency and eff < NEAR_ROOFLINE:
            return "latency-bound collective", "small message: hop latency dominates its bandwidth time"
        if eff >= NEAR_ROOFLINE:
            return "near roofline", ""
        if exposed_fraction is not None and exposed_fraction < EXPOSED:
            return "exposed communication", f"only {exposed_fraction:.0%} of it overlaps compute on its device"
        return "slow hidden communication", "overlapped by compute but far from its bandwidth time"
    if eff >= NEAR_ROOFLINE:
        return "near roofline", ""
    return f"{est.bound}-slow" if est.bound in ("compute", "memory") else "exposed communication", (
        f"reaches {eff:.0%} of its {est.bound} roofline"
    )


def _comm_overlap(execs: list[OpExecution], compute: Mapping[str, list[tuple[float, float]]]) -> float | None:
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


@dataclass(frozen=True)
class Priced:
    """What an op's verdict is judged from: the Estimate of ``executions`` executions (``None`` when
    unknown), the counts of one execution, ``unknown`` (why there is no cost; "" when there is one) and,
    for collectives, the mesh axes and a description."""

    estimate: Estimate | None
    flops: float | None = None
    bytes: float | None = None
    unknown: str = ""
    mesh_axes: tuple[str, ...] | None = None
    collective: str | None = None
    executions: float = 1.0
    elsewhere: str = ""  # why this op's work is priced on another op (the start of an async pair)


def judge(
    name: str,
    module: str | None,
    opcode: str | None,
    category: str,
    execs: list[OpExecution],
    priced: Priced,
    compute: Mapping[str, list[tuple[float, float]]],
) -> OpReport:
    """The OpReport of an op's executions against the Estimate of one execution (module docstring):
    "unknown cost" without one, "no modelled cost" at zero, else the efficiency and its verdict."""
    total = sum(e.busy_s for e in execs)
    count = len(execs)
    devices = len({e.device for e in execs})
    est = priced.estimate
    lower = est.lower_bound_s / max(priced.executions, 1.0) if est is not None else None

    def report(
        lower_s: float | None, eff: float | None, lost: float, bound: str | None, verdict: str, why: str
    ) -> OpReport:
        measured = (count, devices, total / count, total, lower_s, eff, lost, bound, verdict, why)
        counts = (priced.flops, priced.bytes, priced.mesh_axes, priced.collective)
        return OpReport(name, module, opcode, category, *measured, *counts)

    if priced.elsewhere:
        return report(0.0, None, 0.0, None, "no modelled cost", priced.elsewhere)
    if est is None or lower is None or priced.unknown:
        return report(lower, None, 0.0, est.bound if est is not None else None, "unknown cost", priced.unknown)
    if lower <= 0:
        return report(0.0, None, total, None, "no modelled cost", "bookkeeping op the roofline prices at zero")
    eff = lower / (total / count) if total else 1.0
    exposed = _comm_overlap(execs, compute) if opcode and _is_collective(opcode) else None
    if eff > FASTER_THAN_ROOFLINE and ASYNC_DONE.search(name):
        return report(lower, eff, 0.0, est.bound, "overlapped transfer", (
            f"waited {1 / eff:.0%} of its transfer's roofline time: the transfer ran while other ops did, and only "
            "the wait at its done is measured"))  # fmt: skip
    verdict, why = _verdict(est, opcode or "", eff, exposed)
    return report(lower, eff, max(0.0, total - lower * count), est.bound, verdict, why)


def _op_report(
    key: tuple, execs: list[OpExecution], joiner: _Joiner, compute: Mapping, present: set[tuple]
) -> OpReport:
    module, instruction, name = key
    timed, why = joiner.find(module, instruction)
    scope = joiner.scope(module, instruction or "")
    if timed is None:
        return judge(name, module, None, category_of(scope or name, name), execs, Priced(None, unknown=why), compute)
    op = timed.op
    done = _done_of(instruction or "")
    if done and (module, done) in present:  # both halves were timed (TPU): the done waits for the transfer
        priced = Priced(timed.estimate, elsewhere=f"its work is priced on {done}, the half that waits for it")
        return judge(name, module, op.opcode, category_of(scope, op.opcode), execs, priced, compute)
    axes = tuple(a for m in timed.matches for a in (m.axes or ())) or None
    words = "; ".join(m.describe(op.opcode) for m in timed.matches) or None
    nbytes = op.cost.traffic.logical_bytes
    host = next((t for t in timed.estimate.terms if t.kind == "host"), None)
    if host is not None:  # an offload copy: the bytes that cross the host link (one side's)
        nbytes = float(dict(host.figures)["bytes"]) / max(op.executions, 1.0)
    priced = Priced(timed.estimate, op.cost.flops, nbytes, op.cost.unknown or "", axes, words, op.executions)
    return judge(name, module, op.opcode, category_of(scope, op.opcode), execs, priced, compute)


def is_communication(e: OpExecution) -> bool:
    """A collective: its HLO instruction (or name) is one, or it is an NCCL/RCCL kernel (``ncclKernel_...``,
    ``ncclDevKernel_...``), which carries no HLO instruction."""
    return _is_collective(e.instruction or e.name) or (e.instruction is None and "nccl" in e.name.lower())


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


def _steps(
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


def _memory(trace: Trace, points: int = 200) -> dict[str, object]:
    if not trace.memory:
        return {"available": False, "peak_bytes": None, "timeline": []}
    peak: dict[str, float] = defaultdict(float)
    stack: dict[str, float] = defaultdict(float)
    for s in trace.memory:
        peak[s.device] = max(peak[s.device], s.bytes_in_use)
        stack[s.device] = max(stack[s.device], s.bytes_in_use + s.reserved_bytes)
    stride = max(1, len(trace.memory) // points)
    timeline = [{"time_s": s.time_s, "bytes_in_use": s.bytes_in_use, "device": s.device}
                for s in trace.memory[::stride]]  # fmt: skip
    return {"available": True, "peak_bytes": max(peak.values()), "peak_bytes_per_device": dict(peak),
            "peak_bytes_with_reserved": max(stack.values()), "peak_bytes_with_reserved_per_device": dict(stack),
            "timeline": timeline}  # fmt: skip


def compare(
    trace: Trace, analyses: Mapping[str, HloAnalysis], op_names: Mapping[str, Mapping[str, str]] | None = None
) -> ProfileReport:
    """Join ``trace`` with the HLO analyses (module name -> HloAnalysis) and judge every op.
    ``op_names``: module -> instruction -> metadata op_name (the source scope), for categories."""
    with paused_gc():  # a million executions and intervals: collection passes would dominate
        return _compare(trace, analyses, op_names or {})


def _compare(
    trace: Trace, analyses: Mapping[str, HloAnalysis], op_names: Mapping[str, Mapping[str, str]]
) -> ProfileReport:
    execs = op_executions(trace)
    joiner = _Joiner(analyses, op_names)
    grouped: dict[tuple, list[OpExecution]] = defaultdict(list)
    bases: dict[str | None, str | None] = {}
    for e in execs:
        if e.module not in bases:  # "jit_f(12)" -> "jit_f", unless the profile holds several programs of jit_f
            bases[e.module] = e.module if e.module in analyses else _base_module(e.module)
        grouped[(bases[e.module], e.instruction, e.name)].append(e)
    intervals = device_intervals(execs)
    present = {(m, i) for m, i, _ in grouped}
    ops = [_op_report(k, v, joiner, intervals[0], present) for k, v in grouped.items()]
    sharding = []
    for a in analyses.values():
        sharding.append(f"{a.module}: mesh {a.mesh.spec()} ({a.mesh.how})")
        seen = {m.describe(t.op.opcode) for t in a.ops for m in t.matches}
        sharding += sorted(seen)
    notes = [n for a in analyses.values() for n in a.notes]
    if not analyses:
        notes.append("no HLO available: ops have measured times only (give --hlo, or profile with JAX so the "
                     "XPlane carries each module's HLO)")  # fmt: skip
    chip = next(iter(analyses.values())).chip.name if analyses else "-"
    return assemble(trace, execs, ops, chip, sharding, notes, intervals=intervals)


def assemble(
    trace: Trace,
    execs: list[OpExecution],
    ops: Iterable[OpReport],
    chip: str,
    sharding: Iterable[str] = (),
    notes: Iterable[str] = (),
    *,
    intervals: tuple[DeviceIntervals, DeviceIntervals] | None = None,
) -> ProfileReport:
    """The report of judged ``ops`` (ranked by time lost, then name), with the steps, categories and memory
    of ``trace``; ``execs`` are every op execution of the trace (``op_executions``), for the steps;
    ``intervals`` their :func:`device_intervals` when already computed."""
    ranked = sorted(ops, key=lambda r: (-r.lost_s, r.name))
    cats: dict[str, dict[str, float]] = defaultdict(lambda: {"measured_s": 0.0, "lower_bound_s": 0.0})
    for r in ranked:
        cats[r.category]["measured_s"] += r.total_s / max(r.devices, 1)
        if r.verdict != "overlapped transfer":  # hidden behind other ops: not time the category needs
            cats[r.category]["lower_bound_s"] += (r.lower_bound_s or 0.0) * r.count / max(r.devices, 1)
    return ProfileReport(trace.source, chip, tuple(ranked), tuple(_steps(trace, execs, intervals)), dict(cats),
                         tuple(sharding), _memory(trace), tuple(notes))  # fmt: skip
