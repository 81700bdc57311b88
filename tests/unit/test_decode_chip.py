"""Disaggregation with decode on another chip (plan/serve/disagg.py, ``split_chips``), by hand."""

from __future__ import annotations

import dataclasses
import math

import pytest

from rooftop.cli.main import build_parser
from rooftop.cli.serve import request_from_args
from rooftop.plan.serve.disagg import _transfer_s, split_chips
from rooftop.plan.serve.sweep import plan_serving

R, P, G = 20.0, 2048, 256


def _plan(chip: str, rate: bool):
    argv = f"serve llama-3-70b --chip {chip} --chips 16 --prompt-len {P} --gen-len {G} --max-step-latency 50ms"
    req = request_from_args(build_parser().parse_args([*argv.split(), "--requests-per-s", str(R)]))
    return plan_serving(req if rate else dataclasses.replace(req, requests_per_s=None))


def test_h100_prefill_h200_decode_by_hand() -> None:
    plan, dplan = _plan("h100", True), _plan("h200", False)
    d = split_chips(plan, dplan, R)
    assert plan.disaggregation is not None and d.prefill is not None and d.decode is not None and d.colocated
    # the prefill pool and the colocated alternative are the prefill chip's own
    assert d.prefill == plan.disaggregation.prefill and d.colocated == plan.disaggregation.colocated
    # the decode pool: the h200 point with step <= 50 ms needing the fewest chips for R x G tokens/s,
    # replicas = ceil(R x G x step / batch)
    best = min(
        (math.ceil(R * G * p.step_time_s / p.batch - 1e-9) * p.layout.chips_per_replica, p.step_time_s)
        for p in dplan.points
        if p.fits and p.step_time_s <= 0.050
    )
    assert (d.decode.chips, d.decode.time_per_output_token_s) == best
    # the KV transfer takes the slower of the two sides
    sides = (_transfer_s(plan, plan.points[d.prefill.point], d.kv_transfer_bytes),
             _transfer_s(dplan, dplan.points[d.decode.point], d.kv_transfer_bytes))  # fmt: skip
    assert d.kv_transfer_s == max(s for s in sides if s is not None)
    # dollars: input tokens at the h100 pool's price, output tokens at the h200 pool's
    h100, h200 = plan.request.price, dplan.request.price
    assert h100 is not None and h200 is not None
    cost = d.cost["disaggregated"]
    assert cost["input"] == pytest.approx(1e6 * h100 / 3600 * d.prefill.chips / (R * P))
    assert cost["output"] == pytest.approx(1e6 * h200 / 3600 * d.decode.chips / (R * G))
    split, alone = d.prefill.chips * h100 + d.decode.chips * h200, d.colocated.chips * h100
    assert d.recommendation == ("disaggregated" if split < alone else "colocated")
