"""A plan's layout as JAX mesh axes and PartitionSpec entries (values: tuples of axis names), for the
emitters beside it.

Training (plan/train/layout.Parallelism) follows Megatron-LM (Shoeybi et al. 2019, section 3) for the
tensor axis: the first matmul of a block (attention q/k/v, MLP in) split on its output dim, the second
(attention out, MLP out) on its input dim, so a block's hidden activations stay split and its output is
reduced once; the embedding and the output head split over the vocabulary. FSDP (ZeRO-3, Rajbhandari et
al. 2020) splits each weight's other dim over the fsdp axis; the batch is split over data and fsdp; the
sequence over context (cp), and with Megatron sequence parallelism (Korthikanti et al. 2022) the
residual stream between blocks over the tensor axis too. ZeRO-1/2 shard the optimizer state (and the
gradients) over data as well. Pipeline stages split layer-stacked weights ([n_layers, ...]) on their
leading dim. Serving (plan/serve/layout.ServingLayout): the same tensor split per replica, replicas
(and attention data parallelism, or the cache split over the batch) over the batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rooftop.model.config import TransformerConfig
    from rooftop.plan.serve.layout import ServingLayout
    from rooftop.plan.train.layout import Parallelism

#: the plan's axis names -> the JAX mesh's (training and serving)
AXIS_NAMES = {"dp": "data", "pp": "stage", "fsdp": "fsdp", "cp": "context", "tp": "model",
              "replicas": "replica", "attn_dp": "attn_dp", "kv_batch": "kv_batch"}  # fmt: skip

Entry = str | tuple[str, ...] | None
Spec = tuple[Entry, ...]


def _join(*axes: str | None) -> Entry:
    """Axes of one tensor dim: None (replicated), one name, or a tuple of names (outermost first)."""
    named = tuple(a for a in axes if a)
    return None if not named else named[0] if len(named) == 1 else named


def mesh_of(axes: dict[str, int]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(JAX axis names, sizes), outermost first, from a plan's ``mesh_axes()``."""
    return tuple(AXIS_NAMES[k] for k in axes), tuple(axes.values())


def train_specs(par: Parallelism) -> tuple[dict[str, Spec], dict[str, Spec], dict[str, Spec]]:
    """(weights, optimizer state, activations) of a training layout (module docstring)."""
    t = "model" if par.tp > 1 else None
    w = "fsdp" if par.fsdp > 1 else None
    c = "context" if par.cp > 1 else None
    d = "data" if par.dp > 1 else None
    stage = ("stage",) if par.pp > 1 else ()
    batch = _join(d, w)
    weights: dict[str, Spec] = {
        "embed": (t, w),  # [vocab, d_model]
        "attn_qkv": (*stage, w, t),  # [d_model, (n_heads + 2 n_kv_heads) x head_dim]
        "attn_out": (*stage, t, w),  # [n_heads x head_dim, d_model]
        "mlp_in": (*stage, w, t),  # [d_model, d_ff] (gate and up)
        "mlp_out": (*stage, t, w),  # [d_ff, d_model]
        "norm": (*stage, None),  # [d_model]
        "lm_head": (w, t),  # [d_model, vocab]
    }
    zero = d if par.zero_stage >= 1 else None  # ZeRO-1/2: the optimizer state split over data too
    state = {k: _with_data(v, zero, len(stage)) for k, v in weights.items()}
    residual = _join(c, t) if par.sequence_parallel and t else c
    activations: dict[str, Spec] = {
        "tokens": (batch, c),  # [batch, seq]
        "hidden": (batch, residual, None),  # [batch, seq, d_model]: the residual stream between blocks
        "attn_heads": (batch, c, t, None),  # [batch, seq, heads, head_dim]
        "mlp_hidden": (batch, c, t),  # [batch, seq, d_ff]
        "logits": (batch, c, t),  # [batch, seq, vocab]
    }
    return weights, state, activations


def _with_data(spec: Spec, axis: str | None, lead: int) -> Spec:
    """``spec`` with ``axis`` added to its first dim not split over the tensor axis (after ``lead`` stacked dims)."""
    if axis is None:
        return spec
    out = list(spec)
    for i in range(lead, len(out)):
        e = out[i]
        names = (e,) if isinstance(e, str) else tuple(e or ())
        if "model" not in names:
            out[i] = _join(axis, *names)
            return tuple(out)
    return spec


def serve_specs(cfg: TransformerConfig, layout: ServingLayout) -> tuple[dict[str, Spec], dict[str, Spec]]:
    """(weights, activations and KV cache) of a serving layout (module docstring)."""
    from rooftop.plan.serve.layout import kv_shards

    t = "model" if layout.tp // max(layout.attn_dp, layout.kv_batch) > 1 else None
    split = "attn_dp" if layout.attn_dp > 1 else "kv_batch" if layout.kv_batch > 1 else None
    heads = _join(split, t) if split != "attn_dp" else t  # weights: the whole TP group
    stage = ("stage",) if layout.pp > 1 else ()
    replicas = "replica" if layout.replicas > 1 else None
    batch = _join(replicas, split)
    kv = t if t and kv_shards(cfg, layout.tp) > 1 else None
    weights: dict[str, Spec] = {
        "embed": (heads, None),
        "attn_qkv": (*stage, None, heads),
        "attn_out": (*stage, heads, None),
        "mlp_in": (*stage, None, heads),
        "mlp_out": (*stage, heads, None),
        "lm_head": (None, heads),
    }
    activations: dict[str, Spec] = {
        "tokens": (batch, None),  # [batch, seq]
        "hidden": (batch, None, None),  # [batch, seq, d_model]
        "kv_cache": (*stage, batch, None, kv, None),  # [layers, batch, seq, n_kv_heads, head_dim]
        "logits": (batch, None, heads),  # [batch, seq, vocab]
    }
    return weights, activations
