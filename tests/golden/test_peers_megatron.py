"""The committed calculon / llm-analysis predictions for Megatron-LM 2021 Table 1
(benchmarks/results/peers-megatron-table1): same rows as the benchmark, and every error follows
from the recorded iteration time by the paper's FLOPs formula, as rooftop's does."""

import csv

import pytest

from benchmarks.accuracy_training import MEGATRON, PEERS, PEERS_CSV, peers_table
from rooftop.cost.efficiency import default_efficiency


def _rows() -> list[dict[str, str]]:
    with PEERS_CSV.open(newline="") as f:
        return list(csv.DictReader(f))


def test_rows_are_the_benchmarks_megatron_rows() -> None:
    rows = _rows()
    assert [(float(r["params_b"]), int(r["gpus"]), int(r["batch"])) for r in rows] == [
        (m[0], m[6], m[7]) for m in MEGATRON
    ]


def test_errors_follow_from_the_recorded_times() -> None:
    for r, m in zip(_rows(), MEGATRON, strict=True):
        _, _, h, layers, _, _, gpus, batch, _, published = m
        s, v = 2048, 51200
        flops = 96 * batch * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
        assert float(r["paper_flops"]) == pytest.approx(flops, rel=1e-6)
        for col, _ in PEERS:
            util = flops / (gpus * 312e12 * float(r[f"{col}_time_s"]))
            assert float(r[f"{col}_util"]) == pytest.approx(util, abs=1e-4)
            assert float(r[f"{col}_error"]) == pytest.approx(abs(util - published) / published, abs=1e-3)


def test_benchmark_prints_rooftop_beside_the_peers(capsys: pytest.CaptureFixture[str]) -> None:
    peers_table(default_efficiency("training"))
    lines = capsys.readouterr().out.splitlines()
    median = next(line for line in lines if line.startswith("median"))
    # calculon (a100_80e) median 12.4%, llm-analysis at flops_efficiency 1 median 76.6%: README there
    assert median.split()[-4:] == ["12.4%", "8.0%", "5.3%", "76.6%"]
