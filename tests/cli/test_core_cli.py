"""The CLI contract of the foundation: JSON keys, exit codes, one-line errors, plots."""

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

MATMUL = ["matmul", "A[B,D] @ W[D,F]", "--dims", "B=4096,D=8192,F=8192", "--chip", "tpu-v5e"]
ESTIMATE_KEYS = {
    "flops",
    "hbm_bytes",
    "arithmetic_intensity",
    "critical_intensity",
    "compute_s",
    "memory_s",
    "lower_bound_s",
    "upper_bound_s",
    "bound",
    "schema_version",
}


def test_matmul_json_contract() -> None:
    code, out, err = run_cli(*MATMUL, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert ESTIMATE_KEYS <= set(d)
    assert d["bound"] == "compute"
    assert d["flops"] == 2 * 4096 * 8192 * 8192
    assert d["compute_s"] == pytest.approx(2 * 4096 * 8192 * 8192 / 197e12)


def test_matmul_mixed_dtypes() -> None:
    code, out, _ = run_cli(
        "matmul", "A[B,D] @ W[D,F]", "--dims", "B=8,D=4096,F=4096", "--chip", "h100", "--rhs-dtype", "int8", "--json"
    )
    d = json.loads(out)
    assert code == 0
    assert d["dtypes"] == {"lhs": "bf16", "rhs": "int8", "out": "bf16", "compute": "bf16"}
    assert d["hbm_bytes"] == 2 * 8 * 4096 + 4096 * 4096 + 2 * 8 * 4096
    assert d["bound"] == "memory"


def test_matmul_table_output() -> None:
    code, out, _ = run_cli(*MATMUL)
    assert code == 0
    assert "compute" in out and "197 TFLOP/s" in out


def test_roofline_generic_op() -> None:
    code, out, _ = run_cli(
        "roofline", "--chip", "h100", "--flops", "1e12", "--bytes", "1GB", "--unit", "vector", "--json"
    )
    d = json.loads(out)
    assert code == 0 and ESTIMATE_KEYS <= set(d)
    assert d["memory_s"] == pytest.approx(1e9 / 3.35e12, rel=0.01)


def test_chips_json_lists_every_chip_with_sources() -> None:
    code, out, _ = run_cli("chips", "--json")
    chips = json.loads(out)["chips"]
    assert code == 0 and len(chips) == 18  # 5 TPUs, 10 NVIDIA GPUs, 3 AMD GPUs
    assert all(c["sources"] and all(s["source"] for s in c["sources"].values()) for c in chips)


def test_show_one_chip() -> None:
    code, out, _ = run_cli("chips", "H100 SXM", "--json")
    assert code == 0 and json.loads(out)["chip"]["name"] == "h100"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["chips", "tpu-v9"], "unknown chip 'tpu-v9'; did you mean"),
        ([*MATMUL[:4], "--chip", "tpu-v9"], "unknown chip"),
        (["matmul", "A[B,D] @ W[D,F]", "--dims", "B=1,D=2", "--chip", "h100"], "no size for 'F'"),
        (["matmul", "A[B,D @ W[D,F]", "--dims", "B=1", "--chip", "h100"], "cannot read"),
        (["roofline", "--chip", "h100", "--flops", "lots", "--bytes", "1"], "cannot read number 'lots'"),
        (["matmul", "A[B,D] @ W[D,F]", "--dims", "B=1,D=2,F=3", "--chip", "h100", "--dtype", "bf61"], "unknown dtype"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv: list[str], message: str) -> None:
    code, out, err = run_cli(*argv)
    assert code == 2
    assert out == ""
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_plot_writes_png(tmp_path: Path) -> None:
    png = tmp_path / "roof.png"
    code, _, err = run_cli(*MATMUL, "--plot", str(png))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000


def test_bad_plot_path_writes_nothing(tmp_path: Path) -> None:
    code, _, err = run_cli(*MATMUL, "--plot", str(tmp_path / "roof.txt"))
    assert code == 2 and "must end in .png" in err
    assert not (tmp_path / "roof.txt").exists()


@pytest.mark.parametrize(
    "argv",
    [[], ["matmul"], ["roofline", "--chip", "h100", "--flops", "1", "--bytes", "1", "--unit", "tensor"], ["nosuch"]],
)
def test_usage_errors_are_one_line_exit_2(argv: list[str]) -> None:
    code, out, err = run_cli(*argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "error:" in err and "--help" in err
