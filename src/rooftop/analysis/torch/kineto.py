"""A PyTorch (Kineto) trace on the roofline. Such a trace has no HLO: each kernel is joined with the aten op
that launched it (:func:`launching_ops`) and priced from the op's shapes (:mod:`rooftop.analysis.torch.ops`);
NCCL kernels are priced from their args as collectives on a topology of their group size
(:func:`kineto_report`). The verdicts per op are those of :mod:`rooftop.analysis.compare`.

A trace of a million kernels is read column-wise: the joins and groupings are numpy sorts over the kernel
rows, an op's args are read and priced once per distinct args (the loader shares them between events), and
executions are columns (:class:`~rooftop.analysis.trace.ops.Executions`), not one object per kernel."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rooftop.analysis.compare import (
    OpReport,
    Priced,
    ProfileReport,
    assemble,
    category_of,
    device_intervals,
    judge,
)
from rooftop.analysis.gcpause import paused_gc
from rooftop.analysis.intervals import Runs
from rooftop.analysis.torch.ops import TorchOp, nccl_comm, op_cost
from rooftop.analysis.trace.events import EventArgs, EventTable, Trace
from rooftop.analysis.trace.ops import Executions, column_codes, each, executions, first_codes, floats, members_of
from rooftop.cost.cost import Cost
from rooftop.cost.roofline import roofline
from rooftop.errors import InvalidConfigError, RooftopError, ShardingError
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, make_mesh, parse_topology, topology_for_chips
from rooftop.units import format_bytes

_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
#: why a kernel replayed from a CUDA/HIP graph (launched by cudaGraphLaunch / hipGraphLaunch) has no op
GRAPH_REPLAY = ("replayed from a CUDA/HIP graph (cudaGraphLaunch): a replay records no op shapes (profile the "
                "engine in eager mode, e.g. vLLM's enforce_eager=True, to price it)")  # fmt: skip
#: why a kernel has no op: one text for all such kernels, so that they group by kernel name (a
#: correlation id in it made one report row per kernel: 1.2M rows for a trace of tiny kernels)
_NO_LAUNCH = "its launch (the runtime event of its correlation id) is not in the trace (record CPU activities too)"
_NO_OP = "no cpu_op with Input Dims encloses its launch (record the profile with record_shapes=True)"
#: why a kernel has no op, by index (:attr:`Launches.why`)
REASONS = ("", _NO_LAUNCH, GRAPH_REPLAY, _NO_OP)


def _common(args: Any) -> int:
    """Which args these are: the identity of the part other events share (of the whole dict for a dict)."""
    return id(args.shared if args.__class__ is EventArgs else args)


class Launches(Mapping[int, tuple[int | None, str]]):
    """kernel row -> (row of the op that launched it, or None, and why not), as columns: ``kernels`` (rows,
    ascending), ``ops`` (-1 for none) and ``why`` (an index into :data:`REASONS`); ``shapes``: whether any
    cpu_op of the trace carries Input Dims."""

    def __init__(self, kernels: np.ndarray, ops: np.ndarray, why: np.ndarray, shapes: bool) -> None:
        self.kernels, self.ops, self.why, self.shapes = kernels, ops, why, shapes

    def __getitem__(self, row: int) -> tuple[int | None, str]:
        k = int(np.searchsorted(self.kernels, row))
        if k == len(self.kernels) or self.kernels[k] != row:
            raise KeyError(row)
        op = int(self.ops[k])
        return (None if op < 0 else op), REASONS[self.why[k]]

    def __iter__(self) -> Iterator[int]:
        return iter(self.kernels.tolist())

    def __len__(self) -> int:
        return len(self.kernels)


def launching_ops(trace: Trace) -> Launches:
    """kernel row -> (row of the innermost ``cpu_op`` with ``Input Dims`` that launched it, or None, and
    why not). A kernel's launch is the runtime event (``cudaLaunchKernel``, ``hipLaunchKernel``, ...) of
    the same ``correlation``; the op is the innermost such cpu_op on the launching thread whose span holds
    the launch. Without a launch event, a cpu_op of the kernel's ``External id`` (older traces)."""
    ev = trace.events
    kind, kinds = column_codes(ev, "kind")
    corr, args = ev.column("correlation"), ev.column("args")
    none = np.zeros(0, np.int64)
    other = np.flatnonzero(kind == kinds.index("other")) if "other" in kinds else none
    kernels = np.flatnonzero(kind == kinds.index("kernel")) if "kernel" in kinds else none
    del kind
    ops, launch = _shaped_ops_and_launches(ev, other)
    at = np.fromiter(map(launch.get, map(corr.__getitem__, each(kernels)), itertools.repeat(-1)), np.int64,
                     len(kernels))  # fmt: skip
    del launch
    out = np.full(len(kernels), -1, np.int64)
    why = (at < 0).astype(np.int8)  # 1: no launch
    external: dict[Any, int] | None = None
    for k in each(np.flatnonzero(at < 0) if len(ops) else none):  # older traces: the cpu_op of the kernel's External id
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
    return Launches(kernels, out, why, bool(len(ops)))


def _shaped_ops_and_launches(ev: EventTable, other: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """The rows of the cpu_ops with Input Dims, and the first runtime launch row of each correlation id;
    the args are read once per distinct common part (the loader shares it between events)."""
    args, corr = ev.column("args"), ev.column("correlation")
    rows = list(map(args.__getitem__, each(other)))  # each one's common part: getattr(a, "shared", a), in C
    common = np.fromiter(map(id, map(getattr, rows, itertools.repeat("shared"), rows)), np.int64, len(other))
    del rows
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
    runtime = other[what_of == 2].tolist()
    corrs = list(map(corr.__getitem__, runtime))
    launch = dict(zip(reversed(corrs), reversed(runtime), strict=True))  # the first of each
    launch.pop(None, None)
    return ops, launch


def _enclosing(ev: EventTable, ops: np.ndarray, kernels: np.ndarray, at: np.ndarray, out: np.ndarray,
               why: np.ndarray) -> None:  # fmt: skip
    """For each kernel launched at row ``at`` (>= 0), the innermost shaped op on the launching thread whose
    span holds the launch time, into ``out``, or why there is none into ``why``: per thread, the ops
    sorted by (start, longest first) and the launches by (time, kernel row), swept once."""
    asked = np.flatnonzero(at >= 0)
    if not len(asked):
        return
    start, dur = floats(ev.column("start_s")), floats(ev.column("duration_s"))
    device, _ = column_codes(ev, "device")
    line, lines = column_codes(ev, "line")
    thread = device.astype(np.int64) * len(lines) + line
    del device, line
    launch = at[asked]
    order = np.lexsort((kernels[asked], start[launch], thread[launch]))
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
        found = np.array(_sweep(start[mine].tolist(), (start[mine] + dur[mine]).tolist(),
                                start[launch[lo:hi]].tolist()), np.int64)  # fmt: skip
        mine_asked, hit = asked[lo:hi], found >= 0
        out[mine_asked[hit]] = mine[found[hit]]
        missed = np.flatnonzero(~hit)
        if len(missed):  # no op holds the launch: a graph replay, or an op without shapes
            why[mine_asked[missed]] = [2 if "GraphLaunch" in names[r] else 3 for r in launch[lo:hi][missed].tolist()]


def _sweep(starts: list[float], ends: list[float], times: list[float]) -> list[int]:
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


def _hashable(value: Any) -> Any:
    """An NCCL arg as part of a grouping key: scalars as they are, lists and objects as their JSON text."""
    if value is None or value.__class__ in (int, float, str, bool):
        return value
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


class _Nccl:
    """NCCL kernels -> Comms timed on a default topology (or the one given) of their group size."""

    def __init__(self, trace: Trace, chip: Chip, topology: str | None) -> None:
        self.chip, self.topology = chip, topology
        info = trace.metadata.get("distributedInfo") or {}
        self.world = info.get("world_size") if isinstance(info, dict) else None
        self.meshes: dict[int, Mesh | str] = {}
        self.notes: list[str] = []

    def mesh(self, n: int) -> Mesh | str:
        if n not in self.meshes:
            try:
                topo = parse_topology(self.chip, self.topology) if self.topology else None
                if topo is None or topo.num_chips != n:
                    topo = topology_for_chips(self.chip, n)
                    self.notes.append(f"NCCL collectives over {n} ranks timed on topology {topo.spec}, the default "
                                      f"for {n} {self.chip.name} (give --topology)")  # fmt: skip
                self.meshes[n] = make_mesh(topo)
            except (InvalidConfigError, ShardingError) as exc:
                self.meshes[n] = f"no topology of {n} {self.chip.name}: {exc}"
        return self.meshes[n]

    def key(self, args: Any) -> tuple:
        size = args.get("Group size", self.world)
        values = (args.get("Collective name"), args.get("In msg nelems"), args.get("Out msg nelems"), args.get("dtype"))
        return (*map(_hashable, values), _hashable(size))

    def price(self, key: tuple, args: Any, kernel: str) -> tuple[str, str | None, Priced]:
        """(row name, opcode, Priced) of the NCCL kernels of ``key``; ``kernel`` names those without args."""
        coll, n_in, n_out, dtype, size = key
        nelems = n_out if coll and "gather" in str(coll) else n_in
        name = f"nccl {coll} {nelems} x {dtype} (group of {size})" if coll else kernel
        if size.__class__ is not int or size < 1:
            return name, None, Priced(None, unknown="the kernel names no Group size and the trace no world size")
        mesh = self.mesh(size)
        if isinstance(mesh, str):
            return name, None, Priced(None, unknown=mesh)
        axes = tuple(a.name for a in mesh.axes if a.size > 1) or tuple(a.name for a in mesh.axes)
        comm, why = nccl_comm(args, axes)
        if comm is None:
            return name, coll, Priced(None, unknown=why)
        est = roofline(Cost(comms=(comm,)), self.chip, mesh)
        words = f"{comm.kind} of {format_bytes(comm.bytes)} over {size} ranks ({mesh.topology.spec})"
        opcode = "collective-permute" if comm.kind == "permute" else comm.kind
        return name, opcode, Priced(est, 0.0, comm.bytes, mesh_axes=axes, collective=words)


def _price(op: TorchOp, chip: Chip) -> tuple[str, Priced]:
    price = op_cost(op)
    if price.cost is None:
        return op.label(price.tag), Priced(None, unknown=price.what)
    try:
        estimate = roofline(price.cost, chip)
    except RooftopError as exc:
        return op.label(price.tag), Priced(None, price.cost.flops, price.cost.hbm_bytes, unknown=str(exc))
    return op.label(price.tag), Priced(estimate, price.cost.flops, price.cost.hbm_bytes)


def kineto_report(trace: Trace, chip: Chip, topology: str | None = None) -> ProfileReport:
    """Every kernel of a PyTorch trace judged against the roofline of the op that launched it, one row per
    (aten op, shapes, dtypes); NCCL kernels as collectives; kernels no op explains stay "unknown cost"."""
    with paused_gc():
        return _kineto_report(trace, chip, topology)


@dataclass
class _Group:
    """One report row: its name, opcode and price, and its executions."""

    label: str
    opcode: str | None
    priced: Priced
    runs: Runs | None = None


def _kineto_report(trace: Trace, chip: Chip, topology: str | None) -> ProfileReport:
    nccl = _Nccl(trace, chip, topology)
    launched = launching_ops(trace)
    execs = executions(trace, by_time=False)  # for the steps and the intervals: their order does not matter
    groups, unexplained = _kernel_groups(trace, chip, nccl, launched, execs)
    intervals = device_intervals(execs)
    ops: list[OpReport] = []
    for key, g in groups.items():
        category = "communication" if key[0] == "nccl" else category_of(g.label, g.opcode or g.label)
        assert g.runs is not None
        ops.append(judge(g.label, None, g.opcode, category, g.runs, g.priced, intervals[0]))
    n_priced = sum(g.runs.events() for g in groups.values() if g.runs and g.priced.estimate and not g.priced.unknown)
    notes = [
        f"PyTorch trace: {n_priced} of {len(launched)} kernels priced from the aten op that launched them (its Input "
        f"Dims) or from their NCCL args; {unexplained} launched by no op with Input Dims",
        *nccl.notes,
    ]
    replayed = sum(len(g.runs or ()) for key, g in groups.items() if key[0] == "kernel" and key[2] == GRAPH_REPLAY)
    if replayed:
        notes.append(f"{replayed} of the {unexplained} were replayed from CUDA/HIP graphs, which record no op shapes: "
                     "profile the engine in eager mode to price them")  # fmt: skip
    if not launched.shapes:
        notes.append("no cpu_op carries Input Dims: record with torch.profiler.profile(record_shapes=True)")
    return assemble(trace, execs, ops, chip.name, (), notes, intervals=intervals)


def _kernel_groups(
    trace: Trace, chip: Chip, nccl: _Nccl, launched: Launches, execs: Executions
) -> tuple[dict[tuple, _Group], int]:
    """The kernels grouped into report rows: per NCCL call signature and per reason for kernels no op
    explains (each kernel one execution), then per priced (aten op, shapes, dtypes) (each op's kernels on
    one device one execution); rows in the order of their first execution, executions in the order of
    their first kernel. Also how many kernels no op launched."""
    ev = trace.events
    kernels, op_row = launched.kernels, launched.ops
    name, name_values = column_codes(ev, "name")
    name = name[kernels]
    is_nccl = np.array(["nccl" in n.lower() for n in name_values], bool)[name]
    alone = _where(is_nccl | (op_row < 0))  # kernels that are executions by themselves
    unexplained = int(np.count_nonzero(~is_nccl & (op_row < 0)))
    groups: dict[tuple, _Group] = {}
    rows = kernels[alone]
    group = _alone_groups(ev, nccl, rows, name[alone], is_nccl[alone], launched.why[alone], groups)
    del name
    alone_runs, at = _as_executions(ev, rows, execs)
    del rows
    for g, members in zip(groups.values(), members_of(group, len(groups)), strict=True):
        g.runs = Runs(alone_runs, at[members])
    priced = np.flatnonzero(~is_nccl & (op_row >= 0))
    if len(priced):
        op_runs, group = _op_runs(ev, chip, kernels[priced], op_row[priced], groups)
        for g, members in zip(groups.values(), members_of(group, len(groups)), strict=True):
            if len(members):
                g.runs = Runs(op_runs, members)
    return groups, unexplained


def _where(mask: np.ndarray) -> np.ndarray | slice:
    """The positions where ``mask`` holds, or the whole range (a slice: no copy) when it holds everywhere."""
    return slice(None) if mask.all() else np.flatnonzero(mask)


def _as_executions(ev: EventTable, rows: np.ndarray, execs: Executions) -> tuple[Executions, np.ndarray]:
    """Executions holding each kernel of ``rows`` as one of its own, and where: ``execs`` when they are
    there (a Kineto trace: kernels carry no HLO instruction, so each is one), else new ones."""
    where = np.full(len(ev), -1, np.int32 if len(execs) < 1 << 31 else np.int64)
    where[execs.row] = np.arange(len(execs), dtype=where.dtype)
    at = where[rows]
    del where
    if not len(at) or (at.min() >= 0 and (execs.events.max() == 1 or np.all(execs.events[at] == 1))):
        return execs, at
    start, dur = floats(ev.column("start_s")), floats(ev.column("duration_s"))
    device, devices = column_codes(ev, "device")
    times = (start[rows], start[rows] + dur[rows], dur[rows] + 0.0)  # busy = 0 + dur, a sum of one
    return Executions(ev, rows, times, np.ones(len(rows), np.int64), (device[rows], devices)), np.arange(len(rows))


def _alone_groups(
    ev: EventTable, nccl: _Nccl, rows: np.ndarray, name: np.ndarray, is_nccl: np.ndarray, why: np.ndarray,
    groups: dict[tuple, _Group],
) -> np.ndarray:  # fmt: skip
    """The report row of each kernel that is an execution by itself: an NCCL kernel by its call (read once
    per distinct args), another by (name, why no op). The rows are made, and NCCL calls priced, in the
    order of their first kernel."""
    names, args = ev.column("name"), ev.column("args")
    index: dict[tuple, int] = {}
    first: dict[int, Any] = {}  # the args of the first kernel of each NCCL key
    key_of = np.empty(len(rows), np.int32)
    seen: dict[tuple[int, int], int] = {}
    for n in each(np.flatnonzero(is_nccl)):
        row = int(rows[n])
        a = args[row]
        memo = (int(name[n]), _common(a))
        k = seen.get(memo)
        if k is None:
            key = ("nccl", *nccl.key(a), "" if a.get("Collective name") else names[row])
            k = seen[memo] = index.setdefault(key, len(index))
            first.setdefault(k, a)
        key_of[n] = k
    other = _where(~is_nccl)
    if len(other) if isinstance(other, np.ndarray) else len(rows):
        wide = np.int64 if int(name.max(initial=0)) >= (1 << 31) // len(REASONS) else np.int32
        code, at = first_codes(name[other].astype(wide) * len(REASONS) + why[other])
        firsts = other[at] if isinstance(other, np.ndarray) else at
        keys = [index.setdefault(("kernel", names[rows[i]], REASONS[why[i]]), len(index)) for i in firsts.tolist()]
        key_of[other] = np.array(keys, np.int32)[code]
        del code
    group, at = first_codes(key_of)
    keys_list = list(index)
    for k in key_of[at].tolist():  # in the order of their first kernel
        key = keys_list[k]
        if key[0] == "nccl":
            groups[key] = _Group(*nccl.price(key[1:-1], first[k], key[-1]))
        else:
            groups[key] = _Group(key[1], None, Priced(None, unknown=key[2]))
    return group


def _op_runs(
    ev: EventTable, chip: Chip, kernels: np.ndarray, op_row: np.ndarray, groups: dict[tuple, _Group]
) -> tuple[Executions, np.ndarray]:
    """The executions of the priced kernels, one per (op, device) (numbered by first kernel), as columns,
    with each one's report row, per (aten op, shapes, dtypes): ops read and priced once per distinct
    (name, args). Rows are added to ``groups`` in the order of their first execution."""
    names, args = ev.column("name"), ev.column("args")
    start, dur = floats(ev.column("start_s")), floats(ev.column("duration_s"))
    device, devices = column_codes(ev, "device")
    run, first = first_codes(op_row * max(len(devices), 1) + device[kernels])
    rows, events = kernels[first], np.bincount(run, minlength=len(first))
    device = device[rows]
    begin, end, busy = start[rows], start[rows] + dur[rows], dur[rows] + 0.0  # one kernel: busy = 0 + dur
    several = np.flatnonzero(events > 1)
    if len(several):
        order = np.argsort(run, kind="stable")
        offsets = np.concatenate(([0], np.cumsum(events)))
        for r in several.tolist():
            mine = kernels[order[offsets[r] : offsets[r + 1]]].tolist()
            begin[r] = min(start[mine].tolist())
            end[r] = max((start[mine] + dur[mine]).tolist())
            busy[r] = sum(dur[mine].tolist())
    ops = op_row[first]
    name, _ = column_codes(ev, "name")
    ids, _ = first_codes(np.fromiter(map(_common, map(args.__getitem__, ops.tolist())), np.int64, len(ops)))
    sig, at = first_codes(name[ops].astype(np.int64) * (int(ids.max()) + 1) + ids)
    del name, ids
    prices: dict[tuple, tuple[str, Priced]] = {}
    index = {key: k for k, key in enumerate(groups)}
    made = []
    for i in at.tolist():  # each distinct op: read, priced (once per shapes), given its report row
        r = int(ops[i])
        op = TorchOp.from_args(names[r], args[r])
        shapes = (op.name, op.dims, op.types, op.concrete)
        if shapes not in prices:
            prices[shapes] = _price(op, chip)
        label, priced = prices[shapes]
        key = ("op", label, priced.flops, priced.bytes, priced.unknown)
        if key not in groups:
            index[key] = len(groups)
            groups[key] = _Group(label, op.name, priced)
        made.append(index[key])
    runs = Executions(ev, rows, (begin, end, busy), events, (device, devices))
    return runs, np.array(made, np.int64)[sig]


def kernel_labels(trace: Trace, chip: Chip) -> dict[int, str]:
    """kernel row -> the report row (``OpReport.name``) of the aten op that launched it, for the kernels
    priced from their op's shapes (NCCL kernels and kernels no op launched are left out): what a timeline
    needs to put an op's roofline time beside its kernels."""
    ev = trace.events
    names, args = ev.column("name"), ev.column("args")
    launched = launching_ops(trace)
    labels: dict[int, str] = {}
    out: dict[int, str] = {}
    for kernel, op in zip(launched.kernels.tolist(), launched.ops.tolist(), strict=True):
        if op < 0 or "nccl" in names[kernel].lower():
            continue
        label = labels.get(op)
        if label is None:
            label = labels[op] = _price(TorchOp.from_args(names[op], args[op]), chip)[0]
        out[kernel] = label
    return out
