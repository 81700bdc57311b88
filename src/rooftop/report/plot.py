"""Charts (matplotlib, no screen needed): figures drawn off pyplot, written atomically.

Every chart is a ``matplotlib.figure.Figure`` that pyplot never sees (nothing to leak when
drawing or saving fails, and the caller's pyplot backend is left alone), drawn under settings
that make text literal (no mathtext, no TeX: a ``$`` or ``_`` in a name from an input file is
drawn as it is), names cut to a label's length (``label``). Each chart has a function that
returns its Figure, for a notebook to show (``roofline_figure`` here, ``train_figure``,
``serve_figure``, ``hlo_figure``, ``profile_figure`` beside their commands), drawn inside
``literal_text()`` on ``new_figure()``; the command line writes it with ``save_figure``. Log
axes label their ticks in plain text (``plain_log_ticks``: matplotlib's own log labels are
mathtext, which literal text would print as ``$\\mathdefault{10^{3}}$``).
``save`` checks the path first (``check_plot_path``), renders in the format the extension
names into a temporary file beside the target and renames it over the target with a normal
file's permissions (report/files.py): a failure leaves nothing behind.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rooftop.cost.roofline import Estimate
from rooftop.errors import InvalidConfigError, RooftopError, shown, visible
from rooftop.hardware.chip import Chip
from rooftop.report.files import check_output_path, replacing
from rooftop.units import format_plain, format_rate

PlacedOp = tuple[str, Estimate, str, str]  # (label, estimate, compute dtype, unit)

#: the file formats a plot can be written in, by extension
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}

#: text is literal (a name like ``a$b$c`` or ``x_1`` must not become math), whatever the
#: user's matplotlibrc says
_RC: Any = {"text.usetex": False, "text.parse_math": False}

#: longest text (characters) of one label from an input: a megabyte-long kernel name stays a label
LABEL_CHARS = 80


def label(text: object, limit: int = LABEL_CHARS) -> str:
    """A name from an input, fit for a chart: control characters written out, cut to ``limit``."""
    out = visible(text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def check_plot_path(path: str) -> str:
    """The format ``path`` will be written in; a one-line error, before anything is drawn, for a
    path no plot can be written to (files.check_output_path)."""
    return FORMATS[check_output_path(path, "plot file", tuple(FORMATS), "roofline.png", flag="--plot")]


@contextmanager
def literal_text() -> Iterator[None]:
    """Draw inside this: every text made in it keeps the literal settings (no mathtext, no TeX)."""
    import matplotlib

    with matplotlib.rc_context(_RC):
        yield


@contextmanager
def figure(nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] = (8, 5.5)) -> Iterator[tuple[Any, Any]]:
    """``(fig, axes)`` of a new Figure (not registered with pyplot), with literal text."""
    from matplotlib.figure import Figure

    with literal_text():
        fig = Figure(figsize=figsize)
        try:
            yield fig, fig.subplots(nrows, ncols)
        finally:
            fig.clear()


def colors() -> list[str]:
    """The colour cycle of the current matplotlib style."""
    import matplotlib

    return list(matplotlib.rcParams["axes.prop_cycle"].by_key()["color"])


def plain_number(value: float) -> str:
    """A tick's number in plain text: 0.001 to 10,000 as they are ("0.01", "300"), others as "1e15",
    "2e-5"."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    if 1e-3 <= abs(value) < 1e5:
        return f"{value:g}"
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def plain_log_ticks(fig: Any) -> None:
    """Give every log axis of ``fig`` still labelled by matplotlib's mathtext formatter the same labels
    in plain text (the same ticks labelled, minor ones included)."""
    from matplotlib.ticker import LogFormatter, LogFormatterMathtext

    class PlainLogFormatter(LogFormatter):
        def __call__(self, x: float, pos: int | None = None) -> str:
            return plain_number(x) if super().__call__(x, pos) else ""

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() != "log":
                continue
            for old, setter in ((axis.get_major_formatter(), axis.set_major_formatter),
                                (axis.get_minor_formatter(), axis.set_minor_formatter)):  # fmt: skip
                if isinstance(old, LogFormatterMathtext):
                    base = getattr(axis.get_transform(), "base", 10.0)
                    setter(PlainLogFormatter(base, labelOnlyBase=old.labelOnlyBase,
                                             minor_thresholds=old.minor_thresholds))  # fmt: skip


def save(fig: Any, path: str) -> None:
    """Render ``fig`` in the format ``path``'s extension names, atomically (see the module docstring). A
    figure that lays itself out (constrained layout) is saved whole; any other is cut to what it draws."""
    fmt = check_plot_path(path)
    plain_log_ticks(fig)
    tight = None if fig.get_layout_engine() is not None else "tight"
    with replacing(path, "plot file") as tmp, literal_text():
        try:
            fig.savefig(tmp, format=fmt, dpi=130, bbox_inches=tight)
        except (OverflowError, ValueError, RuntimeError, ZeroDivisionError, MemoryError, zlib.error) as exc:
            raise InvalidConfigError(f"cannot draw plot {shown(path)}: {' '.join(str(exc).split())[:200]}") from None


def _finite_positive(*values: float) -> bool:
    return all(math.isfinite(v) and v > 0 for v in values)


def ceilings(chip: Chip, wanted: Iterable[tuple[str, str]] | None = None) -> list[tuple[str, float]]:
    """The compute ceilings of ``chip`` as (name, FLOP/s), highest first: each (unit, dtype) of ``wanted``
    as the chip runs it (``Chip.flops_rate``: fp8 on a chip without fp8 runs as bf16), or, when ``wanted``
    is None, every matrix dtype and the vector unit's fastest. Dtypes of one unit at one peak share a
    ceiling ("matrix bf16/fp16"); a peak that is not a finite positive number, or a unit the chip does not
    have, gives none."""
    if wanted is None:
        top = max(chip.vector_flops_per_s.values(), default=0.0)
        wanted = [("matrix", d) for d in chip.matrix_flops_per_s]
        wanted += [("vector", d) for d, f in chip.vector_flops_per_s.items() if f == top]
    peaks: dict[tuple[str, float], list[str]] = {}
    for unit, dtype in wanted:
        if unit == "vector" and not chip.vector_flops_per_s:
            continue
        try:
            used, peak = chip.flops_rate(dtype, unit)  # type: ignore[arg-type]
        except RooftopError:
            continue
        names = peaks.setdefault((unit, peak), [])
        if _finite_positive(peak, peak / chip.hbm_bytes_per_s) and used not in names:
            names.append(used)
    found = [(f"{unit} {'/'.join(names)}", peak) for (unit, peak), names in peaks.items() if names]
    return sorted(found, key=lambda c: (-c[1], c[0]))


def roofline_chart(chip: Chip, ops: Sequence[PlacedOp], path: str) -> None:
    """Write ``roofline_figure`` to ``path`` (.png, .svg or .pdf), atomically."""
    check_plot_path(path)
    save_figure(roofline_figure(chip, ops), path)


def save_figure(fig: Any, path: str) -> None:
    """``save`` a figure a ``*_figure`` function returned, then free it."""
    try:
        save(fig, path)
    finally:
        fig.clear()


def new_figure(nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] = (8, 5.5)) -> tuple[Any, Any]:
    """``(fig, axes)`` of a new Figure (not registered with pyplot) for a chart returned to its caller (a
    notebook shows it, ``save_figure`` writes it): call it, and draw, inside ``literal_text()``."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols)


def roofline_figure(chip: Chip, ops: Sequence[PlacedOp] = ()) -> Any:
    """Log-log roofline of ``chip`` as a matplotlib Figure: one compute ceiling per matrix dtype (and the
    vector unit), the HBM slope, each ridge point marked, and the ops placed at (arithmetic intensity,
    attained FLOPs/s at their lower-bound time)."""
    bw = chip.hbm_bytes_per_s
    roofs = ceilings(chip)
    placed = []
    for name, est, _dtype, _unit in ops:
        intensity, lb = est.arithmetic_intensity, est.lower_bound_s
        if _finite_positive(intensity, lb, est.flops) and _finite_positive(est.flops / lb):
            placed.append((name, est, est.flops / lb))
    ridges = [f / bw for _, f in roofs]
    lo = min([0.1, *(p[1].arithmetic_intensity for p in placed), *ridges]) / 2
    hi = max([1e4, *(p[1].arithmetic_intensity for p in placed), *ridges]) * 4
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    with literal_text():
        fig, ax = new_figure()
        palette = colors()
        for i, (name, peak) in enumerate(roofs):
            c = palette[i % len(palette)]
            ax.plot(
                xs,
                [min(peak, x * bw) for x in xs],
                color=c,
                lw=2,
                label=label(f"{name}: {format_rate(peak, 'FLOP/s')}, ridge {format_plain(peak / bw)} FLOP/B"),
            )
            ax.axvline(peak / bw, color=c, ls=":", lw=1)
            ax.plot([peak / bw], [peak], "o", color=c)
        if _finite_positive(bw):
            ax.plot(xs, [x * bw for x in xs], color="grey", lw=0.8, ls="--", label=f"HBM {format_rate(bw)}")
        for name, est, attained in placed:
            ax.plot([est.arithmetic_intensity], [attained], "*", ms=14, color="black", zorder=5)
            ax.annotate(
                f"{label(name)}\n{est.bound}-bound, {format_rate(attained, 'FLOP/s')}",
                (est.arithmetic_intensity, attained),
                textcoords="offset points",
                xytext=(8, -28),
                fontsize=8,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        if roofs:
            ax.set_ylim(top=max(f for _, f in roofs) * 3)
        ax.set_xlabel("arithmetic intensity (FLOPs per HBM byte)")
        ax.set_ylabel("attainable FLOPs/s")
        ax.set_title(f"Roofline of {label(chip.name)} (dense peaks)")
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=8, loc="lower right")
        plain_log_ticks(fig)
    return fig
