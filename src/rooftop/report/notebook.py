"""Results in a notebook: the one-line repr, the HTML, ``to_dict()`` and ``to_frame()`` of every result type.

``view(result)`` builds a ``View`` from the payload function of the command that prints the result (so
``to_dict()`` is exactly what that command's ``--json`` writes: report/serialize.py's ``payload_dict``), a
one-line summary, and the rows a DataFrame holds (the layouts of a training plan, the points of a serving
plan, the ops of a profile, the instructions of an HLO module, the terms of an Estimate). Importing this
module registers each view for its result type in ``rooftop.display``'s registry, which the result types'
notebook methods (``rooftop.display.Displayed``) read: the results never import this module.
"""

from __future__ import annotations

import html
import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rooftop.analysis.compare import ProfileReport
from rooftop.analysis.diff import ProfileDiff
from rooftop.analysis.hlo.analyze import HloAnalysis
from rooftop.analysis.hlo.liveness import MemoryPeak
from rooftop.cost.roofline import Estimate
from rooftop.display import register_view
from rooftop.errors import InvalidConfigError
from rooftop.plan.compare import Comparison
from rooftop.plan.serve.sweep import ServingPlan, ServingPoint
from rooftop.plan.train.plan import TrainingPlan
from rooftop.plan.train.search import SearchResult
from rooftop.plan.train.step import StepResult
from rooftop.report.serialize import payload_dict
from rooftop.units import format_bytes, format_duration, format_number, format_percent, plural

#: rows the HTML shows (to_frame() has them all)
HTML_ROWS = 10

Column = tuple[str, Callable[[Mapping[str, Any]], str]]


@dataclass(frozen=True)
class View:
    """A result as a notebook shows it: ``kind`` (its type), a one-line ``summary``, the ``payload`` its command
    writes as JSON, its ``rows`` (``what`` they are) and the ``columns`` of them the HTML shows."""

    kind: str
    summary: str
    payload: Mapping[str, Any]
    rows: Sequence[Mapping[str, Any]]
    what: str
    columns: Sequence[Column]

    def repr_text(self) -> str:
        return f"<{self.kind}: {self.summary}>"

    def to_dict(self) -> dict[str, Any]:
        return payload_dict(self.payload)

    def to_frame(self) -> Any:
        try:  # optional (the test extra has it); imported by name so that type checks need no pandas stubs
            pd = importlib.import_module("pandas")
        except ImportError:
            raise InvalidConfigError("to_frame() needs pandas: pip install pandas") from None
        rows = payload_dict({"rows": list(self.rows)})["rows"]
        return pd.DataFrame([flat(r) for r in rows])

    def html(self) -> str:
        e = html.escape
        head = "".join(f"<th>{e(name)}</th>" for name, _ in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{e(cell(r))}</td>" for _, cell in self.columns) + "</tr>"
            for r in self.rows[:HTML_ROWS]
        )
        more = f"; the first {HTML_ROWS} shown" if len(self.rows) > HTML_ROWS else ""
        table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>" if self.rows else ""
        return (
            f"<div><p><b>{e(self.kind)}</b>: {e(self.summary)}</p>{table}"
            f"<p><small>{e(plural(len(self.rows), self.what))}{e(more)}; .to_frame() has every row, "
            ".to_dict() the JSON of the command line</small></p></div>"
        )


def flat(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested keys dotted ("parallelism.tp"); lists left out (terms, collectives: to_dict() has them)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, Mapping):
            out.update(flat(value, f"{prefix}{key}."))
        elif not isinstance(value, list):
            out[f"{prefix}{key}"] = value
    return out


def _time(key: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda r: _seconds(r.get(key))


def _seconds(value: Any) -> str:
    return format_duration(value) if isinstance(value, (int, float)) and math.isfinite(value) else "-"


def _text(key: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda r: "-" if r.get(key) is None else str(r[key])


# ---------------------------------------------------------------- the views


def estimate_view(est: Estimate) -> View:
    """``estimate_dict``: the roofline keys every command shares; rows: the terms."""
    from rooftop.report.serialize import estimate_dict

    payload = estimate_dict(est)
    summary = (
        f"{_seconds(est.lower_bound_s)} on {est.chip}, {est.bound}-bound (compute {_seconds(est.compute_s)}, "
        f"memory {_seconds(est.memory_s)}, network {_seconds(est.network_s)})"
    )
    columns = [("term", _text("name")), ("kind", _text("kind")), ("time", _time("time_s")),
               ("formula", _text("formula"))]  # fmt: skip
    return View("Estimate", summary, payload, payload["terms"], "term", columns)


def _layout_columns() -> list[Column]:
    return [
        ("layout", lambda r: str(r["parallelism"]["label"])),
        ("step", _time("step_time_s")),
        ("MFU", lambda r: f"{format_percent(r['mfu'], 1)}" if isinstance(r.get("mfu"), float) else "-"),
        ("memory per chip", lambda r: format_bytes(r["memory_per_chip_bytes"]["total"])),
        ("fits", lambda r: "yes" if r["fits"] else "no"),
        ("bound", _text("bound")),
    ]


def _step_line(r: StepResult) -> str:
    fits = "fits" if r.fits else "does NOT fit"
    return (
        f"{r.parallelism.label()}: step {_seconds(r.step_time_s)}, MFU {format_percent(r.mfu, 1)}, "
        f"{format_bytes(r.memory_per_chip_bytes)} per chip ({fits}), {r.bound}-bound"
    )


def _search_row(r: StepResult) -> dict[str, Any]:
    """A layout as ``rooftop train --json`` writes a candidate, less the parts' terms (only a plan prices them)."""
    from rooftop.report.train import step_dict

    return {k: v for k, v in step_dict(r, []).items() if k != "breakdown"}


def step_view(r: StepResult) -> View:
    row = _search_row(r)
    return View("StepResult", _step_line(r), row, [row], "layout", _layout_columns())


def search_view(result: SearchResult) -> View:
    rows = [_search_row(r) for r in result.ranked]
    payload = {
        "candidates": rows,
        "best_unfit": _search_row(result.best_unfit) if result.best_unfit is not None else None,
        "evaluated": result.evaluated,
        "timed": result.timed,
        "unlayable": result.unlayable,
        "explanation": list(result.explanation),
    }
    best = result.ranked[0] if result.ranked else result.best_unfit
    head = f"{plural(len(result.ranked), 'fitting layout')} of {result.evaluated:,} evaluated"
    summary = head + (f"; best {_step_line(best)}" if best is not None else "; none")
    return View("SearchResult", summary, payload, rows, "layout", _layout_columns())


def train_view(plan: TrainingPlan) -> View:
    """``train_json``: what ``rooftop train --json`` writes; rows: the ranked candidates."""
    from rooftop.report.energy import train_json

    payload = train_json(plan)
    setup = plan.setup
    where = f"{setup.cfg.name} on {setup.chips} x {setup.chip.name} ({setup.topology.spec})"
    summary = f"{where}: {_step_line(plan.ranked[0])}"
    if plan.totals.train_time_s is not None:
        summary += f"; {plan.totals.tokens:.3g} tokens in {_seconds(plan.totals.train_time_s)}"
    return View("TrainingPlan", summary, payload, payload["candidates"], "layout", _layout_columns())


def _point_columns() -> list[Column]:
    return [
        ("layout", lambda r: " ".join(f"{k}={v}" for k, v in r["parallelism"].items() if v != 1) or "tp=1"),
        ("batch", _text("batch")),
        ("TTFT", _time("ttft_s")),
        ("TPOT", _time("step_time_s")),
        ("tokens/s per chip", lambda r: f"{r['tokens_per_s_per_chip']:,.0f}"),
        ("fits", lambda r: "yes" if r["fits"] else "no"),
        ("bound", _text("bound")),
    ]


def _point_line(p: ServingPoint) -> str:
    return (
        f"{p.layout.label()} batch {p.batch}: TPOT {_seconds(p.step_time_s)}, TTFT {_seconds(p.ttft_s)}, "
        f"{p.tokens_per_s_per_chip:,.0f} tokens/s per chip, {p.bound}-bound"
    )


def serve_view(plan: ServingPlan) -> View:
    """``serve_json``: what ``rooftop serve --json`` writes; rows: every (layout, batch) point."""
    from rooftop.report.energy import serve_json

    payload = serve_json(plan)
    req = plan.request
    chosen = _point_line(plan.points[plan.chosen]) if plan.chosen is not None else "no point meets the targets"
    summary = f"{req.cfg.name} on {req.topology.spec} {req.chip.name}: chosen {chosen}"
    return View("ServingPlan", summary, payload, payload["points"], "point", _point_columns())


def point_view(p: ServingPoint) -> View:
    from rooftop.report.serve import point_dict

    row = point_dict(p)
    return View("ServingPoint", _point_line(p), row, [row], "point", _point_columns())


def profile_view(report: ProfileReport) -> View:
    """``profile_payload``: what ``rooftop profile --json`` writes; rows: the ops."""
    from rooftop.report.profile import profile_payload

    payload = profile_payload(report)
    measured = sum(o.total_s for o in report.ops)
    lost = sum(o.lost_s for o in report.ops)
    summary = f"{report.source} on {report.chip}: {plural(len(report.ops), 'op')}, {_seconds(measured)} measured"
    if report.priced_fraction() is not None:
        summary += f", {_seconds(lost)} lost to the roofline"
    columns: list[Column] = [
        ("op", _text("name")),
        ("count", _text("count")),
        ("measured", _time("total_s")),
        ("roofline", _time("lower_bound_s")),
        ("lost", _time("lost_s")),
        ("verdict", _text("verdict")),
    ]
    return View("ProfileReport", summary, payload, payload["ops"], "op", columns)


def hlo_view(analysis: HloAnalysis, top: int = 10) -> View:
    """``hlo_payload``: what ``rooftop hlo --json`` writes (its default ``--top 10``); rows: the instructions."""
    from rooftop.report.hlo import hlo_payload

    payload = hlo_payload(analysis, top)
    totals = analysis.totals()
    summary = (
        f"{analysis.module} on {analysis.chip.name} ({analysis.topology.spec}): "
        f"{plural(len(analysis.ops), 'instruction')}, predicted {_seconds(totals['predicted_s'])} "
        f"(compute {_seconds(totals['compute_s'])}, memory {_seconds(totals['memory_s'])}, "
        f"network {_seconds(totals['comm_s'])})"
    )
    order = sorted(payload["instructions"], key=lambda r: -(r.get("lower_bound_s") or 0.0))
    columns: list[Column] = [
        ("instruction", _text("name")),
        ("opcode", _text("opcode")),
        ("predicted", _time("lower_bound_s")),
        ("bound", _text("bound")),
        ("FLOPs", lambda r: format_number(r["flops"]) if r.get("flops") else "-"),
    ]
    return View("HloAnalysis", summary, payload, order, "instruction", columns)


def compare_view(result: Comparison) -> View:
    """``compare_payload``: what ``rooftop compare --json`` writes; rows: one per chip or slice."""
    from rooftop.report.compare import compare_payload

    payload = compare_payload(result)
    answered = [e for e in result.entries if e.step_time_s is not None]
    what = "step" if result.job == "train" else "TPOT"
    best = min(answered, key=lambda e: e.step_time_s or math.inf) if answered else None
    summary = f"{result.model}, {result.job} on {plural(len(result.entries), 'chip or slice', 'chips or slices')}"
    if best is not None:
        summary += f": fastest {best.chip} {best.topology} ({what} {_seconds(best.step_time_s or 0.0)})"
    columns: list[Column] = [
        ("chip", _text("chip")),
        ("slice", _text("topology")),
        ("layout", _text("layout")),
        (what, _time("step_time_s")),
        ("MFU" if result.job == "train" else "tokens/s per chip",
         (lambda r: format_percent(r["mfu"], 1) if isinstance(r.get("mfu"), float) else "-") if result.job == "train"
         else (lambda r: "-" if r.get("tokens_per_s_per_chip") is None else f"{r['tokens_per_s_per_chip']:,.0f}")),
        ("note", _text("note")),
    ]  # fmt: skip
    return View("Comparison", summary, payload, payload["entries"], "entry", columns)


def diff_view(diff: ProfileDiff) -> View:
    """``diff_payload``: what ``rooftop diff --json`` writes; rows: the matched, added and removed ops."""
    from rooftop.report.diff import diff_payload, summary_lines

    payload = diff_payload(diff)
    columns: list[Column] = [
        ("op", _text("name")),
        ("status", _text("status")),
        ("A", _time("measured_a_s" if diff.kind == "profile" else "roofline_a_s")),
        ("B", _time("measured_b_s" if diff.kind == "profile" else "roofline_b_s")),
        ("delta", _time("delta_measured_s" if diff.kind == "profile" else "delta_roofline_s")),
    ]
    return View("ProfileDiff", summary_lines(diff)[0], payload, payload["rows"], "op", columns)


def memory_peak_view(peak: MemoryPeak) -> View:
    """``peak_payload``: the ``memory_peak`` of ``rooftop hlo --memory``; rows: the buffers live at the peak."""
    from rooftop.report.memorypeak import peak_payload

    payload = peak_payload(peak)
    kinds = ", ".join(f"{k} {format_bytes(v)}" for k, v in peak.by_kind.items())
    summary = f"{peak.module}: peak {format_bytes(peak.peak_bytes)} at {peak.peak_instruction} ({kinds})"
    columns: list[Column] = [
        ("buffer", _text("name")),
        ("kind", _text("kind")),
        ("bytes", lambda r: format_bytes(r["bytes"])),
        ("shape", _text("shape")),
        ("source", _text("source")),
    ]
    return View("MemoryPeak", summary, payload, payload["buffers"], "buffer", columns)


# Registered by type in rooftop.display's registry: the result classes never name report/.
register_view(Estimate, estimate_view)
register_view(StepResult, step_view)
register_view(SearchResult, search_view)
register_view(TrainingPlan, train_view)
register_view(ServingPlan, serve_view)
register_view(ServingPoint, point_view)
register_view(ProfileReport, profile_view)
register_view(HloAnalysis, hlo_view)
register_view(Comparison, compare_view)
register_view(ProfileDiff, diff_view)
register_view(MemoryPeak, memory_peak_view)
