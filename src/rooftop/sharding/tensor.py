"""How a tagged op divides over a tensor-parallel group: the one place the rule lives.

model/ tags every op it makes with how it splits (cost.OpTag.split, cost.OP_SPLITS); this module
turns a tag into the fractions of the op's FLOPs, weight bytes, KV-cache bytes and activation bytes
that one chip of a group of ``tp`` chips handles (``Share``):

- "tensor": Megatron's column-parallel (q, k, v, gate, up) and row-parallel (o, down) matmuls and the
  vocabulary-parallel output head: FLOPs and weights / tp. The input is read whole and the output
  written as a shard (column parallel), or the reverse (row parallel): by the matmul's shape when the
  caller gives it (``matmul_activations``), else (1 + 1/tp) / 2 of the activation bytes on average
  (Shoeybi et al. 2019, section 3).
- "kv_heads": the k and v projections of grouped-query attention: their weights and FLOPs spread over
  the KV heads, min(tp, K) ways (KV heads are replicated once tp > K).
- "attention": the attention core and the cache writes: FLOPs and activations / tp (query heads),
  the cache / the chips the KV heads spread over (``kv_shards``; MLA's latent cache has no heads and
  is replicated).
- "heads": per-head elementwise work (rotary embedding, q/k norms, the MLP activation): / tp.
- "vocab": a vocabulary-parallel table (the embedding lookup): weights / tp, the lookup replicated.
- "tokens": norms and residual adds: replicated, or split over the tokens under sequence parallelism
  (Korthikanti et al. 2022: the all-reduce becomes reduce-scatter + all-gather, same bytes).
- "replicated": the same on every chip (MLA's down-projections, the MoE router).

Training time (plan/train/profile.py, through ``share_columns``), training memory (plan/train/memory.py:
weights through ``share``, kept activations through ``tensor_ways``) and serving (plan/serve/layout.py) all
call these functions; tests/unit/test_one_sharding_rule.py checks that they agree on every catalog model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rooftop.cost.cost import Gemm, OpTag, Split


@dataclass(frozen=True)
class Share:
    """Fractions of an op's FLOPs, weight bytes, cache bytes and activation bytes one chip handles."""

    flops: float = 1.0
    weights: float = 1.0
    kv: float = 1.0
    act: float = 1.0


def kv_shards(tp: int, kv_heads: int | None) -> int:
    """Chips of a TP group the KV cache spreads over: min(tp, K); a cache with no heads to split
    (``kv_heads`` None, as MLA's latent) is replicated: 1."""
    return 1 if kv_heads is None else min(tp, kv_heads)


def share(
    tag: OpTag, tp: int, kv_heads: int | None, sequence_parallel: bool = False, gemm: Gemm | None = None
) -> Share:
    """One chip's fractions of an op tagged ``tag`` in a TP group of ``tp`` chips (module docstring); a
    matmul's ``gemm`` shape makes its activation share exact (``matmul_activations``)."""
    split = tag.split
    if split == Split.TENSOR:
        return Share(1 / tp, 1 / tp, 1.0, matmul_activations(tp, tag.row_parallel, gemm))
    if split == Split.KV_HEADS:
        s = kv_shards(tp, kv_heads)
        return Share(1 / s, 1 / s, 1.0, matmul_activations(s, False, gemm))
    if split == Split.ATTENTION:
        return Share(1 / tp, 1.0, 1 / kv_shards(tp, kv_heads), 1 / tp)
    if split == Split.HEADS or (split == Split.TOKENS and sequence_parallel):
        return Share(1 / tp, 1.0, 1.0, 1 / tp)
    if split == Split.VOCAB:
        return Share(1.0, 1 / tp, 1.0, 1.0)
    return Share()  # "replicated", and "tokens" without sequence parallelism


def tensor_ways(split: Split, tp: int, kv_heads: int | None, sequence_parallel: bool = False) -> int:
    """The ways one tensor (a kept activation, a weight) of an op tagged ``split`` divides over a TP group of
    ``tp`` chips: the k and v outputs over the KV heads (``kv_shards``), the sequence regions (norms,
    residual) over tp only under sequence parallelism, replicated and vocabulary tables' lookups whole,
    the rest (heads, a split matmul's sharded side) over tp; the same cases as ``share``'s."""
    if split == Split.KV_HEADS:
        return kv_shards(tp, kv_heads)
    if split in (Split.REPLICATED, Split.VOCAB) or (split == Split.TOKENS and not sequence_parallel):
        return 1
    return tp


def share_columns(
    tags: Sequence[OpTag | None],
    gemms: Sequence[Gemm | None],
    tp: int,
    kv_heads: int | None,
    sequence_parallel: bool = False,
) -> np.ndarray:
    """``share`` for a table of ops: an (ops x 3) array of one chip's (FLOPs, weight bytes, activation
    bytes) fractions, each distinct (tag, shape) worked out once. An op without a tag divides evenly
    over tp (its FLOPs and bytes / tp)."""
    found: dict[tuple[OpTag | None, Gemm | None], tuple[float, float, float]] = {}
    rows = []
    even = (1 / tp, 1 / tp, 1 / tp)
    for tag, gemm in zip(tags, gemms, strict=True):
        key = (tag, gemm)
        row = found.get(key)
        if row is None:
            s = share(tag, tp, kv_heads, sequence_parallel, gemm) if tag is not None else None
            row = found[key] = even if s is None else (s.flops, s.weights, s.act)
        rows.append(row)
    return np.array(rows, dtype=float).reshape(len(rows), 3)


def matmul_activations(ways: int, row_parallel: bool, gemm: Gemm | None) -> float:
    """The fraction of a split matmul's activation bytes (its input m x k and output m x n) one of ``ways``
    chips moves: a column-parallel matmul reads the input whole and writes 1/ways of the output, a row-parallel
    one reads 1/ways of the input and writes a whole partial output (Shoeybi et al. 2019, section 3):
    (k + n / ways) / (k + n), or (k / ways + n) / (k + n). Without a shape, in and out count alike:
    (1 + 1/ways) / 2."""
    if gemm is None or gemm.k + gemm.n <= 0:
        return (1 + 1 / ways) / 2
    k, n = (gemm.k / ways, gemm.n) if row_parallel else (gemm.k, gemm.n / ways)
    return (k + n) / (gemm.k + gemm.n)
