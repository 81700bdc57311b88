"""Energy beside dollars in ``rooftop train`` and ``rooftop serve`` (plan/energy.py): the JSON object and a
line for the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rooftop.plan.energy import Energy, serving_energy, training_energy

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.plan.serve.sweep import ServingPlan
    from rooftop.plan.train.plan import TrainingPlan


def energy_dict(e: Energy) -> dict[str, Any]:
    return {
        "power_w_per_chip": e.power_w_per_chip,
        "power_source": e.power_source,
        "slice_kw": e.slice_kw,
        "kwh": e.kwh,
        "kwh_per_million_tokens": e.kwh_per_million_tokens,
    }


def train_energy(plan: TrainingPlan) -> Energy:
    t = plan.totals
    return training_energy(plan.setup.chip, plan.setup.chips, t.train_time_s, t.tokens)


def serve_energy(plan: ServingPlan) -> Energy:
    """At the chosen point under load when there is one, else at the chosen static point (output tokens)."""
    req = plan.request
    tokens_per_s = None
    batching = plan.batching
    if batching is not None and batching.chosen is not None:
        tokens_per_s = batching.layouts[batching.chosen][1].tokens_per_s
    elif plan.chosen is not None:
        tokens_per_s = plan.points[plan.chosen].tokens_per_s
    return serving_energy(req.chip, req.topology.num_chips, tokens_per_s)


def train_json(plan: TrainingPlan) -> dict[str, Any]:
    """What ``rooftop train --json`` writes: the plan's payload with its energy."""
    from rooftop.report.train import train_payload

    return {**train_payload(plan), "energy": energy_dict(train_energy(plan))}


def serve_json(plan: ServingPlan) -> dict[str, Any]:
    """What ``rooftop serve --json`` writes: the plan's payload with its energy."""
    from rooftop.report.serve import serve_payload

    return {**serve_payload(plan), "energy": energy_dict(serve_energy(plan))}


def energy_line(e: Energy, what: str) -> str:
    """One line: the slice's draw and the energy, with where the power figure comes from."""
    if e.power_w_per_chip is None:
        return f"energy: {e.power_source}"
    parts = [f"{e.slice_kw:,.1f} kW for the slice ({e.power_w_per_chip:,.0f} W per chip at board power)"]
    if e.kwh is not None:
        parts.append(f"{e.kwh:,.0f} kWh for the run")
    if e.kwh_per_million_tokens is not None:
        parts.append(f"{e.kwh_per_million_tokens:.3g} kWh per million {what}")
    return "energy: " + ", ".join(parts)


def render_energy(console: Console, e: Energy, what: str) -> None:
    console.print(energy_line(e, what), markup=False, highlight=False)
