"""``rooftop profile`` on many hosts: the merged report (report/profile.py) and the cross-host views
(analysis/hostviews.py) as JSON and tables."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from rooftop.report.profile import profile_payload, render_profile
from rooftop.report.reasons import note_texts
from rooftop.report.table import say, table
from rooftop.units import format_duration

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.analysis.hosts import Merge
    from rooftop.hardware.chip import Chip


def hosts_payload(merge: Merge, chip: Chip) -> dict[str, Any]:
    """``rooftop profile --json`` on many hosts: the one-process payload and a ``hosts`` object."""
    views = merge.views
    return {
        **profile_payload(merge.report, chip),
        "hosts": {
            "names": list(merge.hosts),
            "engine": merge.engine,
            "workers": merge.workers,
            "steps": [dataclasses.asdict(s) for s in views.steps],
            "collectives": [dataclasses.asdict(c) for c in views.collectives],
            "op_spread": [dataclasses.asdict(o) for o in views.spread],
            "stragglers": [dataclasses.asdict(s) for s in views.stragglers],
            "notes": note_texts(views.notes),
        },
    }


def render_hosts(console: Console, merge: Merge, chip: Chip, top: int) -> None:
    """The one-process tables, then steps per host, collective waits, op spread and the straggler ranking."""
    render_profile(console, merge.report, chip, top)
    views, shown = merge.views, max(top, 1)
    rows: list[tuple[Any, ...]] = []
    for s in views.steps:
        late = f"{s.straggler} ({format_duration(s.late_s[s.straggler])} late)" if s.straggler else "-"
        fastest = format_duration(min(s.time_s.values()))
        rows.append((s.index, s.slowest, format_duration(s.time_s[s.slowest]), fastest, late))
    if rows:
        head = ["step", "slowest host", "its time", "fastest", "straggler (latest at collectives)"]
        console.print(table(f"steps on {len(merge.hosts)} hosts", head, rows))
    rows = [(c.name, c.meetings, c.participants, format_duration(c.mean_skew_s), format_duration(c.max_skew_s),
             format_duration(c.wait_s), c.last_host) for c in views.collectives[:shown]]  # fmt: skip
    if rows:
        head = ["collective", "runs", "devices", "mean skew", "max skew", "summed wait", "most often last"]
        console.print(table("collectives: the wait for the last participant", head, rows))
    rows = [(o.name, o.hosts, format_duration(o.min_s), format_duration(o.median_s), format_duration(o.max_s),
             o.max_host) for o in views.spread[:shown]]  # fmt: skip
    if rows:
        head = ["op", "hosts", "min", "median", "max", "host of max"]
        console.print(table("ops across hosts (time per host)", head, rows))
    rows = [(n, s.host, format_duration(s.late_s), s.straggler_steps, format_duration(s.step_time_s))
            for n, s in enumerate(views.stragglers[:shown], 1)]  # fmt: skip
    head = ["rank", "host", "late", "steps as straggler", "step time"]
    console.print(table("stragglers (summed lateness at collectives)", head, rows))
    engine = "a Dask cluster" if merge.engine == "dask" else f"{merge.workers} local process(es)"
    say(console, f"{len(merge.hosts)} hosts, each reduced on {engine} and merged", style="dim")
    for note in note_texts(views.notes):
        say(console, f"note: {note}", style="dim")


def hosts_html(merge: Merge, chip: Chip, top: int) -> str:
    """``rooftop profile --html`` on many hosts: the one-process page and the views across hosts."""
    from rooftop.report.html import esc, profile_html, sortable

    def d(seconds: float) -> tuple[str, float]:
        return format_duration(seconds), seconds

    views, shown = merge.views, max(top, 1)
    body = [f"<h2>steps on {len(merge.hosts)} hosts</h2>"]
    body.append(sortable(["step", "slowest host", "its time", "fastest", "straggler", "its lateness"], [
        [(s.index, s.index), (s.slowest, s.slowest), d(s.time_s[s.slowest]), d(min(s.time_s.values())),
         (s.straggler or "-", s.straggler or ""), d(s.late_s[s.straggler] if s.straggler else 0.0)]
        for s in views.steps]))  # fmt: skip
    body.append("<h2>collectives: the wait for the last participant</h2>")
    body.append(sortable(["collective", "runs", "devices", "mean skew", "max skew", "summed wait", "most often last"], [
        [(c.name, c.name), (c.meetings, c.meetings), (c.participants, c.participants), d(c.mean_skew_s),
         d(c.max_skew_s), d(c.wait_s), (c.last_host, c.last_host)] for c in views.collectives[:shown]]))  # fmt: skip
    body.append("<h2>ops across hosts (time per host)</h2>")
    body.append(sortable(["op", "hosts", "min", "median", "max", "host of max"], [
        [(o.name, o.name), (o.hosts, o.hosts), d(o.min_s), d(o.median_s), d(o.max_s), (o.max_host, o.max_host)]
        for o in views.spread[:shown]]))  # fmt: skip
    body.append("<h2>stragglers (summed lateness at collectives)</h2>")
    body.append(sortable(["rank", "host", "late", "steps as straggler", "step time"], [
        [(n, n), (s.host, s.host), d(s.late_s), (s.straggler_steps, s.straggler_steps), d(s.step_time_s)]
        for n, s in enumerate(views.stragglers[:shown], 1)]))  # fmt: skip
    body += [f'<p class="note">note: {esc(note)}</p>' for note in note_texts(views.notes)]
    return profile_html(merge.report, chip, top, body)
