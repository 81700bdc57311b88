"""``rooftop profile``: every op of a profile next to its roofline, as JSON and tables."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from rooftop.report.table import say, table, words
from rooftop.units import format_bytes, format_duration

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.analysis.compare import OpReport, ProfileReport
    from rooftop.hardware.chip import Chip


def profile_payload(report: ProfileReport, chip: Chip) -> dict[str, Any]:
    """``rooftop profile --json``."""
    return {
        "source": report.source,
        "chip": chip.name,
        "ops": [dataclasses.asdict(o) for o in report.ops],
        "steps": [dataclasses.asdict(s) for s in report.steps],
        "overlap": report.overlap(),
        "categories": {k: dict(v) for k, v in report.categories.items()},
        "sharding": list(report.sharding),
        "memory": dict(report.memory),
        "notes": list(report.notes),
    }


#: the verdict of an op without a roofline (analysis/compare.py): its time lost is not known
UNKNOWN = "unknown cost"


def ranked_ops(report: ProfileReport) -> tuple[list[OpReport], str]:
    """The ops in the table's order and how they are ranked: by time lost vs roofline, ties by measured
    total time; by measured total time alone when no op has a roofline (a trace read without its
    HLO, where every op's time lost is 0 and the first order was alphabetical). --json keeps the
    library's order."""
    ops = sorted(report.ops, key=lambda o: (-o.lost_s, -o.total_s, o.name))
    if all(o.verdict == UNKNOWN for o in ops):
        return ops, "ranked by measured time (no op has a roofline)"
    return ops, "ranked by time lost vs roofline"


def render_profile(console: Console, report: ProfileReport, chip: Chip, top: int) -> None:
    """The ``top`` ops (at least one) by time lost, or by measured time when no op has a roofline;
    steps, parts, overlap, memory and notes."""
    rows = []
    ops, ranking = ranked_ops(report)
    for o in ops[: max(top, 1)]:
        eff = f"{o.efficiency:.0%}" if o.efficiency is not None else "-"
        lb = format_duration(o.lower_bound_s) if o.lower_bound_s is not None else "?"
        rows.append(
            (
                o.name,
                o.count,
                format_duration(o.measured_s),
                lb,
                eff,
                words(o.bound or "-"),
                o.verdict,
                "?" if o.verdict == UNKNOWN else format_duration(o.lost_s),
                o.collective or "",
            )
        )
    console.print(
        table(
            f"ops of {report.source} on {chip.name}, {ranking}",
            ["op", "runs", "measured", "roofline", "eff.", "bound", "verdict", "lost", "mesh axes"],
            rows,
        )
    )
    if report.steps:
        console.print(
            table(
                "steps (means over devices)",
                ["step", "duration", "busy", "comm", "overlapped", "idle"],
                [
                    (
                        s.index,
                        *(format_duration(v) for v in (s.duration_s, s.busy_s, s.comm_s, s.overlap_s, s.idle_s)),
                    )
                    for s in report.steps
                ],
            )
        )
    console.print(
        table(
            "where the time goes (per device)",
            ["part", "measured", "roofline"],
            [
                (words(k), format_duration(v["measured_s"]), format_duration(v["lower_bound_s"]))
                for k, v in report.categories.items()
            ],
        )
    )
    ov = report.overlap()
    say(console, f"communication {format_duration(ov['comm_s'])}, {ov['overlap_fraction']:.0%} overlapped by compute")
    if report.memory.get("available"):
        say(console, f"peak memory {format_bytes(float(report.memory['peak_bytes']))}")  # type: ignore[arg-type]
    for line in report.sharding:
        say(console, f"sharding: {line}")
    for note in report.notes:
        say(console, f"note: {note}", style="dim")
