"""Charts (matplotlib, no screen needed): figures drawn off pyplot, written atomically.

Every chart is drawn inside ``figure()``: a ``matplotlib.figure.Figure`` that pyplot never
sees (nothing to leak when drawing or saving fails, and the caller's pyplot backend is left
alone), under settings that make text literal (no mathtext, no TeX: a ``$`` or ``_`` in a
name from an input file is drawn as it is), names cut to a label's length (``label``).
``save`` checks the path first (``check_plot_path``), renders in the format the extension
names into a temporary file beside the target and renames it over the target with a normal
file's permissions (report/files.py): a failure leaves nothing behind.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rooftop.cost.roofline import Estimate
from rooftop.errors import InvalidConfigError, shown, visible
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
def figure(nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] = (8, 5.5)) -> Iterator[tuple[Any, Any]]:
    """``(fig, axes)`` of a new Figure (not registered with pyplot), with literal text."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=figsize)
        try:
            yield fig, fig.subplots(nrows, ncols)
        finally:
            fig.clear()


def colors() -> list[str]:
    """The colour cycle of the current matplotlib style."""
    import matplotlib

    return list(matplotlib.rcParams["axes.prop_cycle"].by_key()["color"])


def save(fig: Any, path: str) -> None:
    """Render ``fig`` in the format ``path``'s extension names, atomically (see the module docstring)."""
    fmt = check_plot_path(path)
    with replacing(path, "plot file") as tmp:
        try:
            fig.savefig(tmp, format=fmt, dpi=130, bbox_inches="tight")
        except (OverflowError, ValueError, RuntimeError, ZeroDivisionError, MemoryError, zlib.error) as exc:
            raise InvalidConfigError(f"cannot draw plot {shown(path)}: {' '.join(str(exc).split())[:200]}") from None


def _finite_positive(*values: float) -> bool:
    return all(math.isfinite(v) and v > 0 for v in values)


def roofline_chart(chip: Chip, ops: Sequence[PlacedOp], path: str) -> None:
    """Log-log roofline of ``chip``: one compute ceiling per matrix dtype (and the
    vector unit), the HBM slope, each ridge point marked, and the ops placed at
    (arithmetic intensity, attained FLOPs/s at their lower-bound time)."""
    check_plot_path(path)
    bw = chip.hbm_bytes_per_s
    ceilings = [(f"matrix {d}", f) for d, f in sorted(chip.matrix_flops_per_s.items(), key=lambda kv: -kv[1])]
    ceilings += [(f"vector {d}", f) for d, f in sorted(chip.vector_flops_per_s.items(), key=lambda kv: -kv[1])[:1]]
    ceilings = [(name, peak) for name, peak in ceilings if _finite_positive(peak, peak / bw)]
    placed = []
    for name, est, _dtype, _unit in ops:
        intensity, lb = est.arithmetic_intensity, est.lower_bound_s
        if _finite_positive(intensity, lb, est.flops) and _finite_positive(est.flops / lb):
            placed.append((name, est, est.flops / lb))
    ridges = [f / bw for _, f in ceilings]
    lo = min([0.1, *(p[1].arithmetic_intensity for p in placed), *ridges]) / 2
    hi = max([1e4, *(p[1].arithmetic_intensity for p in placed), *ridges]) * 4
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    with figure() as (fig, ax):
        palette = colors()
        for i, (name, peak) in enumerate(ceilings):
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
        if ceilings:
            ax.set_ylim(top=max(f for _, f in ceilings) * 3)
        ax.set_xlabel("arithmetic intensity (FLOPs per HBM byte)")
        ax.set_ylabel("attainable FLOPs/s")
        ax.set_title(f"Roofline of {label(chip.name)} (dense peaks)")
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=8, loc="lower right")
        save(fig, path)
