"""TransformerConfig validation, catalog lookup and the Hugging Face config.json import."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rooftop.errors import InvalidConfigError, UnknownNameError
from rooftop.model.blocks import MoEConfig
from rooftop.model.catalog import config_from_dict, config_to_dict, get_entry, get_model, load_models
from rooftop.model.config import TransformerConfig
from rooftop.model.hf import config_from_hf, load_hf_config
from rooftop.model.workload import Workload

HF = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"
BASE: dict[str, Any] = dict(name="m", vocab_size=1000, d_model=256, n_layers=4, n_heads=8, d_ff=688)


def test_defaults_kv_heads_and_head_dim() -> None:
    cfg = TransformerConfig(**BASE)
    assert (cfg.n_kv_heads, cfg.head_dim) == (8, 256 // 8)


def test_kv_heads_must_divide_heads_and_the_error_lists_valid_values() -> None:
    with pytest.raises(InvalidConfigError, match=r"n_kv_heads=3 does not divide n_heads=8; valid: 1, 2, 4, 8"):
        TransformerConfig(**BASE, n_kv_heads=3)


def test_unknown_activation_suggests_close_match() -> None:
    with pytest.raises(UnknownNameError, match="did you mean swiglu"):
        TransformerConfig(**BASE, mlp="swiglue")


def test_bad_values_are_named() -> None:
    with pytest.raises(InvalidConfigError, match="d_model=0"):
        TransformerConfig(**{**BASE, "d_model": 0})
    with pytest.raises(InvalidConfigError, match="sliding_window is 0"):
        TransformerConfig(**BASE, attention_pattern=("local",))
    with pytest.raises(InvalidConfigError, match="top_k=3 exceeds n_experts=2"):
        MoEConfig(n_experts=2, top_k=3, d_ff_expert=64)


def test_toml_table_rejects_unknown_fields() -> None:
    with pytest.raises(InvalidConfigError, match="unknown architecture field.*n_layer"):
        config_from_dict({**{k: v for k, v in BASE.items() if k != "name"}, "n_layer": 3}, "m")
    with pytest.raises(InvalidConfigError, match=r"\[moe\]: unknown field.*topk"):
        config_from_dict(
            {
                "vocab_size": 10,
                "d_model": 8,
                "n_layers": 1,
                "n_heads": 1,
                "d_ff": 8,
                "moe": {"n_experts": 2, "topk": 1, "d_ff_expert": 8},
            },
            "m",
        )


def test_config_round_trips_through_dict() -> None:
    for entry in load_models():
        d = config_to_dict(entry.config)
        d = {k: v for k, v in d.items() if v is not None and k not in ("name", "source")}
        assert config_from_dict(d, entry.name, entry.config.source) == entry.config


def test_workload_validation() -> None:
    assert Workload("prefill", 2, 128).kv_len == 128
    with pytest.raises(InvalidConfigError, match="needs kv_len"):
        Workload("decode", 8)
    with pytest.raises(InvalidConfigError, match="kv_len=10 is below seq_len=20"):
        Workload("prefill", 1, 20, 10)
    with pytest.raises(UnknownNameError, match="did you mean train"):
        Workload("trian", 1, 8)


def test_catalog_has_the_required_models_with_sources() -> None:
    names = {e.name for e in load_models()}
    required = {
        "llama-2-7b",
        "llama-2-13b",
        "llama-2-70b",
        "llama-3-8b",
        "llama-3-70b",
        "llama-3.1-405b",
        "mistral-7b",
        "mixtral-8x7b",
        "mixtral-8x22b",
        "gemma-2-27b",
        "qwen2.5-72b",
        "deepseek-v3",
        "gpt-3-175b",
        "palm-540b",
    }
    assert required <= names
    for e in load_models():
        assert e.config.source.strip()
        assert all(f.source.strip() for f in e.published.values())


def test_lookup_by_alias_and_close_matches() -> None:
    assert get_entry("Meta-Llama-3-70B").name == "llama-3-70b"
    assert get_model("mixtral 8x7b").name == "mixtral-8x7b"
    with pytest.raises(UnknownNameError, match="did you mean llama-3-70b"):
        get_model("llama-3-7b")


def test_hf_import_matches_catalog_configs() -> None:
    for name in ("llama-3-70b", "mistral-7b", "qwen2.5-72b", "gemma-2-27b", "mixtral-8x7b", "deepseek-v3"):
        imported = load_hf_config(HF / f"{name}.json")
        catalog = get_model(name)
        assert imported.with_name(name, catalog.source) == catalog, name


def test_hf_gemma3_text_config_and_local_global_pattern() -> None:
    cfg = load_hf_config(HF / "gemma-3-like.json")
    assert cfg.attention_pattern == ("local",) * 5 + ("global",)
    assert (cfg.sliding_window, cfg.head_dim, cfg.qk_norm, cfg.tied_embeddings) == (512, 128, True, True)
    data = json.loads((HF / "gemma-3-like.json").read_text())["text_config"]
    types = ["sliding_attention", "full_attention"] * 6
    cfg2 = config_from_hf({**data, "architectures": ["Gemma3ForCausalLM"], "layer_types": types}, "g")
    assert cfg2.attention_pattern == ("local", "global") * 6


def test_hf_missing_field_and_unknown_architecture_are_named() -> None:
    with pytest.raises(InvalidConfigError, match="missing-field.json: field 'intermediate_size' is missing"):
        load_hf_config(HF / "missing-field.json")
    with pytest.raises(UnknownNameError, match="MambaForCausalLM"):
        load_hf_config(HF / "unknown-arch.json")
    with pytest.raises(InvalidConfigError, match="neither .model_type. nor .architectures. names a supported model"):
        config_from_hf({"hidden_size": 8}, "x")
    # a known model_type beside an architectures list whose first entry is not a name (found by fuzzing:
    # it reached a dict lookup with a list, an internal error)
    with pytest.raises(InvalidConfigError, match="field 'vocab_size' is missing"):
        config_from_hf({"architectures": [[]], "model_type": "gptj"}, "x")
    with pytest.raises(InvalidConfigError, match="field 'num_local_experts' is missing"):
        config_from_hf(
            {
                "architectures": ["MixtralForCausalLM"],
                "hidden_size": 8,
                "intermediate_size": 8,
                "num_attention_heads": 2,
                "num_hidden_layers": 1,
                "vocab_size": 10,
            },
            "x",
        )
    with pytest.raises(InvalidConfigError, match="'hidden_size' must be an integer"):
        config_from_hf(
            {
                "architectures": ["LlamaForCausalLM"],
                "hidden_size": "8",
                "intermediate_size": 8,
                "num_attention_heads": 2,
                "num_hidden_layers": 1,
                "vocab_size": 10,
            },
            "x",
        )


def test_hf_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidConfigError, match="not valid JSON"):
        load_hf_config(bad)
    with pytest.raises(InvalidConfigError, match="does not exist"):
        load_hf_config(tmp_path / "nope.json")


def test_model_named_after_folder_of_config_json(tmp_path: Path) -> None:
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text((HF / "tiny-llama.json").read_text())
    assert load_hf_config(folder / "config.json").name == "my-model"


@pytest.mark.parametrize(
    "file,published,total",
    [
        # GPT-2 small: 124,439,808 (the count Hugging Face reports for openai-community/gpt2)
        ("gpt2.json", 124_439_808, 124_439_808),
        # GPT-J-6B: 6,053,381,344 (the GPT-J README); rooftop counts no lm_head bias (50,400) and the rest of
        # the published figure's 0.04% is not in the Hugging Face module either
        ("gpt-j-6b.json", 6_053_381_344, 6_050_832_384),
        # Qwen3-8B: 8.2B, 6.95B without embeddings (model card); 36 x 192.95M + 2 x 151,936 x 4,096 + 4,096
        ("qwen3-8b.json", 8.19e9, 8_190_735_360),
        # Qwen3-30B-A3B: 30.5B total, 3.3B active (model card)
        ("qwen3-30b-a3b.json", 30.53e9, 30_532_122_624),
        # gpt-oss-20b: 20.91B total, 3.61B active without the embedding (OpenAI's model card); its expert biases
        # (6.6M) are not counted
        ("gpt-oss-20b.json", 20.91e9, 20_908_120_128),
        # Gemma-3-1B: 302M embedding + 698M non-embedding parameters (Gemma 3 Technical Report, 2025, Table 1);
        # 262,144 x 1,152 = 301,989,888 tied embedding + 26 layers x 26,842,112 + the final norm's 1,152
        ("gemma-3-1b.json", 302e6 + 698e6, 999_885_952),
    ],
)
def test_hf_architectures_match_their_published_parameter_counts(file: str, published: float, total: int) -> None:
    """Qwen3, Qwen3-MoE, GPT-2, GPT-J, gpt-oss and Gemma-3 from their config.json (was: refused by
    architectures[0])."""
    from rooftop.model.params import params_total

    cfg = load_hf_config(HF / file)
    assert params_total(cfg) == total
    assert params_total(cfg) == pytest.approx(published, rel=1e-3)


def test_hf_dispatch_on_model_type_and_details() -> None:
    gpt2, gptj = load_hf_config(HF / "gpt2.json"), load_hf_config(HF / "gpt-j-6b.json")
    assert (gpt2.positions, gpt2.norm, gpt2.mlp, gpt2.d_ff, gpt2.tied_embeddings) == ("learned", "layernorm", "gelu",
                                                                                      3072, True)  # fmt: skip
    assert gptj.parallel_layers and gptj.norms_per_layer == 1 and not gptj.tied_embeddings
    qwen3 = load_hf_config(HF / "qwen3-8b.json")
    assert qwen3.qk_norm and not qwen3.qkv_bias and qwen3.head_dim == 128
    oss = load_hf_config(HF / "gpt-oss-20b.json")
    assert oss.sliding_window == 128 and oss.attention_pattern[:2] == ("local", "global") and oss.qkv_bias
    assert oss.moe is not None and (oss.moe.n_experts, oss.moe.top_k) == (32, 4)
    # model_type decides; architectures is the fallback
    data = json.loads((HF / "qwen3-8b.json").read_text())
    assert config_from_hf({**data, "architectures": ["SomethingElse"]}, "q").qk_norm
    assert config_from_hf({k: v for k, v in data.items() if k != "model_type"}, "q").qk_norm


def test_a_model_folder_is_read_through_its_config_json(tmp_path: Path) -> None:
    folder = tmp_path / "Qwen3-8B"
    folder.mkdir()
    (folder / "config.json").write_text((HF / "qwen3-8b.json").read_text())
    cfg = get_model(str(folder))
    assert cfg.name == "Qwen3-8B" and cfg.n_layers == 36


def test_rooftop_model_takes_a_model_folder(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / "config.json").write_text((HF / "gpt2.json").read_text())
    code, out, err = run_cli("model", str(folder), "--json")
    assert code == 0, err
    assert json.loads(out)["params_total"] == 124_439_808
    code, _, err = run_cli("model", str(tmp_path / "empty") + "/")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_model_command_attention_convention_flash_and_context() -> None:
    """rooftop model: --attention full counts all T^2 pairs (causal: T(T+1)/2), the activation table gives
    the fused-attention bytes train assumes beside the unfused ones, and a --seq-len past the context warns."""
    from tests.conftest import run_cli

    def model(*argv: str) -> dict:
        code, out, err = run_cli("model", "llama-3-8b", "--seq-len", "8192", *argv, "--json")
        assert code == 0, err
        return json.loads(out)

    causal, full = model(), model("--attention", "full")
    # 32 layers x 2 x 32 heads x (128 + 128) x pairs per token: (T + 1) / 2 causal, T full
    assert causal["attention_flops_per_token"] == pytest.approx(32 * 2 * 32 * 256 * 8193 / 2)
    assert full["attention_flops_per_token"] == pytest.approx(32 * 2 * 32 * 256 * 8192)
    assert full["flops_per_token_forward"] - causal["flops_per_token_forward"] == pytest.approx(
        full["attention_flops_per_token"] - causal["attention_flops_per_token"]
    )
    flash, unfused = causal["activation_bytes_per_token_flash"]["none"], causal["activation_bytes_per_token"]["none"]
    assert unfused - flash == pytest.approx(32 * (32 * 8192 - 2 * 32) * 2)  # N x T probabilities vs 2 N statistics
    assert causal["notes"] == [] and "exceeds llama-3-8b's context of 8,192" in model("--seq-len", "16384")["notes"][0]
