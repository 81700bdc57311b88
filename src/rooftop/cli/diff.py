"""``rooftop diff A B --chip C [--chip-b C2] [--mesh M] [--top N] [--html FILE.html]``: two profiles or two HLO
modules op by op (analysis/diff.py)."""

from __future__ import annotations

import argparse

from rooftop.cli.common import Output, add_common, chip_from_args, int_type


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("diff", help="two profiles or two HLO modules op by op: added, removed, changed, step delta")
    p.add_argument("a", help="run A: a profile (what `rooftop profile` reads) or an HLO text module")
    p.add_argument("b", help="run B, of the same kind as A")
    add_common(p)
    p.add_argument("--chip-b", metavar="NAME|FILE.toml", help="chip B ran on and is priced on (default: --chip)")
    p.add_argument("--mesh", help="name the mesh axes of both runs, e.g. data=4,model=2 (default: inferred)")
    p.add_argument("--topology", help="physical slice to time collectives on (default: one for the device count)")
    p.add_argument(
        "--top", type=int_type(0, 10**6), default=20, metavar="N", help="rows to show, by the size of their delta (20)"
    )
    p.add_argument("--html", metavar="FILE.html", help="write a self-contained HTML page of the diff")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> Output:
    from rooftop.analysis.diff import diff_runs
    from rooftop.hardware.catalog import get_chip
    from rooftop.report import diff as report

    if args.html is not None:
        from rooftop.report.html import check_html_path

        check_html_path(args.html)
    chip = chip_from_args(args)
    chip_b = get_chip(args.chip_b, args.catalog) if args.chip_b is not None else None
    diff = diff_runs(args.a, args.b, chip, chip_b, args.mesh, args.topology)
    if args.html is not None:
        from rooftop.report.html import write_html

        write_html(args.html, report.diff_html(diff))
    return Output(report.diff_payload(diff), lambda console: report.render_diff(console, diff, args.top))
