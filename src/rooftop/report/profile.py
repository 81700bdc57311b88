"""``rooftop profile``: every op of a profile next to its roofline, as JSON, tables and a picture."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason
from rooftop.report.opschart import Bar, Mark, OpsChart, finite, percent, scope_path, share
from rooftop.report.reasons import collective_text, note_texts, sharding_texts, why_text
from rooftop.report.table import say, table, words
from rooftop.units import format_bytes, format_duration, format_percent, format_rate, plural

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.analysis.compare import OpReport, ProfileReport
    from rooftop.hardware.chip import Chip


def profile_payload(report: ProfileReport, chip: Chip | None = None) -> dict[str, Any]:
    """``rooftop profile --json`` (``chip``: the one the report was priced on, the report's name when left out)."""
    from rooftop.analysis.coverage import coverage

    return {
        "source": report.source,
        "chip": chip.name if chip is not None else report.chip,
        "ops": [op_payload(o) for o in report.ops],
        "steps": [dataclasses.asdict(s) for s in report.steps],
        "overlap": report.overlap(),
        "mxu_utilization": report.mxu_utilization(),
        "priced_fraction": report.priced_fraction(),
        "categories": {k: dict(v) for k, v in report.categories.items()},
        "sharding": sharding_texts(report.sharding),
        "memory": dict(report.memory),
        "notes": note_texts(report.notes),
        "coverage": coverage(report).payload(),
        **({"device": dict(report.device)} if report.device is not None else {}),
    }


def op_payload(op: OpReport) -> dict[str, Any]:
    """One op of ``--json``: its fields (as ``dataclasses.asdict``, none nested) with its "why" written out."""
    row = {f.name: getattr(op, f.name) for f in dataclasses.fields(op)}
    row["why"] = why_text(op.why)
    row["collective"] = collective_text(op.collective)
    return row


_ORIGIN_CHARS = 60  # the widest "from" cell: the scope path is cut from the front, the innermost kept


def _origin(framework_op: str, source: str) -> str:
    """``layer0/attention/dot_general @ model.py:42``: the op's named scopes and primitive (JAX's
    transforms and the jitted function's name left out) and the file:line that made it."""
    from rooftop.analysis.categories import scopes_of

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
    library's order. An op of unknown cost ranks by its measured time (all of it may be lost): it sits
    where its time puts it, not below every priced op."""
    ops = sorted(report.ops, key=lambda o: (-(o.total_s if o.verdict == UNKNOWN else o.lost_s), -o.total_s, o.name))
    if all(o.verdict == UNKNOWN for o in ops):
        return ops, "ranked by measured time (no op has a roofline)"
    return ops, "ranked by time lost vs roofline (an op of unknown cost by its measured time)"


def _communication_line(report: ProfileReport, ov: dict[str, float]) -> str:
    """The steps' communication and its overlap, with the communication outside the steps when the parts
    table (every op, per device) counts more than the steps do: the two figures then agree in words."""
    line = (
        f"communication {format_duration(ov['comm_s'])}, {format_percent(ov['overlap_fraction'])} overlapped by compute"
    )
    total = float(report.categories.get("communication", {}).get("measured_s", 0.0))  # per device, as the steps'
    if total > ov["comm_s"] * 1.001 + 1e-12 and report.steps:
        per_device = f"{format_duration(total)} per device in all"
        return f"{line} inside the steps ({per_device}: the rest ran outside the steps' windows)"
    return line


def render_profile(console: Console, report: ProfileReport, chip: Chip, top: int) -> None:
    """The ``top`` ops (at least one) by time lost, or by measured time when no op has a roofline;
    steps, parts, overlap, memory and notes."""
    rows = []
    ops, ranking = ranked_ops(report)
    notes = note_texts(report.notes)
    covered = report.notes[:1] and isinstance(report.notes[0], Reason) and report.notes[0].code is ReasonCode.COVERAGE
    opening = notes[:1] if covered else []  # the report opens with its coverage
    for line in opening:
        say(console, line)
    for o in ops[: max(top, 1)]:
        eff = f"{format_percent(o.efficiency)}" if o.efficiency is not None else "-"
        mxu_op = f"{format_percent(o.mxu_utilization)}" if o.mxu_utilization is not None else "-"
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
                collective_text(o.collective) or "",
                _origin(o.framework_op, o.source),
                mxu_op,
            )
        )
    console.print(
        table(
            f"ops of {report.source} on {chip.name}, {ranking}",
            ["op", "runs", "measured", "roofline", "eff.", "bound", "verdict", "lost", "mesh axes", "from", "MXU"],
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
        say(console, f"{format_percent(priced)} of the measured op time has a roofline (the rest: ops of unknown cost)")
    mxu = report.mxu_utilization()
    if mxu["step"] is not None or mxu["op_time"] is not None:
        shown = ((mxu[k], w) for k, w in (("step", "step time"), ("op_time", "op time")))
        parts = [f"{format_percent(v, 1)} of the {w}" for v, w in shown if v is not None]
        say(console, f"MXU utilisation (matrix FLOPs / what the matrix units do at peak): {', '.join(parts)}")
    ov = report.overlap()
    say(console, _communication_line(report, ov))
    if report.memory.get("available"):
        memory: Any = report.memory
        peak, reserved = float(memory["peak_bytes"]), float(memory.get("peak_bytes_with_reserved") or 0)
        extra = f" ({format_bytes(reserved)} with the runtime's reserved stack)" if reserved > peak else ""
        say(console, f"peak memory {format_bytes(peak)}{extra}")
    for line in sharding_texts(report.sharding):
        say(console, f"sharding: {line}")
    for note in notes[len(opening) :]:
        say(console, f"note: {note}", style="dim")


# ---------------------------------------------------------------- the picture (--plot)

#: the colour of each verdict (analysis/compare.py), in the legend's order
VERDICT_COLOURS = {
    "near roofline": "#2ca02c",
    "memory-slow": "#ff7f0e",
    "compute-slow": "#d62728",
    "faster than roofline": "#9467bd",
    "exposed communication": "#8c564b",
    "slow hidden communication": "#e377c2",
    "latency-bound collective": "#bcbd22",
    "overlapped transfer": "#17becf",
    "no modelled cost": "#c7c7c7",
    UNKNOWN: "#000000",
}
#: the most bars the picture draws (--top sets how many, as for the table)
MAX_BARS = 20
#: the ops the picture leaves off the roofline, in the caption's words and order
LEFT_OUT = {
    "collective": ("collective", "collectives", "network time, in the bars"),
    "unknown": ("op of unknown cost", "ops of unknown cost", ""),
    "overlapped": ("overlapped transfer", "overlapped transfers", "only the wait at the done is measured"),
    "bookkeeping": ("bookkeeping op", "bookkeeping ops", "priced at zero"),
    "no bytes": ("op with FLOPs but no bytes", "ops with FLOPs but no bytes", ""),
}


def placement(o: OpReport) -> str:
    """Where the picture puts ``o``: "roofline" (FLOPs and bytes), "strip" (bytes, no FLOPs), or a key of
    LEFT_OUT saying why it is not placed."""
    from rooftop.analysis.intervals import is_collective

    if o.mesh_axes is not None or o.collective or is_collective(o.opcode or ""):
        return "collective"
    if o.verdict == "overlapped transfer":
        return "overlapped"
    if o.verdict == "no modelled cost":
        return "bookkeeping"
    if o.verdict == UNKNOWN or o.flops is None or o.bytes is None or o.lower_bound_s is None:
        return "unknown"
    if not o.measured_s > 0 or not (o.flops > 0 or o.bytes > 0):
        return "bookkeeping"
    if o.bytes <= 0:
        return "no bytes"
    return "roofline" if o.flops > 0 else "strip"


def _profile_ceilings(report: ProfileReport, chip: Chip) -> list[tuple[str, float]]:
    """The ceilings the ops were timed against: the matrix bf16 one, each (unit, dtype) whose peak a
    compute-bound op's roofline rate matches (its FLOPs / roofline time), and the vector unit's (in bf16
    when none matched)."""
    from rooftop.report.plot import ceilings

    wanted = [("matrix", "bf16")]
    for o in report.ops:
        if o.bound == "compute" and o.flops and o.lower_bound_s and placement(o) == "roofline":
            rate = o.flops / o.lower_bound_s
            for unit, table_ in (("matrix", chip.matrix_flops_per_s), ("vector", chip.vector_flops_per_s)):
                wanted += [(unit, d) for d, peak in table_.items() if finite(peak) and abs(rate / peak - 1) < 0.01]
    if not any(unit == "vector" for unit, _ in wanted):
        wanted.append(("vector", "bf16"))
    return ceilings(chip, dict.fromkeys(wanted))


def _spot_note(spot: Sequence[Mark]) -> str:
    lead, lost = spot[0], sum(m.lost_s for m in spot)
    parts = [f"{percent(lead.efficiency)} of roofline"] if lead.efficiency is not None else []
    if lost > 0:
        parts.append(f"{format_duration(lost)} lost" + (f" in {len(spot)}" if len(spot) > 1 else ""))
    return ", ".join(parts)


def profile_chart(report: ProfileReport, chip: Chip, top: int = 15) -> OpsChart:
    """The picture of ``report`` on ``chip`` (report/opschart.py): each op with FLOPs and bytes at its
    intensity and the FLOP/s it reached (FLOPs / measured time of one run), area its measured time,
    colour its verdict, the first spots by time lost labelled; the ops without FLOPs on a strip at the
    bytes/s they reached; the ``top`` ops (at most MAX_BARS) by time lost as bars, measured = roofline
    + lost. The title says how much of the measured op time the picture places, the caption what it
    leaves out."""
    from rooftop.report.plot import label

    ops, ranking = ranked_ops(report)
    where = {id(o): placement(o) for o in ops}
    total = sum(o.total_s for o in ops)
    marks, strip = [], []
    for o in ops:
        flops, nbytes = o.flops or 0.0, o.bytes or 0.0
        if where[id(o)] == "roofline" and finite(flops / nbytes, flops / o.measured_s, o.total_s):
            marks.append(Mark(o.name, o.verdict, flops / nbytes, flops / o.measured_s, o.total_s, o.lost_s,
                              o.efficiency))  # fmt: skip
        elif where[id(o)] == "strip" and finite(nbytes / o.measured_s, o.total_s):
            strip.append(Mark(o.name, o.verdict, nbytes / o.measured_s, 0.0, o.total_s, o.lost_s, o.efficiency))
    placed = sum(m.time_s for m in (*marks, *strip))
    unpriced = ranking.startswith("ranked by measured")
    chosen = [o for o in ops if unpriced or (o.verdict != UNKNOWN and o.lost_s > 0)][: min(max(top, 1), MAX_BARS)]
    bars = [Bar(o.name, o.verdict, o.total_s if unpriced else max(o.total_s - o.lost_s, 0.0),
                0.0 if unpriced else o.lost_s, _bar_text(o, unpriced), scope_path(o.framework_op))
            for o in chosen]  # fmt: skip
    devices = max((o.devices for o in ops), default=1)
    bars_title = (f"measured time per op, top {len(bars)} (no op has a roofline)" if unpriced
                  else f"time lost vs roofline: the top {len(bars)} ops")  # fmt: skip
    name = os.path.basename(report.source.rstrip("/\\")) or report.source
    return OpsChart(
        title=f"{label(name)} on {label(chip.name)}: the picture places {share(placed, total)} of the measured op "
        f"time ({len(marks) + len(strip)} of {plural(len(ops), 'op')})",
        chip=chip,
        ceilings=_profile_ceilings(report, chip),
        marks=marks,
        strip=strip,
        strip_lines=_strip_lines(report, chip, strip),
        strip_title=f"{plural(len(strip), 'op')} without FLOPs ({share(sum(m.time_s for m in strip), total)} of "
        "the op time) at the bytes/s they reached",
        bars=bars,
        colours=VERDICT_COLOURS,
        spot_note=_spot_note,
        y_label="FLOP/s reached (FLOPs / measured time of one run)",
        legend_title="verdict; area: measured time",
        bars_title=bars_title,
        bars_label="time over all runs" + (" and devices" if devices > 1 else ""),
        base_colour=None if unpriced else "#c7c7c7",
        base_words="roofline time",
        extra_words="lost",
        caption=_profile_caption(ops, where, total, unpriced),
    )


def _bar_text(o: OpReport, unpriced: bool) -> str:
    if unpriced:
        return format_duration(o.total_s)
    eff = f" ({percent(o.efficiency)} of roofline)" if o.efficiency is not None else ""
    return f"{format_duration(o.lost_s)} lost{eff}"


def _strip_lines(report: ProfileReport, chip: Chip, strip: Sequence[Mark]) -> list[tuple[str, float]]:
    """The HBM bandwidth, and the host link's when an op of the strip was timed on it."""
    lines = [(f"HBM {format_rate(chip.hbm_bytes_per_s)}", chip.hbm_bytes_per_s)]
    names = {m.name for m in strip}
    host = chip.host_bytes_per_s
    if host > 0 and any(o.name in names and o.bytes and o.lower_bound_s and abs(o.bytes / o.lower_bound_s / host - 1)
                        < 0.05 for o in report.ops):  # fmt: skip
        lines.append((f"host link {format_rate(host)}", host))
    return lines


def _profile_caption(ops: Sequence[OpReport], where: dict[int, str], total: float, unpriced: bool) -> list[str]:
    right = "the longest ops" if unpriced else "measured time = roofline time (grey) + time lost"
    lines = [
        "Left: the chip's roofline (dense peaks); each op at its FLOPs per byte read and written and the FLOP/s "
        "it reached (its FLOPs / its measured time per run), its area its measured time over all runs, its colour "
        f"its verdict. Right: {right}."
    ]
    left = []
    for key, (one, many, why) in LEFT_OUT.items():
        group = [o for o in ops if where[id(o)] == key]
        if group:
            time = share(sum(o.total_s for o in group), total)
            left.append(f"{plural(len(group), one, many)} ({time} of the op time{': ' + why if why else ''})")
    if left:
        lines.append("Not on the roofline: " + "; ".join(left) + ".")
    if ops and all(o.verdict == UNKNOWN for o in ops):
        lines.append("No op has a roofline: the trace came without the HLO of its modules (give --hlo, or profile "
                     "with JAX so the XPlane carries it).")  # fmt: skip
    return lines


def profile_figure(report: ProfileReport, chip: Chip, top: int = 15) -> Any:
    """The picture of ``rooftop profile --plot`` as a matplotlib Figure (``profile_chart``)."""
    from rooftop.report.opschart import ops_figure

    return ops_figure(profile_chart(report, chip, top))


def plot_profile(report: ProfileReport, chip: Chip, path: str, top: int = 15) -> None:
    """Write ``profile_figure`` to ``path`` (.png, .svg or .pdf), atomically."""
    from rooftop.report.plot import check_plot_path, save

    check_plot_path(path)
    fig = profile_figure(report, chip, top)
    try:
        save(fig, path)
    finally:
        fig.clear()
