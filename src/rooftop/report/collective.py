"""``rooftop collective``: one collective over mesh axes as JSON and tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rooftop.cost.algorithms import Algorithm
from rooftop.cost.book import book_collective
from rooftop.cost.collectives import collective_time
from rooftop.cost.cost import Comm
from rooftop.cost.groups import mesh_groups
from rooftop.report.book import book_collective_dict
from rooftop.report.formulas import collective_formula, collective_why, group_why
from rooftop.report.table import say, styled, table
from rooftop.units import format_bytes, format_duration, format_rate, plural

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.cost.collectives import CollectiveTime
    from rooftop.cost.groups import Group
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


def _groups(ct: CollectiveTime, mesh: Mesh, chip: Chip) -> list[Group]:
    """The link groups of the collective: its per-group terms' groups, or, under a flat algorithm that
    prices the collective as one schedule (a ring), the groups its axes lie on."""
    if ct.groups or ct.devices == 1:
        return [t.group for t in ct.groups]
    return list(mesh_groups(mesh, ct.axes, chip))


def axis_details(ct: CollectiveTime, mesh: Mesh, chip: Chip) -> list[dict[str, Any]]:
    """Per mesh axis: its segments, links, wraparound and inbound bandwidth per chip."""
    out = []
    groups = _groups(ct, mesh, chip)
    for name in ct.axes:
        axis = mesh.axis(name)
        mine = [g for g in groups if name in g.axes]
        out.append(
            {
                "name": name,
                "size": axis.size,
                "links": [s.link for s in axis.segments],
                "wrap": bool(mine) and all(g.shape == "ring" for g in mine),
                "shape": "+".join(g.shape for g in mine),
                "bandwidth_bytes_per_s": sum(g.inbound_bytes_per_s for g in mine),
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
        "algorithm": ct.algorithm,
        "latency_adds": ct.additive,
        "axes": axis_details(ct, mesh, chip),
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
        **_book(ct, mesh, chip),
    }


def _book(ct: CollectiveTime, mesh: Mesh, chip: Chip) -> dict[str, Any]:
    """The book's figure for the collective: the book's rule is the staged one, so under a flat algorithm
    (one schedule, no per-group terms) it is compared with the staged time of the same collective."""
    if not ct.groups and ct.devices > 1:
        comm = Comm(ct.kind, ct.axes, ct.bytes_per_device)
        ct = collective_time(comm, mesh, chip, network_efficiency=ct.network_efficiency)
    return book_collective_dict(ct, book_collective(ct))


def collective_payload(
    ct: CollectiveTime,
    chip: Chip,
    mesh: Mesh,
    array: dict[str, Any] | None = None,
    algorithm: Algorithm | None = None,
) -> dict[str, Any]:
    """``rooftop collective --json``."""
    algo = algorithm or Algorithm()
    payload = {
        "chip": chip.name,
        "topology": mesh.topology.spec,
        "mesh": mesh.spec(),
        **collective_dict(ct, mesh, chip),
        "algorithm_latency": {f: getattr(algo, f) for f in ("base_s", "intra_step_s", "inter_step_s")},
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
            ]
            or [  # a flat algorithm: one schedule over the groups (its terms are the collective's)
                (g.name, g.shape, g.size, g.link, format_rate(g.inbound_bytes_per_s), "-", "-")
                for g in _groups(ct, mesh, chip)
            ],
        )
    )
    say(console, f"formula: {collective_formula(ct)}")
    say(console, f"why: {collective_why(ct, chip)}")
    book = _book(ct, mesh, chip)
    say(console, f"book ({book['book_part']}): {format_duration(book['book_time_s'])} = {book['book_formula']}")
    if book["book_why"]:
        say(console, f"differs: {book['book_why']}")
    if array and array["note"]:
        say(console, f"note: {array['note']}")
