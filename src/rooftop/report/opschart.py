"""The picture of ``rooftop profile --plot`` and ``rooftop hlo --plot``: a program's ops on the chip's
roofline, and the time per op beside it.

A command describes its picture as an ``OpsChart`` (report/profile.py, report/hlo.py); ``ops_figure``
draws it and returns the matplotlib Figure (not registered with pyplot: a notebook shows it, the CLI
saves it with report/plot.py ``save``). The panels:

- left, the roofline, log-log: x FLOPs per HBM byte, y FLOP/s; each compute ceiling of the chip the
  ops run on, the HBM slope, each ridge point (its FLOPs per byte written by its dotted line). Each op
  (a ``Mark``) is a disc at its intensity and rate, its area proportional to its time, its colour its
  group (a verdict, a bound). Ops at one spot (the same op in every layer) share one label, "+3 here";
  the first ``labels`` spots in the command's order (time lost, time) are labelled, the labels moved
  off each other and off the legend.
- below it, when the command has some, a strip of the ops without FLOPs (copies, transposes) at the
  bytes/s they reached, with the HBM (and host link) bandwidth drawn.
- right, horizontal bars (``Bar``): a base (the roofline time, or the predicted time) and an extra
  (the time lost above it), with the figures written at the bar's end.
- under both, the caption: what the axes are and what the picture leaves out.

Every name is drawn as literal text (report/plot.py: a ``$`` in an op's name is a dollar sign).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rooftop.hardware.chip import Chip
from rooftop.report.plot import label, literal_text, plain_log_ticks, plain_number
from rooftop.units import format_duration, format_percent, format_plain, format_rate


@dataclass(frozen=True)
class Mark:
    """One op on the roofline (x: FLOPs per byte, y: FLOP/s) or the strip (x: bytes/s reached)."""

    name: str  # the op, as the input names it (drawn as literal text)
    group: str  # its colour: a verdict or a bound
    x: float
    y: float
    time_s: float  # its time: the disc's area
    lost_s: float = 0.0  # time lost vs its roofline (0: not measured)
    efficiency: float | None = None


@dataclass(frozen=True)
class Bar:
    """One op of the bars: ``base_s`` then ``extra_s`` (the time lost above it), ``text`` at its end,
    ``detail`` (where the op comes from) under its name."""

    name: str
    group: str
    base_s: float
    extra_s: float
    text: str
    detail: str = ""


@dataclass(frozen=True)
class OpsChart:
    """Everything ``ops_figure`` draws. ``marks`` and ``strip`` come in the command's order of
    importance (the labelled spots are the first ones); ``colours`` maps each group to its colour, in
    the legend's order; ``spot_note`` writes the second line of a spot's label from the marks there;
    ``base_colour`` colours every bar's base (None: each bar's base in its group's colour)."""

    title: str
    chip: Chip
    ceilings: Sequence[tuple[str, float]]
    marks: Sequence[Mark]
    bars: Sequence[Bar]
    colours: Mapping[str, str]
    spot_note: Callable[[Sequence[Mark]], str]
    y_label: str
    bars_title: str
    bars_label: str
    caption: Sequence[str]
    legend_title: str = ""
    strip: Sequence[Mark] = ()
    strip_lines: Sequence[tuple[str, float]] = ()
    strip_title: str = ""
    base_colour: str | None = None
    base_words: str = ""
    extra_words: str = ""
    labels: int = 8


#: disc area (points^2) of the longest op; every other op's is in proportion, never under MIN_AREA
MAX_AREA, MIN_AREA = 900.0, 6.0
#: two ops this close (decades, on both axes) are at one spot and share a label
SPOT_DECADES = 0.04
#: label text size (points)
LABEL_SIZE = 7.5
#: the labels keep off the discs of this many ops, the longest (the others are dots)
MAX_OBSTACLES = 300
OTHER_COLOUR = "#7f7f7f"


def share(part: float, whole: float) -> str:
    """``part`` of ``whole`` as a percentage: "<1%" for a small one that is not zero, ">99%" for one
    short of the whole that rounds to it."""
    if whole <= 0 or part <= 0:
        return "0%"
    fraction = part / whole
    return "<1%" if fraction < 0.005 else ">99%" if 0.995 <= fraction < 1 else f"{format_percent(fraction)}"


def percent(fraction: float) -> str:
    """An efficiency as a percentage; "<1%" for one that is not zero but rounds to it."""
    return "<1%" if 0 < fraction < 0.005 else f"{format_percent(fraction)}"


def finite(*values: float) -> bool:
    """Whether every value is a finite number above zero (a place on a log axis)."""
    return all(math.isfinite(v) and v > 0 for v in values)


def scope_path(op_name: str, limit: int = 40) -> str:
    """A JAX op_name as its named scopes and primitive, the innermost kept when cut:
    ``jit(step)/transpose(jvp(layer0/attention))/dot_general`` -> "layer0/attention/dot_general"."""
    from rooftop.analysis.categories import scopes_of

    if not op_name:
        return ""
    scopes = scopes_of(op_name)
    path = "/".join([*reversed(scopes[:-1]), op_name.rsplit("/", 1)[-1]])
    return path if len(path) <= limit else "..." + path[-(limit - 3) :]


def colour(chart: OpsChart, group: str) -> str:
    return chart.colours.get(group, OTHER_COLOUR)


def area(time_s: float, longest_s: float) -> float:
    """A disc's area in points^2, proportional to ``time_s`` (the longest op's is MAX_AREA)."""
    return max(MIN_AREA, MAX_AREA * time_s / longest_s) if longest_s > 0 else MIN_AREA


def spots(marks: Sequence[Mark], limit: int) -> list[list[Mark]]:
    """The first ``limit`` spots in the order of ``marks``: each the marks within SPOT_DECADES (on both
    axes) of its first one, that first one leading."""
    out: list[list[Mark]] = []
    taken: set[int] = set()
    logs = [(math.log10(m.x), math.log10(m.y) if m.y > 0 else 0.0) for m in marks]
    for i, (x, y) in enumerate(logs):
        if len(out) >= limit:
            break
        if i in taken:
            continue
        near = [j for j, (u, v) in enumerate(logs) if abs(u - x) <= SPOT_DECADES and abs(v - y) <= SPOT_DECADES]
        taken.update(near)
        out.append([marks[i], *(marks[j] for j in near if j != i)])
    return out


def spot_text(chart: OpsChart, spot: Sequence[Mark]) -> str:
    more = f" +{len(spot) - 1} here" if len(spot) > 1 else ""
    note = chart.spot_note(spot)
    return label(spot[0].name, 40) + more + (f"\n{note}" if note else "")


def ops_figure(chart: OpsChart) -> Any:
    """The Figure of ``chart`` (see the module docstring)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with literal_text():
        caption = [line for text in chart.caption for line in textwrap.wrap(text, 190)]
        fig = Figure(figsize=(17, 9), layout="constrained")
        rows = [6.0, 1.3] if chart.strip else [6.0]
        grid = fig.add_gridspec(len(rows) + 1, 2, height_ratios=[*rows, 0.22 * len(caption) + 0.1],
                                width_ratios=[1.3, 1])  # fmt: skip
        roof = fig.add_subplot(grid[0, 0])
        strip = fig.add_subplot(grid[1, 0]) if chart.strip else None
        bars = fig.add_subplot(grid[: len(rows), 1])
        note = fig.add_subplot(grid[-1, :])
        longest = max((m.time_s for m in (*chart.marks, *chart.strip)), default=0.0)
        slope = _draw_roofline(roof, chart, longest)
        if strip is not None:
            _draw_strip(strip, chart, longest)
        _draw_bars(bars, chart)
        note.axis("off")
        note.text(0, 1, "\n".join(caption), va="top", ha="left", fontsize=8.5, transform=note.transAxes)
        fig.suptitle(chart.title, fontsize=12)
        plain_log_ticks(fig)
        canvas = FigureCanvasAgg(fig)  # measures the labels' text (and draws nothing until saved)
        fig.draw_without_rendering()  # lays the panels out: the labels are placed in their final frames
        _lay_along_slope(roof, slope, chart, longest, canvas.get_renderer())
        budget = chart.labels
        for ax, marks in ((roof, chart.marks), (strip, chart.strip)):
            if ax is not None and budget > 0:
                chosen = spots(marks, budget)
                budget -= len(chosen)
                _place_labels(ax, chart, marks, chosen, longest, canvas.get_renderer())
    return fig


def _draw_roofline(ax: Any, chart: OpsChart, longest: float) -> Any:
    """The ceilings, the HBM slope, the ridges, the ops' discs and the legend; returns the HBM slope's
    label (laid along the slope once the panel is laid out: ``_lay_along_slope``)."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    bw, roofs, marks = chart.chip.hbm_bytes_per_s, list(chart.ceilings), list(chart.marks)
    ridges = [peak / bw for _, peak in roofs]
    xs = [m.x for m in marks] + ridges
    lo = min([*xs, max(ridges, default=1.0) / 300]) / 4
    hi = max([*xs, max(ridges, default=1.0) * 30]) * 4
    top = max([peak for _, peak in roofs] + [m.y for m in marks] + [1.0]) * 20
    bottom = min([m.y for m in marks] + [top / 3e4]) / 4
    styles = ["-", "--", "-.", ":"]
    top_ridge = max(ridges, default=hi)
    ax.plot([lo, top_ridge], [lo * bw, top_ridge * bw], color="black", lw=1.6, zorder=2, gid="hbm slope")
    for i, (name, peak) in enumerate(roofs):  # each ceiling flat from its ridge, the slope drawn once
        shade = "black" if i == 0 else "#555555"
        ax.plot([peak / bw, hi], [peak, peak], color=shade, lw=1.6 if i == 0 else 1.1, ls=styles[i % len(styles)],
                zorder=2, gid=f"ceiling {name}")  # fmt: skip
        ax.text(hi / 1.15, peak * 1.12, f"{name}: {format_rate(peak, 'FLOP/s')}", ha="right", va="bottom",
                fontsize=8, color=shade)  # fmt: skip
        ridge = peak / bw
        ax.plot([ridge, ridge], [bottom, peak], color=shade, ls=":", lw=0.9, zorder=1, gid=f"ridge {name}")
        ax.plot([ridge], [peak], "o", color=shade, ms=4, zorder=2)
        ax.text(ridge * 1.06, bottom * 1.4, f"ridge {format_plain(ridge)} FLOP/B", rotation=90, ha="left",
                va="bottom", fontsize=7, color=shade)  # fmt: skip
    start = max(lo, bottom / bw) * 2
    slope = ax.text(start, start * bw * 1.3, f"HBM {format_rate(bw)}", ha="left", va="bottom", fontsize=8,
                    rotation_mode="anchor", gid="hbm slope")  # fmt: skip
    order = sorted(marks, key=lambda m: -m.time_s)  # the small discs on top of the large ones
    if order:
        ax.scatter([m.x for m in order], [m.y for m in order], s=[area(m.time_s, longest) for m in order],
                   c=[colour(chart, m.group) for m in order], alpha=0.75, edgecolors="black", linewidths=0.4,
                   zorder=3, gid="ops")  # fmt: skip
    else:
        ax.text(0.5, 0.5, "no op with FLOPs and bytes to place (see below)", transform=ax.transAxes, ha="center",
                va="center", fontsize=10, color="#555555", bbox={"fc": "white", "ec": "#c7c7c7"})  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom, top)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: plain_number(v)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_rate(v, "FLOP/s")))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_locator(LogLocator(subs=(2.0, 5.0), numticks=12))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
    ax.set_ylabel(chart.y_label)
    ax.grid(True, which="major", alpha=0.25)
    groups = [g for g in chart.colours if any(m.group == g for m in (*marks, *chart.strip))]
    groups += sorted({m.group for m in (*marks, *chart.strip)} - set(chart.colours))
    handles = [Line2D([], [], ls="", marker="o", ms=8, mfc=colour(chart, g), mec="black", mew=0.4, label=label(g))
               for g in groups]  # fmt: skip
    for fraction in (1.0, 0.1):
        if longest > 0:
            size = math.sqrt(area(longest * fraction, longest))
            handles.append(Line2D([], [], ls="", marker="o", ms=size, mfc="none", mec="#555555",
                                  label=f"{format_duration(longest * fraction)}"))  # fmt: skip
    if handles:
        ax.legend(handles=handles, loc="upper left", fontsize=8, title=chart.legend_title, title_fontsize=8,
                  framealpha=0.9, labelspacing=1.0, borderpad=0.8, handlelength=4, handletextpad=0.8)  # fmt: skip
    return slope


def _lay_along_slope(ax: Any, text: Any, chart: OpsChart, longest: float, renderer: Any) -> None:
    """Turn ``text`` to run along the HBM slope as the laid-out panel draws it, and slide it along the
    slope (left of the first ridge) to where it covers the fewest discs, the leftmost of those."""
    bw = chart.chip.hbm_bytes_per_s
    x0, _ = text.get_position()
    (ax0, ay0), (ax1, ay1) = ax.transData.transform([(x0, x0 * bw), (x0 * 10, x0 * 10 * bw)])
    text.set_rotation(math.degrees(math.atan2(ay1 - ay0, ax1 - ax0)))
    discs = _discs(ax, chart.marks, longest)
    ridge = min((peak / bw for _, peak in chart.ceilings), default=x0 * 1e3)
    frame = _box(ax.get_window_extent(renderer))
    best: tuple[int, float] | None = None
    for i in range(12):
        x = x0 * 2.0**i
        if x * 4 > ridge:
            break
        text.set_position((x, x * bw * 1.3))
        box = _box(text.get_window_extent(renderer))
        if box[1] < frame[1] or box[3] > frame[3]:
            continue
        hits = sum(1 for d in discs if _overlap(box, d))
        if best is None or hits < best[0]:
            best = (hits, x)
    x = best[1] if best is not None else x0
    text.set_position((x, x * bw * 1.3))


def _discs(ax: Any, marks: Sequence[Mark], longest: float) -> list[Box]:
    """The boxes (pixels) of the discs of the MAX_OBSTACLES longest of ``marks``."""
    px_per_pt = ax.figure.dpi / 72.0
    out = []
    for m in sorted(marks, key=lambda m: -m.time_s)[:MAX_OBSTACLES]:
        cx, cy = ax.transData.transform((m.x, m.y))
        r = math.sqrt(area(m.time_s, longest)) / 2 * px_per_pt
        out.append((cx - r, cy - r, cx + r, cy + r))
    return out


def _draw_strip(ax: Any, chart: OpsChart, longest: float) -> None:
    """The ops without FLOPs at the bytes/s they reached, the bandwidths as vertical lines."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    marks = sorted(chart.strip, key=lambda m: -m.time_s)
    xs = [m.x for m in marks] + [bw for _, bw in chart.strip_lines]
    lo, hi = min(xs) / 4, max(xs) * 4
    for name, bw in chart.strip_lines:
        ax.axvline(bw, color="black", lw=1.1, ls="--", zorder=1, gid=f"bandwidth {name}")
        ax.text(bw * 1.06, 0.92, name, ha="left", va="top", fontsize=7.5, transform=ax.get_xaxis_transform())
    ax.scatter([m.x for m in marks], [0.0] * len(marks), s=[area(m.time_s, longest) for m in marks],
               c=[colour(chart, m.group) for m in marks], alpha=0.75, edgecolors="black", linewidths=0.4,
               zorder=3, gid="strip")  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(-1, 1)
    ax.set_yticks([])
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_rate(v)))
    ax.xaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0), numticks=12))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("bytes/s reached")
    ax.set_title(chart.strip_title, fontsize=9, loc="left")
    ax.grid(True, which="major", axis="x", alpha=0.25)


def _draw_bars(ax: Any, chart: OpsChart) -> None:
    from matplotlib.patches import Patch

    bars = list(chart.bars)
    if not bars:
        ax.text(0.5, 0.5, "no op to show", transform=ax.transAxes, ha="center", va="center", color="#555555")
        ax.set_axis_off()
        return
    ys = list(range(len(bars)))
    unit, per = time_unit(max(b.base_s + b.extra_s for b in bars))
    base = [chart.base_colour or colour(chart, b.group) for b in bars]
    ax.barh(ys, [b.base_s / per for b in bars], color=base, height=0.7, gid="bars base")
    ax.barh(ys, [b.extra_s / per for b in bars], left=[b.base_s / per for b in bars], height=0.7, gid="bars extra",
            color=[colour(chart, b.group) for b in bars])  # fmt: skip
    longest = max(b.base_s + b.extra_s for b in bars) / per
    for y, b in zip(ys, bars, strict=True):
        ax.text((b.base_s + b.extra_s) / per + longest * 0.01, y, b.text, va="center", ha="left", fontsize=7.5)
    names = [label(b.name, 44) + (f"\n{label(b.detail, 44)}" if b.detail else "") for b in bars]
    ax.set_yticks(ys, names, fontsize=7.5)
    ax.set_ylim(len(bars) - 0.5, -0.5)  # the first bar on top
    ax.set_xlim(0, longest * 1.45 if longest > 0 else 1)
    ax.set_xlabel(f"{chart.bars_label} ({unit})")
    ax.set_title(chart.bars_title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.25)
    handles = [Patch(color=chart.base_colour, label=chart.base_words)] if chart.base_colour else []
    shown = [g for g in chart.colours if any(b.group == g for b in bars)]
    handles += [Patch(color=colour(chart, g), label=label(f"{chart.extra_words} ({g})" if chart.extra_words else g))
                for g in shown]  # fmt: skip
    ax.legend(handles=handles, loc="lower right", fontsize=7.5, framealpha=0.9)


#: the units bar lengths are drawn in: the largest the longest bar reaches
TIME_UNITS = (("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))


def time_unit(longest_s: float) -> tuple[str, float]:
    """(name, seconds) of the unit the bars are drawn in: the largest that ``longest_s`` reaches."""
    return next(((name, per) for name, per in TIME_UNITS if longest_s >= per), TIME_UNITS[-1])


def _place_labels(ax: Any, chart: OpsChart, marks: Sequence[Mark], chosen: list[list[Mark]], longest: float,
                  renderer: Any) -> None:  # fmt: skip
    """Label each spot beside its disc, moved up or down (a line back to the disc) where it would cover
    a label already placed, the legend, a text of the panel or one of ``marks``' discs, or leave the
    panel (the discs and texts are given up before the labels and the legend when nothing is free);
    measured in pixels of the laid-out panel."""
    px_per_pt = ax.figure.dpi / 72.0
    frame = ax.get_window_extent(renderer)
    legend = ax.get_legend()
    hard: list[Box] = [_box(legend.get_window_extent(renderer))] if legend is not None else []
    soft = [_box(t.get_window_extent(renderer)) for t in ax.texts if t.get_text()] + _discs(ax, marks, longest)
    backing = {"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.8}
    style: dict[str, Any] = {"fontsize": LABEL_SIZE, "va": "center", "zorder": 6, "textcoords": "offset points",
                             "bbox": backing}  # fmt: skip
    for spot in chosen:
        lead, text = spot[0], spot_text(chart, spot)
        probe = ax.annotate(text, (lead.x, lead.y), xytext=(0, 0), **style)
        size = probe.get_window_extent(renderer)
        probe.remove()
        w, h = size.width + 6 * px_per_pt, size.height + 4 * px_per_pt
        cx, cy = ax.transData.transform((lead.x, lead.y))
        gap = (math.sqrt(area(lead.time_s, longest)) / 2 + 4) * px_per_pt
        margin = 3 * px_per_pt
        inner = (frame.x0 + margin, frame.y0 + margin, frame.x1 - margin, frame.y1 - margin)
        side, box = _free_box(cx, cy, w, h, gap, inner, ([*hard, *soft], hard))
        hard.append(box)
        dy = (box[1] + box[3]) / 2 - cy
        arrow = {"arrowstyle": "-", "color": "#555555", "lw": 0.6, "shrinkA": 0, "shrinkB": 2} if abs(dy) > 1 else None
        note = ax.annotate(text, (lead.x, lead.y), xytext=(((box[0] if side > 0 else box[2]) - cx) / px_per_pt,
                           dy / px_per_pt), ha="left" if side > 0 else "right", arrowprops=arrow, **style)  # fmt: skip
        note.set_in_layout(False)


def _free_box(cx: float, cy: float, w: float, h: float, gap: float, frame: Box,
              avoids: tuple[list[Box], ...]) -> tuple[int, Box]:  # fmt: skip
    """(side, box) of a ``w`` x ``h`` label right (side 1) or left (-1) of the point ``(cx, cy)``, ``gap``
    away, as near its height as it can be inside ``frame`` without meeting a box of the first list of
    ``avoids`` that leaves it a place; beside the point when none does."""
    for avoid in avoids:
        for step in (0, 1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6, 8, -8, 10, -10):
            for side in (1, -1):
                x0 = cx + gap if side > 0 else cx - gap - w
                y0 = cy + step * (h * 0.6 + 2) - h / 2
                box = (x0, y0, x0 + w, y0 + h)
                inside = box[0] >= frame[0] and box[2] <= frame[2] and box[1] >= frame[1] and box[3] <= frame[3]
                if inside and not any(_overlap(box, other) for other in avoid):
                    return side, box
    return 1, (cx + gap, cy - h / 2, cx + gap + w, cy + h / 2)


Box = tuple[float, float, float, float]


def _box(extent: Any) -> Box:
    return (extent.x0, extent.y0, extent.x1, extent.y1)


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
