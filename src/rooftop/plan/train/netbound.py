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

Each term of the layout's communication that plan/train/bound.py bounds with the layout's own pricer is bounded
here with these figures instead, term for term no larger (the same bytes, the same share never hidden, the
same launch and sync costs): the tensor-parallel collectives (``tp_bound_s``), the FSDP traffic
(``fsdp_bound_s``), the expert all-to-alls (``ep_bound_s``, node-limited routing at its least, 1 / top_k of
the routed bytes), the pipeline's sends (``pipeline_bound_s``) and the data-parallel reduction
(``dp_bound_s``). Per layer and microbatch terms count the layers the pacing stage runs at the least
(bound.step_lower_bounds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Topology
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


def network_floor(
    rows: np.ndarray,
    setup: TrainingSetup,
    prof: ModelProfile,
    per_layer: np.ndarray,
    held: np.ndarray,
    fsdp_reshard: bool = True,
) -> np.ndarray:
    """Seconds of communication each candidate row (search.ROW_FIELDS) adds to its step at the least, whatever
    its mesh and the algorithm (module docstring): ``per_layer`` x the per-layer terms (the layers its pacing
    stage runs per step at the least: bound.step_lower_bounds) plus the pipeline's sends and the data-parallel
    reduction of a stage of ``held`` layers (the row's fullest stage: bound.least_held_layers);
    ``fsdp_reshard``: the search's (every row's) choice."""
    rate = chip_ingress(setup.chip, setup.topology) * setup.efficiency.network
    if not rate > 0 or not np.isfinite(rate) or not len(rows):
        return np.zeros(len(rows))
    tp, pp, ep, cp, m, v = (rows[:, i].astype(float) for i in range(2, 8))
    per_replica = -(-setup.global_batch // (rows[:, 0] * rows[:, 1]))  # layout.replica_batch
    b = (-(-per_replica // rows[:, 6])).astype(float)  # layout.microbatch_size
    act = b * setup.seq_len / cp * setup.cfg.d_model * setup.element_bytes[0]  # a layer's activations, one chip
    per = _tp_s(setup, tp, act, rate) + _fsdp_s(setup, prof, rows, rate, fsdp_reshard)
    per = per + _ep_s(setup, prof, tp, ep, act, rate)
    out: np.ndarray = (
        per_layer * per + _pipeline_s(setup, pp, v, m, act / tp, rate) + _dp_s(setup, prof, rows, held, rate)
    )
    return out


def least_collective_s(kind: str, n: np.ndarray, nbytes: np.ndarray | float, rate: float) -> np.ndarray:
    """The least time of a collective ``kind`` of ``nbytes`` per device on ``n`` chips whose ingress is ``rate``
    bytes/s (network efficiency applied), whatever the algorithm (module docstring): (n - 1) / n x V / rate for
    the all-gather, reduce-scatter and all-to-all, V / rate for the all-reduce and a permute; 0 on one chip."""
    share = 1.0 if kind in ("all-reduce", "permute") else (n - 1) / n
    out: np.ndarray = np.where(n > 1, share * nbytes / rate, 0.0)
    return out


def _gather(n: np.ndarray, nbytes: np.ndarray | float, rate: float) -> np.ndarray:
    return least_collective_s("all-gather", n, nbytes, rate)


def _tp_s(setup: TrainingSetup, tp: np.ndarray, act: np.ndarray, rate: float) -> np.ndarray:
    """bound.tp_bound_s: 2 x pairs x (all-gather + reduce-scatter) of the activations, none hidden."""
    if setup.efficiency.tp_overlap > 0:
        return np.zeros(len(tp))
    return 2 * tp_pairs_per_layer(setup.cfg) * 2 * _gather(tp, act, rate)


def _fsdp_s(setup: TrainingSetup, prof: ModelProfile, rows: np.ndarray, rate: float, reshard: bool) -> np.ndarray:
    """bound.fsdp_bound_s: k x (gathers, twice when resharded, + reduce-scatter, a launch each) of the layer
    group whose weights a chip gathers fewest of, over fsdp chips (the dense FSDP axes: memory.Shards), once
    over the microbatches when kept gathered."""
    k = min(1.0, setup.stack.overlap_cost)
    if not k:
        return np.zeros(len(rows))
    fsdp = rows[:, 1].astype(float)
    _, w_bytes, g_bytes = setup.element_bytes
    tps, tp_of = np.unique(rows[:, 2], return_inverse=True)
    least = np.array([min(held_params(prof, int(t)).layers) for t in tps.tolist()])[tp_of.ravel()]
    launch = setup.stack.launch_s
    once = 1.0 if reshard else 1.0 / rows[:, 6]
    each = (_gather(fsdp, least * w_bytes, rate) + launch) * (1 + reshard)
    each = each + _gather(fsdp, least * g_bytes, rate) + launch
    out: np.ndarray = np.where(fsdp > 1, k * each * once, 0.0)
    return out


def _ep_s(
    setup: TrainingSetup, prof: ModelProfile, tp: np.ndarray, ep: np.ndarray, act: np.ndarray, rate: float
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
    out: np.ndarray = k * 2 * _gather(ep, both, rate) * moe_layers / prof.n_layers
    return out


def _pipeline_s(
    setup: TrainingSetup, pp: np.ndarray, v: np.ndarray, m: np.ndarray, boundary: np.ndarray, rate: float
) -> np.ndarray:
    """bound.pipeline_bound_s: 2 v sends of the boundary activations per microbatch, with the stack's sync, over
    the microbatches and the bubble; 0 where the stack hides them behind a chunk (virtual stages)."""
    send = least_collective_s("permute", pp, boundary, rate) + setup.stack.p2p_sync_s
    hidden = (v > 1) if setup.stack.p2p_overlap else np.zeros(len(pp), dtype=bool)
    out: np.ndarray = np.where((pp > 1) & ~hidden, 2 * v * send * (m + (pp - 1) / v), 0.0)
    return out


def _dp_s(setup: TrainingSetup, prof: ModelProfile, rows: np.ndarray, held: np.ndarray, rate: float) -> np.ndarray:
    """bound.dp_bound_s: k x the gradient all-reduces of a stage of ``held`` layers (comm.dp_comms): the dense
    gradients over dp x cp chips, the routed experts' over the rest of dp x cp (memory.Shards), V each."""
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
    out = least_collective_s("all-reduce", dp * cp, dense, rate)
    out = out + least_collective_s("all-reduce", expert_dp * cp, expert, rate)
    scaled: np.ndarray = k * out
    return scaled
