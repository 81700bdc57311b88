"""``rooftop matmul "A[I_X, J] @ B[J, K_Y] -> C[I_X, K_Y]" --dims ... --chip C --topology T --mesh M``.

Called by cli/matmul.py for sharded expressions. The top-level roofline keys describe the
per-device matmul plus the chosen strategy's collectives (estimate_dict); ``steps`` lists
them in order, ``alternatives`` the other strategies with their bounds.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from rooftop.cli.common import Output
from rooftop.errors import InvalidConfigError
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, make_mesh, parse_topology
from rooftop.report.formulas import term_formula
from rooftop.report.serialize import estimate_dict
from rooftop.report.table import table
from rooftop.sharding.matmul import Dtypes, ShardedMatmul, TimedStrategy, analyze_sharded_matmul
from rooftop.sharding.notation import MatmulExpr
from rooftop.sharding.shard import Sharding
from rooftop.units import format_bytes, format_duration, format_number


def _steps(t: TimedStrategy) -> list[dict[str, Any]]:
    out = []
    for step, secs, terms in zip(t.strategy.steps, t.step_times_s, t.step_terms, strict=True):
        formula = "; ".join(term_formula(x) for x in terms)
        row: dict[str, Any] = {
            "kind": step.kind,
            "axes": list(step.axes),
            "bytes": step.bytes,
            "time_s": secs,
            "what": step.what,
            "formula": formula,
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


def sharded_dict(r: ShardedMatmul, mesh: Mesh) -> dict[str, Any]:
    best = r.best
    sizes = dict(r.sizes)
    return {
        **estimate_dict(best.estimate),
        "comm_s": best.comm_s,
        "per_device_flops": best.estimate.flops,
        "total_flops": r.total_flops,
        "strategy": best.strategy.name,
        "output_sharding": best.strategy.output.notation(),
        "output_given": r.expr.out_given,
        "operands": {
            "lhs": _operand(r.inputs[0], sizes, mesh, r.dtypes.lhs),
            "rhs": _operand(r.inputs[1], sizes, mesh, r.dtypes.rhs),
            "out": _operand(best.strategy.output, sizes, mesh, r.dtypes.out),
        },
        "as_multiplied": {
            "lhs": best.strategy.lhs.notation(),
            "rhs": best.strategy.rhs.notation(),
            "local_dims": dict(best.strategy.local_sizes),
            "slices": list(best.strategy.slices),
        },
        "steps": _steps(best),
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


def run_sharded(
    args: argparse.Namespace, expr: MatmulExpr, sizes: dict[str, int], chip: Chip, dtypes: Dtypes
) -> Output:
    if not getattr(args, "topology", None):
        raise InvalidConfigError(
            f"a sharded matmul needs --topology (the physical slice its collectives run on), e.g. --topology "
            f"{'16x8' if chip.topology.kind == 'switched' else '4x4x4'} --mesh ..."
        )
    mesh = make_mesh(parse_topology(chip, args.topology), getattr(args, "mesh", None))
    r = analyze_sharded_matmul(expr, sizes, mesh, chip, dtypes)
    payload = {
        "expr": str(expr),
        "dims": sizes,
        "dtypes": {
            "lhs": dtypes.lhs,
            "rhs": dtypes.rhs,
            "out": dtypes.out,
            "compute": next(iter(r.best.strategy.matmul_cost.flops_by))[1],
        },
        "topology": mesh.topology.spec,
        "mesh": mesh.spec(),
        **sharded_dict(r, mesh),
    }

    def render(console: Console) -> None:
        best = r.best
        console.print(
            table(
                f"{expr} on {chip.name} {mesh.topology.spec} ({mesh.spec()})",
                ["operand", "sharding", "per-device shape", "bytes/device"],
                [
                    (k, v["sharding"], v["local_shape"], format_bytes(v["bytes_per_device"]))
                    for k, v in payload["operands"].items()
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
            console.print(f"  {note}")
        est = best.estimate
        rows = [
            ("per-device FLOPs", format_number(est.flops, "FLOP")),
            ("compute", format_duration(est.compute_s)),
            ("memory", format_duration(est.memory_s)),
            ("communication", format_duration(est.network_s)),
            ("lower bound (overlap)", format_duration(est.lower_bound_s)),
            ("upper bound (serial)", format_duration(est.upper_bound_s)),
            ("bound", f"[bold]{est.bound}[/bold]"),
            ("output", best.strategy.output.notation()),
        ]
        console.print(table("per device", ["quantity", "value"], rows))
        if r.alternatives:
            console.print(
                table(
                    "alternatives",
                    ["strategy", "output", "comm", "lower bound", "upper bound"],
                    [
                        (
                            t.strategy.name,
                            t.strategy.output.notation(),
                            format_duration(t.comm_s),
                            format_duration(t.estimate.lower_bound_s),
                            format_duration(t.estimate.upper_bound_s),
                        )
                        for t in r.alternatives
                    ],
                )
            )

    def plot(path: str) -> None:
        from rooftop.report.plot import roofline_chart

        compute = payload["dtypes"]["compute"]
        roofline_chart(chip, [(f"{expr} (per device)", r.best.estimate, compute, "matrix")], path)

    return Output(payload, render, [plot])
