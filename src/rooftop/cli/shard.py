"""``rooftop shard "A[I_XY, J]" --shape 128,2048 --dtype int8 --mesh X=2,Y=8,Z=2``: an array
on a mesh (no topology needed): per-device shape and bytes, total bytes over all devices."""

from __future__ import annotations

import argparse

from rooftop.cli.common import MAX_DIM, Output, add_common, count
from rooftop.errors import InvalidConfigError, shown


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("shard", help="per-device shape and bytes of an array sharded over a mesh")
    p.add_argument("tensor", help="the array in the notation, e.g. 'A[I_XY, J]'")
    p.add_argument("--shape", required=True, help="global size of each dim in order, e.g. 128,2048")
    p.add_argument("--dtype", default="bf16", help="element type (default bf16)")
    p.add_argument("--mesh", required=True, help="mesh axes, e.g. X=2,Y=8,Z=2")
    add_common(p, chip=False)
    p.set_defaults(func=run)


def parse_shape(text: str) -> tuple[int, ...]:
    out = [
        count(part, "--shape size", MAX_DIM)
        for part in filter(None, (p.strip() for p in text.replace("x", ",").split(",")))
    ]
    if not out:
        raise InvalidConfigError(f"--shape {shown(text)} is empty; e.g. --shape 128,2048")
    return tuple(out)


def run(args: argparse.Namespace) -> Output:
    from rooftop.hardware.topology import parse_mesh_spec
    from rooftop.report import shard as report
    from rooftop.sharding.notation import parse_tensor
    from rooftop.sharding.shard import shard_array

    mesh = parse_mesh_spec(args.mesh)
    rep = shard_array(parse_tensor(args.tensor, "A"), parse_shape(args.shape), args.dtype, mesh)
    return Output(report.shard_payload(rep, mesh), lambda console: report.render_shard(console, rep, mesh))
