"""Op executions and per-op groups of a loaded Trace (kept apart from the loaders; its steps: steps.py).

Executions are found column-wise (:func:`executions`: numpy sorts and comparisons over the whole table, a
Python loop only over the kernels that continue an execution) and kept as columns (:class:`Executions`, about
40 bytes each), so that a million kernels cost tens of megabytes, not the hundreds their objects would."""

from __future__ import annotations

import functools
import operator
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

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


def codes(column: Sequence[Any]) -> tuple[np.ndarray, list[Any]]:
    """Each value's index among the column's distinct values (equal values, one index), and those values."""
    values = list(set(column))
    if len(values) == 1:  # one value (a Kineto trace's modules and instructions: all None)
        return np.zeros(len(column), np.int32), values
    index = {v: i for i, v in enumerate(values)}
    return np.fromiter(map(index.__getitem__, column), np.int32, len(column)), values


def column_codes(table: EventTable, name: str) -> tuple[np.ndarray, list[Any]]:
    """:func:`codes` of a column of ``table`` (a new int32 array each time, the values a new list), worked
    out once per table and kept in the narrowest integer type that holds them."""
    code, values = table.derived(("codes", name), lambda: _narrow(codes(table.column(name))))
    return code.astype(np.int32), list(values)


def _narrow(coded: tuple[np.ndarray, list[Any]]) -> tuple[np.ndarray, tuple[Any, ...]]:
    code, values = coded
    return _small(code, len(values)), tuple(values)


def ranks(values: Sequence[Any], key: Callable[[Any], Any] | None = None) -> np.ndarray:
    """Each value's rank in sorted order (by ``key``); equal values, one rank."""
    keys = [key(v) for v in values] if key else values
    out = np.empty(len(values), np.int32)
    rank, last = -1, None
    for n, i in enumerate(sorted(range(len(values)), key=keys.__getitem__)):
        if n == 0 or keys[i] != last:
            rank, last = rank + 1, keys[i]
        out[i] = rank
    return out


def floats(column: Sequence[Any]) -> np.ndarray:
    """A time column as float64 (the table's own buffer when it is an ``array('d')``)."""
    if isinstance(column, array) and column.typecode == "d":
        return np.frombuffer(column, np.float64)
    return np.asarray(column, float)


def each(rows: np.ndarray, chunk: int = 1 << 16) -> Iterator[int]:
    """The values of an index array as ints, a chunk at a time (a list of a million ints weighs 36 MB)."""
    for i in range(0, len(rows), chunk):
        yield from rows[i : i + chunk].tolist()


def _small(codes: np.ndarray, n: int) -> np.ndarray:
    """``codes`` (0 <= code < n) in the narrowest integer type that holds them (sorts of int16 are radix sorts)."""
    return codes.astype(np.int16 if n <= 1 << 15 else np.int32 if n <= 1 << 31 else np.int64, copy=False)


def first_codes(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each key's index among the distinct keys, numbered in order of first appearance, and where each
    distinct key first appears. Keys within a narrow range are sorted as 16-bit ints (a radix sort), others
    as they are."""
    n = len(keys)
    if not n:
        return np.zeros(0, np.int32), np.zeros(0, np.int64)
    lo, hi = int(keys.min()), int(keys.max())
    narrow = hi - lo < 1 << 15
    small = (keys - lo).astype(np.int16) if narrow else keys
    order = np.argsort(small, kind="stable")
    ordered = small[order]
    heads = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    first = order[heads]  # where each distinct key first appears (the sort is stable)
    del ordered
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(len(heads), np.int32)
    rank[by_first] = np.arange(len(heads), dtype=np.int32)
    code = np.empty(n, np.int32)  # each key's distinct key: the run of the sorted keys it falls in
    code[order] = np.repeat(rank, np.diff(np.append(heads, n)))
    return code, first[by_first]


def members_of(code: np.ndarray, n: int) -> list[np.ndarray]:
    """The positions holding each of the codes 0..n-1, in order."""
    if not n:
        return []
    order = np.argsort(_small(code, n), kind="stable")
    return np.split(order, np.cumsum(np.bincount(code, minlength=n))[:-1])


def groups_of(keys: np.ndarray) -> list[np.ndarray]:
    """The positions of each distinct key, in order, the keys taken in order of first appearance."""
    code, first = first_codes(keys)
    return members_of(code, len(first))


class Executions:
    """Op executions as columns, one entry each: ``row``, the table row of its first event (its device,
    module, instruction, step and first kernel come from that row); ``device`` (an index into
    ``devices``), ``start_s``, ``end_s``, ``busy_s`` (its events' summed time) and ``events``; ``op``, an
    index into ``ops``, the distinct (module, instruction, name) of the executions (``name`` is the
    instruction, or the kernel's name without one); ``kernels``, the distinct kernel names of the
    executions of several kernels (by index)."""

    __slots__ = ("busy_s", "device", "devices", "end_s", "events", "kernels", "op", "ops", "row", "start_s", "table")

    def __init__(
        self,
        table: EventTable,
        row: np.ndarray,
        times: tuple[np.ndarray, np.ndarray, np.ndarray],
        events: np.ndarray,
        devices: tuple[np.ndarray, list[str]],
        ops: tuple[np.ndarray, list[tuple[Any, Any, str]]] | None = None,
        kernels: Mapping[int, tuple[str, ...]] | None = None,
    ) -> None:
        """``times``: (start_s, end_s, busy_s); ``devices``: the device :func:`codes` of the execution rows."""
        self.table, self.row, self.events, self.kernels = table, row, events, kernels or {}
        self.start_s, self.end_s, self.busy_s = times
        self.device, self.devices = devices
        self.op, self.ops = ops if ops is not None else (np.zeros(len(row), np.int32), [])

    def __len__(self) -> int:
        return len(self.row)

    def take(self, order: np.ndarray) -> None:
        """Reorder the executions: the k-th becomes the ``order[k]``-th (one column at a time)."""
        for column in ("row", "start_s", "end_s", "busy_s", "events", "device", "op"):
            setattr(self, column, getattr(self, column)[order])
        if self.kernels:
            where = np.empty(len(order), np.int64)
            where[order] = np.arange(len(order))
            self.kernels = {int(where[k]): v for k, v in self.kernels.items()}

    def to_list(self) -> list[OpExecution]:
        t = self.table
        step, kname = t.column("step"), t.column("name")
        kernels, ops, devices = self.kernels, self.ops, self.devices
        singles: dict[str, tuple[str]] = {}
        out = []
        columns = (self.row.tolist(), self.device.tolist(), self.op.tolist(), self.start_s.tolist(),
                   self.end_s.tolist(), self.busy_s.tolist(), self.events.tolist())  # fmt: skip
        for k, (r, d, op, start, end, busy, events) in enumerate(zip(*columns, strict=True)):
            names = kernels.get(k)
            if names is None:
                names = singles.get(kname[r]) or singles.setdefault(kname[r], (kname[r],))
            module, inst, name = ops[op]
            out.append(OpExecution(devices[d], module, inst, name, start, end, busy, events, names, step[r]))
        return out


_Codes = dict[str, tuple[np.ndarray, list[Any]]]
"""column -> (the :func:`codes` of some rows, the distinct values of the column)"""


def op_executions(trace: Trace, kinds: Sequence[str] = ("op", "kernel"), *, by_time: bool = True) -> list[OpExecution]:
    """Op events grouped per (device, module, instruction, execution) (:func:`executions`), as objects."""
    with paused_gc():
        return executions(trace, kinds, by_time=by_time).to_list()


def executions(trace: Trace, kinds: Sequence[str] = ("op", "kernel"), *, by_time: bool = True) -> Executions:
    """Op events grouped per (device, module, instruction, execution).

    An ``op`` event is one execution. Consecutive ``kernel`` events on the same device and line with the
    same (module, instruction) are one execution of that instruction (a convolution running as an im2col
    kernel and a GEMM kernel) until a kernel name repeats (the program run again); kernels with no HLO
    instruction group by kernel name, one per event. Within a (device, line), events are taken by start
    time, then name, then table order.
    Ordered by start time (then natural device order, name), or by (device, line, start) with ``by_time=False``.
    """
    ev = trace.events
    kind, kinds_seen = column_codes(ev, "kind")
    rows = np.flatnonzero(np.isin(kind, [i for i, k in enumerate(kinds_seen) if k in kinds]))
    c: _Codes = {"kind": (kind[rows], kinds_seen)}
    del kind
    for column in ("device", "line", "name", "module", "instruction"):  # of the op rows only
        full, values = column_codes(ev, column)
        c[column] = (full[rows], values)
        del full
    start, duration = floats(ev.column("start_s")), floats(ev.column("duration_s"))
    order = _stream_order(c, start[rows])
    rows = rows[order]
    for column, (code, values) in c.items():
        c[column] = (code[order], values)
    del order
    starts = _execution_starts(ev, c, rows)
    first = rows[starts]
    end, busy = start[first] + duration[first], duration[first]
    events = np.diff(np.append(starts, len(rows))).astype(np.int32)
    kernels: dict[int, tuple[str, ...]] = {}
    names = ev.column("name")
    for k in np.flatnonzero(events > 1).tolist():  # executions of several kernels: summed in order
        run = rows[starts[k] : starts[k] + events[k]].tolist()
        total = functools.reduce(operator.add, (float(duration[r]) for r in run[1:]), float(duration[run[0]]))
        busy[k], end[k] = total, max(float(start[r] + duration[r]) for r in run)
        kernels[k] = tuple(names[r] for r in run)
    del rows
    for column, (code, values) in c.items():  # each execution's, from its first event
        c[column] = (code[starts], values)
    del starts
    ops = _ops(ev, c, first)
    execs = Executions(ev, first, (start[first], end, busy), events, c["device"], ops, kernels)
    del c
    if by_time and len(execs):
        label = ranks([name for _, _, name in execs.ops])[execs.op]
        execs.take(np.lexsort((label, ranks(execs.devices, natural_key)[execs.device], execs.start_s)))
    return execs


def _ops(ev: EventTable, c: _Codes, first: np.ndarray) -> tuple[np.ndarray, list[tuple[Any, Any, str]]]:
    """Each execution's (module, instruction, name) as an index into the list of distinct ones (``c``: the
    codes of the executions' first events)."""
    (inst, insts), (name, names), (module, _) = c["instruction"], c["name"], c["module"]
    falsy = np.array([not v for v in insts], bool)  # no instruction: the name is the kernel's
    key = (module.astype(np.int64) * len(insts) + inst) * (len(names) + 1)
    key += np.where(falsy[inst], name, -1) + 1
    op, at = first_codes(key)
    del key
    module_col, inst_col, name_col = ev.column("module"), ev.column("instruction"), ev.column("name")
    ops = []
    for r in first[at].tolist():
        ops.append((module_col[r], inst_col[r], inst_col[r] or name_col[r]))
    return op, ops


def _stream_order(c: _Codes, start: np.ndarray) -> np.ndarray:
    """The order of the rows (of the codes ``c`` and times ``start``) by (device, line), start, name, then
    table order."""
    (device, devices), (line, lines), (name, names) = c["device"], c["line"], c["name"]
    wide = np.int64 if len(devices) * len(lines) >= 1 << 31 else np.int32
    stream = ranks(devices).astype(wide)[device] * len(lines) + ranks(lines)[line]
    return np.lexsort((ranks(names)[name], start, stream))


def _execution_starts(ev: EventTable, c: _Codes, rows: np.ndarray) -> np.ndarray:
    """Where in ``rows`` (in stream order) each execution starts: a kernel continues the one before when it
    is on the same stream, has an instruction equal to the previous event's (its instruction, or its name
    without one), the same module, and a name not yet in the execution."""
    (d, _), (ln, _), (i, insts), (m, _), (nm, _), (kind, kinds) = (
        c[x] for x in ("device", "line", "instruction", "module", "name", "kind"))  # fmt: skip
    none = insts.index(None) if None in insts else -1
    kernel = kinds.index("kernel") if "kernel" in kinds else -1
    link = np.zeros(len(rows), bool)
    base = (d[1:] == d[:-1]) & (ln[1:] == ln[:-1]) & (i[1:] != none) & (m[1:] == m[:-1]) & (kind[1:] == kernel)
    link[1:] = base & (i[1:] == i[:-1])
    inst_col, name_col = ev.column("instruction"), ev.column("name")
    for k in (np.flatnonzero(base & (i[:-1] == none)) + 1).tolist():  # after an event with no instruction
        link[k] = inst_col[rows[k]] == name_col[rows[k - 1]]  # what it is is its name
    del base
    same_run: _SameRun | None = None
    for k in _chains(link):
        seen = {nm[k - 1]}
        while k < len(link) and link[k]:
            if nm[k] in seen:  # the name repeats: the program ran again, unless one host run launched both
                same_run = same_run or _SameRun(ev)
                if not same_run(rows[k - 1], rows[k]):
                    link[k], seen = False, set()
            seen.add(nm[k])
            k += 1
    return np.flatnonzero(~link)


class _SameRun:
    """Whether two kernels of one instruction were launched by one run of it: their launches (the host
    events of their correlation ids) inside one host span named as the instruction (XLA's thunk annotation,
    e.g. ``te_fused_attn_backward_ffi.12`` around the memsets and kernels of one fused-attention backward).
    Without such spans or launches they are not (a repeated kernel name then starts a new execution)."""

    def __init__(self, ev: EventTable) -> None:
        self.ev = ev
        kind, kinds = column_codes(ev, "kind")
        device, devices = column_codes(ev, "device")
        host = np.array([str(d).startswith("/host") for d in devices], bool)[device]
        self.host = host & (kind == kinds.index("other")) if "other" in kinds else np.zeros(len(ev), bool)
        self.launch: dict[Any, float] | None = None  # built once per trace, when a kernel name repeats in a chain
        self.spans: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _launches(self) -> dict[Any, float]:
        if self.launch is None:
            rows = np.flatnonzero(self.host)
            corr, start = self.ev.column("correlation"), floats(self.ev.column("start_s"))
            self.launch = {}
            for r, t in zip(rows.tolist(), start[rows].tolist(), strict=True):
                c = corr[r]
                if c is not None:
                    self.launch.setdefault(c, t)
        return self.launch

    def _spans(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self.spans:
            code, values = column_codes(self.ev, "name")
            rows = np.flatnonzero(self.host & (code == values.index(name))) if name in values else np.zeros(0, int)
            start, dur = floats(self.ev.column("start_s")), floats(self.ev.column("duration_s"))
            order = np.argsort(start[rows], kind="stable")
            self.spans[name] = (start[rows][order], (start[rows] + dur[rows])[order])
        return self.spans[name]

    def __call__(self, a: int, b: int) -> bool:
        corr, inst = self.ev.column("correlation"), self.ev.column("instruction")
        launch = self._launches()
        ta, tb = launch.get(corr[a]), launch.get(corr[b])
        if ta is None or tb is None or not inst[b]:
            return False
        lo, hi = self._spans(str(inst[b]))
        j = int(np.searchsorted(lo, tb, "right")) - 1
        return j >= 0 and lo[j] <= ta <= hi[j] and tb <= hi[j]


def _chains(link: np.ndarray) -> list[int]:
    """The first linked position of each run of linked positions."""
    linked = np.flatnonzero(link)
    if not len(linked):
        return []
    heads = np.ones(len(linked), bool)
    heads[1:] = np.diff(linked) > 1
    firsts: list[int] = linked[heads].tolist()
    return firsts


def group_ops(trace: Trace, kinds: Sequence[str] = ("op", "kernel")) -> list[OpGroup]:
    """Per op (module, instruction — or kernel name when there is no HLO instruction): executions, total,
    mean, min, max and per-device busy seconds. Sorted by total time, then by name."""
    with paused_gc():
        return _summarise(executions(trace, kinds, by_time=False))


def op_groups(
    execs: Executions, module_of: Callable[[Any], Any] | None = None
) -> list[tuple[tuple[Any, ...], np.ndarray]]:
    """The executions of each op, (module, instruction, name), the ops in order of first appearance;
    ``module_of`` maps module names (JAX's ``jit_f(12)`` to ``jit_f``) before they are compared."""
    ops, op = execs.ops, execs.op
    if module_of is not None:
        merged: dict[tuple[Any, ...], int] = {}
        remap = np.array([merged.setdefault((module_of(m), i, n), len(merged)) for m, i, n in ops], np.int64)
        ops, op = list(merged), remap[op] if len(remap) else op
    return [(ops[int(op[m[0]])], m) for m in groups_of(op)]


def _summarise(execs: Executions) -> list[OpGroup]:
    groups = []
    kname = execs.table.column("name")
    where: dict[str, int] = {}
    for (mod, ins, nm), idx in op_groups(execs):
        busy = execs.busy_s[idx].tolist()
        device = execs.device[idx]
        per_dev = np.zeros(len(execs.devices))
        np.add.at(per_dev, device, execs.busy_s[idx])  # in order, from 0.0, as += would
        per_count = np.bincount(device, minlength=len(execs.devices))
        devs = sorted((execs.devices[d] for d in np.unique(device).tolist()), key=natural_key)
        where = where or {d: i for i, d in enumerate(execs.devices)}
        total = sum(busy)
        kernels = set(map(kname.__getitem__, execs.row[idx].tolist()))
        if execs.kernels:
            kernels.update(k for e in idx.tolist() for k in execs.kernels.get(e, ()))
        groups.append(
            OpGroup(
                mod,
                ins,
                nm,
                len(idx),
                int(execs.events[idx].sum()),
                total,
                total / len(idx),
                min(busy),
                max(busy),
                MappingProxyType({d: float(per_dev[where[d]]) for d in devs}),
                MappingProxyType({d: int(per_count[where[d]]) for d in devs}),
                tuple(sorted(kernels)),
            )
        )
    groups.sort(key=lambda g: (-g.total_s, g.module or "", g.name))
    return groups
