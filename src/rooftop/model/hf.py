"""Hugging Face ``config.json`` -> TransformerConfig: the ``HF_ARCHITECTURES`` table (how each
architecture's keys map onto TransformerConfig, with transformers' defaults), the readers of the parts
that are not one key each, the dispatch on ``model_type`` / ``architectures`` (a vision-language
model's language tower through its ``text_config``), and ``load_hf_config`` (read with ``json.load``
only: nothing in the file is executed). Per-layer family readers: model/hf_layers.py."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rooftop.catalog.io import is_directory, read_text_file
from rooftop.errors import InvalidConfigError, UnknownNameError, one_line, path_text, shown
from rooftop.model.blocks import MLAConfig, MoEConfig
from rooftop.model.config import TransformerConfig
from rooftop.model.hf_layers import (
    HFReader,
    falcon_h1,
    glm_bias,
    jamba,
    layers,
    llama4,
    nemotron_h,
    qwen3_next,
    sparse_ffns,
)
from rooftop.model.limits import MAX_PATTERN

#: hidden_act of a gated MLP -> our kind (Llama/Mistral/Qwen2 "silu"; Gemma "gelu_pytorch_tanh").
_GATED_ACT = {"silu": "swiglu", "swish": "swiglu", "gelu": "geglu", "gelu_pytorch_tanh": "geglu", "gelu_new": "geglu"}


@dataclass(frozen=True)
class HFArchitecture:
    """How one ``architectures[0]`` of a Hugging Face config.json maps onto TransformerConfig.

    ``required``: our field <- HF key (missing is an error naming the HF key); ``optional``:
    our field <- (HF key, default when absent or null); ``fixed``: our field = value;
    ``features``: readers for the parts that are not one key each (see ``_FEATURES``);
    ``defaults``: HF key -> the transformers configuration class's default, used when a hub
    config leaves the key out (Gemma 3's ``text_config`` has no ``vocab_size``)."""

    required: Mapping[str, str]
    optional: Mapping[str, tuple[str, Any]] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    features: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)


_BASE = {
    "vocab_size": "vocab_size",
    "d_model": "hidden_size",
    "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "d_ff": "intermediate_size",
}
_OPT = {
    "n_kv_heads": ("num_key_value_heads", 0),
    "head_dim": ("head_dim", 0),
    "max_seq_len": ("max_position_embeddings", 4096),
    "tied_embeddings": ("tie_word_embeddings", False),
}
_GEMMA_OPT = {**_OPT, "tied_embeddings": ("tie_word_embeddings", True)}
_GPT2_REQ = {"vocab_size": "vocab_size", "d_model": "n_embd", "n_layers": "n_layer", "n_heads": "n_head"}
_GPT2_OPT = {"max_seq_len": ("n_positions", 1024), "tied_embeddings": ("tie_word_embeddings", True)}
_GEMMA_REQ = {**_BASE, "head_dim": "head_dim"}

#: Supported architectures. HF defaults follow transformers' configuration classes
#: (e.g. LlamaConfig: tie_word_embeddings=False, num_key_value_heads=num_attention_heads).
HF_ARCHITECTURES: dict[str, HFArchitecture] = {
    "LlamaForCausalLM": HFArchitecture(_BASE, _OPT, {}, ("gated_act", "llama_bias")),
    "MistralForCausalLM": HFArchitecture(_BASE, _OPT, {}, ("gated_act", "sliding_all")),
    "Qwen2ForCausalLM": HFArchitecture(_BASE, _OPT, {"qkv_bias": True}, ("gated_act", "qwen_window")),
    "Gemma2ForCausalLM": HFArchitecture(
        _GEMMA_REQ, _GEMMA_OPT, {"norms_per_layer": 4}, ("gemma_act", "gemma2_pattern")
    ),
    # Gemma3TextConfig defaults (transformers) for what a hub text_config may leave out
    "Gemma3ForCausalLM": HFArchitecture(
        _GEMMA_REQ,
        _GEMMA_OPT,
        {"norms_per_layer": 4, "qk_norm": True},
        ("gemma_act", "gemma3_pattern"),
        {
            "vocab_size": 262208,
            "sliding_window": 4096,
            "hidden_activation": "gelu_pytorch_tanh",
            "max_position_embeddings": 131072,
        },
    ),
    "MixtralForCausalLM": HFArchitecture(_BASE, _OPT, {}, ("gated_act", "sliding_all", "mixtral_moe")),
    "DeepseekV3ForCausalLM": HFArchitecture(_BASE, _OPT, {}, ("gated_act", "deepseek_moe", "mla")),
    # DeepSeek-V2 / V2-Lite / V2.5: the V3 layout (MLA, shared + routed experts) with softmax routing
    # and no routing bias (topk_method "greedy" or "group_limited_greedy"; transformers DeepseekV2Config)
    # DeepSeek's V2 paper counts activated parameters without the embedding table (2.4B of V2-Lite)
    "DeepseekV2ForCausalLM": HFArchitecture(
        _BASE, _OPT, {"active_excludes_embedding": True}, ("gated_act", "deepseek_moe", "mla")
    ),
    # GLM-4.5 / 4.5-Air: biased q/k/v (attention_bias), shared + routed experts with a routing bias, the
    # first dense layers (transformers Glm4MoeConfig); the MTP layer (num_nextn_predict_layers) is not counted
    "Glm4MoeForCausalLM": HFArchitecture(_BASE, _OPT, {}, ("gated_act", "glm_bias", "deepseek_moe")),
    # Phi-3 / Phi-4: the Llama layout with fused qkv and gate_up weights, no biases (transformers Phi3Config)
    "Phi3ForCausalLM": HFArchitecture(_BASE, _OPT, {}, ("gated_act", "sliding_all")),
    # Qwen3-Next: gated attention (q_proj emits the output gate too) every full_attention_interval-th
    # layer, gated DeltaNet elsewhere, routed experts plus one gated shared expert (transformers Qwen3NextConfig)
    "Qwen3NextForCausalLM": HFArchitecture(
        _BASE, _OPT, {"qk_norm": True, "attention_gate": True}, ("gated_act", "llama_bias", "qwen3_next")
    ),
    # Llama 4 text: MoE (routed + one shared expert) every interleave_moe_layer_step-th layer, dense MLP of
    # intermediate_size_mlp elsewhere; RoPE layers attend in chunks of attention_chunk_size, NoPE layers
    # globally (transformers Llama4TextConfig); its q/k norm is a weightless L2 norm
    "Llama4ForCausalLM": HFArchitecture(_BASE, _OPT, {}, ("gated_act", "llama_bias", "llama4")),
    # Nemotron-H: one block per layer from hybrid_override_pattern (M Mamba-2, * attention, - MLP,
    # E MoE), squared-ReLU MLP, no position encoding (transformers NemotronHConfig)
    "NemotronHForCausalLM": HFArchitecture(
        {k: v for k, v in _BASE.items() if k != "d_ff"}, _OPT, {"positions": "none"}, ("nemotron_h",)
    ),
    # Jamba: Mamba layers with an attention layer every attn_layer_period, MoE every expert_layer_period
    # (transformers JambaConfig)
    "JambaForCausalLM": HFArchitecture(_BASE, _OPT, {}, ("gated_act", "jamba")),
    # Falcon-H1: attention and a Mamba-2 mixer side by side in every layer, then a SwiGLU MLP
    # (transformers FalconH1Config, FalconH1DecoderLayer)
    "FalconH1ForCausalLM": HFArchitecture(_BASE, _OPT, {}, ("gated_act", "falcon_h1")),
    # Qwen3: Qwen2 with per-head RMSNorm on q and k and no q/k/v bias (transformers Qwen3Config)
    "Qwen3ForCausalLM": HFArchitecture(_BASE, _OPT, {"qk_norm": True}, ("gated_act", "llama_bias", "qwen_window")),
    "Qwen3MoeForCausalLM": HFArchitecture(
        _BASE, _OPT, {"qk_norm": True}, ("gated_act", "llama_bias", "qwen_window", "qwen3_moe")
    ),
    # GPT-2: learned positions, LayerNorm with bias, biases everywhere, tied embeddings (transformers GPT2Config)
    "GPT2LMHeadModel": HFArchitecture(
        _GPT2_REQ,
        _GPT2_OPT,
        {
            "norm": "layernorm",
            "norm_bias": True,
            "positions": "learned",
            "qkv_bias": True,
            "out_bias": True,
            "mlp_bias": True,
        },
        ("gpt_act", "gpt_inner"),
    ),
    # GPT-J: attention and MLP in parallel off one LayerNorm, rotary, MLP biases only (transformers GPTJConfig)
    "GPTJForCausalLM": HFArchitecture(
        _GPT2_REQ,
        {**_GPT2_OPT, "tied_embeddings": ("tie_word_embeddings", False)},
        {"norm": "layernorm", "norm_bias": True, "parallel_layers": True, "norms_per_layer": 1, "mlp_bias": True},
        ("gpt_act", "gpt_inner"),
    ),
    # gpt-oss: MoE with biased experts and router, alternating 128-token sliding windows (transformers GptOssConfig)
    # OpenAI's gpt-oss model card (Table 1) counts active parameters without the embedding table
    "GptOssForCausalLM": HFArchitecture(
        _BASE,
        _OPT,
        {"qkv_bias": True, "out_bias": True, "mlp": "swiglu", "active_excludes_embedding": True},
        ("gpt_oss_moe", "gemma3_pattern"),
    ),
}
#: HF ``model_type`` -> the architecture it is read as (dispatch on model_type first, architectures second)
HF_MODEL_TYPES = {
    "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM", "gemma2": "Gemma2ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM", "mixtral": "MixtralForCausalLM", "deepseek_v3": "DeepseekV3ForCausalLM",
    "gpt2": "GPT2LMHeadModel", "gptj": "GPTJForCausalLM", "gpt_oss": "GptOssForCausalLM",
    "deepseek_v2": "DeepseekV2ForCausalLM", "glm4_moe": "Glm4MoeForCausalLM", "phi3": "Phi3ForCausalLM",
    "qwen3_next": "Qwen3NextForCausalLM", "llama4_text": "Llama4ForCausalLM", "nemotron_h": "NemotronHForCausalLM",
    "jamba": "JambaForCausalLM", "falcon_h1": "FalconH1ForCausalLM",
}  # fmt: skip
#: multimodal wrappers whose ``text_config`` is read as the named text-only architecture when the
#: text_config names no model_type of its own (any other config with a ``text_config`` whose
#: model_type is known is read through it: the language tower of a vision-language model).
HF_TEXT_WRAPPERS = {
    "Gemma3ForConditionalGeneration": "Gemma3ForCausalLM",
    "Llama4ForConditionalGeneration": "Llama4ForCausalLM",
}


def _gated_act(r: HFReader, out: dict[str, Any], key: str = "hidden_act") -> None:
    act = r.get(key, "silu", str)
    if act not in _GATED_ACT:
        raise r.fail(key, f"has unsupported activation {shown(act)} (supported: {', '.join(_GATED_ACT)})")
    out["mlp"] = _GATED_ACT[act]


def _gemma_act(r: HFReader, out: dict[str, Any]) -> None:
    # hidden_activation (else the older hidden_act; absent: the configuration class's default)
    _gated_act(
        r, out, "hidden_act" if "hidden_act" in r.data and "hidden_activation" not in r.data else "hidden_activation"
    )


def _llama_bias(r: HFReader, out: dict[str, Any]) -> None:
    out["qkv_bias"] = out["out_bias"] = r.get("attention_bias", False, bool)
    out["mlp_bias"] = r.get("mlp_bias", False, bool)


def _sliding_all(r: HFReader, out: dict[str, Any]) -> None:
    window = r.get("sliding_window", 0, int)
    if window:
        out["sliding_window"], out["attention_pattern"] = window, ("local",)


def _qwen_window(r: HFReader, out: dict[str, Any]) -> None:
    if r.get("use_sliding_window", False, bool):
        raise r.fail("use_sliding_window", "is true; Qwen2 sliding-window layers are not supported (set it false)")


def _gemma2_pattern(r: HFReader, out: dict[str, Any]) -> None:
    # transformers Gemma2DecoderLayer: is_sliding = not bool(layer_idx % 2) -> even layers local.
    out["sliding_window"], out["attention_pattern"] = r.get("sliding_window", ..., int), ("local", "global")


def _gemma3_pattern(r: HFReader, out: dict[str, Any]) -> None:
    out["sliding_window"] = r.get("sliding_window", ..., int)
    types = r.get("layer_types", None)
    if types is not None:
        kinds = {"sliding_attention": "local", "full_attention": "global"}
        if not isinstance(types, list) or not 0 < len(types) <= MAX_PATTERN:
            raise r.fail("layer_types", f"must list {' or '.join(kinds)} per layer (1 to {MAX_PATTERN:,} entries)")
        if any(not isinstance(t, str) or t not in kinds for t in types):
            raise r.fail("layer_types", f"must list {' or '.join(kinds)} per layer")
        out["attention_pattern"] = tuple(kinds[t] for t in types)
        return
    # transformers Gemma3 (before layer_types): is_sliding = bool((layer_idx + 1) % sliding_window_pattern).
    period = r.get("sliding_window_pattern", 6, int)
    if not 1 <= period <= MAX_PATTERN:  # the pattern is built as a tuple of that length
        raise r.fail(
            "sliding_window_pattern", f"must be in [1, {MAX_PATTERN:,}] (a global layer every N), got {period:,}"
        )
    out["attention_pattern"] = ("local",) * (period - 1) + ("global",)


def _mixtral_moe(r: HFReader, out: dict[str, Any]) -> None:
    out["moe"] = MoEConfig(
        n_experts=r.get("num_local_experts", ..., int),
        top_k=r.get("num_experts_per_tok", ..., int),
        d_ff_expert=out["d_ff"],
    )


def _deepseek_moe(r: HFReader, out: dict[str, Any]) -> None:
    if r.get("moe_layer_freq", 1, int) != 1:
        raise r.fail("moe_layer_freq", "other than 1 is not supported")
    out["moe"] = MoEConfig(
        n_experts=r.get("n_routed_experts", ..., int),
        top_k=r.get("num_experts_per_tok", ..., int),
        d_ff_expert=r.get("moe_intermediate_size", ..., int),
        n_shared_experts=r.get("n_shared_experts", 0, int),
        first_dense_layers=r.get("first_k_dense_replace", 0, int),
        router_bias=r.get("topk_method", "noaux_tc", str) == "noaux_tc",  # e_score_correction_bias (DeepSeek-V3)
    )


def _mla(r: HFReader, out: dict[str, Any]) -> None:
    out["mla"] = MLAConfig(
        kv_lora_rank=r.get("kv_lora_rank", ..., int),
        qk_nope_head_dim=r.get("qk_nope_head_dim", ..., int),
        qk_rope_head_dim=r.get("qk_rope_head_dim", ..., int),
        v_head_dim=r.get("v_head_dim", ..., int),
        q_lora_rank=r.get("q_lora_rank", 0, int),
    )
    out["n_kv_heads"] = out["n_heads"]  # MLA has per-head keys/values; num_key_value_heads is unused
    out["head_dim"] = out["mla"].qk_nope_head_dim + out["mla"].qk_rope_head_dim


def _gpt_act(r: HFReader, out: dict[str, Any]) -> None:
    act = r.get("activation_function", "gelu_new", str)
    kinds = {"gelu_new": "gelu", "gelu": "gelu", "gelu_fast": "gelu", "gelu_pytorch_tanh": "gelu", "relu": "relu"}
    if act not in kinds:
        raise r.fail("activation_function", f"has unsupported activation {shown(act)} (supported: {', '.join(kinds)})")
    out["mlp"] = kinds[act]


def _gpt_inner(r: HFReader, out: dict[str, Any]) -> None:
    out["d_ff"] = r.get("n_inner", 4 * out["d_model"], int)  # null: 4 x n_embd


def _qwen3_moe(r: HFReader, out: dict[str, Any]) -> None:
    ffns = sparse_ffns(r, out["n_layers"])
    if "dense" in ffns:
        layers(r, out, ["global"] * out["n_layers"], ffns)
    out["moe"] = MoEConfig(
        n_experts=r.get("num_experts", ..., int),
        top_k=r.get("num_experts_per_tok", ..., int),
        d_ff_expert=r.get("moe_intermediate_size", ..., int),
    )


def _gpt_oss_moe(r: HFReader, out: dict[str, Any]) -> None:
    out["moe"] = MoEConfig(
        n_experts=r.get("num_local_experts", ..., int),
        top_k=r.get("num_experts_per_tok", r.get("experts_per_token", 4, int), int),
        d_ff_expert=out["d_ff"],
        router_bias=True,
    )


_FEATURES = {
    "gated_act": _gated_act,
    "gemma_act": _gemma_act,
    "llama_bias": _llama_bias,
    "sliding_all": _sliding_all,
    "qwen_window": _qwen_window,
    "gemma2_pattern": _gemma2_pattern,
    "gemma3_pattern": _gemma3_pattern,
    "mixtral_moe": _mixtral_moe,
    "deepseek_moe": _deepseek_moe,
    "mla": _mla,
    "gpt_act": _gpt_act,
    "gpt_inner": _gpt_inner,
    "qwen3_moe": _qwen3_moe,
    "gpt_oss_moe": _gpt_oss_moe,
    "glm_bias": glm_bias,
    "qwen3_next": qwen3_next,
    "llama4": llama4,
    "nemotron_h": nemotron_h,
    "jamba": jamba,
    "falcon_h1": falcon_h1,
}


def _first(values: object) -> str | None:
    return values[0] if isinstance(values, list) and values and isinstance(values[0], str) else None


def _architecture(data: Mapping[str, Any], where: str) -> tuple[Mapping[str, Any], str]:
    """The table to read and the architecture it is read as: a config's own ``model_type`` (else
    ``architectures[0]``), or, for a wrapper around a language tower (a vision-language model),
    its ``text_config`` by the tower's own ``model_type`` or the wrapper's entry in HF_TEXT_WRAPPERS."""
    model_type, first, text = data.get("model_type"), _first(data.get("architectures")), data.get("text_config")
    known = (isinstance(model_type, str) and model_type in HF_MODEL_TYPES) or first in HF_ARCHITECTURES
    if isinstance(text, Mapping) and (first in HF_TEXT_WRAPPERS or not known):
        tower_type, tower_first = text.get("model_type"), _first(text.get("architectures"))
        if isinstance(tower_type, str) and tower_type in HF_MODEL_TYPES:
            return text, HF_MODEL_TYPES[tower_type]
        if first in HF_TEXT_WRAPPERS:
            return text, HF_TEXT_WRAPPERS[first]
        if tower_first in HF_ARCHITECTURES:
            return text, tower_first
    if first in HF_TEXT_WRAPPERS:
        raise InvalidConfigError(f"{where}: field 'text_config' is missing (needed for {first})")
    if isinstance(model_type, str) and model_type in HF_MODEL_TYPES:
        return data, HF_MODEL_TYPES[model_type]
    if first is not None:
        return data, first
    raise InvalidConfigError(
        f"{where}: neither 'model_type' nor 'architectures' names a supported model "
        f"(model types: {', '.join(HF_MODEL_TYPES)})"
    )


def config_from_hf(data: Mapping[str, Any], name: str, where: str = "config.json") -> TransformerConfig:
    """TransformerConfig from a parsed Hugging Face config.json (``model_type`` picks the mapping in
    ``HF_ARCHITECTURES`` through ``HF_MODEL_TYPES``; else ``architectures[0]``). DeepSeek-V3's multi-token-prediction
    module (``num_nextn_predict_layers``) is not part of the model counted."""
    if not isinstance(data, Mapping):
        raise InvalidConfigError(f"{where}: expected a JSON object")
    data, arch = _architecture(data, where)
    if arch not in HF_ARCHITECTURES:
        raise UnknownNameError(
            f"Hugging Face architecture (field 'architectures' of {where})",
            arch,
            [*HF_ARCHITECTURES, *HF_TEXT_WRAPPERS],
        )
    spec = HF_ARCHITECTURES[arch]
    r = HFReader(data, where, spec.defaults)
    out: dict[str, Any] = {ours: r.get(key, ..., int) for ours, key in spec.required.items()}
    for ours, (key, default) in spec.optional.items():
        out.setdefault(ours, r.get(key, default, type(default)))
    out.update(spec.fixed)
    for feature in spec.features:
        _FEATURES[feature](r, out)
    return TransformerConfig(name=name, source=f"Hugging Face config.json ({where}, {arch})", **out)


def load_hf_config(path: str | Path, name: str | None = None) -> TransformerConfig:
    """Read a config.json with ``json.load`` (nothing in it is executed) and import it;
    the model is named after the file's folder unless ``name`` is given."""
    p = Path(path)
    if is_directory(p):  # a model folder (as downloaded from the Hub): its config.json
        p = p / "config.json"
    text = read_text_file(p, "config")  # a regular file of bounded size: not /dev/zero, not a FIFO
    where = path_text(p)
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except (RecursionError, ValueError) as exc:  # JSONDecodeError, NaN/Infinity, a 5,000-digit integer
        reason = "nested too deeply" if isinstance(exc, RecursionError) else one_line(str(exc), 200)
        raise InvalidConfigError(f"config file {where}: not valid JSON ({reason})") from None
    try:
        stem = p.stem if p.stem != "config" else (p.resolve().parent.name or "config")
    except (OSError, RuntimeError):  # a symlink loop: the file was read, so name it plainly
        stem = "config"
    return config_from_hf(data, name or stem, where)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a valid number in a config.json")
