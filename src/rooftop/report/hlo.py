"""``rooftop hlo``: an HLO module's instructions on the roofline as JSON, tables and a picture."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rooftop.report.opschart import Bar, Mark, OpsChart, finite, scope_path, share
from rooftop.report.reasons import note_text, note_texts, sentence, why_text
from rooftop.report.serialize import Rows
from rooftop.report.table import say, styled, table, words
from rooftop.units import format_bytes, format_duration, format_number, format_percent, format_plain, plural

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.analysis.hlo.analyze import HloAnalysis, TimedOp
    from rooftop.analysis.hlo.ir import HloModule
    from rooftop.analysis.hlo.shapes import Shape
    from rooftop.cost.roofline import Estimate


_ShapeKeys = tuple[str, str, int, str | None]


def _shape_fields(shape: Shape) -> _ShapeKeys:
    """(text, dtype, memory space, padded shape or None) of a result shape: the row's shape keys."""
    leaves = shape.leaves()
    leaf = leaves[0] if len(leaves) == 1 else None
    padded = leaf is not None and leaf.padded_dims != leaf.dims
    first = leaves[0] if leaves else None
    return (
        str(shape),
        first.dtype if first is not None else "tuple",
        first.layout.memory_space if first is not None and first.layout is not None else 0,
        f"{leaf.dtype}[{','.join(map(str, leaf.padded_dims))}]" if padded and leaf else None,
    )


def _estimate_fields(est: Estimate) -> tuple[float, float, float, float | None, float, float, str]:
    """(compute, memory, network seconds, shape efficiency, lower bound, upper bound, bound) of ``est``."""
    return (est.compute_s, est.memory_s, est.network_s, est.shape_efficiency, est.lower_bound_s,
            est.upper_bound_s, est.bound)  # fmt: skip


def op_dict(
    t: TimedOp,
    shapes: dict[int, tuple[Shape, _ShapeKeys]] | None = None,
    estimates: dict[int, tuple[Estimate, tuple[float, float, float, float | None, float, float, str]]] | None = None,
) -> dict[str, Any]:
    """One instruction of the JSON table: totals over its executions, SI units; FLOPs null when unknown.
    ``shapes``: the shape keys already worked out, by the shape's id (the parser shares one Shape per text);
    ``estimates``: an Estimate's fields already read, by its id (repeated layers share one Estimate)."""
    op, est, k = t.op, t.estimate, t.op.executions
    cost = op.cost
    traffic, unknown, uses = cost.traffic, bool(cost.unknown), cost.collectives
    found = shapes.get(id(op.shape)) if shapes is not None else None
    if found is None:
        found = (op.shape, _shape_fields(op.shape))
        if shapes is not None:
            shapes[id(op.shape)] = found  # the shape kept with its keys: its id stays its own
    text, dtype, space, padded_shape = found[1]
    known = estimates.get(id(est)) if estimates is not None else None
    if known is None:
        known = (est, _estimate_fields(est))
        if estimates is not None:
            estimates[id(est)] = known  # kept with its fields: its id stays its own
    compute_s, memory_s, network_s, shape_efficiency, lower_s, upper_s, bound = known[1]
    row = {
        "name": op.name, "opcode": op.opcode, "computation": op.computation, "shape": text,
        "dtype": dtype, "executions": k, "flops": None if unknown else cost.flops * k,
        "transcendentals": cost.transcendentals * k, "bytes": traffic.logical_bytes * k,
        "padded_bytes": traffic.padded_bytes * k, "hbm_bytes": traffic.hbm_bytes * k,
        "memory_space": space, "padded_shape": padded_shape,
        "compute_s": None if unknown else compute_s, "memory_s": memory_s, "comm_s": network_s,
        "shape_efficiency": shape_efficiency,
        "mxu_utilization": t.matrix_s * k / lower_s if t.matrix_s and lower_s > 0 else None,
        "lower_bound_s": lower_s, "upper_bound_s": upper_s, "bound": bound,
        "replica_groups": None, "mesh_axes": None, "collective": None, "comm_bytes": 0 * k,
        "flops_unknown": cost.unknown or None, "note": why_text(cost.note) or None, "line": op.line,
    }  # fmt: skip
    if uses:
        groups = [[list(g) for g in (u.groups if u.groups is not None else u.pairs or ())] for u in uses]
        row["replica_groups"] = groups[0] if len(groups) == 1 else groups
        row["mesh_axes"] = list(dict.fromkeys(a for m in t.matches for a in m.axes or ()))
        said = (sentence(m.reason(u.opcode)) for m, u in zip(t.matches, uses, strict=True))
        row["collective"] = "; ".join(said) or None
        row["comm_bytes"] = sum(u.bytes for u in uses) * k
    return row


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
    """``rooftop hlo --json``: every instruction, the ``top`` names by predicted time, totals. The
    instructions are :class:`~rooftop.report.serialize.Rows`, each built as it is read (``--json`` writes
    them one at a time)."""
    ops = analysis.ops
    order = sorted(range(len(ops)), key=lambda i: -ops[i].estimate.lower_bound_s)
    return {
        "module": analysis.module,
        "chip": analysis.chip.name,
        "mesh": {
            "axes": dict(analysis.mesh.axes),
            "inferred": analysis.mesh.inferred,
            "how": note_text(analysis.mesh.how),
        },
        "topology": analysis.topology.spec,
        "totals": analysis.totals(),
        "collectives_by_axis": [{"axes": k, **v} for k, v in analysis.collectives_by_axis().items()],
        "top": [ops[i].op.name for i in order[:top]],
        "instructions": Rows(ops, functools.partial(op_dict, shapes={}, estimates={})),
        "notes": note_texts(analysis.notes),
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
    mxu = "-" if r["mxu_utilization"] is None else format_percent(r["mxu_utilization"])
    return (r["name"], r["opcode"], shape, flops, format_bytes(r["padded_bytes"]), space, _time(r["lower_bound_s"]),
            words(r["bound"]), mxu)  # fmt: skip


def render_hlo(console: Console, analysis: HloAnalysis, data: dict[str, Any], top: int) -> None:
    instructions = list(data["instructions"])  # built once here
    rows = {(r["name"], r["computation"]): r for r in instructions}
    chosen = [rows[(t.op.name, t.op.computation)] for t in analysis.top(top)]
    columns = ["instruction", "opcode", "shape", "FLOPs", "bytes", "result in", "time", "bound", "MXU"]
    title = (
        f"{data['module']} on {analysis.chip.name}: top {len(chosen)} of {plural(len(rows), 'instruction')} "
        "by predicted time"
    )
    shape_limit = max(MIN_SHAPE, console.width // 4)
    listing = table(title, columns, [_row(r, shape_limit) for r in chosen])
    listing.columns[2].no_wrap = True
    console.print(listing)
    comms = sorted((r for r in instructions if r["collective"]), key=lambda r: -r["comm_s"])[:top]
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
        ("MXU utilisation (of the predicted time)", format_percent(t['mxu_utilization'], 1)),
        ("overlap bound / serial bound", f"{_time(t['overlap_bound_s'])} / {_time(t['upper_bound_s'])}"),
    ]))  # fmt: skip
    for note in data["notes"]:
        say(console, f"note: {note}", soft_wrap=True)


# ---------------------------------------------------------------- the picture (--plot)

#: the colour of each bound, in the legend's order
BOUND_COLOURS = {"compute": "#1f77b4", "memory": "#ff7f0e", "network": "#8c564b"}
#: the most bars the picture draws (--top sets how many, as for the table)
MAX_BARS = 20
#: the instructions the picture leaves off the roofline, in the caption's words and order
LEFT_OUT = {
    "collective": ("collective", "collectives", "network time, in the bars"),
    "data movement": ("instruction without FLOPs", "instructions without FLOPs",
                      "copies and layout changes, timed by their bytes"),
    "unknown": ("instruction of unknown FLOPs", "instructions of unknown FLOPs", "their memory time in the bars"),
    "no bytes": ("instruction with FLOPs but no HBM bytes", "instructions with FLOPs but no HBM bytes", ""),
    "bookkeeping": ("instruction priced at zero", "instructions priced at zero", ""),
}  # fmt: skip


def placement(t: TimedOp) -> str:
    """Where the picture puts ``t``: "roofline" (FLOPs and HBM bytes) or a key of LEFT_OUT."""
    est = t.estimate
    if t.op.cost.collectives:
        return "collective"
    if t.op.cost.unknown:
        return "unknown"
    if not est.lower_bound_s > 0:
        return "bookkeeping"
    if not est.flops > 0:
        return "data movement"
    if not est.hbm_bytes > 0:
        return "no bytes"
    return "roofline" if finite(est.flops / est.hbm_bytes, est.flops / est.lower_bound_s) else "unknown"


def op_names(module: HloModule) -> dict[str, str]:
    """Instruction name -> the op_name of its metadata (JAX's scope path), where it has one."""
    return {i.name: i.op_name or "" for c in module.computations.values() for i in c.instructions}


def hlo_chart(
    analysis: HloAnalysis, top: int = 10, source: str = "", names: Mapping[str, str] | None = None
) -> OpsChart:
    """The picture of ``analysis`` (report/opschart.py): each instruction with FLOPs and HBM bytes at its
    intensity and its predicted FLOP/s (its FLOPs / roofline time, so on the roofline by construction:
    the labels say its share of the predicted time), area its predicted time, colour its bound; the
    ``top`` instructions (at most MAX_BARS) by predicted time as bars, each under its scope path from
    ``names`` (``op_names`` of the module) or its opcode. ``source`` is the file read."""
    from rooftop.report.plot import ceilings, label

    names = names or {}

    ops = sorted(analysis.ops, key=lambda t: -t.estimate.lower_bound_s)
    where = {id(t): placement(t) for t in ops}
    total = sum(t.estimate.lower_bound_s for t in ops)
    placed = [t for t in ops if where[id(t)] == "roofline"]
    marks = [Mark(t.op.name, t.estimate.bound, t.estimate.flops / t.estimate.hbm_bytes,
                  t.estimate.flops / t.estimate.lower_bound_s, t.estimate.lower_bound_s) for t in placed]  # fmt: skip
    wanted = [("matrix", "bf16"), *(key for t in placed for key in t.op.cost.cost.flops_by)]
    if not any(unit == "vector" for unit, _ in wanted):
        wanted.append(("vector", "bf16"))
    bars = [Bar(t.op.name, t.estimate.bound, t.estimate.lower_bound_s, 0.0,
                f"{format_duration(t.estimate.lower_bound_s)} ({share(t.estimate.lower_bound_s, total)})",
                scope_path(names.get(t.op.name, "")) or t.op.opcode)
            for t in ops[: min(max(top, 1), MAX_BARS)]]  # fmt: skip
    time_placed = sum(m.time_s for m in marks)
    name = label(analysis.module)
    if source:
        name = f"{label(os.path.basename(source) or source)} ({name})"

    def note(spot: Sequence[Mark]) -> str:
        where_ = f" in {len(spot)}" if len(spot) > 1 else ""
        return f"{share(sum(m.time_s for m in spot), total)} of the predicted time{where_}"

    return OpsChart(
        title=f"{name} on {label(analysis.chip.name)}: {share(time_placed, total)} of the predicted time on the "
        f"roofline ({len(marks)} of {plural(len(ops), 'instruction')})",
        chip=analysis.chip,
        ceilings=ceilings(analysis.chip, dict.fromkeys(wanted)),
        marks=marks,
        bars=bars,
        colours=BOUND_COLOURS,
        spot_note=note,
        y_label="predicted FLOP/s (FLOPs / roofline time)",
        legend_title="bound; area: predicted time",
        bars_title=f"predicted time per instruction: the top {len(bars)} (share of the module)",
        bars_label="predicted time over all executions",
        caption=_hlo_caption(ops, where, total),
    )


def _hlo_caption(ops: Sequence[TimedOp], where: dict[int, str], total: float) -> list[str]:
    lines = [
        "Left: the chip's roofline (dense peaks); each instruction at its FLOPs per HBM byte and its predicted "
        "FLOP/s (its FLOPs / its roofline time: on the roofline by construction, so the labels give its share of "
        "the predicted time), its area its predicted time, its colour its bound. Right: the instructions with the "
        "longest predicted time, each with its share of the module's."
    ]
    left = []
    for key, (one, many, why) in LEFT_OUT.items():
        group = [t for t in ops if where[id(t)] == key]
        if group:
            time = share(sum(t.estimate.lower_bound_s for t in group), total)
            left.append(f"{plural(len(group), one, many)} ({time} of the predicted time{': ' + why if why else ''})")
    if left:
        lines.append("Not on the roofline: " + "; ".join(left) + ".")
    return lines


def hlo_figure(analysis: HloAnalysis, top: int = 10, source: str = "", names: Mapping[str, str] | None = None) -> Any:
    """The picture of ``rooftop hlo --plot`` as a matplotlib Figure (``hlo_chart``)."""
    from rooftop.report.opschart import ops_figure

    return ops_figure(hlo_chart(analysis, top, source, names))


def plot_hlo(
    analysis: HloAnalysis, path: str, top: int = 10, source: str = "", names: Mapping[str, str] | None = None
) -> None:
    """Write ``hlo_figure`` to ``path`` (.png, .svg or .pdf), atomically."""
    from rooftop.report.plot import check_plot_path, save

    check_plot_path(path)
    fig = hlo_figure(analysis, top, source, names)
    try:
        save(fig, path)
    finally:
        fig.clear()
