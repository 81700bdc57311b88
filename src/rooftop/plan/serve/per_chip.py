"""One chip's share of a served model's ops: the model's priced ops (``model/passes.model_costs``)
divided over a serving layout (plan/serve/layout.py: how an op's FLOPs, weights, cache and activations
divide over the TP group is read from the op's tag, sharding/tensor.py; its bytes by kind from its
Cost), grouped into matmul / attention / elementwise, with the routed experts' busiest expert and chip
(plan/serve/routing.py). plan/serve/phase.py times these on the roofline.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from rooftop.cost.cost import Cost, CostTree, Gemm
from rooftop.cost.figures import RoutingFigures
from rooftop.model.config import TransformerConfig
from rooftop.model.passes import model_costs
from rooftop.model.workload import Dtypes, Workload
from rooftop.plan.serve import routing
from rooftop.plan.serve.layout import GROUPS, ServingLayout, busiest_fraction, layout_share, op_group, query_head_reads
from rooftop.plan.serve.shapes import chip_gemm
from rooftop.sharding import tensor


@dataclass(frozen=True)
class ChipCost:
    """One chip's share of a phase: a Cost per op group, and its bytes by kind; ``gemms`` the weight
    matmuls of the matmul group as (per-chip shape, per-chip FLOPs), for the shape model."""

    groups: dict[str, Cost]
    weights_bytes: float
    kv_cache_bytes: float
    other_bytes: float
    gemms: tuple[tuple[Gemm, float], ...] = ()
    routing: RoutingFigures | None = None  # the routed experts' busiest expert and chip (_routing)

    @property
    def flops(self) -> float:
        return sum(c.flops for c in self.groups.values())


def _routing(cfg: TransformerConfig, ep: int, tokens: float) -> tuple[float, float, RoutingFigures | None]:
    """(weight-read factor, rows factor, figures) of a step routing ``tokens`` tokens
    (plan/serve/routing.py): the busiest expert-parallel chip reads busiest_chip_experts /
    (touched / ep) times the mean chip's expert weights and computes busiest_of(ep, T k, 1 / ep) /
    (T k / ep) times its rows (a chip's share of the rows: with one expert per chip, the busiest
    expert's). The busiest expert's rows are a figure of the matmul terms: within one chip the
    grouped matmul's tiles of every expert run side by side, so the busiest expert sets no time
    of its own while its rows fit the tiles the others use."""
    moe = cfg.moe
    if moe is None or tokens <= 0:
        return 1.0, 1.0, None
    touched, mean = moe.touched(tokens), routing.mean_rows(moe, tokens)
    top = max(mean, routing.busiest_rows(moe, tokens))
    reads = rows = 1.0
    figures = RoutingFigures(
        routed_tokens=tokens, experts_touched=touched, expert_mean_rows=mean, expert_busiest_rows=top
    )
    if ep > 1:
        chip_experts = routing.busiest_chip_experts(moe, tokens, ep)
        reads = chip_experts / (touched / ep)
        assignments = tokens * moe.top_k
        rows = max(1.0, routing.busiest_of(ep, round(assignments), 1 / ep) / (assignments / ep))
        figures = figures._replace(ep=ep, busiest_chip_experts=chip_experts, busiest_chip_rows_factor=rows)
    return reads, rows, figures


@lru_cache(maxsize=256)
def _model_leaves(cfg: TransformerConfig, workload: Workload, dtypes: Dtypes) -> tuple[CostTree, ...]:
    """The model's priced ops for one workload: the same for every layout of a sweep, so priced once
    (DeepSeek-V3 costs ~30 ms a workload; a sweep over 15 layouts asked for it 417 times)."""
    return tuple(leaf for _, leaf in model_costs(cfg, workload, dtypes).leaves())


def chip_cost(
    cfg: TransformerConfig,
    workload: Workload,
    dtypes: Dtypes,
    layout: ServingLayout,
    weights: bool = True,
    weight_tokens: float | None = None,
    busiest: float | None = None,
) -> ChipCost:
    """Per-chip Cost of ``workload`` (the whole model, one replica) under ``layout``'s tensor and
    expert parallelism, grouped into matmul / attention / elementwise ops; ``weights=False`` leaves
    the weight reads out (a part of a step whose weights another part already reads).
    ``weight_tokens``: the routed experts read are those that many tokens touch (a step whose other
    part's tokens route through the same weights) instead of the workload's own; ``busiest``: the
    busiest attention rank's fraction of the work (``busiest_fraction`` of the batch by default)."""
    if workload.phase == "decode" and layout.static_cache_len:
        workload = replace(workload, kv_len=layout.static_cache_len)
    reads = query_head_reads(cfg, layout) if workload.phase == "decode" else 1.0
    leaves = _model_leaves(cfg, workload, dtypes)
    scale = 1.0  # the routed experts' weight reads, relative to the workload's own (model/transformer.py)
    own = workload.batch * workload.seq_len
    if weight_tokens is not None and cfg.moe is not None:
        scale = cfg.moe.touched(weight_tokens) / cfg.moe.touched(own)
    imbalance, rows, figures = _routing(cfg, layout.ep, own if weight_tokens is None else weight_tokens)
    busiest = busiest_fraction(layout, workload.batch) if busiest is None else busiest
    flops: dict[str, dict[tuple[str, str], float]] = {g: {} for g in GROUPS}
    nbytes = dict.fromkeys(GROUPS, 0.0)
    totals = [0.0, 0.0, 0.0]
    gemms: list[tuple[Gemm, float]] = []
    for leaf in leaves:
        tag, cost = leaf.tag, leaf.cost
        assert tag is not None  # model_costs tags every leaf
        s = layout_share(tag, cfg, layout, workload.phase == "prefill", busiest, cost.gemm)
        group = op_group(tag)
        if tag.expert and rows > 1:  # the busiest chip's rows
            s = tensor.Share(s.flops * rows, s.weights, s.kv, s.act * rows)
        if group == "matmul" and cost.gemm is not None and s.flops > 0:
            gemms.append((chip_gemm(cost.gemm, tag, s, cfg), cost.flops * s.flops))
        for key, v in cost.flops_by.items():
            flops[group][key] = flops[group].get(key, 0.0) + v * s.flops
        w, k = cost.bytes_of("weights"), cost.bytes_of("kv_cache")
        w_chip = w * s.weights * (imbalance * scale if tag.expert else 1.0) if weights else 0.0
        k_chip = k * s.kv * (reads if tag.category == "attention" else 1.0)
        a_chip = (cost.hbm_bytes - w - k) * s.act
        nbytes[group] += w_chip + k_chip + a_chip
        totals = [totals[0] + w_chip, totals[1] + k_chip, totals[2] + a_chip]
    weights_bytes, kv_bytes, other_bytes = totals
    return ChipCost(
        {g: Cost(flops[g], nbytes[g]) for g in GROUPS}, weights_bytes, kv_bytes, other_bytes, tuple(gemms), figures
    )
