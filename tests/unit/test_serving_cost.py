"""One formula for a serving deployment's dollars (plan/compare.serving_cost): the serving goal's JSON and
``rooftop compare``'s serving-goal entries both print it."""

from __future__ import annotations

import json

import pytest

from rooftop.plan.compare import serving_cost
from tests.conftest import run_cli


def test_dollars_per_hour_and_per_million_tokens() -> None:
    """8 chips at $2.50 per chip-hour: $20 an hour; at 1,000 tokens/s an hour makes 3.6 M tokens, so
    $20 / 3.6 = $5.5556 per million."""
    usd_h, per_m = serving_cost(2.5, 8, 1000.0)
    assert usd_h == 20.0 and per_m == pytest.approx(20 / 3.6)
    assert serving_cost(None, 8, 1000.0) == (None, None)  # no price
    assert serving_cost(2.5, None, None) == (None, None)  # no deployment
    assert serving_cost(2.5, 8, 0.0) == (20.0, None)  # nothing served


def test_the_goal_and_compare_print_the_same_figure() -> None:
    goal = ("llama-3-8b", "--requests-per-s", "20", "--max-ttft", "2s", "--prompt-len", "1024", "--gen-len", "256")
    code, out, _ = run_cli("serve", *goal, "--chip", "h100", "--json")
    assert code == 0
    g = json.loads(out)["goal"]
    code, out, _ = run_cli("compare", *goal, "--chips-list", "h100", "--json")
    assert code == 0
    (entry,) = json.loads(out)["entries"]
    assert entry["usd_per_million_output_tokens"] == g["usd_per_million_output_tokens"]
    assert (
        g["usd_per_million_output_tokens"]
        == serving_cost(g["price_usd_per_chip_hour"], g["chips"], g["tokens_per_s"])[1]
    )
