"""rooftop compare: one job on several slices, each entry the same answer its own command gives."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

TRAIN = ["--batch-tokens", "1M", "--seq-len", "4096"]
SERVE = ["--prompt-len", "512", "--gen-len", "128"]


def _json(*argv: str) -> dict:
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_training_entries_match_rooftop_train_and_price_each_slice() -> None:
    d = _json("compare", "llama-3-8b", "--chips-list", "h100:16,tpu-v5e:4x4,h200:16", *TRAIN, "--tokens", "1T")
    assert d["job"] == "train" and [e["chip"] for e in d["entries"]] == ["h100", "tpu-v5e", "h200"]
    for e in d["entries"]:
        where = ["--chips", "16"] if e["chip"] != "tpu-v5e" else ["--topology", "4x4"]
        alone = _json("train", "llama-3-8b", "--chip", e["chip"], *where, *TRAIN, "--tokens", "1T")
        assert e["step_time_s"] == pytest.approx(alone["best"]["step_time_s"])
        assert e["mfu"] == pytest.approx(alone["best"]["mfu"])
        assert e["layout"] == alone["best"]["parallelism"]["label"]
        assert e["train_time_s"] == pytest.approx(1e12 / alone["best"]["tokens_per_s"])
    h100, _, h200 = d["entries"]
    assert h100["cost_usd"] == pytest.approx(h100["train_time_s"] * 16 / 3600 * 2.99)  # Lambda's $2.99 per GPU-hour
    assert "Lambda" in h100["price_source"]
    assert h200["cost_usd"] == pytest.approx(h200["train_time_s"] * 16 / 3600 * 3.50)  # Mercatus AI, May 2026
    assert "Mercatus" in h200["price_source"]


def test_serving_entries_match_rooftop_serve() -> None:
    d = _json("compare", "llama-3-8b", "--chips-list", "h100:8,b200:8", *SERVE)
    assert d["job"] == "serve"
    for e in d["entries"]:
        alone = _json("serve", "llama-3-8b", "--chip", e["chip"], "--chips", "8", *SERVE)
        chosen = alone["points"][alone["chosen"]]  # "chosen" indexes "points"
        assert e["step_time_s"] == pytest.approx(chosen["step_time_s"])
        assert e["ttft_s"] == pytest.approx(chosen["ttft_s"])
    b200, h100 = d["entries"][1], d["entries"][0]
    assert b200["tokens_per_s_per_chip"] > h100["tokens_per_s_per_chip"]  # more HBM bandwidth, never slower


def test_table_names_every_price_source() -> None:
    code, out, err = run_cli("compare", "llama-3-8b", "--chips-list", "h100:8,h200:8", *SERVE, "--price", "h200=1.5")
    assert code == 0, err
    assert "price of h100: Lambda" in out and "price of h200: --price on the command line" in out


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--chips-list", "h100", *SERVE], ["must be CHIP:N or CHIP:TOPOLOGY"]),
        (["--chips-list", "h100:8", "--prompt-len", "512"], ["a job needs"]),
        (["--chips-list", "h100:8", *SERVE, *TRAIN], ["not both"]),
        (["--chips-list", "nochip:8", *SERVE], ["unknown chip 'nochip'"]),
        (["--chips-list", ",".join(["h100:8"] * 17), *SERVE], ["at most 16"]),
        (["--chips-list", "h100:8", *SERVE, "--tokens", "1T"], ["--tokens is a training option"]),
        (["--chips-list", "h100:x", *TRAIN], ["topology"]),
        (["--chips-list", "h100:8", *TRAIN, "--requests-per-s", "3"], ["--requests-per-s is a serving option"]),
        (["--chips-list", "h100:8,b200", *TRAIN, "--tokens", "1T", "--max-days", "3"], ["chip names alone"]),
        (["--chips-list", "tpu-7x:8192", *TRAIN], ["nearest valid slices", "2*16x16x16 (8,192)"]),
    ],
)
def test_bad_input_is_one_line(argv: list[str], words: list[str]) -> None:
    code, out, err = run_cli("compare", "llama-3-8b", *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert all(w in err for w in words), err
