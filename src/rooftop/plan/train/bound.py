"""A lower bound on the step time of every candidate layout at once, from the roofline of its ops alone, so that
a search can skip the layouts that provably cannot rank (plan/train/search.py).

A step (plan/train/step.py) is m microbatches of the pipeline stage that sets the pace plus the bubble, (pp - 1)
/ v microbatch times, plus terms that are never negative (exposed communication, the data-parallel reduction,
offload) and the optimizer update. A microbatch's time on a stage is at least its forward and backward ops'
time: each op takes max(compute, memory) (profile.op_roofline) and its compute is FLOPs / (peak x efficiency)
divided by the matmul shape efficiency and the attention kernel's ceiling, both at most 1 (cost/gemm.py clips
to 1; profile._core_scale), so max(FLOPs / (peak x efficiency), bytes / HBM rate) is at most its time; remat
only adds recompute. Those per-op bounds depend on tp, cp, ep and the microbatch size only, so they are found
once per distinct (tp, cp, ep, b) and summed over the layers' ops (C_layer) and over the ops outside them (C_out).
Where the remat policies' profiles have the same forward and backward ops (remat adds recompute rows only, the
usual case; checked row for row), those sums are the step's own (profile.op_sums, shape efficiency included).
The stage that sets the pace (profile.stage_pace) is either the last (its layers and the ops outside them) or
the fullest other stage (its layers): the bound takes the lesser of the two, for each remat policy the search
may keep, and the least over those policies:

    bound = min over remat of min(last x C_layer / L + C_out, most x C_layer / L) x (m + (pp-1)/v) + optimizer

with pp = 1 one stage of all L layers and the ops outside them; ``optimizer`` the update of the chip's shard
with ZeRO over dp (the smaller shard of the choices). Where no tensor-parallel collective is hidden
(``tp_overlap`` 0), each layer's forward and backward all-gathers and reduce-scatters add to every microbatch;
the search adds them, and the pipeline's sends, once it has the layout's mesh (``tp_bound_s``,
``pipeline_bound_s``). On a stack whose hidden collectives take compute, the FSDP traffic, ring attention's
shifts, the expert all-to-alls (whole when ``ep_overlap`` is 0) and the data-parallel reduction add at least that
compute (``fsdp_bound_s``, ``cp_bound_s``, ``ep_bound_s``, ``dp_bound_s``); the reduction's bytes grow with the
layers a stage holds, so priced once for the fewest layers any row of a mesh holds (``least_held_layers``) it
bounds every row of that mesh.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rooftop.cost.roofline import hbm_rate, roofline_table
from rooftop.plan.train.comm import CommPricer, dp_comms, node_limited_factor, tp_pairs_per_layer
from rooftop.plan.train.layout import Parallelism, _stage_split, microbatch_size
from rooftop.plan.train.memory import Shards
from rooftop.plan.train.profile import ModelProfile, held_params, op_sums, stage_pace

if TYPE_CHECKING:
    from rooftop.plan.train.step import TrainingSetup


def _pass_bounds(prof: ModelProfile, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(layer ops, ops outside the layers): per (tp, cp, ep, b) key, the forward and backward ops' roofline
    time on one chip at a shape efficiency of 1 (module docstring)."""
    tp, cp, ep, b = (keys[:, i].astype(float)[:, None] for i in range(4))
    compute_1 = roofline_table(prof.flops, prof.keys, np.zeros(len(prof.phase)), prof.chip, prof.eff).compute_s
    wshard = tp * np.where(prof.expert, ep, 1.0)
    nbytes = prof.weight_bytes / wshard + b * prof.act_bytes / (tp * cp)
    times = np.maximum(compute_1 * (b / (tp * cp)), nbytes / hbm_rate(prof.chip, prof.eff))
    passes = prof.phase < 2
    return times[:, prof.in_layers & passes].sum(axis=1), times[:, ~prof.in_layers & passes].sum(axis=1)


def _same_passes(a: ModelProfile, b: ModelProfile) -> bool:
    """Whether two profiles (of two remat policies) have the same forward and backward ops, row for row."""
    x, y = a.phase < 2, b.phase < 2
    if int(x.sum()) != int(y.sum()):
        return False
    cols = [(a.flops, b.flops), (a.weight_bytes, b.weight_bytes), (a.act_bytes, b.act_bytes), (a.group, b.group)]
    cols += [(a.phase, b.phase), (a.expert, b.expert), (a.core, b.core)]
    if a.gemm is not None and b.gemm is not None:
        cols.append((np.nan_to_num(a.gemm, nan=-1.0), np.nan_to_num(b.gemm, nan=-1.0)))
    elif a.gemm is not None or b.gemm is not None:
        return False
    return a.core_scale == b.core_scale and all(np.array_equal(p[x], q[y]) for p, q in cols)


def _exact_passes(prof: ModelProfile, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(layer ops, ops outside the layers): per (tp, cp, ep, b) key, the forward and backward ops' time as the
    step prices them (profile.op_sums, memoized on the profile, shape efficiencies included)."""
    layer, out = np.empty(len(keys)), np.empty(len(keys))
    for i, (tp, cp, ep, b) in enumerate(keys.tolist()):
        (fl, fo), (bl, bo), _ = op_sums(prof, Parallelism(tp=tp, cp=cp, ep=ep), b).phases
        layer[i], out[i] = fl + bl, fo + bo
    return layer, out


def _unique_rows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct rows of an integer table in lexicographic order, the index of each row's among them): what
    ``np.unique(table, axis=0, return_inverse=True)`` gives, by np.lexsort (np.unique sorts the rows as
    structured values, several times slower: a tenth of a small search's time)."""
    order = np.lexsort(table.T[::-1])
    ordered = table[order]
    first = np.ones(len(table), dtype=bool)
    first[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    inverse = np.empty(len(table), dtype=np.intp)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse


def step_lower_bounds(
    rows: np.ndarray, global_batch: int, profiles: Sequence[ModelProfile], optimizer_s_per_param: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """The bound (module docstring) of each candidate row (columns dp, fsdp, tp, pp, ep, cp, microbatches,
    virtual_stages, pipeline_balance: candidates.ROW_FIELDS), in seconds; and the layers the pacing stage runs per
    step at the least, (m + (pp - 1) / v) x its layers (the lesser of the two stages, the least over the
    profiles): what a per-layer time that is never hidden adds to the bound at the least."""
    dp, fsdp, tp, pp, ep, cp, m, v, balanced = (rows[:, i] for i in range(9))
    per_replica = -(-global_batch // (dp * fsdp))  # layout.replica_batch
    b = -(-per_replica // m)  # layout.microbatch_size
    keys, key_of = _unique_rows(np.stack([tp, cp, ep, b], axis=1))
    balanced_v = np.where(balanced.astype(bool) & (pp > 1), v, 0)
    pair_rows, pair_of = _unique_rows(np.stack([pp, balanced_v], axis=1))
    pairs = pair_rows.T
    per_step = m + (pp - 1) / v
    out = np.full(len(rows), np.inf)
    layers = np.full(len(rows), np.inf)
    exact = None
    for prof in profiles:
        if _same_passes(prof, profiles[0]):  # the forward and backward as the first profile's, priced exactly
            exact = _exact_passes(profiles[0], keys) if exact is None else exact
            c_layer, c_out = (c[key_of] for c in exact)
        else:
            c_layer, c_out = (c[key_of] for c in _pass_bounds(prof, keys))
        n = prof.n_layers
        splits = [_stage_split(n, int(p), int(bv), prof.head_layers) for p, bv in pairs.T.tolist()]
        last = np.array([s.last for s in splits], dtype=float)[pair_of]
        most = np.array([s.most for s in splits], dtype=float)[pair_of]
        staged = np.minimum(last * c_layer / n + c_out, most * c_layer / n)
        bound = np.where(pp == 1, c_layer + c_out, staged) * per_step
        if optimizer_s_per_param:
            bound = bound + _optimizer_params(prof, rows, np.maximum(last, most)) * optimizer_s_per_param
        out = np.minimum(out, bound)
        layers = np.minimum(layers, np.where(pp == 1, n, np.minimum(last, most)))
    return out, layers * per_step


def _optimizer_params(prof: ModelProfile, rows: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Parameters whose update one chip runs with ZeRO over dp (memory.Shards.params with ``over_dp``): dense
    over tp x fsdp x dp, routed experts over tp x ep x the rest of the data axes; the stage's ``held`` layers."""
    dp, fsdp, tp, _, ep, _, _, _, _ = (rows[:, i].astype(float) for i in range(9))
    in_fsdp = (ep > 1) & (np.mod(fsdp, ep) == 0)
    in_dp = (ep > 1) & ~in_fsdp
    share = np.where(rows[:, 3] == 1, prof.n_layers, held) / prof.n_layers
    dense = (prof.dense_layer_params * share + prof.edge_params) / tp
    expert = prof.params_expert * share / (tp * ep)
    expert_fsdp = np.where(in_fsdp, fsdp / ep, fsdp)
    expert_dp = np.where(in_dp, dp / ep, dp)
    params: np.ndarray = dense / (fsdp * dp) + expert / (expert_fsdp * expert_dp)
    return params


def tp_bound_s(setup: TrainingSetup, par: Parallelism, pricer: CommPricer) -> float:
    """A layer's tensor-parallel collectives in one microbatch's forward and backward when none is hidden (plan/
    train/comm.layer_comm: comm.tp_pairs_per_layer all-gather + reduce-scatter pairs of the layer's activations
    each way, 2 for a serial layer and 1 for a parallel one, again under full remat): 0 when some may be hidden
    (``tp_overlap`` > 0)."""
    if setup.efficiency.tp_overlap > 0 or par.tp == 1:
        return 0.0
    act = _tokens_chip(setup, par) * setup.cfg.d_model * setup.element_bytes[0]
    pair = pricer.time("all-gather", ("tp",), act) + pricer.time("reduce-scatter", ("tp",), act)
    return 2 * tp_pairs_per_layer(setup.cfg) * pair


def cp_bound_s(setup: TrainingSetup, par: Parallelism, pricer: CommPricer) -> float:
    """The least a layer's ring-attention shifts add to one microbatch on a stack whose hidden collectives take
    compute: comm.layer_comm sends the K,V chunk cp - 1 times forward and K,V,dK,dV backward (3 (cp - 1) shifts)
    and adds what is exposed plus k x what the attention core hides (comm.overlap_contention), at least
    min(1, k) x all of them; 0 without context parallelism or without that cost."""
    k = min(1.0, setup.stack.overlap_cost)
    if par.cp == 1 or not k:
        return 0.0
    cfg = setup.cfg
    kv = _tokens_chip(setup, par) * 2 * cfg.n_kv_heads * cfg.head_dim * setup.element_bytes[0]
    kv /= min(par.tp, cfg.n_kv_heads)
    return k * 3 * (par.cp - 1) * pricer.time("permute", ("cp",), kv)


def fsdp_bound_s(setup: TrainingSetup, par: Parallelism, pricer: CommPricer, prof: ModelProfile) -> float:
    """The least a layer's FSDP traffic adds to one microbatch on a stack whose hidden collectives take compute
    (``Framework.overlap_cost`` k, at most 1): each second of it is either exposed (a second) or hidden (k
    seconds, comm.overlap_contention), so at least k x its gathers and reduce-scatter, with the stack's launch
    cost each (comm.layer_comm), the least over the layer groups (a routed-expert layer's experts only add); 0
    without fsdp or without that cost."""
    k = min(1.0, setup.stack.overlap_cost)
    if par.fsdp == 1 or not k:
        return 0.0
    (_, w_bytes, g_bytes), axes = setup.element_bytes, Shards.of(par).dense_fsdp_axes
    held, launch = held_params(prof, par.tp), setup.stack.launch_s
    least = min(
        (pricer.time("all-gather", axes, h * w_bytes) + launch) * (1 + par.fsdp_reshard)
        + pricer.time("reduce-scatter", axes, h * g_bytes)
        + launch
        for h in held.layers
    )
    return k * least * (1.0 if par.fsdp_reshard else 1.0 / par.microbatches)


def ep_bound_s(setup: TrainingSetup, par: Parallelism, pricer: CommPricer, prof: ModelProfile) -> float:
    """The least a layer's expert all-to-alls add to one microbatch, per layer of the model (the routed-expert
    layers' share of them; the pacing stage runs the same share of every layer group, profile.stage_pace).
    comm.layer_comm prices a routed-expert layer's dispatch and combine, a = all-to-all(to the experts) +
    all-to-all(routed), (2 + recompute) x a per microbatch of which h is hidden, and adds exposed + k x h with k
    the stack's ``overlap_cost`` (comm.overlap_contention): at least min(1, k) x 2a, and 2a whole when
    ``ep_overlap`` is 0 (nothing hidden). Exact bytes and the layout's own pricer, so whatever the algorithm.
    0 without expert parallelism."""
    cfg = setup.cfg
    if par.ep == 1 or cfg.moe is None:
        return 0.0
    k = 1.0 if setup.efficiency.ep_overlap == 0 else min(1.0, setup.stack.overlap_cost)
    moe_layers = sum(g.count for g in prof.groups if g.moe)
    if not k or not moe_layers:
        return 0.0
    a_bytes = setup.element_bytes[0]
    factor = node_limited_factor(setup.max_nodes_per_token, pricer.mesh, cfg)
    routed = _tokens_chip(setup, par) * cfg.moe.top_k * cfg.d_model * a_bytes / par.tp * factor
    to_experts = routed * min(1.0, setup.matmul_bytes / a_bytes)
    a2a = pricer.time("all-to-all", ("ep",), to_experts) + pricer.time("all-to-all", ("ep",), routed)
    return k * 2 * a2a * moe_layers / prof.n_layers


def dp_bound_s(
    setup: TrainingSetup, par: Parallelism, pricer: CommPricer, prof: ModelProfile, held_layers: int | None = None
) -> float:
    """The least the data-parallel gradient reduction adds to a step on a stack whose hidden collectives take
    compute: k (at most 1) x its all-reduces (comm.dp_exposed: each second exposed or hidden at k). With
    ``held_layers``, those of a stage holding that many layers: at most the layout's own when it holds at least
    as many (the bytes grow with the layers, a collective's time with its bytes)."""
    k = min(1.0, setup.stack.overlap_cost)
    if not k:
        return 0.0
    comms = dp_comms(setup, par, prof, Shards.of(par), held_layers)
    return k * sum(pricer.time("all-reduce", axes, n) for axes, n in comms)


def mesh_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct meshes of the candidate rows, their first six columns dp, fsdp, tp, pp, ep, cp; the index of
    each row's among them)."""
    return _unique_rows(rows[:, :6])


def least_held_layers(
    rows: np.ndarray, prof: ModelProfile, found: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the index of each candidate row's mesh, its first six columns; per mesh, the fewest layers the fullest
    stage holds over the mesh's rows; per row, the layers its fullest stage holds: layout.stage_split under
    ``prof``): what bounds the data-parallel reduction of every row of a mesh at once (dp_bound_s with
    ``held_layers``). ``found``: the rows' mesh_rows, when already found."""
    meshes, mesh_of = mesh_rows(rows) if found is None else found
    pp, v, balanced = rows[:, 3], rows[:, 7], rows[:, 8]
    pairs, pair_of = _unique_rows(np.stack([pp, np.where(balanced.astype(bool) & (pp > 1), v, 0)], axis=1))
    held = np.array([_stage_split(prof.n_layers, p, bv, prof.head_layers).held for p, bv in pairs.tolist()])
    least = np.full(len(meshes), np.iinfo(np.int64).max)
    np.minimum.at(least, mesh_of, held[pair_of])
    return mesh_of, least, held[pair_of]


def pipeline_bound_s(setup: TrainingSetup, par: Parallelism, pricer: CommPricer) -> float:
    """The pipeline's sends of a layout's step, whatever its variant (step.step_breakdown_s: 2 v per
    microbatch, none hidden, over the m microbatches and the bubble); 0 where the stack hides each send behind
    a model chunk (``p2p_overlap`` with virtual stages: how much is exposed depends on the chunk's compute)."""
    if par.pp == 1 or (setup.stack.p2p_overlap and par.virtual_stages > 1):
        return 0.0
    boundary = _tokens_chip(setup, par) * setup.cfg.d_model * setup.element_bytes[0] / par.tp
    send = pricer.time("permute", ("pp",), boundary) + setup.stack.p2p_sync_s
    return 2 * par.virtual_stages * send * (par.microbatches + (par.pp - 1) / par.virtual_stages)


def variant_bound_s(setup: TrainingSetup, par: Parallelism, pricer: CommPricer, prof: ModelProfile) -> float:
    """A bound on the step of a layout's kept variant ``par`` (its remat policy's profile ``prof``) before its
    communication is priced: its ops' time exactly as the step prices them (profile.op_sums, the pacing stage
    of profile.stage_pace), the tensor-parallel collectives when none is hidden (again for the backward under
    full remat), the least of the layers' FSDP, ring-attention and expert collectives, the pipeline's sends and
    the embedding and head's FSDP traffic (never hidden), each per microbatch over the m microbatches and the
    bubble, and the optimizer update (step.step_parts)."""
    sums = op_sums(prof, par, microbatch_size(setup.global_batch, par))
    layer_scale, head = stage_pace(prof, par, sums)
    layers, outside = sums.passes
    per_mb = layers * layer_scale + outside * head
    tp_one = tp_bound_s(setup, par, pricer) / 2
    per_mb += prof.n_layers * layer_scale * ((3 if par.remat == "full" else 2) * tp_one)
    per_mb += prof.n_layers * layer_scale * fsdp_bound_s(setup, par, pricer, prof)
    per_mb += prof.n_layers * layer_scale * (ep_bound_s(setup, par, pricer, prof) + cp_bound_s(setup, par, pricer))
    shards = Shards.of(par)
    if par.fsdp > 1:  # the embedding and head's FSDP traffic: no layer compute to hide it (comm.layer_comm)
        _, w_bytes, g_bytes = setup.element_bytes
        edge, launch = prof.edge_params / par.tp * w_bytes, setup.stack.launch_s
        edge_ag = pricer.time("all-gather", shards.dense_fsdp_axes, edge) + launch
        edge_rs = pricer.time("reduce-scatter", shards.dense_fsdp_axes, edge * g_bytes / w_bytes) + launch
        once = 1.0 if par.fsdp_reshard else 1.0 / par.microbatches
        per_mb += (edge_ag * (1 + par.fsdp_reshard) + edge_rs) * once
    opt = shards.params(prof, par, over_dp=par.zero_stage >= 1) * setup.optimizer_s_per_param
    steps = par.microbatches + (par.pp - 1) / par.virtual_stages
    return per_mb * steps + pipeline_bound_s(setup, par, pricer) + dp_bound_s(setup, par, pricer, prof) + opt


def _tokens_chip(setup: TrainingSetup, par: Parallelism) -> float:
    return microbatch_size(setup.global_batch, par) * setup.seq_len / par.cp
