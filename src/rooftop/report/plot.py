"""Charts (matplotlib, Agg backend: files only, no screen needed)."""

from __future__ import annotations

import math
import os
import tempfile
import zlib
from collections.abc import Sequence

from rooftop.cost.roofline import Estimate
from rooftop.errors import InvalidConfigError
from rooftop.hardware.chip import Chip
from rooftop.units import format_rate

PlacedOp = tuple[str, Estimate, str, str]  # (label, estimate, compute dtype, unit)


def _figure():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: str) -> None:  # type: ignore[no-untyped-def]
    """Render to a temporary file beside ``path`` and rename it: a failure leaves nothing half-written."""
    if not path.lower().endswith((".png", ".svg", ".pdf")):
        raise InvalidConfigError(f"plot file {path!r} must end in .png, .svg or .pdf")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".rooftop-plot-", suffix=os.path.splitext(path)[1], dir=folder)
    except OSError as exc:
        raise InvalidConfigError(f"cannot write plot {path!r}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=130, bbox_inches="tight")
        os.replace(tmp, path)
    except OSError as exc:
        raise InvalidConfigError(f"cannot write plot {path!r}: {exc.strerror or exc}") from None
    except (OverflowError, ValueError, RuntimeError, zlib.error) as exc:
        raise InvalidConfigError(f"cannot draw plot {path!r}: {' '.join(str(exc).split())[:200]}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def roofline_chart(chip: Chip, ops: Sequence[PlacedOp], path: str) -> None:
    """Log-log roofline of ``chip``: one compute ceiling per matrix dtype (and the
    vector unit), the HBM slope, each ridge point marked, and the ops placed at
    (arithmetic intensity, attained FLOPs/s at their lower-bound time)."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    bw = chip.hbm_bytes_per_s
    intensities = [op[1].arithmetic_intensity for op in ops if math.isfinite(op[1].arithmetic_intensity)]
    ceilings = [(f"matrix {d}", f) for d, f in sorted(chip.matrix_flops_per_s.items(), key=lambda kv: -kv[1])]
    ceilings += [(f"vector {d}", f) for d, f in sorted(chip.vector_flops_per_s.items(), key=lambda kv: -kv[1])[:1]]
    ridges = [f / bw for _, f in ceilings]
    lo = min([0.1, *intensities, *ridges]) / 2
    hi = max([1e4, *intensities, *ridges]) * 4
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, peak) in enumerate(ceilings):
        c = colors[i % len(colors)]
        ax.plot(
            xs,
            [min(peak, x * bw) for x in xs],
            color=c,
            lw=2,
            label=f"{label}: {format_rate(peak, 'FLOP/s')}, ridge {peak / bw:.0f} FLOP/B",
        )
        ax.axvline(peak / bw, color=c, ls=":", lw=1)
        ax.plot([peak / bw], [peak], "o", color=c)
    ax.plot(xs, [x * bw for x in xs], color="grey", lw=0.8, ls="--", label=f"HBM {format_rate(bw)}")
    for label, est, _dtype, _unit in ops:
        if est.lower_bound_s <= 0 or not math.isfinite(est.arithmetic_intensity):
            continue
        attained = est.flops / est.lower_bound_s
        ax.plot([est.arithmetic_intensity], [attained], "*", ms=14, color="black", zorder=5)
        ax.annotate(
            f"{label}\n{est.bound}-bound, {format_rate(attained, 'FLOP/s')}",
            (est.arithmetic_intensity, attained),
            textcoords="offset points",
            xytext=(8, -28),
            fontsize=8,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(top=max(f for _, f in ceilings) * 3)
    ax.set_xlabel("arithmetic intensity (FLOPs per HBM byte)")
    ax.set_ylabel("attainable FLOPs/s")
    ax.set_title(f"Roofline of {chip.name} (dense peaks)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="lower right")
    save(fig, path)
    plt.close(fig)
