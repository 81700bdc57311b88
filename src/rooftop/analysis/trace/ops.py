"""Op executions, per-op groups and steps of a loaded Trace (kept apart from the loaders)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from types import MappingProxyType
from typing import NamedTuple

from rooftop.analysis.gcpause import paused_gc
from rooftop.analysis.trace.events import EventTable, Trace, natural_key


class OpExecution(NamedTuple):
    """One execution of one op on one device: the kernels (or the single op event) it ran as."""

    device: str
    module: str | None
    instruction: str | None
    name: str
    start_s: float
    end_s: float
    busy_s: float
    events: int
    kernel_names: tuple[str, ...]
    step: int | None


@dataclass(frozen=True)
class OpGroup:
    """Statistics of one op over its executions; ``total_s`` sums the busy time of its kernels."""

    module: str | None
    instruction: str | None
    name: str
    count: int
    events: int
    total_s: float
    mean_s: float
    min_s: float
    max_s: float
    per_device_s: Mapping[str, float]
    per_device_count: Mapping[str, int]
    kernel_names: tuple[str, ...]


@dataclass(frozen=True)
class Step:
    index: int
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def op_executions(trace: Trace, kinds: Sequence[str] = ("op", "kernel"), *, by_time: bool = True) -> list[OpExecution]:
    """Op events grouped per (device, module, instruction, execution).

    An ``op`` event is one execution. Consecutive ``kernel`` events on the same device and line with the
    same (module, instruction) are one execution of that instruction (a convolution running as an im2col
    kernel and a GEMM kernel) until a kernel name repeats (the program run again); kernels with no HLO
    instruction group by kernel name, one per event.
    Ordered by start time (then device, name), or by (device, line, start) with ``by_time=False``.
    """
    with paused_gc():
        return _op_executions(trace, kinds, by_time)


def _op_executions(trace: Trace, kinds: Sequence[str], by_time: bool) -> list[OpExecution]:
    ev = trace.events
    device, line, kind = ev.column("device"), ev.column("line"), ev.column("kind")
    streams: dict[tuple[str, str], list[int]] = {}
    for i, (k, d, ln) in enumerate(zip(kind, device, line, strict=True)):
        if k in kinds:
            rows = streams.get((d, ln))
            if rows is None:
                streams[(d, ln)] = [i]
            else:
                rows.append(i)
    by_name, by_start = ev.column("name").__getitem__, ev.column("start_s").__getitem__
    out: list[OpExecution] = []
    singles: dict[str, tuple[str]] = {}
    for key in sorted(streams):  # (device, line, start, name), ties in row order: two stable sorts
        rows = streams.pop(key)
        rows.sort(key=by_name)
        rows.sort(key=by_start)
        _stream_executions(ev, key[0], rows, out, singles)
    if by_time:
        _sort_by_time(out)
    return out


def _stream_executions(
    ev: EventTable, device: str, rows: list[int], out: list[OpExecution], singles: dict[str, tuple[str]]
) -> None:
    """Append the executions of one (device, line)'s op rows, in time order: consecutive kernels of the
    same (module, instruction) are one execution (an op with no instruction is keyed by its name), until a
    kernel name repeats: the same program run again back to back is a new execution."""
    name, module, instruction, start, duration, step, kind = (
        ev.column(c) for c in ("name", "module", "instruction", "start_s", "duration_s", "step", "kind")
    )
    open_ = False
    prev_mod = prev_what = mod0 = inst0 = None
    names: tuple[str, ...] = ()
    more: dict[str, None] | None = None  # the kernel names of an execution of several, in order (O(1) each)
    name0, start0, end, busy, events, step0 = "", 0.0, 0.0, 0.0, 0, None
    for i in rows:
        inst, nm, mod, dur = instruction[i], name[i], module[i], duration[i]
        what = inst if inst is not None else nm
        if (open_ and inst is not None and what == prev_what and mod == prev_mod and kind[i] == "kernel"
                and (nm != names[0] if more is None else nm not in more)):  # fmt: skip
            if more is None:
                more = dict.fromkeys(names)
            more[nm] = None
            end = max(end, start[i] + dur)
            busy = busy + dur
            events += 1
        else:
            if open_:
                kernels = names if more is None else tuple(more)
                out.append(OpExecution(device, mod0, inst0, name0, start0, end, busy, events, kernels, step0))
            single = singles.get(nm)
            if single is None:
                single = singles[nm] = (nm,)
            names, more = single, None
            mod0, inst0, name0, start0, step0 = mod, inst, inst or nm, start[i], step[i]
            end, busy, events, open_ = start0 + dur, dur, 1, True
        prev_mod, prev_what = mod, what
    if open_:
        kernels = names if more is None else tuple(more)
        out.append(OpExecution(device, mod0, inst0, name0, start0, end, busy, events, kernels, step0))


def _sort_by_time(out: list[OpExecution]) -> None:
    """Order by (start, natural device order, name), stably: sorted by start (the streams are runs already
    in time order), then each run of equal starts by (device, name)."""
    start = itemgetter(OpExecution._fields.index("start_s"))
    out.sort(key=start)
    starts = list(map(start, out))
    done, n = 0, len(out)
    for k in [k for k in range(1, n) if starts[k] == starts[k - 1]]:
        if k < done:
            continue
        j = k + 1
        while j < n and starts[j] == starts[k]:
            j += 1
        out[k - 1 : j] = sorted(out[k - 1 : j], key=lambda e: (natural_key(e.device), e.name))
        done = j


def group_ops(trace: Trace, kinds: Sequence[str] = ("op", "kernel")) -> list[OpGroup]:
    """Per op (module, instruction — or kernel name when there is no HLO instruction): executions, total,
    mean, min, max and per-device busy seconds. Sorted by total time, then by name."""
    with paused_gc():
        return _summarise(op_executions(trace, kinds, by_time=False))


def _summarise(executions: list[OpExecution]) -> list[OpGroup]:
    acc: dict[tuple[str | None, str | None, str], list[OpExecution]] = defaultdict(list)
    for ex in executions:
        acc[(ex.module, ex.instruction, ex.name)].append(ex)
    groups = []
    for (module, inst, name), exs in acc.items():
        per_dev: dict[str, float] = defaultdict(float)
        per_count: dict[str, int] = defaultdict(int)
        for ex in exs:
            per_dev[ex.device] += ex.busy_s
            per_count[ex.device] += 1
        busy = [ex.busy_s for ex in exs]
        total = sum(busy)
        devs = sorted(per_dev, key=natural_key)
        kernels = tuple(sorted({k for ex in exs for k in ex.kernel_names}))
        groups.append(
            OpGroup(
                module,
                inst,
                name,
                len(exs),
                sum(ex.events for ex in exs),
                total,
                total / len(exs),
                min(busy),
                max(busy),
                MappingProxyType({d: per_dev[d] for d in devs}),
                MappingProxyType({d: per_count[d] for d in devs}),
                kernels,
            )
        )
    groups.sort(key=lambda g: (-g.total_s, g.module or "", g.name))
    return groups


def detect_steps(trace: Trace) -> list[Step]:
    """Steps from step markers (a ``Steps`` line, ``StepTraceAnnotation`` / ``step_num``, ``ProfilerStep#N``),
    merged across devices by step number; else the executions of the main HLO module (the module with
    the most busy time), the k-th execution on every device forming step k."""
    kind, step = trace.events.column("kind"), trace.events.column("step")
    start, dur = trace.events.column("start_s"), trace.events.column("duration_s")
    marks = [i for i, k in enumerate(kind) if k == "step"]
    if marks:
        spans: dict[int, list[float]] = {}
        numbered = sorted(marks, key=lambda i: start[i])
        for n, i in enumerate(numbered):
            index = step[i] if step[i] is not None else n
            lo, hi = spans.get(index, [start[i], start[i] + dur[i]])
            spans[index] = [min(lo, start[i]), max(hi, start[i] + dur[i])]
        return [Step(k, lo, hi) for k, (lo, hi) in sorted(spans.items())]
    return _module_steps(trace)


def _module_steps(trace: Trace) -> list[Step]:
    execs = module_executions(trace)
    if not execs:
        return []
    busy: dict[str, float] = defaultdict(float)
    for module, _device, lo, hi in execs:
        busy[module] += hi - lo
    main = min(busy, key=lambda m: (-busy[m], m))
    per_device: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for module, device, lo, hi in execs:
        if module == main:
            per_device[device].append((lo, hi))
    runs = [sorted(v) for v in per_device.values()]
    longest = max(len(v) for v in runs)
    steps = []
    for k in range(longest):
        spans = [v[k] for v in runs if len(v) > k]
        steps.append(Step(k, min(s[0] for s in spans), max(s[1] for s in spans)))
    return steps


def module_executions(trace: Trace) -> list[tuple[str, str, float, float]]:
    """(module, device, start_s, end_s) per module execution: ``module`` events when the profile has them;
    else op/kernel events grouped by ``run_id`` (XLA:CPU), or split where the module's first instruction
    comes round again (GPU kernels carry no run id)."""
    names = ("kind", "module", "device", "start_s", "duration_s", "instruction", "name", "args")
    kind, module, device, start, dur, instruction, name, args = (trace.events.column(n) for n in names)
    rows = [i for i, k in enumerate(kind) if k == "module" and module[i]]
    if rows:
        return sorted((module[i], device[i], start[i], start[i] + dur[i]) for i in rows)
    ops = [i for i, k in enumerate(kind) if k in ("op", "kernel") and module[i]]
    ops.sort(key=lambda i: (device[i], start[i]))
    spans: dict[tuple[str, str, str], tuple[float, float]] = {}
    first: dict[tuple[str, str], str] = {}
    last: dict[tuple[str, str], str] = {}
    counter: dict[tuple[str, str], int] = defaultdict(int)
    for i in ops:
        dm, what = (module[i], device[i]), instruction[i] or name[i]
        run = args[i].get("run_id")
        if run is None:
            if what == first.setdefault(dm, what) and last.get(dm, what) != what:
                counter[dm] += 1
            run = counter[dm]
        last[dm] = what
        key = (*dm, str(run))
        lo, hi = spans.get(key, (start[i], start[i] + dur[i]))
        spans[key] = (min(lo, start[i]), max(hi, start[i] + dur[i]))
    return sorted((m, d, lo, hi) for (m, d, _run), (lo, hi) in spans.items())
