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
  backward, reduce-scatter its gradients; prefetched behind the layer's compute, the excess
  exposed (Rajbhandari 2020; Zhao 2023 PyTorch FSDP).
- data parallelism: once per step, the gradients (already reduce-scattered over fsdp)
  all-reduced over dp (ZeRO-1/2: reduce-scatter + all-gather, the same bytes); ``dp_overlap``
  of it hides behind the last microbatch's backward pass.
- pipeline: activations sent to the next stage per microbatch forward and backward; the
  bubble adds (pp - 1) / v microbatch times (1F1B, Narayanan 2021: bubble fraction
  (p - 1) / (v m)).
- expert parallelism: per MoE layer per microbatch, a dispatch and a combine all-to-all of
  the routed tokens forward, the same backward (Lepikhin 2020, GShard).
- optimizer: Adam's update is HBM-bound: the shard's master weights, two moments and
  gradients read, master, moments and bf16 weights written (28 bytes per parameter).
- offload: optimizer state to host memory and back over PCIe each step (ZeRO-Offload,
  Ren 2021); parameters also streamed in per microbatch forward and backward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from rooftop.cost.collectives import collective_time
from rooftop.cost.cost import Comm
from rooftop.cost.efficiency import Efficiency
from rooftop.dtypes import dtype_bytes
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, Topology, make_mesh
from rooftop.model.config import Dtypes, TransformerConfig
from rooftop.model.memory import TrainingPrecision, training_bytes_per_param
from rooftop.plan.parallelism import Parallelism, microbatch_size
from rooftop.plan.training_profile import GroupProfile, ModelProfile, OpSums, model_profile, op_sums

OPTIMIZER_BYTES_PER_PARAM = 4 + 4 + 4 + 2 + 4 + 4 + 4 + 2  # read master, m, v, grad; write master, m, v, bf16 weights
OPTIMIZER_FLOPS_PER_PARAM = 12.0  # Adam: moments, bias correction, sqrt, divide, update (vector unit)


@dataclass(frozen=True)
class StepResult:
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
    """Collective times on one mesh, cached: the bandwidth term is linear in bytes and the
    latency term constant, so each (kind, axes) is priced once (cost/collectives.py).

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
        return max(nbytes * per_byte / self.network_eff, lat)

    def _rate(self, kind: str, axes: tuple[str, ...]) -> tuple[float, float]:
        """(seconds per byte, latency seconds); (0, 0) when every axis has size 1."""
        axes = tuple(a for a in axes if a in self._placed)
        if not axes:
            return 0.0, 0.0
        key = (kind, tuple(self._placed[a] for a in axes))
        if key not in self.rates:
            probe = 1 << 30
            ct = collective_time(Comm(kind, axes, float(probe)), self.mesh, self.chip)
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
    def peak_flops_per_s(self) -> float:
        """The chip's peak in the activation dtype (the MFU denominator)."""
        return self.chip.flops_per_s(self.dtypes.activations)


@dataclass(frozen=True)
class Shards:
    """How the data axes shard dense and routed-expert state. Expert parallelism takes its ep
    ranks from fsdp when ep divides fsdp, else from dp (layout_mesh): experts are then
    ZeRO-sharded only over the rest of that axis, and their gathers and gradient reductions
    run only over the rest too (each ep rank holds different experts)."""

    dense_fsdp: int
    expert_fsdp: int
    dense_dp: int
    expert_dp: int
    dense_fsdp_axes: tuple[str, ...]
    dense_dp_axes: tuple[str, ...]

    @staticmethod
    def of(par: Parallelism) -> Shards:
        in_fsdp = par.ep > 1 and par.fsdp % par.ep == 0
        in_dp = par.ep > 1 and not in_fsdp
        return Shards(
            par.fsdp, par.fsdp // par.ep if in_fsdp else par.fsdp, par.dp, par.dp // par.ep if in_dp else par.dp,
            ("fsdp", "ep") if in_fsdp else ("fsdp",), ("dp", "ep") if in_dp else ("dp",),
        )  # fmt: skip

    def params(self, prof: ModelProfile, par: Parallelism, over_dp: bool = False) -> float:
        """Parameters one chip holds: dense over tp x pp x fsdp, routed experts over tp x pp x ep
        x the rest of fsdp; ``over_dp`` also shards over dp (ZeRO-1/2 state)."""
        dense, expert = _params_per_chip(prof, par)
        return dense / (self.dense_fsdp * (self.dense_dp if over_dp else 1)) + expert / (
            self.expert_fsdp * (self.expert_dp if over_dp else 1)
        )


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
    layouts that differ only in it share them."""

    sums: OpSums
    tokens_chip: float  # tokens of the microbatch one chip's sequence chunk holds
    per_microbatch: tuple[float, float, float, float, float]  # ops, tensor, context, fsdp, expert parallel
    data_parallel: float
    optimizer: float
    offload: float


def step_parts(setup: TrainingSetup, par: Parallelism, pricer: CommPricer, prof: ModelProfile) -> StepParts:
    """StepParts of ``par`` under the profile of its remat policy."""
    cfg, eff = setup.cfg, setup.efficiency
    b = microbatch_size(setup.global_batch, par)
    sums = op_sums(prof, par, b, setup.chip.hbm_bytes_per_s * eff.hbm)
    layer_scale = math.ceil(cfg.n_layers / par.pp) / cfg.n_layers
    ops_mb = float(sums.in_layers * layer_scale + sums.outside)
    tokens_chip = b * setup.seq_len / par.cp
    shards = Shards.of(par)
    comm = _layer_comm(setup, par, prof, sums, pricer, shards, tokens_chip)
    opt_params = shards.params(prof, par, over_dp=par.zero_stage >= 1)
    return StepParts(
        sums,
        tokens_chip,
        (ops_mb, *comm),
        _dp_exposed(setup, par, prof, pricer, shards, sums.layer_backward * layer_scale),
        opt_params * OPTIMIZER_BYTES_PER_PARAM / (setup.chip.hbm_bytes_per_s * eff.hbm),
        _offload_time(setup, par, opt_params, shards.params(prof, par), par.microbatches),
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
    ops_mb, tp_mb, cp_mb, fsdp_mb, ep_mb = parts.per_microbatch
    pp_mb = 0.0
    if par.pp > 1:
        boundary = parts.tokens_chip * setup.cfg.d_model * setup.element_bytes[0] / par.tp
        pp_mb = 2 * par.virtual_stages * pricer.time("permute", ("pp",), boundary)
    t_mb = ops_mb + tp_mb + cp_mb + fsdp_mb + ep_mb + pp_mb
    m = par.microbatches
    br = {
        "compute_and_memory": ops_mb * m,
        "tensor_parallel": tp_mb * m,
        "context_parallel": cp_mb * m,
        "fsdp": fsdp_mb * m,
        "expert_parallel": ep_mb * m,
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
        setup.chip.hbm_bytes,
        setup.chip.hbm_bytes * setup.efficiency.usable_hbm_fraction,
        setup.tokens_per_step,
        prof.model_flops_per_token * setup.tokens_per_step,
        prof.hardware_flops_per_token * setup.tokens_per_step,
        setup.chips,
        setup.peak_flops_per_s,
        _bound(br, parts.sums),
    )


def _layer_comm(
    setup: TrainingSetup,
    par: Parallelism,
    prof: ModelProfile,
    sums: OpSums,
    pricer: CommPricer,
    shards: Shards,
    tokens_chip: float,
) -> tuple[float, float, float, float]:
    """Exposed tensor-, context-, FSDP- and expert-parallel time of one microbatch on the fullest stage."""
    cfg, eff = setup.cfg, setup.efficiency
    a_bytes, w_bytes, g_bytes = setup.element_bytes
    layer_scale = math.ceil(cfg.n_layers / par.pp) / cfg.n_layers
    tp_mb = cp_mb = fsdp_mb = ep_mb = 0.0
    passes = 3 if par.remat == "full" else 2  # forward, backward (+ forward again under full remat)
    act = tokens_chip * cfg.d_model * a_bytes
    tp_one = 2 * pricer.time("all-gather", ("tp",), act) + 2 * pricer.time("reduce-scatter", ("tp",), act)
    for g, (fwd, bwd, core) in zip(prof.groups, sums.groups, strict=True):
        n = g.count * layer_scale
        tp_mb += n * passes * tp_one * (1 - eff.tp_overlap)
        if par.cp > 1:
            kv = tokens_chip * 2 * cfg.n_kv_heads * cfg.head_dim * a_bytes / min(par.tp, cfg.n_kv_heads)
            ring = (par.cp - 1) * pricer.time("permute", ("cp",), kv)
            cp_mb += n * max(0.0, 3 * ring - core / g.count)
        if par.fsdp > 1:
            ag, rs = _fsdp_layer(pricer, par, shards, g, w_bytes, g_bytes)
            hide = eff.fsdp_overlap
            fsdp_mb += n * (max(0.0, ag - hide * (fwd / g.count)) + max(0.0, ag + rs - hide * (bwd / g.count)))
        if g.moe and par.ep > 1 and cfg.moe is not None:
            routed = tokens_chip * cfg.moe.top_k * cfg.d_model * a_bytes / par.tp
            ep_mb += n * passes * 2 * pricer.time("all-to-all", ("ep",), routed)
    if par.fsdp > 1:  # the embedding and head: gathered forward and backward, gradients reduce-scattered; at the
        edge = prof.edge_params / par.tp * w_bytes  # ends of the step there is no layer compute to hide them behind
        fsdp_mb += 2 * pricer.time("all-gather", shards.dense_fsdp_axes, edge)
        fsdp_mb += pricer.time("reduce-scatter", shards.dense_fsdp_axes, edge * g_bytes / w_bytes)
    return tp_mb, cp_mb, fsdp_mb, ep_mb


def _fsdp_layer(
    pricer: CommPricer, par: Parallelism, shards: Shards, g: GroupProfile, w_bytes: float, g_bytes: float
) -> tuple[float, float]:
    """One layer's FSDP weight all-gather and gradient reduce-scatter (routed experts only over the rest of fsdp)."""
    dense_w, expert_w = g.params / par.tp * w_bytes, g.expert_params / (par.tp * par.ep) * w_bytes
    ag = pricer.time("all-gather", shards.dense_fsdp_axes, dense_w)
    ag += pricer.time("all-gather", ("fsdp",), expert_w) if shards.expert_fsdp > 1 else 0.0
    rs = pricer.time("reduce-scatter", shards.dense_fsdp_axes, dense_w * g_bytes / w_bytes)
    rs += pricer.time("reduce-scatter", ("fsdp",), expert_w * g_bytes / w_bytes) if shards.expert_fsdp > 1 else 0
    return ag, rs


def _dp_exposed(
    setup: TrainingSetup, par: Parallelism, prof: ModelProfile, pricer: CommPricer, shards: Shards, bwd_last: float
) -> float:
    """The gradient all-reduce over dp (and cp) left after hiding behind the last backward pass."""
    g_bytes = setup.element_bytes[2]
    dense_chip, expert_chip = _params_per_chip(prof, par)
    # context-parallel ranks hold the same weights and compute partial gradients: reduce over cp too
    dp_t = pricer.time("all-reduce", (*shards.dense_dp_axes, "cp"), dense_chip / shards.dense_fsdp * g_bytes)
    if shards.expert_dp > 1 or par.cp > 1:
        dp_t += pricer.time("all-reduce", ("dp", "cp"), expert_chip / shards.expert_fsdp * g_bytes)
    return max(0.0, dp_t - setup.efficiency.dp_overlap * bwd_last)


def fits_in_memory(setup: TrainingSetup, par: Parallelism) -> tuple[bool, float]:
    """(fits, bytes per chip) without timing the step."""
    prof = profile_for(setup, par.remat)
    total = sum(memory_per_chip(setup, par, prof, microbatch_size(setup.global_batch, par)).values())
    return total <= setup.chip.hbm_bytes * setup.efficiency.usable_hbm_fraction, total


def _bound(br: dict[str, float], sums: OpSums) -> str:
    comm = sum(v for k, v in br.items() if k not in ("compute_and_memory", "pipeline_bubble", "optimizer", "offload"))
    compute, memory = sums.compute_bound, sums.memory_bound
    share = br["compute_and_memory"] / max(compute + memory, 1e-30)
    candidates = {
        "compute": compute * share,
        "memory": memory * share + br["optimizer"],
        "network": comm,
        "pipeline_bubble": br["pipeline_bubble"],
        "offload": br["offload"],
    }
    return max(candidates, key=lambda k: candidates[k])


def _params_per_chip(prof: ModelProfile, par: Parallelism) -> tuple[float, float]:
    """(dense, routed-expert) parameters per chip of the fullest pipeline stage, before
    FSDP/ZeRO sharding: ceil(L / pp) layers' weights plus the embedding and head (the first
    and last stages hold them; counting both is the conservative choice), over tp; routed
    experts also over ep."""
    share = math.ceil(prof.n_layers / par.pp) / prof.n_layers
    return (prof.dense_layer_params * share + prof.edge_params) / par.tp, prof.params_expert * share / (par.tp * par.ep)


def _offload_time(setup: TrainingSetup, par: Parallelism, opt_params: float, params_shard: float, m: int) -> float:
    if par.offload == "none":
        return 0.0
    host = setup.chip.host_bytes_per_s
    if host <= 0:
        return math.inf
    state = _state_bytes(setup.precision)
    t = 2 * opt_params * (state["master"] + state["optimizer"]) / host
    if par.offload == "params":
        t += 2 * m * params_shard * state["weights"] / host
    return t


@lru_cache(maxsize=16)
def _state_bytes(precision: TrainingPrecision) -> dict[str, float]:
    return training_bytes_per_param(precision)


def memory_per_chip(setup: TrainingSetup, par: Parallelism, prof: ModelProfile, b: int) -> dict[str, float]:
    """Bytes per chip: weights (sharded over fsdp, offloaded with offload=params), gradients
    (over fsdp, and dp at ZeRO-2), master copy and optimizer state (over fsdp, and dp at
    ZeRO-1/2; on the host with offload), activations of the stage's layers for the
    microbatches in flight (1F1B: min(m, pp) on the first stage), fp32 logits of one
    microbatch (vocab-parallel over tp), and the FSDP gather buffers (two layers)."""
    return MemoryTerms.of(setup, par, prof, b).breakdown(prof.activation_bytes_per_token, par.zero_stage, par.offload)


@dataclass(frozen=True)
class MemoryTerms:
    """memory_per_chip's figures for one layout before its remat policy, ZeRO stage and offload
    are chosen: the search derives every variant of a layout from one of these."""

    state: dict[str, float]  # bytes per parameter: weights, grads, master, optimizer
    held: float  # parameters one chip holds (over tp x pp x fsdp; experts over ep)
    held_over_dp: float  # the same also sharded over dp (ZeRO-1/2 state)
    n_layers: int
    stage_layers: int
    tokens_chip: float
    tp: int
    in_flight: int
    logits: float
    buffers: float

    @staticmethod
    def of(setup: TrainingSetup, par: Parallelism, prof: ModelProfile, b: int) -> MemoryTerms:
        """From any remat policy's profile: the parameter figures do not depend on it."""
        state = _state_bytes(setup.precision)
        shards = Shards.of(par)
        tokens_chip = b * setup.seq_len / par.cp
        buffers = 0.0
        if par.fsdp > 1:
            biggest = max(g.params / par.tp + g.expert_params / (par.tp * par.ep) for g in prof.groups)
            buffers = 2 * max(biggest, prof.edge_params / par.tp) * state["weights"]
        return MemoryTerms(
            state,
            shards.params(prof, par),
            shards.params(prof, par, over_dp=True),
            setup.cfg.n_layers,
            math.ceil(setup.cfg.n_layers / par.pp),
            tokens_chip,
            par.tp,
            min(par.microbatches, par.pp) if par.pp > 1 else 1,
            tokens_chip * prof.logits_bytes_per_token / par.tp,
            buffers,
        )

    def breakdown(self, act_bytes_per_token: float, zero_stage: int, offload: str) -> dict[str, float]:
        """Bytes per chip by kind (see memory_per_chip) under a remat policy's activation bytes."""
        state = self.state
        opt_params = self.held_over_dp if zero_stage >= 1 else self.held
        act = act_bytes_per_token / self.n_layers * self.stage_layers * self.tokens_chip / self.tp
        return {
            "weights": 0.0 if offload == "params" else self.held * state["weights"],
            "gradients": (self.held_over_dp if zero_stage >= 2 else self.held) * state["grads"],
            "optimizer": 0.0 if offload != "none" else opt_params * (state["master"] + state["optimizer"]),
            "activations": act * self.in_flight,
            "logits": self.logits,
            "buffers": self.buffers,
        }
