"""``rooftop matmul EXPR --dims ... --chip C``: a matmul on the roofline."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rooftop.cli.common import Output, add_common, chip_from_args, parse_kv_ints

if TYPE_CHECKING:
    from rooftop.sharding.matmul import Dtypes


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("matmul", help="time a matmul written as 'A[B,D] @ W[D,F]' (sharded: 'A[I_X,J] @ B[J,K_Y]')")
    p.add_argument("expr", help="the matmul in the notation, e.g. 'A[B,D] @ W[D,F] -> C[B,F]'")
    p.add_argument("--dims", required=True, help="dim sizes, e.g. B=4096,D=8192,F=8192")
    add_common(p)
    p.add_argument("--dtype", default="bf16", help="dtype of all operands (default bf16)")
    p.add_argument("--lhs-dtype", help="dtype of the left operand (overrides --dtype)")
    p.add_argument("--rhs-dtype", help="dtype of the right operand, e.g. int8 weights")
    p.add_argument("--out-dtype", help="dtype of the output")
    p.add_argument("--compute-dtype", help="dtype the matrix unit computes in (default: the wider input)")
    p.add_argument("--topology", help="physical slice for sharded matmuls, e.g. 4x4x4 or 16x8 (GPU)")
    p.add_argument("--mesh", help="named mesh axes on the topology, e.g. X=4,Y=4,Z=4")
    p.add_argument("--plot", metavar="FILE.png", help="write a roofline chart with the matmul placed on it")
    p.set_defaults(func=run)


def dtypes_from_args(args: argparse.Namespace) -> Dtypes:
    from rooftop.sharding.matmul import Dtypes

    return Dtypes(
        args.lhs_dtype or args.dtype, args.rhs_dtype or args.dtype, args.out_dtype or args.dtype, args.compute_dtype
    )


def run(args: argparse.Namespace) -> Output:
    from rooftop.cli.sharded_matmul import run_sharded
    from rooftop.cost.roofline import roofline
    from rooftop.report import matmul as report
    from rooftop.sharding.matmul import is_sharded, local_matmul_cost
    from rooftop.sharding.notation import parse_matmul

    expr = parse_matmul(args.expr)
    sizes = parse_kv_ints(args.dims, "--dims")
    chip = chip_from_args(args)
    dtypes = dtypes_from_args(args)
    if is_sharded(expr) or args.mesh or args.topology:
        return run_sharded(args, expr, sizes, chip, dtypes)
    cost = local_matmul_cost(expr, sizes, dtypes)
    est = roofline(cost, chip)
    compute = next(iter(cost.flops_by))[1] if cost.flops_by else dtypes.lhs
    return Output(
        report.matmul_payload(expr, sizes, dtypes, compute, est),
        lambda console: report.render_matmul(console, expr, chip, est),
        [lambda path: report.plot_matmul(path, expr, chip, est, compute)],
    )
