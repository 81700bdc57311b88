"""The head counts a tensor-parallel group splits, block by block: one rule for every head-sharded block,
which training (plan/train/layout.validate and the search's tp options) and serving (plan/serve/layout.check_tp)
both call through ``TransformerConfig.check_heads`` / ``heads_fit``.

A block's ops split over tp by heads (model/tags.py: "tensor", "heads", "attention"), so each rank must hold
whole heads: tp divides the count. Two counts may instead be copied once tp exceeds them:
- attention's KV heads (grouped-query attention): tp divides K, or K divides tp (each KV head replicated on
  tp / K ranks; Megatron-LM and vLLM both replicate them);
- Mamba-2's B and C groups: tp divides n_groups, or there is one group, replicated on every rank (vLLM's
  MambaMixer2 asserts "n_groups % tp == 0 or n_groups == 1"; Megatron-LM's MambaMixer needs tp | n_groups).
Gated DeltaNet (Qwen3-Next) splits its key and value heads (vLLM's Qwen3NextGatedDeltaNet divides both by
tp); Mamba (version 1, Jamba) has no heads and splits its d_inner channels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rooftop.units import divisors

if TYPE_CHECKING:
    from rooftop.model.config import TransformerConfig


@dataclass(frozen=True)
class HeadCount:
    """A count a tensor-parallel group splits: ``field`` (its config key), the ``block`` it belongs to
    (None for attention, whose keys are the config's own) and whether it may be copied once tp exceeds it
    (``copies``: KV heads, a single Mamba-2 group)."""

    field: str
    count: int
    block: str | None = None
    copies: bool = False

    def fits(self, tp: int) -> bool:
        return self.count % tp == 0 or (self.copies and tp % self.count == 0)

    @property
    def label(self) -> str:
        return self.field if self.block is None else f"the {self.block} block's {self.field}"


def head_counts(cfg: TransformerConfig) -> tuple[HeadCount, ...]:
    """Every count a tensor-parallel group splits, for the blocks the model's layers use."""
    kinds = {cfg.layer_attention(i) for i in range(min(cfg.n_layers, len(cfg.attention_pattern)))}
    out: list[HeadCount] = []
    if kinds & {"global", "local", "chunked", "hybrid"}:
        out.append(HeadCount("n_heads", cfg.n_heads))
        if cfg.tp_kv_heads is not None:
            out.append(HeadCount("n_kv_heads", cfg.tp_kv_heads, copies=True))
    if "linear" in kinds and cfg.linear is not None:
        block = "gated DeltaNet"
        out += [HeadCount("linear.n_key_heads", cfg.linear.n_key_heads, block),
                HeadCount("linear.n_value_heads", cfg.linear.n_value_heads, block)]  # fmt: skip
    if kinds & {"ssm", "hybrid"} and cfg.ssm is not None:
        sm = cfg.ssm
        if sm.version == 2:
            out += [HeadCount("ssm.n_heads", sm.n_heads, "Mamba-2"),
                    HeadCount("ssm.n_groups", sm.n_groups, "Mamba-2", copies=sm.n_groups == 1)]  # fmt: skip
        else:
            out.append(HeadCount("ssm.d_inner", sm.d_inner, "Mamba"))
    return tuple(out)


def valid_tp(counts: tuple[HeadCount, ...]) -> list[int]:
    """The tensor-parallel degrees every count fits: divisors of the split counts' gcd (a copied count
    alone puts no bound on tp, so with only those: up to the largest)."""
    split = [h.count for h in counts if not h.copies]
    base = math.gcd(*split) if split else max((h.count for h in counts), default=1)
    return [d for d in divisors(base) if all(h.fits(d) for h in counts)]


def heads_error(counts: tuple[HeadCount, ...], tp: int) -> str | None:
    """The one-line reason ``tp`` does not fit the first count it breaks, naming its block and the valid tp
    degrees; None when it fits them all."""
    for h in counts:
        if not h.fits(tp):
            valid = ", ".join(map(str, valid_tp(counts)))
            verb = "neither divides nor is a multiple of" if h.copies else "does not divide"
            return f"tp={tp} {verb} {h.label}={h.count}; valid: {valid}"
    return None
