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
