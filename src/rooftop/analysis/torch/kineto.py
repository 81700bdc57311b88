"""A PyTorch (Kineto) trace on the roofline. Such a trace has no HLO: each kernel is joined with the aten op
that launched it (:func:`launching_ops`) and priced from the op's shapes (:mod:`rooftop.analysis.torch.ops`);
NCCL kernels are priced from their args as collectives on a topology of their group size
(:func:`kineto_report`). The verdicts per op are those of :mod:`rooftop.analysis.compare`."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

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
from rooftop.analysis.torch.ops import TorchOp, nccl_comm, op_cost
from rooftop.analysis.trace.events import Trace
from rooftop.analysis.trace.ops import OpExecution, op_executions
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


def launching_ops(trace: Trace) -> dict[int, tuple[int | None, str]]:
    """kernel row -> (row of the innermost ``cpu_op`` with ``Input Dims`` that launched it, or None, and
    why not). A kernel's launch is the runtime event (``cudaLaunchKernel``, ``hipLaunchKernel``, ...) of
    the same ``correlation``; the op is the innermost such cpu_op on the launching thread whose span holds
    the launch. Without a launch event, a cpu_op of the kernel's ``External id`` (older traces)."""
    ev = trace.events
    kind, start, dur, corr, args, device, line = (
        ev.column(c) for c in ("kind", "start_s", "duration_s", "correlation", "args", "device", "line")
    )
    ops: dict[tuple[str, str], list[int]] = defaultdict(list)
    launch: dict[str, int] = {}
    external: dict[Any, int] = {}
    for i, (k, a) in enumerate(zip(kind, args, strict=True)):
        if k != "other":
            continue
        cat = a.get("cat")
        if cat == "cpu_op" and "Input Dims" in a:
            ops[(device[i], line[i])].append(i)
            ext = _link_id(a.get("External id"))
            if ext is not None:
                external.setdefault(ext, i)
        elif cat in _LAUNCH_CATS and corr[i] is not None:
            launch.setdefault(corr[i], i)
    queries: dict[tuple[str, str], list[tuple[float, int]]] = defaultdict(list)
    out: dict[int, tuple[int | None, str]] = {}
    for i, (k, c) in enumerate(zip(kind, corr, strict=True)):
        if k != "kernel":
            continue
        at = launch.get(c) if c is not None else None
        ext = _link_id(args[i].get("External id"))
        if at is not None:
            queries[(device[at], line[at])].append((start[at], i))
        elif ext is not None and ext in external:
            out[i] = (external[ext], "")
        else:
            out[i] = (None, _NO_LAUNCH)
    no_op = "no cpu_op with Input Dims encloses its launch (record the profile with record_shapes=True)"
    names = ev.column("name")
    for thread, asks in queries.items():
        spans = sorted(ops.get(thread, []), key=lambda i: (start[i], -dur[i]))
        stack: list[int] = []
        j = 0
        for t, kernel in sorted(asks):
            while j < len(spans) and start[spans[j]] <= t:
                while stack and start[stack[-1]] + dur[stack[-1]] < start[spans[j]]:
                    stack.pop()
                stack.append(spans[j])
                j += 1
            while stack and start[stack[-1]] + dur[stack[-1]] < t:
                stack.pop()
            if stack:
                out[kernel] = (stack[-1], "")
            else:
                graph = "GraphLaunch" in names[launch[corr[kernel]]]
                out[kernel] = (None, GRAPH_REPLAY if graph else no_op)
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


class _Executions:
    """Kernel rows (one op execution on one device) -> an OpExecution: busy = their summed time."""

    def __init__(self, trace: Trace) -> None:
        ev = trace.events
        self.start, self.dur, self.names, self.steps, self.device = (
            ev.column(c) for c in ("start_s", "duration_s", "name", "step", "device")
        )
        self.singles: dict[str, tuple[str]] = {}

    def one(self, r: int, name: str) -> OpExecution:
        """``of([r], name)`` without the generators (the same numbers: a sum of one starts at 0)."""
        start, dur, kernel = self.start[r], self.dur[r], self.names[r]
        kernels = self.singles.get(kernel)
        if kernels is None:
            kernels = self.singles[kernel] = (kernel,)
        return OpExecution(self.device[r], None, None, name, start, start + dur, 0 + dur, 1, kernels, self.steps[r])

    def of(self, rows: Sequence[int], name: str) -> OpExecution:
        if len(rows) == 1:
            return self.one(rows[0], name)
        start, dur = self.start, self.dur
        kernels = tuple(dict.fromkeys(self.names[r] for r in rows))
        return OpExecution(self.device[rows[0]], None, None, name, min(start[r] for r in rows),
                           max(start[r] + dur[r] for r in rows), sum(dur[r] for r in rows), len(rows), kernels,
                           self.steps[rows[0]])  # fmt: skip


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


_Group = tuple[str, str | None, Priced, list[OpExecution]]  # (row name, opcode, price, executions)


def _kineto_report(trace: Trace, chip: Chip, topology: str | None) -> ProfileReport:
    nccl = _Nccl(trace, chip, topology)
    groups, unexplained = _kernel_groups(trace, chip, nccl)
    execs = op_executions(trace)
    intervals = device_intervals(execs)
    ops: list[OpReport] = []
    for key, (label, opcode, priced, group) in groups.items():
        category = "communication" if key[0] == "nccl" else category_of(label, opcode or label)
        ops.append(judge(label, None, opcode, category, group, priced, intervals[0]))
    kind, args = trace.events.column("kind"), trace.events.column("args")
    n_kernels = sum(1 for k in kind if k == "kernel")
    n_priced = sum(r.events for _, _, p, g in groups.values() if p.estimate and not p.unknown for r in g)
    notes = [
        f"PyTorch trace: {n_priced} of {n_kernels} kernels priced from the aten op that launched them (its Input Dims) "
        f"or from their NCCL args; {unexplained} launched by no op with Input Dims",
        *nccl.notes,
    ]
    replayed = sum(len(g) for key, (_, _, _, g) in groups.items() if key[0] == "kernel" and key[2] == GRAPH_REPLAY)
    if replayed:
        notes.append(f"{replayed} of the {unexplained} were replayed from CUDA/HIP graphs, which record no op shapes: "
                     "profile the engine in eager mode to price them")  # fmt: skip
    if not any(args[i].get("cat") == "cpu_op" and "Input Dims" in args[i] for i, k in enumerate(kind) if k == "other"):
        notes.append("no cpu_op carries Input Dims: record with torch.profiler.profile(record_shapes=True)")
    return assemble(trace, execs, ops, chip.name, (), notes, intervals=intervals)


def _kernel_groups(trace: Trace, chip: Chip, nccl: _Nccl) -> tuple[dict[tuple, _Group], int]:
    """The kernels grouped into report rows: per NCCL call signature, per priced (aten op, shapes, dtypes),
    and per reason for kernels no op explains; and how many kernels no op launched."""
    names, args, device = (trace.events.column(c) for c in ("name", "args", "device"))
    launched = launching_ops(trace)
    executions = _Executions(trace)
    per_op: dict[tuple[int, str], list[int]] = defaultdict(list)
    groups: dict[tuple, _Group] = {}
    is_nccl: dict[str, bool] = {}
    unexplained = 0
    for k in sorted(launched):
        op_row, why = launched[k]
        name = names[k]
        if name not in is_nccl:
            is_nccl[name] = "nccl" in name.lower()
        if is_nccl[name]:
            key = ("nccl", *nccl.key(args[k]), "" if args[k].get("Collective name") else name)
            if key not in groups:
                groups[key] = (*nccl.price(key[1:-1], args[k], key[-1]), [])
            groups[key][3].append(executions.one(k, groups[key][0]))
        elif op_row is None:
            unexplained += 1
            groups.setdefault(("kernel", name, why), (name, None, Priced(None, unknown=why), []))[3].append(
                executions.one(k, name))  # fmt: skip
        else:
            per_op[(op_row, device[k])].append(k)
    prices: dict[tuple, tuple[str, Priced]] = {}
    for (op_row, _device), kernels in per_op.items():
        op = TorchOp.from_args(names[op_row], args[op_row])
        sig = (op.name, op.dims, op.types, op.concrete)
        if sig not in prices:
            prices[sig] = _price(op, chip)
        label, priced = prices[sig]
        key = ("op", label, priced.flops, priced.bytes, priced.unknown)
        groups.setdefault(key, (label, op.name, priced, []))[3].append(executions.of(kernels, label))
    return groups, unexplained
