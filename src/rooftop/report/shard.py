"""``rooftop shard``: an array on a mesh (per-device shape and bytes, copies) as JSON and a table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rooftop.report.jaxspec import jax_array_dict, mesh_code, partition_spec
from rooftop.report.table import table
from rooftop.units import format_bytes, plural

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.sharding.shard import ShardReport


def shard_payload(rep: ShardReport, mesh: Mapping[str, int]) -> dict[str, Any]:
    """``rooftop shard --json``."""
    sh = rep.sharding
    dims = [
        {"dim": d, "size": s, "axes": list(a), "ways": w, "local": ls}
        for d, s, a, w, ls in zip(sh.dims, rep.shape, sh.axes, rep.local_ways, rep.local_shape, strict=True)
    ]
    return {
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
        "jax": jax_array_dict(sh, rep.shape, rep.dtype, mesh),
    }


def render_shard(console: Console, rep: ShardReport, mesh: Mapping[str, int]) -> None:
    mesh_txt = ",".join(f"{k}={v}" for k, v in mesh.items())
    rows = [
        ("global shape", f"{rep.dtype}{list(rep.shape)}"),
        ("per-device shape", f"{rep.dtype}{list(rep.local_shape)}"),
        ("bytes per device", format_bytes(rep.bytes_per_device)),
        ("array bytes (one copy)", format_bytes(rep.array_bytes)),
        ("copies (replicated over)", f"{rep.copies} ({','.join(rep.replicated_axes) or 'none'})"),
        ("total bytes over all devices", format_bytes(rep.total_bytes)),
        ("in JAX (Part 10)", f"NamedSharding({mesh_code(mesh)}, {partition_spec(rep.sharding)})"),
    ]
    title = f"{rep.sharding.notation()} on mesh {mesh_txt} ({plural(rep.devices, 'device')})"
    console.print(table(title, ["quantity", "value"], rows))
