"""``rooftop diff A B``: the payload, the tables and the HTML page of a :class:`ProfileDiff`."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from rooftop.report.reasons import note_texts
from rooftop.report.table import say, table
from rooftop.units import format_duration, format_percent, format_signed_percent, plural

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.analysis.diff import DiffRow, ProfileDiff, Side


def _side_dict(side: Side) -> dict[str, Any]:
    return {"source": side.source, "kind": side.kind, "chip": side.chip, "steps": side.steps, "step_s": side.step_s,
            "step_basis": side.step_basis, "roofline_s": side.roofline_s(), "ops": len(side.ops)}  # fmt: skip


def _share(delta: float, total: float) -> float | None:
    return delta / total if total else None


def diff_payload(diff: ProfileDiff) -> dict[str, Any]:
    """``rooftop diff --json``: both runs, the step and roofline deltas, the contributors and every row."""
    return {
        "kind": diff.kind,
        "a": _side_dict(diff.a),
        "b": _side_dict(diff.b),
        "step_delta_s": diff.step_delta_s,
        "roofline_delta_s": diff.roofline_delta_s,
        "unexplained_s": diff.unexplained_s(),
        "counts": diff.counts(),
        "contributors": [
            {
                "name": r.name,
                "status": r.status,
                "module": r.module,
                "delta_s": r.delta_s(diff.kind),
                "share": _share(r.delta_s(diff.kind), diff.step_delta_s),
            }
            for r in diff.contributors
        ],
        "rows": [dataclasses.asdict(r) | {"name": r.name} for r in diff.rows],
        "notes": note_texts(diff.notes),
    }


def _t(value: float | None) -> str:
    return "-" if value is None else format_duration(value)


def _signed(value: float | None) -> str:
    if value is None:
        return "?"
    if value == 0:
        return "0"
    return ("+" if value > 0 else "-") + format_duration(abs(value))


#: the widest shape a table cell shows (--json and --html have them whole)
_SHAPE_CHARS = 28


def _short(names: str | None) -> str:
    """``fusion.1 +3`` for the four ops of a row matched by framework op."""
    parts = (names or "").split(" + ")
    return parts[0] if len(parts) == 1 else f"{parts[0]} +{len(parts) - 1}"


def _names(r: DiffRow, short: bool = True) -> str:
    a, b = (_short(r.name_a), _short(r.name_b)) if short else (r.name_a or "", r.name_b or "")
    if r.name_a is not None and r.name_b is not None and r.name_a != r.name_b:
        return f"{a} -> {b}"
    return a or b


def _shape(r: DiffRow, width: int = 0) -> str:
    def cut(text: str) -> str:
        return text if not width or len(text) <= width else text[: width - 3] + "..."

    if r.shape_a and r.shape_b and r.shape_a != r.shape_b:
        return f"{cut(r.shape_a)} -> {cut(r.shape_b)}"
    return cut(r.shape_a or r.shape_b)


def summary_lines(diff: ProfileDiff) -> list[str]:
    """The step delta and what explains it, in words."""
    a, b = diff.a, diff.b
    what = {"steps": "mean step", "op time": "op time per device", "predicted": "predicted module time"}
    c = diff.counts()
    lines = [
        f"{what.get(a.step_basis, a.step_basis)}: A {_t(a.step_s)}, B {_t(b.step_s)}, delta "
        f"{_signed(diff.step_delta_s)}"
        + (f" ({format_signed_percent(diff.step_delta_s / a.step_s)})" if a.step_s else ""),
        f"roofline per step and device: A {_t(a.roofline_s())}, B {_t(b.roofline_s())}, delta "
        f"{_signed(diff.roofline_delta_s)}",
        f"{plural(c['removed'], 'op')} removed, {c['added']} added, {c['changed']} changed, {c['same']} the same",
    ]
    if diff.contributors:
        parts = []
        for r in diff.contributors[:5]:
            share = _share(r.delta_s(diff.kind), diff.step_delta_s)
            parts.append(f"{_names(r)} ({r.status}) {_signed(r.delta_s(diff.kind))}"
                         + (f" = {format_percent(share)}" if share is not None else ""))  # fmt: skip
        lines.append("largest contributors to the step delta: " + "; ".join(parts))
    if diff.kind == "profile":
        lines.append(f"outside the ops (idle, gaps between ops): {_signed(diff.unexplained_s())}")
    return lines


def render_diff(console: Console, diff: ProfileDiff, top: int) -> None:
    """The ``top`` rows by the size of their delta, then the summary and notes."""
    measured = diff.kind == "profile"
    rows = []
    for r in diff.rows[: max(top, 1)]:
        cells = [_names(r), r.status, r.match or "-", r.opcode or r.family, _shape(r, _SHAPE_CHARS)]
        if measured:
            cells += [_t(r.measured_a_s), _t(r.measured_b_s), _signed(r.delta_measured_s)]
        cells += [_t(r.roofline_a_s), _t(r.roofline_b_s), _signed(r.delta_roofline_s)]
        rows.append(cells)
    head = ["op", "status", "matched by", "opcode", "shape"]
    head += ["A", "B", "delta"] if measured else []
    head += ["roofline A", "roofline B", "delta roofline"]
    per = "per step and device" if measured else "predicted, per execution of the module"
    console.print(table(f"{diff.b.source} against {diff.a.source}: ops by the size of their delta ({per})", head,
                        rows))  # fmt: skip
    for line in summary_lines(diff):
        say(console, line)
    for note in note_texts(diff.notes):
        say(console, f"note: {note}", style="dim")


def diff_html(diff: ProfileDiff) -> str:
    """The diff's page: the summary, every row (sortable) and the notes."""
    from rooftop.report.html import esc, facts, page, sortable

    def d(v: float | None) -> tuple[object, Any]:
        return ("-" if v is None else format_duration(v), "" if v is None else v)

    def s(v: float | None) -> tuple[object, Any]:
        return (_signed(v), "" if v is None else v)

    title = f"{os.path.basename(diff.b.source.rstrip('/'))} against {os.path.basename(diff.a.source.rstrip('/'))}"
    body = [f"<h1>{esc(title)}</h1>", facts([("A", diff.a.source), ("B", diff.b.source), ("chip A", diff.a.chip),
                                            ("chip B", diff.b.chip)])]  # fmt: skip
    body += [f"<p>{esc(line)}</p>" for line in summary_lines(diff)]
    rows = [[(_names(r, short=False), _names(r)), (r.status, r.status), (r.match or "-", r.match),
             (r.opcode or r.family, r.opcode),
             (_shape(r), _shape(r)), d(r.measured_a_s), d(r.measured_b_s), s(r.delta_measured_s), d(r.roofline_a_s),
             d(r.roofline_b_s), s(r.delta_roofline_s)] for r in diff.rows]  # fmt: skip
    columns = ["op", "status", "matched by", "opcode", "shape", "A", "B", "delta", "roofline A", "roofline B",
               "delta roofline"]  # fmt: skip
    body += ["<h2>ops (per step and device; click a header to sort)</h2>", sortable(columns, rows, names=1)]
    body += [f'<p class="note">note: {esc(n)}</p>' for n in note_texts(diff.notes)]
    return page(title, body)
