"""The planner reproduces the rules of thumb of 'How to Scale Your Model' (Part 5, Training).

- pure FSDP/DP is compute-bound only above ~C / (W_bidir x n_axes) tokens per chip: the book
  gives 2550 / n_axes on TPU v5p with its 4.59e14 FLOP/s and 9e10 B/s links (1.8e11 both ways);
- tensor parallelism of degree Y stays compute-bound while Y < n_axes x F / 2550 (Part 5,
  "Tensor parallelism"): TP traffic grows with Y relative to the shrinking per-chip matmuls;
- mixing FSDP with TP lowers the per-chip batch at which training is compute-bound, so at
  small per-chip batches the search adds tensor parallelism.
"""

from typing import Any

import pytest

from rooftop.cost.efficiency import IDEAL, default_efficiency
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.plan.train.comm import CommPricer
from rooftop.plan.train.explain import critical_tokens_per_chip
from rooftop.plan.train.layout import Parallelism, validate
from rooftop.plan.train.search import search
from rooftop.plan.train.step import TrainingSetup, evaluate, layout_mesh

V5P = get_chip("tpu-v5p")
LLAMA70 = get_model("llama-3-70b")


def _setup(topo: str, batch: int, seq: int = 4096, ideal: bool = True) -> TrainingSetup:
    eff = IDEAL if ideal else default_efficiency("training")
    return TrainingSetup(LLAMA70, V5P, parse_topology(V5P, topo), batch, seq, eff)


def test_critical_tokens_per_chip_matches_the_book() -> None:
    crit, axes, _ = critical_tokens_per_chip(_setup("16x20x28", 1024))
    assert axes == 3
    n = 16 * 20 * 28  # the step keeps the exact (N-1)/N of its gathers
    assert crit == pytest.approx((n - 1) / n * 4.59e14 / (2 * V5P.link_bytes_per_s * 3), rel=1e-3)
    assert crit == pytest.approx(2550 / 3, rel=0.15)  # the book's figure with its 9e10 B/s links


def _tp_share(tp: int) -> float:
    """TP communication / compute for pure tensor parallelism over one 16-chip v5p axis."""
    setup = _setup(f"4x4x{tp}", batch=16 * tp)
    par = Parallelism(tp=tp, dp=setup.chips // tp, zero_stage=1, remat="full")
    validate(par, LLAMA70, setup.chips, setup.global_batch, setup.seq_len)
    r = evaluate(setup, par, CommPricer(layout_mesh(setup.topology, par), V5P, 1.0))
    return r.breakdown["tensor_parallel"] / r.compute_s


def test_tensor_parallel_limit() -> None:
    limit = 28672 * 2 * V5P.link_bytes_per_s / 4.59e14  # n_axes x F x W_bidir / C for one axis: ~12.5
    assert 8 < limit < 16
    assert _tp_share(4) < 0.5  # well under the limit: communication a fraction of compute
    assert _tp_share(16) > _tp_share(8) > _tp_share(4)  # grows with Y
    assert 0.5 < _tp_share(16) < 2  # around the limit, communication is about as long as compute


def test_search_adds_tensor_parallelism_at_small_per_chip_batch() -> None:
    big = search(_setup("4x4x8", batch=256, ideal=False), top=1).ranked[0]  # 8192 tokens per chip
    small = search(_setup("16x20x28", batch=1024, ideal=False), top=1).ranked[0]  # 468 tokens per chip
    assert big.parallelism.tp <= 2
    assert small.parallelism.tp >= 4


def _limits(*argv: str) -> dict[tuple[str, str], dict[str, Any]]:
    import json

    from tests.conftest import run_cli

    code, out, err = run_cli("limits", *argv, "--json")
    assert code == 0, err
    return {(x["name"], x["axes"]): x for x in json.loads(out)["limits"]}


def test_book_figures_with_the_books_chip() -> None:
    """Part 5: FSDP is bandwidth-bound below 2550 / n_axes tokens per chip on TPU v5p (C = 4.59e14, W_ici
    = 1.8e11 bidirectional per axis): with --chip tpu-v5p@book the book_value is the book's 850 on three
    axes, rooftop's value (N-1)/N of it; book_why names the 15/16 of one axis of 16."""
    lim = _limits("llama-3-70b", "--chip", "tpu-v5p@book", "--topology", "16x20x28")
    full = lim[("fsdp_critical_tokens_per_chip", "X+Y+Z")]
    assert full["book_value"] == pytest.approx(2550 / 3, rel=1e-3)
    n = 16 * 20 * 28
    assert full["value"] == pytest.approx((n - 1) / n * full["book_value"], rel=1e-4)
    assert full["book_why"] == ""  # 8959/8960: within 0.1%, the same figure
    one = lim[("fsdp_critical_tokens_per_chip", "X")]
    assert one["book_value"] == pytest.approx(2550, rel=1e-3) and "15/16" in one["book_why"]
    tp = lim[("tp_max_degree", "X")]
    assert tp["book_value"] == pytest.approx(8192 * 3.5 * 1.8e11 / 4.59e14, rel=1e-3)  # Y < F W / C, F = 28672
    assert tp["value"] == pytest.approx(1 + tp["book_value"]) and "(Y-1)/Y" in tp["book_why"]


def test_deepseek_fsdp_tp_minimum_is_explained() -> None:
    """The FSDP x TP minimum of DeepSeek-V3 on 2048 H100s is F_w / F = 526,336 / 18,432 = 28.6 times the
    book's dense-layer closed form: FSDP gathers every expert's weights, a token computes through k + shared."""
    lim = _limits("deepseek-v3", "--chip", "h100", "--chips", "2048")
    x = lim[("fsdp_tp_min_tokens_per_chip", "fabric x nvlink")]
    assert x["value"] / x["book_value"] == pytest.approx(x["figures"]["F_w"] / x["figures"]["F"])
    assert x["value"] / x["book_value"] == pytest.approx(526336 / 18432)  # 28.56: the "28x"
    assert "mixture-of-experts" in x["book_why"] and "28.6" in x["book_why"]
    assert lim[("train_min_chips", "")]["book_why"] == ""
