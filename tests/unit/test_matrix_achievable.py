"""The chip's achievable matrix peak (chip files' ``[matrix_achievable]``, the efficiency switch
``matrix_achievable``): where it applies, what it leaves alone, and the figures it rests on."""

from __future__ import annotations

import pytest

from rooftop.cost.cost import Cost
from rooftop.cost.efficiency import IDEAL, default_efficiency
from rooftop.cost.figures import FlopsFigures
from rooftop.cost.roofline import compute_terms, figures_of, flop_rate
from rooftop.hardware.catalog import get_chip
from rooftop.report.formulas import term_formula as formula

H100, A100, V5E, V6E = (get_chip(n) for n in ("h100", "a100", "tpu-v5e", "tpu-v6e"))


def test_published_figures() -> None:
    # measured / datasheet, bf16 (docs/chips.md): 794.5 / 989, 271.2 / 312, 1.818e14 / 1.97e14
    assert H100.achievable_fraction("bf16") == pytest.approx(794.5 / 989, abs=5e-4)
    assert H100.achievable_fraction("fp8") == pytest.approx(1402.6 / 1979, abs=5e-4)
    assert A100.achievable_fraction("bf16") == pytest.approx(271.2 / 312, abs=5e-4)
    assert V5E.achievable_fraction("bf16") == pytest.approx(1.818e14 / 1.97e14, abs=5e-4)
    assert V6E.achievable_fraction("bf16") == 1.0  # no measurement: the datasheet
    assert V6E.achievable_fraction("int8") == 1.0  # a chip without figures: the datasheet
    assert get_chip("b200").achievable_fraction("fp4") == get_chip("b200").achievable_fraction("fp8")  # ESTIMATE
    assert get_chip("b200").achievable_fraction("fp32") == 1.0  # a dtype without a figure: the datasheet


@pytest.mark.parametrize("chip", [H100, A100, V5E, V6E])
def test_the_switch_caps_the_matrix_rate_and_nothing_else(chip) -> None:
    on = IDEAL.replace(matrix=0.9, matrix_achievable=1)
    off = IDEAL.replace(matrix=0.9)
    used, peak, rate_on = flop_rate(chip, "matrix", "bf16", on)
    assert rate_on == pytest.approx(peak * 0.9 * chip.achievable_fraction(used), rel=1e-12)
    assert flop_rate(chip, "matrix", "bf16", off)[2] == pytest.approx(peak * 0.9, rel=1e-12)
    assert rate_on <= flop_rate(chip, "matrix", "bf16", off)[2]  # a ceiling never speeds anything up
    assert flop_rate(chip, "vector", "bf16", on)[2] == flop_rate(chip, "vector", "bf16", off)[2]
    assert flop_rate(chip, "matrix", "bf16", IDEAL)[2] == peak  # the pure roofline stays the datasheet


def test_the_term_says_which_ceiling_it_used() -> None:
    cost = Cost({("matrix", "bf16"): 2e15}, 0.0)
    (term,) = compute_terms(cost, H100, IDEAL.replace(matrix=0.87, matrix_achievable=1))
    assert figures_of(term, FlopsFigures).achievable_fraction == H100.achievable_fraction("bf16")
    assert term.seconds == pytest.approx(2e15 / (9.895e14 * 0.87 * 0.803), rel=1e-12)
    assert "x 0.803" in formula(term) and "measured share of bf16 peak on h100" in formula(term)
    (plain,) = compute_terms(cost, H100, IDEAL)
    assert figures_of(plain, FlopsFigures).achievable_fraction is None  # recorded only when it is not 1
    assert plain.seconds == pytest.approx(2e15 / 9.895e14)


def test_both_planners_use_it() -> None:
    serving = default_efficiency("serving", "gpu")
    for eff in (default_efficiency("training"), serving, default_efficiency("serving", "tpu")):
        assert eff.matrix_achievable == 1 and "matrix_achievable" in eff.sources
    # serving's matrix re-expressed on the ceiling: 0.60 of an H100's bf16 datasheet peak, as before
    assert serving.matrix * H100.achievable_fraction("bf16") == pytest.approx(0.60, abs=3e-3)
