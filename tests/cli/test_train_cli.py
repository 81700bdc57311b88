import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

BASE = [
    "train",
    "llama-3-70b",
    "--chip",
    "tpu-v5p",
    "--topology",
    "16x20x28",
    "--batch-tokens",
    "4M",
    "--seq-len",
    "4096",
]
LAYOUT_KEYS = {"dp", "fsdp", "tp", "pp", "ep", "cp", "microbatches", "remat", "zero_stage", "offload"}
RESULT_KEYS = {
    "parallelism",
    "step_time_s",
    "tokens_per_s",
    "mfu",
    "hfu",
    "memory_per_chip_bytes",
    "hbm_bytes",
    "fits",
    "bound",
    "breakdown",
}


def test_done_when_llama3_70b_on_v5p() -> None:
    code, out, err = run_cli(*BASE, "--tokens", "15T", "--json")
    assert code == 0, err
    d = json.loads(out)
    best = d["best"]
    assert RESULT_KEYS <= set(best) and LAYOUT_KEYS <= set(best["parallelism"])
    assert best["fits"] is True
    assert 0.35 <= best["mfu"] <= 0.6
    days = d["train_time_s"] / 86400
    assert 25 <= days <= 65, days  # the textbook analysis: one to two months
    assert d["chip_hours"] == pytest.approx(d["train_time_s"] * 8960 / 3600)
    assert d["cost_usd"] == pytest.approx(d["chip_hours"] * 4.20)
    assert all(RESULT_KEYS <= set(c) for c in d["candidates"])
    assert best["memory_per_chip_bytes"]["total"] <= best["hbm_bytes"]
    p = best["parallelism"]
    assert p["dp"] * p["fsdp"] * p["tp"] * p["pp"] * p["cp"] == 8960


def test_fix_pins_degrees() -> None:
    code, out, err = run_cli(*BASE, "--fix", "tp=16,remat=full", "--json")
    assert code == 0, err
    for c in json.loads(out)["candidates"]:
        assert c["parallelism"]["tp"] == 16 and c["parallelism"]["remat"] == "full"


def test_table_and_plot(tmp_path: Path) -> None:
    png = tmp_path / "t.png"
    code, out, err = run_cli(*BASE, "--plot", str(png))
    assert code == 0, err
    assert "Best layout" in out and png.stat().st_size > 10_000


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--fix", "tp=3"], "the pinned degrees multiply to 3, which does not divide the 8960 tpu-v5p chips"),
        (["--fix", "bogus=1"], "cannot pin 'bogus'"),
        (["--efficiency", "matrix=2"], "efficiency matrix=2.0 must be in"),
    ],
)
def test_bad_input(extra: list[str], message: str) -> None:
    code, _out, err = run_cli(*BASE, *extra)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_model_that_cannot_fit_is_a_result_not_an_error() -> None:
    """Not fitting is a result (design): the smallest layout, fits=false, and why."""
    code, out, err = run_cli(
        "train",
        "llama-3.1-405b",
        "--chip",
        "tpu-v5e",
        "--chips",
        "4",
        "--batch-tokens",
        "32k",
        "--seq-len",
        "4096",
        "--fix",
        "offload=none",
        "--json",
    )
    assert code == 0, err
    d = json.loads(out)
    assert d["best"]["fits"] is False
    assert d["best"]["memory_per_chip_bytes"]["total"] > d["best"]["usable_hbm_bytes"]
    assert any("does not fit" in line or "Nothing fits" in line for line in d["explanation"])


def test_the_optimizer_flag_changes_the_state_and_the_update() -> None:
    """SGD keeps no moments: less optimizer memory and a shorter update than Adam, same layout."""
    args = ["train", "llama-2-13b", "--chip", "h100", "--chips", "256", "--batch-tokens", "256Ki", "--seq-len", "4096"]
    args += ["--fix", "dp=16,fsdp=4,tp=4,microbatches=1", "--json"]
    adam = json.loads(run_cli(*args, "--optimizer", "adam")[1])
    sgd = json.loads(run_cli(*args, "--optimizer", "sgd")[1])
    assert (adam["optimizer"], sgd["optimizer"]) == ("adam", "sgd")
    a, s = adam["best"], sgd["best"]
    assert a["parallelism"] == s["parallelism"]
    # Adam keeps an fp32 master copy and 2 fp32 moments (12 B/param), SGD the master only (4 B/param)
    assert a["memory_per_chip_bytes"]["optimizer"] == pytest.approx(3 * s["memory_per_chip_bytes"]["optimizer"])
    assert s["breakdown_s"]["optimizer"] < a["breakdown_s"]["optimizer"]
