"""``rooftop serve``: the issue's commands for the KV cache sharded over the slice and for attention
data parallelism with expert parallelism (``--fix attn_dp=..``), as JSON and as tables."""

from __future__ import annotations

import json

from tests.conftest import run_cli

BOOK = ("llama-3-70b", "--chip", "tpu-v5e", "--topology", "4x8", "--prompt-len", "7680", "--gen-len", "512")
DSV3 = ("deepseek-v3", "--chip", "h200", "--chips", "8", "--prompt-len", "1024", "--gen-len", "1024")


def _json(*argv: str) -> dict:
    code, out, err = run_cli("serve", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_book_command_shards_the_cache_over_the_slice() -> None:
    d = _json(*BOOK)
    big = max(d["layouts"], key=lambda s: s["max_batch"] * s["parallelism"]["replicas"])
    assert big["parallelism"] == {"tp": 32, "ep": 1, "pp": 1, "replicas": 1, "kv_batch": 4, "attn_dp": 1}
    assert big["max_batch"] == 136  # (0.95 x 16 GiB - 4.66 GB of weights) / (8192 x 327,680 / 32), in 4s
    copies = next(s for s in d["layouts"] if s["parallelism"]["tp"] == 32 and s["parallelism"]["kv_batch"] == 1)
    assert copies["max_batch"] == 34  # the same chips with every KV head on 4 of them


def test_attn_dp_with_ep_on_deepseek_reports_attn_dp() -> None:
    d = _json(*DSV3, "--fix", "attn_dp=8,ep=8", "--weight-dtype", "fp8")
    assert d["fix"] == {"attn_dp": 8, "ep": 8}
    assert {p["parallelism"]["attn_dp"] for p in d["points"]} == {8}
    assert {p["parallelism"]["tp"] for p in d["points"]} == {8}
    assert d["chosen"] is not None and all(p["batch"] % 8 == 0 for p in d["points"])
    code, out, err = run_cli("serve", *DSV3, "--fix", "attn_dp=8,ep=8", "--weight-dtype", "fp8", "--batch", "64")
    assert code == 0, err
    assert "attn_dp=8" in out


def test_bad_attn_dp_pins_are_one_line_exit_2() -> None:
    for fix, message in (
        ("attn_dp=3", "--fix attn_dp=3"),
        ("tp=8,attn_dp=16", "attn_dp=16 must divide tp=8"),
        ("attn_dp=2,kv_batch=2", "use one of them"),
        ("tp=8,kv_batch=2", "kv_batch=2 does not divide the 1 ways tp=8 leaves"),
    ):
        model = "llama-3-70b" if "kv_batch" in fix and "attn_dp" not in fix else "deepseek-v3"
        code, out, err = run_cli("serve", model, *DSV3[1:], "--fix", fix)
        assert code == 2 and out == "", (fix, err)
        assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (fix, err)


def test_the_issues_deepseek_command_as_written_uses_the_default_lengths() -> None:
    """The done-when's command has no --prompt-len or --gen-len: serve then takes vLLM's serving-benchmark
    defaults (1024 in, 128 out), says so in a note, and an explicit length still wins."""
    argv = ("deepseek-v3", "--chip", "h200", "--chips", "8", "--fix", "attn_dp=8,ep=8", "--weight-dtype", "fp8")
    d = _json(*argv, "--requests-per-s", "4")
    assert (d["prompt_len"], d["gen_len"]) == (1024, 128)
    assert d["notes"][0].startswith("--prompt-len 1024 and --gen-len 128: not given")
    cb = d["continuous_batching"]
    assert not cb["saturated"] and cb["tpot_s"] > 0 and cb["ttft_s"] > cb["ttft_idle_s"] > 0
    d = _json(*argv, "--gen-len", "64", "--batch", "64")
    assert (d["prompt_len"], d["gen_len"]) == (1024, 64)
    assert d["notes"][0] == "--prompt-len 1024: not given, so the defaults of vLLM's serving benchmark (random dataset)"
    explicit = _json(*argv, "--prompt-len", "1024", "--gen-len", "64", "--batch", "64")
    assert not any("not given" in n for n in explicit["notes"])
    assert explicit["points"] == d["points"]
