"""One formula for a serving deployment's dollars (plan/compare.serving_cost): the serving goal's JSON and
``rooftop compare``'s serving-goal entries both print it."""

from __future__ import annotations

import pytest

from rooftop.plan.compare import serving_cost


def test_dollars_per_hour_and_per_million_tokens() -> None:
    """8 chips at $2.50 per chip-hour: $20 an hour; at 1,000 tokens/s an hour makes 3.6 M tokens, so
    $20 / 3.6 = $5.5556 per million."""
    usd_h, per_m = serving_cost(2.5, 8, 1000.0)
    assert usd_h == 20.0 and per_m == pytest.approx(20 / 3.6)
    assert serving_cost(None, 8, 1000.0) == (None, None)  # no price
    assert serving_cost(2.5, None, None) == (None, None)  # no deployment
    assert serving_cost(2.5, 8, 0.0) == (20.0, None)  # nothing served


def test_every_serving_price_is_the_one_conversion() -> None:
    """A serving point's input and output $ per million tokens and the disaggregation's are
    units.usd_per_million_tokens of the chips serving them: a point's output price is its replica's
    dollars over the tokens its decode steps make (batch / step time)."""
    from rooftop.cli.main import build_parser
    from rooftop.cli.serve import request_from_args
    from rooftop.plan.serve.sweep import plan_serving
    from rooftop.units import usd_per_million_tokens

    assert usd_per_million_tokens(3600.0, 1000.0) == pytest.approx(1000.0)  # $1 a second over 1,000 tokens a second
    args = build_parser().parse_args(["serve", "llama-3-8b", "--chip", "h100", "--chips", "8", "--prompt-len",
                                      "2048", "--gen-len", "256", "--price-per-chip-hour", "2.5"])  # fmt: skip
    plan = plan_serving(request_from_args(args))
    p = plan.points[0]
    usd_h = 2.5 * p.layout.chips_per_replica
    assert p.cost_output_usd_per_m == pytest.approx(usd_h / 3600 * p.step_time_s / p.batch * 1e6)
    assert p.cost_input_usd_per_m == pytest.approx(usd_h / 3600 * p.prefill_batch_s / (p.batch * 2048) * 1e6)
