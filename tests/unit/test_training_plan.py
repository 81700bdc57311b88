"""plan/train/plan.py: the whole plan ``rooftop train`` prints, from one library call."""

from __future__ import annotations

import pytest

import rooftop
from rooftop.cost.efficiency import default_efficiency
from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.plan.train.plan import plan_training, totals_for
from rooftop.plan.train.step import TrainingSetup

H100 = get_chip("h100")


def _setup() -> TrainingSetup:
    return TrainingSetup(
        get_model("llama-3-8b"), H100, parse_topology(H100, "8x8"), 256, 4096, default_efficiency("training")
    )


def test_the_plan_holds_the_ranked_layouts_their_parts_and_the_totals() -> None:
    plan = rooftop.plan_training(_setup(), {"tp": 1}, top=3, tokens=1e12, price_usd_per_chip_hour=2.0)
    assert len(plan.ranked) == len(plan.parts) <= 3
    best = plan.ranked[0]
    assert best.parallelism.tp == 1
    assert sum(p.time_s for p in plan.parts[0]) == pytest.approx(best.step_time_s)
    assert plan.ideal.step_time_s <= best.step_time_s  # every factor 1 is never slower
    t = plan.totals
    assert t.train_time_s == pytest.approx(1e12 / best.tokens_per_s)
    assert t.chip_hours == pytest.approx(t.train_time_s * 64 / 3600)
    assert t.cost_usd == pytest.approx(t.chip_hours * 2.0)
    assert plan.explanation


def test_totals_without_tokens_are_null_and_the_price_defaults_to_the_catalog() -> None:
    plan = plan_training(_setup(), top=1)
    assert (plan.totals.tokens, plan.totals.train_time_s, plan.totals.cost_usd) == (None, None, None)
    assert plan.totals.price_usd_per_chip_hour == H100.price_usd_per_hour


def test_bad_totals_and_top_are_refused() -> None:
    plan = plan_training(_setup(), top=1)
    with pytest.raises(InvalidConfigError, match="price per chip-hour must be >= 0"):
        totals_for(plan.setup, plan.ranked[0], 1e9, -1.0)
    with pytest.raises(InvalidConfigError, match="tokens to train on must be > 0"):
        totals_for(plan.setup, plan.ranked[0], 0.0, None)
    with pytest.raises(InvalidConfigError, match="top must be >= 1"):
        plan_training(_setup(), top=0)


def test_a_layout_with_other_choices_is_the_layout_built_with_them() -> None:
    from dataclasses import replace

    from rooftop.plan.train.layout import Parallelism

    base = Parallelism(dp=4, fsdp=2, tp=8, pp=2, microbatches=8, virtual_stages=2)
    fast = base.with_choices("full", 1, "optimizer")
    slow = replace(base, remat="full", zero_stage=1, offload="optimizer")
    assert fast == slow and hash(fast) == hash(slow) and fast.label() == slow.label()
    assert base.remat == "none"  # the base is unchanged
