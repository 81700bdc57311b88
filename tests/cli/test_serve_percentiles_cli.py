"""`rooftop serve ... --requests-per-s R --percentiles [--requests N --seed S]`: the JSON keys, the
table's lines, and bad input as one line with exit code 2."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

BASE = ("serve", "llama-3-8b", "--chip", "h100", "--chips", "1", "--prompt-len", "2048", "--gen-len", "256")


def test_percentiles_json_and_table() -> None:
    code, out, err = run_cli(*BASE, "--requests-per-s", "5", "--percentiles", "--requests", "2000", "--seed", "7",
                             "--json")  # fmt: skip
    assert code == 0, err
    p = json.loads(out)["percentiles"]
    assert (p["requests"], p["seed"]) == (2000, 7) and 2000 <= p["measured"] <= 16 * 2000
    assert p["target_half_width"] == 0.04 and set(p["half_width"]) == {"ttft_s", "tpot_s", "e2e_s"}
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        assert 0 < p[key]["p50"] <= p[key]["p90"] <= p[key]["p99"]
    # each request's end-to-end is its TTFT + 255 x its TPOT, so the median end-to-end is above the median TTFT
    assert p["e2e_s"]["p50"] > p["ttft_s"]["p50"] + 255 * p["tpot_s"]["p50"] * 0.5
    code, out, err = run_cli(*BASE, "--requests-per-s", "5", "--percentiles", "--requests", "2000")
    assert code == 0, err
    assert "2000 asked for" in out and "95% confidence within ±" in out
    assert "TTFT: p50" in out and "TPOT: p50" in out and "end-to-end: p50" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--percentiles",), "--percentiles needs --requests-per-s"),
        (
            ("--requests-per-s", "5", "--requests", "100"),
            "--requests, --seed, --request-trace and --random-range-ratio need --percentiles",
        ),
        (("--requests-per-s", "5", "--percentiles", "--seed", "x1"), "--seed 'x1' must be an integer"),
        (("--requests-per-s", "5", "--percentiles", "--requests", "5"), "between 10 and"),
        (("--requests-per-s", "500", "--percentiles"), "--percentiles: no layout to simulate"),
        (("--requests-per-s", "5", "--percentiles", "--random-range-ratio", "1"), "must be at least 0 and below 1"),
    ],
)
def test_percentiles_bad_input(argv: tuple[str, ...], message: str) -> None:
    code, _out, err = run_cli(*BASE, *argv)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_request_trace_means_and_malformed_line(tmp_path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"input_len": 1000, "output_len": 100}\n\n{"input_len": 3000, "output_len": 300, "x": 1}\n')
    code, out, err = run_cli(*BASE[:4], "--chips", "1", "--requests-per-s", "2", "--percentiles", "--requests", "500",
                             "--request-trace", str(trace), "--json")  # fmt: skip
    assert code == 0, err
    payload = json.loads(out)
    assert (payload["prompt_len"], payload["gen_len"]) == ((1000 + 3000) // 2, (100 + 300) // 2)
    assert payload["percentiles"]["ttft_s"]["p99"] > 0
    for line3 in ('{"input_len": 3000', '{"input_len": 0, "output_len": 5}', "[1, 2]"):
        trace.write_text('{"input_len": 1000, "output_len": 100}\n\n' + line3 + "\n")
        code, _out, err = run_cli(*BASE[:4], "--chips", "1", "--requests-per-s", "2", "--percentiles",
                                  "--request-trace", str(trace))  # fmt: skip
        assert code == 2 and "trace.jsonl:3: " in err and len(err.strip().splitlines()) == 1, err


def test_prefix_cache_in_the_simulation_cli() -> None:
    # under a rate the simulation prefills a hit's other tokens only: TTFT under load and the prompt tokens per
    # step fall with the hits (each layout's; 1536 of 2048 tokens cached for half the requests: 1280 on average)
    runs = []
    for extra in ((), ("--prefix-len", "1536", "--prefix-hit-rate", "0.5")):
        code, out, err = run_cli(*BASE, "--requests-per-s", "5", *extra, "--json")
        assert code == 0, err
        runs.append(json.loads(out)["continuous_batching"]["layouts"][0])
    plain, cached = runs
    assert cached["ttft_s"] < plain["ttft_s"] and cached["capacity_requests_per_s"] > plain["capacity_requests_per_s"]
    assert cached["prefill_tokens_per_step"] < plain["prefill_tokens_per_step"]


def test_prefix_cache_cli() -> None:
    code, out, err = run_cli(*BASE, "--prefix-len", "1536", "--prefix-hit-rate", "0.5", "--json")
    assert code == 0, err
    p = json.loads(out)["prefix_cache"]
    assert (p["prefix_len"], p["hit_rate"]) == (1536, 0.5)
    assert p["expected_prefill_s"] == 0.5 * p["hit_prefill_s"] + 0.5 * p["miss_prefill_s"]
    assert p["hit_flops"] < p["expected_flops"] < p["miss_flops"]
    for argv, message in (
        (("--prefix-hit-rate", "0.5"), "--prefix-hit-rate needs --prefix-len"),
        (("--prefix-len", "2048"), "prefix-len=2048 must be at least 1 and below the prompt's 2048 tokens"),
        (("--prefix-len", "16", "--prefix-hit-rate", "2"), "prefix-hit-rate=2"),
    ):
        code, _out, err = run_cli(*BASE, *argv)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_speculative_cli() -> None:
    base = ("serve", "llama-3-70b", "--chip", "h100", "--chips", "8", "--prompt-len", "2048", "--gen-len", "256",
            "--batch", "4")  # fmt: skip
    code, out, err = run_cli(*base, "--draft", "llama-3-8b", "--draft-tokens", "3", "--accept-rate", "0.8", "--json")
    assert code == 0, err
    s = json.loads(out)["speculative"]
    assert (s["kind"], s["drafted_tokens"], s["accept_rate"]) == ("draft", 3, 0.8)
    assert s["tokens_per_step"] == pytest.approx(1 + 0.8 + 0.8**2 + 0.8**3)
    assert s["step_s"] == pytest.approx(s["verify_s"] + 3 * s["draft_step_s"])
    assert s["tpot_s"] == pytest.approx(s["step_s"] / s["tokens_per_step"])
    code, out, err = run_cli(*base, "--mtp", "1", "--accept-rate", "0.85", "--json")
    assert code == 0, err
    assert json.loads(out)["speculative"]["tokens_per_step"] == pytest.approx(1.85)
    for argv, message in (
        (("--accept-rate", "0.5"), "--draft-tokens and --accept-rate need --draft or --mtp"),
        (("--draft", "llama-3-8b", "--accept-rate", "0.5"), "--draft needs --draft-tokens K"),
        (("--mtp", "2"), "need --accept-rate A"),
        (("--mtp", "2", "--draft", "llama-3-8b", "--accept-rate", "0.5"), "give --draft or --mtp, not both"),
    ):
        code, _out, err = run_cli(*base, *argv)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_decode_chip_cli() -> None:
    base = ("serve", "llama-3-70b", "--chip", "h100", "--chips", "16", "--prompt-len", "2048", "--gen-len", "256",
            "--max-step-latency", "50ms")  # fmt: skip
    code, out, err = run_cli(*base, "--requests-per-s", "20", "--decode-chip", "h200", "--json")
    assert code == 0, err
    d = json.loads(out)["decode_chip_disaggregation"]
    assert (d["prefill_chip"], d["decode_chip"]) == ("h100", "h200")
    assert d["disaggregated_chips"] == d["prefill"]["chips"] + d["decode"]["chips"]
    code, out, err = run_cli(*base, "--requests-per-s", "20", "--decode-chip", "h200")
    assert code == 0 and "disaggregation with a decode chip at 20 req/s" in out
    code, _out, err = run_cli(*base, "--decode-chip", "h200")
    assert code == 2 and "--decode-chip needs --requests-per-s" in err
    code, _out, err = run_cli(*base, "--requests-per-s", "20", "--decode-chip", "h2000")
    assert code == 2 and "unknown chip 'h2000'" in err and len(err.strip().splitlines()) == 1, err
