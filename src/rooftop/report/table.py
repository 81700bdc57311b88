"""Rich tables and lines for the terminal. Library code never prints; these functions do.

Text reaches the terminal as literal text, never as rich markup: names come from input
files (a kernel called ``[/bold]``, an instruction ``mul[/x]``, a chip called
``[red on white blink]ALERT[/]``), so every string goes in as a ``rich.text.Text``, with
control characters (escape sequences, carriage returns, bidirectional overrides) shown as
``\\x1b``-style escapes instead of reaching the terminal. Emphasis rooftop adds itself is
a style on a Text (``styled``), not markup in a string.

rich is imported when a table is built, so commands printing JSON never load it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rooftop.errors import visible
from rooftop.units import format_bytes, format_duration, format_number, format_plain

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from rooftop.cost.roofline import Estimate

#: the longest text and the longest run of non-blanks a cell or a line shows (--json has it all)
MAX_TEXT = 5000
MAX_WORD = 1000
_WORD = re.compile(f"\\S{{{MAX_WORD + 1},}}")


def clipped(text: str) -> str:
    """``text`` cut to MAX_TEXT characters and each run of non-blanks to MAX_WORD (rich folds a
    long word in time quadratic in its length: a 20,000-character kernel name took 11 s)."""
    if len(text) > MAX_TEXT:
        text = f"{text[: MAX_TEXT - 40]}... ({len(text)} characters)"
    return _WORD.sub(lambda m: f"{m.group()[: MAX_WORD - 40]}... ({len(m.group())} characters)", text)


def plain(value: object) -> Text:
    """``value`` as literal terminal text: no markup, no emoji codes, no control characters,
    no unbounded length."""
    from rich.text import Text

    if isinstance(value, Text):
        return value
    return Text(clipped(visible(value)))


def words(key: object) -> str:
    """An identifier rooftop shows a reader, in words: "memory_capacity" -> "memory capacity",
    "pipeline_bubble" -> "pipeline bubble" (tables only; --json keeps the key)."""
    return str(key).replace("_", " ")


def styled(value: object, style: str) -> Text:
    """``value`` as literal text in ``style`` (rooftop's own emphasis, e.g. "bold")."""
    text = plain(value).copy()
    text.stylize(style)
    return text


def say(console: Console, *parts: object, style: str | None = None, soft_wrap: bool = False) -> None:
    """Print one line made of ``parts`` (strings and Texts) as literal text, numbers highlighted
    as rich highlights a plain line."""
    from rich.text import Text

    line = Text.assemble(*(plain(p) for p in parts))
    if style:
        line.stylize(style)
    console.print(console.highlighter(line), soft_wrap=soft_wrap)


def table(title: object, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A table whose title and cells are literal text (see the module docstring); a cell that
    is already a ``Text`` keeps its style."""
    from rich.table import Table  # here, not at the top: --json output never loads rich

    t = Table(title=plain(title), title_justify="left", header_style="bold")
    for i, col in enumerate(columns):
        t.add_column(plain(col), justify="left" if i == 0 else "right")
    for row in rows:
        t.add_row(*(plain(c) for c in row))
    return t


def estimate_table(title: str, est: Estimate, critical_intensity: float | None = None) -> Table:
    """The roofline of one op; ``critical_intensity`` replaces the Estimate's (the matrix unit's ridge
    point) for an op that runs on another unit."""
    critical = est.critical_intensity if critical_intensity is None else critical_intensity
    rows: list[tuple[str, object]] = [
        ("FLOPs", format_number(est.flops, "FLOP")),
        ("HBM bytes", format_bytes(est.hbm_bytes)),
        ("arithmetic intensity", f"{format_plain(est.arithmetic_intensity, 4)} FLOP/B"),
        ("critical intensity", f"{format_plain(critical, 4)} FLOP/B"),
        ("compute", format_duration(est.compute_s)),
        ("memory", format_duration(est.memory_s)),
    ]
    if est.network_s:
        rows.append(("network", format_duration(est.network_s)))
    rows += [
        ("lower bound (overlap)", format_duration(est.lower_bound_s)),
        ("upper bound (serial)", format_duration(est.upper_bound_s)),
        ("bound", styled(est.bound, "bold")),
    ]
    return table(title, ["quantity", "value"], rows)


def terms_table(est: Estimate) -> Table:
    from rooftop.report.formulas import term_formula

    return table(
        "where the numbers come from",
        ["term", "time", "formula"],
        [(t.name, format_duration(t.seconds), term_formula(t)) for t in est.terms],
    )


def print_estimate(console: Console, title: str, est: Estimate, critical_intensity: float | None = None) -> None:
    console.print(estimate_table(title, est, critical_intensity))
    console.print(terms_table(est))
