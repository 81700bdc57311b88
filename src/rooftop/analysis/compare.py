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

When both halves of an async copy were timed (TPU ``XLA Ops`` lines time ``copy-start`` and ``copy-done``
apart: the start only queues the DMA, 6 ns in the v6e sample, and the done waits for it), the copy is priced
once, on the done, and the start is "no modelled cost". An async collective keeps its price on its start
(the HLO's rule, :mod:`rooftop.analysis.hlo.chains`: a TPU profile measures the transfer there and the done
as a short wait); a GPU trace times the start's kernels, which take the pair's cost as before.

Per step: duration, busy time, communication time (collective instructions, and NCCL/RCCL kernels),
how much of it overlaps compute, idle gaps (means over devices). Memory: peak and a timeline when the
profile has samples.

``judge`` (one op's executions against its Estimate) and ``assemble`` (ops -> ProfileReport) are shared
with the PyTorch path, which prices ops from their aten shapes instead of HLO (analysis/profile.py).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from rooftop.analysis.categories import category_of, phase_of
from rooftop.analysis.gcpause import paused_gc
from rooftop.analysis.hlo.analyze import HloAnalysis, TimedOp
from rooftop.analysis.intervals import (
    DeviceIntervals,
    Merged,
    Runs,
    StepReport,
    comm_overlap,
    device_intervals,
    is_collective,
    step_reports,
)
from rooftop.analysis.trace.events import MemorySample, Trace
from rooftop.analysis.trace.ops import Executions, executions, op_groups
from rooftop.cost.figures import HostFigures
from rooftop.cost.roofline import Bound, Estimate
from rooftop.display import Displayed
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

#: an op's "why": notes joined by "; " when written (an empty text where a part starts with none)
Why = tuple[Note, ...]


class Verdict(StrEnum):
    """An op's verdict (the module docstring says when each is given). A str: JSON and comparisons see the value."""

    FASTER_THAN_ROOFLINE = "faster than roofline"
    OVERLAPPED_TRANSFER = "overlapped transfer"
    NEAR_ROOFLINE = "near roofline"
    COMPUTE_SLOW = "compute-slow"
    MEMORY_SLOW = "memory-slow"
    LATENCY_BOUND_COLLECTIVE = "latency-bound collective"
    EXPOSED_COMMUNICATION = "exposed communication"
    SLOW_HIDDEN_COMMUNICATION = "slow hidden communication"
    NO_MODELLED_COST = "no modelled cost"
    UNKNOWN_COST = "unknown cost"


NEAR_ROOFLINE = 0.6  # efficiency at or above which an op is "near roofline"
#: a compute-bound matmul whose shape uses less of the matrix unit than this says so in its "why"
SHAPE_NOTED = 0.9
ASYNC_START = re.compile(r"-start(\.[0-9]+)?$")
ASYNC_DONE = re.compile(r"-done(\.[0-9]+)?$")
#: efficiency above which an op is "faster than roofline": past timer noise (a few %), the roofline is wrong
FASTER_THAN_ROOFLINE = 1.05
EXPOSED = 0.5  # a collective overlapped by compute less than this fraction of its time is "exposed"


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
    verdict: Verdict
    #: why the verdict, as data: parts whose sentences report/ joins with "; " (report.reasons.why_text)
    why: Why
    flops: float | None
    bytes: float | None
    mesh_axes: tuple[str, ...] | None  # the mesh axes a collective runs over (None: not a collective)
    collective: tuple[Reason, ...] | None = None  # report/ writes "all-reduce over data (groups of 4, stride 2)"
    framework_op: str = ""  # the framework's name for it: JAX's op_name scope path, the aten op
    source: str = ""  # file:line of the code that made it, when the profile records it
    phase: str = ""  # "forward" / "backward" (JAX: jvp / transpose in the op_name), "" when not said
    shape_efficiency: float | None = None  # a matmul's use of the matrix unit by its shape (cost/gemm.py)
    mxu_utilization: float | None = None  # matrix FLOPs / what the chip's matrix units do at peak in the measured time


@dataclass(frozen=True, repr=False)  # the short repr of Displayed
class ProfileReport(Displayed):
    source: str
    chip: str
    ops: tuple[OpReport, ...]
    steps: tuple[StepReport, ...]
    categories: Mapping[str, Mapping[str, float]]
    sharding: tuple[Note, ...]  # each module's mesh (SHARDING_MESH), then its collectives (COLLECTIVE_GROUPS)
    memory: Mapping[str, object]
    notes: tuple[Note, ...] = field(default=())
    #: the device the profile recorded and the catalog chip it is (analysis/device.py), for one profile
    device: Mapping[str, object] | None = None

    def priced_fraction(self) -> float | None:
        """The share of the measured op time that has a roofline (ops of unknown cost are the rest); None
        for a profile with no op time."""
        total = sum(o.total_s for o in self.ops)
        return sum(o.total_s for o in self.ops if o.lower_bound_s is not None) / total if total > 0 else None

    def mxu_utilization(self) -> dict[str, float | None]:
        """The matrix-unit utilisation (xprof's "MXU utilization"): the ops' matrix FLOPs over what the chip's
        matrix units do at peak in the steps' time (``step``, means over devices) and in the ops' measured
        time (``op_time``); None where there is no such time."""
        matrix = sum((o.mxu_utilization or 0.0) * o.total_s for o in self.ops)
        devices = max((o.devices for o in self.ops), default=1) or 1
        steps = sum(s.duration_s for s in self.steps)
        busy = sum(o.total_s for o in self.ops if o.lower_bound_s is not None)
        return {"step": matrix / devices / steps if steps > 0 else None, "op_time": matrix / busy if busy > 0 else None}

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


class _Joiner:
    """Finds the HLO instruction (TimedOp) of a trace op and its source scope."""

    def __init__(
        self,
        analyses: Mapping[str, HloAnalysis],
        op_names: Mapping[str, Mapping[str, str]],
        sources: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.analyses = analyses
        self.op_names = op_names
        self.sources = sources or {}
        self.by_name = {m: {t.op.name: t for t in a.ops} for m, a in analyses.items()}

    def find(self, module: str | None, instruction: str | None) -> tuple[TimedOp | None, Note]:
        if instruction is None:
            return None, Reason.of(ReasonCode.OP_NO_INSTRUCTION)
        mod = module if module in self.by_name else _base_module(module)  # "jit_dot(21)": one of several programs
        if mod not in self.by_name:
            if len(self.by_name) == 1 and module is None:
                mod = next(iter(self.by_name))
            else:
                return None, Reason.of(ReasonCode.OP_NO_MODULE_HLO, module=mod)
        table = self.by_name[mod]
        timed = table.get(instruction) or table.get(_instruction_key(instruction))
        if timed is None:
            return None, Reason.of(ReasonCode.OP_NOT_TOP_LEVEL, instruction=instruction, module=mod)
        return timed, ""

    def scope(self, module: str | None, instruction: str) -> str:
        names = self.op_names.get(module or "") or self.op_names.get(_base_module(module) or "", {})
        return names.get(instruction, "")

    def source(self, module: str | None, instruction: str) -> str:
        found = self.sources.get(module or "") or self.sources.get(_base_module(module) or "", {})
        return found.get(instruction, "")


def _verdict(est: Estimate, opcode: str, eff: float, exposed_fraction: float | None) -> tuple[Verdict, Note]:
    if eff > FASTER_THAN_ROOFLINE:
        return Verdict.FASTER_THAN_ROOFLINE, _reason(ReasonCode.OP_FASTER_THAN_ROOFLINE, ("bound", est.bound),
                                                     ("share", 1 / eff))  # fmt: skip
    if is_collective(opcode):
        latency = any(t.collective is not None and t.collective.bound == "latency" for t in est.terms)
        if latency and eff < NEAR_ROOFLINE:
            return Verdict.LATENCY_BOUND_COLLECTIVE, _LATENCY_BOUND
        if eff >= NEAR_ROOFLINE:
            return Verdict.NEAR_ROOFLINE, ""
        if exposed_fraction is not None and exposed_fraction < EXPOSED:
            return Verdict.EXPOSED_COMMUNICATION, _reason(ReasonCode.OP_EXPOSED, ("share", exposed_fraction))
        return Verdict.SLOW_HIDDEN_COMMUNICATION, _SLOW_HIDDEN
    if eff >= NEAR_ROOFLINE:
        return Verdict.NEAR_ROOFLINE, ""
    slow = {Bound.COMPUTE: Verdict.COMPUTE_SLOW, Bound.MEMORY: Verdict.MEMORY_SLOW}
    below = _reason(ReasonCode.OP_BELOW_ROOFLINE, ("bound", est.bound), ("share", eff))
    return slow.get(est.bound, Verdict.EXPOSED_COMMUNICATION), below


def _reason(code: ReasonCode, *figures: tuple[str, object]) -> Reason:
    """``Reason.of(code, **figures)`` for figures given in name order (an op's why is made for every op)."""
    return Reason(code, figures)


# the reasons without figures, made once (one per op otherwise)
_LATENCY_BOUND = Reason(ReasonCode.OP_LATENCY_BOUND)
_SLOW_HIDDEN = Reason(ReasonCode.OP_SLOW_HIDDEN)
_BOOKKEEPING = Reason(ReasonCode.OP_BOOKKEEPING)


@dataclass(frozen=True)
class Priced:
    """What an op's verdict is judged from: the Estimate of ``executions`` executions (``None`` when
    unknown), the counts of one execution, ``unknown`` (why there is no cost; "" when there is one) and,
    for collectives, the mesh axes and a description."""

    estimate: Estimate | None
    flops: float | None = None
    bytes: float | None = None
    unknown: Note = ""
    mesh_axes: tuple[str, ...] | None = None
    collective: tuple[Reason, ...] | None = None
    executions: float = 1.0
    elsewhere: Note = ""  # why this op's work is priced on another op (the start of an async pair)
    note: Why = ()  # what the cost rule read (a kernel's phase and mask, an update in place or not)
    matrix_s: float = 0.0  # one execution's matrix FLOPs at the chip's matrix peak (cost/roofline.py)


@dataclass(frozen=True)
class Measured:
    """An op's executions as its verdict needs them: how many, on how many devices, their summed busy
    seconds and, for a collective, the fraction of its time that compute overlapped (``comm_overlap``). The
    executions of many hosts measured apart put together (analysis/hosts.py) give the same figures."""

    count: int
    devices: int
    total_s: float
    exposed: float | None = None


def judge(
    name: str,
    module: str | None,
    opcode: str | None,
    category: str,
    execs: Runs | Measured,
    priced: Priced,
    compute: Mapping[str, Merged],
) -> OpReport:
    """The OpReport of an op's executions against the Estimate of one execution (module docstring):
    "unknown cost" without one, "no modelled cost" at zero, else the efficiency and its verdict."""
    if isinstance(execs, Measured):
        total, count, devices = execs.total_s, execs.count, execs.devices
    else:
        total, count, devices = execs.busy_s(), len(execs), execs.devices()
    est = priced.estimate
    lower = est.lower_bound_s / max(priced.executions, 1.0) if est is not None else None

    def report(
        lower_s: float | None, eff: float | None, lost: float, bound: str | None, verdict: Verdict, first: Note
    ) -> OpReport:
        shape = est.shape_efficiency if est is not None else None
        why: Why = (first,) if first else ()
        if priced.note and lower_s:
            why += priced.note
        if shape is not None and bound == "compute" and shape < SHAPE_NOTED:
            why = (*(why or ("",)), _reason(ReasonCode.OP_SHAPE_QUANTIZED, ("share", shape)))
        measured = (count, devices, total / count, total, lower_s, eff, lost, bound, verdict, why)
        counts = (priced.flops, priced.bytes, priced.mesh_axes, priced.collective)
        mxu = priced.matrix_s * count / total if priced.matrix_s and total > 0 else None
        return OpReport(name, module, opcode, category, *measured, *counts, shape_efficiency=shape,
                        mxu_utilization=mxu)  # fmt: skip

    if priced.elsewhere:
        return report(0.0, None, 0.0, None, Verdict.NO_MODELLED_COST, priced.elsewhere)
    if est is None or lower is None or priced.unknown:
        return report(lower, None, 0.0, est.bound if est is not None else None, Verdict.UNKNOWN_COST, priced.unknown)
    if lower <= 0:
        return report(0.0, None, total, None, Verdict.NO_MODELLED_COST, _BOOKKEEPING)
    eff = lower / (total / count) if total else 1.0
    exposed = None
    if opcode and is_collective(opcode):
        exposed = execs.exposed if isinstance(execs, Measured) else comm_overlap(execs, compute)
    if eff > FASTER_THAN_ROOFLINE and ASYNC_DONE.search(name):
        return report(lower, eff, 0.0, est.bound, Verdict.OVERLAPPED_TRANSFER,
                      _reason(ReasonCode.OP_OVERLAPPED_WAIT, ("share", 1 / eff)))  # fmt: skip
    verdict, why = _verdict(est, opcode or "", eff, exposed)
    return report(lower, eff, max(0.0, total - lower * count), est.bound, verdict, why)


@dataclass(frozen=True)
class OpPricing:
    """All an op's report takes from the HLO: its name, module, opcode, category, :class:`Priced` and the
    framework scope and source line that made it; :meth:`report` judges executions against it."""

    name: str
    module: str | None
    opcode: str | None
    category: str
    priced: Priced
    framework_op: str = ""
    source: str = ""

    def report(self, execs: Runs | Measured, compute: Mapping[str, Merged]) -> OpReport:
        report = judge(self.name, self.module, self.opcode, self.category, execs, self.priced, compute)
        if not self.framework_op:
            return report
        return dataclasses.replace(report, framework_op=self.framework_op, source=self.source,
                                   phase=phase_of(self.framework_op))  # fmt: skip


def price_op(key: tuple[Any, ...], joiner: _Joiner, present: set[tuple[Any, ...]]) -> OpPricing:
    """The :class:`OpPricing` of the op ``key`` (module, instruction, name); ``present``: the (module,
    instruction) of every op the trace timed (for the halves of async pairs)."""
    pricing = _priced(key, joiner, present)
    module, instruction, _ = key
    scope = joiner.scope(module, instruction or "")
    if not scope:
        return pricing
    return dataclasses.replace(pricing, framework_op=scope, source=joiner.source(module, instruction or ""))


def _priced(key: tuple[Any, ...], joiner: _Joiner, present: set[tuple[Any, ...]]) -> OpPricing:
    module, instruction, name = key
    timed, why = joiner.find(module, instruction)
    scope = joiner.scope(module, instruction or "")
    if timed is None:
        return OpPricing(name, module, None, category_of(scope or name, name), Priced(None, unknown=why))
    op = timed.op
    done = _done_of(instruction or "")
    if done and (module, done) in present and op.opcode == "copy":  # a DMA timed in halves: the done waits
        priced = Priced(timed.estimate, elsewhere=Reason.of(ReasonCode.OP_PRICED_ON_DONE, done=done))
        return OpPricing(name, module, op.opcode, category_of(scope, op.opcode), priced)
    axes = tuple(a for m in timed.matches for a in (m.axes or ())) or None
    words = tuple(m.reason(op.opcode) for m in timed.matches) or None
    nbytes = op.cost.traffic.logical_bytes
    host = next((t.figures for t in timed.estimate.terms if isinstance(t.figures, HostFigures)), None)
    if host is not None:  # an offload copy: the bytes that cross the host link (one side's)
        nbytes = host.bytes / max(op.executions, 1.0)
    priced = Priced(timed.estimate, op.cost.flops, nbytes, op.cost.unknown or "", axes, words, op.executions,
                    note=op.cost.note, matrix_s=timed.matrix_s)  # fmt: skip
    return OpPricing(name, module, op.opcode, category_of(scope, op.opcode), priced)


def memory_of(trace: Trace, points: int = 200) -> dict[str, object]:
    return memory_summary(trace.memory, points)


def memory_summary(samples: Sequence[MemorySample], points: int = 200) -> dict[str, object]:
    """Peak memory per device and a timeline of about ``points`` of the ``samples`` (sorted)."""
    if not samples:
        return {"available": False, "peak_bytes": None, "timeline": []}
    peak: dict[str, float] = defaultdict(float)
    stack: dict[str, float] = defaultdict(float)
    for s in samples:
        peak[s.device] = max(peak[s.device], s.bytes_in_use)
        stack[s.device] = max(stack[s.device], s.bytes_in_use + s.reserved_bytes)
    stride = max(1, len(samples) // points)
    timeline = [{"time_s": s.time_s, "bytes_in_use": s.bytes_in_use, "device": s.device}
                for s in samples[::stride]]  # fmt: skip
    return {"available": True, "peak_bytes": max(peak.values()), "peak_bytes_per_device": dict(peak),
            "peak_bytes_with_reserved": max(stack.values()), "peak_bytes_with_reserved_per_device": dict(stack),
            "timeline": timeline}  # fmt: skip


def compare(
    trace: Trace,
    analyses: Mapping[str, HloAnalysis],
    op_names: Mapping[str, Mapping[str, str]] | None = None,
    sources: Mapping[str, Mapping[str, str]] | None = None,
) -> ProfileReport:
    """Join ``trace`` with the HLO analyses (module name -> HloAnalysis) and judge every op.
    ``op_names``: module -> instruction -> metadata op_name (the source scope), for categories;
    ``sources``: module -> instruction -> "file:line" of the code that made it."""
    with paused_gc():  # a million executions and intervals: collection passes would dominate
        return _compare(trace, analyses, op_names or {}, sources or {})


def _compare(
    trace: Trace,
    analyses: Mapping[str, HloAnalysis],
    op_names: Mapping[str, Mapping[str, str]],
    sources: Mapping[str, Mapping[str, str]],
) -> ProfileReport:
    execs = executions(trace)
    grouped, pricings = price_ops(execs, analyses, op_names, sources)
    intervals = device_intervals(execs)
    ops = [p.report(Runs(execs, v), intervals[0]) for p, (_, v) in zip(pricings, grouped, strict=True)]
    sharding, notes = analyses_notes(analyses)
    chip = next(iter(analyses.values())).chip.name if analyses else "-"
    return assemble(trace, execs, ops, chip, sharding, notes, intervals=intervals)


def price_ops(
    execs: Executions,
    analyses: Mapping[str, HloAnalysis],
    op_names: Mapping[str, Mapping[str, str]],
    sources: Mapping[str, Mapping[str, str]],
) -> tuple[list[tuple[tuple[Any, ...], np.ndarray]], list[OpPricing]]:
    """The executions of each op (``op_groups``, modules named as the analyses name them) and its pricing."""
    joiner = _Joiner(analyses, op_names, sources)
    # "jit_f(12)" -> "jit_f", unless the profile holds several programs of jit_f and no HLO of that name joins
    # them (a timeline read back carries no HLO: its five programs of jit_dot stay five)
    programs = Counter(_base_module(m) for m in {m for m, _, _ in execs.ops if m})
    grouped = op_groups(
        execs,
        lambda m: m if m in analyses or (programs[_base_module(m)] > 1 and _base_module(m) not in analyses)
        else _base_module(m),
    )  # fmt: skip
    present = {(m, i) for (m, i, _), _ in grouped}
    return grouped, [price_op(k, joiner, present) for k, _ in grouped]


def analyses_notes(analyses: Mapping[str, HloAnalysis]) -> tuple[list[Note], list[Note]]:
    """The sharding lines (each module's mesh, then its distinct collectives, which report/ writes in
    order of their words) and the notes the HLO analyses give."""
    sharding: list[Note] = []
    for a in analyses.values():
        sharding.append(Reason.of(ReasonCode.SHARDING_MESH, module=a.module, mesh=a.mesh.spec(), how=a.mesh.how))
        sharding += dict.fromkeys(m.reason(t.op.opcode) for t in a.ops for m in t.matches)
    notes = [n for a in analyses.values() for n in a.notes]
    if not analyses:
        notes.append(Reason.of(ReasonCode.NO_HLO))
    return sharding, notes


def assemble(
    trace: Trace,
    execs: Executions,
    ops: Iterable[OpReport],
    chip: str,
    sharding: Iterable[Note] = (),
    notes: Iterable[Note] = (),
    *,
    intervals: tuple[DeviceIntervals, DeviceIntervals] | None = None,
) -> ProfileReport:
    """The report of judged ``ops`` (ranked by time lost, then name), with the steps, categories and memory
    of ``trace``; ``execs`` are every op execution of the trace (``executions``), for the steps;
    ``intervals`` their :func:`device_intervals` when already computed."""
    return assemble_parts(trace.source, chip, ops, step_reports(trace, execs, intervals), memory_of(trace), sharding,
                          notes)  # fmt: skip


def assemble_parts(
    source: str,
    chip: str,
    ops: Iterable[OpReport],
    steps: Iterable[StepReport],
    memory: Mapping[str, object],
    sharding: Iterable[Note] = (),
    notes: Iterable[Note] = (),
) -> ProfileReport:
    """The report of judged ``ops`` ranked by time lost, then name (ties in their order), with their
    categories, and the steps and memory given."""
    ranked = sorted(ops, key=lambda r: (-r.lost_s, r.name))
    cats: dict[str, dict[str, float]] = defaultdict(lambda: {"measured_s": 0.0, "lower_bound_s": 0.0})
    for r in ranked:
        cats[r.category]["measured_s"] += r.total_s / max(r.devices, 1)
        if r.verdict != Verdict.OVERLAPPED_TRANSFER:  # hidden behind other ops: not time the category needs
            cats[r.category]["lower_bound_s"] += (r.lower_bound_s or 0.0) * r.count / max(r.devices, 1)
    return ProfileReport(source, chip, tuple(ranked), tuple(steps), dict(cats), tuple(sharding), dict(memory),
                         tuple(notes))  # fmt: skip
