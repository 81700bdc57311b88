"""Plans from a goal (plan/goal/): the JSON ``goal`` object and the terminal lines of ``rooftop train
--max-days/--max-cost`` and ``rooftop serve --requests-per-s ... --max-ttft/--max-step-latency`` without
``--chips``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rooftop.plan.compare import serving_cost
from rooftop.plan.energy import serving_energy
from rooftop.report.energy import energy_dict, render_energy
from rooftop.report.reasons import note_text
from rooftop.report.serve import stage_dict

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.plan.goal.serve import ReplicaCount, ServeGoal
    from rooftop.plan.goal.train import TrainGoal, Trial
    from rooftop.plan.serve.sweep import ServingRequest


def trial_dict(t: Trial) -> dict[str, Any]:
    return {"chips": t.chips, "topology": t.topology, "layout": t.layout, "days": t.days, "cost_usd": t.cost_usd,
            "meets": t.meets, "note": note_text(t.note), "step_time_s": t.step_time_s, "mfu": t.mfu}  # fmt: skip


def train_goal_dict(g: TrainGoal) -> dict[str, Any]:
    """``goal`` of ``rooftop train --max-days/--max-cost --json``."""
    f = g.found
    return {
        "max_days": g.max_days,
        "max_cost_usd": g.max_cost_usd,
        "tokens": g.tokens,
        "met": f is not None,
        "reason": note_text(g.reason),
        "chips": f.chips if f else None,
        "topology": f.topology if f else None,
        "layout": f.layout if f else None,
        "days": f.days if f else None,
        "cost_usd": f.cost_usd if f else None,
        "next_smaller": trial_dict(g.smaller) if g.smaller is not None else None,
        "tried": [trial_dict(t) for t in g.trials],
    }


def render_train_goal(console: Console, g: TrainGoal) -> None:
    console.print(f"goal: {note_text(g.reason)} ({len(g.trials)} slices searched)", markup=False, highlight=False)


def count_why(r: ReplicaCount, g: ServeGoal) -> str:
    """Why ``r`` misses ``g``'s targets, or its TPOT and TTFT when it meets them."""
    s = r.state
    if r.missed == "saturated":
        return note_text(s.reason)
    if r.missed == "tpot":
        return f"TPOT {(s.tpot_s or math.inf) * 1e3:.3g} ms > {(g.max_step_latency_s or 0) * 1e3:.3g} ms"
    if r.missed == "ttft":
        return f"TTFT {s.ttft_s or math.inf:.3g} s > {g.max_ttft_s or 0:.3g} s"
    return f"TPOT {(s.tpot_s or 0) * 1e3:.3g} ms, TTFT {s.ttft_s or 0:.3g} s"


def serve_goal_reason(g: ServeGoal) -> str:
    """The goal's answer in a line: the layout found and why the next smaller valid count misses, or why none
    meets it."""
    best = g.best
    if best is None:
        return note_text(g.reason)
    chips = best.layout.chips
    why = f"{best.layout.label()} on {chips:,} chip{'s' if chips > 1 else ''}: {count_why(best, g)}"
    if g.fewer is not None:
        n = g.fewer.layout.replicas
        why += f"; with {n} replica{'s' if n > 1 else ''}: {count_why(g.fewer, g)}"
    return why


def _count_dict(r: ReplicaCount, g: ServeGoal) -> dict[str, Any]:
    s = r.state
    return {"replicas": r.layout.replicas, "chips": r.layout.chips, "chips_per_replica": r.layout.chips_per_replica,
            "label": r.layout.label(), "meets": r.meets, "saturated": s.saturated, "tpot_s": s.tpot_s,
            "ttft_s": s.ttft_s, "reason": count_why(r, g)}  # fmt: skip


def serve_goal_payload(req: ServingRequest, g: ServeGoal) -> dict[str, Any]:
    """``rooftop serve --requests-per-s R --max-ttft T --max-step-latency L --json`` without --chips."""
    b = g.best
    s = b.state if b is not None else None
    chips = b.layout.chips if b is not None else None
    tokens = s.tokens_per_s if s is not None else None
    price = req.price
    usd_h, per_m = serving_cost(price, chips, tokens)
    energy = serving_energy(req.chip, chips or 0, tokens)
    goal = {
        "requests_per_s": g.requests_per_s,
        "max_ttft_s": g.max_ttft_s,
        "max_step_latency_s": g.max_step_latency_s,
        "met": b is not None,
        "reason": serve_goal_reason(g),
        "chips": chips,
        "replicas": b.layout.replicas if b else None,
        "chips_per_replica": b.layout.chips_per_replica if b else None,
        "layout": b.layout.as_dict() if b else None,
        "label": b.layout.label() if b else None,
        "tpot_s": s.tpot_s if s else None,
        "ttft_s": s.ttft_s if s else None,
        "queue_s": s.queue_s if s else None,
        "ttft_stages": [stage_dict(x) for x in s.ttft_stages] if s else [],
        "capacity_requests_per_s": s.capacity_requests_per_s if s else None,
        "tokens_per_s": tokens,
        "price_usd_per_chip_hour": price,
        "cost_usd_per_hour": usd_h,
        "usd_per_million_output_tokens": per_m,
        "base_topology": g.base_topology,
        "one_replica_fewer": _count_dict(g.fewer, g) if g.fewer is not None else None,
        "replica_step": b.layout.replicas - g.fewer.layout.replicas if b and g.fewer else None,
        "layouts": [_count_dict(r, g) for r in g.layouts],
    }
    return {"schema_version": 1, "model": req.cfg.name, "chip": req.chip.name, "prompt_len": req.prompt_len,
            "gen_len": req.gen_len, "engine": req.engine_name, "goal": goal, "energy": energy_dict(energy)}  # fmt: skip


def render_serve_goal(console: Console, req: ServingRequest, g: ServeGoal) -> None:
    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False)

    say(f"{req.cfg.name} on {req.chip.name}: {g.requests_per_s:g} requests/s of {req.prompt_len}+{req.gen_len} tokens")
    say(f"goal: {serve_goal_reason(g)}")
    for r in g.layouts:
        say(f"  {r.layout.label():<24} {r.layout.chips:>7,} chips  {count_why(r, g)}")
    if g.best is not None:
        render_energy(
            console, serving_energy(req.chip, g.best.layout.chips, g.best.state.tokens_per_s), "output tokens"
        )
