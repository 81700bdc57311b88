"""Rich tables for the terminal. Library code never prints; these functions do.

rich is imported when a table is built, so commands printing JSON never load it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rooftop.units import format_bytes, format_duration, format_number

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from rooftop.cost.roofline import Estimate


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    from rich.table import Table  # here, not at the top: --json output never loads rich

    t = Table(title=title, title_justify="left", header_style="bold")
    for i, col in enumerate(columns):
        t.add_column(col, justify="left" if i == 0 else "right")
    for row in rows:
        t.add_row(*(str(c) for c in row))
    return t


def estimate_table(title: str, est: Estimate) -> Table:
    rows = [
        ("FLOPs", format_number(est.flops, "FLOP")),
        ("HBM bytes", format_bytes(est.hbm_bytes)),
        ("arithmetic intensity", f"{est.arithmetic_intensity:.4g} FLOP/B"),
        ("critical intensity", f"{est.critical_intensity:.4g} FLOP/B"),
        ("compute", format_duration(est.compute_s)),
        ("memory", format_duration(est.memory_s)),
    ]
    if est.network_s:
        rows.append(("network", format_duration(est.network_s)))
    rows += [
        ("lower bound (overlap)", format_duration(est.lower_bound_s)),
        ("upper bound (serial)", format_duration(est.upper_bound_s)),
        ("bound", f"[bold]{est.bound}[/bold]"),
    ]
    return table(title, ["quantity", "value"], rows)


def terms_table(est: Estimate) -> Table:
    from rooftop.report.formulas import term_formula

    return table(
        "where the numbers come from",
        ["term", "time", "formula"],
        [(t.name, format_duration(t.seconds), term_formula(t)) for t in est.terms],
    )


def print_estimate(console: Console, title: str, est: Estimate) -> None:
    console.print(estimate_table(title, est))
    console.print(terms_table(est))
