"""`rooftop serve`: the JSON contract (keys of points, frontier, chosen, disaggregation), the issue's
done criterion, errors as one line with exit code 2, the table and the plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

POINT_KEYS = {
    "batch",
    "parallelism",
    "ttft_s",
    "step_time_s",
    "tokens_per_s",
    "tokens_per_s_per_chip",
    "kv_cache_bytes",
    "memory_per_chip_bytes",
    "fits",
    "bound",
    "reason",
    "cost_per_million_tokens_usd",
    "breakdown",
}
BREAKDOWN_KEYS = {
    "weights_bytes",
    "kv_cache_bytes",
    "weights_s",
    "kv_cache_s",
    "compute_s",
    "collective_s",
    "collective_latency_s",
    "launch_s",
    "scheduling_s",
    "bandwidth_roofline_s",
    "time_s",
    "terms",
}
DONE = ("llama-3-70b", "--chip", "tpu-v5e", "--topology", "4x4", "--prompt-len", "2048", "--gen-len", "512")


def serve_json(*argv: str) -> dict:
    code, out, err = run_cli("serve", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def done() -> dict:
    return serve_json(*DONE)


def test_json_contract(done: dict) -> None:
    assert {"schema_version", "points", "frontier", "chosen", "layouts", "critical_batch", "efficiency"} <= set(done)
    assert "disaggregation" not in done
    for p in done["points"]:
        assert POINT_KEYS <= set(p)
        assert set(p["parallelism"]) == {"tp", "ep", "pp", "replicas", "kv_batch", "attn_dp"}
        assert BREAKDOWN_KEYS <= set(p["breakdown"])
        assert set(p["cost_per_million_tokens_usd"]) == {"input", "output"}
    assert all(done["points"][i]["fits"] for i in done["frontier"])
    assert done["chosen"] in done["frontier"]


def test_done_criterion(done: dict) -> None:
    first = done["points"][done["frontier"][0]]
    b = first["breakdown"]
    floor = (b["weights_bytes"] + b["kv_cache_bytes"]) / 8.19e11  # per chip, over v5e HBM bandwidth
    assert b["bandwidth_roofline_s"] == pytest.approx(floor)
    assert first["batch"] == 1 and floor <= first["step_time_s"] <= 2 * floor
    assert b["collective_s"] > 0 and b["launch_s"] > 0 and b["scheduling_s"] > 0  # overheads shown apart
    end = done["large_batch_end"]
    assert end["limit"] in ("memory_capacity", "compute") and end["reason"]
    assert "largest batch swept" in done["points"][done["frontier"][-1]]["reason"]


def test_targets_and_disaggregation() -> None:
    d = serve_json(*DONE, "--max-step-latency", "30ms", "--max-ttft", "1s", "--requests-per-s", "1")
    assert d["constraints"] == {"max_step_latency_s": 0.03, "max_ttft_s": 1.0}
    chosen = d["points"][d["chosen"]]  # under the load: the targets hold on TPOT and TTFT under it
    cb = d["continuous_batching"]
    assert cb["tpot_s"] <= 0.03 and cb["ttft_s"] <= 1.0
    assert chosen["parallelism"] == cb["layouts"][cb["chosen"]]["parallelism"]
    dis = d["disaggregation"]
    keys = {"prefill", "decode", "kv_transfer", "colocated", "recommendation", "cost_per_million_tokens_usd"}
    assert keys <= set(dis)
    assert dis["kv_transfer"]["bytes_per_request"] == 2048 * 327_680
    assert dis["kv_transfer"]["link_bytes_per_s_per_chip"] == 3.125e9
    assert dis["prefill"]["chips"] % 16 == 0


def _unpriced_h200(tmp_path: Path) -> str:
    """The catalog's h200 without its [price] table: a chip with no price."""
    import rooftop.catalog

    text = (Path(rooftop.catalog.__file__).parent / "chips" / "h200.toml").read_text()
    path = tmp_path / "h200-unpriced.toml"
    head, _, rest = text.partition("[price]\n")
    path.write_text(head + rest[rest.index("\n[") + 1 :])
    return str(path)


def test_quantized_and_price_override(tmp_path: Path) -> None:
    d = serve_json(
        "llama-3-8b",
        "--chip",
        _unpriced_h200(tmp_path),
        "--chips",
        "1",
        "--prompt-len",
        "1k",
        "--gen-len",
        "256",
        "--weight-dtype",
        "int4",
        "--kv-dtype",
        "fp8",
        "--batch",
        "16",
    )
    assert d["dtypes"] == {"weights": "int4", "kv_cache": "fp8", "activations": "bf16", "compute": "bf16"}
    assert d["points"][0]["cost_per_million_tokens_usd"] is None
    assert any("no catalog price" in n for n in d["notes"])
    priced = serve_json(
        "llama-3-8b",
        "--chip",
        "h200",
        "--chips",
        "1",
        "--prompt-len",
        "1k",
        "--gen-len",
        "256",
        "--batch",
        "16",
        "--price-per-chip-hour",
        "3.5",
    )
    assert priced["price_usd_per_chip_hour"] == 3.5
    assert priced["points"][0]["cost_per_million_tokens_usd"]["output"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--max-step-latency", "fast"), "cannot read duration 'fast'"),
        (("--max-ttft", "0s"), "--max-ttft '0s' must be > 0"),
        (("--batch", "2.5"), "--batch '2.5' must be a positive integer"),
        (("--efficiency", "hbm=2"), "hbm=2.0 must be in (0, 1]"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv: tuple[str, ...], message: str) -> None:
    code, out, err = run_cli("serve", *DONE, *argv)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1


def test_unknown_model_and_topology() -> None:
    code, _, err = run_cli("serve", "llama-9", "--chip", "h100", "--chips", "8", "--prompt-len", "8", "--gen-len", "8")
    assert code == 2 and "unknown model 'llama-9'" in err
    code, _, err = run_cli(
        "serve", "llama-3-8b", "--chip", "tpu-v5e", "--topology", "3x3", "--prompt-len", "8", "--gen-len", "8"
    )
    assert code == 2 and "not a power of two" in err


def test_table_and_plot(tmp_path: Path) -> None:
    png = tmp_path / "frontier.png"
    code, out, err = run_cli("serve", *DONE, "--max-step-latency", "25ms", "--requests-per-s", "2", "--plot", str(png))
    assert code == 0, err
    assert "frontier" in out and "chosen:" in out and "memory capacity" in out and "disaggregation" in out
    assert png.stat().st_size > 10_000


# ---------------------------------------------------------------- 4-bit weights, activations and KV cache

#: 70B on two 8-GPU H100 nodes (the issue's case for --fix tp=16)
CROSS = ("llama-3-70b", "--chip", "h100", "--chips", "16", "--prompt-len", "2048", "--gen-len", "256")
B200_70B = ("llama-3-70b", "--chip", "b200", "--chips", "8", "--prompt-len", "2048", "--gen-len", "256")


def test_fp4_weights_and_activations_and_int4_kv_on_b200() -> None:
    d = serve_json(*B200_70B, "--weight-dtype", "fp4", "--activation-dtype", "fp4", "--kv-dtype", "int4")
    assert d["dtypes"] == {"weights": "fp4", "kv_cache": "int4", "activations": "fp4", "compute": "fp4"}
    assert d["critical_batch"]["compute_dtype"] == "fp4" and "9 PFLOP/s" in d["critical_batch"]["formula"]
    assert d["chosen"] is not None and not any("matrix peak" in n for n in d["notes"])
    bf16 = serve_json(*B200_70B, "--batch", "1")
    fp4 = serve_json(*B200_70B, "--batch", "1", "--weight-dtype", "fp4", "--kv-dtype", "int4")
    for a, b in zip(bf16["layouts"], fp4["layouts"], strict=True):
        assert b["weights_per_chip_bytes"] == pytest.approx(a["weights_per_chip_bytes"] / 4, rel=1e-12)
    for a, b in zip(bf16["points"], fp4["points"], strict=True):
        assert b["memory"]["kv_cache_bytes"] == pytest.approx(a["memory"]["kv_cache_bytes"] / 4, rel=1e-12)
        assert b["step_time_s"] < a["step_time_s"]


def test_fp8_activations_on_b200() -> None:
    for weights, compute in (("bf16", "bf16"), ("fp8", "fp8")):
        d = serve_json(*B200_70B, "--activation-dtype", "fp8", "--weight-dtype", weights, "--batch", "64")
        assert d["dtypes"]["compute"] == compute and d["chosen"] is not None
        assert all(p["step_time_s"] > 0 for p in d["points"])


def test_a_chip_without_fp4_says_which_rate_it_used() -> None:
    d = serve_json(*CROSS, "--weight-dtype", "fp4", "--activation-dtype", "fp4", "--batch", "8")
    assert d["critical_batch"]["compute_dtype"] == "fp8"
    assert any(n.startswith("h100 has no fp4 matrix peak") and "fp8 peak" in n for n in d["notes"])


# ---------------------------------------------------------------- --fix, replicas across nodes


def test_fix_pins_one_replica_over_two_nodes() -> None:
    d = serve_json(*CROSS, "--fix", "tp=16")
    assert d["fix"] == {"tp": 16}
    assert {(p["parallelism"]["tp"], p["parallelism"]["replicas"]) for p in d["points"]} == {(16, 1)}
    assert d["chosen"] is not None
    # tp=16 with its KV heads copied twice, and the cache split over the batch the 16 / 8 = 2 ways instead
    assert [(s["parallelism"]["kv_batch"], s["scale_out_axes"]) for s in d["layouts"]] == [(1, ["tp"]), (2, ["tp"])]
    assert any(n.startswith("tp crosses NVLink domains in tp=16 x1 (over 2 domains") for n in d["notes"])
    comm = next(t for t in d["points"][0]["breakdown"]["terms"] if t["name"] == "collective all-reduce tp")
    assert "50 GB/s" in comm["formula"] and "450 GB/s" in comm["formula"]  # the fabric level and the NVLink level
    plain = serve_json(*CROSS, "--batch", "8")
    assert plain["fix"] == {} and all(s["scale_out_axes"] == [] for s in plain["layouts"])
    code, out, err = run_cli("serve", *CROSS, "--fix", "tp=16", "--batch", "1")
    assert code == 0, err
    assert "--fix tp=16" in out and "across the scale-out network" in out and "tp crosses NVLink domains" in out


@pytest.mark.parametrize(
    ("fix", "message"),
    [
        (("tp=3",), "--fix tp=3: tp=3 does not divide n_heads=64; valid: 1, 2, 4, 8"),
        (("tp=32",), "--fix tp=32: tp=32 chips per replica do not divide the slice's 16 chips"),
        (("pp=3",), "--fix pp=3: pp=3 does not divide n_layers=80"),
        (("ep=2",), "ep=2 needs a mixture-of-experts model; llama-3-70b is dense"),
        (("zz=1",), "--fix cannot pin 'zz' (valid: tp, pp, ep, attn_dp, kv_batch)"),
        (("tp",), "cannot read --fix 'tp': expected NAME=VALUE"),
        (("tp=8,tp=4",), "--fix pins 'tp' twice"),
        (("tp=-8",), "--fix tp '-8' must be in [1, 16777216]"),
        (("tp=two",), "--fix tp 'two' is not an integer"),
        (("pp=2", "--batch", "3"), "batch=3 does not split into the pinned pp=2 microbatches"),
    ],
)
def test_fix_errors_are_one_line_exit_2(fix: tuple[str, ...], message: str) -> None:
    code, out, err = run_cli("serve", *CROSS, "--fix", *fix)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1
