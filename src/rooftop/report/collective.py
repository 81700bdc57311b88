"""``rooftop collective``: one collective over mesh axes as JSON and tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rooftop.cost.book import book_collective
from rooftop.report.book import book_collective_dict
from rooftop.report.formulas import collective_formula, collective_why, group_why
from rooftop.report.table import say, styled, table
from rooftop.units import format_bytes, format_duration, format_rate, plural

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.cost.collectives import CollectiveTime
    from rooftop.hardware.chip import Chip
    from rooftop.hardware.topology import Mesh
    from rooftop.sharding.shard import ShardReport


def array_dict(rep: ShardReport, unsharded_axes: list[str]) -> dict[str, Any]:
    """The ``array`` key: the global array given by ``--array``/``--sharding`` and its shard going in."""
    return {
        "dtype": rep.dtype,
        "shape": list(rep.shape),
        "sharding": rep.sharding.notation(),
        "array_bytes": rep.array_bytes,
        "bytes_per_device_in": rep.bytes_per_device,
        "local_shape": list(rep.local_shape),
        "note": (f"{','.join(unsharded_axes)} does not shard the array" if unsharded_axes else ""),
    }


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
    """The timing keys: totals, then per mesh axis and per link group, then the book's figure."""
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
        **book_collective_dict(ct, book_collective(ct)),
    }


def collective_payload(
    ct: CollectiveTime, chip: Chip, mesh: Mesh, array: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``rooftop collective --json``."""
    payload = {
        "chip": chip.name,
        "topology": mesh.topology.spec,
        "mesh": mesh.spec(),
        **collective_dict(ct, mesh, chip),
    }
    if array is not None:
        payload["array"] = array
    return payload


def render_collective(
    console: Console, ct: CollectiveTime, chip: Chip, mesh: Mesh, array: dict[str, Any] | None = None
) -> None:
    rows = [
        ("per-device bytes (V)", format_bytes(ct.bytes_per_device)),
        ("devices", str(ct.devices)),
        ("bandwidth term", format_duration(ct.bandwidth_time_s)),
        ("latency term", f"{format_duration(ct.latency_time_s)} ({plural(ct.hops, 'hop')})"),
        ("time", styled(format_duration(ct.time_s), "bold")),
        ("bound", styled(ct.bound, "bold")),
    ]
    title = f"{ct.kind} over {','.join(ct.axes)} on {chip.name} {mesh.topology.spec} ({mesh.spec()})"
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
    say(console, f"formula: {collective_formula(ct)}")
    say(console, f"why: {collective_why(ct, chip)}")
    book = book_collective_dict(ct, book_collective(ct))
    say(console, f"book ({book['book_part']}): {format_duration(book['book_time_s'])} = {book['book_formula']}")
    if book["book_why"]:
        say(console, f"differs: {book['book_why']}")
    if array and array["note"]:
        say(console, f"note: {array['note']}")
