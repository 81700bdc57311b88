"""``rooftop matmul --critical DIM`` and ``--sweep DIM=LO:HI --series ...``: the book's Part 1 and Part 2
questions about a matmul's batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

INT8 = ("X[B,D] @ W[D,F]", "--dims", "B=256,D=4096,F=16384", "--dtype", "int8", "--chip", "tpu-v5e@book")


def _json(*argv: str) -> dict:
    code, out, err = run_cli("matmul", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_part2_question4_critical_batch() -> None:
    """Part 2 Question 4: int8[B, 4096] x int8[4096, 16384] on a v5e (3.94e14 int8 OP/s, 8.1e11 B/s) is
    FLOPs-bound when (6.7e7 + 2e4 B) / 8.1e11 < 2 x 4096 x 16384 B / 3.94e14: B > 262.7 exactly (the book
    prints 271, having rounded 1.34e8 FLOPs per row down to 1.3e8); the approximation C / W (x 1 byte / 2)
    is Part 1's ~240."""
    c = _json(*INT8, "--critical", "B")["critical"]
    exact = (4096 * 16384 / 8.1e11) / (2 * 4096 * 16384 / 3.94e14 - (4096 + 16384) / 8.1e11)
    assert exact == pytest.approx(262.7, abs=0.1)
    assert c["size"] == 263 and abs(c["size"] / 271 - 1) < 0.04
    assert c["compute_s"] >= c["memory_s"]
    assert c["book_size"] == pytest.approx(3.94e14 / 8.1e11 / 2)  # 243: the book's "240"
    below = _json("X[B,D] @ W[D,F]", "--dims", "B=262,D=4096,F=16384", "--dtype", "int8", "--chip", "tpu-v5e@book")
    assert below["bound"] == "memory"


def test_critical_none_when_the_other_dims_are_small() -> None:
    c = _json("X[B,D] @ W[D,F]", "--dims", "B=8,D=8,F=8", "--chip", "tpu-v5e", "--critical", "B")["critical"]
    assert c["size"] is None


def test_sweep_lines_and_plot(tmp_path: Path) -> None:
    """Part 1's plot: FLOP/s against B for several (D, F): each line rises with B and stops at the peak; a
    small matmul reaches it later."""
    png = tmp_path / "sweep.png"
    d = _json("X[B,D] @ W[D,F]", "--dims", "B=1,D=4096,F=16384", "--chip", "tpu-v5e", "--sweep", "B=1:4096",
              "--series", "D=4096,F=16384;D=1024,F=1024", "--plot", str(png))  # fmt: skip
    sweep = d["sweep"]
    assert sweep["dim"] == "B" and [p["size"] for p in sweep["series"][0]["points"]] == [2**i for i in range(13)]
    for line in sweep["series"]:
        rates = [p["flops_per_s"] for p in line["points"]]
        assert rates == sorted(rates) and rates[-1] == pytest.approx(1.97e14)
        assert line["points"][0]["bound"] == "memory" and line["points"][-1]["bound"] == "compute"
    big, small = sweep["series"]
    assert small["points"][8]["flops_per_s"] < big["points"][8]["flops_per_s"]  # B = 256
    assert png.stat().st_size > 1000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--critical", "Q"], "'Q' is not a dim"),
        (["--sweep", "B=8"], "expected DIM=LO:HI"),
        (["--sweep", "B=64:8"], "below LO"),
        (["--series", "D=8"], "give --sweep"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv: list[str], message: str) -> None:
    code, _, err = run_cli("matmul", "X[B,D] @ W[D,F]", "--dims", "B=8,D=8,F=8", "--chip", "tpu-v5e", *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_part3_question5_search_finds_a_sharding_without_communication() -> None:
    """Part 3 Question 5: A[B, D] x W[D, F] on a v5p 4x4x4 at the lowest latency: shard B and F over the 64
    chips between them (A[B_X, D] x W[D, F_YZ] or alike) and no collective is needed: 2BDF / (64 C). Every
    sharding of the contracting dim D pays an all-reduce; the search ranks them below."""
    b, d_, f = 8192, 8192, 32768
    p = _json("A[B,D] @ W[D,F]", "--dims", f"B={b},D={d_},F={f}", "--chip", "tpu-v5p", "--topology", "4x4x4",
              "--mesh", "X=4,Y=4,Z=4", "--search")  # fmt: skip
    best = p["search"][0]
    assert best["collectives"] == [] and best["compute_s"] == pytest.approx(2 * b * d_ * f / 64 / 4.59e14)
    assert "D_" not in best["lhs"] + best["rhs"]
    assert p["strategy"] == best["strategy"] and p["operands"]["lhs"]["sharding"] == best["lhs"]
    times = [c["lower_bound_s"] for c in p["search"]]
    assert times == sorted(times) and len(times) == 10
    reduce = next(c for c in p["search"] if c["collectives"])
    assert reduce["collectives"][0]["kind"] == "all-reduce" and "D_" in reduce["lhs"] + reduce["rhs"]
