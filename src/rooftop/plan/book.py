"""Serving at the book's simplifying assumptions (values only; report/serve_book.py writes them out).

"How to Scale Your Model" (Austin et al.), Part 7 "All About Transformer Inference" ("Sharding the KV
cache") and Part 8 "Serving LLaMA 3-70B on TPUs" size a decode batch and time a step with a few
assumptions that rooftop's planner (plan/serve/) does not make:

- every byte of every chip's HBM holds weights or cache (no runtime reserve, no activations);
- the weights are stored once over the slice and the cache is sharded over every chip (the KV heads,
  then the batch), so the slice holds (chips x HBM - weights) / (KV bytes per token x context)
  sequences, not a whole number per batch shard;
- a decode step reads every weight and the whole cache at peak HBM bandwidth, all chips at once:
  T_step = max((weights + B x context x KV per token) / (chips x HBM bytes/s), 2 x active params x B /
  (chips x peak FLOP/s)), with no collectives, launches or activations (Part 7: "a reasonable bound").

The context is the full one (prompt + generated tokens: the cache at its largest, as the book fills
HBM); the figures are the chip's (``--chip NAME@book`` gives the book's rounded ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rooftop.dtypes import compute_dtype, dtype_bytes
from rooftop.hardware.chip import Chip
from rooftop.model.config import TransformerConfig
from rooftop.model.memory import kv_cache_bytes, params_active, params_total


@dataclass(frozen=True)
class BookServing:
    """The book's largest decode batch on ``chips`` chips and the step time at it (see the module)."""

    chips: int
    context_len: int
    hbm_bytes: float  # all chips together
    weights_bytes: float
    kv_bytes_per_sequence: float
    max_batch: int
    memory_s: float
    compute_s: float

    @property
    def step_time_s(self) -> float:
        return max(self.memory_s, self.compute_s)


def book_serving(
    cfg: TransformerConfig,
    chip: Chip,
    chips: int,
    context_len: int,
    weights_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    activations_dtype: str = "bf16",
) -> BookServing:
    """The book's max batch and step time for ``cfg`` served on ``chips`` x ``chip`` at ``context_len``."""
    hbm = chips * chip.hbm_capacity_bytes
    weights = params_total(cfg) * dtype_bytes(weights_dtype)
    per_seq = kv_cache_bytes(cfg, 1, context_len, kv_dtype)
    batch = max(0, math.floor((hbm - weights) / per_seq))
    memory_s = (weights + batch * per_seq) / (chips * chip.hbm_bytes_per_s)
    peak = chip.flops_per_s(compute_dtype(weights_dtype, activations_dtype))
    compute_s = 2 * params_active(cfg) * batch / (chips * peak)
    return BookServing(chips, context_len, hbm, weights, per_seq, batch, memory_s, compute_s)
