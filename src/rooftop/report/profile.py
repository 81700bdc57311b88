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
        "priced_fraction": report.priced_fraction(),
        "categories": {k: dict(v) for k, v in report.categories.items()},
        "sharding": list(report.sharding),
        "memory": dict(report.memory),
        "notes": list(report.notes),
    }


_ORIGIN_CHARS = 60  # the widest "from" cell: the scope path is cut from the front, the innermost kept


def _origin(framework_op: str, source: str) -> str:
    """``layer0/attention/dot_general @ model.py:42``: the op's named scopes and primitive (JAX's
    transforms and the jitted function's name left out) and the file:line that made it."""
    from rooftop.analysis.compare import scopes_of

    scopes = scopes_of(framework_op)
    path = "/".join([*reversed(scopes[:-1]), framework_op.rsplit("/", 1)[-1]]) if scopes else framework_op
    where = f" @ {source.rsplit('/', 1)[-1]}" if source else ""
    room = max(12, _ORIGIN_CHARS - len(where))
    return (path if len(path) <= room else "..." + path[-(room - 3) :]) + where


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
                _origin(o.framework_op, o.source),
            )
        )
    console.print(
        table(
            f"ops of {report.source} on {chip.name}, {ranking}",
            ["op", "runs", "measured", "roofline", "eff.", "bound", "verdict", "lost", "mesh axes", "from"],
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
    priced = report.priced_fraction()
    if priced is not None and priced < 1:
        say(console, f"{priced:.0%} of the measured op time has a roofline (the rest: ops of unknown cost)")
    ov = report.overlap()
    say(console, f"communication {format_duration(ov['comm_s'])}, {ov['overlap_fraction']:.0%} overlapped by compute")
    if report.memory.get("available"):
        memory: Any = report.memory
        peak, reserved = float(memory["peak_bytes"]), float(memory.get("peak_bytes_with_reserved") or 0)
        extra = f" ({format_bytes(reserved)} with the runtime's reserved stack)" if reserved > peak else ""
        say(console, f"peak memory {format_bytes(peak)}{extra}")
    for line in report.sharding:
        say(console, f"sharding: {line}")
    for note in report.notes:
        say(console, f"note: {note}", style="dim")
