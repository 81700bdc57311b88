"""Reading one Hugging Face config.json: ``HFReader`` (fields by key, naming the file and the key on
error, with the transformers configuration class's defaults for keys a hub config leaves out) and the
readers of the families whose layers differ one from the next (hybrid attention, linear attention and
state-space layers: Qwen3-Next, Llama 4, Nemotron-H, Jamba), used by model/hf.py."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rooftop.errors import InvalidConfigError, shown
from rooftop.model.blocks import LinearAttentionConfig, MoEConfig, SSMConfig
from rooftop.model.limits import MAX_PATTERN


class HFReader:
    """Reads fields of one config.json, naming the file and the HF key on error."""

    def __init__(self, data: Mapping[str, Any], where: str, defaults: Mapping[str, Any] | None = None) -> None:
        self.data = data
        self.where = where
        self.defaults = defaults or {}

    def fail(self, key: str, why: str) -> InvalidConfigError:
        return InvalidConfigError(f"{self.where}: field {key!r} {why}")

    def get(self, key: str, default: Any = ..., kind: type | None = None) -> Any:
        """The value of ``key`` (``default`` when absent or null; ``...``: required). ``kind`` int:
        a JSON integer or integral number (1e15 is read, 1.5, inf, nan and "8" are not); bool: true
        or false ("false" is a string, not false); str: a string."""
        value = self.data.get(key)
        if value is None:
            default = self.defaults.get(key, default)
            if default is ...:
                raise self.fail(key, "is missing (needed for this architecture)")
            return default
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not _integral(value):
                raise self.fail(key, f"must be an integer, got {shown(value)}")
            return int(value)
        if kind is bool and not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {shown(value)}")
        if kind is str and not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {shown(value)}")
        return value


def _integral(value: float) -> bool:
    """A JSON integer, or a float with a whole value (1e15; not 1.5, inf or nan): the model's
    bounds then name the field when it is too large."""
    return isinstance(value, int) or (math.isfinite(value) and value == int(value))


def _pattern(values: list[str]) -> tuple[str, ...]:
    """The shortest repeating unit of a per-layer list (so a 48-layer list of period 4 is 4 entries)."""
    n = len(values)
    for p in range(1, n + 1):
        if n % p == 0 and values == values[:p] * (n // p):
            return tuple(values[:p])
    return tuple(values)


def layers(r: HFReader, out: dict[str, Any], mixers: list[str], ffns: list[str]) -> None:
    """Per-layer mixer and feed-forward kinds -> attention_pattern and ffn_pattern."""
    if len(mixers) > MAX_PATTERN * 64:
        raise r.fail("num_hidden_layers", f"is {len(mixers):,}; per-layer patterns are read up to {MAX_PATTERN * 64:,}")
    out["attention_pattern"], out["ffn_pattern"] = _pattern(mixers), _pattern(ffns)
    for key in ("attention_pattern", "ffn_pattern"):
        if len(out[key]) > MAX_PATTERN:
            raise r.fail(
                "num_hidden_layers", f"gives a layer pattern of {len(out[key]):,} entries; at most {MAX_PATTERN:,}"
            )


def sparse_ffns(r: HFReader, n: int) -> list[str]:
    """Qwen2/3-MoE's rule (transformers Qwen3MoeDecoderLayer): layer i is MoE unless listed in
    mlp_only_layers, when (i + 1) % decoder_sparse_step == 0."""
    step = r.get("decoder_sparse_step", 1, int)
    dense = r.get("mlp_only_layers", [], list)
    if step < 1 or not all(_whole_json(i) for i in dense):
        raise r.fail("decoder_sparse_step", "must be >= 1 and mlp_only_layers a list of layer indices")
    return ["moe" if i not in dense and (i + 1) % step == 0 else "dense" for i in range(n)]


def _whole_json(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def glm_bias(r: HFReader, out: dict[str, Any]) -> None:
    out["qkv_bias"] = r.get("attention_bias", False, bool)  # GLM-4.5: o_proj has no bias
    out["qk_norm"] = r.get("use_qk_norm", False, bool)


def qwen3_next(r: HFReader, out: dict[str, Any]) -> None:
    n = out["n_layers"]
    types = r.get("layer_types", None)
    if types is None:  # transformers Qwen3NextConfig: full attention when (i + 1) % interval == 0
        interval = r.get("full_attention_interval", 4, int)
        if interval < 1:
            raise r.fail("full_attention_interval", "must be >= 1")
        types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]
    kinds = {"full_attention": "global", "linear_attention": "linear"}
    if not isinstance(types, list) or len(types) != n or any(t not in kinds for t in types):
        raise r.fail("layer_types", f"must list {' or '.join(kinds)} for each of the {n} layers")
    layers(r, out, [kinds[t] for t in types], sparse_ffns(r, n))
    out["linear"] = LinearAttentionConfig(
        n_key_heads=r.get("linear_num_key_heads", ..., int),
        n_value_heads=r.get("linear_num_value_heads", ..., int),
        key_head_dim=r.get("linear_key_head_dim", ..., int),
        value_head_dim=r.get("linear_value_head_dim", ..., int),
        conv_kernel=r.get("linear_conv_kernel_dim", 4, int),
    )
    shared = r.get("shared_expert_intermediate_size", 0, int)
    out["moe"] = MoEConfig(
        n_experts=r.get("num_experts", ..., int),
        top_k=r.get("num_experts_per_tok", ..., int),
        d_ff_expert=r.get("moe_intermediate_size", ..., int),
        n_shared_experts=1 if shared else 0,
        d_ff_shared=shared,
        shared_gate=bool(shared),
    )


def llama4(r: HFReader, out: dict[str, Any]) -> None:
    n = out["n_layers"]
    out["d_ff"] = r.get("intermediate_size_mlp", out["d_ff"], int)  # the dense layers' MLP
    moe_layers = r.get("moe_layers", None, list)
    if moe_layers is None:  # transformers Llama4TextConfig: every step-th layer, counting from 1
        step = r.get("interleave_moe_layer_step", 1, int)
        moe_layers = [i for i in range(step - 1, n, step)] if step >= 1 else []
    ffns = ["moe" if i in moe_layers else "dense" for i in range(n)]
    rope = r.get("no_rope_layers", None, list)
    if not rope:  # 1: a RoPE layer (chunked attention), 0: a NoPE layer (global attention)
        interval = r.get("no_rope_layer_interval", 4, int)
        rope = [int((i + 1) % interval != 0) for i in range(n)] if interval >= 1 else [1] * n
    if len(rope) != n:
        raise r.fail("no_rope_layers", f"must give 0 or 1 for each of the {n} layers")
    chunk = r.get("attention_chunk_size", 0, int)
    out["attention_chunk"] = chunk
    layers(r, out, ["chunked" if flag and chunk else "global" for flag in rope], ffns)
    out["moe"] = MoEConfig(
        n_experts=r.get("num_local_experts", ..., int),
        top_k=r.get("num_experts_per_tok", 1, int),
        d_ff_expert=r.get("intermediate_size", ..., int),
        n_shared_experts=1,
    )


#: Nemotron-H hybrid_override_pattern characters -> (mixer, feed-forward)
_NEMOTRON_BLOCKS = {"M": ("ssm", "none"), "*": ("global", "none"), "-": ("none", "dense"), "E": ("none", "moe")}


def nemotron_h(r: HFReader, out: dict[str, Any]) -> None:
    pattern = r.get("hybrid_override_pattern", ..., str)
    if len(pattern) != out["n_layers"] or any(ch not in _NEMOTRON_BLOCKS for ch in pattern):
        raise r.fail(
            "hybrid_override_pattern",
            f"must give one of {', '.join(_NEMOTRON_BLOCKS)} for each of the {out['n_layers']} layers",
        )
    layers(r, out, [_NEMOTRON_BLOCKS[ch][0] for ch in pattern], [_NEMOTRON_BLOCKS[ch][1] for ch in pattern])
    out["d_ff"] = r.get("intermediate_size", ..., int)
    out["head_dim"] = r.get("attention_head_dim", r.get("head_dim", 0, int), int)
    act = r.get("mlp_hidden_act", "relu2", str)
    if act != "relu2":
        raise r.fail("mlp_hidden_act", f"has unsupported activation {shown(act)} (supported: relu2)")
    out["mlp"], out["mlp_bias"] = "relu2", r.get("mlp_bias", False, bool)
    out["qkv_bias"] = out["out_bias"] = r.get("attention_bias", False, bool)
    heads, head_dim = r.get("mamba_num_heads", ..., int), r.get("mamba_head_dim", ..., int)
    out["ssm"] = SSMConfig(
        d_inner=heads * head_dim,
        d_state=r.get("ssm_state_size", ..., int),
        n_heads=heads,
        n_groups=r.get("n_groups", 1, int),
        conv_kernel=r.get("conv_kernel", 4, int),
        conv_bias=r.get("use_conv_bias", True, bool),
        proj_bias=r.get("mamba_proj_bias", r.get("use_bias", False, bool), bool),
    )
    if "E" in pattern:
        shared = r.get("moe_shared_expert_intermediate_size", 0, int)
        out["moe"] = MoEConfig(
            n_experts=r.get("n_routed_experts", ..., int),
            top_k=r.get("num_experts_per_tok", ..., int),
            d_ff_expert=r.get("moe_intermediate_size", ..., int),
            n_shared_experts=r.get("n_shared_experts", 1, int) if shared else 0,
            d_ff_shared=shared,
            router_bias=True,
        )


def jamba(r: HFReader, out: dict[str, Any]) -> None:
    n = out["n_layers"]
    a_period, a_offset = r.get("attn_layer_period", 8, int), r.get("attn_layer_offset", 4, int)
    e_period, e_offset = r.get("expert_layer_period", 2, int), r.get("expert_layer_offset", 1, int)
    if min(a_period, e_period) < 1:
        raise r.fail("attn_layer_period", "and expert_layer_period must be >= 1")
    experts = r.get("num_experts", 16, int)
    mixers = ["global" if i % a_period == a_offset else "ssm" for i in range(n)]
    ffns = ["moe" if experts > 1 and i % e_period == e_offset else "dense" for i in range(n)]
    layers(r, out, mixers, ffns)
    d = out["d_model"]
    out["ssm"] = SSMConfig(
        d_inner=r.get("mamba_expand", 2, int) * d,
        d_state=r.get("mamba_d_state", 16, int),
        version=1,
        conv_kernel=r.get("mamba_d_conv", 4, int),
        dt_rank=r.get("mamba_dt_rank", -(-d // 16), int),  # "auto": ceil(d_model / 16)
        conv_bias=r.get("mamba_conv_bias", True, bool),
        proj_bias=r.get("mamba_proj_bias", False, bool),
        bc_norms=True,
    )
    out["positions"] = "none"  # Jamba's attention layers use no position encoding
    if "moe" in ffns:
        out["moe"] = MoEConfig(n_experts=experts, top_k=r.get("num_experts_per_tok", 2, int), d_ff_expert=out["d_ff"])


def falcon_h1(r: HFReader, out: dict[str, Any]) -> None:
    """Falcon-H1 (transformers FalconH1Config and FalconH1Mixer): every layer a "hybrid" mixer, attention
    and Mamba-2 on the same normed input, then a dense MLP. The Mamba-2 width is mamba_d_ssm (absent or
    null: mamba_expand x hidden_size) in mamba_n_heads heads of mamba_d_head ("auto": the width / heads);
    mamba_rms_norm: a gated RMSNorm before out_proj, else the SiLU gate alone."""
    n = out["n_layers"]
    layers(r, out, ["hybrid"] * n, ["dense"] * n)
    heads = r.get("mamba_n_heads", ..., int)
    width = r.get("mamba_d_ssm", r.get("mamba_expand", 2, int) * out["d_model"], int)
    head = width // heads if r.get("mamba_d_head", "auto") == "auto" else r.get("mamba_d_head", ..., int)
    if heads < 1 or heads * head != width:
        raise r.fail("mamba_d_ssm", f"must be mamba_n_heads x mamba_d_head = {heads} x {head}, got {width}")
    out["ssm"] = SSMConfig(
        d_inner=width,
        d_state=r.get("mamba_d_state", ..., int),
        n_heads=heads,
        n_groups=r.get("mamba_n_groups", 1, int),
        conv_kernel=r.get("mamba_d_conv", 4, int),
        conv_bias=r.get("mamba_conv_bias", True, bool),
        proj_bias=r.get("mamba_proj_bias", False, bool),
        gated_norm=r.get("mamba_rms_norm", False, bool),
    )
    out["qkv_bias"] = out["out_bias"] = r.get("attention_bias", False, bool)
    out["mlp_bias"] = r.get("mlp_bias", False, bool)
