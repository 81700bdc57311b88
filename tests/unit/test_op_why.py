"""An op's "why" is data (``OpReport.why``: reasons with their figures); report/ writes its words, and the
JSON's ``why`` string is what it was when the library wrote sentences."""

from __future__ import annotations

import json

import pytest

from rooftop.analysis.compare import Measured, Priced, Verdict, judge
from rooftop.cost.cost import Cost, Gemm
from rooftop.cost.roofline import Bound, roofline
from rooftop.hardware.catalog import get_chip
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason
from rooftop.report.profile import op_payload
from rooftop.report.reasons import sentence, why_text

M = N = K = 1000  # a 1000^3 bf16 matmul: compute-bound on an H100, its shape fills the matrix unit badly


def _priced() -> Priced:
    cost = Cost({("matrix", "bf16"): 2.0 * M * N * K}, 2.0 * 3 * M * K, gemm=Gemm(M, N, K))
    est = roofline(cost, get_chip("h100"))
    assert est.bound == Bound.COMPUTE and est.shape_efficiency is not None and est.shape_efficiency < 0.9
    return Priced(est, cost.flops, 2.0 * 3 * M * K)


def test_a_slow_op_says_how_far_from_its_roofline_as_figures() -> None:
    priced = _priced()
    assert priced.estimate is not None
    lower = priced.estimate.lower_bound_s
    op = judge("dot.1", "jit_f", "fusion", "mlp", Measured(2, 1, 2 * 4 * lower), priced, {})  # 4 x its bound
    assert op.verdict == Verdict.COMPUTE_SLOW
    reaches, shape = op.why
    assert isinstance(reaches, Reason) and reaches.code is ReasonCode.OP_BELOW_ROOFLINE
    assert reaches.figure("share") == pytest.approx(1 / 4) and reaches.figure("bound") == Bound.COMPUTE
    assert reaches == Reason.of(ReasonCode.OP_BELOW_ROOFLINE, bound=Bound.COMPUTE, share=reaches.figure("share"))
    assert shape == Reason.of(ReasonCode.OP_SHAPE_QUANTIZED, share=priced.estimate.shape_efficiency)
    text = why_text(op.why)
    used = f"{priced.estimate.shape_efficiency:.0%}"  # cost/gemm.py's figure for this shape (38%)
    assert (
        text
        == f"reaches 25% of its compute roofline; its shape uses {used} of the matrix unit (tile and wave quantization)"
    )
    row = op_payload(op)  # the JSON contract: one string, as before
    assert row["why"] == text and json.loads(json.dumps(row))["why"] == text


def test_a_near_roofline_op_keeps_the_leading_separator_of_its_shape_note() -> None:
    priced = _priced()
    assert priced.estimate is not None
    op = judge("dot.1", "jit_f", "fusion", "mlp", Measured(1, 1, priced.estimate.lower_bound_s / 0.9), priced, {})
    assert op.verdict == Verdict.NEAR_ROOFLINE
    assert op.why[0] == "" and isinstance(op.why[1], Reason)  # no verdict reason: an empty first part
    assert why_text(op.why).startswith("; its shape uses ")  # as `rooftop profile --json` printed it before


def test_an_op_without_a_cost_says_why_and_only_the_report_names_a_flag() -> None:
    no_hlo = Reason.of(ReasonCode.OP_NO_MODULE_HLO, module="jit_f")
    op = judge("fusion.3", "jit_f", None, "other", Measured(3, 1, 3e-3), Priced(None, unknown=no_hlo), {})
    assert (op.verdict, op.why, op.lower_bound_s) == (Verdict.UNKNOWN_COST, (no_hlo,), None)
    assert all("--" not in str(f) for _, f in no_hlo.figures)  # the library's figures name no flag
    assert sentence(no_hlo) == "no HLO for module 'jit_f' (the profile holds none; give --hlo)"
    bookkeeping = judge("tuple.1", "jit_f", "tuple", "other", Measured(1, 1, 1e-6), Priced(roofline(Cost(),
                        get_chip("h100"))), {})  # fmt: skip
    assert bookkeeping.verdict == Verdict.NO_MODELLED_COST
    assert why_text(bookkeeping.why) == "bookkeeping op the roofline prices at zero"
