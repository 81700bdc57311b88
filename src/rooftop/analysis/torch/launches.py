"""Kernels of a PyTorch (Kineto) trace joined with the aten ops that launched them (:func:`launching_ops`):
a kernel's launch is the runtime event (``cudaLaunchKernel``, ``hipLaunchKernel``, ...) of the same
``correlation``, and its op the innermost ``cpu_op`` with ``Input Dims`` on the launching thread whose span
holds the launch.

A trace of a million kernels is read column-wise: a column's values are gathered for a set of rows through
an object array (:func:`gathered`: a C-level copy and a fancy index, not a call per row), the args are read
once per distinct common part (the loader shares it between events), and the innermost op of every launch
of a thread is looked up at once (:func:`innermost`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from rooftop.analysis.trace.events import EventTable, Trace
from rooftop.analysis.trace.ops import column_codes, first_codes, floats
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
#: why a kernel replayed from a CUDA/HIP graph (launched by cudaGraphLaunch / hipGraphLaunch) has no op
GRAPH_REPLAY = Reason(ReasonCode.KERNEL_GRAPH_REPLAYED)
#: why a kernel has no op: one reason for all such kernels, so that they group by kernel name (a
#: correlation id in it made one report row per kernel: 1.2M rows for a trace of tiny kernels)
_NO_LAUNCH = Reason(ReasonCode.KERNEL_NO_LAUNCH)
_NO_OP = Reason(ReasonCode.KERNEL_NO_INPUT_DIMS)
#: why a kernel has no op, by index (:attr:`Launches.why`)
REASONS: tuple[Note, ...] = ("", _NO_LAUNCH, GRAPH_REPLAY, _NO_OP)
#: steps from one span to the previous one that ends later before a thread is swept instead (a deep nest)
_MAX_HOPS = 64


class Launches(Mapping[int, tuple[int | None, Note]]):
    """kernel row -> (row of the op that launched it, or None, and why not), as columns: ``kernels`` (rows,
    ascending), ``ops`` (-1 for none) and ``why`` (an index into :data:`REASONS`); ``shapes``: whether any
    cpu_op of the trace carries Input Dims."""

    def __init__(
        self, kernels: np.ndarray, ops: np.ndarray, why: np.ndarray, shapes: bool, launch: np.ndarray | None = None
    ) -> None:
        self.kernels, self.ops, self.why, self.shapes = kernels, ops, why, shapes
        #: the row of each kernel's launch event (-1: none): a graph replay's kernels share their graph launch
        self.launch = launch if launch is not None else np.full(len(kernels), -1, np.int64)

    def __getitem__(self, row: int) -> tuple[int | None, Note]:
        k = int(np.searchsorted(self.kernels, row))
        if k == len(self.kernels) or self.kernels[k] != row:
            raise KeyError(row)
        op = int(self.ops[k])
        return (None if op < 0 else op), REASONS[self.why[k]]

    def __iter__(self) -> Iterator[int]:
        return iter(self.kernels.tolist())

    def __len__(self) -> int:
        return len(self.kernels)


def objects(column: Sequence[Any]) -> np.ndarray:
    """A column as an object array (8 bytes a row, made by one C-level copy): its values at a set of rows are
    then one fancy index away (a call per row, through a generator of the row numbers, took 3x as long)."""
    return np.fromiter(column, object, len(column))


def gathered(column: Sequence[Any], rows: np.ndarray) -> list[Any]:
    """The values of ``column`` at ``rows``: through :func:`objects` for many rows, a look-up each for a few."""
    if len(rows) * 8 < len(column):
        return list(map(column.__getitem__, rows.tolist()))
    values: list[Any] = objects(column)[rows].tolist()
    return values


def launching_ops(trace: Trace, of: str = "kernel") -> Launches:
    """kernel row -> (row of the innermost ``cpu_op`` with ``Input Dims`` that launched it, or None, and
    why not). A kernel's launch is the runtime event (``cudaLaunchKernel``, ``hipLaunchKernel``, ...) of
    the same ``correlation``; the op is the innermost such cpu_op on the launching thread whose span holds
    the launch. Without a launch event, a cpu_op of the kernel's ``External id`` (older traces). ``of``:
    the kind of device rows joined (``"memcpy"``: the copies and fills, launched by ``cudaMemcpyAsync``
    and kin)."""
    ev = trace.events
    kind, kinds = column_codes(ev, "kind")
    args = ev.column("args")
    corr = objects(ev.column("correlation"))
    none = np.zeros(0, np.int64)
    other = np.flatnonzero(kind == kinds.index("other")) if "other" in kinds else none
    kernels = np.flatnonzero(kind == kinds.index(of)) if of in kinds else none
    del kind
    ops, launch = _shaped_ops_and_launches(ev, other, corr)
    at = np.fromiter(map(launch.get, corr[kernels].tolist(), itertools.repeat(-1)), np.int64, len(kernels))
    del launch, corr
    out = np.full(len(kernels), -1, np.int64)
    why = (at < 0).astype(np.int8)  # 1: no launch
    external: dict[Any, int] | None = None
    missing = np.flatnonzero(at < 0).tolist() if len(ops) else []
    for k in missing:  # older traces: the cpu_op of the kernel's External id
        ext = _link_id(args[kernels[k]].get("External id"))
        if ext is None:
            continue
        if external is None:
            external = {}
            for i in ops.tolist():
                own = _link_id(args[i].get("External id"))
                if own is not None:
                    external.setdefault(own, i)
        if ext in external:
            out[k], why[k] = external[ext], 0
    _enclosing(ev, ops, kernels, at, out, why)
    return Launches(kernels, out, why, bool(len(ops)), at)


def _shaped_ops_and_launches(ev: EventTable, other: np.ndarray, corr: np.ndarray) -> tuple[np.ndarray, dict[Any, int]]:
    """The rows of the cpu_ops with Input Dims, and the first runtime launch row of each correlation id
    (``corr``: the column as :func:`objects`); the args are read once per distinct common part (the loader
    shares it between events)."""
    args = ev.column("args")
    rows = gathered(args, other)
    common = np.fromiter(map(id, map(getattr, rows, itertools.repeat("shared"), rows)), np.int64, len(other))
    del rows  # each one's common part (getattr(a, "shared", a), in C), by its identity
    code, first = first_codes(common)
    del common
    what = []  # per distinct args: 1 a shaped op, 2 a launch, 0 neither
    for i in other[first].tolist():
        a = args[i]
        cat = a.get("cat")
        what.append(1 if cat == "cpu_op" and "Input Dims" in a else 2 if cat in _LAUNCH_CATS else 0)
    what_of = np.array(what, np.int8)[code] if len(what) else np.zeros(0, np.int8)
    del code
    ops = other[what_of == 1]
    runtime = other[what_of == 2]
    launch = dict(zip(corr[runtime[::-1]].tolist(), runtime[::-1].tolist(), strict=True))  # the first of each
    launch.pop(None, None)
    return ops, launch


def _enclosing(ev: EventTable, ops: np.ndarray, kernels: np.ndarray, at: np.ndarray, out: np.ndarray,
               why: np.ndarray) -> None:  # fmt: skip
    """For each kernel launched at row ``at`` (>= 0), the innermost shaped op on the launching thread whose
    span holds the launch time (:func:`innermost`), into ``out``, or why there is none into ``why``: per
    thread, the ops sorted by (start, longest first)."""
    asked = np.flatnonzero(at >= 0)
    if not len(asked):
        return
    start, dur = floats(ev.column("start_s")), floats(ev.column("duration_s"))
    device, _ = column_codes(ev, "device")
    line, lines = column_codes(ev, "line")
    thread = device.astype(np.int64) * len(lines) + line
    del device, line
    launch = at[asked]
    order = np.argsort(thread[launch], kind="stable")
    asked, launch = asked[order], launch[order]
    asked_thread = thread[launch]
    spans = ops[np.lexsort((-dur[ops], start[ops], thread[ops]))]
    span_thread = thread[spans]
    del thread
    names = ev.column("name")
    for t in np.unique(asked_thread).tolist():
        lo, hi = np.searchsorted(asked_thread, [t, t + 1]).tolist()
        first, last = np.searchsorted(span_thread, [t, t + 1]).tolist()
        mine = spans[first:last]
        found = innermost(start[mine], start[mine] + dur[mine], start[launch[lo:hi]])
        mine_asked, hit = asked[lo:hi], found >= 0
        out[mine_asked[hit]] = mine[found[hit]]
        missed = np.flatnonzero(~hit)
        if len(missed):  # no op holds the launch: a graph replay, or an op without shapes
            why[mine_asked[missed]] = [2 if "GraphLaunch" in names[r] else 3 for r in launch[lo:hi][missed].tolist()]


def innermost(starts: np.ndarray, ends: np.ndarray, times: np.ndarray) -> np.ndarray:
    """For each time, the innermost span that holds it (an index into the spans, sorted by start, longest
    first), or -1: the last span in that order that has begun by then and not yet ended (start <= t <= end).

    What :func:`sweep` finds, looked up: the last span begun by then (a binary search) holds the time, or
    else the last one before it that ends later (:func:`later_ends`: every span between ends earlier, so
    none of them holds it), and so on; a time that takes more than :data:`_MAX_HOPS` such steps (spans
    nested that deep) has the spans swept instead."""
    found = np.searchsorted(starts, times, "right") - 1
    begun = found >= 0
    miss = np.flatnonzero(begun)
    miss = miss[ends[found[miss]] < times[miss]]
    found[~begun] = -1
    if not len(miss):
        return found
    if np.all(ends[1:] >= ends[:-1]):  # spans that do not nest: none ends later than one after it
        later = np.full(len(ends), -1, np.int64)
    else:
        later = np.array(later_ends(ends.tolist()), np.int64)
    at, t = later[found[miss]], times[miss]
    for _ in range(_MAX_HOPS):
        done = (at < 0) | (ends[at] >= t)  # (ends[-1] is read for at < 0, and not used)
        found[miss[done]] = at[done]
        keep = ~done
        if not keep.any():
            return found
        miss, at, t = miss[keep], later[at[keep]], t[keep]
    order = np.argsort(times, kind="stable")
    found[order] = sweep(starts.tolist(), ends.tolist(), times[order].tolist())
    return found


def later_ends(ends: list[float]) -> list[int]:
    """For each span, the last span before it that ends later (-1 where none does)."""
    out: list[int] = []
    stack: list[int] = []
    for j, end in enumerate(ends):
        while stack and ends[stack[-1]] <= end:
            stack.pop()
        out.append(stack[-1] if stack else -1)
        stack.append(j)
    return out


def sweep(starts: list[float], ends: list[float], times: list[float]) -> list[int]:
    """For each time (ascending), the innermost span that holds it (an index into the spans, sorted by
    start, longest first), or -1: spans are stacked as they start and dropped once they have ended."""
    stack: list[int] = []
    out = []
    j, n = 0, len(starts)
    for t in times:
        while j < n and starts[j] <= t:
            while stack and ends[stack[-1]] < starts[j]:
                stack.pop()
            stack.append(j)
            j += 1
        while stack and ends[stack[-1]] < t:
            stack.pop()
        out.append(stack[-1] if stack else -1)
    return out


def _link_id(value: Any) -> int | str | None:
    """An ``External id`` that can link a kernel to its op: an int or a string (None for a list, an object,
    a float or a boolean, which link nothing)."""
    return value if value.__class__ is int or value.__class__ is str else None
