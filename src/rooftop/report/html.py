"""One self-contained HTML file per report: ``rooftop profile --html FILE`` and ``rooftop train --html FILE``.

The page needs nothing from a network: the chart is the command's own ``--plot`` picture as a PNG inside
the page (``data:`` URL), the style and the one script (sorting the tables) are inline, and a
Content-Security-Policy meta tag forbids everything else (``default-src 'none'``; the style and the script
allowed by their SHA-256 hashes, images only from ``data:``): a browser opening the file makes no request.
Every text from an input (op and kernel names, file names, model and chip names, notes) goes through
``html.escape``: a kernel named ``<script>alert(1)</script>`` is shown as those characters.

Tables sort by a column on a click on its header (numbers by value: each cell keeps its raw SI number in
``data-v``); ``#sort=N`` (or ``#sort=-N``, descending) in the page's address sorts the first table by
column N when the page loads.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rooftop.report.files import check_output_path, replacing
from rooftop.report.reasons import collective_text, note_texts, sharding_texts
from rooftop.report.train_explain import explanation_lines
from rooftop.units import format_bytes, format_duration, format_percent, plural

if TYPE_CHECKING:
    from rooftop.analysis.compare import ProfileReport
    from rooftop.hardware.chip import Chip
    from rooftop.plan.train.plan import TrainingPlan

Cell = tuple[object, Any]  # (text shown, sort value: a number or text)

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1400px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: #f3f3f3; cursor: pointer; user-select: none; white-space: nowrap; }
th[aria-sort=ascending]::after { content: " \\25B2"; } th[aria-sort=descending]::after { content: " \\25BC"; }
td.name { font-family: ui-monospace, monospace; overflow-wrap: anywhere; min-width: 14em; max-width: 40em; }
img.chart { max-width: 100%; border: 1px solid #eee; }
div.wide { max-width: 100%; overflow-x: auto; }
p.note { color: #666; } dl { display: grid; grid-template-columns: max-content auto; gap: 2px 1em; }
dt { font-weight: 600; } dd { margin: 0; }
"""

SCRIPT = """
function rooftopSort(table, col, asc) {
  var heads = table.tHead.rows[0].cells, grouped = table.tBodies.length > 1;
  var parent = grouped ? table : table.tBodies[0];
  var items = Array.prototype.slice.call(grouped ? table.tBodies : parent.rows);
  for (var h = 0; h < heads.length; h++) heads[h].removeAttribute("aria-sort");
  heads[col].setAttribute("aria-sort", asc ? "ascending" : "descending");
  items.sort(function (a, b) {
    var ra = grouped ? a.rows[0] : a, rb = grouped ? b.rows[0] : b;
    var x = ra.cells[col].getAttribute("data-v"), y = rb.cells[col].getAttribute("data-v");
    var nx = parseFloat(x), ny = parseFloat(y), c;
    if (!isNaN(nx) && !isNaN(ny)) c = nx - ny; else c = String(x).localeCompare(String(y));
    return asc ? c : -c;
  });
  items.forEach(function (r) { parent.appendChild(r); });
}
document.querySelectorAll("table.sortable").forEach(function (table) {
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
    th.addEventListener("click", function () {
      rooftopSort(table, col, th.getAttribute("aria-sort") !== "ascending");
    });
  });
});
(function () {
  var m = /^#sort=(-?)([0-9]+)$/.exec(location.hash), first = document.querySelector("table.sortable");
  if (m && first && +m[2] < first.tHead.rows[0].cells.length) rooftopSort(first, +m[2], m[1] !== "-");
})();
"""


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


#: the page's Content-Security-Policy: nothing from anywhere but the inline style and script (by hash) and
#: images inside the page
CSP = (
    f"default-src 'none'; img-src data:; style-src {_hash(STYLE)}; script-src {_hash(SCRIPT)}; "
    "base-uri 'none'; form-action 'none'"
)


def check_html_path(path: str) -> None:
    """A one-line error for a path no report can be written to (before any work)."""
    check_output_path(path, "HTML report", (".html", ".htm"), "report.html", flag="--html")


def esc(value: object) -> str:
    """Text from anywhere, escaped for HTML text and attribute values."""
    return html.escape(str(value), quote=True)


def page(title: str, body: Iterable[str]) -> str:
    """The whole document: ``title`` (escaped here) and ``body`` (HTML made by this module's functions)."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + f"\n<script>{SCRIPT}</script>\n</body></html>\n"
    )


def _value(v: Any) -> str:
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("1e308" if v > 0 else "-1e308" if v < 0 else "0")
    return str(v)


def sortable(columns: Sequence[str], rows: Iterable[Sequence[Cell]], caption: str = "", names: int = 0) -> str:
    """A table sortable by each column: cells (text, sort value); numbers right-aligned; the first
    ``names`` columns in a monospace font (names from inputs)."""
    return grouped_sortable(columns, [list(rows)], caption, names)


def grouped_sortable(
    columns: Sequence[str], groups: Iterable[Sequence[Sequence[Cell]]], caption: str = "", names: int = 0
) -> str:
    """As :func:`sortable`, with rows in groups (a part and its terms) that sort as one, by their first row:
    sorting never tears a term from its part. In a box that scrolls sideways: the page keeps its width."""
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    bodies = []
    for rows in groups:
        body = []
        for row in rows:
            cells = []
            for i, (text, v) in enumerate(row):
                cls = "name" if i < names else "n" if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
                cells.append(f'<td class="{cls}" data-v="{esc(_value(v))}">{esc(text)}</td>')
            body.append("<tr>" + "".join(cells) + "</tr>")
        bodies.append("<tbody>\n" + "\n".join(body) + "</tbody>")
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return (
        f'<div class="wide"><table class="sortable">{cap}<thead><tr>{head}</tr></thead>{"".join(bodies)}</table></div>'
    )


def facts(items: Iterable[tuple[str, object]]) -> str:
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items) + "</dl>"


def chart(draw: Callable[[str], None], alt: str) -> str:
    """The picture ``draw(path)`` writes as a PNG, inside the page; a note instead when it cannot be drawn."""
    from rooftop.errors import RooftopError

    with tempfile.TemporaryDirectory(prefix="rooftop-html-") as folder:
        path = os.path.join(folder, "chart.png")
        try:
            draw(path)
            with open(path, "rb") as fh:
                data = base64.b64encode(fh.read()).decode("ascii")
        except (RooftopError, OSError) as exc:
            return f'<p class="note">no chart: {esc(exc)}</p>'
    return f'<img class="chart" alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def write_html(path: str, text: str) -> None:
    """Write the page to ``path`` atomically (report/files.py)."""
    check_html_path(path)
    with replacing(path, "HTML report") as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)


def _d(seconds: float | None) -> Cell:
    return ("?" if seconds is None else format_duration(seconds), -1.0 if seconds is None else seconds)


def _drop_empty(
    columns: list[str], rows: list[list[Cell]], optional: tuple[str, ...]
) -> tuple[list[str], list[list[Cell]]]:
    """The table without the ``optional`` columns no row has text in (a PyTorch trace has no modules)."""
    keep = [i for i, c in enumerate(columns) if c not in optional or any(row[i][0] != "" for row in rows)]
    return [columns[i] for i in keep], [[row[i] for i in keep] for row in rows]


# ---------------------------------------------------------------- rooftop profile --html


def profile_html(report: ProfileReport, chip: Chip, top: int = 15, extra: Sequence[str] = ()) -> str:
    """The profile's page: summary, the roofline picture, every op (sortable), the steps, where the time
    goes and the notes."""
    from rooftop.report.profile import UNKNOWN, plot_profile, ranked_ops

    ops, ranking = ranked_ops(report)
    lost = sum(o.lost_s for o in ops)
    total = sum(o.total_s for o in ops)
    priced = report.priced_fraction()
    ov = report.overlap()
    body = [
        f"<h1>{esc(os.path.basename(report.source.rstrip('/')) or report.source)} on {esc(chip.name)}</h1>",
        facts(
            [
                ("source", report.source),
                ("chip", chip.name),
                ("ops", len(ops)),
                ("measured op time", format_duration(total)),
                ("time lost vs roofline", format_duration(lost)),
                ("priced", "-" if priced is None else f"{format_percent(priced)} of the op time has a roofline"),
                (
                    "communication",
                    f"{format_duration(ov['comm_s'])}, {format_percent(ov['overlap_fraction'])} overlapped",
                ),
            ]
        ),
        "<h2>roofline</h2>",
        chart(lambda p: plot_profile(report, chip, p, top), "the ops on the chip's roofline and the time lost per op"),
        f"<h2>ops ({esc(ranking)}; click a header to sort)</h2>",
    ]
    rows = []
    for o in ops:
        eff = o.efficiency
        rows.append(
            [
                (o.name, o.name),
                (o.module or "", o.module or ""),
                (o.count, o.count),
                _d(o.measured_s),
                _d(o.total_s),
                _d(o.lower_bound_s),
                ("-" if eff is None else f"{format_percent(eff)}", -1.0 if eff is None else eff),
                (o.bound or "-", o.bound or ""),
                (o.verdict, o.verdict),
                ("?" if o.verdict == UNKNOWN else format_duration(o.lost_s), o.lost_s),
                (collective_text(o.collective) or "",) * 2,
                (o.framework_op, o.framework_op),
            ]
        )
    columns = [
        "op",
        "module",
        "runs",
        "measured",
        "total",
        "roofline",
        "eff.",
        "bound",
        "verdict",
        "lost",
        "mesh axes",
        "framework op",
    ]
    columns, rows = _drop_empty(columns, rows, ("module", "mesh axes", "framework op"))
    body.append(sortable(columns, rows, names=2 if "module" in columns else 1))
    if report.steps:
        body.append("<h2>steps (means over devices)</h2>")
        step_rows = [
            [(s.index, s.index), *(_d(v) for v in (s.duration_s, s.busy_s, s.comm_s, s.overlap_s, s.idle_s))]
            for s in report.steps
        ]
        body.append(sortable(["step", "duration", "busy", "comm", "overlapped", "idle"], step_rows))
    body.append("<h2>where the time goes (per device)</h2>")
    cat_rows = [
        [(k.replace("_", " "), k), _d(v["measured_s"]), _d(v["lower_bound_s"])] for k, v in report.categories.items()
    ]
    body.append(sortable(["part", "measured", "roofline"], cat_rows))
    body += [f'<p class="note">sharding: {esc(line)}</p>' for line in sharding_texts(report.sharding)]
    body += [f'<p class="note">note: {esc(note)}</p>' for note in note_texts(report.notes)]
    body += extra  # more sections (report/hosts.py: the views across hosts)
    return page(f"rooftop profile: {report.source} on {chip.name}", body)


# ---------------------------------------------------------------- rooftop train --html


def train_html(plan: TrainingPlan) -> str:
    """The training plan's page: the best layout, its step part by part with each term, its memory, the
    ranked layouts (sortable), the step chart, the explanation and the totals."""
    from rooftop.report.formulas import term_formula
    from rooftop.report.train import plot_train

    setup, best, totals = plan.setup, plan.ranked[0], plan.totals
    title = f"{setup.cfg.name} on {setup.chips} x {setup.chip.name} ({setup.topology.spec})"
    summary = [
        ("layout", best.parallelism.label()),
        ("step time", format_duration(best.step_time_s)),
        ("MFU", f"{format_percent(best.mfu, 1)}"),
        ("tokens/s", f"{best.tokens_per_s:,.0f}"),
        (
            "memory per chip",
            f"{format_bytes(best.memory_per_chip_bytes)} of {format_bytes(best.usable_hbm_bytes)} "
            "usable" + ("" if best.fits else ": does NOT fit"),
        ),
        ("bound", best.bound.replace("_", " ")),
        ("layouts evaluated", plural(plan.search.evaluated, "layout")),
    ]
    if totals.train_time_s is not None and totals.tokens is not None:
        cost = f", ${totals.cost_usd:,.0f}" if totals.cost_usd is not None else ""
        summary.append(("training", f"{totals.tokens:,.0f} tokens: {format_duration(totals.train_time_s)}{cost}"))
    body = [f"<h1>{esc(title)}</h1>", facts(summary), "<h2>step of the best layout, part by part</h2>"]
    groups = []
    for part in plan.parts[0]:
        if part.time_s <= 0:
            continue
        share = part.time_s / best.step_time_s if best.step_time_s > 0 else 0.0
        rows: list[list[Cell]] = []
        groups.append(rows)
        rows.append(
            [
                (part.name.replace("_", " "), part.name),
                _d(part.time_s),
                (f"{format_percent(share, 1)}", share),
                (part.bound.replace("_", " "), part.bound),
                ("", ""),
            ]
        )
        for t in part.terms:
            if t.seconds:
                rows.append(
                    [
                        ("  " + t.name, part.name),
                        _d(t.seconds),
                        ("", 0.0),
                        (t.kind, t.kind),
                        (term_formula(t), term_formula(t)),
                    ]
                )
    body.append(grouped_sortable(["part / term", "time", "share", "bound", "from"], groups, names=1))
    body.append("<h2>chart</h2>")
    body.append(chart(lambda p: plot_train(best, p), "the best layout's step time and memory per chip"))
    body.append("<h2>ranked layouts (click a header to sort)</h2>")
    ranked = [
        [
            (i + 1, i + 1),
            (r.parallelism.label(), r.parallelism.label()),
            _d(r.step_time_s),
            (f"{format_percent(r.mfu, 1)}", r.mfu),
            (f"{r.tokens_per_s:,.0f}", r.tokens_per_s),
            (format_bytes(r.memory_per_chip_bytes), r.memory_per_chip_bytes),
            (r.bound.replace("_", " "), r.bound),
        ]
        for i, r in enumerate(plan.ranked)
    ]
    body.append(sortable(["#", "layout", "step", "MFU", "tokens/s", "mem/chip", "bound"], ranked))
    body.append("<h2>memory per chip</h2>")
    mem = [[(k.replace("_", " "), k), (format_bytes(v), v)] for k, v in best.memory.items() if v > 0]
    body.append(sortable(["part", "bytes"], mem))
    body += [f"<p>{esc(line)}</p>" for line in explanation_lines(plan.explanation)]
    return page(f"rooftop train: {title}", body)
