"""``rooftop matmul``: a local or sharded matmul as JSON, tables and a roofline chart.

A local matmul's payload is the expression, its dims and dtypes, then the shared roofline
keys (estimate_dict). A sharded one's top-level roofline keys describe the per-device
matmul plus the chosen strategy's collectives; ``steps`` lists them in order,
``alternatives`` the other strategies with their bounds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rooftop.report.book import book_matmul_dict
from rooftop.report.formulas import term_formula
from rooftop.report.jaxspec import jax_matmul_dict, partition_spec
from rooftop.report.serialize import estimate_dict
from rooftop.report.table import print_estimate, say, styled, table
from rooftop.units import format_bytes, format_duration, format_number

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.cost.roofline import Estimate
    from rooftop.hardware.chip import Chip
    from rooftop.hardware.topology import Mesh
    from rooftop.sharding.matmul import ShardedMatmul, TimedStrategy
    from rooftop.sharding.notation import MatmulExpr
    from rooftop.sharding.shard import Sharding
    from rooftop.sharding.strategy import Dtypes


def _dtypes_dict(dtypes: Dtypes, compute: str) -> dict[str, str]:
    return {"lhs": dtypes.lhs, "rhs": dtypes.rhs, "out": dtypes.out, "compute": compute}


def matmul_payload(
    expr: MatmulExpr, sizes: dict[str, int], dtypes: Dtypes, compute: str, est: Estimate
) -> dict[str, Any]:
    """``rooftop matmul --json`` for an unsharded matmul."""
    return {"expr": str(expr), "dims": sizes, "dtypes": _dtypes_dict(dtypes, compute), **estimate_dict(est)}


def render_matmul(console: Console, expr: MatmulExpr, chip: Chip, est: Estimate) -> None:
    print_estimate(console, f"{expr} on {chip.name}", est)


def plot_matmul(path: str, expr: MatmulExpr, chip: Chip, est: Estimate, compute: str) -> None:
    from rooftop.report.plot import roofline_chart

    roofline_chart(chip, [(str(expr), est, compute, "matrix")], path)


def _steps(t: TimedStrategy) -> list[dict[str, Any]]:
    out = []
    book = book_matmul_dict(t)["book_step_times_s"]
    for step, secs, terms, book_s in zip(t.strategy.steps, t.step_times_s, t.step_terms, book, strict=True):
        formula = "; ".join(term_formula(x) for x in terms)
        row: dict[str, Any] = {
            "kind": step.kind,
            "axes": list(step.axes),
            "bytes": step.bytes,
            "time_s": secs,
            "what": step.what,
            "formula": formula,
            "book_time_s": book_s,
        }
        if step.kind == "matmul":
            row["flops"] = t.strategy.matmul_cost.flops
        out.append(row)
    return out


def _bounds(t: TimedStrategy) -> dict[str, Any]:
    est = t.estimate
    return {
        "compute_s": est.compute_s,
        "memory_s": est.memory_s,
        "comm_s": est.network_s,
        "lower_bound_s": est.lower_bound_s,
        "upper_bound_s": est.upper_bound_s,
        "bound": est.bound,
        "book_time_s": book_matmul_dict(t)["book_time_s"],
    }


def _operand(t: Sharding, sizes: dict[str, int], mesh: Mesh, dtype: str) -> dict[str, Any]:
    local = t.local_sizes(sizes, mesh.shape)
    return {
        "sharding": t.notation(),
        "dtype": dtype,
        "shape": [sizes[d] for d in t.dims],
        "local_shape": [local[d] for d in t.dims],
        "bytes_per_device": t.local_bytes(sizes, mesh.shape, dtype),
    }


def _operands(r: ShardedMatmul, mesh: Mesh) -> dict[str, dict[str, Any]]:
    sizes = dict(r.sizes)
    return {
        "lhs": _operand(r.inputs[0], sizes, mesh, r.dtypes.lhs),
        "rhs": _operand(r.inputs[1], sizes, mesh, r.dtypes.rhs),
        "out": _operand(r.best.strategy.output, sizes, mesh, r.dtypes.out),
    }


def sharded_compute_dtype(r: ShardedMatmul) -> str:
    """The dtype the matrix unit computes the fastest strategy's local matmul in."""
    return next(iter(r.best.strategy.matmul_cost.flops_by))[1]


def sharded_dict(r: ShardedMatmul, mesh: Mesh) -> dict[str, Any]:
    """The roofline, strategy, operand, step and alternative keys of a sharded matmul."""
    best = r.best
    return {
        **estimate_dict(best.estimate),
        "comm_s": best.comm_s,
        "per_device_flops": best.estimate.flops,
        "total_flops": r.total_flops,
        "strategy": best.strategy.name,
        "output_sharding": best.strategy.output.notation(),
        "output_given": r.expr.out_given,
        "operands": _operands(r, mesh),
        "as_multiplied": {
            "lhs": best.strategy.lhs.notation(),
            "rhs": best.strategy.rhs.notation(),
            "local_dims": dict(best.strategy.local_sizes),
            "slices": list(best.strategy.slices),
        },
        "steps": _steps(best),
        **{k: v for k, v in book_matmul_dict(best).items() if k != "book_step_times_s"},
        "alternatives": [
            {
                "strategy": t.strategy.name,
                "output_sharding": t.strategy.output.notation(),
                "steps": _steps(t),
                "slices": list(t.strategy.slices),
                **_bounds(t),
            }
            for t in r.alternatives
        ],
    }


def sharded_payload(
    expr: MatmulExpr, sizes: dict[str, int], dtypes: Dtypes, mesh: Mesh, r: ShardedMatmul
) -> dict[str, Any]:
    """``rooftop matmul --json`` for a sharded matmul."""
    return {
        "expr": str(expr),
        "dims": sizes,
        "dtypes": _dtypes_dict(dtypes, sharded_compute_dtype(r)),
        "topology": mesh.topology.spec,
        "mesh": mesh.spec(),
        **sharded_dict(r, mesh),
        "jax": jax_matmul_dict(
            expr, sizes, r.inputs[0], r.inputs[1], r.best.strategy.output, (dtypes.lhs, dtypes.rhs), mesh.shape
        ),
    }


def render_sharded(console: Console, r: ShardedMatmul, mesh: Mesh, chip: Chip) -> None:
    best = r.best
    console.print(
        table(
            f"{r.expr} on {chip.name} {mesh.topology.spec} ({mesh.spec()})",
            ["operand", "sharding", "per-device shape", "bytes/device"],
            [
                (k, v["sharding"], v["local_shape"], format_bytes(v["bytes_per_device"]))
                for k, v in _operands(r, mesh).items()
            ],
        )
    )
    console.print(
        table(
            f"steps (fastest: {best.strategy.name})",
            ["step", "axes", "bytes", "time"],
            [
                (s.what, ",".join(s.axes) or "-", format_bytes(s.bytes), format_duration(secs))
                for s, secs in zip(best.strategy.steps, best.step_times_s, strict=True)
            ],
        )
    )
    for note in best.strategy.slices:
        say(console, f"  {note}")
    specs = (partition_spec(t) for t in (*r.inputs, best.strategy.output))
    say(console, "in JAX (Part 10): {} @ {} -> {} (--json gives the code)".format(*specs))
    est = best.estimate
    rows = [
        ("per-device FLOPs", format_number(est.flops, "FLOP")),
        ("compute", format_duration(est.compute_s)),
        ("memory", format_duration(est.memory_s)),
        ("communication", format_duration(est.network_s)),
        ("lower bound (overlap)", format_duration(est.lower_bound_s)),
        ("upper bound (serial)", format_duration(est.upper_bound_s)),
        ("bound", styled(est.bound, "bold")),
        ("output", best.strategy.output.notation()),
    ]
    console.print(table("per device", ["quantity", "value"], rows))
    book = book_matmul_dict(best)
    say(console, f"book ({book['book_part']}): {format_duration(book['book_time_s'])} = {book['book_formula']}")
    if book["book_why"]:
        say(console, f"differs: {book['book_why']}")
    if r.alternatives:
        console.print(
            table(
                "alternatives",
                ["strategy", "output", "comm", "lower bound", "upper bound", "book"],
                [
                    (
                        t.strategy.name,
                        t.strategy.output.notation(),
                        format_duration(t.comm_s),
                        format_duration(t.estimate.lower_bound_s),
                        format_duration(t.estimate.upper_bound_s),
                        format_duration(book_matmul_dict(t)["book_time_s"]),
                    )
                    for t in r.alternatives
                ],
            )
        )


def plot_sharded(path: str, r: ShardedMatmul, chip: Chip) -> None:
    from rooftop.report.plot import roofline_chart

    roofline_chart(chip, [(f"{r.expr} (per device)", r.best.estimate, sharded_compute_dtype(r), "matrix")], path)
