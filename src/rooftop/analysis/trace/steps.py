"""Steps of a loaded Trace: from its step markers (a ``Steps`` line, ``StepTraceAnnotation`` /
``step_num``, ``ProfilerStep#N``), merged across devices by step number, or without any from the
executions of the main HLO module (:func:`detect_steps`); the same steps from the markers and module
executions of many hosts put together (:func:`steps_of`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rooftop.analysis.trace.events import Trace
from rooftop.analysis.trace.ops import column_codes


@dataclass(frozen=True)
class Step:
    index: int
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


StepMark = tuple[float, float, int | None]
"""(start_s, duration_s, step number or None) of one step marker"""


def detect_steps(trace: Trace) -> list[Step]:
    """Steps from step markers (a ``Steps`` line, ``StepTraceAnnotation`` / ``step_num``, ``ProfilerStep#N``),
    merged across devices by step number; else the executions of the main HLO module (the module with
    the most busy time), the k-th execution on every device forming step k."""
    marks = step_marks(trace)
    return steps_of(marks, module_executions(trace) if not marks else [])


def step_marks(trace: Trace) -> list[StepMark]:
    """The step markers of ``trace``, in table order (found by the kind column's codes)."""
    kind, kinds = column_codes(trace.events, "kind")
    if "step" not in kinds:
        return []
    step, start, dur = (trace.events.column(c) for c in ("step", "start_s", "duration_s"))
    return [(start[i], dur[i], step[i]) for i in np.flatnonzero(kind == kinds.index("step")).tolist()]


def steps_of(marks: Sequence[StepMark], modules: Sequence[tuple[str, str, float, float]]) -> list[Step]:
    """:func:`detect_steps` from the markers (in table order) or, without any, from the module executions
    (:func:`module_executions`, sorted): the same steps whether they come from one trace or from the
    markers and executions of many hosts put together (their tables in order)."""
    if marks:
        spans: dict[int, list[float]] = {}
        for n, (lo, dur, number) in enumerate(sorted(marks, key=lambda m: m[0])):
            index = number if number is not None else n
            first, last = spans.get(index, [lo, lo + dur])
            spans[index] = [min(first, lo), max(last, lo + dur)]
        return [Step(k, lo, hi) for k, (lo, hi) in sorted(spans.items())]
    return _module_steps(modules)


def _module_steps(execs: Sequence[tuple[str, str, float, float]]) -> list[Step]:
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
    names = ("module", "device", "start_s", "duration_s", "instruction", "name", "args")
    module, device, start, dur, instruction, name, args = (trace.events.column(n) for n in names)
    kind, kinds = column_codes(trace.events, "kind")  # the rows of each kind and with a module, by the codes
    named, modules = column_codes(trace.events, "module")
    named = np.array([bool(m) for m in modules], bool)[named]
    rows = np.flatnonzero(named & (kind == kinds.index("module"))).tolist() if "module" in kinds else []
    if rows:
        return sorted((module[i], device[i], start[i], start[i] + dur[i]) for i in rows)
    ops = np.flatnonzero(named & np.isin(kind, [i for i, k in enumerate(kinds) if k in ("op", "kernel")])).tolist()
    del kind, named
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
