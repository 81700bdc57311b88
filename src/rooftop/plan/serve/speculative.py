"""Speculative decoding and multi-token prediction: each target step verifies k drafted tokens
per sequence and keeps the accepted ones plus one of its own.

Tokens per target step (Leviathan, Kalman and Matias 2023, "Fast Inference from Transformers via
Speculative Decoding", eq. 1): with each drafted token accepted with probability a (independently),
the expected tokens a step yields are 1 + a + a^2 + ... + a^k = (1 - a^(k+1)) / (1 - a).

The step's cost, priced by plan/serve/phase.py on the replica's layout:

- the target verifies k + 1 tokens per sequence at once: a prefill Workload of k + 1 tokens per
  sequence after the context (``prefill`` with ``cached_len``: every weight read once for all of
  them, the attention of each new token over the cache; the output head is priced for the last
  token only, as in any prefill: the other k rows of logits, 2 k d_model vocab FLOPs per sequence,
  are not counted);
- a draft model (``draft``): k decode steps of it, one per drafted token, at the same batch and
  context, on the same chips and layout;
- MTP (multi-token prediction, DeepSeek-V3 technical report, section 2.2): k sequential modules,
  each one transformer block with the model's embedding and output head (shared weights, priced as a
  1-layer model of the target's kind; the module's 2d x d projection is not counted).

Time per output token = step / expected tokens.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rooftop.errors import InvalidConfigError, shown
from rooftop.hardware.topology import make_mesh
from rooftop.plan.serve.phase import PhaseTime, decode_step, prefill

if TYPE_CHECKING:
    from rooftop.model.config import TransformerConfig
    from rooftop.plan.serve.layout import ServingLayout
    from rooftop.plan.serve.sweep import ServingRequest

#: most tokens drafted per step
MAX_DRAFT = 64


def expected_tokens(accept_rate: float, k: int) -> float:
    """1 + a + ... + a^k (Leviathan et al. 2023, eq. 1)."""
    return float(k + 1) if accept_rate == 1 else (1 - accept_rate ** (k + 1)) / (1 - accept_rate)


@dataclass(frozen=True)
class Speculation:
    """One target step of ``batch`` sequences with ``k`` drafted tokens each (module docstring)."""

    kind: str  # "draft" or "mtp"
    k: int
    accept_rate: float
    plain: PhaseTime  # the decode step without speculation
    verify: PhaseTime
    draft_step: PhaseTime  # one draft step (a draft model's decode, or one MTP module's)

    @property
    def tokens_per_step(self) -> float:
        return expected_tokens(self.accept_rate, self.k)

    @property
    def step_s(self) -> float:
        return self.verify.time_s + self.k * self.draft_step.time_s

    @property
    def tpot_s(self) -> float:
        return self.step_s / self.tokens_per_step

    @property
    def speedup(self) -> float:
        return self.plain.time_s / self.tpot_s


def mtp_module(cfg: TransformerConfig) -> TransformerConfig:
    """One MTP module as a model: one block of the target's kind (a routed-expert one when the model
    has experts), with its embedding and output head."""
    moe = dataclasses.replace(cfg.moe, first_dense_layers=0) if cfg.moe is not None else None
    return dataclasses.replace(cfg, n_layers=1, moe=moe)


def speculation(
    req: ServingRequest,
    layout: ServingLayout,
    batch: int,
    k: int,
    accept_rate: float,
    draft: TransformerConfig | None = None,
) -> Speculation:
    """``batch`` sequences per replica at the request's mean decode context; a draft model when
    ``draft`` is given, else MTP with k modules."""
    if not 1 <= k <= MAX_DRAFT:
        raise InvalidConfigError(f"{k} drafted tokens per step: must be from 1 to {MAX_DRAFT}")
    if not 0 <= accept_rate <= 1 or math.isnan(accept_rate):
        raise InvalidConfigError(f"accept-rate={shown(accept_rate)} must be between 0 and 1")
    mesh = make_mesh(req.topology, layout.mesh_axes())
    ctx = req.decode_context_len
    algo = req.algorithm
    plain = decode_step(req.cfg, req.chip, mesh, layout, batch, ctx, req.dtypes, req.eff, algo)
    verify = prefill(req.cfg, req.chip, mesh, layout, batch, ctx + k, req.dtypes, req.eff, ctx - 1, algo)
    small = draft if draft is not None else mtp_module(req.cfg)
    step = decode_step(small, req.chip, mesh, layout, batch, ctx, req.dtypes, req.eff, algo)
    return Speculation("draft" if draft is not None else "mtp", k, accept_rate, plain, verify, step)
