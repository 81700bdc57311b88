"""``rooftop profile P --chip X --what-if Y``: the projection's payload and table (analysis/whatif.py)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from rooftop.report.reasons import note_texts
from rooftop.report.table import say, table, words
from rooftop.units import format_duration, format_percent

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.analysis.whatif import WhatIf


def whatif_payload(w: WhatIf) -> dict[str, Any]:
    """The ``what_if`` key of ``rooftop profile --json``."""
    return {
        "chip": w.chip_y,
        "measured_on": w.chip_x,
        "steps": w.steps,
        "step_basis": w.step_basis,
        "measured_step_s": w.measured_step_s,
        "projected_step_s": w.projected_step_s,
        "speedup": w.speedup,
        "ops_measured_s": w.ops_measured_s,
        "ops_projected_s": w.ops_projected_s,
        "by_method": w.by_method(),
        "ops": [dataclasses.asdict(o) for o in w.ops],
        "notes": note_texts(w.notes),
    }


def _t(value: float | None) -> str:
    return "-" if value is None else format_duration(value)


def render_whatif(console: Console, w: WhatIf, top: int) -> None:
    """The ``top`` ops by projected time, then the step measured on X beside the one projected on Y."""
    rows = []
    for o in w.ops[: max(top, 1)]:
        bound = words(o.bound_y or "-") + (f" (was {words(o.bound_x or '-')})" if o.bound_changed else "")
        eff = format_percent(o.efficiency) if o.efficiency is not None else "-"
        rows.append((o.name, _t(o.measured_s), _t(o.roofline_x_s), eff, _t(o.roofline_y_s), bound,
                     _t(o.projected_s), o.method, _t(o.total_projected_s)))  # fmt: skip
    console.print(
        table(
            f"what if on {w.chip_y}: ops measured on {w.chip_x}, projected (one execution; total per step and device)",
            ["op", "measured", f"roofline {w.chip_x}", "eff.", f"roofline {w.chip_y}", f"bound on {w.chip_y}",
             "projected", "by", "total projected"],
            rows,
        )
    )  # fmt: skip
    what = "mean step" if w.step_basis == "steps" else "op time per device"
    speed = f" ({w.speedup:.2f}x)" if w.speedup is not None else ""
    say(console, f"{what}: measured {_t(w.measured_step_s)} on {w.chip_x}, projected {_t(w.projected_step_s)} on "
                 f"{w.chip_y}{speed}; ops {_t(w.ops_measured_s)} -> {_t(w.ops_projected_s)}, the rest (idle, gaps) "
                 "kept as measured")  # fmt: skip
    by = w.by_method()
    say(console, f"projected by efficiency carried over {_t(by['efficiency'])}, at the roofline (faster than it on "
                 f"{w.chip_x}) {_t(by['roofline'])}, kept as measured (no roofline) {_t(by['measured'])}")  # fmt: skip
    for note in note_texts(w.notes):
        say(console, f"note: {note}", style="dim")
