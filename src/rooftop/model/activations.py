"""What a transformer layer keeps for its backward pass, per token, by remat policy
(``REMAT_POLICIES``), and the output logits.

- ``activation_tensors(cfg, seq_len, group)``, ``activation_bytes_per_token(cfg, seq_len, remat,
  dtype)``: the accounting follows Korthikanti et al. 2022 ("Reducing Activation Recomputation in
  Large Transformer Models", section 4.1), which finds 34 s b h + 5 a s^2 b bytes per layer for GPT
  in 16-bit with dropout; without dropout (as today's LLMs train) that is 32 s b h + 2 a s^2 b, per
  token 32 D + 2 N T bytes: what this module gives for a GPT-shaped config under "none";
  "selective" drops the 2 N T attention term, "full" keeps only the layer input (2 D). The
  recompute FLOPs of each policy are ``per_token.recompute_flops_per_token``.
- ``matmul_dtype``: with FP8 weight matmuls, the tensors that are a weight matmul's input
  (``MATMUL_INPUTS``) are kept as the FP8 copy the matmul read, which its weight-gradient matmul
  reads again (TransformerEngine's FP8 Linear saves its quantized input for the backward; DeepSeek-V3
  technical report, section 3.3.2, caches the MoE and attention-output projections' inputs in FP8).
"""

from __future__ import annotations

from dataclasses import dataclass

from rooftop.cost.cost import Split
from rooftop.dtypes import dtype_bytes
from rooftop.errors import UnknownNameError
from rooftop.model.config import TransformerConfig
from rooftop.model.layers import LayerGroup, layer_groups


@dataclass(frozen=True)
class RematPolicy:
    """What a rematerialization policy keeps for the backward pass, and what it recomputes.

    ``saves``: categories of per-layer activation tensors kept (this module lists each tensor
    with its category); ``recompute``: categories of forward ops run again in the backward
    pass (transformer.OP_CATEGORY tags each op). Tensor categories: block_input (the layer's
    input), matmul (outputs of parameter matmuls the backward reads), dot_output (matmul
    outputs only "dots" keeps, to recompute what follows them), attention_internal (scores /
    probabilities), attention_output (probabilities x values), elementwise (norm, activation,
    residual outputs)."""

    saves: frozenset[str]
    recompute: frozenset[str]
    description: str
    #: also recompute every second weight matmul of a layer, counted in forward order, and keep not its output
    alternate_matmuls: bool = False
    #: the tensor-parallel collectives (of sequence parallelism) the recompute runs again, per region:
    #: "all-gather" when the gathered input of a recomputed op is not kept, "reduce-scatter" when a
    #: recomputed row-parallel output is reduced again (plan/train/comm.py prices them)
    tp_rerun: frozenset[str] = frozenset()


_ALL_TENSORS = frozenset({"block_input", "matmul", "attention_internal", "attention_output", "elementwise"})
#: Remat policies. Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
#: Transformer Models": section 4.1 for what a layer keeps, section 5 for selective
#: recomputation. "dots": JAX ``jax.checkpoint_policies``. "How to Scale Your Model" Part 4
#: (gradient checkpointing): block remat turns 6ND into ~8ND; "big matmuls only" still
#: recomputes the activation functions and parts of attention.
REMAT_POLICIES: dict[str, RematPolicy] = {
    "none": RematPolicy(_ALL_TENSORS, frozenset(), "keep every activation the backward pass reads"),
    "selective": RematPolicy(
        _ALL_TENSORS - {"attention_internal"},
        frozenset({"attention"}),
        "drop attention scores/probabilities, recompute QK^T, softmax and AV (Korthikanti 2022 section 5)",
    ),
    "dots": RematPolicy(
        frozenset({"block_input", "matmul", "dot_output"}),
        frozenset({"attention", "elementwise"}),
        "save parameter-matmul outputs only (jax.checkpoint_policies.dots_with_no_batch_dims_saveable): "
        "recompute attention core, norms, rope, activations",
    ),
    # torchtitan's op-level selective checkpointing (selective_ac_option "op"; torchtitan 9dec370,
    # torchtitan/models/llama/parallelize_llama.py, _apply_ac_to_transformer_block: per layer, the outputs of
    # aten.mm, the SDPA kernels and reduce-scatter are saved "except every second mm"; every other op is
    # recomputed): a Llama layer's q, v, gate, down are kept, its k, o, up recomputed with the norms, rope
    # and activations; the attention core's output (and its softmax statistics) is kept, not recomputed.
    "selective-op": RematPolicy(
        frozenset({"block_input", "matmul", "attention_internal", "attention_output"}),
        frozenset({"elementwise"}),
        "keep every other weight matmul's output and the attention core's; recompute the other matmuls, norms, "
        "rope and activations (torchtitan selective_ac_option 'op')",
        alternate_matmuls=True,
        # the save list holds the reduce-scatter's output but not the all-gather's (_save_list in
        # parallelize_llama.py at 9dec370): a recomputed op reading a gathered input gathers it again
        tp_rerun=frozenset({"all-gather"}),
    ),
    "full": RematPolicy(
        frozenset({"block_input"}),
        frozenset({"matmul", "attention", "elementwise"}),
        "save only each layer's input, recompute the whole layer forward (Chen et al. 2016; Korthikanti 2022 full)",
        tp_rerun=frozenset({"all-gather", "reduce-scatter"}),
    ),
}


def remat_policy(name: str) -> RematPolicy:
    if not isinstance(name, str) or name not in REMAT_POLICIES:
        raise UnknownNameError("remat policy", name, REMAT_POLICIES)
    return REMAT_POLICIES[name]


@dataclass(frozen=True)
class ActivationTensor:
    """A tensor one layer keeps for its backward pass: elements per token and its category
    (RematPolicy: which policies keep it)."""

    name: str
    elements_per_token: float
    category: str


def _attention_tensors(cfg: TransformerConfig, ctx: int, flash: bool = False) -> list[ActivationTensor]:
    a = ActivationTensor
    n, h, k = cfg.n_heads, cfg.head_dim, cfg.n_kv_heads
    out = [a("input", cfg.d_model, "block_input"), a("attention/norm", cfg.d_model, "elementwise")]
    if cfg.mla is None:
        out += [a("attention/q", n * h, "matmul"), a("attention/k", k * h, "matmul"), a("attention/v", k * h, "matmul")]
        v_dim = h
    else:
        m = cfg.mla
        if m.q_lora_rank:
            out += [a("attention/q_a", m.q_lora_rank, "matmul"), a("attention/q_a_norm", m.q_lora_rank, "elementwise")]
        out += [
            a("attention/q", n * (m.qk_nope_head_dim + m.qk_rope_head_dim), "matmul"),
            a("attention/kv_a", m.kv_lora_rank + m.qk_rope_head_dim, "matmul"),
            a("attention/kv_a_norm", m.kv_lora_rank, "elementwise"),
            a("attention/kv_b", n * (m.qk_nope_head_dim + m.v_head_dim), "matmul"),
        ]
        v_dim = m.v_head_dim
    # unfused attention keeps the N x T probabilities; a flash kernel keeps only its per-row softmax
    # statistics (one fp32 logsumexp per head and token = 2 bf16-sized elements; Dao et al. 2022, section 3.1)
    internal = (
        a("attention/softmax_stats", 2 * n, "attention_internal")
        if flash
        else a("attention/probs", n * ctx, "attention_internal")
    )
    out += [internal, a("attention/values", n * v_dim, "attention_output")]
    post = cfg.norms_per_layer == 4  # the post-norm reads the projection output
    out.append(a("attention/o", cfg.d_model, "matmul" if post else "dot_output"))
    if cfg.norms_per_layer >= 2:
        out.append(a("attention/residual", cfg.d_model, "elementwise"))
    return out


def _recurrent_tensors(cfg: TransformerConfig, mixer: str) -> list[ActivationTensor]:
    """What a linear-attention or state-space layer keeps: its input and norm, the projections'
    outputs (matmul), the conv output (elementwise), the recurrence's output (attention_output; the
    chunked kernels keep one state per chunk, not counted), the output projection and residual."""
    a = ActivationTensor
    out = [a("input", cfg.d_model, "block_input"), a("attention/norm", cfg.d_model, "elementwise")]
    if mixer == "linear" and cfg.linear is not None:
        la = cfg.linear
        proj, conv, inner = 2 * la.key_dim + 2 * la.value_dim + 2 * la.n_value_heads, la.conv_dim, la.value_dim
    elif cfg.ssm is not None:
        m = cfg.ssm
        proj, conv, inner = 2 * m.d_inner + 2 * m.n_groups * m.d_state + m.n_heads, m.conv_dim, m.d_inner
    else:
        return out
    out += [
        a("attention/in_proj", proj, "matmul"),
        a("attention/conv", conv, "elementwise"),
        a("attention/values", inner, "attention_output"),
        a("attention/out_norm", inner, "elementwise"),
        a("attention/o", cfg.d_model, "dot_output"),
    ]
    if cfg.norms_per_layer >= 2:
        out.append(a("attention/residual", cfg.d_model, "elementwise"))
    return out


def _hybrid_ssm_tensors(cfg: TransformerConfig) -> list[ActivationTensor]:
    """What the state-space layer of a hybrid layer keeps (as ``_recurrent_tensors``, its input, norm,
    output projection and residual shared with the attention's)."""
    m, a = cfg.ssm, ActivationTensor
    if m is None:
        return []
    out = [
        a("ssm/in_proj", 2 * m.d_inner + 2 * m.n_groups * m.d_state + m.n_heads, "matmul"),
        a("ssm/conv", m.conv_dim, "elementwise"),
        a("ssm/values", m.d_inner, "attention_output"),
    ]
    return out + ([a("ssm/out_norm", m.d_inner, "elementwise")] if m.gated_norm else [])


def _mlp_tensors(cfg: TransformerConfig, moe: bool) -> list[ActivationTensor]:
    a = ActivationTensor
    out = [a("mlp/norm", cfg.d_model, "elementwise")] if cfg.norms_per_layer >= 2 else []
    gated = cfg.mlp_kind.gated

    def ffn(prefix: str, f: float) -> list[ActivationTensor]:
        up = [a(prefix + "gate", f, "matmul")] if gated else []
        return [*up, a(prefix + "up", f, "matmul"), a(prefix + "act", f, "elementwise")]

    if moe and cfg.moe:
        e = cfg.moe
        out += [a("moe/router", e.n_experts, "matmul"), a("moe/experts/input", e.top_k * cfg.d_model, "elementwise")]
        out += ffn("moe/experts/", e.top_k * e.d_ff_expert)
        out.append(a("moe/experts/down", e.top_k * cfg.d_model, "matmul"))  # combine weights' gradient reads it
        if e.n_shared_experts:
            out += ffn("moe/shared/", e.n_shared_experts * e.d_ff_shared)
    else:
        out += ffn("mlp/", cfg.d_ff)
    if cfg.norms_per_layer == 4:
        out.append(a("mlp/down", cfg.d_model, "matmul"))
    return out


def activation_tensors(
    cfg: TransformerConfig, seq_len: int, group: LayerGroup | None = None, flash: bool = False
) -> list[ActivationTensor]:
    """Per-token tensors one layer of ``group`` (default: the first) keeps with no remat.
    The attention probabilities are a materialized N x T matrix per sequence, N T per token
    (a sliding-window layer: N x min(T, window)), unless ``flash``: then only the softmax
    statistics are kept; dropout masks are not counted."""
    g = group or layer_groups(cfg)[0]
    ctx = min(seq_len, g.window) if g.window else seq_len
    if g.mixer == "hybrid":  # the attention's tensors, and the state-space layer's beside them
        attention = _attention_tensors(cfg, ctx, flash)
        at = [t.name for t in attention].index("attention/o")
        mixer = attention[:at] + _hybrid_ssm_tensors(cfg) + attention[at:]
    elif g.stateful:
        mixer = _recurrent_tensors(cfg, g.mixer)
    elif g.mixer == "none":
        mixer = [ActivationTensor("input", cfg.d_model, "block_input")]
    else:
        mixer = _attention_tensors(cfg, ctx, flash)
    return mixer + (_mlp_tensors(cfg, g.moe) if g.mlp else [])


#: the kept tensors that are a weight matmul's input (QKV, MLA's q_b and kv_b, the output projection,
#: the MLP's and experts' up/gate and down projections)
MATMUL_INPUTS = frozenset(
    {
        "attention/norm", "attention/q_a_norm", "attention/kv_a_norm", "attention/values", "attention/out_norm",
        "ssm/values", "ssm/out_norm",
        "mlp/norm", "mlp/act",
        "moe/experts/input", "moe/experts/act", "moe/shared/act",
    }
)  # fmt: skip


def _bytes(tensor: ActivationTensor, dtype: str, matmul_dtype: str | None) -> float:
    """Bytes per element of a kept tensor: the activation dtype's, or the smaller matmul dtype's for a
    weight matmul's input."""
    if matmul_dtype and tensor.name in MATMUL_INPUTS:
        return min(dtype_bytes(dtype), dtype_bytes(matmul_dtype))
    return dtype_bytes(dtype)


def activation_bytes_per_token_layer(
    cfg: TransformerConfig,
    seq_len: int,
    remat: str = "none",
    dtype: str = "bf16",
    group: LayerGroup | None = None,
    flash: bool = False,
    matmul_dtype: str | None = None,
    only: frozenset[str] | None = None,
) -> float:
    """Bytes one layer keeps per token under ``remat``: sum of the kept tensors (those named in ``only``
    when given) x their bytes (``dtype``; a weight matmul's input at ``matmul_dtype`` when that is smaller:
    module docstring)."""
    policy = remat_policy(remat)
    tensors = activation_tensors(cfg, seq_len, group, flash)
    dropped = _alternate_matmul_outputs(tensors) if policy.alternate_matmuls else frozenset()
    return sum(
        t.elements_per_token * _bytes(t, dtype, matmul_dtype)
        for t in tensors
        if t.category in policy.saves and t.name not in dropped and (only is None or t.name in only)
    )


def _alternate_matmul_outputs(tensors: list[ActivationTensor]) -> frozenset[str]:
    """The tensors of every second weight matmul of a layer, counted in forward order (the outputs a policy
    with ``alternate_matmuls`` recomputes instead of keeping)."""
    outputs = [t.name for t in tensors if t.category in ("matmul", "dot_output")]
    return frozenset(outputs[1::2])


def activation_bytes_per_token(
    cfg: TransformerConfig,
    seq_len: int,
    remat: str = "none",
    dtype: str = "bf16",
    flash: bool = False,
    matmul_dtype: str | None = None,
    only: frozenset[str] | None = None,
) -> float:
    """Bytes all layers keep per token of a training sequence of ``seq_len`` under ``remat``
    (the output head's logits are separate: ``logits_bytes_per_token``); ``flash``: fused
    attention that keeps softmax statistics instead of the probabilities; ``matmul_dtype``: the
    weight matmuls' dtype (FP8 inputs kept as FP8); ``only``: the tensors of these names alone."""
    return sum(
        g.count * activation_bytes_per_token_layer(cfg, seq_len, remat, dtype, g, flash, matmul_dtype, only)
        for g in layer_groups(cfg)
    )


#: the activations outside Megatron's tensor-parallel regions (layer input, norms, attention output, residual)
SEQUENCE_REGION = frozenset({"input", "attention/norm", "attention/o", "attention/residual", "mlp/norm", "mlp/down"})


#: how a kept tensor divides over a tensor-parallel group (cost.OP_SPLITS, priced by sharding/tensor.tensor_ways):
#: the sequence regions ("tokens": whole on every rank unless sequence parallelism splits them), the k and v
#: projections' outputs over the KV heads, and the replicated ops' outputs (MLA's down-projections and their
#: norms, the MoE router: the same on every rank) as their ops' tags (model/tags.py); the rest over the group
KEPT_SPLITS: dict[str, Split] = {
    **dict.fromkeys(SEQUENCE_REGION, Split.TOKENS),
    **dict.fromkeys(("attention/k", "attention/v"), Split.KV_HEADS),
    **dict.fromkeys(
        ("attention/q_a", "attention/q_a_norm", "attention/kv_a", "attention/kv_a_norm", "moe/router"), Split.REPLICATED
    ),
}


def kept_split(name: str) -> Split:
    """The split of the kept tensor ``name`` (KEPT_SPLITS; "heads", divided over the whole group, otherwise)."""
    return KEPT_SPLITS.get(name, Split.HEADS)


def activation_bytes_by_split(
    cfg: TransformerConfig,
    seq_len: int,
    remat: str = "none",
    dtype: str = "bf16",
    flash: bool = False,
    matmul_dtype: str | None = None,
) -> dict[Split, float]:
    """``activation_bytes_per_token`` by the kept tensors' splits (``kept_split``): what a planner divides
    over a tensor-parallel group by the one rule (sharding/tensor.tensor_ways)."""
    names = {t.name for g in layer_groups(cfg) for t in activation_tensors(cfg, seq_len, g, flash)}
    by: dict[Split, set[str]] = {}
    for name in names:
        by.setdefault(kept_split(name), set()).add(name)
    return {
        split: activation_bytes_per_token(cfg, seq_len, remat, dtype, flash, matmul_dtype, frozenset(group))
        for split, group in sorted(by.items())
    }


def sequence_region_bytes_per_token(
    cfg: TransformerConfig,
    seq_len: int,
    remat: str = "none",
    dtype: str = "bf16",
    flash: bool = False,
    matmul_dtype: str | None = None,
) -> float:
    """Of ``activation_bytes_per_token``, the bytes of the tensors outside the tensor-parallel regions (the
    d_model-wide block input, norm outputs, attention output and residual): tensor parallelism alone keeps
    them whole on every rank; Megatron sequence parallelism splits them over the ranks too (Korthikanti et
    al. 2022, section 4.2.2: the 10 s b h of 34 s b h per layer that tensor parallelism leaves replicated,
    of which the 2 s b h of dropout masks are not counted here)."""
    return activation_bytes_per_token(cfg, seq_len, remat, dtype, flash, matmul_dtype, SEQUENCE_REGION)


def activation_bytes_by_policy(
    cfg: TransformerConfig, seq_len: int, dtype: str = "bf16", flash: bool = False
) -> dict[str, float]:
    """``activation_bytes_per_token`` for every remat policy (``flash``: fused attention)."""
    return {name: activation_bytes_per_token(cfg, seq_len, name, dtype, flash) for name in REMAT_POLICIES}


def logits_bytes_per_token(cfg: TransformerConfig, dtype: str = "fp32") -> float:
    """The output logits of one token (kept for the loss's backward unless the loss is chunked)."""
    return float(cfg.vocab_size * dtype_bytes(dtype))
