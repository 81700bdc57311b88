"""What a transformer stores beyond its weights (model/params.py: the layers' parts and the
parameter tree): KV cache and recurrent state, training state (activations: model/activations.py).

- ``kv_cache_bytes_per_token(cfg, kv_dtype)`` and ``kv_cache_bytes(cfg, batch, context_len,
  kv_dtype)``: keys and values of every layer, 2 K H per token per layer (MLA: the latent
  and rotary key, R_kv + H_rope); sliding-window layers keep at most ``sliding_window``.
  LLaMA-3-70B in bf16: 2 x 80 layers x 8 KV heads x 128 x 2 bytes = 327,680 bytes per token.
  Quantized caches (int8, fp8) are counted at 1 byte per element; their scales are ignored.
- ``training_bytes_per_param(precision)`` and ``training_state_bytes(cfg, precision)``:
  weights + gradients + fp32 master copy + optimizer moments. Mixed-precision Adam is
  2 + 2 + 4 + 4 + 4 = 16 bytes per parameter (ZeRO, Rajbhandari et al. 2020, section 3.1).
- ``training_memory_bytes``: the state plus the activations (model/activations.py) of a batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rooftop.cost.cost import Cost
from rooftop.dtypes import canonical_dtype, dtype_bytes
from rooftop.errors import UnknownNameError
from rooftop.model.activations import activation_bytes_per_token, logits_bytes_per_token
from rooftop.model.config import TransformerConfig
from rooftop.model.layers import layer_groups
from rooftop.model.params import params_total
from rooftop.parts import Parts

# ---------------------------------------------------------------- KV cache


def kv_cache_elements_per_token(cfg: TransformerConfig) -> int:
    """Cached elements per token per layer: keys and values, 2 K H; for MLA the latent and
    the shared rotary key, R_kv + H_rope (DeepSeek-V2 section 2.1.2)."""
    if cfg.mla is not None:
        return cfg.mla.kv_lora_rank + cfg.mla.qk_rope_head_dim
    return 2 * cfg.n_kv_heads * cfg.head_dim


def attention_layers(cfg: TransformerConfig) -> int:
    """Layers whose mixer attends over a KV cache (every layer of a plain transformer)."""
    return sum(g.count for g in layer_groups(cfg) if g.attends)


def kv_cache_bytes_per_token(cfg: TransformerConfig, kv_dtype: str = "bf16") -> float:
    """Bytes one more token adds to the cache of one sequence, all attention layers: their count x
    kv_cache_elements_per_token x dtype bytes (sliding-window layers too: the per-token figure
    before any window is full; see kv_cache_bytes for the capped total). Linear-attention and
    state-space layers add nothing per token (``state_bytes_per_sequence``)."""
    return float(attention_layers(cfg) * kv_cache_elements_per_token(cfg) * dtype_bytes(kv_dtype))


def state_elements_per_layer(cfg: TransformerConfig, mixer: str) -> int:
    """The constant-size state one sequence keeps in a layer of ``mixer``: the recurrent state
    (linear attention: dk x dv per value head; SSM: d_state per channel) and the last
    conv_kernel - 1 inputs of the causal convolution per channel (what vLLM's hybrid cache keeps
    per request); 0 for attention."""
    if mixer == "linear" and cfg.linear is not None:
        la = cfg.linear
        return la.state_elements + (la.conv_kernel - 1) * la.conv_dim
    if mixer in ("ssm", "hybrid") and cfg.ssm is not None:
        m = cfg.ssm
        return m.state_elements + (m.conv_kernel - 1) * m.conv_dim
    return 0


def state_bytes_per_sequence(cfg: TransformerConfig, state_dtype: str = "bf16") -> float:
    """Bytes of every layer's constant-size state for one sequence (0 for a plain transformer),
    in ``state_dtype`` (the cache dtype: engines keep it in the model's dtype by default)."""
    elements = sum(g.count * state_elements_per_layer(cfg, g.mixer) for g in layer_groups(cfg) if g.stateful)
    return float(elements * dtype_bytes(state_dtype))


def kv_cache_bytes(cfg: TransformerConfig, batch: int, context_len: int, kv_dtype: str = "bf16") -> float:
    """Cache bytes of ``batch`` sequences at ``context_len`` tokens: sum over attention layers of
    min(context_len, window) x kv_cache_elements_per_token x dtype bytes, plus the constant state
    of the linear-attention and state-space layers (``state_bytes_per_sequence``), times batch."""
    per = kv_cache_elements_per_token(cfg) * dtype_bytes(kv_dtype)
    tokens = sum(
        g.count * (min(context_len, g.window) if g.window else context_len) for g in layer_groups(cfg) if g.attends
    )
    return float(batch * (tokens * per + state_bytes_per_sequence(cfg, kv_dtype)))


# ---------------------------------------------------------------- training state


@dataclass(frozen=True)
class OptimizerKind:
    """``states_per_param``: state tensors kept per parameter; ``flops_per_param``: vector FLOPs of
    one update per parameter (counted from the update rule, each multiply, add, divide and square
    root one FLOP)."""

    states_per_param: int
    description: str
    flops_per_param: float


OPTIMIZERS: dict[str, OptimizerKind] = {
    # m = b1 m + (1-b1) g (3); v = b2 v + (1-b2) g^2 (4); bias corrections (2); m / (sqrt(v) + eps) (3); w -= lr x (2)
    "adam": OptimizerKind(2, "first and second moments (Kingma & Ba 2015)", 14.0),
    "adamw": OptimizerKind(2, "first and second moments, decoupled weight decay (Loshchilov & Hutter 2019)", 16.0),
    # m' = b1 m + (1-b1) g (3); sign (1); + wd w (2); w -= lr x (2); m = b2 m + (1-b2) g (3)
    "lion": OptimizerKind(1, "momentum only (Chen et al. 2023)", 11.0),
    "sgd-momentum": OptimizerKind(1, "momentum", 4.0),  # m = mu m + g (2); w -= lr m (2)
    "sgd": OptimizerKind(0, "no state", 2.0),  # w -= lr g
}


@dataclass(frozen=True)
class TrainingPrecision:
    """Element types of the training state. ``master``: dtype of a separate master copy of
    the weights the optimizer updates (None: the weights are updated in place)."""

    params: str = "bf16"
    grads: str = "bf16"
    master: str | None = "fp32"
    optimizer: str = "adam"
    optimizer_state: str = "fp32"

    def __post_init__(self) -> None:
        for f in ("params", "grads", "optimizer_state"):
            object.__setattr__(self, f, canonical_dtype(getattr(self, f)))
        if self.master is not None:
            object.__setattr__(self, "master", canonical_dtype(self.master))
        if self.optimizer not in OPTIMIZERS:
            raise UnknownNameError("optimizer", self.optimizer, OPTIMIZERS)


TrainingPartName = Literal["weights", "grads", "master", "optimizer"]


@dataclass(frozen=True, slots=True)
class TrainingBytes(Parts[TrainingPartName]):
    """The training state by part (per parameter, or of a model: ``scaled``): weights, gradients, the fp32
    master copy (0 without one) and the optimizer's moments; ``total`` their sum."""

    weights: float
    grads: float
    master: float
    optimizer: float

    def scaled(self, n: float) -> TrainingBytes:
        return TrainingBytes(n * self.weights, n * self.grads, n * self.master, n * self.optimizer)


def training_bytes_per_param(precision: TrainingPrecision | None = None) -> TrainingBytes:
    """Bytes per parameter of weights, gradients, master copy and optimizer state, and their
    total (default: bf16 weights and grads, fp32 master, fp32 Adam moments = 2+2+4+8 = 16)."""
    p = precision or TrainingPrecision()
    return TrainingBytes(
        weights=dtype_bytes(p.params),
        grads=dtype_bytes(p.grads),
        master=dtype_bytes(p.master) if p.master else 0.0,
        optimizer=OPTIMIZERS[p.optimizer].states_per_param * dtype_bytes(p.optimizer_state),
    )


def optimizer_update_cost(precision: TrainingPrecision | None = None) -> Cost:
    """The optimizer update of ONE parameter: vector FLOPs of the rule (OPTIMIZERS) in the state
    dtype, and HBM bytes: read the gradient, the weights being updated (the master copy when there
    is one) and the optimizer state; write them back, and the working weights too when a master
    copy is kept. Adam with bf16 weights and grads, fp32 master and moments: (2 + 4 + 8) read +
    (4 + 8 + 2) written = 28 bytes."""
    p = precision or TrainingPrecision()
    b = training_bytes_per_param(p)
    updated = b.master or b.weights
    written = updated + b.optimizer + (b.weights if b.master else 0.0)
    flops = OPTIMIZERS[p.optimizer].flops_per_param
    key = ("vector", canonical_dtype(p.optimizer_state))
    return Cost.typed({key: flops}, {"optimizer": b.grads + updated + b.optimizer + written})


def training_state_bytes(cfg: TransformerConfig, precision: TrainingPrecision | None = None) -> TrainingBytes:
    """Unsharded training state of the whole model: params_total x each per-parameter figure."""
    return training_bytes_per_param(precision).scaled(params_total(cfg))


TrainingMemoryName = Literal["weights", "grads", "master", "optimizer", "activations", "logits"]


@dataclass(frozen=True, slots=True)
class TrainingMemory(Parts[TrainingMemoryName]):
    """Unsharded training memory by part: the training state (TrainingBytes' parts), the activations the
    backward pass keeps and the fp32 logits; ``total`` their sum."""

    weights: float
    grads: float
    master: float
    optimizer: float
    activations: float
    logits: float


def training_memory_bytes(
    cfg: TransformerConfig,
    batch: int,
    seq_len: int,
    remat: str = "none",
    precision: TrainingPrecision | None = None,
    activation_dtype: str = "bf16",
) -> TrainingMemory:
    """Unsharded training memory: the training state plus the activations of ``batch``
    sequences of ``seq_len`` (layers under ``remat``, plus fp32 logits). Planners divide
    each term by how it is sharded."""
    state = training_state_bytes(cfg, precision)
    tokens = batch * seq_len
    return TrainingMemory(
        state.weights,
        state.grads,
        state.master,
        state.optimizer,
        tokens * activation_bytes_per_token(cfg, seq_len, remat, activation_dtype),
        tokens * logits_bytes_per_token(cfg),
    )
