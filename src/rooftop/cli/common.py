"""Options and output shared by every subcommand.

Kept light: building the parser must not load numpy, rich or the catalogs, so this
module imports them only inside the functions that run a command.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rooftop.errors import InvalidConfigError, shown, visible

if TYPE_CHECKING:
    from rooftop.hardware.chip import Chip

#: largest size of one tensor dim read from a flag (XLA's dims are int64)
MAX_DIM = 1 << 62
#: largest token count (sequence, prompt, generated tokens, batch) read from a flag: model.limits.MAX_TOKENS
MAX_TOKENS = 1 << 40


def int_type(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse ``type=``: ASCII digits in [lo, hi]; the usage error echoes at most ~60
    characters of the value ("²" and a 5,000-digit number are one short line)."""

    def read(text: str) -> int:
        from rooftop.units import parse_int

        try:
            return parse_int(text, "value", lo, hi)
        except InvalidConfigError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    read.__name__ = "integer"  # argparse names the type in some messages
    return read


def count(text: str, flag: str, hi: int, lo: int = 1) -> int:
    """A count given to a flag: "4096", "8Ki", "4M" or "1e6", a whole number in [lo, hi]."""
    from rooftop.units import parse_count

    return parse_count(text, flag, lo, hi)


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
    """The chip of ``--chip``, with its price from ``--price`` when that names it."""
    from rooftop.hardware.catalog import get_chip

    chip = get_chip(args.chip, getattr(args, "catalog", None))
    prices = getattr(args, "price", None)
    return with_prices(chip, prices_from(prices, getattr(args, "catalog", None))) if prices else chip


def add_price(p: argparse.ArgumentParser) -> None:
    """``--price CHIP=USD_PER_HOUR,...``: override catalog prices per chip-hour."""
    p.add_argument(
        "--price",
        metavar="CHIP=USD,...",
        help="override the catalog's on-demand price per chip-hour, e.g. h100=2.10,tpu-v5p=3.5 (names or aliases)",
    )


#: the collective algorithms built in (cost/algorithms.py), for the --algorithm flags' help
ALGORITHMS_HELP = (
    "hierarchical (staged over the link levels), in-network (the switches sum the all-reduce), ring (one flat "
    "ring running one way, NCCL's step latencies), bidirectional-ring (the ring with halves sent both ways), "
    "tree (all-reduce up and down NCCL's double binary tree), or any algorithm registered in cost/algorithms.py; "
    "latency figures from catalog/frameworks/training.toml"
)


#: the default of ``--algorithm`` in train and serve (and compare, which shares their flags)
JOB_DEFAULT = "training: the framework's library's, ring for NCCL and hierarchical for XLA; serving: hierarchical"


def add_algorithm(p: argparse.ArgumentParser, default: str) -> None:
    """``--algorithm NAME``: how the collective library runs the gather family (``algorithm_from``)."""
    p.add_argument(
        "--algorithm",
        metavar="NAME",
        help=f"how all-gather, reduce-scatter and all-reduce run: {ALGORITHMS_HELP} (default: {default})",
    )


def algorithm_from(args: argparse.Namespace) -> Any:
    """The ``Algorithm`` of ``--algorithm`` with its catalog latency figures (None when absent or
    hierarchical, the staged rules); an unknown name is one line naming the choices."""
    name = getattr(args, "algorithm", None)
    if name is None or name == "hierarchical":
        return None
    from rooftop.plan.train.framework import catalog_algorithm

    return catalog_algorithm(name)


def prices_from(text: str, catalog: str | None = None) -> dict[str, float]:
    """ "h100=2.1,tpu-v5p=3.5" -> {canonical chip name: USD per chip-hour}; names resolved as --chip is."""
    from rooftop.hardware.catalog import get_chip
    from rooftop.units import parse_number

    out: dict[str, float] = {}
    for part in filter(None, (s.strip() for s in text.split(","))):
        name, sep, value = (s.strip() for s in part.partition("="))
        if not sep or not name or not value:
            raise InvalidConfigError(f"cannot read --price {shown(part)}: expected CHIP=USD_PER_HOUR, e.g. h100=2.10")
        usd = parse_number(value)
        if not 0 <= usd <= 1e6:
            raise InvalidConfigError(f"--price {shown(part)}: USD per chip-hour must be in [0, 1e6]")
        out[get_chip(name, catalog).name] = float(usd)
    return out


def with_prices(chip: Chip, prices: dict[str, float]) -> Chip:
    """``chip`` with the price ``prices`` gives its name (the figure's source says it came from --price)."""
    if chip.name not in prices:
        return chip
    from dataclasses import replace
    from types import MappingProxyType

    from rooftop.hardware.chip import Figure

    usd = prices[chip.name]
    sources = {**chip.sources, "price.usd_per_chip_hour": Figure(usd, "--price on the command line")}
    return replace(chip, price_usd_per_hour=usd, price_as_of="", sources=MappingProxyType(sources))


def parse_kv_ints(text: str, what: str) -> dict[str, int]:
    """ "B=4096,D=8192" -> {"B": 4096, "D": 8192}; values accept "4k", "1M" (whole, in [1, MAX_DIM])."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise InvalidConfigError(f"cannot read {what} {shown(part)}: expected NAME=VALUE, e.g. B=4096")
        k, v = (s.strip() for s in part.split("=", 1))
        if not k:
            raise InvalidConfigError(f"{what} {shown(part)} has no name before '='; e.g. B=4096")
        if k in out:
            raise InvalidConfigError(f"{what} gives {shown(k)} twice")
        out[k] = count(v, f"{what} {shown(k)}", MAX_DIM)
    return out


#: the width tables are drawn at when the output is not a terminal and COLUMNS is not set
DEFAULT_WIDTH = 140
MIN_WIDTH, MAX_WIDTH = 20, 10_000


def table_width(columns: str | None, terminal: bool) -> int | None:
    """The width tables are drawn at: COLUMNS when it is set to a width in [MIN_WIDTH, MAX_WIDTH] (any
    other value is ignored, as the environment may hold anything there), else the terminal's (None:
    rich measures it), else DEFAULT_WIDTH."""
    text = (columns or "").strip()
    if text.isascii() and text.isdigit() and len(text) <= 6 and MIN_WIDTH <= int(text) <= MAX_WIDTH:
        return int(text)
    return None if terminal else DEFAULT_WIDTH


def _quiet_stdout() -> None:
    """Point stdout at /dev/null after its reader went away (``rooftop hlo ... | head``), so that the
    interpreter's last flush at exit does not fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (a test's StringIO): nothing to flush
        pass


def emit(out: Output, args: argparse.Namespace) -> None:
    plot = getattr(args, "plot", None)
    if plot:
        for fn in out.plots:
            fn(plot)
    if getattr(args, "json", False):
        from rooftop.report.serialize import write_json

        try:
            write_json(out.payload, sys.stdout)
            sys.stdout.flush()
        except BrokenPipeError:
            _quiet_stdout()
            raise
    else:
        from rich.console import Console

        class _Console(Console):
            def on_broken_pipe(self) -> None:  # rich exits 1 here; the CLI says a closed pipe its own way
                _quiet_stdout()
                raise BrokenPipeError

        console = _Console(width=table_width(os.environ.get("COLUMNS"), sys.stdout.isatty()))
        out.render(console)
        written = (
            ("plot", plot),
            ("timeline", getattr(args, "timeline", None)),
            ("HTML report", getattr(args, "html", None)),
        )
        for what, path in written:
            if path:  # the command wrote it (or stopped with an error before this)
                console.print(f"{what} written to {visible(path)}", markup=False, highlight=False)  # shown, not obeyed
