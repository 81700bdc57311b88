"""``rooftop matmul EXPR --dims ... --chip C``: a matmul on the roofline."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rooftop.cli.common import Output, add_common, chip_from_args, parse_kv_ints
from rooftop.errors import InvalidConfigError, shown

if TYPE_CHECKING:
    from rooftop.hardware.chip import Chip
    from rooftop.sharding.notation import MatmulExpr
    from rooftop.sharding.strategy import Dtypes


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    p.add_argument(
        "--search",
        action="store_true",
        help="with --topology: search the inputs' shardings over the mesh for the fastest (its collectives, "
        "the top 10)",
    )
    p.add_argument(
        "--critical",
        metavar="DIM",
        help="solve for the smallest size of DIM at which the matmul is compute-bound (the book's critical batch)",
    )
    p.add_argument(
        "--sweep",
        metavar="DIM=LO:HI",
        help="time the matmul at every power of 2 of DIM from LO to HI (--plot draws FLOP/s against it)",
    )
    p.add_argument(
        "--series",
        metavar="D=..,F=..;D=..",
        help="with --sweep: one line per ';'-separated set of other dims, e.g. 'D=4096,F=16384;D=8192,F=32768'",
    )
    p.set_defaults(func=run)


def dtypes_from_args(args: argparse.Namespace) -> Dtypes:
    from rooftop.sharding.strategy import Dtypes

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
    if is_sharded(expr) or args.mesh or args.topology or args.search:
        if args.critical or args.sweep:
            raise InvalidConfigError("--critical and --sweep take an unsharded matmul (no --topology, --mesh or _X)")
        return run_sharded(args, expr, sizes, chip, dtypes)
    cost = local_matmul_cost(expr, sizes, dtypes)
    est = roofline(cost, chip)
    compute = next(iter(cost.flops_by))[1] if cost.flops_by else dtypes.lhs
    out = Output(
        report.matmul_payload(expr, sizes, dtypes, compute, est),
        lambda console: report.render_matmul(console, expr, chip, est),
        [lambda path: report.plot_matmul(path, expr, chip, est, compute)],
    )
    return _solve(args, expr, sizes, chip, dtypes, out)


def _sweep_values(text: str) -> tuple[str, list[int]]:
    """ "B=1:4096" -> ("B", [1, 2, 4, ..., 4096]): every power of 2 from LO to HI, and HI."""
    from rooftop.cli.common import MAX_DIM, count

    dim, sep, rng = text.partition("=")
    lo_text, colon, hi_text = rng.partition(":")
    if not sep or not colon or not dim.strip():
        raise InvalidConfigError(f"cannot read --sweep {shown(text)}: expected DIM=LO:HI, e.g. B=1:4096")
    lo, hi = count(lo_text, "--sweep LO", MAX_DIM), count(hi_text, "--sweep HI", MAX_DIM)
    if hi < lo:
        raise InvalidConfigError(f"--sweep {shown(text)}: HI {hi} is below LO {lo}")
    values: list[int] = []
    n = lo
    while n < hi and len(values) < MAX_SWEEP:
        values.append(n)
        n *= 2
    return dim.strip(), [*values, hi]


#: most sizes a sweep times (powers of 2 over 62 bits are fewer)
MAX_SWEEP = 64


def _solve(
    args: argparse.Namespace, expr: MatmulExpr, sizes: dict[str, int], chip: Chip, dtypes: Dtypes, out: Output
) -> Output:
    """Add ``--critical`` and ``--sweep`` to an unsharded matmul's output."""
    from rooftop.report import matmul_solve as solved
    from rooftop.sharding.solve import critical_size, sweep

    renders = [out.render]
    if args.critical:
        c = critical_size(expr, sizes, args.critical, chip, dtypes)
        out.payload["critical"] = solved.critical_dict(c)
        renders.append(lambda console: solved.render_critical(console, c))
    if args.series and not args.sweep:
        raise InvalidConfigError("--series gives the lines of a --sweep; give --sweep DIM=LO:HI too")
    if args.sweep:
        dim, values = _sweep_values(args.sweep)
        series = [parse_kv_ints(part, "--series") for part in (args.series or "").split(";") if part.strip()]
        lines = sweep(expr, sizes, dim, values, series, chip, dtypes)
        out.payload["sweep"] = solved.sweep_dict(dim, lines)
        renders.append(lambda console: solved.render_sweep(console, dim, lines))
        out.plots[:] = [lambda path: solved.plot_sweep(path, chip, dim, lines)]

    def render(console: object) -> None:
        for r in renders:
            r(console)

    return Output(out.payload, render, out.plots)
