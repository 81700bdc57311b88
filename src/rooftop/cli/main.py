"""The ``rooftop`` command: shared options, subcommand dispatch, errors as one line.

Each subcommand module, imported explicitly below, exposes ``register(subparsers)``; the
parser it adds sets ``func`` to a function ``(args) -> Output``. Those modules import
only what their parsers need at the top; everything heavy is imported by the function
that runs the command, so ``rooftop --help`` starts fast. This module prints the Output as JSON
(``--json``) or as rich tables, and turns every RooftopError into one line on stderr
with exit code 2 (a traceback only with ``--debug``).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn

from rooftop import __version__
from rooftop.cli import calibrate as calibrate_cmd
from rooftop.cli import chips as chips_cmd
from rooftop.cli import collective as collective_cmd
from rooftop.cli import compare as compare_cmd
from rooftop.cli import diff as diff_cmd
from rooftop.cli import hlo as hlo_cmd
from rooftop.cli import limits as limits_cmd
from rooftop.cli import matmul as matmul_cmd
from rooftop.cli import models as models_cmd
from rooftop.cli import p2p as p2p_cmd
from rooftop.cli import profile as profile_cmd
from rooftop.cli import roofline as roofline_cmd
from rooftop.cli import serve as serve_cmd
from rooftop.cli import shard as shard_cmd
from rooftop.cli import train as train_cmd
from rooftop.cli.common import Output, _quiet_stdout, emit
from rooftop.cli.flags import error_line
from rooftop.errors import InvalidConfigError, RooftopError, one_line, shown

#: every subcommand module, in the order ``rooftop --help`` lists them
COMMANDS: tuple[ModuleType, ...] = (
    chips_cmd,
    matmul_cmd,
    roofline_cmd,
    collective_cmd,
    p2p_cmd,
    shard_cmd,
    models_cmd,
    train_cmd,
    limits_cmd,
    serve_cmd,
    compare_cmd,
    hlo_cmd,
    profile_cmd,
    diff_cmd,
    calibrate_cmd,
)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (with a pointer to --help), exit 2."""

    def error(self, message: str) -> NoReturn:
        # argparse echoes the bad value whole: an argument with a newline or of a megabyte stays one short line
        self.exit(2, f"{self.prog}: error: {one_line(message, 400)} (see {self.prog} --help)\n")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """As argparse, but an option no parser knows is reported by the subcommand's parser (its name, its
        --help) with the closest of its options: "rooftop serve: error: unrecognized arguments: --promt-len
        (did you mean --prompt-len?)", not the top parser's bare line."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            sub = next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
            parser = sub.choices.get(str(getattr(ns, "command", "")), self) if sub is not None else self
            parser.error(_unrecognized(parser, extras))
        return ns


def _unrecognized(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    import difflib

    known = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    hints = []
    for extra in extras:
        if extra.startswith("--") and len(extra) <= 100:
            close = difflib.get_close_matches(extra.split("=", 1)[0], known, n=1, cutoff=0.6)
            hints += close
    text = f"unrecognized arguments: {' '.join(extras)}"
    return text + (f" (did you mean {', '.join(hints)}?)" if hints else "")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="rooftop",
        description="Roofline numbers for LLM training and serving: ops, collectives, models, plans, profiles.",
    )
    parser.add_argument("--version", action="version", version=f"rooftop {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    sub.required = True
    for mod in COMMANDS:
        mod.register(sub)
    return parser


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The parser ``main`` reads with, built once per process: every subcommand's options take about 6 ms to
    add, which a notebook or a test suite calling ``main`` a thousand times paid on each call (parsing
    leaves the parser as it was; help is formatted at the terminal's width of the moment)."""
    return build_parser()


def _check_catalog(args: argparse.Namespace) -> None:
    """--catalog must name a chip file or a folder of them, whatever the command."""
    catalog = getattr(args, "catalog", None)
    if catalog is None:
        return
    if not str(catalog).strip():
        raise InvalidConfigError("--catalog is empty: give a .toml chip file or a folder of them")
    from rooftop.hardware.catalog import load_chips

    load_chips(catalog)


def _check_empty(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A flag or argument given as '' (or blanks) is an error naming it, never a value silently
    skipped: ``--topology ''`` fell back to one chip, ``--mesh ''`` and ``--tokens ''`` were ignored.
    (--catalog and --plot have their own checks.)"""
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    command = sub.choices.get(args.command) if sub is not None else None
    for action in command._actions if command is not None else ():
        value = getattr(args, action.dest, None)
        if action.dest not in ("catalog", "plot") and isinstance(value, str) and not value.strip():
            name = "/".join(action.option_strings) or str(action.metavar or action.dest)
            raise InvalidConfigError(f"{name} is empty: give a value (see rooftop {args.command} --help)")


def _check_plot(args: argparse.Namespace) -> None:
    """--plot names a file a chart can be written to (an empty name, a folder, an unknown extension
    are one-line errors), checked before the command runs: a train search is not wasted on it."""
    plot = getattr(args, "plot", None)
    if plot is not None:
        from rooftop.report.plot import check_plot_path

        check_plot_path(plot)


def _check_values(args: argparse.Namespace) -> None:
    """Every option rooftop has takes one value: argparse reads ``--chip=--`` as an empty list; and no
    value holds a NUL character."""
    for name, value in vars(args).items():
        if isinstance(value, list):
            flag = "--" + name.replace("_", "-")
            raise InvalidConfigError(f"{flag} has no value ('--' ends the options): give one, e.g. {flag} VALUE")
        if isinstance(value, str) and "\x00" in value:  # open() refuses it: an internal error before
            raise InvalidConfigError(f"{shown(value)} contains a NUL character: no file name, name or number holds one")


def _exit_unfreed() -> NoReturn:
    """End the process with status 0 once its output is flushed and the atexit handlers have run, without
    freeing what the command made: a module of 200,000 instructions (``rooftop hlo``) takes 0.2 CPU-s to
    free object by object, and the operating system takes the memory back at once."""
    import atexit
    import os

    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        raise
    sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        _check_values(args)
        _check_catalog(args)
        _check_empty(parser, args)
        _check_plot(args)
        out: Output = args.func(args)
        emit(out, args)
        if argv is None:  # the process's own command line: it ends here
            _exit_unfreed()
    except RooftopError as err:
        if getattr(args, "debug", False):
            raise
        print(f"rooftop {args.command}: error: {error_line(err)}", file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:  # the reader of stdout went away (`| head`): 128 + SIGPIPE, as a shell reports it
        return 141
    except KeyboardInterrupt:
        return 130
    except RecursionError:
        if getattr(args, "debug", False):
            raise
        print(f"rooftop {args.command}: error: input nested too deeply to read", file=sys.stderr)
        return 2
    except Exception as exc:
        if getattr(args, "debug", False):
            raise
        text = one_line(str(exc), 300)
        print(
            f"rooftop {args.command}: internal error: {type(exc).__name__}: {text} (rerun with --debug "
            "for the traceback, and please report it)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
