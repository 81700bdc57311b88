"""A model's per-op figures for one training sequence (``ModelProfile``), from which a step
prices any microbatch size and layout fast, and the sums of its per-op times a step needs
(``OpSums``), memoized per (tp, cp, ep, microbatch) on the profile.

Each op is timed as max(compute, memory) on the chip by cost/roofline.roofline_table (the
per-op roofline over a table of ops): its FLOPs and activation bytes over cp, its weights over ep for
experts, and each of them over the tensor-parallel group as its tag says (sharding/tensor.share, the
rule serving and training memory call too); see plan/train/step.py for the step built from them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from rooftop.cost.cost import Cost, FlopsKey, Gemm, OpTag, Split
from rooftop.cost.efficiency import Efficiency
from rooftop.cost.gemm import TileModel, shape_efficiency_array, tile_model
from rooftop.cost.roofline import RooflineTable, flops_table, roofline_table
from rooftop.hardware.chip import Chip
from rooftop.model.activations import (
    activation_bytes_by_split,
    activation_bytes_per_token,
    logits_bytes_per_token,
    sequence_region_bytes_per_token,
)
from rooftop.model.config import TransformerConfig
from rooftop.model.layers import layer_groups
from rooftop.model.params import ParamTree, param_tree
from rooftop.model.passes import model_costs, train_leaves
from rooftop.model.workload import Dtypes, Workload
from rooftop.plan.train.layout import Parallelism, stage_split
from rooftop.sharding.tensor import kv_shards, share, share_columns

_DEFAULT_DTYPES = Dtypes()


@dataclass(frozen=True)
class GroupProfile:
    """Per-layer figures of one layer group (per sequence of the microbatch)."""

    name: str
    count: int
    moe: bool
    params: float  # non-expert parameters of one layer
    expert_params: float  # routed-expert parameters of one layer
    # of ``params``, the parameters of each tag (how they divide over tp: sharding/tensor.share)
    params_by_tag: tuple[tuple[OpTag | None, float], ...] = ()


@dataclass(frozen=True)
class ModelProfile:
    """Per-op figures for ONE sequence, from which any microbatch size is priced fast:
    op flops F (per sequence), weight bytes W (independent of the batch) and activation
    bytes A (per sequence), read from the op costs' bytes by kind (``model_profile``)."""

    cfg: TransformerConfig
    seq_len: int
    remat: str
    chip: Chip
    eff: Efficiency
    keys: tuple[FlopsKey, ...]  # the (unit, dtype) columns of ``flops``
    flops: np.ndarray  # ops x keys
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
    def masks(self) -> tuple[tuple[np.ndarray, ...], ...]:
        """Per layer group: (forward ops, backward + recompute ops, forward attention core, backward
        and recompute attention core, forward ops outside the routed experts, backward + recompute ops
        outside them)."""
        return tuple(
            (
                sel & (self.phase == 0),
                sel & (self.phase > 0),
                sel & self.core & (self.phase == 0),
                sel & self.core & (self.phase > 0),
                sel & ~self.expert & (self.phase == 0),
                sel & ~self.expert & (self.phase > 0),
            )
            for sel in (self.group == gi for gi in range(len(self.groups)))
        )

    @cached_property
    def phase_masks(self) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """Per phase (forward, backward, recompute): (layer ops, ops outside the layers)."""
        return tuple((self.in_layers & (self.phase == p), ~self.in_layers & (self.phase == p)) for p in range(3))

    @cached_property
    def head_layers(self) -> float:
        """The ops outside the layers (embedding, head, loss) in layers of average work, by FLOPs: what a
        balanced pipeline split counts them as (layout.stage_split)."""
        flops = self.flops.sum(axis=-1) if self.flops.ndim > 1 else self.flops
        layer = float(flops[self.in_layers].sum()) / max(self.n_layers, 1)
        return float(flops[~self.in_layers].sum()) / layer if layer > 0 else 0.0

    @cached_property
    def in_layers(self) -> np.ndarray:
        return self.group >= 0

    @cached_property
    def layer_backward(self) -> np.ndarray:
        return self.in_layers & (self.phase > 0)

    @cached_property
    def op_sums_memo(self) -> dict[tuple[int, int, int, int, bool], OpSums]:
        """op_sums already found for this profile (see op_sums)."""
        return {}

    @cached_property
    def shares_memo(self) -> dict[tuple[int, bool], np.ndarray]:
        """tp_shares already found for this profile, by (tp, sequence parallelism)."""
        return {}

    @cached_property
    def held_memo(self) -> dict[int, HeldParams]:
        """held_params already found for this profile, by tp."""
        return {}

    @cached_property
    def kept_memo(self) -> dict[tuple[int, bool], float]:
        """memory.activations_per_chip already found for this profile, by (tp, sequence parallelism)."""
        return {}

    activation_bytes_per_token: float  # all layers, under the remat policy
    logits_bytes_per_token: float
    sequence_region_bytes_per_token: float = 0.0  # of the activations, those sequence parallelism splits
    # per op: its matmul's (m per sequence, n, k, batch, out bytes, split) (GEMM_SPLITS), NaN rows
    # where the op is not one matmul; None when the shape model is off
    gemm: np.ndarray | None = None
    core_scale: float = 1.0  # the attention core's matrix rate over the other matmuls' (_core_scale)
    unfused: np.ndarray | None = None  # bool per op: eager kernels' extra traffic (model/eager.py); None: none
    tags: tuple[OpTag | None, ...] = ()  # per op: its tag (how it divides over tp: sharding/tensor.share)
    shapes: tuple[Gemm | None, ...] = ()  # per op: its matmul shape, None where it is not one
    edge_params_by_tag: tuple[tuple[OpTag | None, float], ...] = ()  # edge_params by tag
    # the activation bytes per token (activation_bytes_per_token) of each kept tensor's split (activations.py)
    activation_bytes_by_split: tuple[tuple[Split, float], ...] = ()


@lru_cache(maxsize=64)
def model_profile(
    cfg: TransformerConfig,
    seq_len: int,
    remat: str,
    chip: Chip,
    eff: Efficiency,
    dtypes: Dtypes = _DEFAULT_DTYPES,
    flash: bool = True,
    dropout: bool = False,
    attention_cap: float = 0.0,
    fused: bool = True,
    expand_kv: bool = False,
    loss_fp32: bool = False,
) -> ModelProfile:
    """``flash=False``: attention as pre-FlashAttention kernels run it (scores through HBM,
    every pair of the square computed and then masked); ``dropout``: GPT-3 / Megatron-LM
    style dropout on attention probabilities and residual branches.

    Each op of one sequence gives a row: its FLOPs, its weight bytes (the bytes its Cost types
    as weights, read once per microbatch whatever its size) and its other bytes (per sequence).
    A lookup reads one table row per token, so its weight bytes count per sequence too. With
    flash attention the backward's recompute of the scores and softmax (ops tagged
    ``flash_recompute``) is a row of the recompute phase (hardware FLOPs, not model FLOPs).
    ``attention_cap`` (0: none): the share of the chip's datasheet matrix peak the fused attention kernel
    sustains (the framework's kernel, plan/train/framework.py); the attention core's matmuls run at the
    lesser of it and the other matmuls' rate. ``fused=False``: the elementwise ops run eagerly, one kernel
    per PyTorch op (model/eager.py); their extra traffic is in rows flagged ``unfused``. ``expand_kv``: the
    framework's attention call copies grouped K and V out to every query head (Workload.expand_kv);
    ``loss_fp32``: its loss casts the logits to fp32 first (Workload.loss_fp32)."""
    work = Workload(
        "train", 1, seq_len, causal=flash, flash=flash, dropout=dropout, fused=fused, expand_kv=expand_kv,
        loss_fp32=loss_fp32,
    )  # fmt: skip
    groups = layer_groups(cfg)
    names = [g.name for g in groups]
    rows, costs, gemms, unfused, tags = [], [], [], [], []
    for phase, gname, leaf in train_leaves(model_costs(cfg, work, dtypes, remat)):
        c, tag = leaf.cost, leaf.tag
        fixed = tag is not None and tag.category != "lookup"
        weight = c.bytes_of("weights") if fixed else 0.0
        grp = names.index(gname) if gname is not None else -1
        expert = tag is not None and tag.expert
        core = tag is not None and tag.category == "attention"
        row = (c.flops, weight, c.hbm_bytes - weight, grp, phase, expert, core, _is_matrix(c))
        rows.append(row)
        costs.append(c)
        gemms.append(_gemm_row(c, tag))
        unfused.append(tag is not None and tag.unfused)
        tags.append(tag)
        if flash and phase == 0 and grp >= 0 and tag is not None and tag.flash_recompute:
            rows.append((*row[:4], 2, *row[5:]))
            costs.append(c)
            gemms.append(_gemm_row(c, tag))
            unfused.append(False)
            tags.append(tag)
    keys, flops_table_ = flops_table(costs)
    cols = list(zip(*rows, strict=True))
    tree = param_tree(cfg)
    gprof = []
    for g in groups:
        node = tree.find(f"layers/{g.name}")
        routed = sum(leaf.params for leaf in node.leaves() if leaf.tag is not None and leaf.tag.expert)
        by_tag = _params_by_tag(leaf for leaf in node.leaves() if leaf.tag is None or not leaf.tag.expert)
        gprof.append(
            GroupProfile(
                g.name,
                g.count,
                g.moe,
                (node.params - routed) / g.count,
                routed / g.count,
                tuple((tag, p / g.count) for tag, p in by_tag),
            )
        )
    edge = _params_by_tag(leaf for child in tree.children if child.name != "layers" for leaf in child.leaves())
    flops_arr, phase_arr = np.array(cols[0], dtype=float), np.array(cols[4])
    matrix_mask = np.array(cols[7], dtype=float)
    model_fl = float(np.sum(flops_arr * matrix_mask * (phase_arr < 2))) / seq_len
    hw_fl = float(np.sum(flops_arr * matrix_mask)) / seq_len
    return ModelProfile(
        cfg,
        seq_len,
        remat,
        chip,
        eff,
        keys,
        flops_table_,
        np.array(cols[1], dtype=float),
        np.array(cols[2], dtype=float),
        np.array(cols[3]),
        phase_arr,
        np.array(cols[5], dtype=bool),
        np.array(cols[6], dtype=bool),
        tuple(gprof),
        model_fl,
        hw_fl,
        tree.params,
        sum(g.expert_params * g.count for g in gprof),
        activation_bytes_per_token(cfg, seq_len, remat, dtypes.activations, flash, dtypes.matmul),
        logits_bytes_per_token(cfg),
        sequence_region_bytes_per_token(cfg, seq_len, remat, dtypes.activations, flash, dtypes.matmul),
        np.array(gemms, dtype=float) if eff.matrix_shape else None,
        _core_scale(chip, eff, keys, attention_cap),
        np.array(unfused, dtype=bool) if any(unfused) else None,
        tuple(tags),
        tuple(c.gemm for c in costs),
        edge,
        tuple(activation_bytes_by_split(cfg, seq_len, remat, dtypes.activations, flash, dtypes.matmul).items()),
    )


def _params_by_tag(leaves: Iterable[ParamTree]) -> tuple[tuple[OpTag | None, float], ...]:
    """Parameters of ``leaves`` summed per tag."""
    out: dict[OpTag | None, float] = {}
    for leaf in leaves:
        out[leaf.tag] = out.get(leaf.tag, 0.0) + leaf.params
    return tuple(out.items())


@dataclass(frozen=True)
class HeldParams:
    """The non-expert parameters one chip of a TP group holds (``held_params``)."""

    layers: tuple[float, ...]  # per layer group, of one layer
    edge: float  # outside the layers
    dense: float  # of all the layers: sum of count x layers


def held_params(prof: ModelProfile, tp: int) -> HeldParams:
    """The non-expert parameters one chip of a TP group of ``tp`` holds: each tag's parameters x its weight
    share (sharding/tensor.share), the rule training time and serving use; memoized on the profile."""
    found = prof.held_memo.get(tp)
    if found is None:
        kv = prof.cfg.tp_kv_heads

        def held(pairs: tuple[tuple[OpTag | None, float], ...]) -> float:
            return sum(p * (share(tag, tp, kv).weights if tag is not None else 1 / tp) for tag, p in pairs)

        layers = tuple(held(g.params_by_tag) for g in prof.groups)
        dense = sum(g.count * h for g, h in zip(prof.groups, layers, strict=True))
        found = prof.held_memo[tp] = HeldParams(layers, held(prof.edge_params_by_tag), dense)
    return found


def tp_shares(prof: ModelProfile, tp: int, sequence_parallel: bool) -> np.ndarray:
    """Per op, one chip's (FLOPs, weight bytes, activation bytes) fractions in a TP group of ``tp``
    (sharding/tensor.share_columns); memoized on the profile."""
    key = (tp, sequence_parallel)
    found = prof.shares_memo.get(key)
    if found is None:
        found = prof.shares_memo[key] = share_columns(
            prof.tags, prof.shapes, tp, prof.cfg.tp_kv_heads, sequence_parallel
        )
    return found


def _core_scale(chip: Chip, eff: Efficiency, keys: tuple[FlopsKey, ...], cap: float) -> float:
    """The attention core's matrix rate as a share of the other matmuls': min(1, cap / (their share of the
    datasheet peak: matrix efficiency x the chip's achievable fraction)); 1 without a cap."""
    if cap <= 0:
        return 1.0
    dtype = next((d for unit, d in keys if unit == "matrix"), "bf16")
    share = eff.matrix * (chip.achievable_fraction(dtype) if eff.matrix_achievable else 1.0)
    return min(1.0, cap / share)


#: how a matmul's dims divide over tp (the ``split`` column of ModelProfile.gemm)
GEMM_SPLITS = {"none": 0, "n": 1, "k": 2, "kv_heads": 3}


def _gemm_row(cost: Cost, tag: OpTag | None) -> tuple[float, ...]:
    g = cost.gemm
    if g is None or tag is None or tag.category != "matmul":
        return (np.nan,) * 6
    split = "none"
    if tag.split == Split.TENSOR:
        split = "k" if tag.row_parallel else "n"
    elif tag.split == Split.KV_HEADS:
        split = "kv_heads"
    return (g.m, g.n, g.k, g.batch, g.out_bytes, GEMM_SPLITS[split])


def gemm_shape_efficiency(prof: ModelProfile, par: Parallelism, b: int) -> np.ndarray | None:
    """Each op's matmul shape efficiency (cost/gemm.py) for a microbatch of ``b`` sequences on one
    chip under ``par``: rows m = b x m / cp; n (column-parallel) or k (row-parallel) / tp, the k and v
    projections' n / min(tp, KV heads); a routed expert's rows are its share of the ep ranks' tokens
    (m x ep / E, batch E / ep local experts). A backward op is its two matmuls (dX: m x n @ n x k,
    dW: k x m @ m x n) of equal FLOPs, so its efficiency is their harmonic mean. 1 for other ops."""
    if prof.gemm is None:
        return None
    model = tile_model(prof.chip)
    if model is None:
        return None
    m, n, k, batch, out_bytes, split = (prof.gemm[:, i] for i in range(6))
    m = m * b / par.cp
    n = np.where(split == GEMM_SPLITS["n"], n / par.tp, n)
    k = np.where(split == GEMM_SPLITS["k"], k / par.tp, k)
    n = np.where(split == GEMM_SPLITS["kv_heads"], n / kv_shards(par.tp, prof.cfg.tp_kv_heads), n)
    if prof.cfg.moe is not None:
        experts = prof.cfg.moe.n_experts
        m = np.where(prof.expert, m * par.ep / experts, m)
        batch = np.where(prof.expert, batch * experts / par.ep, batch)
    peak = prof.chip.flops_rate(prof.keys[0][1] if prof.keys else "bf16", "matrix")[1]
    hbm = prof.chip.hbm_bytes_per_s

    rows = ~np.isnan(m)
    shapes = np.stack([m, n, k, batch])[:, rows]
    fwd_bwd = np.concatenate([shapes, shapes[[0, 2, 1, 3]], shapes[[2, 1, 0, 3]]], axis=1)  # (m n k), dX, dW
    out_b = float(np.nanmax(out_bytes))
    # layers repeat their shapes, and layouts too, under every remat policy: each shape priced once per chip's
    # figures (a dictionary look-up per shape: cheaper than sorting the few hundred shapes of a layout)
    memo = _shape_memo(model, out_b, peak, hbm)
    keys = list(map(tuple, fwd_bwd.T.tolist()))
    missing = list(dict.fromkeys(key for key in keys if key not in memo))
    if missing:
        new = np.array(missing, dtype=float).T
        values = shape_efficiency_array(model, new[0], new[1], new[2], new[3], out_b, peak, hbm)
        memo.update(zip(missing, values.tolist(), strict=True))
    found = np.array([memo[key] for key in keys])
    forward, dx, dw = np.split(found, 3)
    out = np.ones(len(m))
    out[rows] = np.where(prof.phase[rows] == 1, 2.0 / (1.0 / dx + 1.0 / dw), forward)
    return out


@lru_cache(maxsize=64)
def _shape_memo(model: TileModel, out_bytes: float, peak: float, hbm: float) -> dict[tuple[float, ...], float]:
    """Matmul shape efficiencies found so far (cost/gemm.shape_efficiency_array) for one chip's figures, by
    (m, n, k, batch): what a shape's efficiency depends on besides them (the profiles of every remat policy and
    every layout of a search share them)."""
    return {}


def _is_matrix(cost: Cost) -> bool:
    return any(unit == "matrix" for unit, _ in cost.flops_by)


def op_roofline(prof: ModelProfile, par: Parallelism, b: int) -> tuple[RooflineTable, np.ndarray, np.ndarray]:
    """(per-op roofline, FLOPs, HBM bytes) of one microbatch of ``b`` sequences on one chip: FLOPs and
    activation bytes over cp, weights over ep for experts, each over tp by its tag (module docstring)."""
    shares = tp_shares(prof, par.tp, par.sequence_parallel)
    per_seq = b / par.cp
    fl = shares[:, 0] * per_seq
    flops = prof.flops * (fl[:, None] if prof.flops.ndim > 1 else fl)
    wshard = np.where(prof.expert, par.ep, 1)
    nbytes = prof.weight_bytes * shares[:, 1] / wshard + prof.act_bytes * shares[:, 2] * per_seq
    shape = gemm_shape_efficiency(prof, par, b)
    if prof.core_scale < 1.0:  # the attention kernel's own ceiling (model_profile's attention_cap)
        shape = np.where(prof.core, prof.core_scale, 1.0 if shape is None else shape)
    return roofline_table(flops, prof.keys, nbytes, prof.chip, prof.eff, shape), flops, nbytes


@dataclass(frozen=True)
class OpSums:
    """The sums of one microbatch's per-op times (``_op_times``) that a step needs."""

    phases: tuple[tuple[float, float], ...]  # per phase (forward, backward, recompute): (layer ops, outside ops)
    groups: tuple[tuple[float, ...], ...]  # per layer group: forward, backward + recompute, forward attention
    # core, backward + recompute attention core, forward and backward + recompute outside the routed experts
    compute_bound: float  # time of the ops whose compute term is the larger
    memory_bound: float  # time of the others

    @cached_property
    def passes(self) -> tuple[float, float]:
        """(layer ops, outside ops): their time summed over the phases."""
        (fl, fo), (bl, bo), (rl, ro) = self.phases
        return fl + bl + rl, fo + bo + ro


def op_sums(prof: ModelProfile, par: Parallelism, b: int) -> OpSums:
    """OpSums of a microbatch of ``b`` sequences under ``par``'s tp, cp, ep and sequence parallelism;
    memoized on the profile, as layouts that differ only in other degrees share them."""
    key = (par.tp, par.cp, par.ep, b, par.sequence_parallel)
    found = prof.op_sums_memo.get(key)
    if found is None:
        table = op_roofline(prof, par, b)[0]
        t, cb = table.time_s, table.compute_bound
        found = prof.op_sums_memo[key] = OpSums(
            tuple((float(t[lay].sum()), float(t[out].sum())) for lay, out in prof.phase_masks),
            tuple(tuple(float(t[m].sum()) for m in masks) for masks in prof.masks),
            float(np.sum(np.where(cb, t, 0.0))),
            float(np.sum(np.where(cb, 0.0, t))),
        )
    return found


def stage_pace(prof: ModelProfile, par: Parallelism, sums: OpSums) -> tuple[float, float]:
    """(the share of the model's layers, 1 or 0 for the ops outside them) that the pipeline stage setting
    the pace runs per microbatch (layout.stage_split; with pp = 1, all of them)."""
    if par.pp == 1:
        return 1.0, 1.0
    layer_s, outside_s = sums.passes
    layers, outside = stage_split(prof.n_layers, par, prof.head_layers).pace(layer_s / prof.n_layers, outside_s)
    return layers / prof.n_layers, outside
