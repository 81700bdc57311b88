"""Collectives in a PyTorch (Kineto) trace, as Comms timed on a topology of their group size: NCCL kernels
priced from their args (``Collective name``, ``In msg nelems``, ``Out msg nelems``, ``dtype``, ``Group size``),
and collective ops of any implementation (symm_mem, functional collectives, custom all-reduces) over the
trace's world (``distributedInfo``). :mod:`rooftop.analysis.torch.kineto` puts them in its report."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

from rooftop.analysis.compare import Priced
from rooftop.analysis.torch.engine_ops import collective_kind
from rooftop.analysis.torch.launches import Launches
from rooftop.analysis.torch.op import TorchOp
from rooftop.analysis.torch.ops import nccl_comm
from rooftop.analysis.trace.events import Trace
from rooftop.analysis.trace.ops import column_codes
from rooftop.cost.cost import Comm, Cost
from rooftop.cost.roofline import roofline
from rooftop.errors import InvalidConfigError, ShardingError
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, make_mesh, parse_topology, topology_for_chips
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason


def _hashable(value: Any) -> Any:
    """An NCCL arg as part of a grouping key: scalars as they are, lists and objects as their JSON text."""
    if value is None or value.__class__ in (int, float, str, bool):
        return value
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


class Collectives:
    """NCCL kernels -> Comms timed on a default topology (or the one given) of their group size."""

    def __init__(self, trace: Trace, chip: Chip, topology: str | None) -> None:
        self.chip, self.topology = chip, topology
        info = trace.metadata.get("distributedInfo") or {}
        self.world = info.get("world_size") if isinstance(info, dict) else None
        self.meshes: dict[int, Mesh | Reason] = {}
        self.notes: list[Note] = []
        self.continued = 0  # kernels without a launch that took their call from their stream's launched ones

    def mesh(self, n: int) -> Mesh | Reason:
        if n not in self.meshes:
            try:
                topo = parse_topology(self.chip, self.topology) if self.topology else None
                if topo is None or topo.num_chips != n:
                    topo = topology_for_chips(self.chip, n)
                    self.notes.append(Reason.of(ReasonCode.NCCL_TOPOLOGY_DEFAULT, ranks=n, topology=topo.spec,
                                                chip=self.chip.name))  # fmt: skip
                self.meshes[n] = make_mesh(topo)
            except (InvalidConfigError, ShardingError) as exc:
                figures = (("chip", self.chip.name), ("error", str(exc)), ("ranks", n))
                self.meshes[n] = Reason(ReasonCode.NCCL_NO_TOPOLOGY, figures)
        return self.meshes[n]

    def op(self, op: TorchOp) -> tuple[str, Priced]:
        """A collective op (not an NCCL kernel) over the trace's world (distributedInfo), as a Comm."""
        kind = collective_kind(op.name) or "all-reduce"
        size = self.world
        if size.__class__ is not int or size < 1:
            return op.label(), Priced(None, unknown=Reason.of(ReasonCode.COLLECTIVE_NO_WORLD, op=op.name, kind=kind))
        mesh = self.mesh(size)
        if isinstance(mesh, Reason):
            return op.label(), Priced(None, unknown=mesh)
        axes = tuple(a.name for a in mesh.axes if a.size > 1) or tuple(a.name for a in mesh.axes)
        try:
            comm = dataclasses.replace(_collective(op, kind, size), axes=axes)
        except InvalidConfigError as exc:
            why = Reason(ReasonCode.TORCH_COLLECTIVE_ERROR, (("error", str(exc)), ("op", op.name)))
            return op.label(), Priced(None, unknown=why)
        est = roofline(Cost(comms=(comm,)), self.chip, mesh)
        words = Reason(ReasonCode.COLLECTIVE_OVER_RANKS, (("bytes", comm.bytes), ("kind", kind), ("ranks", size),
                       ("topology", mesh.topology.spec), ("world", True)))  # fmt: skip
        return op.label(), Priced(est, 0.0, comm.bytes, mesh_axes=axes, collective=(words,))

    def key(self, args: Any) -> tuple[Any, ...]:
        size = args.get("Group size", self.world)
        values = (args.get("Collective name"), args.get("In msg nelems"), args.get("Out msg nelems"), args.get("dtype"))
        return (*map(_hashable, values), _hashable(size))

    def price(self, key: tuple[Any, ...], args: Any, kernel: str) -> tuple[str, str | None, Priced]:
        """(row name, opcode, Priced) of the NCCL kernels of ``key``; ``kernel`` names those without args."""
        coll, size, name = key[0], key[4], nccl_row(key, kernel)
        if size.__class__ is not int or size < 1:
            return name, None, Priced(None, unknown=_NO_GROUP_SIZE)
        mesh = self.mesh(size)
        if isinstance(mesh, Reason):
            return name, None, Priced(None, unknown=mesh)
        axes = tuple(a.name for a in mesh.axes if a.size > 1) or tuple(a.name for a in mesh.axes)
        comm, why = nccl_comm(args, axes)
        if comm is None:
            return name, coll, Priced(None, unknown=why)
        est = roofline(Cost(comms=(comm,)), self.chip, mesh)
        words = Reason(ReasonCode.COLLECTIVE_OVER_RANKS, (("bytes", comm.bytes), ("kind", comm.kind),
                       ("ranks", size), ("topology", mesh.topology.spec), ("world", False)))  # fmt: skip
        opcode = "collective-permute" if comm.kind == "permute" else comm.kind
        return name, opcode, Priced(est, 0.0, comm.bytes, mesh_axes=axes, collective=(words,))


_NO_GROUP_SIZE = Reason(ReasonCode.NCCL_NO_GROUP_SIZE)


def nccl_row(key: tuple[Any, ...], kernel: str) -> str:
    """The report row of an NCCL kernel of call signature ``key`` (``Collectives.key``): the call, or the kernel's
    name when its args name no collective."""
    coll, n_in, n_out, dtype, size = key
    nelems = n_out if coll and "gather" in str(coll) else n_in
    return f"nccl {coll} {nelems} x {dtype} (group of {size})" if coll else kernel


def comm_kernels(trace: Trace, launched: Launches) -> frozenset[str]:
    """Names of the kernels that communicate beyond NCCL's: those a collective op of any implementation
    launched (symm_mem, functional collectives, custom all-reduces), and those named as collectives."""
    code, values = column_codes(trace.events, "name")
    named = {v for v in values if collective_kind(v)}
    collective = np.array([bool(collective_kind(v)) for v in values], bool)
    has_op = launched.ops >= 0
    by_collective = launched.kernels[has_op][collective[code[launched.ops[has_op]]]]
    launched_by = {values[k] for k in np.unique(code[by_collective]).tolist()}
    return frozenset(named | launched_by)


def _collective(op: TorchOp, kind: str, group: int) -> Comm:
    """The Comm of a collective op of any implementation (symm_mem, functional collectives, custom
    all-reduces): its first tensor is each rank's input; an all-gather's output is ``group`` of them."""
    tensor = next((i for i in op.reads() if op.tensor(i) is not None), None)
    if tensor is None:
        raise InvalidConfigError("no tensor argument")
    size = op.nbytes(tensor) * (group if kind == "all-gather" else 1)
    return Comm(kind, (), size, label=op.name)
