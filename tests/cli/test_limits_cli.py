"""rooftop limits on the command line: the done-when job's JSON, a table run, bad input as one line."""

import json

import pytest

from tests.conftest import run_cli

DONE_WHEN = [
    "limits",
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


def _limit(payload: dict, name: str, axes: str = "") -> dict:
    return next(x for x in payload["limits"] if x["name"] == name and x["axes"] == axes)


def test_done_when_json_gives_765_with_its_formula() -> None:
    code, out, err = run_cli(*DONE_WHEN, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["schema_version"] == 1 and d["chips"] == 8960 and d["topology"] == "16x20x28"
    assert d["batch_sequences"] == 977 and d["batch_tokens"] == 977 * 4096
    fsdp = _limit(d, "fsdp_critical_tokens_per_chip", "X+Y+Z")
    assert fsdp["book_value"] == pytest.approx(765)  # 4.59e14 / (3 x 2 x 1e11): the book's 2550 / 3, catalog link
    assert fsdp["value"] == pytest.approx(8959 / 8960 * 765)
    assert fsdp["unit"] == "tokens/chip" and fsdp["met"] is False
    assert "C / W = 459 TFLOP/s / 600 GB/s = 765" in fsdp["book_formula"]
    assert "= 764.9" in fsdp["formula"] and "Part 5" in fsdp["source"]
    assert fsdp["figures"]["C"] == 4.59e14 and fsdp["figures"]["W"] == 6e11 and fsdp["figures"]["N"] == 8960
    axes = {a["name"]: a for a in d["axes"]}
    assert axes["X+Y+Z"]["gather_bytes_per_s"] == pytest.approx(6e11)
    assert [g["shape"] for g in axes["X+Y+Z"]["groups"]] == ["ring", "ring", "ring"]
    assert d["figures"]["link_bytes_per_s"]["value"] == 1e11 and d["figures"]["peak_flops_per_s"]["value"] == 4.59e14
    assert _limit(d, "tp_largest_degree")["value"] == 8
    # 70.6e9 params x 16 B over train's usable HBM, 95 GiB x 0.9: 12.4 -> 13 (12 at all 95 GiB); 1.55 -> 2
    train_min = _limit(d, "train_min_chips")
    assert train_min["figures"]["usable_hbm_bytes"] == 95 * 2**30 * 0.9
    assert train_min["value"] == 13 and _limit(d, "serve_min_chips")["value"] == 2
    assert {x["name"] for x in d["limits"]} == {
        "dp_critical_tokens_per_chip",
        "fsdp_critical_tokens_per_chip",
        "tp_max_degree",
        "tp_largest_degree",
        "fsdp_tp_min_tokens_per_chip",
        "fsdp_tp_optimal_fsdp",
        "fsdp_tp_best_split",
        "train_min_chips",
        "serve_min_chips",
    }


def test_table() -> None:
    code, out, err = run_cli(*DONE_WHEN)
    assert code == 0, err
    assert "FSDP critical tokens/chip" in out and "764.9" in out and "765" in out
    assert "largest TP on the topology" in out and "How to Scale Your Model" in out


def test_gpu_chips_and_moe_without_a_batch() -> None:
    code, out, err = run_cli("limits", "mixtral-8x7b", "--chip", "h100", "--chips", "64", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["topology"] == "8x8" and d["tokens_per_chip"] is None
    moe = _limit(d, "moe_critical_tokens_per_chip", "nvlink")
    assert moe["value"] == pytest.approx(4 * _limit(d, "fsdp_critical_tokens_per_chip", "nvlink")["value"])
    assert moe["job"] is None and moe["met"] is None
    assert _limit(d, "ep_largest_degree")["value"] == 8


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["limits", "llama-9", "--chip", "h100", "--chips", "8"], "unknown model"),
        (["limits", "llama-3-8b", "--chip", "h1000", "--chips", "8"], "unknown chip"),
        (["limits", "llama-3-8b", "--chip", "h100"], "one of the arguments --chips --topology is required"),
        (
            ["limits", "llama-3-8b", "--chip", "h100", "--chips", "8", "--batch-tokens", "1000", "--seq-len", "4096"],
            "less than one sequence of --seq-len 4,096",
        ),
        (["limits", "llama-3-8b", "--chip", "h100", "--chips", "8", "--batch-tokens", "4M"], "needs both"),
        (["limits", "llama-3-8b", "--chip", "h100", "--chips", "0"], "--chips"),
        (["limits", "llama-3-8b", "--chip", "tpu-v5p", "--topology", "3x3x3"], "not a whole number of 4-chip cube"),
        (["limits", "llama-3-8b", "--chip", "h100", "--chips", "8", "--efficiency", "network=2"], "network=2"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv: list[str], message: str) -> None:
    code, out, err = run_cli(*argv)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_min_chips_use_the_usable_hbm_that_train_and_serve_use() -> None:
    """`limits` said 12 chips hold a training state that `train`'s usable HBM (90%: memory_reserve 0.1)
    needs 13 for: both now divide by the same usable bytes."""
    import json
    import math

    from tests.conftest import run_cli

    code, out, err = run_cli("limits", "llama-3-70b", "--chip", "h100", "--chips", "64", "--json")
    assert code == 0, err
    lim = {x["name"]: x for x in json.loads(out)["limits"]}
    code, out, err = run_cli("train", "llama-3-70b", "--chip", "h100", "--chips", "64", "--batch-tokens", "1Mi",
                             "--seq-len", "4096", "--top", "1", "--json")  # fmt: skip
    assert code == 0, err
    usable = json.loads(out)["best"]["usable_hbm_bytes"]
    assert usable == 80 * 2**30 * 0.9
    for name in ("train_min_chips", "serve_min_chips"):
        figures = lim[name]["figures"]
        assert figures["usable_hbm_bytes"] == usable
        assert lim[name]["value"] == math.ceil(figures["bytes"] / usable)
    assert lim["train_min_chips"]["value"] == 15  # 70.6e9 params x 16 B / 72 GiB = 14.6 (it was 14 at 80 GiB)


def test_algorithm_by_name() -> None:
    """--algorithm ring prices the dp all-reduce of llama-3-8b's largest layer over 64 x 8 H100 as NCCL's ring:
    2 x 511 shards of V / 512 through a node's 8 NICs (4e11 B/s) + 8.4 us + 2 x 448 x 3.4 us + 2 x 63 x 14 us."""
    job = ["limits", "llama-3-8b", "--chip", "h100", "--topology", "64x8", "--json"]
    code, out, err = run_cli(*job, "--algorithm", "ring")
    assert code == 0, err
    d = json.loads(out)
    dp = _limit(d, "dp_critical_tokens_per_chip", "fabric+nvlink")["figures"]
    v = 2 * dp["layer_params"]
    ring = 2 * 511 * (v / 512) / (8 * 5e10) + 8.4e-6 + 2 * 448 * 3.4e-6 + 2 * 63 * 14e-6
    assert d["algorithm"] == "ring" and dp["comm_s"] == pytest.approx(ring)
    assert json.loads(run_cli(*job)[1])["algorithm"] == "hierarchical"
    code, _, err = run_cli(*job, "--algorithm", "nope")
    assert code == 2 and "valid: hierarchical, in-network, ring" in err
