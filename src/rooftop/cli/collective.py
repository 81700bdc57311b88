"""``rooftop collective KIND --chip C --topology T --axes X (--bytes V | --array ... --sharding ...)``.

The array's per-device size V is the one Comm's docstring defines: for an all-gather the
per-device bytes *after* gathering (full bytes / product of the other sharded axes), for
the others the per-device bytes going in (full bytes / product of every sharded axis).
``--sharding`` names the array's dims positionally and describes the array going in.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Any

from rich.console import Console

from rooftop.cli.common import Output, add_common, chip_from_args
from rooftop.cost.collectives import CollectiveTime, collective_time
from rooftop.cost.cost import COLLECTIVE_KINDS, Comm
from rooftop.dtypes import canonical_dtype, dtype_bytes
from rooftop.errors import InvalidConfigError, ParseError
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, make_mesh, parse_topology
from rooftop.report.formulas import collective_formula, collective_why, group_why
from rooftop.report.table import table
from rooftop.sharding.notation import parse_tensor
from rooftop.sharding.shard import shard_array
from rooftop.units import format_bytes, format_duration, format_rate, parse_bytes, parse_number

_ARRAY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*\[([^\]]*)\]\s*$")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("collective", help="time a collective (all-gather, all-reduce, ...) over mesh axes")
    p.add_argument("kind", choices=COLLECTIVE_KINDS, help="the collective")
    add_common(p)
    p.add_argument("--topology", required=True, help="physical slice, e.g. 4x4x4 (TPU), 2*16x16, 16x8 (GPU)")
    p.add_argument("--mesh", help="named mesh axes on the topology, e.g. X=4,Y=4,Z=4 (default: one per dim)")
    p.add_argument("--axes", required=True, help="mesh axes the collective runs over, e.g. X or X,Y")
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument(
        "--bytes", dest="nbytes", metavar="BYTES", help="per-device bytes of the collective's array, e.g. 2MiB"
    )
    size.add_argument("--array", help="the global array, e.g. 'bf16[1024,4096]'")
    p.add_argument("--sharding", help="its sharding going in, dims named positionally, e.g. '[B_X, D_Y]'")
    p.add_argument("--sharp", action="store_true", help="in-network reduction (NVLink/InfiniBand SHARP)")
    p.set_defaults(func=run)


def parse_array(text: str) -> tuple[str, tuple[int, ...]]:
    """ "bf16[1024,4096]" -> ("bf16", (1024, 4096))."""
    m = _ARRAY.match(text)
    if not m:
        raise ParseError(f"cannot read array {text!r}: expected DTYPE[SIZE, ...], e.g. bf16[1024,4096]")
    shape = []
    for part in filter(None, (p.strip() for p in m.group(2).split(","))):
        value = parse_number(part)
        if value != int(value) or value < 1:
            raise ParseError(f"array {text!r}: size {part!r} must be a positive integer")
        shape.append(int(value))
    if not shape:
        raise ParseError(f"array {text!r} has no dims; e.g. bf16[1024,4096]")
    return canonical_dtype(m.group(1)), tuple(shape)


def _array_bytes(args: argparse.Namespace, mesh: Mesh, axes: tuple[str, ...]) -> tuple[float, dict[str, Any]]:
    dtype, shape = parse_array(args.array)
    text = args.sharding or "[" + ", ".join(f"D{i}" for i in range(len(shape))) + "]"
    rep = shard_array(parse_tensor(text, "A"), shape, dtype, mesh.shape)
    full = float(math.prod(shape)) * dtype_bytes(dtype)
    used = rep.sharding.used
    if args.kind == "all-gather":
        nbytes = full / math.prod(mesh.shape[a] for a in used if a not in axes)
    else:
        nbytes = rep.bytes_per_device
    notes = [a for a in axes if a not in used] if args.kind in ("all-gather", "all-to-all") else []
    info = {
        "dtype": dtype,
        "shape": list(shape),
        "sharding": rep.sharding.notation(),
        "array_bytes": full,
        "bytes_per_device_in": rep.bytes_per_device,
        "local_shape": list(rep.local_shape),
        "note": (f"{','.join(notes)} does not shard the array" if notes else ""),
    }
    return nbytes, info


def axis_details(ct: CollectiveTime, mesh: Mesh) -> list[dict[str, Any]]:
    """Per mesh axis: its segments, links, wraparound and inbound bandwidth per chip."""
    out = []
    for name in ct.axes:
        axis = mesh.axis(name)
        terms = [t for t in ct.groups if name in t.group.axes]
        out.append(
            {
                "name": name,
                "size": axis.size,
                "links": [s.link for s in axis.segments],
                "wrap": bool(terms) and all(t.group.shape == "ring" for t in terms),
                "shape": "+".join(t.group.shape for t in terms),
                "bandwidth_bytes_per_s": sum(t.group.inbound_bytes_per_s for t in terms),
                "segments": [{"dim": s.dim, "size": s.size, "stride": s.stride, "link": s.link} for s in axis.segments],
            }
        )
    return out


def collective_dict(ct: CollectiveTime, mesh: Mesh, chip: Chip) -> dict[str, Any]:
    return {
        "kind": ct.kind,
        "time_s": ct.time_s,
        "bandwidth_time_s": ct.bandwidth_time_s,
        "latency_time_s": ct.latency_time_s,
        "bound": ct.bound,
        "bytes_per_device": ct.bytes_per_device,
        "devices": ct.devices,
        "hops": ct.hops,
        "sharp": ct.sharp,
        "axes": axis_details(ct, mesh),
        "groups": [
            {
                "axes": list(t.group.axes),
                "dim": t.group.dim,
                "size": t.group.size,
                "link": t.group.link,
                "shape": t.group.shape,
                "wrap": t.group.wrap,
                "stride": t.group.stride,
                "link_bytes_per_s": t.group.link_bytes_per_s,
                "inbound_bytes_per_s": t.group.inbound_bytes_per_s,
                "hop_latency_s": t.group.hop_latency_s,
                "hops": t.hops,
                "bandwidth_time_s": t.bandwidth_time_s,
                "latency_time_s": t.latency_time_s,
                "why": group_why(t.group, chip),
            }
            for t in ct.groups
        ],
        "formula": collective_formula(ct),
        "why": collective_why(ct, chip),
    }


def run(args: argparse.Namespace) -> Output:
    chip = chip_from_args(args)
    mesh = make_mesh(parse_topology(chip, args.topology), args.mesh)
    axes = tuple(a.strip() for a in args.axes.split(",") if a.strip())
    for a in axes:
        mesh.axis(a)
    if args.sharding and not args.array:
        raise InvalidConfigError("--sharding describes --array; give --array too, e.g. --array 'bf16[1024,4096]'")
    array: dict[str, Any] | None = None
    if args.array:
        nbytes, array = _array_bytes(args, mesh, axes)
    else:
        nbytes = parse_bytes(args.nbytes)
    ct = collective_time(Comm(args.kind, axes, nbytes), mesh, chip, sharp=args.sharp)
    payload = {
        "chip": chip.name,
        "topology": mesh.topology.spec,
        "mesh": mesh.spec(),
        **collective_dict(ct, mesh, chip),
    }
    if array is not None:
        payload["array"] = array

    def render(console: Console) -> None:
        rows = [
            ("per-device bytes (V)", format_bytes(ct.bytes_per_device)),
            ("devices", str(ct.devices)),
            ("bandwidth term", format_duration(ct.bandwidth_time_s)),
            ("latency term", f"{format_duration(ct.latency_time_s)} ({ct.hops} hops)"),
            ("time", f"[bold]{format_duration(ct.time_s)}[/bold]"),
            ("bound", f"[bold]{ct.bound}[/bold]"),
        ]
        title = f"{ct.kind} over {','.join(axes)} on {chip.name} {mesh.topology.spec} ({mesh.spec()})"
        console.print(table(title, ["quantity", "value"], rows))
        console.print(
            table(
                "links",
                ["group", "shape", "chips", "link", "inbound/chip", "bandwidth term", "hops"],
                [
                    (
                        t.group.name,
                        t.group.shape,
                        t.group.size,
                        t.group.link,
                        format_rate(t.group.inbound_bytes_per_s),
                        format_duration(t.bandwidth_time_s),
                        t.hops,
                    )
                    for t in ct.groups
                ],
            )
        )
        console.print(f"formula: {collective_formula(ct)}")
        console.print(f"why: {collective_why(ct, chip)}")
        if array and array["note"]:
            console.print(f"note: {array['note']}")

    return Output(payload, render)
