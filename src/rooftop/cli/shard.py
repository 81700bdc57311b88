"""``rooftop shard "A[I_XY, J]" --shape 128,2048 --dtype int8 --mesh X=2,Y=8,Z=2``: an array
on a mesh (no topology needed): per-device shape and bytes, total bytes over all devices."""

from __future__ import annotations

import argparse

from rich.console import Console

from rooftop.cli.common import Output, add_common
from rooftop.errors import InvalidConfigError
from rooftop.hardware.topology import parse_mesh_spec
from rooftop.report.table import table
from rooftop.sharding.notation import parse_tensor
from rooftop.sharding.shard import shard_array
from rooftop.units import format_bytes, parse_number


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("shard", help="per-device shape and bytes of an array sharded over a mesh")
    p.add_argument("tensor", help="the array in the notation, e.g. 'A[I_XY, J]'")
    p.add_argument("--shape", required=True, help="global size of each dim in order, e.g. 128,2048")
    p.add_argument("--dtype", default="bf16", help="element type (default bf16)")
    p.add_argument("--mesh", required=True, help="mesh axes, e.g. X=2,Y=8,Z=2")
    add_common(p, chip=False)
    p.set_defaults(func=run)


def parse_shape(text: str) -> tuple[int, ...]:
    out = []
    for part in filter(None, (p.strip() for p in text.replace("x", ",").split(","))):
        value = parse_number(part)
        if value != int(value) or value < 1:
            raise InvalidConfigError(f"--shape {text!r}: size {part!r} must be a positive integer")
        out.append(int(value))
    if not out:
        raise InvalidConfigError(f"--shape {text!r} is empty; e.g. --shape 128,2048")
    return tuple(out)


def run(args: argparse.Namespace) -> Output:
    mesh = parse_mesh_spec(args.mesh)
    rep = shard_array(parse_tensor(args.tensor, "A"), parse_shape(args.shape), args.dtype, mesh)
    sh = rep.sharding
    dims = [
        {"dim": d, "size": s, "axes": list(a), "ways": w, "local": ls}
        for d, s, a, w, ls in zip(sh.dims, rep.shape, sh.axes, rep.local_ways, rep.local_shape, strict=True)
    ]
    payload = {
        "tensor": sh.notation(),
        "dtype": rep.dtype,
        "mesh": mesh,
        "shape": list(rep.shape),
        "local_shape": list(rep.local_shape),
        "dims": dims,
        "bytes_per_device": rep.bytes_per_device,
        "array_bytes": rep.array_bytes,
        "devices": rep.devices,
        "copies": rep.copies,
        "replicated_axes": list(rep.replicated_axes),
        "total_bytes": rep.total_bytes,
    }

    def render(console: Console) -> None:
        mesh_txt = ",".join(f"{k}={v}" for k, v in mesh.items())
        rows = [
            ("global shape", f"{rep.dtype}{list(rep.shape)}"),
            ("per-device shape", f"{rep.dtype}{list(rep.local_shape)}"),
            ("bytes per device", format_bytes(rep.bytes_per_device)),
            ("array bytes (one copy)", format_bytes(rep.array_bytes)),
            ("copies (replicated over)", f"{rep.copies} ({','.join(rep.replicated_axes) or 'none'})"),
            ("total bytes over all devices", format_bytes(rep.total_bytes)),
        ]
        console.print(table(f"{sh.notation()} on mesh {mesh_txt} ({rep.devices} devices)", ["quantity", "value"], rows))

    return Output(payload, render)
