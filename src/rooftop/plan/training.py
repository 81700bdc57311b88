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

import numpy as np

from rooftop.cost.collectives import collective_time
from rooftop.cost.cost import Comm
from rooftop.dtypes import dtype_bytes
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, Topology, make_mesh
from rooftop.model.config import Dtypes, TransformerConfig, Workload, layer_groups
from rooftop.model.memory import (
    TrainingPrecision,
    activation_bytes_per_token,
    logits_bytes_per_token,
    param_tree,
    training_bytes_per_param,
)
from rooftop.model.transformer import model_costs
from rooftop.plan.efficiency import TrainingEfficiency
from rooftop.plan.parallelism import Parallelism, microbatch_size

OPTIMIZER_BYTES_PER_PARAM = 4 + 4 + 4 + 2 + 4 + 4 + 4 + 2  # read master, m, v, grad; write master, m, v, bf16 weights
OPTIMIZER_FLOPS_PER_PARAM = 12.0  # Adam: moments, bias correction, sqrt, divide, update (vector unit)
_DEFAULT_DTYPES = Dtypes()
#: a FlashAttention backward recomputes the scores and softmax it did not store: 5 matmuls against the
#: forward's 2 (2.5x; Dao 2023, FlashAttention-2, section 3.1), the extra 0.5x counted as recompute
#: (hardware FLOPs, not model FLOPs), whatever the remat policy.
FLASH_BACKWARD_RECOMPUTE = ("scores", "softmax")
ATTENTION_CORE = ("scores", "softmax", "values")


@dataclass(frozen=True)
class GroupProfile:
    """Per-layer figures of one layer group (per sequence of the microbatch)."""

    name: str
    count: int
    moe: bool
    params: float  # non-expert parameters of one layer
    expert_params: float  # routed-expert parameters of one layer


@dataclass(frozen=True)
class ModelProfile:
    """Per-op figures for ONE sequence, from which any microbatch size is priced fast:
    op flops F (per sequence), weight bytes W (independent of the batch) and activation
    bytes A (per sequence), found from the op costs at batch 1 and batch 2."""

    cfg: TransformerConfig
    seq_len: int
    remat: str
    flops: np.ndarray
    rate: np.ndarray  # peak FLOPs/s x efficiency of each op's (unit, dtype)
    weight_bytes: np.ndarray
    act_bytes: np.ndarray
    group: np.ndarray  # index into groups, -1 for embedding / head ops
    phase: np.ndarray  # 0 forward, 1 backward, 2 recompute
    expert: np.ndarray  # bool
    core: np.ndarray  # bool: attention core (scores, softmax, values)
    groups: tuple[GroupProfile, ...]
    model_flops_per_token: float  # matrix FLOPs of forward + backward, no recompute (MFU numerator)
    hardware_flops_per_token: float  # matrix FLOPs including recompute (HFU numerator)
    params_total: float
    params_expert: float

    @cached_property
    def edge_params(self) -> float:
        """Parameters outside the layers: embedding, output head, final norm (and positions)."""
        return self.params_total - sum(g.count * (g.params + g.expert_params) for g in self.groups)

    @cached_property
    def dense_layer_params(self) -> float:
        return sum(g.count * g.params for g in self.groups)

    @cached_property
    def n_layers(self) -> int:
        return sum(g.count for g in self.groups)

    @cached_property
    def masks(self) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
        """Per layer group: (forward ops, backward + recompute ops, attention core ops)."""
        return tuple(
            (sel & (self.phase == 0), sel & (self.phase > 0), sel & self.core)
            for sel in (self.group == gi for gi in range(len(self.groups)))
        )

    @cached_property
    def in_layers(self) -> np.ndarray:
        return self.group >= 0

    @cached_property
    def layer_backward(self) -> np.ndarray:
        return self.in_layers & (self.phase > 0)

    activation_bytes_per_token: float  # all layers, under the remat policy
    logits_bytes_per_token: float


def _leaves(
    cfg: TransformerConfig, seq_len: int, remat: str, batch: int, dtypes: Dtypes, flash: bool, dropout: bool
) -> list[tuple[str, object]]:
    work = Workload("train", batch, seq_len, causal=flash, flash=flash, dropout=dropout)
    tree = model_costs(cfg, work, dtypes, remat)
    return [(path, node.cost) for path, node in tree.walk() if not node.children]


@lru_cache(maxsize=64)
def model_profile(
    cfg: TransformerConfig,
    seq_len: int,
    remat: str,
    chip: Chip,
    eff: TrainingEfficiency,
    dtypes: Dtypes = _DEFAULT_DTYPES,
    flash: bool = True,
    dropout: bool = False,
) -> ModelProfile:
    """``flash=False``: attention as pre-FlashAttention kernels run it (scores through HBM,
    every pair of the square computed and then masked); ``dropout``: GPT-3 / Megatron-LM
    style dropout on attention probabilities and residual branches."""
    one = _leaves(cfg, seq_len, remat, 1, dtypes, flash, dropout)
    two = _leaves(cfg, seq_len, remat, 2, dtypes, flash, dropout)
    groups = layer_groups(cfg)
    names = [g.name for g in groups]
    rows = []
    for (path, c1), (_, c2) in zip(one, two, strict=True):
        parts = path.split("/")
        flops = c1.flops  # type: ignore[attr-defined]
        if flops:
            (unit, dtype), _ = max(c1.flops_by.items(), key=lambda kv: kv[1])  # type: ignore[attr-defined]
            peak = chip.flops_per_s(dtype, unit)
            rate = peak * (eff.matrix if unit == "matrix" else eff.vector)
        else:
            rate = 1.0
        act = c2.hbm_bytes - c1.hbm_bytes  # type: ignore[attr-defined]
        weight = max(0.0, c1.hbm_bytes - act)  # type: ignore[attr-defined]
        # layer ops sit under model/{forward,backward}/layers/<group>/... or model/recompute/<group>/...
        gname = parts[3] if len(parts) > 3 and parts[2] == "layers" else parts[2] if parts[1] == "recompute" else ""
        grp = names.index(gname) if gname in names else -1
        phase = {"forward": 0, "backward": 1, "recompute": 2}.get(parts[1], 0)
        on_matrix = flops > 0 and _is_matrix(c1)
        rows.append((flops, rate, weight, act, grp, phase, "experts" in parts, parts[-1] in ATTENTION_CORE, on_matrix))
        if flash and phase == 0 and grp >= 0 and parts[-1] in FLASH_BACKWARD_RECOMPUTE:
            rows.append((flops, rate, weight, act, grp, 2, "experts" in parts, True, on_matrix))
    cols = list(zip(*rows, strict=True))
    tree = param_tree(cfg)
    gprof = []
    for g in groups:
        node = tree.find(f"layers/{g.name}")
        expert = 0.0
        if g.moe:
            moe = node.find("moe")
            expert = sum(c.params for c in moe.children if c.name == "experts")
        gprof.append(GroupProfile(g.name, g.count, g.moe, (node.params - expert) / g.count, expert / g.count))
    flops_arr, phase_arr = np.array(cols[0], dtype=float), np.array(cols[5])
    matrix_mask = np.array(cols[8], dtype=float)
    model_fl = float(np.sum(flops_arr * matrix_mask * (phase_arr < 2))) / seq_len
    hw_fl = float(np.sum(flops_arr * matrix_mask)) / seq_len
    return ModelProfile(
        cfg,
        seq_len,
        remat,
        flops_arr,
        np.array(cols[1]),
        np.array(cols[2]),
        np.array(cols[3]),
        np.array(cols[4]),
        phase_arr,
        np.array(cols[6], dtype=bool),
        np.array(cols[7], dtype=bool),
        tuple(gprof),
        model_fl,
        hw_fl,
        tree.params,
        sum(g.expert_params * g.count for g in gprof),
        activation_bytes_per_token(cfg, seq_len, remat, dtypes.activations, flash),
        logits_bytes_per_token(cfg),
    )


def _is_matrix(cost: object) -> bool:
    return any(unit == "matrix" for unit, _ in cost.flops_by)  # type: ignore[attr-defined]


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
    latency term constant, so each (kind, axes) is priced once (cost/collectives.py)."""

    mesh: Mesh
    chip: Chip
    network_eff: float
    _cache: dict[tuple[str, tuple[str, ...]], tuple[float, float]] = field(default_factory=dict)
    _shape: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._shape = self.mesh.shape

    def time(self, kind: str, axes: tuple[str, ...], nbytes: float) -> float:
        axes = tuple(a for a in axes if self._shape.get(a, 1) > 1)
        if not axes or nbytes <= 0:
            return 0.0
        key = (kind, axes)
        if key not in self._cache:
            probe = 1 << 30
            ct = collective_time(Comm(kind, axes, float(probe)), self.mesh, self.chip)
            self._cache[key] = (ct.bandwidth_time_s / probe, ct.latency_time_s)
        per_byte, lat = self._cache[key]
        return max(nbytes * per_byte / self.network_eff, lat)


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
    efficiency: TrainingEfficiency
    precision: TrainingPrecision = field(default_factory=TrainingPrecision)
    dtypes: Dtypes = field(default_factory=Dtypes)
    flash_attention: bool = True
    dropout: bool = False

    @property
    def chips(self) -> int:
        return self.topology.num_chips

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len


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


def _op_times(prof: ModelProfile, par: Parallelism, b: int, bw: float) -> dict[str, np.ndarray]:
    """Per-op times for one microbatch of ``b`` sequences on one chip (see module docstring)."""
    k = par.tp * par.cp
    wshard = par.tp * np.where(prof.expert, par.ep, 1)
    compute = b * prof.flops / (k * prof.rate)
    memory = (prof.weight_bytes / wshard + b * prof.act_bytes / k) / bw
    t = np.maximum(compute, memory)
    return {"t": t, "compute": compute, "memory": memory}


def evaluate(setup: TrainingSetup, par: Parallelism, pricer: CommPricer) -> StepResult:
    """Time and memory of one step of ``par`` (validated by the caller) on ``setup``."""
    cfg, eff, prec = setup.cfg, setup.efficiency, setup.precision
    prof = model_profile(
        cfg, setup.seq_len, par.remat, setup.chip, eff, setup.dtypes, setup.flash_attention, setup.dropout
    )
    b = microbatch_size(setup.global_batch, par)
    ops = _op_times(prof, par, b, setup.chip.hbm_bytes_per_s * eff.hbm)
    t = ops["t"]
    stage_layers = math.ceil(cfg.n_layers / par.pp)
    layer_scale = stage_layers / cfg.n_layers
    in_layers = prof.in_layers
    ops_mb = float(np.sum(t[in_layers]) * layer_scale + np.sum(t[~in_layers]))
    a_bytes, w_bytes, g_bytes = dtype_bytes(setup.dtypes.activations), dtype_bytes(prec.params), dtype_bytes(prec.grads)
    tokens_chip = b * setup.seq_len / par.cp  # tokens of the microbatch one chip's sequence chunk holds
    shards = Shards.of(par)
    br: dict[str, float] = {"compute_and_memory": 0.0}
    tp_mb = cp_mb = fsdp_mb = ep_mb = 0.0
    passes = 3 if par.remat == "full" else 2  # forward, backward (+ forward again under full remat)
    for gi, g in enumerate(prof.groups):
        n = g.count * layer_scale
        fwd_mask, bwd_mask, core_mask = prof.masks[gi]
        fwd = float(t[fwd_mask].sum()) / g.count
        bwd = float(t[bwd_mask].sum()) / g.count
        act = tokens_chip * cfg.d_model * a_bytes
        tp_one = 2 * pricer.time("all-gather", ("tp",), act) + 2 * pricer.time("reduce-scatter", ("tp",), act)
        tp_mb += n * passes * tp_one * (1 - eff.tp_overlap)
        if par.cp > 1:
            kv = tokens_chip * 2 * cfg.n_kv_heads * cfg.head_dim * a_bytes / min(par.tp, cfg.n_kv_heads)
            ring = (par.cp - 1) * pricer.time("permute", ("cp",), kv)
            core = float(t[core_mask].sum()) / g.count
            cp_mb += n * max(0.0, 3 * ring - core)
        if par.fsdp > 1:
            dense_w, expert_w = g.params / par.tp * w_bytes, g.expert_params / (par.tp * par.ep) * w_bytes
            ag = pricer.time("all-gather", shards.dense_fsdp_axes, dense_w)
            ag += pricer.time("all-gather", ("fsdp",), expert_w) if shards.expert_fsdp > 1 else 0.0
            rs = pricer.time("reduce-scatter", shards.dense_fsdp_axes, dense_w * g_bytes / w_bytes)
            rs += (
                pricer.time("reduce-scatter", ("fsdp",), expert_w * g_bytes / w_bytes) if shards.expert_fsdp > 1 else 0
            )
            hide = eff.fsdp_overlap
            fsdp_mb += n * (max(0.0, ag - hide * fwd) + max(0.0, ag + rs - hide * bwd))
        if g.moe and par.ep > 1 and cfg.moe is not None:
            routed = tokens_chip * cfg.moe.top_k * cfg.d_model * a_bytes / par.tp
            ep_mb += n * passes * 2 * pricer.time("all-to-all", ("ep",), routed)
    if par.fsdp > 1:  # the embedding and head: gathered forward and backward, gradients reduce-scattered; at the
        edge = prof.edge_params / par.tp * w_bytes  # ends of the step there is no layer compute to hide them behind
        fsdp_mb += 2 * pricer.time("all-gather", shards.dense_fsdp_axes, edge)
        fsdp_mb += pricer.time("reduce-scatter", shards.dense_fsdp_axes, edge * g_bytes / w_bytes)
    pp_mb = 0.0
    if par.pp > 1:
        boundary = tokens_chip * cfg.d_model * a_bytes / par.tp
        pp_mb = 2 * par.virtual_stages * pricer.time("permute", ("pp",), boundary)
    t_mb = ops_mb + tp_mb + cp_mb + fsdp_mb + ep_mb + pp_mb
    m = par.microbatches
    bubble = t_mb * (par.pp - 1) / par.virtual_stages
    dense_chip, expert_chip = _params_per_chip(prof, par)
    # context-parallel ranks hold the same weights and compute partial gradients: reduce over cp too
    dp_t = pricer.time("all-reduce", (*shards.dense_dp_axes, "cp"), dense_chip / shards.dense_fsdp * g_bytes)
    if shards.expert_dp > 1 or par.cp > 1:
        dp_t += pricer.time("all-reduce", ("dp", "cp"), expert_chip / shards.expert_fsdp * g_bytes)
    bwd_last = float(t[prof.layer_backward].sum()) * layer_scale
    dp_exposed = max(0.0, dp_t - eff.dp_overlap * bwd_last)
    opt_params = shards.params(prof, par, over_dp=par.zero_stage >= 1)
    opt_t = opt_params * OPTIMIZER_BYTES_PER_PARAM / (setup.chip.hbm_bytes_per_s * eff.hbm)
    offload_t = _offload_time(setup, par, opt_params, shards.params(prof, par), m)
    br = {
        "compute_and_memory": ops_mb * m,
        "tensor_parallel": tp_mb * m,
        "context_parallel": cp_mb * m,
        "fsdp": fsdp_mb * m,
        "expert_parallel": ep_mb * m,
        "pipeline_p2p": pp_mb * m,
        "pipeline_bubble": bubble,
        "data_parallel": dp_exposed,
        "optimizer": opt_t,
        "offload": offload_t,
    }
    step = sum(br.values())
    mem = memory_per_chip(setup, par, prof, b)
    usable = setup.chip.hbm_bytes * (1 - eff.memory_reserve)
    peak = setup.chip.flops_per_s(setup.dtypes.activations)
    return StepResult(
        par,
        step,
        br,
        mem,
        setup.chip.hbm_bytes,
        usable,
        setup.tokens_per_step,
        prof.model_flops_per_token * setup.tokens_per_step,
        prof.hardware_flops_per_token * setup.tokens_per_step,
        setup.chips,
        peak,
        _bound(br, ops, in_layers),
    )


def fits_in_memory(setup: TrainingSetup, par: Parallelism) -> tuple[bool, float]:
    """(fits, bytes per chip) without timing the step: the search's cheap first filter."""
    prof = model_profile(
        setup.cfg,
        setup.seq_len,
        par.remat,
        setup.chip,
        setup.efficiency,
        setup.dtypes,
        setup.flash_attention,
        setup.dropout,
    )
    b = microbatch_size(setup.global_batch, par)
    total = sum(memory_per_chip(setup, par, prof, b).values())
    return total <= setup.chip.hbm_bytes * (1 - setup.efficiency.memory_reserve), total


def _bound(br: dict[str, float], ops: dict[str, np.ndarray], in_layers: np.ndarray) -> str:
    comm = sum(v for k, v in br.items() if k not in ("compute_and_memory", "pipeline_bubble", "optimizer", "offload"))
    compute = float(np.sum(np.where(ops["compute"] >= ops["memory"], ops["t"], 0.0)))
    memory = float(np.sum(np.where(ops["compute"] < ops["memory"], ops["t"], 0.0)))
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
    state = _state_bytes(setup.precision)
    shards = Shards.of(par)
    weights = 0.0 if par.offload == "params" else shards.params(prof, par) * state["weights"]
    opt_params = shards.params(prof, par, over_dp=par.zero_stage >= 1)
    opt = 0.0 if par.offload != "none" else opt_params * (state["master"] + state["optimizer"])
    tokens_chip = b * setup.seq_len / par.cp
    stage_layers = math.ceil(setup.cfg.n_layers / par.pp)
    in_flight = min(par.microbatches, par.pp) if par.pp > 1 else 1
    act = prof.activation_bytes_per_token / setup.cfg.n_layers * stage_layers * tokens_chip / par.tp * in_flight
    buffers = 0.0
    if par.fsdp > 1:
        biggest = max(g.params / par.tp + g.expert_params / (par.tp * par.ep) for g in prof.groups)
        buffers = 2 * max(biggest, prof.edge_params / par.tp) * state["weights"]
    return {
        "weights": weights,
        "gradients": shards.params(prof, par, over_dp=par.zero_stage >= 2) * state["grads"],
        "optimizer": opt,
        "activations": act,
        "logits": tokens_chip * prof.logits_bytes_per_token / par.tp,
        "buffers": buffers,
    }
