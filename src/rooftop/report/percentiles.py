"""``rooftop serve --percentiles``: latency percentiles of the simulated requests (plan/serve/percentiles.py),
the JSON object and the terminal's lines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rooftop.plan.serve.percentiles import QUANTILES, Percentiles
from rooftop.report.table import say
from rooftop.units import format_duration

if TYPE_CHECKING:
    from rich.console import Console

KEYS = tuple(f"p{round(q * 100)}" for q in QUANTILES)


def percentiles_dict(p: Percentiles) -> dict[str, Any]:
    return {
        "requests": p.requests,
        "measured": p.measured,
        "seed": p.seed,
        "ttft_s": dict(zip(KEYS, p.ttft_s, strict=True)),
        "tpot_s": dict(zip(KEYS, p.tpot_s, strict=True)),
        "e2e_s": dict(zip(KEYS, p.e2e_s, strict=True)),
    }


def render_percentiles(console: Console, p: Percentiles) -> None:
    say(
        console,
        f"latency percentiles ({p.measured} of {p.requests} simulated requests, the first arrivals left out as "
        f"warm-up; Poisson arrivals, seed {p.seed}; without the engine's fixed TTFT stages):",
    )
    for name, values in (("TTFT", p.ttft_s), ("TPOT", p.tpot_s), ("end-to-end", p.e2e_s)):
        say(console, f"  {name}: " + ", ".join(f"{k} {format_duration(v)}" for k, v in zip(KEYS, values, strict=True)))
