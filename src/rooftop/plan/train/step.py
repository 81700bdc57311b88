"""A training step under one layout: time, memory per chip, MFU.

Step model (per chip, per optimizer step; every term priced through model/ and cost/):

- ops: every forward, backward (2 x forward) and remat-recompute op of model/transformer.py
  for one microbatch, each timed on the chip as max(compute, memory) (a per-op roofline, so
  small memory-bound ops cost what they cost), sharded evenly over tp x cp (Megatron with
  sequence parallelism; ring attention balanced over causal chunks), layers split over pp
  stages (the stage with ceil(L / pp) layers sets the pace, the last stage also runs the
  unembedding and loss). Weights are read per op sharded over tp (and ep for experts).
- tensor parallelism: per layer per microbatch 2 all-gathers + 2 reduce-scatters of the
  layer's activations forward, the same backward (Korthikanti 2022, sequence parallelism),
  again under full remat; exposed except for ``tp_overlap``.
- context parallelism (ring attention, Liu 2023): per layer, cp - 1 shifts of the K,V chunk
  forward and of K,V,dK,dV backward; hidden behind the attention core, the excess exposed.
- FSDP / ZeRO-3: per layer per microbatch, all-gather the layer's weights forward and again
  backward, reduce-scatter its gradients; prefetched one layer ahead (PyTorch FSDP's forward and
  BACKWARD_PRE prefetch, ZeRO-3's prefetch bucket, XLA's scan), so each hides behind a layer's
  compute and the excess is exposed, and the first gather of a microbatch's pass and its last
  reduce-scatter, with no layer compute before or after them, are exposed whole (Rajbhandari 2020;
  Zhao 2023 PyTorch FSDP). Under full remat the backward's one gather serves the recompute too (the
  recompute runs inside the layer's backward, after its gather).
- data parallelism: once per step, the gradients (already reduce-scattered over fsdp)
  all-reduced over dp (ZeRO-1/2: reduce-scatter + all-gather, the same bytes); ``dp_overlap``
  of it hides behind the last microbatch's backward pass.
- pipeline: activations sent to the next stage per microbatch forward and backward; the
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

import math
from dataclasses import dataclass, field
from functools import cached_property

from rooftop.cost.collectives import collective_time
from rooftop.cost.cost import Comm, Cost
from rooftop.cost.efficiency import Efficiency
from rooftop.cost.roofline import roofline
from rooftop.display import Displayed
from rooftop.dtypes import dtype_bytes
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, Topology, domains_spanned, make_mesh
from rooftop.model.config import Dtypes, TransformerConfig
from rooftop.model.memory import TrainingPrecision, optimizer_update_cost
from rooftop.plan.train.layout import Parallelism, microbatch_size
from rooftop.plan.train.memory import Shards, memory_per_chip, offload_s, params_per_chip
from rooftop.plan.train.profile import GroupProfile, ModelProfile, OpSums, model_profile, op_sums

#: the compute parts of a step (one per phase) and its communication parts hidden per layer
COMPUTE_PARTS = ("compute_forward", "compute_backward", "compute_recompute")
COMM_PARTS = ("tensor_parallel", "context_parallel", "fsdp", "expert_parallel")
#: every part of a step, in the order they are reported
PARTS = (*COMPUTE_PARTS, *COMM_PARTS, "pipeline_p2p", "pipeline_bubble", "data_parallel", "optimizer", "offload")


@dataclass(frozen=True, repr=False)  # the short repr of Displayed
class StepResult(Displayed):
    """One layout's step: times (s), memory per chip (bytes), and whether it fits."""

    parallelism: Parallelism
    step_time_s: float
    breakdown: dict[str, float]
    memory: dict[str, float]
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
        return sum(self.breakdown[k] for k in COMPUTE_PARTS)

    @property
    def memory_per_chip_bytes(self) -> float:
        return sum(self.memory.values())

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


@dataclass
class CommPricer:
    """Collective times on one mesh, cached: cost/collectives.py's bandwidth term (network efficiency
    included) is linear in bytes and its latency term constant, so each (kind, axes) is priced once
    and time = max(bytes x seconds per byte, latency), as ``collective_time`` gives.

    ``rates`` may be shared by the pricers of every mesh on one topology and chip (a search
    does): it is keyed by where the axes lie (their segments), which is all a collective's
    time depends on, so meshes that place an axis alike price it once."""

    mesh: Mesh
    chip: Chip
    network_eff: float
    rates: dict[tuple[object, ...], tuple[float, float]] = field(default_factory=dict)
    _cache: dict[tuple[str, tuple[str, ...]], tuple[float, float]] = field(default_factory=dict)
    _placed: dict[str, tuple[str, tuple[object, ...]]] = field(default_factory=dict)

    def __post_init__(self) -> None:  # where each axis of size > 1 lies
        self._placed = {a.name: (a.name, a.segments) for a in self.mesh.axes if a.size > 1}

    def time(self, kind: str, axes: tuple[str, ...], nbytes: float) -> float:
        if nbytes <= 0:
            return 0.0
        rate = self._cache.get((kind, axes))
        if rate is None:
            rate = self._cache[(kind, axes)] = self._rate(kind, axes)
        per_byte, lat = rate
        if not per_byte and not lat:  # every axis has size 1: nothing moves
            return 0.0
        return max(nbytes * per_byte, lat)

    def _rate(self, kind: str, axes: tuple[str, ...]) -> tuple[float, float]:
        """(seconds per byte, latency seconds); (0, 0) when every axis has size 1."""
        axes = tuple(a for a in axes if a in self._placed)
        if not axes:
            return 0.0, 0.0
        key = (kind, tuple(self._placed[a] for a in axes))
        if key not in self.rates:
            probe = 1 << 30
            ct = collective_time(
                Comm(kind, axes, float(probe)), self.mesh, self.chip, network_efficiency=self.network_eff
            )
            self.rates[key] = (ct.bandwidth_time_s / probe, ct.latency_time_s)
        return self.rates[key]


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
    def optimizer_s_per_param(self) -> float:
        """Seconds per parameter of the optimizer update: its roofline (the larger of compute and
        HBM time), linear in the parameter count."""
        est = roofline(optimizer_cost(self.precision), self.chip, efficiency=self.efficiency)
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
    cfg = setup.cfg
    b = microbatch_size(setup.global_batch, par)
    sums = op_sums(prof, par, b)
    layer_scale = math.ceil(cfg.n_layers / par.pp) / cfg.n_layers
    (fl, fo), (bl, bo), (rl, ro) = sums.phases
    tokens_chip = b * setup.seq_len / par.cp
    shards = Shards.of(par)
    e_tp, e_cp, e_fsdp, e_ep, uncovered = _layer_comm(setup, par, prof, sums, pricer, shards, tokens_chip, ledger)
    per_mb = {
        "compute_forward": fl * layer_scale + fo,
        "compute_backward": bl * layer_scale + bo,
        "compute_recompute": rl * layer_scale + ro,
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
        _dp_exposed(setup, par, prof, pricer, shards, uncovered, ledger),
        opt_params * setup.optimizer_s_per_param,
        offload_s(setup, par, opt_params, shards.params(prof, par), par.microbatches),
    )


def step_result(
    setup: TrainingSetup,
    par: Parallelism,
    pricer: CommPricer,
    prof: ModelProfile,
    parts: StepParts,
    memory: dict[str, float] | None = None,
) -> StepResult:
    """The step of ``par`` from its parts (and memory per chip, found here when not given)."""
    pp_mb = 0.0
    if par.pp > 1:
        pp_mb = 2 * par.virtual_stages * pricer.time("permute", ("pp",), _pp_boundary_bytes(setup, par, parts))
    mb = parts.per_microbatch
    t_mb = sum(mb.values()) + pp_mb
    m = par.microbatches
    br = {
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
    if memory is None:
        memory = memory_per_chip(setup, par, prof, microbatch_size(setup.global_batch, par))
    return StepResult(
        par,
        sum(br.values()),
        br,
        memory,
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


@dataclass
class Ledger:
    """What a step's communication parts are made of, recorded while the step is priced (only when
    a breakdown is asked for, so the search stays fast): per part, the collectives (kind, axes,
    bytes per call -> calls per microbatch or per step) and the seconds hidden behind compute."""

    comms: dict[str, dict[tuple[str, tuple[str, ...], float], float]] = field(default_factory=dict)
    hidden: dict[str, float] = field(default_factory=dict)
    #: per layer group, one layer's collectives per phase: {phase: {part: (seconds, exposed seconds)}}
    layers: dict[str, dict[str, dict[str, tuple[float, float]]]] = field(default_factory=dict)
    edge_fsdp: tuple[float, float] = (0.0, 0.0)  # the embedding and head's FSDP all-gather, reduce-scatter (s)

    def comm(self, part: str, kind: str, axes: tuple[str, ...], nbytes: float, calls: float) -> None:
        if nbytes > 0 and calls > 0:
            per = self.comms.setdefault(part, {})
            per[(kind, axes, nbytes)] = per.get((kind, axes, nbytes), 0.0) + calls

    def hide(self, part: str, seconds: float) -> None:
        self.hidden[part] = self.hidden.get(part, 0.0) + seconds


def _hide(
    avail: float, ring: float, core: float, tp: float, tp_overlap: float, fsdp: float, fsdp_overlap: float
) -> tuple[float, float, float, float]:
    """Hide one phase of one layer's communication behind its compute, each second of compute at most
    once, in order: ring attention's shifts behind the attention core (``core``), then ``tp_overlap``
    of the tensor-parallel collectives, then ``fsdp_overlap`` of the FSDP traffic, each behind the
    compute still free. Returns (compute left free, hidden ring, hidden TP, hidden FSDP)."""
    h_ring = min(ring, core if core < avail else avail)
    avail -= h_ring
    h_tp = min(tp, tp_overlap * avail)
    avail -= h_tp
    h_fsdp = min(fsdp, fsdp_overlap * avail)
    return avail - h_fsdp, h_ring, h_tp, h_fsdp


def exposed_s(total_s: float, hidden_s: float) -> float:
    """What of ``total_s`` is not hidden: 0 when all of it is (not a rounding residue of 1e-18 s)."""
    left = total_s - hidden_s
    return left if left > 1e-12 * total_s else 0.0


def _layer_comm(
    setup: TrainingSetup,
    par: Parallelism,
    prof: ModelProfile,
    sums: OpSums,
    pricer: CommPricer,
    shards: Shards,
    tokens_chip: float,
    ledger: Ledger | None = None,
) -> tuple[float, float, float, float, float]:
    """(exposed tensor-, context-, FSDP- and expert-parallel seconds of one microbatch on the fullest
    stage, the backward compute left free for the data-parallel all-reduce).

    Per layer and phase, compute hides communication at most once (``_hide``): ring attention's
    K,V shifts behind the attention core, then ``tp_overlap`` of the tensor-parallel collectives,
    then ``fsdp_overlap`` of the FSDP gathers (forward and backward) and gradient reduce-scatters
    (backward) behind what is left, then ``ep_overlap`` of the expert all-to-alls behind what is left
    of the compute outside the routed experts. The embedding and head's FSDP traffic (no layer
    compute at the ends of the step) stays exposed."""
    cfg, eff = setup.cfg, setup.efficiency
    a_bytes, w_bytes, g_bytes = setup.element_bytes
    layer_scale = math.ceil(cfg.n_layers / par.pp) / cfg.n_layers
    e_tp = e_cp = e_fsdp = e_ep = 0.0
    recompute = 1 if par.remat == "full" else 0  # the forward's TP collectives run again before the backward
    act = tokens_chip * cfg.d_model * a_bytes
    tp_one = 2 * pricer.time("all-gather", ("tp",), act) + 2 * pricer.time("reduce-scatter", ("tp",), act)
    ring = kv = 0.0
    if par.cp > 1:
        kv = tokens_chip * 2 * cfg.n_kv_heads * cfg.head_dim * a_bytes / min(par.tp, cfg.n_kv_heads)
        ring = (par.cp - 1) * pricer.time("permute", ("cp",), kv)
    uncovered = fill = 0.0
    routed_factor = node_limited_factor(setup.max_nodes_per_token, pricer.mesh, cfg) if par.ep > 1 else 1.0
    for g, (fwd, bwd, core_f, core_b, dense_f, dense_b) in zip(prof.groups, sums.groups, strict=True):
        n = g.count * layer_scale
        ag = rs = 0.0
        if par.fsdp > 1:
            ag, rs = _fsdp_layer(pricer, par, shards, g, w_bytes, g_bytes, ledger, n)
        c = g.count
        tp_b = (1 + recompute) * tp_one
        left_f, f_ring, f_tp, f_fsdp = _hide(fwd / c, ring, core_f / c, tp_one, eff.tp_overlap, ag, eff.fsdp_overlap)
        left, b_ring, b_tp, b_fsdp = _hide(
            bwd / c, 2 * ring, core_b / c, tp_b, eff.tp_overlap, ag + rs, eff.fsdp_overlap
        )
        e_cp += n * exposed_s(3 * ring, f_ring + b_ring)
        e_tp += n * exposed_s(tp_one + tp_b, f_tp + b_tp)
        e_fsdp += n * exposed_s(2 * ag + rs, f_fsdp + b_fsdp)
        if not fill and par.fsdp > 1:  # the pass's first gather and its last reduce-scatter: no compute before or after
            fill = min(f_fsdp, ag) + min(b_fsdp, rs)
        routed = a2a = h_f = h_b = 0.0
        if g.moe and par.ep > 1 and cfg.moe is not None:
            routed = tokens_chip * cfg.moe.top_k * cfg.d_model * a_bytes / par.tp * routed_factor
            a2a = 2 * pricer.time("all-to-all", ("ep",), routed)  # dispatch and combine
            # behind the compute outside the routed experts still free (attention, shared experts): what
            # is left of the layer's compute, and of that compute less the attention core the ring took
            h_f = min(a2a, eff.ep_overlap * min(left_f, max(0.0, dense_f / c - f_ring)))
            h_b = min((1 + recompute) * a2a, eff.ep_overlap * min(left, max(0.0, dense_b / c - b_ring)))
            left -= h_b
            e_ep += n * exposed_s((2 + recompute) * a2a, h_f + h_b)
        uncovered += n * left
        if ledger is not None:
            ledger.hide("expert_parallel", n * (h_f + h_b))
            ledger.layers[g.name] = {
                "forward": {"tensor_parallel": (tp_one, tp_one - f_tp), "context_parallel": (ring, ring - f_ring),
                            "fsdp": (ag, ag - f_fsdp), "expert_parallel": (a2a, a2a - h_f)},
                "backward": {"tensor_parallel": (tp_b, tp_b - b_tp), "context_parallel": (2 * ring, 2 * ring - b_ring),
                             "fsdp": (ag + rs, ag + rs - b_fsdp),
                             "expert_parallel": ((1 + recompute) * a2a, (1 + recompute) * a2a - h_b)},
            }  # fmt: skip
            ledger.hide("context_parallel", n * (f_ring + b_ring))
            ledger.hide("tensor_parallel", n * (f_tp + b_tp))
            ledger.hide("fsdp", n * (f_fsdp + b_fsdp))
            ledger.comm("tensor_parallel", "all-gather", ("tp",), act, n * 2 * (2 + recompute))
            ledger.comm("tensor_parallel", "reduce-scatter", ("tp",), act, n * 2 * (2 + recompute))
            ledger.comm("context_parallel", "permute", ("cp",), kv, n * 3 * (par.cp - 1))
            ledger.comm("expert_parallel", "all-to-all", ("ep",), routed, n * (2 + recompute) * 2)
    e_fsdp += fill
    if ledger is not None:
        ledger.hide("fsdp", -fill)
    if par.fsdp > 1:  # the embedding and head: gathered forward and backward, gradients reduce-scattered; at the
        edge = prof.edge_params / par.tp * w_bytes  # ends of the step there is no layer compute to hide them behind
        axes = shards.dense_fsdp_axes
        edge_ag, edge_rs = (
            pricer.time("all-gather", axes, edge),
            pricer.time("reduce-scatter", axes, edge * g_bytes / w_bytes),
        )
        e_fsdp += 2 * edge_ag + edge_rs
        if ledger is not None:
            ledger.edge_fsdp = (edge_ag, edge_rs)
            ledger.comm("fsdp", "all-gather", axes, edge, 2)
            ledger.comm("fsdp", "reduce-scatter", axes, edge * g_bytes / w_bytes, 1)
    return e_tp, e_cp, e_fsdp, e_ep, uncovered


def node_limited_factor(max_nodes: int, mesh: Mesh, cfg: TransformerConfig) -> float:
    """The share of a token's routed bytes that crosses nodes under node-limited routing (DeepSeek-V3
    report, section 2.1.2: each token goes to experts on at most M nodes, sent once per node over the
    scale-out fabric and forwarded to its experts there over NVLink): min(M, D) / k, where D = n (1 -
    (1 - 1/n)^k) is the expected number of distinct nodes k uniformly routed experts fall on among the
    n nodes the ep axis spans. 1 without a limit (``max_nodes`` 0), within one node, or for a dense model."""
    if not max_nodes or cfg.moe is None or "ep" not in mesh.shape:
        return 1.0
    nodes = domains_spanned(mesh.axis("ep"))
    if nodes <= 1:
        return 1.0
    k = cfg.moe.top_k
    distinct = nodes * (1.0 - (1.0 - 1.0 / nodes) ** k)
    return min(1.0, min(max_nodes, distinct) / k)


def _fsdp_layer(
    pricer: CommPricer,
    par: Parallelism,
    shards: Shards,
    g: GroupProfile,
    w_bytes: float,
    g_bytes: float,
    ledger: Ledger | None = None,
    n: float = 1.0,
) -> tuple[float, float]:
    """One layer's FSDP weight all-gather and gradient reduce-scatter (routed experts only over the rest of fsdp)."""
    dense_w, expert_w = g.params / par.tp * w_bytes, g.expert_params / (par.tp * par.ep) * w_bytes
    axes, grad = shards.dense_fsdp_axes, g_bytes / w_bytes
    ag = pricer.time("all-gather", axes, dense_w)
    rs = pricer.time("reduce-scatter", axes, dense_w * grad)
    if shards.expert_fsdp > 1:
        ag += pricer.time("all-gather", ("fsdp",), expert_w)
        rs += pricer.time("reduce-scatter", ("fsdp",), expert_w * grad)
    if ledger is not None:  # a gather forward and again backward, a reduce-scatter backward
        ledger.comm("fsdp", "all-gather", axes, dense_w, 2 * n)
        ledger.comm("fsdp", "reduce-scatter", axes, dense_w * grad, n)
        if shards.expert_fsdp > 1:
            ledger.comm("fsdp", "all-gather", ("fsdp",), expert_w, 2 * n)
            ledger.comm("fsdp", "reduce-scatter", ("fsdp",), expert_w * grad, n)
    return ag, rs


def _dp_comms(
    setup: TrainingSetup, par: Parallelism, prof: ModelProfile, shards: Shards
) -> list[tuple[tuple[str, ...], float]]:
    """The gradient all-reduces of one step: (axes, bytes per chip)."""
    g_bytes = setup.element_bytes[2]
    dense_chip, expert_chip = params_per_chip(prof, par)
    # context-parallel ranks hold the same weights and compute partial gradients: reduce over cp too
    out = [((*shards.dense_dp_axes, "cp"), dense_chip / shards.dense_fsdp * g_bytes)]
    if shards.expert_dp > 1 or par.cp > 1:
        out.append((("dp", "cp"), expert_chip / shards.expert_fsdp * g_bytes))
    return out


def _dp_exposed(
    setup: TrainingSetup,
    par: Parallelism,
    prof: ModelProfile,
    pricer: CommPricer,
    shards: Shards,
    uncovered: float,
    ledger: Ledger | None = None,
) -> float:
    """The gradient all-reduce over dp (and cp) left after hiding behind ``dp_overlap`` of the last
    microbatch's backward compute that the layers' own communication left free."""
    dp_t = 0.0
    for axes, nbytes in _dp_comms(setup, par, prof, shards):
        dp_t += pricer.time("all-reduce", axes, nbytes)
        if ledger is not None:
            ledger.comm("data_parallel", "all-reduce", axes, nbytes, 1.0)
    hidden = min(dp_t, setup.efficiency.dp_overlap * uncovered)
    if ledger is not None and hidden:
        ledger.hide("data_parallel", hidden)
    return exposed_s(dp_t, hidden)


def optimizer_cost(precision: TrainingPrecision, params: float = 1.0) -> Cost:
    """The optimizer update of ``params`` parameters (model/memory.optimizer_update_cost)."""
    return optimizer_update_cost(precision) * params


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
