"""Regenerate docs/cli.md from the CLI's own --help: `python docs/gen_cli.py`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ["COLUMNS"] = "100"

from rooftop.cli.main import build_parser

HEADER = """# CLI reference

Generated from `rooftop COMMAND --help` by `python docs/gen_cli.py`; do not edit by hand.
Every command takes `--json` (the stable contract: raw SI numbers, `schema_version`) and prints
rich tables otherwise. Bad input: one line on stderr, exit code 2; `--debug` shows a traceback.
"""


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse has no public accessor for subparsers
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def render() -> str:
    parser = build_parser()
    parts = [HEADER, "```text\n" + parser.format_help().rstrip() + "\n```\n"]
    for name, sub in subcommands(parser).items():
        parts.append(f"## rooftop {name}\n\n```text\n{sub.format_help().rstrip()}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    out = Path(__file__).with_name("cli.md")
    out.write_text(render())
    print(f"wrote {out}")
