"""``rooftop hlo``: an HLO module's instructions on the roofline as JSON and tables."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rooftop.report.table import say, styled, table, words
from rooftop.units import format_bytes, format_duration, format_number, format_plain, plural

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.analysis.hlo.analyze import HloAnalysis, TimedOp


def op_dict(t: TimedOp) -> dict[str, Any]:
    """One instruction of the JSON table: totals over its executions, SI units; FLOPs null when unknown."""
    op, est, k = t.op, t.estimate, t.op.executions
    traffic, unknown, uses = op.cost.traffic, bool(op.cost.unknown), op.cost.collectives
    groups = [[list(g) for g in (u.groups if u.groups is not None else u.pairs or ())] for u in uses]
    shape = op.shape.leaves()[0] if len(op.shape.leaves()) == 1 else None
    padded = shape is not None and shape.padded_dims != shape.dims
    return {
        "name": op.name, "opcode": op.opcode, "computation": op.computation, "shape": str(op.shape),
        "dtype": op.dtype, "executions": k, "flops": None if unknown else op.cost.flops * k,
        "transcendentals": op.cost.transcendentals * k, "bytes": traffic.logical_bytes * k,
        "padded_bytes": traffic.padded_bytes * k, "hbm_bytes": traffic.hbm_bytes * k,
        "memory_space": op.memory_space,
        "padded_shape": f"{shape.dtype}[{','.join(map(str, shape.padded_dims))}]" if padded and shape else None,
        "compute_s": None if unknown else est.compute_s, "memory_s": est.memory_s, "comm_s": est.network_s,
        "lower_bound_s": est.lower_bound_s, "upper_bound_s": est.upper_bound_s, "bound": est.bound,
        "replica_groups": (groups[0] if len(groups) == 1 else groups) if uses else None,
        "mesh_axes": list(dict.fromkeys(a for m in t.matches for a in m.axes or ())) if uses else None,
        "collective": "; ".join(m.describe(u.opcode) for m, u in zip(t.matches, uses, strict=True)) or None,
        "comm_bytes": sum(u.bytes for u in uses) * k, "flops_unknown": op.cost.unknown or None,
        "note": op.cost.note or None, "line": op.line,
    }  # fmt: skip


#: the instruction table collapses a tuple shape longer than a quarter of its width (never less than
#: MIN_SHAPE characters) and cuts any shape at MAX_SHAPE (--json has every shape whole); an array's
#: layout stays, as its tiles explain the padding
MIN_SHAPE, MAX_SHAPE = 24, 80


def _elements(tuple_shape: str) -> list[str]:
    """The top-level elements of a tuple shape's text, "(a[1]{0}, (b[2], c[3]))" -> ["a[1]{0}", "(b[2], c[3])"]."""
    parts, depth, start = [], 0, 1
    for i, ch in enumerate(tuple_shape[1:-1], 1):
        depth += (ch in "([{") - (ch in ")]}")
        if ch == "," and depth == 0:
            parts.append(tuple_shape[start:i].strip())
            start = i + 1
    parts.append(tuple_shape[start:-1].strip())
    return [p for p in parts if p]


def _fit(shape: str, limit: int) -> str:
    """One shape in at most ``limit`` characters: its layout dropped first, then cut with "..."."""
    if len(shape) > limit:
        shape = _LAYOUT.sub("", shape)
    return shape if len(shape) <= limit else shape[: max(limit - 3, 1)] + "..."


_LAYOUT = re.compile(r"\{[^{}]*\}$")


def short_shape(shape: str, limit: int) -> str:
    """A shape for the table: a tuple longer than ``limit`` characters as its first element and how many
    more follow ("(bf16[8192,6144]{1,0}, +3 more)"), and any shape over MAX_SHAPE characters cut, its
    layout dropped first; --json keeps the whole shape."""
    elements = _elements(shape) if len(shape) > limit and shape.startswith("(") and shape.endswith(")") else []
    if len(elements) > 1:
        tail = f", +{len(elements) - 1} more)"
        return "(" + _fit(elements[0], max(limit, MAX_SHAPE) - len(tail) - 1) + tail
    return _fit(shape, MAX_SHAPE)


def hlo_payload(analysis: HloAnalysis, top: int) -> dict[str, Any]:
    """``rooftop hlo --json``: every instruction, the ``top`` names by predicted time, totals."""
    rows = [op_dict(t) for t in analysis.ops]
    order = sorted(range(len(rows)), key=lambda i: -analysis.ops[i].estimate.lower_bound_s)
    return {
        "module": analysis.module,
        "chip": analysis.chip.name,
        "mesh": {"axes": dict(analysis.mesh.axes), "inferred": analysis.mesh.inferred, "how": analysis.mesh.how},
        "topology": analysis.topology.spec,
        "totals": analysis.totals(),
        "collectives_by_axis": [{"axes": k, **v} for k, v in analysis.collectives_by_axis().items()],
        "top": [rows[i]["name"] for i in order[:top]],
        "instructions": rows,
        "notes": list(analysis.notes),
    }


def _time(seconds: float | None) -> str:
    return "?" if seconds is None else format_duration(seconds) if seconds else "0"


def _row(r: dict[str, Any], shape_limit: int) -> tuple[str, ...]:
    flops = "unknown" if r["flops"] is None else format_number(r["flops"], "FLOP")
    if r["transcendentals"]:
        flops += f" + {format_number(r['transcendentals'])} transc."
    ratio = f", {r['padded_bytes'] / r['bytes']:.3g}x bytes" if r["bytes"] else ""  # 0 bytes: run 0 times
    padding = f" -> {r['padded_shape']}{ratio}" if r["padded_shape"] else ""
    space = "HBM" if r["memory_space"] == 0 else f"S({r['memory_space']})"
    count = f" x{format_plain(r['executions'])}" if r["executions"] != 1 else ""
    shape = short_shape(r["shape"], shape_limit) + padding + count
    return (r["name"], r["opcode"], shape, flops, format_bytes(r["padded_bytes"]), space, _time(r["lower_bound_s"]),
            words(r["bound"]))  # fmt: skip


def render_hlo(console: Console, analysis: HloAnalysis, data: dict[str, Any], top: int) -> None:
    rows = {(r["name"], r["computation"]): r for r in data["instructions"]}
    chosen = [rows[(t.op.name, t.op.computation)] for t in analysis.top(top)]
    columns = ["instruction", "opcode", "shape", "FLOPs", "bytes", "result in", "time", "bound"]
    title = (
        f"{data['module']} on {analysis.chip.name}: top {len(chosen)} of {plural(len(rows), 'instruction')} "
        "by predicted time"
    )
    shape_limit = max(MIN_SHAPE, console.width // 4)
    listing = table(title, columns, [_row(r, shape_limit) for r in chosen])
    listing.columns[2].no_wrap = True
    console.print(listing)
    comms = sorted((r for r in data["instructions"] if r["collective"]), key=lambda r: -r["comm_s"])[:top]
    if comms:
        console.print(table(
            f"collectives on mesh {analysis.mesh.spec()} ({analysis.topology.spec} {analysis.chip.name})",
            ["instruction", "collective", "bytes", "time"],
            [(r["name"], r["collective"], format_bytes(r["comm_bytes"]), _time(r["comm_s"])) for r in comms],
        ))  # fmt: skip
    t = data["totals"]
    padding = f"{t['padding_overhead']:.3g}x, waste {format_bytes(t['padding_waste_bytes'])}"
    per_axis = "; ".join(f"{c['axes']}: {format_bytes(c['bytes'])} in {format_plain(c['count'])}, {_time(c['comm_s'])}"
                         for c in data["collectives_by_axis"])  # fmt: skip
    console.print(table("totals", ["quantity", "value"], [
        ("FLOPs", format_number(t["flops"], "FLOP")), ("transcendentals", format_number(t["transcendentals"])),
        ("bytes (logical)", format_bytes(t["bytes"])),
        ("bytes (padded to tiles)", f"{format_bytes(t['padded_bytes'])} ({padding})"),
        ("HBM bytes", format_bytes(t["hbm_bytes"])), ("collective bytes per axis", per_axis or "none"),
        ("compute / memory / network", " / ".join(_time(t[k]) for k in ("compute_s", "memory_s", "comm_s"))),
        ("predicted (sum of lower bounds)", styled(_time(t["predicted_s"]), "bold")),
        ("overlap bound / serial bound", f"{_time(t['overlap_bound_s'])} / {_time(t['upper_bound_s'])}"),
    ]))  # fmt: skip
    for note in data["notes"]:
        say(console, f"note: {note}", soft_wrap=True)
