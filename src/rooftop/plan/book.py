"""Serving at the book's simplifying assumptions (values only; report/serve_book.py writes them out).

"How to Scale Your Model" (Austin et al.), Part 7 "All About Transformer Inference" ("Sharding the KV
cache") and Part 8 "Serving LLaMA 3-70B on TPUs" size a decode batch and time a step with a few
assumptions that rooftop's planner (plan/serve/) does not make:

- every byte of every chip's HBM holds weights or cache (no runtime reserve, no activations);
- the weights are stored once over the slice and the cache is sharded over every chip (the KV heads,
  then the batch), so the slice holds (chips x HBM - weights) / (KV bytes per token x context)
  sequences, not a whole number per batch shard;
- a decode step reads every weight and the whole cache at peak HBM bandwidth, all chips at once (Part 8,
  "Theoretical Step Time (General)"): the attention's cache read B x KV per sequence / (chips x HBM
  bytes/s), always bandwidth-bound, plus the matmuls' max(2 x B x active params / (chips x peak FLOP/s),
  weights / (chips x HBM bytes/s)); no collectives, launches or activations.

The context is the full one (prompt + generated tokens: the cache at its largest, as the book fills
HBM); the figures are the chip's (``--chip NAME@book`` gives the book's rounded ones).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rooftop.dtypes import compute_dtype, dtype_bytes
from rooftop.hardware.chip import Chip
from rooftop.model.config import TransformerConfig
from rooftop.model.memory import kv_cache_bytes
from rooftop.model.params import params_active, params_total


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

    hbm_bytes_per_s: float = 0.0  # all chips together
    flops_per_s: float = 0.0  # all chips together
    active_params: float = 0.0

    def step_time_at(self, batch: int) -> float:
        """Part 8's general step time at ``batch`` sequences of the full context."""
        kv = batch * self.kv_bytes_per_sequence / self.hbm_bytes_per_s
        return kv + max(2 * batch * self.active_params / self.flops_per_s, self.weights_bytes / self.hbm_bytes_per_s)

    @property
    def step_time_s(self) -> float:
        return self.step_time_at(self.max_batch)


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
    active = params_active(cfg)
    compute_s = 2 * active * batch / (chips * peak)
    return BookServing(
        chips, context_len, hbm, weights, per_seq, batch, memory_s, compute_s,
        chips * chip.hbm_bytes_per_s, chips * peak, active,
    )  # fmt: skip
