"""Routed experts priced at the busiest expert and the busiest expert-parallel chip
(plan/serve/routing.py): DeepSeek-V3 (256 experts, top 8) decoding 8 and 256 sequences."""

from __future__ import annotations

import math

import pytest

from rooftop.cost.efficiency import default_efficiency
from rooftop.cost.figures import FlopsFigures
from rooftop.cost.roofline import figures_of
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, topology_for_chips
from rooftop.model.catalog import get_model
from rooftop.model.workload import Dtypes
from rooftop.plan.serve import routing
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.phase import decode_step


def _bound(n: int) -> float:
    return 1 - 2 ** (-1 / n)  # P(max of n <= x) = (1 - P(X > x))^n >= 1/2


def _tail(n: int, p: float, x: int) -> float:
    """P(Binomial(n, p) > x), summed term by term."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(x + 1, n + 1))


@pytest.mark.parametrize(("tokens", "rows"), [(8, 2), (256, 17)])
def test_the_busiest_expert_is_the_median_of_the_maximum(tokens: int, rows: int) -> None:
    """E = 256 experts each get Binomial(T, 8 / 256) rows; the busiest holds the smallest x with
    P(X > x) <= 1 - 2^(-1/256): 2 rows at T = 8 (mean 1.1 over the ~57 touched), 17 at T = 256 (mean 8)."""
    p = 8 / 256
    assert _tail(tokens, p, rows) <= _bound(256) < _tail(tokens, p, rows - 1)
    moe = get_model("deepseek-v3").moe
    assert moe is not None
    assert routing.busiest_rows(moe, tokens) == rows
    touched = 256 * (1 - (1 - 8 / 256) ** tokens)
    assert routing.mean_rows(moe, tokens) == pytest.approx(tokens * 8 / touched)


def test_the_busiest_chip_reads_more_experts_than_the_mean() -> None:
    """8 tokens touch ~57.4 experts, 7.2 per chip over ep = 8 on average; each chip's 32 experts
    are touched with q = 57.4 / 256, and the busiest of 8 chips reads 11 of them."""
    moe = get_model("deepseek-v3").moe
    assert moe is not None
    q = moe.touched(8) / 256
    assert _tail(32, q, 11) <= _bound(8) < _tail(32, q, 10)
    assert routing.busiest_chip_experts(moe, 8, 8) == 11
    assert routing.busiest_chip_experts(moe, 256, 8) == 32  # every expert touched: all 32 on every chip


@pytest.mark.parametrize("batch", [8, 256])
def test_a_deepseek_decode_step_prices_the_busiest_expert_and_chip(batch: int) -> None:
    cfg, chip = get_model("deepseek-v3"), get_chip("b200")
    topo = topology_for_chips(chip, 8)
    eff = default_efficiency("serving", "gpu")
    dt = Dtypes("fp8", "fp8", "fp8")
    steps = {}
    for ep in (1, 8):
        layout = ServingLayout(tp=8, ep=ep)
        steps[ep] = decode_step(cfg, chip, make_mesh(topo, layout.mesh_axes()), layout, batch, 2048, dt, eff)
    term = next(t for t in steps[8].terms if t.name.startswith("matmul"))
    routed = figures_of(term, FlopsFigures).routing
    assert routed is not None and routed.busiest_chip_experts is not None
    assert routed.expert_busiest_rows == routing.busiest_rows(cfg.moe, batch)
    assert routed.expert_busiest_rows > routed.expert_mean_rows
    assert routed.busiest_chip_experts >= routed.experts_touched / 8
    assert term.figure("busiest_chip_experts") == routed.busiest_chip_experts  # by name, nested figures too
    if batch == 8:  # 11 experts' weights on the busiest chip against 7.2 on average: a slower step
        assert steps[8].weights_bytes > steps[1].weights_bytes * 1.2
        assert steps[8].time_s > steps[1].time_s


def test_per_sequence_step_costs_are_terms() -> None:
    """The host work that grows with the batch is a term of its own: sequences x step_per_seq_s."""
    cfg, chip = get_model("deepseek-v3"), get_chip("b200")
    eff = default_efficiency("serving", "gpu")
    layout = ServingLayout(tp=8, ep=8)
    mesh = make_mesh(topology_for_chips(chip, 8), layout.mesh_axes())
    for batch in (8, 256):
        step = decode_step(cfg, chip, mesh, layout, batch, 2048, Dtypes("fp8", "fp8", "fp8"), eff)
        term = next(t for t in step.terms if t.name == "per-sequence host work")
        assert term.seconds == pytest.approx(batch * eff.step_per_seq_s)
        assert step.scheduling_s == pytest.approx(eff.step_s + batch * eff.step_per_seq_s)
