"""Steps of a PyTorch (Kineto) trace and the batch lengths its engine annotates.

Steps: ``ProfilerStep#N`` markers when the trace has them; else an engine's step annotations
(``user_annotation`` spans: vLLM's ``execute_<tokens>_context_..._generation_...``, SGLang's
``step[...]``), each step running from its annotation's start to the next one's (the last to the end of
device activity, so the device work a step launched is inside it); else the whole span of device activity
as one step. Each step's busy, communication, overlap and idle time then come from the device intervals
as for XPlane profiles (analysis/intervals.py).

Lengths: an attention op over a paged KV cache records only the new tokens' q/k/v; the step annotation
it ran in gives the batch's summed query and key lengths (:func:`rooftop.analysis.torch.families.seq_stats`)."""

from __future__ import annotations

import re
from typing import Any, cast

import numpy as np

from rooftop.analysis.torch.engine_ops import op_family
from rooftop.analysis.torch.families import SeqStats, seq_stats
from rooftop.analysis.trace.events import EventTable, Trace
from rooftop.analysis.trace.ops import Executions, column_codes, floats
from rooftop.analysis.trace.steps import Step, step_marks, steps_of
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

#: an engine's step annotation: vLLM's (and profilers' that follow it) and SGLang's
ENGINE_STEP = re.compile(r"^(execute_[0-9]+_context_|step\[)")


def kineto_steps(trace: Trace, execs: Executions) -> tuple[list[Step], Note]:
    """The steps (module docstring) and, when they are not ProfilerStep markers, a note of how found."""
    marks = step_marks(trace)
    if marks:
        return steps_of(marks, []), ""
    if not len(execs):
        return [], ""
    last = float(np.max(execs.end_s))
    ev = trace.events
    code, values = column_codes(ev, "name")
    found = [c for c, v in enumerate(values) if ENGINE_STEP.match(v)]
    rows = np.flatnonzero(np.isin(code, found))
    start, dur = floats(ev.column("start_s"))[rows], floats(ev.column("duration_s"))[rows]
    starts = _outermost(start.tolist(), (start + dur).tolist(), last)
    if starts:
        ends = [*starts[1:], last]
        steps = [Step(k, lo, max(hi, lo)) for k, (lo, hi) in enumerate(zip(starts, ends, strict=True))]
        return steps, Reason.of(ReasonCode.STEPS_FROM_ENGINE, steps=len(steps))
    first = float(np.min(execs.start_s))
    return [Step(0, first, last)], Reason(ReasonCode.STEPS_ONE_SPAN)


def _outermost(starts: list[float], ends: list[float], last: float) -> list[float]:
    """The starts of the annotations that no earlier one holds (an engine's annotations of one step nest or
    overlap: SGLang's ``step[...]`` around the ``execute_...`` one), before ``last``."""
    out: list[float] = []
    reach = -np.inf
    for lo, hi in sorted(zip(starts, ends, strict=True)):
        if lo >= last:
            break
        if lo >= reach:
            out.append(lo)
        reach = max(reach, hi)
    return out


def step_lengths(
    ev: EventTable, ops: np.ndarray, names: Any, op_names: np.ndarray
) -> tuple[np.ndarray, list[SeqStats]]:
    """For each op of ``ops`` whose family is attention, the step annotation it ran in that gives the
    batch's query and key lengths (an index into the returned list; -1 for none or another family)."""
    none = np.full(len(ops), -1, np.int64)
    attn = {c for c in np.unique(op_names).tolist() if is_attention(names[int(ops[op_names == c][0])])}
    if not attn:
        return none, []
    at, stats = annotated_at(ev, floats(ev.column("start_s"))[ops])
    return np.where(np.isin(op_names, list(attn)), at, -1), stats


def annotated_at(ev: EventTable, times: np.ndarray) -> tuple[np.ndarray, list[SeqStats]]:
    """For each time, the step annotation with lengths that holds it (an index into the returned list, -1
    for none)."""
    code, values = column_codes(ev, "name")  # each distinct name read once
    parsed = {c: seq_stats(v) for c, v in enumerate(values) if v.startswith("execute_")}
    found = [c for c, v in parsed.items() if v is not None]
    start, dur = ev.column("start_s"), ev.column("duration_s")
    spans = [(float(start[r]), float(start[r]) + float(dur[r]), cast(SeqStats, parsed[int(code[r])]))
             for r in np.flatnonzero(np.isin(code, found)).tolist()]  # fmt: skip
    if not spans:
        return np.full(len(times), -1, np.int64), []
    spans.sort(key=lambda x: x[0])
    starts = np.array([x[0] for x in spans])
    ends = np.array([x[1] for x in spans])
    at = np.searchsorted(starts, times, "right") - 1
    ok = at >= 0
    ok[ok] = times[ok] <= ends[at[ok]]
    return np.where(ok, at, -1), [x[2] for x in spans]


def is_attention(name: str) -> bool:
    """Whether an op reads its step's lengths: attention, and linear attention / SSM scans (their sequences)."""
    return op_family(name) in ("attention", "scan")
