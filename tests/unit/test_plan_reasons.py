"""plan/ returns reasons as data: a goal's answer, a slice's trial note and a serving plan's notes are
Reasons (code and figures) whose sentences report/reasons.py writes, and a refused option is an OptionError
whose flag only the CLI spells (tests/unit/test_no_flags_below_cli.py keeps plan/ free of flags)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import replace

import pytest

import rooftop.plan.train.search as search_module
from rooftop.cli.flags import error_line
from rooftop.cost.efficiency import default_efficiency
from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.slices import valid_slices
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.plan.fix import FIX
from rooftop.plan.goal.serve import serve_goal
from rooftop.plan.goal.train import TrainGoal, train_goal
from rooftop.plan.serve.percentiles import latency_percentiles
from rooftop.plan.serve.sweep import ServingRequest, plan_serving
from rooftop.plan.train.search import parse_fix
from rooftop.plan.train.step import TrainingSetup
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Option, OptionError, Reason
from rooftop.report.reasons import note_text, note_texts, sentence

H100 = get_chip("h100")
L8 = get_model("llama-3-8b")


def _goal(tokens: float, max_days: float | None, max_cost: float | None, price: float | None = 2.0) -> TrainGoal:
    first = valid_slices(H100)[0].topology(H100)
    base = TrainingSetup(L8, H100, first, 256, 4096, default_efficiency("training"))  # 1M tokens a step
    return train_goal(H100, lambda topo: replace(base, topology=topo), tokens, max_days, max_cost, price)


def test_a_met_training_goal_is_a_reason_naming_the_slice_found_and_the_next_smaller() -> None:
    goal = _goal(1e12, 30, None)
    found, smaller = goal.found, goal.smaller
    assert found is not None and smaller is not None and found.days is not None and smaller.days is not None
    assert goal.reason == Reason.of(ReasonCode.GOAL_MET, found=found, smaller=smaller)
    assert found.days <= 30 < smaller.days  # the figures the sentence reads: the found slice meets, the next misses
    # GPUs: the topology is the count, so a slice is said as its chips
    assert sentence(goal.reason) == (
        f"{found.chips:,} chip{'s' if found.chips > 1 else ''} is the smallest valid slice that meets the goal; "
        f"the next smaller, {smaller.chips:,} chip{'s' if smaller.chips > 1 else ''}, misses it "
        f"({smaller.days:.3g} days)"
    )


def test_a_goal_over_budget_names_the_cost_and_the_budget_as_figures() -> None:
    goal = _goal(1e12, 30, 1000.0)
    assert goal.found is None and isinstance(goal.reason, Reason)
    assert goal.reason.code is ReasonCode.GOAL_OVER_BUDGET
    found = goal.reason.figure("found")
    assert goal.reason.figure("max_cost_usd") == 1000.0 and goal.reason.figure("max_days") == 30
    assert found.cost_usd > 1000.0  # type: ignore[attr-defined]
    assert note_text(goal.reason).startswith("the smallest slice meeting 30 days, ")
    assert note_text(goal.reason).endswith(f"costs ${found.cost_usd:,.0f} > $1,000")  # type: ignore[attr-defined]


def test_a_refused_slice_keeps_its_option_as_data_and_the_sentence_spells_the_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(search_module, "MAX_LAYOUTS", 5)  # every slice has more layouts than that
    goal = _goal(1e12, 30, None)
    refused = [t.note for t in goal.trials if isinstance(t.note, Reason) and t.note.code is ReasonCode.REFUSED]
    assert refused, [t.note for t in goal.trials]
    parts = refused[0].figure("parts")
    assert FIX in parts  # type: ignore[operator]
    assert "pin some degrees with --fix (e.g. --fix tp=8,pp=8)" in note_text(refused[0])


@pytest.mark.parametrize(
    ("call", "library", "cli"),
    [
        (lambda: parse_fix("tp=x"), "fix tp 'x' is not an integer", "--fix tp 'x' is not an integer"),
        (lambda: parse_fix("remat=bogus"), "fix remat='bogus' (valid:", "--fix remat='bogus' (valid:"),
        (lambda: _goal(1e12, None, None), "needs max_days or max_cost", "needs --max-days or --max-cost"),
        (lambda: _goal(1e12, None, 10.0, None), "max_cost needs a price", "--max-cost needs a price"),
    ],
)
def test_an_option_error_is_said_with_names_below_the_cli_and_flags_by_it(
    call: Callable[[], object], library: str, cli: str
) -> None:
    with pytest.raises(OptionError) as err:
        call()
    assert library in str(err.value) and "--" not in str(err.value)
    assert cli in error_line(err.value)


def test_a_serving_goal_without_a_rate_names_its_options() -> None:
    req = ServingRequest(L8, H100, parse_topology(H100, "8"), 512, 128, max_ttft_s=0.5)
    with pytest.raises(InvalidConfigError) as err:
        serve_goal(req)
    assert isinstance(err.value, OptionError)
    assert err.value.options == (Option("requests_per_s"), Option("max_ttft"), Option("max_step_latency"))
    assert error_line(err.value) == ("a serving goal needs --requests-per-s (and --max-ttft and/or --max-step-latency)")


def test_serving_notes_are_reasons_with_their_figures() -> None:
    chip = dataclasses.replace(H100, price_usd_per_hour=None)
    req = ServingRequest(L8, chip, parse_topology(chip, "1"), L8.max_seq_len, 128, batch=1)
    plan = plan_serving(req)
    over = Reason.of(ReasonCode.CONTEXT_OVER_MAX, tokens=L8.max_seq_len + 128, model=L8.name,
                     max_seq_len=L8.max_seq_len)  # fmt: skip
    assert over in plan.notes and Reason.of(ReasonCode.NO_PRICE, chip="h100") in plan.notes
    texts = note_texts(plan.notes)
    assert f"prompt + generation = {L8.max_seq_len + 128} tokens exceeds llama-3-8b's max_seq_len " \
        f"{L8.max_seq_len}; priced anyway" in texts  # fmt: skip


def test_a_tp_group_over_the_fabric_is_said_from_its_figures() -> None:
    """The crossing note's words come from its figures alone: seven layouts named past the six listed."""
    layouts = tuple((f"tp=16 x{n}", 2, 8) for n in range(1, 7))
    why = Reason.of(ReasonCode.TP_CROSSES_DOMAINS, layouts=layouts, more=1, split=False, all_reduces=2,
                    switched=True, dcn_bytes_per_s=50e9, scaleout_latency_s=5e-6, ici_bytes_per_s=450e9)  # fmt: skip
    listed = ", ".join(f"tp=16 x{n} (over 2 domains, 8 chips in each)" for n in range(1, 7))
    assert sentence(why) == (
        f"tp crosses NVLink domains in {listed} and 1 more layout: its 2 all-reduces per layer are priced "
        "hierarchically: reduce-scatter and all-gather over NVLink inside each, the all-reduce between them over "
        "the scale-out fabric (50 GB/s per chip and 5 us a hop, against 450 GB/s per chip over NVLink)"
    )


def test_an_error_quoting_a_reason_says_its_code_below_the_cli_and_its_sentence_through_it() -> None:
    plan = plan_serving(ServingRequest(L8, H100, parse_topology(H100, "1"), 2048, 256, requests_per_s=5000.0))
    assert plan.batching is not None and plan.batching.chosen is None
    saturated = plan.batching.reason
    assert isinstance(saturated, Reason) and saturated.code is ReasonCode.ALL_SATURATED
    most = saturated.figure("most")
    assert isinstance(most, float) and most < 5000.0  # 1 chip sustains far less than the rate asked
    with pytest.raises(OptionError) as err:
        latency_percentiles(plan)
    assert str(err.value) == "percentiles: no layout to simulate (all-saturated)"
    assert error_line(err.value) == (
        "--percentiles: no layout to simulate (every layout is saturated: the queue grows without bound; the most "
        f"any sustains is {most:.4g} requests/s (tp=1 x1))"
    )
