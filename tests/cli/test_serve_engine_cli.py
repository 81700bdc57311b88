"""``rooftop serve --static-cache-len N --kv-reads-per-query-head``: how the engine keeps and reads the
KV cache in decode, reported back in the JSON and applied to every layout."""

from __future__ import annotations

import json

from tests.conftest import run_cli

JSP = ("llama-2-7b", "--chip", "tpu-v5e", "--topology", "2x4", "--prompt-len", "219", "--gen-len", "292")
KV_PER_TOKEN = 32 * 2 * 32 * 128 * 2  # Llama 2 7B in bf16: layers x (K, V) x heads x head dim x 2 bytes


def _json(*argv: str) -> dict:
    code, out, err = run_cli("serve", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_defaults_report_each_sequences_own_context() -> None:
    d = _json(*JSP)
    assert d["static_cache_len"] == 0 and d["kv_reads_per_query_head"] is False


def test_a_static_cache_holds_and_reads_every_position_of_a_slot() -> None:
    d = _json(*JSP, "--static-cache-len", "2048", "--kv-reads-per-query-head")
    assert d["static_cache_len"] == 2048 and d["kv_reads_per_query_head"] is True
    tp8 = [p for p in d["points"] if p["parallelism"]["tp"] == 8]
    assert tp8
    for p in tp8:  # the cache stored: batch x 2,048 positions (/ 8 chips each), whatever the context
        assert p["kv_cache_bytes"] == p["batch"] * 2048 * KV_PER_TOKEN
        assert p["memory"]["kv_cache_bytes"] == p["batch"] * 2048 * KV_PER_TOKEN / 8
    plain = {p["batch"]: p for p in _json(*JSP)["points"] if p["parallelism"]["tp"] == 8}
    for p in tp8:  # reading 2,048 positions instead of ~365 makes every step slower
        if p["batch"] in plain:
            assert p["step_time_s"] > plain[p["batch"]]["step_time_s"]


def test_a_bad_cache_length_is_one_line_exit_2() -> None:
    for bad in ("0", "-5", "abc", "2.5"):
        code, out, err = run_cli("serve", *JSP, "--static-cache-len", bad)
        assert code == 2 and out == "" and "--static-cache-len" in err and len(err.strip().splitlines()) == 1
