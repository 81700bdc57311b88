"""XLA HLO module -> per-instruction Costs (hardware-free) -> Estimates on a chip and mesh.

Counting (:mod:`rooftop.analysis.hlo.count`): ``count_module`` turns every instruction the program executes
at its top level into an ``HloOp``, a Cost per execution and a count, with FLOPs as XLA's HloCostAnalysis
counts them and bytes at the instruction boundary; that module's docstring states the rules.

``analyze``: roofline(Cost, chip, mesh) per instruction; the predicted module time is the sum of the
instructions' lower bounds (each overlaps its own compute, memory and network; they run in sequence).
On a megacore chip (TPU v4, v5p: two TensorCores that XLA drives as one device) an instruction that runs
on one core (named ``*in_megacore*``, as XLA names the fusions it keeps on one core) is timed on
``Chip.one_core()``: half the peaks, half the HBM bandwidth and half of each ICI link, twice the whole-chip
roofline whether it is compute-, memory- or collective-bound.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from rooftop.analysis.gcpause import paused_gc
from rooftop.analysis.hlo.count import HloOp, count_module
from rooftop.analysis.hlo.ir import HloModule
from rooftop.analysis.hlo.mesh import CollectiveUse, GroupMatch, LogicalMesh, given_mesh, infer_mesh, place
from rooftop.cost.cost import Comm, Cost
from rooftop.cost.roofline import Estimate, host_term, matrix_seconds, roofline
from rooftop.display import Displayed
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Topology, make_mesh, parse_topology, topology_for_chips
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason


@dataclass(frozen=True)
class TimedOp:
    """An HloOp on the hardware: the Estimate of all its executions and where its collectives ran."""

    op: HloOp
    estimate: Estimate
    matches: tuple[GroupMatch, ...] = ()
    matrix_s: float = 0.0  # one execution's matrix FLOPs at the whole chip's matrix peak (cost/roofline.py)

    @property
    def mxu_utilization(self) -> float | None:
        """The matrix-unit utilisation over the predicted time: its matrix FLOPs over what the chip's
        matrix units could do in it; None without matrix FLOPs or time."""
        time = self.estimate.lower_bound_s
        return self.matrix_s * self.op.executions / time if self.matrix_s and time > 0 else None


@dataclass(frozen=True, repr=False)  # the short repr of Displayed
class HloAnalysis(Displayed):
    """A module timed on a chip: per-instruction Estimates, the mesh used, and notes on assumptions."""

    module: str
    chip: Chip
    mesh: LogicalMesh
    topology: Topology
    ops: tuple[TimedOp, ...]
    notes: tuple[Note, ...]

    def top(self, n: int) -> list[TimedOp]:
        """The ``n`` instructions with the largest predicted time (lower bound)."""
        return sorted(self.ops, key=lambda t: -t.estimate.lower_bound_s)[:n]

    def totals(self) -> dict[str, float]:
        """Module totals (SI units): ``predicted_s`` sums the instructions' lower bounds, ``upper_bound_s``
        their upper bounds; ``overlap_bound_s`` = max(compute, memory, network) of the whole module."""
        ests = [t.estimate for t in self.ops]
        out = dict.fromkeys(("flops", "transcendentals", "bytes", "padded_bytes", "hbm_bytes", "comm_bytes"), 0.0)
        for t in self.ops:
            c, k = t.op.cost, t.op.executions
            values = (c.flops, c.transcendentals, c.traffic.logical_bytes, c.traffic.padded_bytes,
                      c.traffic.hbm_bytes, sum(u.bytes for u in c.collectives))  # fmt: skip
            for key, v in zip(out, values, strict=True):
                out[key] += v * k
        compute, memory, network = (sum(getattr(e, a) for e in ests) for a in ("compute_s", "memory_s", "network_s"))
        predicted = sum(e.lower_bound_s for e in ests)
        matrix = sum(t.matrix_s * t.op.executions for t in self.ops)
        return out | {
            "instructions": float(len(self.ops)), "padding_waste_bytes": out["padded_bytes"] - out["bytes"],
            "padding_overhead": out["padded_bytes"] / out["bytes"] if out["bytes"] else 1.0,
            "compute_s": compute, "memory_s": memory, "comm_s": network,
            "predicted_s": predicted, "upper_bound_s": sum(e.upper_bound_s for e in ests),
            "overlap_bound_s": max(compute, memory, network, 0.0),
            "flops_unknown_instructions": float(sum(1 for t in self.ops if t.op.cost.unknown)),
            "mxu_utilization": matrix / predicted if predicted > 0 else 0.0,
        }  # fmt: skip

    def collectives_by_axis(self) -> dict[str, dict[str, float]]:
        """Count, bytes (Comm bytes x executions) and network time per set of mesh axes ("irregular")."""
        out: dict[str, dict[str, float]] = {}
        for t in self.ops:
            for use, match in zip(t.op.cost.collectives, t.matches, strict=True):
                key = ",".join(match.axes) if match.axes else ("irregular" if match.axes is None else "none")
                entry = out.setdefault(key, {"count": 0.0, "bytes": 0.0, "comm_s": 0.0})
                entry["count"] += t.op.executions
                entry["bytes"] += use.bytes * t.op.executions
                entry["comm_s"] += t.estimate.network_s / len(t.matches)
        return out


#: XLA's memory space of host memory (``S(5)`` in a layout: ``Layout::kHostMemorySpace``)
HOST_MEMORY_SPACE = 5


def with_host_link(est: Estimate, nbytes: float, chip: Chip) -> Estimate:
    """``est`` with ``nbytes`` that live in host memory moved over the chip's host link (an offload copy
    between host memory and HBM moves one side's bytes over it): its time counts as memory time. A chip
    with no host-link figure leaves ``est`` as it is (those bytes priced as HBM traffic)."""
    if chip.host_bytes_per_s <= 0:  # a chip file without a host link (a calibrated one): HBM prices them
        return est
    term = host_term(nbytes, chip, what="bytes in host memory (memory space 5)")
    return dataclasses.replace(est, memory_s=max(est.memory_s, term.seconds), terms=(*est.terms, term))


def analyze(
    module: HloModule, chip: Chip, mesh: str | dict[str, int] | None = None, topology: str | Topology | None = None
) -> HloAnalysis:
    """Count ``module`` and time each instruction with roofline() on ``chip``. ``mesh`` names the logical
    axes (devices numbered row-major); without it the mesh is inferred from the replica groups. The
    topology defaults to ``topology_for_chips`` of the device count. Both defaults are noted."""
    counts = count_module(module)
    notes: list[Note] = list(counts.notes)
    uses = [u for op in counts.ops for u in op.cost.collectives]
    if mesh is not None:
        logical = given_mesh(mesh, counts.num_devices)
    else:
        groups = [u.groups for u in uses if u.groups is not None]
        logical = infer_mesh(groups, counts.num_devices or 1, [u.raw for u in uses])
        if uses:
            notes.append(Reason.of(ReasonCode.MESH_INFERRED, mesh=logical.spec(), how=logical.how))
    if topology is None:
        topo = topology_for_chips(chip, logical.num_devices)
        if uses:
            notes.append(
                Reason.of(ReasonCode.TOPOLOGY_DEFAULT, topology=topo.spec, devices=logical.num_devices, chip=chip.name)
            )
    else:
        topo = parse_topology(chip, topology) if isinstance(topology, str) else topology
    hardware = make_mesh(topo, logical.shape()) if uses and logical.shape() else None
    one_core = chip.one_core()
    single = sum(1 for op in counts.ops if op.cost.one_core) if chip.megacore else 0
    if single:
        notes.append(Reason.of(ReasonCode.MEGACORE_ONE_CORE, instructions=single, cores=chip.cores_per_device,
                               chip=chip.name))  # fmt: skip
    estimates: dict[tuple[Any, ...], tuple[Estimate, float]] = {}
    places: dict[CollectiveUse, tuple[Comm | None, GroupMatch]] = {}
    timed = []
    with paused_gc():
        for op in counts.ops:
            for use in op.cost.collectives:
                if use not in places:
                    places[use] = place(use, logical)
                    if not places[use][1].regular:
                        notes.append(places[use][1].reason(use.opcode, ReasonCode.COLLECTIVE_NOT_TIMED))
            placed = [places[use] for use in op.cost.collectives]
            comms, base = tuple(c for c, _ in placed if c is not None), op.cost.cost
            host = sum(b for space, b in op.cost.traffic.by_space if space == HOST_MEMORY_SPACE)
            on = one_core if op.cost.one_core else chip
            key = (tuple(sorted(base.flops_by.items())), base.hbm_bytes, comms, op.executions, host, on is chip,
                   base.gemm)  # fmt: skip
            if key not in estimates:  # repeated layers repeat costs: one roofline each
                est = roofline(Cost(base.flops_by, base.hbm_bytes, comms, gemm=base.gemm) * op.executions, on, hardware)
                est = with_host_link(est, host * op.executions, chip) if host else est
                estimates[key] = (est, matrix_seconds(base.flops_by, chip))
            timed.append(TimedOp(op, estimates[key][0], tuple(m for _, m in placed), estimates[key][1]))
    return HloAnalysis(counts.module, chip, logical, topo, tuple(timed), tuple(dict.fromkeys(notes)))
