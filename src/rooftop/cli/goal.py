"""Goals instead of slices: ``rooftop train ... --tokens N --max-days D / --max-cost USD`` and ``rooftop serve
... --requests-per-s R --max-ttft T --max-step-latency L``, each without ``--chips`` / ``--topology``
(plan/goal/). The options are shared by ``train``, ``serve`` and ``compare``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rooftop.cli.common import Output
from rooftop.errors import InvalidConfigError, shown

if TYPE_CHECKING:
    from rooftop.hardware.topology import Topology
    from rooftop.plan.goal.train import TrainGoal
    from rooftop.plan.serve.sweep import ServingRequest
    from rooftop.plan.train.step import TrainingSetup

#: the most days a goal may ask for (a century)
MAX_DAYS = 36_525


def add_goal(p: argparse.ArgumentParser) -> None:
    """``--max-days`` and ``--max-cost`` (training goals)."""
    p.add_argument(
        "--max-days",
        metavar="D",
        help="training goal: without --chips/--topology, the smallest valid slice that trains --tokens in D days",
    )
    p.add_argument(
        "--max-cost",
        metavar="USD",
        help="training goal: without --chips/--topology, the smallest valid slice whose run costs at most USD",
    )


def _positive(text: str | None, flag: str, hi: float) -> float | None:
    from rooftop.units import parse_number

    if text is None:
        return None
    value = parse_number(text)
    if not 0 < value <= hi:
        raise InvalidConfigError(f"{flag} {shown(text)} must be > 0 and at most {hi:g}")
    return float(value)


def goal_figures(args: argparse.Namespace, tokens: float | None) -> tuple[float | None, float | None, float]:
    """(--max-days, --max-cost, --tokens): at least one of the first two, and the tokens, given."""
    days = _positive(getattr(args, "max_days", None), "--max-days", MAX_DAYS)
    cost = _positive(getattr(args, "max_cost", None), "--max-cost", 1e15)
    if days is None and cost is None:
        raise InvalidConfigError("give --chips or --topology, or a goal: --max-days and/or --max-cost with --tokens")
    if tokens is None:
        raise InvalidConfigError("--max-days and --max-cost need --tokens (what the run trains on)")
    return days, cost, tokens


def train_goal_of(
    args: argparse.Namespace,
    setup_from_args: Callable[[argparse.Namespace, Topology | None], TrainingSetup],
    fix: dict[str, object],
    tokens: float | None,
    price: float | None,
) -> tuple[TrainGoal, TrainingSetup | None]:
    """The goal's answer, and the job's setup on the slice found (None when none meets it)."""
    from rooftop.hardware.catalog import get_chip
    from rooftop.hardware.slices import valid_slices
    from rooftop.hardware.topology import parse_topology
    from rooftop.plan.goal.train import train_goal

    days, cost, total = goal_figures(args, tokens)
    catalog_chip = get_chip(args.chip, getattr(args, "catalog", None))
    base = setup_from_args(args, valid_slices(catalog_chip)[0].topology(catalog_chip))
    chip = base.chip  # with --price applied
    price = chip.price_usd_per_hour if price is None else price
    goal = train_goal(chip, lambda topo: replace(base, topology=topo), total, days, cost, price, fix)
    found = goal.found
    return goal, (replace(base, topology=parse_topology(chip, found.topology)) if found else None)


def train_goal_output(
    args: argparse.Namespace,
    setup_from_args: Callable[[argparse.Namespace, Topology | None], TrainingSetup],
    fix: dict[str, object],
    tokens: float | None,
    price: float | None,
) -> Output:
    """``rooftop train`` with a goal: the plan on the slice found, with the ``goal`` object."""
    from rooftop.plan.train.plan import plan_training
    from rooftop.report import train as report
    from rooftop.report.energy import render_energy, train_energy, train_json
    from rooftop.report.goal import render_train_goal, train_goal_dict
    from rooftop.report.reasons import note_text

    goal, setup = train_goal_of(args, setup_from_args, fix, tokens, price)
    if setup is None:
        raise InvalidConfigError(note_text(goal.reason))
    plan = plan_training(setup, fix, args.objective, args.top, tokens, price)
    energy = train_energy(plan)

    def render(console: Any) -> None:
        report.render_train(console, plan)
        render_energy(console, energy, "tokens")
        render_train_goal(console, goal)

    payload = {**train_json(plan), "goal": train_goal_dict(goal)}
    out = Output(payload, render, [lambda path: report.plot_train(plan.ranked[0], path)])
    if getattr(args, "emit", None):
        from rooftop.cli.emit import train_text, with_emit

        return with_emit(out, args.emit, train_text(args.emit, args, plan))
    return out


def serve_goal_output(req: ServingRequest, args: argparse.Namespace | None = None) -> Output:
    """``rooftop serve`` with a goal: the fewest chips and their layout."""
    from rooftop.plan.goal.serve import serve_goal
    from rooftop.report.goal import render_serve_goal, serve_goal_payload
    from rooftop.report.reasons import note_text

    if req.max_ttft_s is None and req.max_step_latency_s is None:
        raise InvalidConfigError("give --chips or --topology, or a goal: --requests-per-s with --max-ttft and/or "
                                 "--max-step-latency")  # fmt: skip
    goal = serve_goal(req)
    if goal.best is None:
        raise InvalidConfigError(note_text(goal.reason))
    out = Output(serve_goal_payload(req, goal), lambda console: render_serve_goal(console, req, goal))
    if args is not None and getattr(args, "emit", None):
        from rooftop.cli.emit import serve_text, with_emit

        best = goal.best
        return with_emit(out, args.emit, serve_text(args.emit, args, req, best.layout, best.state.max_batch))
    return out
