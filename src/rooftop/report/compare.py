"""``rooftop compare``: one job on several chips or slices, as JSON and one table."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from rooftop.report.reasons import note_text
from rooftop.report.table import say, table
from rooftop.units import format_duration, format_percent, format_plain

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.plan.compare import Comparison, Entry


def compare_payload(result: Comparison) -> dict[str, Any]:
    """``rooftop compare --json``: the job, its settings and one object per chip or slice, in the order given."""
    return {
        "schema_version": 1,
        "job": result.job,
        "model": result.model,
        "settings": dict(result.settings),
        "entries": [{**dataclasses.asdict(e), "note": note_text(e.note)} for e in result.entries],
    }


def _money(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"${format_plain(value, digits)}"


def _row(e: Entry, job: str) -> tuple[str, ...]:
    where = f"{e.chip} {e.topology}"
    if e.step_time_s is None:
        return (where, "-", "-", "-", "-", "-", "-", note_text(e.note))
    price = f"{_money(e.price_usd_per_chip_hour)}/h" if e.price_usd_per_chip_hour is not None else "no price"
    per_chip = format_plain(e.tokens_per_s_per_chip or 0.0)
    if job == "train":
        days = "-" if e.train_time_s is None else f"{format_plain(e.train_time_s / 86400)} d"
        cost = _money(e.cost_usd, 4) if e.train_time_s is not None else "-"
        first = (format_duration(e.step_time_s), f"{format_percent((e.mfu or 0), 1)}", per_chip, f"{days}, {cost}")
    else:
        first = (format_duration(e.step_time_s), format_duration(e.ttft_s or 0.0), per_chip,
                 f"{_money(e.usd_per_million_output_tokens)}")  # fmt: skip
    return (
        where,
        e.layout or "-",
        *first,
        _energy(e, job),
        f"{price}; {note_text(e.note)}" if e.note and job == "train" else price,
    )


def _energy(e: Entry, job: str) -> str:
    """The run's kWh (training) or kWh per million output tokens (serving), at board power."""
    if job == "train":
        return "-" if e.kwh is None else f"{format_plain(e.kwh / 1e3)} MWh"
    return "-" if e.kwh_per_million_tokens is None else f"{format_plain(e.kwh_per_million_tokens)} kWh/M"


def render_compare(console: Console, result: Comparison) -> None:
    job = result.job
    if job == "train":
        headers = ["slice", "best layout", "step", "MFU", "tokens/s per chip", "time and cost to train", "energy",
                   "price"]  # fmt: skip
        title = f"{result.model}: training on each slice, its fastest layout"
    else:
        headers = ["slice", "chosen point", "time per output token", "TTFT", "tokens/s per chip",
                   "$ per M output tokens", "energy", "price"]  # fmt: skip
        title = f"{result.model}: serving on each slice, the point the serving planner chooses"
    ranked = "rank_by" in result.settings  # a goal's comparison: its reasons under the table, one a line
    rows = [_row(dataclasses.replace(e, note="") if ranked else e, job) for e in result.entries]
    if ranked:
        title = f"{result.model}: each chip's smallest slice meeting the goal, ranked by {result.settings['rank_by']}"
    console.print(table(title, headers, rows))
    for e in result.entries if ranked else ():
        say(console, f"{e.chip}: {note_text(e.note)}")
    sources = {e.chip: e.price_source for e in result.entries}
    for chip, source in sources.items():
        say(console, f"price of {chip}: {source}")
    if job == "train" and result.settings.get("tokens") is None:
        say(console, "give --tokens (e.g. 15T) for the days and dollars to train")
