"""``rooftop roofline --chip C --flops F --bytes B``: a generic op on the roofline."""

from __future__ import annotations

import argparse

from rich.console import Console

from rooftop.cli.common import Output, add_common, chip_from_args
from rooftop.cost.op import explicit
from rooftop.cost.roofline import roofline
from rooftop.report.serialize import estimate_dict
from rooftop.report.table import print_estimate
from rooftop.units import parse_bytes, parse_number


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("roofline", help="time an op given by its FLOPs and bytes on a chip")
    add_common(p)
    p.add_argument("--flops", required=True, help="FLOPs of the op, e.g. 5.5e14 or 550T")
    p.add_argument("--bytes", required=True, dest="nbytes", help="HBM bytes moved, e.g. 2GiB or 1.5e9")
    p.add_argument("--dtype", default="bf16", help="compute dtype (default bf16)")
    p.add_argument("--unit", choices=["matrix", "vector"], default="matrix", help="compute unit (default matrix)")
    p.add_argument("--plot", metavar="FILE.png", help="write a roofline chart with the op placed on it")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> Output:
    chip = chip_from_args(args)
    cost = explicit(parse_number(args.flops), parse_bytes(args.nbytes), args.dtype, args.unit)
    est = roofline(cost, chip)
    payload = {
        "op": {"flops": cost.flops, "bytes": cost.hbm_bytes, "dtype": args.dtype, "unit": args.unit},
        **estimate_dict(est),
    }

    def render(console: Console) -> None:
        print_estimate(console, f"op on {chip.name} ({args.unit} unit, {args.dtype})", est)

    def plot(path: str) -> None:
        from rooftop.report.plot import roofline_chart

        roofline_chart(chip, [("op", est, args.dtype, args.unit)], path)

    return Output(payload, render, [plot])
