"""``rooftop roofline --chip C --flops F --bytes B``: a generic op on the roofline."""

from __future__ import annotations

import argparse

from rooftop.cli.common import Output, add_common, chip_from_args


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("roofline", help="time an op given by its FLOPs and bytes on a chip")
    add_common(p)
    p.add_argument("--flops", required=True, help="FLOPs of the op, e.g. 5.5e14 or 550T")
    p.add_argument("--bytes", required=True, dest="nbytes", help="HBM bytes moved, e.g. 2GiB or 1.5e9")
    p.add_argument("--dtype", default="bf16", help="compute dtype (default bf16)")
    p.add_argument("--unit", choices=["matrix", "vector"], default="matrix", help="compute unit (default matrix)")
    p.add_argument("--plot", metavar="FILE.png", help="write a roofline chart with the op placed on it")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> Output:
    from rooftop.cost.op import explicit
    from rooftop.cost.roofline import roofline
    from rooftop.report import roofline as report
    from rooftop.units import parse_bytes, parse_number

    chip = chip_from_args(args)
    dtype, unit = args.dtype, args.unit
    cost = explicit(parse_number(args.flops), parse_bytes(args.nbytes), dtype, unit)
    est = roofline(cost, chip)
    return Output(
        report.op_payload(chip, cost, est, dtype, unit),
        lambda console: report.render_op(console, chip, est, dtype, unit),
        [lambda path: report.plot_op(path, chip, est, dtype, unit)],
    )
