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
Exit codes: 0 done, 2 bad input, 141 when the reader of stdout goes away (`rooftop hlo ... | head`),
130 on Ctrl-C, 1 an internal error (a bug: please report it).
"""


def limits() -> str:
    """The bounds every command checks its input against (each a one-line error past it), read from
    the constants the code uses so that this page cannot drift from them."""
    from rooftop.analysis.hlo.groups import MAX_DEVICES
    from rooftop.cli.train import MAX_SEQUENCES, MAX_TOP
    from rooftop.hardware.chip import MAX_CHIPS, MAX_TORUS_DIMS
    from rooftop.hardware.topology import MAX_MESH_AXES
    from rooftop.model.limits import MAX_EXPERTS, MAX_LAYERS, MAX_TOKENS, MAX_VOCAB, MAX_WIDTH
    from rooftop.plan.train.search import MAX_LAYOUTS
    from rooftop.units import MAX_QUANTITY

    rows = [
        ("chips in a slice (`--chips`, `--topology`)", MAX_CHIPS),
        ("torus dimensions of a topology", MAX_TORUS_DIMS),
        ("mesh axes (`--mesh`)", MAX_MESH_AXES),
        ("devices in an HLO module's replica groups", MAX_DEVICES),
        ("tokens: batch, sequence, prompt and generation lengths, context", MAX_TOKENS),
        ("sequences per optimizer step (`train`)", MAX_SEQUENCES),
        ("layouts a training search evaluates (`train`)", MAX_LAYOUTS),
        ("layouts shown with their breakdown (`train --top`)", MAX_TOP),
        ("layers of a model", MAX_LAYERS),
        ("a model width (d_model, d_ff, head dim, expert width)", MAX_WIDTH),
        ("vocabulary", MAX_VOCAB),
        ("experts", MAX_EXPERTS),
        ("any quantity with a unit (`--bytes 1.5GiB`, `--flops 3e12`)", MAX_QUANTITY),
    ]
    lines = ["## Input limits", "", "| input | at most |", "|---|---|"]
    lines += [f"| {what} | {value:,.0f} |" if isinstance(value, int) else f"| {what} | {value:g} |"
              for what, value in rows]  # fmt: skip
    return "\n".join(lines) + "\n"


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse has no public accessor for subparsers
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def render() -> str:
    parser = build_parser()
    parts = [HEADER, limits(), "```text\n" + parser.format_help().rstrip() + "\n```\n"]
    for name, sub in subcommands(parser).items():
        parts.append(f"## rooftop {name}\n\n```text\n{sub.format_help().rstrip()}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    out = Path(__file__).with_name("cli.md")
    out.write_text(render())
    print(f"wrote {out}")
