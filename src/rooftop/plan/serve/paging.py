"""Paged KV cache: the engine's block pool and how big it is.

Serving engines carve their KV cache out of HBM at start-up as a pool of fixed-size blocks
(``block_tokens`` positions of every layer each) and hand blocks to requests as they grow (paged
attention, Kwon et al. 2023, "Efficient Memory Management for Large Language Model Serving with
PagedAttention"). The pool is what is left once the engine has loaded its weights and profiled a
forward pass (catalog/efficiency/engines.toml, per engine):

    pool per chip = memory_fraction x HBM - weights - activations - graph_bytes - runtime_bytes   ("total", vLLM)
                  = memory_fraction x (HBM - weights - activations - graph_bytes - runtime_bytes) ("free", TensorRT-LLM)
                  = memory_fraction x HBM - weights                                               ("static", SGLang)
    blocks        = floor(pool per chip / (block_tokens x KV bytes per token per chip))

``activations`` is the peak of the engine's profiling pass over a full token budget T: within one
layer the residual stream and its normed copy (2 x T x D), the attention projections' output
(T x (N + 2 K) x H / tp) and the MLP's gate/up output with its activated half (3 x T x F / tp,
F the routed experts' width x top_k for MoE), in 2-byte activations (the residual stream stays
bf16 under fp8 matmuls), plus the sampler's fp32 logits for ``logits_sequences`` rows of the
vocabulary / tp. The scheduler (plan/serve/scheduler.py) admits, grows and preempts against the
pool's blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from rooftop.catalog.io import builtin_toml
from rooftop.cost.efficiency import Efficiency
from rooftop.errors import InvalidConfigError, UnknownNameError
from rooftop.hardware.chip import Chip
from rooftop.model.config import TransformerConfig
from rooftop.model.workload import Dtypes
from rooftop.plan.serve.layout import ServingLayout, kv_cache_per_chip_bytes, weights_per_chip_bytes

ENGINES = ("generic", "vllm", "sglang", "trtllm")
PREEMPTION = ("recompute", "swap", "none")
MEMORY_OF = ("total", "free", "static")
#: bytes of an activation in the profiling pass's residual stream (bf16)
ACTIVATION_BYTES = 2
#: bytes of a logit (fp32)
LOGIT_BYTES = 4


@dataclass(frozen=True)
class Engine:
    """How an engine keeps and admits its KV cache (module docstring; every figure's source in
    catalog/efficiency/engines.toml)."""

    name: str
    block_tokens: int
    memory_fraction: float
    memory_of: str
    reserve_fraction: float
    preemption: str
    graph_bytes: float
    runtime_bytes: float
    logits_sequences: int
    request_s: float = 0.0
    tokenize_s_per_token: float = 0.0
    detokenize_s: float = 0.0
    return_steps: int = 0
    scheduler_steps: int = 1  # decode steps run as one block between scheduler passes (vLLM V0 multi-step)
    step_s: float | None = None  # the engine's own host time per step (fitted), else the serving efficiency's
    step_per_seq_s: float | None = None  # the same per running sequence (fitted)
    sources: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.preemption not in PREEMPTION or self.memory_of not in MEMORY_OF:
            raise InvalidConfigError(
                f"engine {self.name}: preemption {self.preemption!r} / memory_of {self.memory_of!r}"
            )
        if self.block_tokens < 1 or not 0 < self.memory_fraction <= 1 or not 0 <= self.reserve_fraction <= 1:
            raise InvalidConfigError(
                f"engine {self.name}: block_tokens, memory_fraction or reserve_fraction out of range"
            )


@lru_cache(maxsize=8)
def get_engine(name: str) -> Engine:
    """The engine ``name`` of catalog/efficiency/engines.toml."""
    if name not in ENGINES:
        raise UnknownNameError("engine", name, ENGINES)
    data = builtin_toml("efficiency", "engines.toml")[name]
    v = {k: node["value"] for k, node in data.items()}
    return Engine(
        name,
        int(v["block_tokens"]),
        float(v["memory_fraction"]),
        str(v["memory_of"]),
        float(v["reserve_fraction"]),
        str(v["preemption"]),
        float(v["graph_bytes"]),
        float(v["runtime_bytes"]),
        int(v["logits_sequences"]),
        float(v["request_s"]),
        float(v["tokenize_s_per_token"]),
        float(v["detokenize_s"]),
        int(v["return_steps"]),
        int(v.get("scheduler_steps", 1)),
        float(v["step_s"]) if "step_s" in v else None,
        float(v["step_per_seq_s"]) if "step_per_seq_s" in v else None,
        tuple((k, str(node["source"])) for k, node in data.items()),
    )


def engine_efficiency(eff: Efficiency, engine: Engine) -> Efficiency:
    """``eff`` with the engine's own per-step host times where it has them (fitted, engines.toml)."""
    more = {k: v for k, v in (("step_s", engine.step_s), ("step_per_seq_s", engine.step_per_seq_s)) if v is not None}
    return eff.replace(**more) if more else eff


def activation_bytes(cfg: TransformerConfig, layout: ServingLayout, tokens: int, engine: Engine) -> float:
    """Peak activations per chip of the engine's profiling pass over ``tokens`` tokens (module docstring)."""
    ff = cfg.moe.d_ff_expert * cfg.moe.top_k if cfg.moe is not None else cfg.d_ff
    head = cfg.head_dim or cfg.d_model // cfg.n_heads
    tp = layout.tp
    width = 2 * cfg.d_model + (cfg.n_heads + 2 * cfg.n_kv_heads) * head / tp + 3 * ff / tp
    logits = engine.logits_sequences * cfg.vocab_size / tp * LOGIT_BYTES
    return tokens * width * ACTIVATION_BYTES + logits


@dataclass(frozen=True)
class KVPool:
    """The engine's block pool on one replica: per-chip figures and the blocks they make."""

    engine: Engine
    hbm_bytes: float
    weights_bytes: float
    activations_bytes: float
    pool_bytes: float
    bytes_per_token: float
    blocks: int

    @property
    def tokens(self) -> int:
        return self.blocks * self.engine.block_tokens

    def blocks_for(self, tokens: float) -> int:
        return math.ceil(tokens / self.engine.block_tokens)


def kv_pool(
    cfg: TransformerConfig,
    chip: Chip,
    layout: ServingLayout,
    dtypes: Dtypes,
    token_budget: int,
    engine: Engine,
    usable_fraction: float = 0.95,
) -> KVPool:
    """The pool of ``engine`` on one chip of ``layout`` (module docstring); 0 blocks when nothing is left.
    The engines' fractions and buffers are GPU figures: on other chips (TPUs: the cache an XLA array
    beside the weights, no CUDA graphs) the pool is ``usable_fraction`` x HBM - weights -
    activations, ``usable_fraction`` the serving efficiency's usable HBM (catalog/efficiency/serving.toml)."""
    hbm = chip.hbm_capacity_bytes
    weights = weights_per_chip_bytes(cfg, layout, dtypes.weights)
    act = activation_bytes(cfg, layout, token_budget, engine)
    fixed = weights + act + engine.graph_bytes + engine.runtime_bytes
    if chip.kind != "gpu":
        pool = usable_fraction * hbm - weights - act
    elif engine.memory_of == "total":
        pool = engine.memory_fraction * hbm - fixed
    elif engine.memory_of == "free":
        pool = engine.memory_fraction * (hbm - fixed)
    else:
        pool = engine.memory_fraction * hbm - weights
    per_token = kv_cache_per_chip_bytes(cfg, layout, 1, 1, dtypes.kv_cache)
    blocks = int(max(pool, 0.0) // (per_token * engine.block_tokens)) if per_token > 0 else 0
    return KVPool(engine, hbm, weights, act, max(pool, 0.0), per_token, blocks)
