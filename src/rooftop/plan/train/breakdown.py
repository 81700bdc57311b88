"""A training step, part by part, each part with its terms: the seconds and the figures they came from.

The search prices thousands of layouts with numbers only (plan/train/step.py); the layouts it reports
are priced again through the same functions with a ``Ledger`` that records every collective and every
second hidden behind compute, and each part becomes a ``StepPart``:

- compute_forward / compute_backward / compute_recompute: the phase's ops, each max(compute, memory)
  on the per-op roofline (cost/roofline.roofline_table): a term for the compute-bound ops (their FLOPs
  at the chip's peak x efficiency) and one for the memory-bound ops (their bytes over HBM); when the
  elementwise ops run eagerly, a third for the eager kernels' traffic beyond the fused ops' (model/eager.py);
- tensor_parallel, context_parallel, fsdp, expert_parallel, data_parallel, pipeline_p2p: one term per
  collective (cost/collectives.py through cost/roofline.collective_term, count = calls per step) and a
  negative "hidden" term for what compute hid, and a "contention" term for the compute the hidden collectives
  slowed (``Framework.overlap_cost`` seconds per hidden second);
- pipeline_bubble: (p - 1) / v microbatch times; optimizer: the update's roofline (model/memory);
  offload: bytes over the host link.

A part's ``time_s`` is the sum of its terms (``combine`` "sum"), except the optimizer's, the larger of
its compute and memory terms (``combine`` "max"); the parts add up to the step time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooftop.cost.cost import Comm
from rooftop.cost.efficiency import Efficiency
from rooftop.cost.figures import (
    BubbleFigures,
    ContentionFigures,
    HiddenFigures,
    OpsComputeFigures,
    OpsMemoryFigures,
    SyncFigures,
)
from rooftop.cost.roofline import Term, TermKind, achievable, collective_term, host_term, memory_term, roofline
from rooftop.plan.train.comm import CommPricer, Ledger, exposed_s, overlap_contention
from rooftop.plan.train.layout import Parallelism, microbatch_size
from rooftop.plan.train.memory import Shards, offload_transfers
from rooftop.plan.train.profile import ModelProfile, gemm_shape_efficiency, op_roofline, op_sums, stage_pace
from rooftop.plan.train.step import (
    COMM_PARTS,
    COMPUTE_PARTS,
    PARTS,
    StepResult,
    TrainingSetup,
    _pp_boundary_bytes,
    layout_mesh,
    optimizer_cost,
    p2p_per_microbatch,
    profile_for,
    step_parts,
    step_result,
)

#: what hides each communication part (for the "hidden" term)
COVER = {
    "tensor_parallel": ("the layer's compute", "tp_overlap"),
    "context_parallel": ("the attention core", None),
    "fsdp": ("the layer's compute left after TP and ring attention", "fsdp_overlap"),
    "expert_parallel": ("the attention and shared-expert compute left after TP and FSDP", "ep_overlap"),
    "data_parallel": ("the last microbatch's backward compute left free", "dp_overlap"),
}


@dataclass(frozen=True)
class StepPart:
    """One part of a step: its seconds, what bounds it and the terms it is made of."""

    name: str
    time_s: float
    bound: str
    terms: tuple[Term, ...]
    combine: str = "sum"  # how the terms make time_s: "sum", or "max" (a roofline)


def _bound(terms: tuple[Term, ...], default: str) -> str:
    positive = [t for t in terms if t.seconds > 0]
    return max(positive, key=lambda t: t.seconds).kind if positive else default


def _achievable(prof: ModelProfile, eff: Efficiency) -> float:
    """The chip's achievable fraction (cost/roofline.achievable) of the matrix dtype that does most
    of the FLOPs."""
    sums = prof.flops.sum(axis=0) if prof.flops.ndim > 1 else np.array([prof.flops.sum()])
    matrix = [(float(sums[i]), k[1]) for i, k in enumerate(prof.keys) if k[0] == "matrix"]
    if not matrix:
        return 1.0
    used = prof.chip.flops_rate(max(matrix)[1], "matrix")[0]
    return achievable(prof.chip, used, eff)


def _compute_parts(setup: TrainingSetup, par: Parallelism, prof: ModelProfile) -> list[StepPart]:
    b = microbatch_size(setup.global_batch, par)
    table, flops, nbytes = op_roofline(prof, par, b)
    chip, eff = setup.chip, setup.efficiency
    layer_scale, head = stage_pace(prof, par, op_sums(prof, par, b))
    weight = np.where(prof.in_layers, layer_scale, head) * par.microbatches
    total_flops = flops.sum(axis=-1) if flops.ndim > 1 else flops
    shape = gemm_shape_efficiency(prof, par, b)
    out = []
    for name, phase in zip(COMPUTE_PARTS, range(3), strict=True):
        sel = prof.phase == phase
        cb, mb = sel & table.compute_bound, sel & ~table.compute_bound
        c_s = float(np.sum(table.compute_s[cb] * weight[cb]))
        c_fl = float(np.sum(total_flops[cb] * weight[cb]))
        eager = mb & prof.unfused if prof.unfused is not None else np.zeros_like(mb)
        mb &= ~eager
        m_s = float(np.sum(table.memory_s[mb] * weight[mb]))
        m_b = float(np.sum(nbytes[mb] * weight[mb]))
        e_s = float(np.sum(table.memory_s[eager] * weight[eager]))
        e_b = float(np.sum(nbytes[eager] * weight[eager]))
        mem = OpsMemoryFigures(
            ops=float(mb.sum()),
            bytes=m_b,
            chip=chip.name,
            hbm_bytes_per_s=chip.hbm_bytes_per_s,
            efficiency=eff.hbm,
            microbatches=par.microbatches,
        )
        compute = OpsComputeFigures(
            ops=float(cb.sum()),
            flops=c_fl,
            flops_per_s=c_fl / c_s if c_s else 0.0,
            chip=chip.name,
            efficiency=eff.matrix,
            achievable_fraction=_achievable(prof, eff),
            microbatches=par.microbatches,
            shape_efficiency=_shape_figure(shape, cb, total_flops * weight),
        )
        terms: tuple[Term, ...] = (
            Term("compute-bound ops", c_s, TermKind.COMPUTE, compute),
            Term("memory-bound ops", m_s, TermKind.MEMORY, mem),
        )
        if eager.any():
            figures = mem._replace(ops=float(eager.sum()), bytes=e_b)
            terms += (Term("unfused elementwise kernels", e_s, TermKind.MEMORY, figures),)
        out.append(StepPart(name, c_s + m_s + e_s, _bound(terms, "compute"), terms))
    return out


def _shape_figure(shape: np.ndarray | None, sel: np.ndarray, flops: np.ndarray) -> float | None:
    """The matmuls' shape efficiency of the selected ops, FLOP-weighted as their time adds (harmonic)."""
    if shape is None or not sel.any() or not flops[sel].sum():
        return None
    return float(flops[sel].sum() / (flops[sel] / shape[sel]).sum())


def _comm_part(name: str, ledger: Ledger, scale: float, setup: TrainingSetup, pricer: CommPricer) -> StepPart:
    """One communication part from the ledger: ``scale`` x (its collectives - hidden seconds)."""
    mesh, chip, eff = pricer.mesh, setup.chip, setup.efficiency
    sizes = {a.name: a.size for a in mesh.axes}
    terms: list[Term] = []
    for (kind, axes, nbytes), calls in ledger.comms.get(name, {}).items():
        placed = tuple(a for a in axes if sizes.get(a, 1) > 1)
        if placed:
            comm = Comm(kind, placed, nbytes, calls * scale)
            label = f"{kind} over {','.join(placed)}"
            terms.append(collective_term(comm, mesh, chip, eff, label, pricer.algorithm))
    hidden = ledger.hidden.get(name, 0.0) * scale
    comm_s = sum(t.seconds for t in terms)
    if hidden:
        cover, factor = COVER[name]
        figures = HiddenFigures(communication_s=comm_s, cover=cover, overlap=getattr(eff, factor) if factor else 1.0)
        terms.append(Term("hidden behind compute", -hidden, TermKind.HIDDEN, figures))
    slow = _contention(setup, ledger.contended.get(name, 0.0) * scale)
    parts = tuple(terms) + slow
    return StepPart(name, exposed_s(comm_s, hidden) + sum(t.seconds for t in slow), _bound(parts, "network"), parts)


def _contention(setup: TrainingSetup, hidden_s: float) -> tuple[Term, ...]:
    """The compute lost to ``hidden_s`` seconds of collectives hidden behind it (comm.overlap_contention)."""
    seconds = overlap_contention(setup, hidden_s)
    if not seconds:
        return ()
    figures = ContentionFigures(hidden_s=hidden_s, overlap_cost=setup.stack.overlap_cost, framework=setup.stack.name)
    return (Term("compute slowed by the hidden collectives", seconds, TermKind.OVERHEAD, figures),)


def step_breakdown(setup: TrainingSetup, par: Parallelism, pricer: CommPricer) -> tuple[StepResult, list[StepPart]]:
    """The step of ``par`` (as the search prices it) and its parts with their terms, in PARTS order."""
    prof = profile_for(setup, par.remat)
    ledger = Ledger()
    parts = step_parts(setup, par, pricer, prof, ledger)
    result = step_result(setup, par, pricer, prof, parts)
    m = par.microbatches
    out = {p.name: p for p in _compute_parts(setup, par, prof)}
    for name in COMM_PARTS:
        out[name] = _comm_part(name, ledger, m, setup, pricer)
    out["data_parallel"] = _comm_part("data_parallel", ledger, 1.0, setup, pricer)
    if ledger.fsdp_copy_bytes:  # the stack's copies out of the gather buffer (Framework.gather_copy)
        copy = memory_term(ledger.fsdp_copy_bytes * m, setup.chip, setup.efficiency, "copy out of the gather buffer")
        fsdp = out["fsdp"]
        out["fsdp"] = StepPart("fsdp", fsdp.time_s + copy.seconds, fsdp.bound, (*fsdp.terms, copy))
    pp_terms: tuple[Term, ...] = ()
    if par.pp > 1:
        comm = Comm("permute", ("pp",), _pp_boundary_bytes(setup, par, parts), 2 * par.virtual_stages * m)
        pp_terms = (collective_term(comm, pricer.mesh, setup.chip, setup.efficiency, "permute over pp"),)
        if setup.stack.p2p_sync_s:  # the framework's host synchronisation per send/receive (framework.py)
            sync = SyncFigures(calls=comm.count, seconds_each=setup.stack.p2p_sync_s, framework=setup.stack.name)
            pp_terms += (
                Term("host sync per send/receive", comm.count * setup.stack.p2p_sync_s, TermKind.LATENCY, sync),
            )
    pp_s = sum(t.seconds for t in pp_terms)
    _, hidden = p2p_per_microbatch(setup, par, pricer, parts)
    if hidden:  # hidden behind the next model chunk
        figures = HiddenFigures(communication_s=pp_s, cover="the next model chunk", overlap=1.0)
        pp_terms += (Term("hidden behind compute", -hidden * m, TermKind.HIDDEN, figures),)
        pp_s = result.breakdown["pipeline_p2p"]
    out["pipeline_p2p"] = StepPart("pipeline_p2p", pp_s, _bound(pp_terms, "network"), pp_terms)
    bubble = result.breakdown["pipeline_bubble"]
    t_mb = bubble * par.virtual_stages / (par.pp - 1) if par.pp > 1 else 0.0
    bubble_terms = (
        (
            Term(
                "pipeline bubble",
                bubble,
                TermKind.BUBBLE,
                BubbleFigures(pp=par.pp, virtual_stages=par.virtual_stages, microbatch_s=t_mb),
            ),
        )
        if par.pp > 1
        else ()
    )
    out["pipeline_bubble"] = StepPart("pipeline_bubble", bubble, "bubble", bubble_terms)
    shards = Shards.of(par)
    opt_params = shards.params(prof, par, over_dp=par.zero_stage >= 1)
    opt_cost = optimizer_cost(
        setup.precision, opt_params, clip=setup.stack.grad_clip, foreach=setup.stack.foreach_optimizer
    )
    est = roofline(opt_cost, setup.chip, efficiency=setup.efficiency)
    opt_terms = tuple(est.terms)
    out["optimizer"] = StepPart("optimizer", max(est.compute_s, est.memory_s), est.bound, opt_terms, "max")
    off_terms = tuple(
        host_term(nbytes, setup.chip, what=what)
        for what, nbytes in offload_transfers(setup, par, opt_params, shards.params(prof, par), m)
    )
    out["offload"] = StepPart("offload", sum(t.seconds for t in off_terms), "host", off_terms)
    return result, [out[name] for name in PARTS]


def breakdown_of(setup: TrainingSetup, par: Parallelism) -> list[StepPart]:
    """The parts of ``par``'s step on ``setup`` (its own mesh and collective prices)."""
    pricer = setup.pricer(layout_mesh(setup.topology, par))
    return step_breakdown(setup, par, pricer)[1]
