"""``rooftop serve``'s frontier chart: time per output token against tokens/s per chip for every fitting
point, coloured by what bounds its decode step, the Pareto frontier drawn through, the chosen point starred
and the latency target (if any) shaded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rooftop.report.plot import label

if TYPE_CHECKING:
    from rooftop.plan.serve.sweep import ServingPlan, ServingPoint

BOUND_COLORS = {"memory": "tab:blue", "compute": "tab:red", "collective": "tab:orange", "overhead": "tab:gray"}


def _plotted(points: Sequence[ServingPoint]) -> list[ServingPoint]:
    """The points a log-log chart can place (positive, finite coordinates)."""
    return [p for p in points if 0 < p.step_time_s < math.inf and 0 < p.tokens_per_s_per_chip < math.inf]


def _xy(points: list[Any]) -> tuple[list[float], list[float]]:
    return [p.step_time_s * 1e3 for p in points], [p.tokens_per_s_per_chip for p in points]


def _points_by_bound(ax: Any, plan: ServingPlan) -> None:
    for bound, color in BOUND_COLORS.items():
        pts = [p for p in _plotted(plan.points) if p.fits and p.bound == bound]
        if pts:
            ax.scatter(*_xy(pts), s=22, c=color, alpha=0.55, label=f"{bound}-bound step")


def _frontier_and_choice(ax: Any, plan: ServingPlan) -> None:
    front = _plotted([plan.points[i] for i in plan.frontier])
    if front:
        ax.plot(*_xy(front), "-", color="black", lw=1.2, label="Pareto frontier")
        for p in front:
            ax.annotate(
                label(f"{p.layout.label()} b={p.batch}"),
                (p.step_time_s * 1e3, p.tokens_per_s_per_chip),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=7,
            )
    chosen = _plotted([plan.points[plan.chosen]]) if plan.chosen is not None else []
    for c in chosen:
        name = label(f"chosen: {c.layout.label()} b={c.batch}")
        ax.plot(*_xy([c]), "*", ms=18, color="gold", mec="black", zorder=5, label=name)


def plot_serve(path: str, plan: ServingPlan) -> None:
    """Write ``serve_figure`` to ``path`` (.png, .svg or .pdf), atomically."""
    from rooftop.report.plot import check_plot_path, save_figure

    check_plot_path(path)
    save_figure(serve_figure(plan), path)


def serve_figure(plan: ServingPlan) -> Any:
    """The latency/throughput frontier chart as a matplotlib Figure (see the module docstring)."""
    from rooftop.report.plot import literal_text, new_figure, plain_log_ticks

    req = plan.request
    with literal_text():
        fig, ax = new_figure()
        _points_by_bound(ax, plan)
        _frontier_and_choice(ax, plan)
        if req.max_step_latency_s and math.isfinite(req.max_step_latency_s):
            target = req.max_step_latency_s * 1e3
            hi = max([p.step_time_s * 1e3 for p in _plotted(plan.points) if p.fits] + [target]) * 1.3
            ax.axvspan(target, hi, color="grey", alpha=0.12, label="over --max-step-latency")
            ax.set_xlim(right=hi)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("time per output token (decode step, ms)")
        ax.set_ylabel("output tokens/s per chip (prefill included)")
        ax.set_title(
            f"{label(req.cfg.name)} on {req.topology.spec} {label(req.chip.name)}: prompt {req.prompt_len}, "
            f"generate {req.gen_len}, weights {req.dtypes.weights}, KV {req.dtypes.kv_cache}",
            fontsize=9,
        )
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=8, loc="lower right")
        plain_log_ticks(fig)
    return fig
