"""``rooftop profile P --idle``: idle time by cause, launch delays, critical paths and serving phases
(analysis/idle.py, analysis/phases.py): the payload and the tables."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from rooftop.report.reasons import note_texts
from rooftop.report.table import say, table
from rooftop.units import format_duration, format_percent

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.analysis.idle import IdleReport
    from rooftop.analysis.phases import PhaseReport


def idle_payload(idle: IdleReport, phases: PhaseReport) -> dict[str, Any]:
    """The ``idle`` key of ``rooftop profile --idle --json``."""
    return {
        "launch_gap_s": idle.launch_gap_s,
        "devices": [dataclasses.asdict(d) | {"idle_s": d.idle_s} for d in idle.devices],
        "streams": [dataclasses.asdict(s) | {"idle_s": s.idle_s} for s in idle.streams],
        "launch_delay": dataclasses.asdict(idle.launches),
        "critical_paths": [dataclasses.asdict(p) for p in idle.paths],
        "phases": [dataclasses.asdict(p) for p in phases.phases],
        "phase_annotations": len(phases.annotations),
        "unphased_kernels": phases.unassigned_kernels,
        "unphased_kernel_s": phases.unassigned_s,
        "notes": note_texts((*idle.notes, *phases.notes)),
    }


def _t(v: float | None) -> str:
    return "-" if v is None else format_duration(v)


def _share(part: float, whole: float) -> str:
    return format_percent(part / whole) if whole > 0 else "-"


def render_idle(console: Console, idle: IdleReport, phases: PhaseReport) -> None:
    """Device idle per step by cause, the streams' idle by cause, launch delays, critical paths, phases."""
    causes = list(idle.devices[0].by_cause) if idle.devices else []
    if idle.devices:
        console.print(table(
            "device idle per step, by cause (the step window less the union of its streams' kernels)",
            ["device", "step", "window", "busy", "idle", *causes],
            [(d.device, d.step, _t(d.window_s), _t(d.busy_s), f"{_t(d.idle_s)} ({_share(d.idle_s, d.window_s)})",
              *(_t(d.by_cause[c]) for c in causes)) for d in idle.devices],
        ))  # fmt: skip
    totals = idle.stream_totals()
    if totals:
        names = list(next(iter(totals.values())))
        console.print(table(
            "stream idle (gaps between a stream's kernels), every step, by cause",
            ["device", "stream", *names],
            [(d, s, *(_t(v[c]) for c in names)) for (d, s), v in sorted(totals.items())],
        ))  # fmt: skip
    ls = idle.launches
    if ls.kernels:
        say(console, f"launch delay (kernel start less its launch's start) over {ls.kernels:,} kernels: mean "
                     f"{_t(ls.mean_s)}, median {_t(ls.p50_s)}, p90 {_t(ls.p90_s)}, p99 {_t(ls.p99_s)}, max "
                     f"{_t(ls.max_s)}")  # fmt: skip
    for p in idle.paths:
        parts = ", ".join(f"{k} {_t(v)} ({_share(v, p.span_s)})" for k, v in p.by_part.items() if v > 0)
        say(console, f"critical path of {p.device} step {p.step}: {_t(p.span_s)} through {p.kernels} kernels: {parts}")
    if phases.phases:
        console.print(table(
            "serving phases (by the engine's step annotations)",
            ["phase", "steps", "requests", "tokens", "kernels", "kernel time", "span"],
            [(p.phase, p.steps, "-" if p.requests is None else p.requests, "-" if p.tokens is None else p.tokens,
              p.kernels, _t(p.kernel_s), _t(p.span_s)) for p in phases.phases],
        ))  # fmt: skip
    for note in note_texts((*idle.notes, *phases.notes)):
        say(console, f"note: {note}", style="dim")
