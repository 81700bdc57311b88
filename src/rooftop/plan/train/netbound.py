"""A lower bound on the communication of every candidate layout at once, before any of their meshes is built, so
that a training search (plan/train/search.py) orders and skips layouts by it without laying their axes on the
topology or pricing a collective.

It rests on one property of every collective rule (cost/collectives.py and each algorithm registered in
cost/algorithms.py): a collective's bandwidth term is the bytes one chip must receive (or send) through the links
the rule uses, over those links' bytes/s, and every link a rule uses is one of the chip's own, so that rate is at
most the chip's ingress ``R``: the sum over the topology's physical dims of what one chip receives from each
(2 links of W on an ICI dim, ring or not; link_count x W through the NVLink switch; its NIC on the scale-out
fabric or DCN: cost/groups.py). The network efficiency divides every rule's bandwidth term
(``collective_time``, ``collective_rate``), the latency only adds or takes a max. So on N > 1 chips, with V the
bytes per device, whatever the algorithm:

- all-gather: each chip receives the N - 1 shards it lacks, at least (N - 1) / N x V / (R x eff). The staged
  (hierarchical) rule takes per level at least that level's received bytes over its inbound (its ``ingress``
  part), and max_l(a_l / in_l) >= sum(a_l) / sum(in_l) with sum(a_l) = (N - 1) / N x V; a flat ring (one way or
  both) enters its slowest level at most at the fastest level's inbound, itself at most R; a tree uses the same
  entry for 2 V;
- reduce-scatter: each chip's contribution to the N - 1 shards it does not keep must leave it, raw or reduced:
  the same bound (and every rule prices it as the all-gather of its input);
- all-reduce: each chip receives at least one value per element of the result, which depends on the others'
  inputs: V / (R x eff) (the staged rule's 2 (N - 1) / N >= 1, in-network V over the last level's inbound, the
  ring's 2 (N - 1) / N, the tree's 2 V);
- all-to-all: the rule takes the max of its parts, one of them the egress (N - 1) x V / N over the sum of the
  groups' inbound: at least (N - 1) / N x V / (R x eff);
- permute: V over one link of a group: at least V / (R x eff).

Across the scale-out network: where the collective's N chips span n_out > 1 fast domains (NVLink domains, TPU
slices: ``scale_out_ways`` lays the axes as the search's meshes do), n = N / n_out of them share a domain, and
every rule enters the scale-out level through at most the NICs of those n chips (B each): the staged rule
prices that level at least at (n_out - 1) shards of at least V / N over B (its ingress part), a flat ring or a
tree enters it at most at n x B, the in-network all-reduce moves n_out shards of at least V / N over B, and the
all-to-all's part on the scale-out group is (n_out - 1) / n_out x V / B. So at least (n_out - 1) / N x V /
(B x eff), and V / (B x eff) for a permute across domains.

Each term of the layout's communication that plan/train/bound.py bounds with the layout's own pricer is bounded
here with these figures instead, term for term no larger (the same bytes, the same share never hidden, the
same launch and sync costs): the tensor-parallel collectives (``tp_bound_s``), the ring-attention shifts
(``cp_bound_s``), the FSDP traffic (``fsdp_bound_s``), the expert all-to-alls (``ep_bound_s``, node-limited
routing at its least, 1 / top_k of the routed bytes), the pipeline's sends (``pipeline_bound_s``) and the
data-parallel reduction (``dp_bound_s``). Per layer and microbatch terms count the layers the pacing stage runs
at the least (bound.step_lower_bounds). tests/unit/test_train_search_bound.py checks the premise against every
registered algorithm and each term against its priced counterpart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import SCALE_OUT_LINKS, Topology
from rooftop.plan.train.bound import mesh_rows
from rooftop.plan.train.comm import tp_pairs_per_layer
from rooftop.plan.train.profile import ModelProfile, held_params

if TYPE_CHECKING:
    from rooftop.plan.train.step import TrainingSetup


def chip_ingress(chip: Chip, topology: Topology) -> float:
    """Bytes/s one chip of the topology can receive over all its links at once (module docstring): per physical
    dim, 2 ICI links, its NVLink switch port (link_count x link rate) or its NIC (fabric, DCN)."""
    total = 0.0
    for d in topology.dims:
        if d.link == "nvlink":
            total += chip.link_count * chip.link_bytes_per_s
        elif d.link in ("fabric", "dcn"):
            total += chip.dcn_bytes_per_s
        else:
            total += 2 * chip.link_bytes_per_s
    return total


def scale_out_rate(chip: Chip, topology: Topology) -> float:
    """Bytes/s one chip receives over the scale-out network (its NIC on each fabric or DCN dim); 0 without one."""
    return chip.dcn_bytes_per_s * sum(d.link in SCALE_OUT_LINKS for d in topology.dims)


#: the mesh axes of a layout in the order plan/train/step.layout_mesh lays them, outermost first
MESH_ORDER = ("dp", "pp", "fsdp", "ep", "cp", "tp")


def scale_out_ways(rows: np.ndarray, topology: Topology) -> np.ndarray:
    """Per candidate row (its first six columns are read) and mesh axis (MESH_ORDER), the chips the axis spans
    over the scale-out network (the product of its segments on fabric or DCN dims: topology.domains_spanned), as
    hardware/topology.make_mesh lays the axes of step.layout_mesh: each, outermost first, takes gcd(what it still
    needs, what is left of a dim) chips from the first dim with any left, then from the dims after it. A row
    whose axes cannot be laid gets some figure (its layout is never priced)."""
    dp, fsdp, pp, ep, cp, tp = (rows[:, i] for i in (0, 1, 3, 4, 5, 2))
    in_fsdp = (ep > 1) & (np.mod(fsdp, ep) == 0)
    sizes = [np.where(in_fsdp | (ep == 1), dp, dp // np.maximum(ep, 1)), pp, np.where(in_fsdp, fsdp // ep, fsdp), ep]
    sizes += [cp, tp]
    dims = [d.size for d in topology.dims]
    out_dim = np.array([d.link in SCALE_OUT_LINKS for d in topology.dims])
    n, k = len(rows), len(dims)
    remaining = np.tile(np.array(dims, dtype=np.int64), (n, 1))
    out = np.ones((n, len(MESH_ORDER)), dtype=np.int64)
    for a, size in enumerate(sizes):
        need = size.astype(np.int64)
        for dim in range(k):  # the dims in order: one with nothing left gives gcd 1, as if skipped
            take = np.gcd(need, remaining[:, dim])
            remaining[:, dim] //= take
            if out_dim[dim]:
                out[:, a] *= take
            need //= take
    return out


def network_floor(
    rows: np.ndarray,
    setup: TrainingSetup,
    prof: ModelProfile,
    per_layer: np.ndarray,
    held: np.ndarray,
    fsdp_reshard: bool = True,
    meshes: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Seconds of communication each candidate row (candidates.ROW_FIELDS) adds to its step at the least, whatever
    the algorithm (module docstring): ``per_layer`` x the per-layer terms (the layers its pacing stage runs per
    step at the least: bound.step_lower_bounds) plus the pipeline's sends and the data-parallel reduction of a
    stage of ``held`` layers (the row's fullest stage: bound.least_held_layers); ``fsdp_reshard``: the search's
    (every row's) choice; ``meshes``: the rows' bound.mesh_rows, when already found (the axes are laid once per
    mesh)."""
    eff = setup.efficiency.network
    net = _Net(chip_ingress(setup.chip, setup.topology) * eff, scale_out_rate(setup.chip, setup.topology) * eff)
    if not net.rate > 0 or not np.isfinite(net.rate) or not len(rows):
        return np.zeros(len(rows))
    if net.out_rate > 0:
        distinct, mesh_of = mesh_rows(rows) if meshes is None else meshes
        net.ways = dict(zip(MESH_ORDER, scale_out_ways(distinct, setup.topology)[mesh_of].T, strict=True))
    tp, pp, ep, cp, m, v = (rows[:, i].astype(float) for i in range(2, 8))
    per_replica = -(-setup.global_batch // (rows[:, 0] * rows[:, 1]))  # layout.replica_batch
    b = (-(-per_replica // rows[:, 6])).astype(float)  # layout.microbatch_size
    act = b * setup.seq_len / cp * setup.cfg.d_model * setup.element_bytes[0]  # a layer's activations, one chip
    per = _tp_s(setup, net, tp, act) + _fsdp_s(setup, net, prof, rows, fsdp_reshard)
    per = per + _ep_s(setup, net, prof, tp, ep, act) + _cp_s(setup, net, tp, cp, act)
    out: np.ndarray = (
        per_layer * per + _pipeline_s(setup, net, pp, v, m, act / tp) + _dp_s(setup, net, prof, rows, held)
    )
    return out


def least_collective_s(
    kind: str,
    n: np.ndarray,
    nbytes: np.ndarray | float,
    rate: float,
    n_out: np.ndarray | int = 1,
    out_rate: float = 0.0,
) -> np.ndarray:
    """The least time of a collective ``kind`` of ``nbytes`` per device on ``n`` chips, whatever the algorithm
    (module docstring): over the chip's ingress ``rate`` (network efficiency applied), (n - 1) / n x V / rate for
    the all-gather, reduce-scatter and all-to-all, V / rate for the all-reduce and a permute; and where the chips
    span ``n_out`` > 1 scale-out domains (``out_rate`` a chip's scale-out ingress), (n_out - 1) / n_out x V /
    (n / n_out x out_rate), V / out_rate for a permute. 0 on one chip."""
    share = 1.0 if kind in ("all-reduce", "permute") else (n - 1) / n
    out: np.ndarray = np.where(n > 1, share * nbytes / rate, 0.0)
    if out_rate > 0:
        cross = 1.0 if kind == "permute" else (n_out - 1) / n_out * n_out / n
        out = np.maximum(out, np.where(np.asarray(n_out) > 1, cross * nbytes / out_rate, 0.0))
    return out


@dataclass
class _Net:
    """The ingress figures of network_floor: all links, the scale-out links, and per mesh axis (MESH_ORDER) the
    chips each row's axis spans over the scale-out network (empty without one)."""

    rate: float
    out_rate: float
    ways: dict[str, np.ndarray] = field(default_factory=dict)

    def out(self, *axes: str) -> np.ndarray | int:
        """The scale-out domains a collective over ``axes`` spans (1 without a scale-out network)."""
        if not self.ways:
            return 1
        found: np.ndarray = np.prod([self.ways[a] for a in axes], axis=0)
        return found

    def least(self, kind: str, n: np.ndarray, nbytes: np.ndarray | float, *axes: str) -> np.ndarray:
        return least_collective_s(kind, n, nbytes, self.rate, self.out(*axes), self.out_rate)


def _tp_s(setup: TrainingSetup, net: _Net, tp: np.ndarray, act: np.ndarray) -> np.ndarray:
    """bound.tp_bound_s: 2 x pairs x (all-gather + reduce-scatter) of the activations, none hidden."""
    if setup.efficiency.tp_overlap > 0:
        return np.zeros(len(tp))
    return 2 * tp_pairs_per_layer(setup.cfg) * 2 * net.least("all-gather", tp, act, "tp")


def _fsdp_s(setup: TrainingSetup, net: _Net, prof: ModelProfile, rows: np.ndarray, reshard: bool) -> np.ndarray:
    """bound.fsdp_bound_s: k x (gathers, twice when resharded, + reduce-scatter, a launch each) of the layer
    group whose weights a chip gathers fewest of, over the dense FSDP axes (fsdp chips, with ep when ep divides
    fsdp: memory.Shards), once over the microbatches when kept gathered."""
    k = min(1.0, setup.stack.overlap_cost)
    if not k:
        return np.zeros(len(rows))
    fsdp, ep = rows[:, 1].astype(float), rows[:, 4]
    _, w_bytes, g_bytes = setup.element_bytes
    tps, tp_of = np.unique(rows[:, 2], return_inverse=True)
    least = np.array([min(held_params(prof, int(t)).layers) for t in tps.tolist()])[tp_of.ravel()]
    launch = setup.stack.launch_s
    once = 1.0 if reshard else 1.0 / rows[:, 6]
    in_fsdp = (ep > 1) & (np.mod(rows[:, 1], ep) == 0)
    n_out = np.where(in_fsdp, net.out("fsdp", "ep"), net.out("fsdp"))
    gather = least_collective_s("all-gather", fsdp, least * w_bytes, net.rate, n_out, net.out_rate)
    reduce = least_collective_s("reduce-scatter", fsdp, least * g_bytes, net.rate, n_out, net.out_rate)
    out: np.ndarray = np.where(fsdp > 1, k * ((gather + launch) * (1 + reshard) + reduce + launch) * once, 0.0)
    return out


def _ep_s(
    setup: TrainingSetup, net: _Net, prof: ModelProfile, tp: np.ndarray, ep: np.ndarray, act: np.ndarray
) -> np.ndarray:
    """bound.ep_bound_s: min(1, k) x 2 x (the dispatch and combine all-to-alls) over ep chips, per layer of the
    model; the routed bytes at their least under node-limited routing (comm.node_limited_factor: min(M, D) /
    top_k with D >= 1 distinct nodes, so at least 1 / top_k)."""
    cfg = setup.cfg
    moe_layers = sum(g.count for g in prof.groups if g.moe)
    k = 1.0 if setup.efficiency.ep_overlap == 0 else min(1.0, setup.stack.overlap_cost)
    if cfg.moe is None or not moe_layers or not k:
        return np.zeros(len(tp))
    a_bytes = setup.element_bytes[0]
    least = 1.0 if not setup.max_nodes_per_token else min(1.0, 1.0 / cfg.moe.top_k)
    routed = act * cfg.moe.top_k / tp * least
    both = routed * (1 + min(1.0, setup.matmul_bytes / a_bytes))
    out: np.ndarray = k * 2 * net.least("all-to-all", ep, both, "ep") * moe_layers / prof.n_layers
    return out


def _cp_s(setup: TrainingSetup, net: _Net, tp: np.ndarray, cp: np.ndarray, act: np.ndarray) -> np.ndarray:
    """bound.cp_bound_s: min(1, k) x 3 (cp - 1) shifts of the K,V chunk over cp."""
    k = min(1.0, setup.stack.overlap_cost)
    if not k:
        return np.zeros(len(cp))
    cfg = setup.cfg
    kv = act / cfg.d_model * 2 * cfg.n_kv_heads * cfg.head_dim / np.minimum(tp, cfg.n_kv_heads)
    out: np.ndarray = k * 3 * (cp - 1) * net.least("permute", cp, kv, "cp")
    return out


def _pipeline_s(
    setup: TrainingSetup, net: _Net, pp: np.ndarray, v: np.ndarray, m: np.ndarray, boundary: np.ndarray
) -> np.ndarray:
    """bound.pipeline_bound_s: 2 v sends of the boundary activations per microbatch, with the stack's sync, over
    the microbatches and the bubble; 0 where the stack hides them behind a chunk (virtual stages)."""
    send = net.least("permute", pp, boundary, "pp") + setup.stack.p2p_sync_s
    hidden = (v > 1) if setup.stack.p2p_overlap else np.zeros(len(pp), dtype=bool)
    out: np.ndarray = np.where((pp > 1) & ~hidden, 2 * v * send * (m + (pp - 1) / v), 0.0)
    return out


def _dp_s(setup: TrainingSetup, net: _Net, prof: ModelProfile, rows: np.ndarray, held: np.ndarray) -> np.ndarray:
    """bound.dp_bound_s: k x the gradient all-reduces of a stage of ``held`` layers (comm.dp_comms): the dense
    gradients over the dense data axes and cp (dp x cp chips), the routed experts' over the mesh's dp axis and cp
    (the rest of dp when ep is taken from it: memory.Shards), V each."""
    k = min(1.0, setup.stack.overlap_cost)
    if not k:
        return np.zeros(len(rows))
    dp, fsdp, tp, _, ep, cp = (rows[:, i].astype(float) for i in range(6))
    g_bytes = setup.element_bytes[2]
    tps, tp_of = np.unique(rows[:, 2], return_inverse=True)
    found = [held_params(prof, int(t)) for t in tps.tolist()]
    dense_held = np.array([h.dense for h in found])[tp_of.ravel()]
    edge = np.array([h.edge for h in found])[tp_of.ravel()]
    share = held / prof.n_layers
    dense = (dense_held * share + edge) / fsdp * g_bytes  # memory.params_per_chip over the dense FSDP shards
    in_fsdp = (ep > 1) & (np.mod(fsdp, ep) == 0)
    in_dp = (ep > 1) & ~in_fsdp
    expert_fsdp = np.where(in_fsdp, fsdp / ep, fsdp)
    expert_dp = np.where(in_dp, dp / ep, dp)
    expert = prof.params_expert * share / (tp * ep) / expert_fsdp * g_bytes
    dense_out = np.where(in_dp, net.out("dp", "ep", "cp"), net.out("dp", "cp"))
    out = least_collective_s("all-reduce", dp * cp, dense, net.rate, dense_out, net.out_rate)
    out = out + net.least("all-reduce", expert_dp * cp, expert, "dp", "cp")
    scaled: np.ndarray = k * out
    return scaled
