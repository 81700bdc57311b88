"""The communication of a training step (plan/train/step.py builds the step from it): collective times on
one mesh (``CommPricer``), what each layer's tensor-, context-, FSDP- and expert-parallel collectives leave
exposed after hiding behind its compute (``layer_comm``), the data-parallel gradient reduction
(``dp_exposed``) and, when a breakdown is asked for, the record of every collective and hidden second
(``Ledger``). The rules are in plan/train/step.py's module docstring; every time comes from
cost/collectives.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rooftop.cost.algorithms import Algorithm
from rooftop.cost.collectives import collective_rate
from rooftop.cost.roofline import memory_term
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, domains_spanned
from rooftop.model.activations import remat_policy
from rooftop.model.config import TransformerConfig
from rooftop.plan.train.layout import Parallelism
from rooftop.plan.train.memory import Shards, params_per_chip
from rooftop.plan.train.profile import GroupProfile, ModelProfile, OpSums, held_params

if TYPE_CHECKING:
    from rooftop.plan.train.step import TrainingSetup


@dataclass
class CommPricer:
    """Collective times on one mesh under the stack's ``algorithm``, cached: cost/collectives.py gives
    each (kind, axes, algorithm) as its closed form in the bytes (``collective_rate``: seconds per byte,
    latency, and whether they add or overlap), so each is priced once and every size after is exact.

    ``rates`` may be shared by the pricers of every mesh on one topology and chip (a search
    does): it is keyed by where the axes lie (their segments), which is all a collective's
    time depends on, so meshes that place an axis alike price it once."""

    mesh: Mesh
    chip: Chip
    network_eff: float
    rates: dict[tuple[object, ...], tuple[float, float, bool]] = field(default_factory=dict)
    algorithm: Algorithm | None = None  # how the library runs the gather family (None: hierarchical)
    _cache: dict[tuple[str, tuple[str, ...]], tuple[float, float, bool]] = field(default_factory=dict)
    _placed: dict[str, tuple[str, tuple[object, ...]]] = field(default_factory=dict)

    def __post_init__(self) -> None:  # where each axis of size > 1 lies
        self._placed = {a.name: (a.name, a.segments) for a in self.mesh.axes if a.size > 1}

    def time(self, kind: str, axes: tuple[str, ...], nbytes: float) -> float:
        """cost/collectives.Rate.time_s, inlined: the search calls it for every layout."""
        if nbytes <= 0:
            return 0.0
        rate = self._cache.get((kind, axes))
        if rate is None:
            rate = self._cache[(kind, axes)] = self._rate(kind, axes)
        per_byte, lat, additive = rate
        if not per_byte and not lat:  # every axis has size 1: nothing moves
            return 0.0
        return nbytes * per_byte + lat if additive else max(nbytes * per_byte, lat)

    def _rate(self, kind: str, axes: tuple[str, ...]) -> tuple[float, float, bool]:
        """(seconds per byte, latency seconds, additive); (0, 0, False) when every axis has size 1."""
        axes = tuple(a for a in axes if a in self._placed)
        if not axes:
            return 0.0, 0.0, False
        key = (kind, tuple(self._placed[a] for a in axes), self.algorithm)
        if key not in self.rates:
            r = collective_rate(
                kind, axes, self.mesh, self.chip, network_efficiency=self.network_eff, algorithm=self.algorithm
            )
            self.rates[key] = (r.per_byte_s, r.latency_s, r.additive)
        return self.rates[key]


@dataclass
class Ledger:
    """What a step's communication parts are made of, recorded while the step is priced (only when
    a breakdown is asked for, so the search stays fast): per part, the collectives (kind, axes,
    bytes per call -> calls per microbatch or per step) and the seconds hidden behind compute."""

    comms: dict[str, dict[tuple[str, tuple[str, ...], float], float]] = field(default_factory=dict)
    hidden: dict[str, float] = field(default_factory=dict)
    #: per layer group, one layer's collectives per phase: {phase: {part: (seconds, exposed seconds)}}
    layers: dict[str, dict[str, dict[str, tuple[float, float]]]] = field(default_factory=dict)
    edge_fsdp: tuple[float, float] = (0.0, 0.0)  # the embedding and head's FSDP traffic forward, backward (s)
    fsdp_copy_bytes: float = 0.0  # HBM bytes of the stack's copies out of the gather buffer (per microbatch)
    #: per part, the seconds hidden behind compute that slow it (``overlap_contention``; per microbatch for the
    #: layers' parts, per step for data_parallel)
    contended: dict[str, float] = field(default_factory=dict)

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


def overlap_contention(setup: TrainingSetup, hidden_s: float) -> float:
    """Compute seconds lost to ``hidden_s`` seconds of collectives hidden behind it: the stack's library runs its
    collectives as kernels on the compute units and HBM the overlapped compute uses (NCCL: a thread block per
    channel), so the compute runs slower while they do; ``Framework.overlap_cost`` seconds per hidden second. The
    gather family and all-to-alls only: NCCL runs a point-to-point send/receive (the pipeline's) on a few channels
    per peer (NCCL_NCHANNELS_PER_NET_PEER, 2 by default), not on every channel as a collective."""
    return setup.stack.overlap_cost * hidden_s


def exposed_s(total_s: float, hidden_s: float) -> float:
    """What of ``total_s`` is not hidden: 0 when all of it is (not a rounding residue of 1e-18 s)."""
    left = total_s - hidden_s
    return left if left > 1e-12 * total_s else 0.0


def tp_pairs_per_layer(cfg: TransformerConfig) -> int:
    """Tensor-parallel all-gather + reduce-scatter pairs per layer and pass (sequence parallelism: one pair
    around each tensor-parallel region, Korthikanti 2022 section 4.2.2). A serial layer has two regions
    (attention, then the MLP on its output); a parallel layer (``parallel_layers``: y = x + Attn(LN x) +
    MLP(LN x)) one: attention and MLP read the same gathered input, whose input matmuls are fused, and their
    outputs are summed before one reduce-scatter (Chowdhery et al. 2022, PaLM, section 2, "Parallel Layers":
    the attention and MLP input matmuls fused, about 15% faster training at large scale)."""
    return cfg.tp_regions_per_layer


def layer_comm(
    setup: TrainingSetup,
    par: Parallelism,
    prof: ModelProfile,
    sums: OpSums,
    pricer: CommPricer,
    shards: Shards,
    tokens_chip: float,
    layer_scale: float,
    ledger: Ledger | None = None,
) -> tuple[float, float, float, float, float]:
    """(exposed tensor-, context-, FSDP- and expert-parallel seconds of one microbatch on the stage that sets
    the pace, which runs ``layer_scale`` of the model's layers (profile.stage_pace), the backward compute left
    free for the data-parallel all-reduce).

    Per layer and phase, compute hides communication at most once (``_hide``): ring attention's
    K,V shifts behind the attention core, then ``tp_overlap`` of the tensor-parallel collectives,
    then ``fsdp_overlap`` of the FSDP gathers (forward and backward) and gradient reduce-scatters
    (backward) behind what is left, then ``ep_overlap`` of the expert all-to-alls behind what is left
    of the compute outside the routed experts. The embedding and head's FSDP traffic (no layer
    compute at the ends of the step) stays exposed."""
    cfg, eff = setup.cfg, setup.efficiency
    a_bytes, w_bytes, g_bytes = setup.element_bytes
    e_tp = e_cp = e_fsdp = e_ep = 0.0
    recompute = 1 if par.remat == "full" else 0  # the forward's expert all-to-alls run again before the backward
    act = tokens_chip * cfg.d_model * a_bytes
    pairs = tp_pairs_per_layer(cfg)
    tp_ag, tp_rs = pricer.time("all-gather", ("tp",), act), pricer.time("reduce-scatter", ("tp",), act)
    tp_one = pairs * (tp_ag + tp_rs)
    rerun = remat_policy(par.remat).tp_rerun  # the TP collectives the recompute runs again (activations.py)
    ag_rerun, rs_rerun = ("all-gather" in rerun) * pairs, ("reduce-scatter" in rerun) * pairs
    tp_redo = ag_rerun * tp_ag + rs_rerun * tp_rs
    ring = kv = 0.0
    if par.cp > 1:
        kv = tokens_chip * 2 * cfg.n_kv_heads * cfg.head_dim * a_bytes / min(par.tp, cfg.n_kv_heads)
        ring = (par.cp - 1) * pricer.time("permute", ("cp",), kv)
    uncovered = fill = 0.0
    hid_tp = hid_cp = hid_fsdp = hid_ep = 0.0  # seconds hidden behind compute per microbatch
    routed_factor = node_limited_factor(setup.max_nodes_per_token, pricer.mesh, cfg) if par.ep > 1 else 1.0
    # FSDP traffic per microbatch: resharded, every microbatch gathers each layer (twice) and reduce-scatters
    # its gradients; not resharded, each layer is gathered once per step (first microbatch's forward) and kept,
    # and its gradients accumulate whole and are reduce-scattered once (last microbatch's backward)
    once = 1.0 if par.fsdp_reshard else 1.0 / par.microbatches
    launch = setup.stack.launch_s
    held = held_params(prof, par.tp)  # the weights one chip gathers: each by its tag (sharding/tensor.share)
    for gi, (g, (fwd, bwd, core_f, core_b, dense_f, dense_b)) in enumerate(zip(prof.groups, sums.groups, strict=True)):
        n = g.count * layer_scale
        ag = rs = 0.0
        if par.fsdp > 1:
            ag, rs = _fsdp_layer(pricer, par, shards, g, held.layers[gi], w_bytes, g_bytes, ledger, n * once)
            ag, rs = ag + launch, rs + launch  # the framework's host cost per collective (framework.py)
        c = g.count
        tp_b = tp_one + tp_redo
        left_f, f_ring, f_tp, f_fsdp = _hide(fwd / c, ring, core_f / c, tp_one, eff.tp_overlap, ag, eff.fsdp_overlap)
        b_ag = ag if par.fsdp_reshard else 0.0  # gathered again for the backward, or kept from the forward
        left, b_ring, b_tp, b_fsdp = _hide(
            bwd / c, 2 * ring, core_b / c, tp_b, eff.tp_overlap, b_ag + rs, eff.fsdp_overlap
        )
        e_cp += n * exposed_s(3 * ring, f_ring + b_ring)
        e_tp += n * exposed_s(tp_one + tp_b, f_tp + b_tp)
        e_fsdp += n * once * exposed_s(ag + b_ag + rs, f_fsdp + b_fsdp)
        hid_tp += n * (f_tp + b_tp)
        hid_cp += n * (f_ring + b_ring)
        hid_fsdp += n * once * (f_fsdp + b_fsdp)
        if not fill and par.fsdp > 1:  # the pass's first gather and its last reduce-scatter: no compute before or after
            fill = (min(f_fsdp, ag) + min(b_fsdp, rs)) * once
        routed = to_experts = a2a = h_f = h_b = 0.0
        if g.moe and par.ep > 1 and cfg.moe is not None:
            routed = tokens_chip * cfg.moe.top_k * cfg.d_model * a_bytes / par.tp * routed_factor
            # per pass, one all-to-all to the experts (the dispatch; backward, the gradient before the down
            # projections) in the matmuls' dtype when smaller, and one back in the activations' (DeepSeek-V3
            # report, section 3.3.2: FP8 dispatch and dgrad, BF16 combine both ways)
            to_experts = routed * min(1.0, setup.matmul_bytes / a_bytes)
            a2a = pricer.time("all-to-all", ("ep",), to_experts) + pricer.time("all-to-all", ("ep",), routed)
            # behind the compute outside the routed experts still free (attention, shared experts): what
            # is left of the layer's compute, and of that compute less the attention core the ring took
            h_f = min(a2a, eff.ep_overlap * min(left_f, max(0.0, dense_f / c - f_ring)))
            h_b = min((1 + recompute) * a2a, eff.ep_overlap * min(left, max(0.0, dense_b / c - b_ring)))
            left -= h_b
            e_ep += n * exposed_s((2 + recompute) * a2a, h_f + h_b)
            hid_ep += n * (h_f + h_b)
        uncovered += n * left
        if ledger is not None:
            ledger.hide("expert_parallel", n * (h_f + h_b))
            ledger.layers[g.name] = {
                "forward": {"tensor_parallel": (tp_one, tp_one - f_tp), "context_parallel": (ring, ring - f_ring),
                            "fsdp": (ag, ag - f_fsdp), "expert_parallel": (a2a, a2a - h_f)},
                "backward": {"tensor_parallel": (tp_b, tp_b - b_tp), "context_parallel": (2 * ring, 2 * ring - b_ring),
                             "fsdp": (b_ag + rs, b_ag + rs - b_fsdp),
                             "expert_parallel": ((1 + recompute) * a2a, (1 + recompute) * a2a - h_b)},
            }  # fmt: skip
            ledger.hide("context_parallel", n * (f_ring + b_ring))
            ledger.hide("tensor_parallel", n * (f_tp + b_tp))
            ledger.hide("fsdp", n * once * (f_fsdp + b_fsdp))
            ledger.comm("tensor_parallel", "all-gather", ("tp",), act, n * (2 * pairs + ag_rerun))
            ledger.comm("tensor_parallel", "reduce-scatter", ("tp",), act, n * (2 * pairs + rs_rerun))
            ledger.comm("context_parallel", "permute", ("cp",), kv, n * 3 * (par.cp - 1))
            ledger.comm("expert_parallel", "all-to-all", ("ep",), to_experts, n * (2 + recompute))
            ledger.comm("expert_parallel", "all-to-all", ("ep",), routed, n * (2 + recompute))
    e_fsdp += fill
    if setup.stack.overlap_cost:  # the compute the hidden collectives took (overlap_contention)
        hid_fsdp -= fill
        e_tp, e_cp = e_tp + overlap_contention(setup, hid_tp), e_cp + overlap_contention(setup, hid_cp)
        e_fsdp, e_ep = e_fsdp + overlap_contention(setup, hid_fsdp), e_ep + overlap_contention(setup, hid_ep)
        if ledger is not None:
            parts = ("tensor_parallel", "context_parallel", "fsdp", "expert_parallel")
            hid = zip(parts, (hid_tp, hid_cp, hid_fsdp, hid_ep), strict=True)
            ledger.contended.update({part: h for part, h in hid if h})
    if ledger is not None:
        ledger.hide("fsdp", -fill)
    if par.fsdp > 1:  # the embedding and head: gathered forward and backward, gradients reduce-scattered; at the
        edge = held.edge * w_bytes  # ends of the step there is no layer compute to hide them behind
        axes = shards.dense_fsdp_axes
        edge_ag, edge_rs = (
            pricer.time("all-gather", axes, edge) + launch,
            pricer.time("reduce-scatter", axes, edge * g_bytes / w_bytes) + launch,
        )
        b_edge_ag = edge_ag if par.fsdp_reshard else 0.0
        e_fsdp += (edge_ag + b_edge_ag + edge_rs) * once
        if ledger is not None:
            ledger.edge_fsdp = (edge_ag * once, (b_edge_ag + edge_rs) * once)
            ledger.comm("fsdp", "all-gather", axes, edge, (1 + par.fsdp_reshard) * once)
            ledger.comm("fsdp", "reduce-scatter", axes, edge * g_bytes / w_bytes, once)
    if par.fsdp > 1 and setup.stack.gather_copy:  # on the compute stream: exposed (Framework.gather_copy)
        copy = setup.stack.gather_copy * fsdp_gathered_bytes(par, prof, shards, w_bytes, layer_scale)
        e_fsdp += memory_term(copy, setup.chip, eff).seconds
        if ledger is not None:
            ledger.fsdp_copy_bytes = copy
    return e_tp, e_cp, e_fsdp, e_ep, uncovered


def fsdp_gathered_bytes(
    par: Parallelism, prof: ModelProfile, shards: Shards, w_bytes: float, layer_scale: float
) -> float:
    """Parameter bytes one chip all-gathers per microbatch on the stage that sets the pace: its layers
    (``layer_scale`` of them; routed experts over tp x ep, when fsdp shards them: ``_fsdp_layer``) and the
    embedding and head, each gathered forward and again backward when resharded, once per step when not
    (``layer_comm``)."""
    experts = 1.0 / par.ep if shards.expert_fsdp > 1 else 0.0
    layers = sum(g.count * (g.params + g.expert_params * experts) for g in prof.groups) * layer_scale
    once = 1.0 if par.fsdp_reshard else 1.0 / par.microbatches
    return (layers + prof.edge_params) / par.tp * w_bytes * (1 + par.fsdp_reshard) * once


def node_limited_factor(max_nodes: int, mesh: Mesh, cfg: TransformerConfig) -> float:
    """The share of a token's routed bytes that crosses nodes under node-limited routing (DeepSeek-V3
    report, section 2.1.2: each token goes to experts on at most M nodes, sent once per node over the
    scale-out fabric and forwarded to its experts there over NVLink): min(M, D) / k, where D = n (1 -
    (1 - 1/n)^k) is the expected number of distinct nodes k uniformly routed experts fall on among the
    n nodes the ep axis spans. 1 without a limit (``max_nodes`` 0), within one node, for a dense model, and
    for a limit that cannot bind (M >= min(k, n): no token's experts fall on more nodes), which leaves the
    routing and its dispatch as without a limit (the once-per-node dispatch is how a binding limit is met)."""
    if not max_nodes or cfg.moe is None or "ep" not in mesh.shape:
        return 1.0
    nodes, k = domains_spanned(mesh.axis("ep")), cfg.moe.top_k
    if nodes <= 1 or max_nodes >= min(k, nodes):
        return 1.0
    distinct = nodes * (1.0 - (1.0 - 1.0 / nodes) ** k)
    return min(1.0, min(max_nodes, distinct) / k)


def _fsdp_layer(
    pricer: CommPricer,
    par: Parallelism,
    shards: Shards,
    g: GroupProfile,
    held: float,
    w_bytes: float,
    g_bytes: float,
    ledger: Ledger | None = None,
    n: float = 1.0,
) -> tuple[float, float]:
    """One layer's FSDP weight all-gather and gradient reduce-scatter (routed experts only over the rest of fsdp);
    ``held``: the layer's other parameters one chip of the TP group holds (profile.held_params)."""
    dense_w, expert_w = held * w_bytes, g.expert_params / (par.tp * par.ep) * w_bytes
    axes, grad = shards.dense_fsdp_axes, g_bytes / w_bytes
    ag = pricer.time("all-gather", axes, dense_w)
    rs = pricer.time("reduce-scatter", axes, dense_w * grad)
    if shards.expert_fsdp > 1:
        ag += pricer.time("all-gather", ("fsdp",), expert_w)
        rs += pricer.time("reduce-scatter", ("fsdp",), expert_w * grad)
    if ledger is not None:  # a gather forward (and again backward when resharded), a reduce-scatter backward
        gathers = (1 + par.fsdp_reshard) * n
        ledger.comm("fsdp", "all-gather", axes, dense_w, gathers)
        ledger.comm("fsdp", "reduce-scatter", axes, dense_w * grad, n)
        if shards.expert_fsdp > 1:
            ledger.comm("fsdp", "all-gather", ("fsdp",), expert_w, gathers)
            ledger.comm("fsdp", "reduce-scatter", ("fsdp",), expert_w * grad, n)
    return ag, rs


def dp_comms(
    setup: TrainingSetup, par: Parallelism, prof: ModelProfile, shards: Shards, held_layers: int | None = None
) -> list[tuple[tuple[str, ...], float]]:
    """The gradient all-reduces of one step: (axes, bytes per chip); ``held_layers``: the layers of the fullest
    stage, when not the layout's own (memory.params_per_chip)."""
    g_bytes = setup.element_bytes[2]
    dense_chip, expert_chip = params_per_chip(prof, par, held_layers)
    # context-parallel ranks hold the same weights and compute partial gradients: reduce over cp too
    out = [((*shards.dense_dp_axes, "cp"), dense_chip / shards.dense_fsdp * g_bytes)]
    if shards.expert_dp > 1 or par.cp > 1:
        out.append((("dp", "cp"), expert_chip / shards.expert_fsdp * g_bytes))
    return out


def dp_exposed(
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
    for axes, nbytes in dp_comms(setup, par, prof, shards):
        dp_t += pricer.time("all-reduce", axes, nbytes)
        if ledger is not None:
            ledger.comm("data_parallel", "all-reduce", axes, nbytes, 1.0)
    hidden = min(dp_t, setup.efficiency.dp_overlap * uncovered)
    slow = overlap_contention(setup, hidden)
    if ledger is not None and hidden:
        ledger.hide("data_parallel", hidden)
        if slow:
            ledger.contended["data_parallel"] = hidden
    return exposed_s(dp_t, hidden) + slow
