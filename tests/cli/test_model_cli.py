"""`rooftop models` and `rooftop model`: the JSON contract, the issue's done criteria, config.json import."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli

HF = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs"
CONTRACT = {
    "params_total",
    "params_active",
    "params_breakdown",
    "flops_per_token_forward",
    "flops_per_token_train",
    "attention_flops_per_token",
    "kv_cache_bytes_per_token",
    "kv_cache_bytes",
    "activation_bytes_per_token",
    "training_bytes_per_param",
    "schema_version",
}


def model_json(*argv: str) -> dict:
    code, out, err = run_cli("model", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_llama_3_70b_done_criterion() -> None:
    d = model_json("llama-3-70b", "--seq-len", "8192")
    assert CONTRACT <= set(d)
    assert d["params_total"] == pytest.approx(70.6e9, rel=0.005)
    assert d["kv_cache_bytes_per_token"] == 327_680
    assert d["kv_cache_bytes"] == 327_680 * 8192
    n, attn = d["params_matmul_active"], d["attention_flops_per_token"]
    assert attn == pytest.approx(80 * 2 * 64 * 256 * (8192 + 1) / 2)
    assert d["flops_per_token_train"] == pytest.approx(6 * n + 3 * attn)
    assert set(d["activation_bytes_per_token"]) == {"none", "selective", "selective-op", "dots", "full"}
    assert d["activation_bytes_per_token"]["full"] == 80 * 8192 * 2
    assert d["training_bytes_per_param"] == 16
    assert d["params_breakdown"]["params"] == d["params_total"]


def test_deepseek_v3_done_criterion() -> None:
    d = model_json("deepseek-v3")
    assert d["params_total"] == pytest.approx(671e9, rel=0.01)
    assert d["params_active"] == pytest.approx(37e9, rel=0.015)  # 37.55B; see tests/golden
    assert d["kv_cache_bytes_per_token"] == 61 * (512 + 64) * 2
    assert [(g["name"], g["count"]) for g in d["layer_groups"]] == [("dense", 3), ("moe", 58)]


def test_options_change_what_they_should() -> None:
    base = model_json("llama-3-8b", "--seq-len", "2k", "--batch", "4")  # 2k = 2000 (decimal prefixes)
    assert base["kv_cache_bytes"] == 4 * 2000 * base["kv_cache_bytes_per_token"]
    fp8 = model_json("llama-3-8b", "--seq-len", "2k", "--batch", "4", "--kv-dtype", "fp8")
    assert fp8["kv_cache_bytes"] == base["kv_cache_bytes"] / 2
    full = model_json("llama-3-8b", "--seq-len", "2k", "--remat", "full")
    assert full["flops_per_token_train"] == pytest.approx(
        base["flops_per_token_train"] + base["recompute_flops_per_token"]["full"]
    )


def _numbers(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "model"}


@pytest.mark.parametrize("name", ["llama-3-70b", "deepseek-v3", "gemma-2-27b", "mixtral-8x7b", "qwen2.5-72b"])
def test_config_json_gives_the_catalog_numbers(name: str, tmp_path: Path) -> None:
    """A config.json equivalent to a catalog entry, given both ways, reproduces every output."""
    catalog = model_json(name, "--seq-len", "4096", "--batch", "2")
    folder = tmp_path / "not-in-catalog"
    folder.mkdir()
    shutil.copy(HF / f"{name}.json", folder / "config.json")
    positional = model_json(str(folder / "config.json"), "--seq-len", "4096", "--batch", "2")
    flag = model_json("--model", str(HF / f"{name}.json"), "--seq-len", "4096", "--batch", "2")
    assert _numbers(positional) == _numbers(catalog)
    assert _numbers(flag) == _numbers(catalog)
    assert positional["model"]["name"] == "not-in-catalog"
    cfg_a, cfg_b = catalog["model"]["config"], positional["model"]["config"]
    assert {k: v for k, v in cfg_a.items() if k not in ("name", "source")} == {
        k: v for k, v in cfg_b.items() if k not in ("name", "source")
    }


def test_models_table_and_json() -> None:
    code, out, err = run_cli("models")
    assert code == 0, err
    assert "deepseek-v3" in out and "palm-540b" in out
    code, out, _ = run_cli("models", "--json")
    models = {m["name"]: m for m in json.loads(out)["models"]}
    assert models["mixtral-8x7b"]["params_active"] == pytest.approx(12.9e9, rel=0.005)
    assert models["gpt-3-175b"]["published"]["params_total"]["value"] == 175.0e9


def test_model_renders_tables() -> None:
    code, out, err = run_cli("model", "mixtral-8x7b")
    assert code == 0, err
    assert "KV cache per token" in out and "experts" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["model", "llama-3-7b"], "did you mean llama-3-70b"),
        (["model", str(HF / "missing-field.json")], "field 'intermediate_size' is missing"),
        (["model", str(HF / "unknown-arch.json")], "MambaForCausalLM"),
        (["model", "llama-3-8b", "--seq-len", "0"], "--seq-len '0' must be a positive integer"),
        (["model"], "give a model"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(argv: list[str], message: str) -> None:
    code, out, err = run_cli(*argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and not out
