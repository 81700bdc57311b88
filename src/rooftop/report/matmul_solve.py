"""``rooftop matmul --critical DIM``, ``--sweep DIM=LO:HI`` and ``--search``: the critical size and the
sweep (sharding/solve.py), the input shardings searched (sharding/search.py), as JSON, tables and a chart."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rooftop.report.book import BOOK
from rooftop.report.table import say, table
from rooftop.units import format_duration, format_rate

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.hardware.chip import Chip
    from rooftop.sharding.search import Candidate
    from rooftop.sharding.solve import CriticalSize, SweepSeries


def critical_dict(c: CriticalSize) -> dict[str, Any]:
    """The ``critical`` key."""
    est = c.estimate
    return {
        "dim": c.dim,
        "size": c.size,
        "critical_intensity": c.critical_intensity,
        "arithmetic_intensity": est.arithmetic_intensity if est else None,
        "compute_s": est.compute_s if est else None,
        "memory_s": est.memory_s if est else None,
        "book_size": c.book_size,
        "book_formula": (
            f"{c.dim} > C / W_hbm x bytes({c.book_dtype}) / 2 = {c.critical_intensity:.4g} x "
            f"{_bytes(c.book_dtype)} / 2 = {c.book_size:.4g} (the traffic taken as the operand without {c.dim})"
            if c.book_size is not None
            else ""
        ),
        "book_part": f"{BOOK}, Part 1 'Rooflines' (and Part 2 Question 4 for the exact form)",
    }


def _bytes(dtype: str | None) -> str:
    from rooftop.dtypes import dtype_bytes

    return f"{dtype_bytes(dtype):g}" if dtype else "?"


def render_critical(console: Console, c: CriticalSize) -> None:
    if c.size is None:
        say(console, f"critical {c.dim}: none, the matmul stays memory-bound at any {c.dim} (the other dims are small)")
    else:
        say(console, f"critical {c.dim}: {c.size:,} (the smallest {c.dim} at which compute >= HBM time)")
    if c.book_size is not None:
        say(console, f"book ({BOOK}, Part 1): {critical_dict(c)['book_formula']}")


def sweep_dict(dim: str, series: tuple[SweepSeries, ...]) -> dict[str, Any]:
    """The ``sweep`` key."""
    return {
        "dim": dim,
        "series": [
            {
                "label": s.label,
                "dims": dict(s.sizes),
                "points": [
                    {
                        "size": n,
                        "flops_per_s": est.flops / est.lower_bound_s if est.lower_bound_s else 0.0,
                        "time_s": est.lower_bound_s,
                        "bound": est.bound,
                    }
                    for n, est in s.points
                ],
            }
            for s in series
        ],
    }


def render_sweep(console: Console, dim: str, series: tuple[SweepSeries, ...]) -> None:
    sizes = [n for n, _ in series[0].points]
    rows = [
        (s.label, *(format_rate(e.flops / e.lower_bound_s if e.lower_bound_s else 0.0, "FLOP/s") for _, e in s.points))
        for s in series
    ]
    console.print(table(f"FLOP/s against {dim}", ["series", *(f"{dim}={n:,}" for n in sizes)], rows))
    last = series[-1].points[-1][1]
    say(
        console,
        f"at {dim}={sizes[-1]:,}, {series[-1].label}: {format_duration(last.lower_bound_s)}, {last.bound}-bound",
    )


def plot_sweep(path: str, chip: Chip, dim: str, series: tuple[SweepSeries, ...]) -> None:
    """FLOP/s against ``dim`` (log-log), one line per series, the chip's peak of the compute dtype dashed."""
    from rooftop.report.plot import check_plot_path, colors, label, literal_text, new_figure, save_figure

    check_plot_path(path)
    with literal_text():
        fig, ax = new_figure()
        palette = colors()
        peak = 0.0
        for i, s in enumerate(series):
            xs = [n for n, _ in s.points]
            ys = [e.flops / e.lower_bound_s if e.lower_bound_s else 0.0 for _, e in s.points]
            ax.plot(xs, ys, marker="o", color=palette[i % len(palette)], label=label(s.label))
            peak = max(peak, *(e.compute_s and e.flops / e.compute_s for _, e in s.points))
        ax.axhline(peak, linestyle="--", color="grey", label=f"peak {format_rate(peak, 'FLOP/s')}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(dim)
        ax.set_ylabel("FLOP/s (at the roofline's lower bound)")
        ax.set_title(label(f"matmul FLOP/s against {dim} on {chip.name}"))
        ax.legend()
    save_figure(fig, path)


def search_dict(found: tuple[Candidate, ...]) -> list[dict[str, Any]]:
    """The ``search`` key: the fastest input shardings, best first."""
    out = []
    for c in found:
        best = c.result.best
        est = best.estimate
        out.append(
            {
                "lhs": c.result.inputs[0].notation(),
                "rhs": c.result.inputs[1].notation(),
                "strategy": best.strategy.name,
                "output_sharding": best.strategy.output.notation(),
                "collectives": [
                    {"kind": s.kind, "axes": list(s.axes), "bytes": s.bytes}
                    for s in best.strategy.steps
                    if s.kind != "matmul"
                ],
                "compute_s": est.compute_s,
                "memory_s": est.memory_s,
                "comm_s": est.network_s,
                "lower_bound_s": est.lower_bound_s,
                "upper_bound_s": est.upper_bound_s,
                "bound": est.bound,
            }
        )
    return out


def render_search(console: Console, found: tuple[Candidate, ...]) -> None:
    rows = [
        (
            f"{d['lhs']} @ {d['rhs']}",
            d["strategy"],
            format_duration(d["compute_s"]),
            format_duration(d["comm_s"]),
            format_duration(d["lower_bound_s"]),
            d["bound"],
        )
        for d in search_dict(found)
    ]
    columns = ["inputs", "strategy", "compute", "comm", "lower bound", "bound"]
    console.print(table("input shardings searched, fastest first (Part 3 Question 5)", columns, rows))
