"""Timelines as Chrome trace-event JSON (what Perfetto, chrome://tracing and XProf's trace viewer open):
``rooftop train|serve|hlo|profile --timeline FILE.json``.

The files are written as JAX writes its traces, so that ``rooftop profile FILE.json`` reads them back
(analysis/trace/chrome_json.py, classify.py): each lane of a device is a thread of a process named
``/device:<KIND>:<n>``; the ops are ``X`` (complete) events on the thread ``XLA Ops`` (an op, its
``hlo_op`` and ``hlo_module`` args naming it), other device work (collectives, transfers, the bubble) on
threads named after it (read back as kernels), steps on the thread ``Steps`` (``step_num`` arg). Events
carry no ``cat`` (a reader takes an event with one for a PyTorch trace). Times are microseconds from 0, in
whole nanoseconds (``_ns``: rounded once, so that slices back to back on a track never overlap).
Predictions that are not device work (``profile --timeline``'s predicted lane) go to a process whose name
does not start with ``/device:`` (read back as host activity, not ops). A PyTorch trace's kernels carry
their report row (the aten op or NCCL call) as ``hlo_op``, and the runs of an op that launched one kernel
name several times their host span and launches (``/host:CPU``), so that they read back as the same rows
and runs; programs of one module name stay apart (``jit_dot(21)``, ``jit_dot(34)``); a copy or fill
carries its size (``memcpy_details`` ``size:N``), so that it reads back priced from its bytes.

What is laid out comes from plan/ and analysis/: a training step from plan/train/schedule.py, prefill and
decode steps from the serving plan's chosen point, an HLO module's instructions one after another (each its
roofline time per execution, as analysis/hlo/analyze.py sums them), a profile's events as measured with
each op's roofline time beside it. The file is written atomically (report/files.py): nothing half-way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from rooftop.report.files import check_output_path, replacing

if TYPE_CHECKING:
    from rooftop.analysis.compare import ProfileReport
    from rooftop.analysis.hlo.analyze import HloAnalysis
    from rooftop.analysis.trace.events import Trace
    from rooftop.hardware.chip import Chip
    from rooftop.plan.serve.phase import PhaseTime
    from rooftop.plan.serve.sweep import ServingPlan
    from rooftop.plan.train.schedule import StepSchedule

NS_PER_S, NS_PER_US = 1e9, 1000.0
#: the thread names the trace reader gives a role (analysis/trace/classify.py line_role)
OPS, STEPS, MODULES = "XLA Ops", "Steps", "XLA Modules"
#: the process of a PyTorch trace's host activity (read back as host events: not device work)
HOST = "/host:CPU"
#: the most decode steps a serving timeline draws (the model prices every one alike)
MAX_DECODE_STEPS = 2048
#: the most events an HLO timeline draws one per execution (past it, one per instruction)
MAX_HLO_EVENTS = 500_000
#: lane names of a training step (plan/train/schedule.py Slice.lane) as threads, in their order
TRAIN_LANES = {
    "compute": OPS,
    "tp": "collectives over tp",
    "cp": "collectives over cp",
    "fsdp": "collectives over fsdp",
    "ep": "collectives over ep",
    "pp": "pipeline sends (pp)",
    "dp": "collectives over dp",
    "host": "host link (offload)",
    "bubble": "pipeline bubble",
}


def check_timeline_path(path: str) -> None:
    """A one-line error for a path no timeline can be written to (before any work)."""
    check_output_path(path, "timeline file", (".json",), "step.json", flag="--timeline")


@dataclass(frozen=True)
class Event:
    """One complete event: process and thread (lane) names, name, start and duration (s), args."""

    process: str
    thread: str
    name: str
    start_s: float
    dur_s: float
    args: Mapping[str, Any] = field(default_factory=dict)
    track: str = ""  # threads of one name apart (a profile's op lines all named XLA Ops)


def device_process(kind: str, n: int = 0) -> str:
    """``/device:GPU:0``: the process of a device of a chip of ``kind`` (gpu, tpu, cpu)."""
    return f"/device:{kind.upper() if kind in ('gpu', 'tpu', 'cpu') else 'GPU'}:{n}"


def _number(value: Any) -> Any:
    """A JSON value: finite floats as they are, others as text (JSON has no NaN or infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _ns(start_s: float, dur_s: float, track_end_ns: int) -> tuple[int, int]:
    """An event's start and duration in whole nanoseconds, rounded once: its start and its end are each
    rounded (an end that is the next event's start, the same float, rounds alike), the duration is their
    difference, and a start that rounding put before the end of the track's previous event by at most 1 ns
    (floats summed in another order) is moved to it. Trace viewers keep times in integer nanoseconds
    (Perfetto rounds ``ts`` and ``dur`` to them separately and drops a slice that overlaps the one before
    by a nanosecond); written as ``ns / 1000`` microseconds, each reads back exactly."""
    start, end = round(start_s * NS_PER_S), round((start_s + dur_s) * NS_PER_S)
    if track_end_ns - 1 <= start < track_end_ns < end:
        start = track_end_ns
    return start, max(end - start, 0)


def _lines(events: Iterable[Event], metadata: Mapping[str, Any]) -> Iterator[str]:
    """The JSON text, an event a line: the metadata events (process and thread names, their order) first.
    Times in whole nanoseconds (_ns), written as microseconds with at most three decimals."""
    pids: dict[str, int] = {}
    tids: dict[tuple[str, str, str], int] = {}
    ends: dict[int, int] = {}  # per thread, the furthest end so far (ns)
    yield '{"displayTimeUnit": "ns", "otherData": ' + json.dumps({k: _number(v) for k, v in metadata.items()})
    yield ',\n"traceEvents": [\n'
    first = True
    for ev in events:
        pid = pids.get(ev.process)
        out = []
        if pid is None:
            pid = pids[ev.process] = len(pids) + 1
            out += [
                {"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": ev.process}},
                {"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index", "args": {"sort_index": pid}},
            ]
        tid = tids.get((ev.process, ev.thread, ev.track))
        if tid is None:
            tid = tids[(ev.process, ev.thread, ev.track)] = len(tids) + 1
            out += [
                {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": ev.thread}},
                {"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}},
            ]
        args = {k: _number(v) for k, v in ev.args.items()}
        start_ns, dur_ns = _ns(ev.start_s, ev.dur_s, ends.get(tid, -2))
        ends[tid] = max(ends.get(tid, 0), start_ns + dur_ns)
        out.append(
            {
                "ph": "X",
                "pid": pid,
                "tid": tid,
                "name": ev.name,
                "ts": start_ns / NS_PER_US,
                "dur": dur_ns / NS_PER_US,
                "args": args,
            }
        )
        for item in out:
            yield ("" if first else ",\n") + json.dumps(item, allow_nan=False)
            first = False
    yield "\n]}\n"


def write_timeline(path: str, events: Iterable[Event], metadata: Mapping[str, Any]) -> None:
    """Write ``events`` (and ``metadata`` as ``otherData``) to ``path`` as Chrome trace JSON, atomically."""
    check_timeline_path(path)
    with replacing(path, "timeline file") as tmp, open(tmp, "w", encoding="utf-8") as fh:
        _write(fh, events, metadata)


def _write(fh: IO[str], events: Iterable[Event], metadata: Mapping[str, Any]) -> None:
    for text in _lines(events, metadata):
        fh.write(text)


# ---------------------------------------------------------------- training


def train_events(schedule: StepSchedule, kind: str) -> list[Event]:
    """A training step (plan/train/schedule.py): one device process per pipeline stage, a lane per kind
    of work, the step on ``Steps``."""
    out = []
    for s in range(schedule.stages):
        proc = device_process(kind, s)
        out.append(Event(proc, STEPS, "train step", 0.0, schedule.step_time_s, {"step_num": 0, "stage": s}))
    for sl in sorted(schedule.slices, key=lambda x: (x.stage, list(TRAIN_LANES).index(x.lane), x.start_s)):
        args = {"part": sl.part, **sl.args, "predicted_s": sl.dur_s, "stage": sl.stage}
        if sl.lane == "compute":
            args = {"hlo_op": sl.name, **args}
        out.append(Event(device_process(kind, sl.stage), TRAIN_LANES[sl.lane], sl.name, sl.start_s, sl.dur_s, args))
    return out


def train_metadata(schedule: StepSchedule, model: str, chip: str) -> dict[str, Any]:
    r = schedule.result
    return {
        "generator": "rooftop train --timeline",
        "what": "one predicted training step; one process per pipeline stage (a chip of that stage)",
        "model": model,
        "chip": chip,
        "layout": r.parallelism.label(),
        "step_time_s": schedule.step_time_s,
        "model_step_time_s": schedule.model_step_time_s,
        "slices_per": schedule.layers_per_slice,
    }


# ---------------------------------------------------------------- serving


def serve_point(plan: ServingPlan) -> int | None:
    """The point a serving timeline draws: the chosen one, else the highest throughput of the frontier, of
    the points that fit, of all points (None: no point)."""
    if plan.chosen is not None:
        return plan.chosen
    pool = list(plan.frontier) or [i for i, p in enumerate(plan.points) if p.fits] or list(range(len(plan.points)))
    return max(pool, key=lambda i: plan.points[i].tokens_per_s) if pool else None


def _phase_ops(phase: PhaseTime, scale: float) -> list[tuple[str, float, str]]:
    """(name, seconds, bound) of a step's parts: each op group's roofline, the collectives, the launches,
    the scheduling (plan/serve/phase.py), times ``scale``."""
    parts = [(g, t, phase.group_bound[g]) for g, t in phase.group_s.items()]
    parts += [
        ("collectives", phase.collective_exposed_s, "collective"),
        ("kernel launches", phase.launch_s, "overhead"),
        ("scheduling", phase.scheduling_s, "overhead"),
    ]
    return [(n, t * scale, b) for n, t, b in parts if t > 0]


def serve_events(plan: ServingPlan, index: int, kind: str) -> tuple[list[Event], dict[str, Any]]:
    """One replica's cycle at point ``index``: the prefill of its batch's prompts, then its decode steps
    (at most MAX_DECODE_STEPS: each priced alike, at the mean context), on one chip of the replica."""
    point, req = plan.points[index], plan.request
    proc = device_process(kind)
    out: list[Event] = []
    at = 0.0
    steps = min(req.gen_len, MAX_DECODE_STEPS)
    phases = [("prefill", point.prefill, point.prefill_batch_s, 0)]
    phases += [("decode", point.decode, point.step_time_s, n) for n in range(1, steps + 1)]
    for name, phase, length, n in phases:
        label = "prefill" if name == "prefill" else f"decode {n}"
        info = {"step_num": n, "batch": phase.batch, "context_len": phase.context_len, "bound": phase.bound}
        out.append(Event(proc, STEPS, label, at, length, info))
        scale = length / phase.time_s if phase.time_s > 0 else 0.0
        t = at
        for op, seconds, bound in _phase_ops(phase, scale):
            op_name = f"{name} {op}"
            out.append(
                Event(proc, OPS, op_name, t, seconds, {"hlo_op": op_name, "bound": bound, "predicted_s": seconds})
            )
            t += seconds
        at += length
    meta = {
        "generator": "rooftop serve --timeline",
        "what": "one replica serving its batch: the prefill of its prompts, then one decode step per output token",
        "model": req.cfg.name,
        "chip": req.chip.name,
        "layout": point.layout.label(),
        "batch": point.batch,
        "fits": point.fits,
        "ttft_s": point.ttft_s,
        "prefill_batch_s": point.prefill_batch_s,
        "step_time_s": point.step_time_s,
        "decode_steps": req.gen_len,
        "decode_steps_drawn": steps,
    }
    return out, meta


# ---------------------------------------------------------------- HLO


def hlo_events(analysis: HloAnalysis) -> tuple[list[Event], dict[str, Any]]:
    """The module's instructions one after another in program order, each execution its roofline time
    (lower bound / executions); past MAX_HLO_EVENTS executions, or for a fractional count, one event per
    instruction of all its executions. Instructions the roofline prices at zero are left out."""
    proc = device_process(analysis.chip.kind)
    ops = [t for t in analysis.ops if t.estimate.lower_bound_s > 0]
    each = sum(t.op.executions for t in ops) <= MAX_HLO_EVENTS and all(float(t.op.executions).is_integer() for t in ops)
    out: list[Event] = []
    at = 0.0
    for t in ops:
        est, op = t.estimate, t.op
        runs = int(op.executions) if each else 1
        seconds = est.lower_bound_s / runs
        args = {
            "hlo_op": op.name,
            "hlo_module": analysis.module,
            "opcode": op.opcode,
            "bound": est.bound,
            "predicted_s": seconds,
            "executions": op.executions,
            "flops": op.cost.cost.flops / max(op.executions, 1),
        }
        for _ in range(runs):
            out.append(Event(proc, OPS, op.name, at, seconds, args))
            at += seconds
    out.insert(0, Event(proc, MODULES, analysis.module, 0.0, at, {}))
    meta = {
        "generator": "rooftop hlo --timeline",
        "what": "the module's instructions in program order, each at its roofline time (lower bound)",
        "module": analysis.module,
        "chip": analysis.chip.name,
        "predicted_s": at,
        "one_event_per": "execution" if each else "instruction",
        "zero_time_instructions_left_out": len(analysis.ops) - len(ops),
    }
    return out, meta


# ---------------------------------------------------------------- profile


def _lane(ends: list[float], start: float, end: float) -> int:
    """The first lane (of those whose last slice ends at ``ends[k]``) free at ``start``, taken up to ``end``:
    slices on one lane never overlap (a measured line's ops that do, run on several streams, go to more
    lanes, the same thread name on other tracks, so that a trace viewer drops none)."""
    k = next((i for i, e in enumerate(ends) if e <= start), len(ends))
    ends[k : k + 1] = [end]
    return k


def _host_runs(
    ev: Any, launches: Mapping[int, tuple[int, int]], labels: Mapping[int, str], t0: float
) -> Iterator[Event]:
    """The host side of the PyTorch op runs that launched one kernel name more than once: each op's span
    (named as its kernels' ``hlo_op``) and its kernels' launches (their ``correlation_id``), on a host
    process, so that a reader takes the kernels for one run of the op (analysis/trace/ops.py ``_SameRun``)
    and not for one run per repeated name."""
    name, start, dur = ev.column("name"), ev.column("start_s"), ev.column("duration_s")
    spans: dict[int, str] = {}
    for kernel, (op, launch) in launches.items():
        spans.setdefault(op, labels[kernel])
        yield Event(HOST, "launches", name[launch], start[launch] - t0, dur[launch], {"correlation_id": launch})
    for op, label in spans.items():
        yield Event(HOST, "ops", label, start[op] - t0, dur[op], {})


def profile_events(trace: Trace, report: ProfileReport, chip: Chip) -> tuple[Iterator[Event], dict[str, Any]]:
    """The trace's ops, kernels, copies, modules and steps as measured (times from the trace's first event), each op
    with its roofline time per execution in ``predicted_s`` (a PyTorch trace's kernels: their aten op's, in
    ``op``); a process ``predicted <device>`` (not read back as device work) holds each execution's roofline
    time from where the execution starts."""
    from rooftop.analysis.copies import copy_sizes
    from rooftop.analysis.trace.ops import executions

    predicted = {(o.module, o.name): o.lower_bound_s for o in report.ops}
    labels: dict[int, str] = {}
    launches: dict[int, tuple[int, int]] = {}  # kernel row -> (op row, launch row): see host_runs
    if trace.format == "kineto":
        from rooftop.analysis.torch.kineto import kernel_labels

        labels, launches = kernel_labels(trace, chip)
    ev = trace.events
    t0 = min(ev.column("start_s")) if len(ev) else 0.0
    copies = [row for row, kind in enumerate(ev.column("kind")) if kind == "memcpy"]
    # each copy's size, as the report priced it (read back, its roofline is the same)
    copy_bytes = dict(zip(copies, copy_sizes(trace, copies), strict=True))

    def lower_of(row: int, module: str | None, op: str) -> tuple[str | None, float | None]:
        label = labels.get(row)
        if label is not None:
            return label, predicted.get((None, label))
        return None, predicted.get((module, op))

    measured: dict[tuple[str, str], list[float]] = {}  # per device and line: where each of its lanes ends

    def events() -> Iterator[Event]:
        cols = [
            ev.column(c)
            for c in ("device", "line", "name", "module", "instruction", "start_s", "duration_s", "kind", "step")
        ]
        for row, (device, line, name, module, inst, start, dur, kind, step) in enumerate(zip(*cols, strict=True)):
            if kind == "step":
                thread = STEPS if device.startswith("/device:") else line
                yield Event(device, thread, name, start - t0, dur, {"step_num": step} if step is not None else {})
                continue
            if kind == "module" and device.startswith("/device:"):  # steps when the profile marks none
                yield Event(device, MODULES, name, start - t0, dur, {})
                continue
            if kind not in ("op", "kernel", "memcpy"):
                continue
            args: dict[str, Any] = {"hlo_op": inst or name} if inst is not None or kind == "op" else {}
            if module is not None:
                args["hlo_module"] = module
            if step is not None:
                args["step_num"] = step
            if kind == "memcpy":
                size = copy_bytes[row]
                args["memcpy_details"] = "" if size is None else f"size:{size}"
            if row in launches:
                args["correlation_id"] = launches[row][1]
            label, lower = lower_of(row, module, inst or name)
            if label is not None:  # a PyTorch kernel: its aten op names it, so that it reads back as that op
                args["op"] = args["hlo_op"] = label
            args["measured_s"] = dur
            if lower is not None:
                args["predicted_s"] = lower
            track = _lane(measured.setdefault((device, line), []), start, start + dur)
            thread = OPS if kind == "op" else line
            yield Event(device, thread, name, start - t0, dur, args, f"{line} ({track + 1})" if track else line)
        yield from _host_runs(ev, launches, labels, t0)
        runs = executions(trace)
        lanes: dict[tuple[str, str], list[float]] = {}  # per device and line: where each of its lanes ends
        device_col, line_col, module_col = ev.column("device"), ev.column("line"), ev.column("module")
        for row, start, end in zip(runs.row.tolist(), runs.start_s.tolist(), runs.end_s.tolist(), strict=True):
            name, inst = ev.column("name")[row], ev.column("instruction")[row]
            label, lower = lower_of(row, module_col[row], inst or name)
            if lower is None or lower <= 0:
                continue
            k = _lane(lanes.setdefault((device_col[row], line_col[row]), []), start, start + lower)
            thread = f"roofline of {line_col[row]}" + (f" ({k + 1})" if k else "")
            yield Event(
                f"predicted {device_col[row]}",
                thread,
                label or inst or name,
                start - t0,
                lower,
                {"predicted_s": lower, "measured_s": end - start},
            )

    meta = {
        "generator": "rooftop profile --timeline",
        "what": "the profile's ops as measured; predicted_s: the op's roofline time per execution, also drawn on "
        "the 'predicted' processes",
        "source": report.source,
        "chip": report.chip,
        "time_origin_s": t0,
    }
    return events(), meta
