"""``rooftop chips [NAME]``: list the catalog or show one chip with its sources."""

from __future__ import annotations

import argparse

from rooftop.cli.common import Output, add_common


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("chips", help="list the chip catalog or show one chip with the source of every figure")
    p.add_argument("name", nargs="?", help="chip name or alias (e.g. tpu-v5e, 'H100 SXM')")
    add_common(p, chip=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> Output:
    from rooftop.hardware.catalog import get_chip, load_chips
    from rooftop.report import chips as report

    if args.name:
        chip = get_chip(args.name, args.catalog)
        return Output(report.chip_payload(chip), lambda console: report.render_chip(console, chip))
    chips = load_chips(args.catalog)
    return Output(report.catalog_payload(chips), lambda console: report.render_catalog(console, chips))
