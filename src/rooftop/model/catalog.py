"""Model catalog: load and look up TransformerConfigs from data files.

- Built-in models: ``catalog/models/*.toml`` (one model per file: name, aliases, the source
  of the architecture, published figures with their sources, and an ``[architecture]``
  table of TransformerConfig fields).
- A Hugging Face ``config.json`` (any path ending in .json): imported through the
  ``HF_ARCHITECTURES`` table below; read with ``json.load`` only, nothing is executed.
- A user TOML of the catalog schema (any path ending in .toml).

Lookup is case-insensitive over names and aliases (spaces, dots and dashes ignored); an
unknown name raises UnknownNameError with close matches.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rooftop.catalog.io import builtin_tomls, is_directory, path_text, read_text_file, read_toml_file
from rooftop.errors import InvalidConfigError, UnknownNameError, one_line, shown
from rooftop.model.config import (
    MAX_PATTERN,
    LinearAttentionConfig,
    MLAConfig,
    MoEConfig,
    SSMConfig,
    TransformerConfig,
    config_from_dict,
)
from rooftop.units import MAX_QUANTITY

#: longest model name or alias, and most aliases of a catalog-schema file
MAX_NAME = 200
MAX_ALIASES = 64


@dataclass(frozen=True)
class PublishedFigure:
    """A published number about a model (e.g. its parameter count) and where it is stated."""

    value: float
    source: str
    note: str = ""


@dataclass(frozen=True)
class ModelEntry:
    """One catalog model: its config plus what the catalog says about it."""

    config: TransformerConfig
    aliases: tuple[str, ...] = ()
    description: str = ""
    published: Mapping[str, PublishedFigure] = field(default_factory=lambda: MappingProxyType({}))
    path: str = ""

    @property
    def name(self) -> str:
        return self.config.name


def _published(data: Any, where: str) -> dict[str, PublishedFigure]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise InvalidConfigError(f"{where}: [published] must be a table")
    out = {}
    for key, node in data.items():
        if not isinstance(node, Mapping) or "value" not in node or not str(node.get("source", "")).strip():
            raise InvalidConfigError(f'{where}: published.{shown(key)} must be {{value = ..., source = "..."}}')
        value = node["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) <= MAX_QUANTITY:
            raise InvalidConfigError(f"{where}: published.{shown(key)} value {shown(value)} must be a finite number")
        out[key] = PublishedFigure(float(value), str(node["source"]), str(node.get("note", "")))
    return out


def entry_from_dict(data: Mapping[str, Any], where: str = "<model>") -> ModelEntry:
    """Build and validate a ModelEntry from a parsed catalog TOML; errors name the file and field."""
    for key in ("name", "source"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise InvalidConfigError(f"{where}: field {key} is missing or not a string (every model needs one)")
    if len(data["name"]) > MAX_NAME:
        raise InvalidConfigError(f"{where}: field name is longer than {MAX_NAME} characters")
    arch = data.get("architecture")
    if not isinstance(arch, Mapping):
        raise InvalidConfigError(f"{where}: table [architecture] is missing")
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and len(a) <= MAX_NAME for a in aliases):
        raise InvalidConfigError(f"{where}: field 'aliases' must be a list of strings of at most {MAX_NAME} characters")
    if len(aliases) > MAX_ALIASES:
        raise InvalidConfigError(f"{where}: field 'aliases' has {len(aliases):,} names; at most {MAX_ALIASES}")
    cfg = config_from_dict(arch, data["name"], data["source"], where)
    return ModelEntry(
        cfg,
        tuple(aliases),
        str(data.get("description", "")),
        MappingProxyType(_published(data.get("published"), where)),
        where,
    )


def load_model_file(path: str | Path) -> ModelEntry:
    return entry_from_dict(read_toml_file(path, "model"), str(path))


@lru_cache(maxsize=1)
def load_models() -> tuple[ModelEntry, ...]:
    """Every built-in model, in file-name order."""
    return tuple(entry_from_dict(data, where) for where, data in builtin_tomls("models"))


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def get_entry(name: str) -> ModelEntry:
    """A catalog entry by name or alias; a path ending in .toml is loaded as one."""
    if name.endswith(".toml"):
        return load_model_file(name)
    key = _norm(name)
    entries = load_models()
    for entry in entries:
        if key == _norm(entry.name) or any(key == _norm(a) for a in entry.aliases):
            return entry
    raise UnknownNameError(
        "model",
        name,
        [e.name for e in entries],
        "or give the path of a Hugging Face config.json (or of the model's folder holding one)",
    )


def get_model(name: str) -> TransformerConfig:
    """A TransformerConfig from a catalog name or alias, a catalog-schema .toml file or a
    Hugging Face config.json (a path ending in .json)."""
    if name.endswith(".json"):
        return load_hf_config(name)
    if "/" in name and is_directory(name):  # a folder holding config.json (a catalog name has no '/')
        return load_hf_config(name)
    return get_entry(name).config


# ---------------------------------------------------------------- Hugging Face config.json

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
    "jamba": "JambaForCausalLM",
}  # fmt: skip
#: multimodal wrappers whose ``text_config`` is read as the named text-only architecture when the
#: text_config names no model_type of its own (any other config with a ``text_config`` whose
#: model_type is known is read through it: the language tower of a vision-language model).
HF_TEXT_WRAPPERS = {
    "Gemma3ForConditionalGeneration": "Gemma3ForCausalLM",
    "Llama4ForConditionalGeneration": "Llama4ForCausalLM",
}


class _HF:
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


def _gated_act(r: _HF, out: dict[str, Any], key: str = "hidden_act") -> None:
    act = r.get(key, "silu", str)
    if act not in _GATED_ACT:
        raise r.fail(key, f"has unsupported activation {shown(act)} (supported: {', '.join(_GATED_ACT)})")
    out["mlp"] = _GATED_ACT[act]


def _gemma_act(r: _HF, out: dict[str, Any]) -> None:
    # hidden_activation (else the older hidden_act; absent: the configuration class's default)
    _gated_act(
        r, out, "hidden_act" if "hidden_act" in r.data and "hidden_activation" not in r.data else "hidden_activation"
    )


def _llama_bias(r: _HF, out: dict[str, Any]) -> None:
    out["qkv_bias"] = out["out_bias"] = r.get("attention_bias", False, bool)
    out["mlp_bias"] = r.get("mlp_bias", False, bool)


def _sliding_all(r: _HF, out: dict[str, Any]) -> None:
    window = r.get("sliding_window", 0, int)
    if window:
        out["sliding_window"], out["attention_pattern"] = window, ("local",)


def _qwen_window(r: _HF, out: dict[str, Any]) -> None:
    if r.get("use_sliding_window", False, bool):
        raise r.fail("use_sliding_window", "is true; Qwen2 sliding-window layers are not supported (set it false)")


def _gemma2_pattern(r: _HF, out: dict[str, Any]) -> None:
    # transformers Gemma2DecoderLayer: is_sliding = not bool(layer_idx % 2) -> even layers local.
    out["sliding_window"], out["attention_pattern"] = r.get("sliding_window", ..., int), ("local", "global")


def _gemma3_pattern(r: _HF, out: dict[str, Any]) -> None:
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


def _mixtral_moe(r: _HF, out: dict[str, Any]) -> None:
    out["moe"] = MoEConfig(
        n_experts=r.get("num_local_experts", ..., int),
        top_k=r.get("num_experts_per_tok", ..., int),
        d_ff_expert=out["d_ff"],
    )


def _deepseek_moe(r: _HF, out: dict[str, Any]) -> None:
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


def _mla(r: _HF, out: dict[str, Any]) -> None:
    out["mla"] = MLAConfig(
        kv_lora_rank=r.get("kv_lora_rank", ..., int),
        qk_nope_head_dim=r.get("qk_nope_head_dim", ..., int),
        qk_rope_head_dim=r.get("qk_rope_head_dim", ..., int),
        v_head_dim=r.get("v_head_dim", ..., int),
        q_lora_rank=r.get("q_lora_rank", 0, int),
    )
    out["n_kv_heads"] = out["n_heads"]  # MLA has per-head keys/values; num_key_value_heads is unused
    out["head_dim"] = out["mla"].qk_nope_head_dim + out["mla"].qk_rope_head_dim


def _gpt_act(r: _HF, out: dict[str, Any]) -> None:
    act = r.get("activation_function", "gelu_new", str)
    kinds = {"gelu_new": "gelu", "gelu": "gelu", "gelu_fast": "gelu", "gelu_pytorch_tanh": "gelu", "relu": "relu"}
    if act not in kinds:
        raise r.fail("activation_function", f"has unsupported activation {shown(act)} (supported: {', '.join(kinds)})")
    out["mlp"] = kinds[act]


def _gpt_inner(r: _HF, out: dict[str, Any]) -> None:
    out["d_ff"] = r.get("n_inner", 4 * out["d_model"], int)  # null: 4 x n_embd


def _qwen3_moe(r: _HF, out: dict[str, Any]) -> None:
    ffns = _sparse_ffns(r, out["n_layers"])
    if "dense" in ffns:
        _layers(r, out, ["global"] * out["n_layers"], ffns)
    out["moe"] = MoEConfig(
        n_experts=r.get("num_experts", ..., int),
        top_k=r.get("num_experts_per_tok", ..., int),
        d_ff_expert=r.get("moe_intermediate_size", ..., int),
    )


def _gpt_oss_moe(r: _HF, out: dict[str, Any]) -> None:
    out["moe"] = MoEConfig(
        n_experts=r.get("num_local_experts", ..., int),
        top_k=r.get("num_experts_per_tok", r.get("experts_per_token", 4, int), int),
        d_ff_expert=out["d_ff"],
        router_bias=True,
    )


def _pattern(values: list[str]) -> tuple[str, ...]:
    """The shortest repeating unit of a per-layer list (so a 48-layer list of period 4 is 4 entries)."""
    n = len(values)
    for p in range(1, n + 1):
        if n % p == 0 and values == values[:p] * (n // p):
            return tuple(values[:p])
    return tuple(values)


def _layers(r: _HF, out: dict[str, Any], mixers: list[str], ffns: list[str]) -> None:
    """Per-layer mixer and feed-forward kinds -> attention_pattern and ffn_pattern."""
    if len(mixers) > MAX_PATTERN * 64:
        raise r.fail("num_hidden_layers", f"is {len(mixers):,}; per-layer patterns are read up to {MAX_PATTERN * 64:,}")
    out["attention_pattern"], out["ffn_pattern"] = _pattern(mixers), _pattern(ffns)
    for key in ("attention_pattern", "ffn_pattern"):
        if len(out[key]) > MAX_PATTERN:
            raise r.fail(
                "num_hidden_layers", f"gives a layer pattern of {len(out[key]):,} entries; at most {MAX_PATTERN:,}"
            )


def _sparse_ffns(r: _HF, n: int) -> list[str]:
    """Qwen2/3-MoE's rule (transformers Qwen3MoeDecoderLayer): layer i is MoE unless listed in
    mlp_only_layers, when (i + 1) % decoder_sparse_step == 0."""
    step = r.get("decoder_sparse_step", 1, int)
    dense = r.get("mlp_only_layers", [], list)
    if step < 1 or not all(_whole_json(i) for i in dense):
        raise r.fail("decoder_sparse_step", "must be >= 1 and mlp_only_layers a list of layer indices")
    return ["moe" if i not in dense and (i + 1) % step == 0 else "dense" for i in range(n)]


def _whole_json(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _glm_bias(r: _HF, out: dict[str, Any]) -> None:
    out["qkv_bias"] = r.get("attention_bias", False, bool)  # GLM-4.5: o_proj has no bias
    out["qk_norm"] = r.get("use_qk_norm", False, bool)


def _qwen3_next(r: _HF, out: dict[str, Any]) -> None:
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
    _layers(r, out, [kinds[t] for t in types], _sparse_ffns(r, n))
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


def _llama4(r: _HF, out: dict[str, Any]) -> None:
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
    _layers(r, out, ["chunked" if flag and chunk else "global" for flag in rope], ffns)
    out["moe"] = MoEConfig(
        n_experts=r.get("num_local_experts", ..., int),
        top_k=r.get("num_experts_per_tok", 1, int),
        d_ff_expert=r.get("intermediate_size", ..., int),
        n_shared_experts=1,
    )


#: Nemotron-H hybrid_override_pattern characters -> (mixer, feed-forward)
_NEMOTRON_BLOCKS = {"M": ("ssm", "none"), "*": ("global", "none"), "-": ("none", "dense"), "E": ("none", "moe")}


def _nemotron_h(r: _HF, out: dict[str, Any]) -> None:
    pattern = r.get("hybrid_override_pattern", ..., str)
    if len(pattern) != out["n_layers"] or any(ch not in _NEMOTRON_BLOCKS for ch in pattern):
        raise r.fail(
            "hybrid_override_pattern",
            f"must give one of {', '.join(_NEMOTRON_BLOCKS)} for each of the {out['n_layers']} layers",
        )
    _layers(r, out, [_NEMOTRON_BLOCKS[ch][0] for ch in pattern], [_NEMOTRON_BLOCKS[ch][1] for ch in pattern])
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


def _jamba(r: _HF, out: dict[str, Any]) -> None:
    n = out["n_layers"]
    a_period, a_offset = r.get("attn_layer_period", 8, int), r.get("attn_layer_offset", 4, int)
    e_period, e_offset = r.get("expert_layer_period", 2, int), r.get("expert_layer_offset", 1, int)
    if min(a_period, e_period) < 1:
        raise r.fail("attn_layer_period", "and expert_layer_period must be >= 1")
    experts = r.get("num_experts", 16, int)
    mixers = ["global" if i % a_period == a_offset else "ssm" for i in range(n)]
    ffns = ["moe" if experts > 1 and i % e_period == e_offset else "dense" for i in range(n)]
    _layers(r, out, mixers, ffns)
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
    "glm_bias": _glm_bias,
    "qwen3_next": _qwen3_next,
    "llama4": _llama4,
    "nemotron_h": _nemotron_h,
    "jamba": _jamba,
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
    r = _HF(data, where, spec.defaults)
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
