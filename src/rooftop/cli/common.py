"""Options and output shared by every subcommand.

Kept light: building the parser must not load numpy, rich or the catalogs, so this
module imports them only inside the functions that run a command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rooftop.errors import InvalidConfigError

if TYPE_CHECKING:
    from rooftop.hardware.chip import Chip


@dataclass
class Output:
    """What a subcommand returns: the JSON payload and a renderer for the terminal."""

    payload: dict[str, Any]
    render: Callable[[Any], None]
    plots: list[Callable[[str], None]] = field(default_factory=list)


def add_common(p: argparse.ArgumentParser, chip: bool = True, chip_required: bool = True) -> None:
    """--json, --debug, --catalog and (optionally) --chip."""
    p.add_argument("--json", action="store_true", help="print the stable JSON contract instead of tables")
    p.add_argument("--debug", action="store_true", help="show a traceback on errors")
    p.add_argument("--catalog", metavar="PATH", help="extra chip catalog: a .toml file or a directory of them")
    if chip:
        p.add_argument(
            "--chip",
            required=chip_required,
            metavar="NAME|FILE.toml",
            help="chip from the catalog (see `rooftop chips`) or a chip file",
        )


def chip_from_args(args: argparse.Namespace) -> Chip:
    from rooftop.hardware.catalog import get_chip

    return get_chip(args.chip, getattr(args, "catalog", None))


def parse_kv_ints(text: str, what: str) -> dict[str, int]:
    """ "B=4096,D=8192" -> {"B": 4096, "D": 8192}; values accept "4k", "1M"."""
    from rooftop.units import parse_number

    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise InvalidConfigError(f"cannot read {what} {part!r}: expected NAME=VALUE, e.g. B=4096")
        k, v = (s.strip() for s in part.split("=", 1))
        value = parse_number(v)
        if value != int(value) or value < 1:
            raise InvalidConfigError(f"{what} {k}={v} must be a positive integer")
        out[k] = int(value)
    return out


def emit(out: Output, args: argparse.Namespace) -> None:
    plot = getattr(args, "plot", None)
    if plot:
        for fn in out.plots:
            fn(plot)
    if getattr(args, "json", False):
        from rooftop.report.serialize import to_json

        sys.stdout.write(to_json(out.payload) + "\n")
    else:
        from rich.console import Console

        console = Console() if sys.stdout.isatty() else Console(width=140)
        out.render(console)
        if plot:
            console.print(f"plot written to {plot}")
