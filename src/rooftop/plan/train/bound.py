"""A lower bound on the step time of every candidate layout at once, from the roofline of its compute alone,
so that a search can skip the layouts that provably cannot rank (plan/train/search.py).

A step (plan/train/step.py) is m microbatches of the pipeline stage that sets the pace plus the bubble, (pp - 1)
/ v microbatch times, plus terms that are never negative (exposed communication, the data-parallel reduction,
the optimizer, offload). A microbatch's time on a stage is at least its forward and backward ops' compute:
each op takes max(compute, memory) and its compute is FLOPs / (peak x efficiency) divided by the matmul shape
efficiency and the attention kernel's ceiling, both at most 1 (cost/gemm.py clips to 1; profile._core_scale),
and remat only adds recompute. The FLOPs of one microbatch of b sequences on one chip are the sequence's over
tp x cp (profile.op_roofline), so the compute of one unsharded sequence, summed over the layers' ops and over
the ops outside them, prices every layout by a product. The stage that sets the pace (profile.stage_pace) is
either the last (its layers and the ops outside them) or the fullest other stage (its layers): the bound takes
the lesser of the two, for each remat policy the search may keep, and the least over those policies:

    bound = min over remat of min(last x C_layer / L + C_out, most x C_layer / L) x b / (tp cp) x (m + (pp-1)/v)

with pp = 1 one stage of all L layers and the ops outside them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rooftop.cost.roofline import roofline_table
from rooftop.plan.train.layout import _stage_split
from rooftop.plan.train.profile import ModelProfile


def compute_per_sequence(prof: ModelProfile) -> tuple[float, float]:
    """(layer ops, ops outside the layers): the forward and backward ops' compute seconds for one sequence on
    one chip, unsharded, at a shape efficiency of 1."""
    table = roofline_table(prof.flops, prof.keys, np.zeros(len(prof.phase)), prof.chip, prof.eff)
    passes = prof.phase < 2
    return float(table.compute_s[prof.in_layers & passes].sum()), float(table.compute_s[~prof.in_layers & passes].sum())


def step_lower_bounds(rows: np.ndarray, global_batch: int, profiles: Sequence[ModelProfile]) -> np.ndarray:
    """The bound (module docstring) of each candidate row (columns dp, fsdp, tp, pp, ep, cp, microbatches,
    virtual_stages, pipeline_balance: search.ROW_FIELDS), in seconds."""
    dp, fsdp, tp, pp, _, cp, m, v, balanced = (rows[:, i] for i in range(9))
    per_replica = -(-global_batch // (dp * fsdp))
    b = -(-per_replica // m)
    scale = b / (tp * cp) * (m + (pp - 1) / v)
    balanced_v = np.where(balanced.astype(bool) & (pp > 1), v, 0)
    pairs, back = np.unique(np.stack([pp, balanced_v]), axis=1, return_inverse=True)
    out = np.full(len(rows), np.inf)
    for prof in profiles:
        c_layer, c_out = compute_per_sequence(prof)
        n = prof.n_layers
        splits = [_stage_split(n, int(p), int(bv), prof.head_layers) for p, bv in pairs.T.tolist()]
        last = np.array([s.last for s in splits], dtype=float)[back.ravel()]
        most = np.array([s.most for s in splits], dtype=float)[back.ravel()]
        staged = np.minimum(last * c_layer / n + c_out, most * c_layer / n)
        out = np.minimum(out, np.where(pp == 1, c_layer + c_out, staged) * scale)
    return out
