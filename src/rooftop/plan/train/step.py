"""A training step under one layout: time, memory per chip, MFU.

Step model (per chip, per optimizer step; every term priced through model/ and cost/):

- ops: every forward, backward (2 x forward) and remat-recompute op of model/transformer.py
  for one microbatch, each timed on the chip as max(compute, memory) (a per-op roofline, so
  small memory-bound ops cost what they cost), sharded evenly over tp x cp (Megatron with
  sequence parallelism; ring attention balanced over causal chunks), layers split over pp
  stages (the stage with ceil(L / pp) layers sets the pace, the last stage also runs the
  unembedding and loss; with ``pipeline_balance`` the last stage takes fewer layers for them,
  layout.stage_split). Weights are read per op sharded over tp (and ep for experts).
- tensor parallelism: per layer per microbatch 2 all-gathers + 2 reduce-scatters (a parallel
  layer: 1 + 1, comm.tp_pairs_per_layer) of the layer's activations forward, the same backward
  (Korthikanti 2022, sequence parallelism),
  again those the remat policy reruns (full: all; selective-op: the all-gathers, whose outputs it does not
  keep); exposed except for ``tp_overlap``.
- context parallelism (ring attention, Liu 2023): per layer, cp - 1 shifts of the K,V chunk
  forward and of K,V,dK,dV backward; hidden behind the attention core, the excess exposed.
- FSDP / ZeRO-3: per layer per microbatch, all-gather the layer's weights forward and again
  backward (not with ``fsdp_reshard`` off: kept gathered in between), reduce-scatter its
  gradients; prefetched one layer ahead (PyTorch FSDP's forward and BACKWARD_PRE prefetch,
  ZeRO-3's prefetch bucket, XLA's scan), so each hides behind a layer's compute and the excess
  is exposed, and the first gather of a microbatch's pass and its last reduce-scatter, with no
  layer compute before or after them, are exposed whole (Rajbhandari 2020; Zhao 2023 PyTorch
  FSDP). Under full remat the backward's one gather serves the recompute too (the recompute runs
  inside the layer's backward, after its gather). A stack that copies each gather's output into the
  parameters on the compute stream (FSDP2, ``Framework.gather_copy``) adds that copy, never hidden.
- data parallelism: once per step, the gradients (already reduce-scattered over fsdp)
  all-reduced over dp (ZeRO-1/2: reduce-scatter + all-gather, the same bytes); ``dp_overlap``
  of it hides behind the last microbatch's backward pass.
- pipeline: activations sent to the next stage per microbatch forward and backward (with the
  stack's ``p2p_overlap`` under the interleaved schedule, hidden behind one model chunk's forward or
  backward, the excess exposed); the
  bubble adds (pp - 1) / v microbatch times (1F1B, Narayanan 2021: bubble fraction
  (p - 1) / (v m)).
- expert parallelism: per MoE layer per microbatch, a dispatch and a combine all-to-all of
  the routed tokens forward, the same backward (Lepikhin 2020, GShard); ``ep_overlap`` of them
  hides behind the layer's compute outside the routed experts (attention, shared experts) still
  free after TP and FSDP (DeepSeek-V3's DualPipe overlaps one microbatch's all-to-all with
  another's compute); with node-limited routing only min(M, distinct nodes) copies of a token
  cross the fabric (``node_limited_factor``).
- optimizer: the chosen optimizer's update of the chip's shard on the roofline
  (model/memory.optimizer_update_cost: mixed-precision Adam reads gradients, master weights and
  two moments and writes them back with the bf16 weights, 28 bytes per parameter; SGD fewer).
- offload: optimizer state to host memory and back over PCIe each step (ZeRO-Offload,
  Ren 2021); parameters also streamed in per microbatch forward and backward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from rooftop.cost.cost import Cost
from rooftop.cost.efficiency import Efficiency
from rooftop.cost.roofline import roofline
from rooftop.display import Displayed
from rooftop.dtypes import dtype_bytes
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, Topology, make_mesh
from rooftop.model.config import TransformerConfig
from rooftop.model.memory import TrainingPrecision, optimizer_update_cost
from rooftop.model.workload import Dtypes
from rooftop.plan.train.comm import CommPricer, Ledger, dp_exposed, layer_comm
from rooftop.plan.train.framework import Framework, default_framework
from rooftop.plan.train.layout import Parallelism, microbatch_size
from rooftop.plan.train.memory import Shards, memory_per_chip, offload_s
from rooftop.plan.train.parts import MemoryParts, StepBreakdown, StepPartName
from rooftop.plan.train.profile import ModelProfile, OpSums, model_profile, op_sums, stage_pace

#: the compute parts of a step (one per phase) and its communication parts hidden per layer
COMPUTE_PARTS: tuple[StepPartName, ...] = ("compute_forward", "compute_backward", "compute_recompute")
COMM_PARTS: tuple[StepPartName, ...] = ("tensor_parallel", "context_parallel", "fsdp", "expert_parallel")
#: every part of a step, in the order they are reported (the fields of parts.StepBreakdown)
PARTS: tuple[StepPartName, ...] = (
    *COMPUTE_PARTS, *COMM_PARTS, "pipeline_p2p", "pipeline_bubble", "data_parallel", "optimizer", "offload"
)  # fmt: skip


@dataclass(frozen=True, repr=False)  # the short repr of Displayed
class StepResult(Displayed):
    """One layout's step: times (s), memory per chip (bytes), and whether it fits."""

    parallelism: Parallelism
    step_time_s: float
    breakdown: StepBreakdown
    memory: MemoryParts
    hbm_bytes: float
    usable_hbm_bytes: float
    tokens_per_step: float
    model_flops_per_step: float
    hardware_flops_per_step: float
    chips: int
    peak_flops_per_s: float
    bound: str
    notes: tuple[str, ...] = field(default=())

    @property
    def compute_s(self) -> float:
        """The compute parts of the step (forward, backward and recompute ops)."""
        b = self.breakdown
        return b.compute_forward + b.compute_backward + b.compute_recompute

    @property
    def memory_per_chip_bytes(self) -> float:
        return self.memory.total

    @property
    def fits(self) -> bool:
        return self.memory_per_chip_bytes <= self.usable_hbm_bytes

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s

    @property
    def mfu(self) -> float:
        """Model FLOPs utilization (PaLM, Chowdhery 2022, appendix B): model FLOPs per step
        (6N + attention, no recompute) / (chips x peak x step time)."""
        return self.model_flops_per_step / (self.chips * self.peak_flops_per_s * self.step_time_s)

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilization: as MFU but counting the remat recompute."""
        return self.hardware_flops_per_step / (self.chips * self.peak_flops_per_s * self.step_time_s)


def layout_mesh(topology: Topology, par: Parallelism) -> Mesh:
    """Lay the layout's axes on the topology (dp, pp, fsdp, ep, cp, tp, outermost first);
    expert parallelism takes the inner factor of the data axes it shares."""
    axes: dict[str, int] = {}
    ep_in_fsdp = par.ep > 1 and par.fsdp % par.ep == 0
    dp = par.dp if ep_in_fsdp or par.ep == 1 else par.dp // par.ep
    fsdp = par.fsdp // par.ep if ep_in_fsdp else par.fsdp
    for name, size in (
        ("dp", dp),
        ("pp", par.pp),
        ("fsdp", fsdp),
        ("ep", par.ep if par.ep > 1 else 1),
        ("cp", par.cp),
        ("tp", par.tp),
    ):
        if size > 1:
            axes[name] = size
    return make_mesh(topology, axes or {"dp": 1})


@dataclass(frozen=True)
class TrainingSetup:
    """What is being trained, on what: the inputs shared by every layout of a search."""

    cfg: TransformerConfig
    chip: Chip
    topology: Topology
    global_batch: int  # sequences per optimizer step
    seq_len: int
    efficiency: Efficiency
    precision: TrainingPrecision = field(default_factory=TrainingPrecision)
    dtypes: Dtypes = field(default_factory=Dtypes)
    flash_attention: bool = True
    dropout: bool = False
    max_nodes_per_token: int = 0  # node-limited MoE routing (0: none; node_limited_factor)
    framework: Framework | None = None  # the stack that runs the step (None: the chip kind's default)
    fused_elementwise: bool | None = None  # elementwise ops fused (compiled); None: the framework's

    @property
    def fused(self) -> bool:
        """Whether the elementwise ops run fused (compiled) or eagerly (model/eager.py): the job's
        ``--fix compile``, else the framework's."""
        return self.stack.fused_elementwise if self.fused_elementwise is None else self.fused_elementwise

    @cached_property
    def stack(self) -> Framework:
        """The framework that runs the step: the one given, else the chip kind's default
        (plan/train/framework.py). Its overlap rules apply through ``Framework.efficiency``, which
        callers fold into ``efficiency`` before their own overrides."""
        return self.framework or default_framework(self.chip)

    def pricer(self, mesh: Mesh, network_eff: float | None = None) -> CommPricer:
        """Collective times on ``mesh`` as this setup's framework runs them."""
        eff = self.efficiency.network if network_eff is None else network_eff
        return CommPricer(mesh, self.chip, eff, algorithm=self.stack.algorithm)

    @cached_property
    def chips(self) -> int:
        return self.topology.num_chips

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    @cached_property
    def element_bytes(self) -> tuple[float, float, float]:
        """Bytes of one activation, weight and gradient element."""
        act, prec = self.dtypes.activations, self.precision
        return dtype_bytes(act), dtype_bytes(prec.params), dtype_bytes(prec.grads)

    @cached_property
    def matmul_bytes(self) -> float:
        """Bytes of one element in the weight matmuls' dtype (the activations' when none is set)."""
        return dtype_bytes(self.dtypes.matmul or self.dtypes.activations)

    @cached_property
    def optimizer_s_per_param(self) -> float:
        """Seconds per parameter of the optimizer update: its roofline (the larger of compute and
        HBM time), linear in the parameter count; with the framework's gradient clipping, also its
        passes over the gradients."""
        cost = optimizer_cost(self.precision, clip=self.stack.grad_clip, foreach=self.stack.foreach_optimizer)
        est = roofline(cost, self.chip, efficiency=self.efficiency)
        return max(est.compute_s, est.memory_s)

    @cached_property
    def peak_flops_per_s(self) -> float:
        """The chip's peak in the activation dtype (the MFU denominator)."""
        return self.chip.flops_per_s(self.dtypes.activations)


def profile_for(setup: TrainingSetup, remat: str) -> ModelProfile:
    """The (cached) model profile of ``setup`` under a remat policy."""
    return model_profile(
        setup.cfg,
        setup.seq_len,
        remat,
        setup.chip,
        setup.efficiency,
        setup.dtypes,
        setup.flash_attention,
        setup.dropout,
        setup.stack.attention_cap(setup.chip) if setup.flash_attention else 0.0,
        setup.fused,
        setup.stack.expand_kv,
        setup.stack.loss_fp32,
    )


def evaluate(setup: TrainingSetup, par: Parallelism, pricer: CommPricer) -> StepResult:
    """Time and memory of one step of ``par`` (validated by the caller) on ``setup``."""
    prof = profile_for(setup, par.remat)
    return step_result(setup, par, pricer, prof, step_parts(setup, par, pricer, prof))


@dataclass(frozen=True)
class StepParts:
    """A step's figures that do not depend on the pipeline's interleaving (virtual stages):
    layouts that differ only in it share them. Seconds per microbatch on the fullest stage
    (``per_microbatch``: each compute phase and each exposed communication part) and per step."""

    sums: OpSums
    tokens_chip: float  # tokens of the microbatch one chip's sequence chunk holds
    per_microbatch: dict[str, float]
    data_parallel: float
    optimizer: float
    offload: float


def step_parts(
    setup: TrainingSetup, par: Parallelism, pricer: CommPricer, prof: ModelProfile, ledger: Ledger | None = None
) -> StepParts:
    """StepParts of ``par`` under the profile of its remat policy; ``ledger`` (when given) records
    every collective and hidden second for the step's terms (``step_breakdown``)."""
    b = microbatch_size(setup.global_batch, par)
    sums = op_sums(prof, par, b)
    layer_scale, head = stage_pace(prof, par, sums)
    (fl, fo), (bl, bo), (rl, ro) = sums.phases
    tokens_chip = b * setup.seq_len / par.cp
    shards = Shards.of(par)
    e_tp, e_cp, e_fsdp, e_ep, uncovered = layer_comm(
        setup, par, prof, sums, pricer, shards, tokens_chip, layer_scale, ledger
    )
    per_mb = {
        "compute_forward": fl * layer_scale + fo * head,
        "compute_backward": bl * layer_scale + bo * head,
        "compute_recompute": rl * layer_scale + ro * head,
        "tensor_parallel": e_tp,
        "context_parallel": e_cp,
        "fsdp": e_fsdp,
        "expert_parallel": e_ep,
    }
    opt_params = shards.params(prof, par, over_dp=par.zero_stage >= 1)
    return StepParts(
        sums,
        tokens_chip,
        per_mb,
        dp_exposed(setup, par, prof, pricer, shards, uncovered, ledger),
        opt_params * setup.optimizer_s_per_param,
        offload_s(setup, par, opt_params, shards.params(prof, par), par.microbatches),
    )


def step_breakdown_s(setup: TrainingSetup, par: Parallelism, pricer: CommPricer, parts: StepParts) -> dict[str, float]:
    """The step's seconds by part (PARTS) from its parts: per microbatch x microbatches, the bubble, per step;
    the step time is the sum of the values in this order (a search ranks by it before building the result)."""
    mb = parts.per_microbatch
    pp_mb = p2p_per_microbatch(setup, par, pricer, parts)[0]  # no contention: NCCL runs p2p on few channels
    t_mb = sum(mb.values()) + pp_mb
    m = par.microbatches
    return {
        "compute_forward": mb["compute_forward"] * m,
        "compute_backward": mb["compute_backward"] * m,
        "compute_recompute": mb["compute_recompute"] * m,
        "tensor_parallel": mb["tensor_parallel"] * m,
        "context_parallel": mb["context_parallel"] * m,
        "fsdp": mb["fsdp"] * m,
        "expert_parallel": mb["expert_parallel"] * m,
        "pipeline_p2p": pp_mb * m,
        "pipeline_bubble": t_mb * (par.pp - 1) / par.virtual_stages,
        "data_parallel": parts.data_parallel,
        "optimizer": parts.optimizer,
        "offload": parts.offload,
    }


def p2p_per_microbatch(
    setup: TrainingSetup, par: Parallelism, pricer: CommPricer, parts: StepParts
) -> tuple[float, float]:
    """(exposed, hidden) seconds of one microbatch's pipeline sends/receives: one forward and one backward per
    virtual stage, each with the stack's host sync; under the stack's ``p2p_overlap`` and an interleaved
    schedule each hides behind one model chunk's forward or backward, the excess exposed."""
    if par.pp <= 1:
        return 0.0, 0.0
    send = pricer.time("permute", ("pp",), _pp_boundary_bytes(setup, par, parts)) + setup.stack.p2p_sync_s
    v, mb = par.virtual_stages, parts.per_microbatch
    if not (setup.stack.p2p_overlap and v > 1):
        return 2 * v * send, 0.0
    fwd, bwd = mb["compute_forward"] / v, (mb["compute_backward"] + mb["compute_recompute"]) / v
    exposed = v * (max(0.0, send - fwd) + max(0.0, send - bwd))
    return exposed, 2 * v * send - exposed


def step_result(
    setup: TrainingSetup,
    par: Parallelism,
    pricer: CommPricer,
    prof: ModelProfile,
    parts: StepParts,
    memory: dict[str, float] | None = None,
) -> StepResult:
    """The step of ``par`` from its parts (and memory per chip, found here when not given): the typed parts
    (parts.py) built from the plain figures the search ranks by."""
    br = step_breakdown_s(setup, par, pricer, parts)
    if memory is None:
        memory = memory_per_chip(setup, par, prof, microbatch_size(setup.global_batch, par))
    return StepResult(
        par,
        sum(br.values()),
        StepBreakdown(**br),
        MemoryParts(**memory),
        setup.chip.hbm_capacity_bytes,
        setup.chip.hbm_capacity_bytes * setup.efficiency.usable_hbm_fraction,
        setup.tokens_per_step,
        prof.model_flops_per_token * setup.tokens_per_step,
        prof.hardware_flops_per_token * setup.tokens_per_step,
        setup.chips,
        setup.peak_flops_per_s,
        _bound(br, parts.sums),
    )


def _pp_boundary_bytes(setup: TrainingSetup, par: Parallelism, parts: StepParts) -> float:
    """Activations a stage sends to the next per microbatch (sequence-parallel over tp)."""
    return parts.tokens_chip * setup.cfg.d_model * setup.element_bytes[0] / par.tp


def optimizer_cost(
    precision: TrainingPrecision, params: float = 1.0, clip: bool = False, foreach: bool = False
) -> Cost:
    """The optimizer update of ``params`` parameters (model/memory.optimizer_update_cost); with ``clip``,
    gradient clipping by the global norm before it: one pass reading the gradients (the norm: a multiply
    and an add per element) and one reading and writing them (the scaling: a multiply per element); with
    ``foreach``, an Adam update run as PyTorch's foreach AdamW (``foreach_adam_extra_bytes``)."""
    cost = optimizer_update_cost(precision)
    g = dtype_bytes(precision.grads)
    if clip:
        cost = cost + Cost.typed({("vector", "fp32"): 3.0}, {"optimizer": 3 * g})
    if foreach and precision.optimizer in ("adam", "adamw"):
        cost = cost + Cost.typed({}, {"optimizer": foreach_adam_extra_bytes(precision)})
    return cost * params


def foreach_adam_extra_bytes(precision: TrainingPrecision) -> float:
    """HBM bytes per parameter of PyTorch's foreach AdamW beyond one fused pass (torch/optim/adamw.py,
    _multi_tensor_adamw, torch 2.5-2.6: one kernel per line, each reading its operands and writing its
    result): params *= 1 - lr wd (read and write the weights u); exp_avg.lerp_(grad) (2 s + g); exp_avg_sq *=
    b2 (2 s); exp_avg_sq.addcmul_(grad, grad) (2 s + g); sqrt, / bias correction, + eps, each into the denominator
    (3 x 2 s); params.addcdiv_(exp_avg, denom) (2 u + 2 s): 4 u + 14 s + 2 g, with s the bytes of one state
    element; the fused update (model/memory.optimizer_update_cost) reads and writes each once: g + 2 u + 4 s
    of them. Beyond it: 2 u + 10 s + g (u: the master copy's bytes, else the weights')."""
    u = dtype_bytes(precision.master or precision.params)
    s = dtype_bytes(precision.optimizer_state)
    return 2 * u + 10 * s + dtype_bytes(precision.grads)


def fits_in_memory(setup: TrainingSetup, par: Parallelism) -> tuple[bool, float]:
    """(fits, bytes per chip) without timing the step."""
    prof = profile_for(setup, par.remat)
    total = sum(memory_per_chip(setup, par, prof, microbatch_size(setup.global_batch, par)).values())
    return total <= setup.chip.hbm_capacity_bytes * setup.efficiency.usable_hbm_fraction, total


def _bound(br: dict[str, float], sums: OpSums) -> str:
    ops = br["compute_forward"] + br["compute_backward"] + br["compute_recompute"]
    comm = br["tensor_parallel"] + br["context_parallel"] + br["fsdp"] + br["expert_parallel"]
    comm += br["pipeline_p2p"] + br["data_parallel"]
    compute, memory = sums.compute_bound, sums.memory_bound
    share = ops / max(compute + memory, 1e-30)
    candidates = {
        "compute": compute * share,
        "memory": memory * share + br["optimizer"],
        "network": comm,
        "pipeline_bubble": br["pipeline_bubble"],
        "offload": br["offload"],
    }
    return max(candidates, key=lambda k: candidates[k])
