"""``rooftop train``: the ranked training layouts as JSON, tables and a breakdown chart."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rooftop.report.formulas import term_dict, term_formula
from rooftop.report.jaxspec import train_jax_dict
from rooftop.report.table import say, table, words
from rooftop.report.train_explain import explanation_lines
from rooftop.units import format_bytes, format_duration, format_number, format_percent, plural

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.plan.train.breakdown import StepPart
    from rooftop.plan.train.plan import TrainingPlan, TrainingTotals
    from rooftop.plan.train.step import StepResult


def part_dict(part: StepPart) -> dict[str, Any]:
    """One part of a step: its seconds, bound, how its terms combine and the terms."""
    return {
        "time_s": part.time_s,
        "bound": part.bound,
        "combine": part.combine,
        "terms": [term_dict(t) for t in part.terms],
    }


def step_dict(r: StepResult, parts: list[StepPart]) -> dict[str, Any]:
    p = r.parallelism
    return {
        "parallelism": {
            "dp": p.dp,
            "fsdp": p.fsdp,
            "tp": p.tp,
            "pp": p.pp,
            "ep": p.ep,
            "cp": p.cp,
            "microbatches": p.microbatches,
            "virtual_stages": p.virtual_stages,
            "remat": p.remat,
            "zero_stage": p.zero_stage,
            "offload": p.offload,
            "sequence_parallel": p.sequence_parallel,
            "pipeline_balance": p.pipeline_balance,
            "fsdp_reshard": p.fsdp_reshard,
            "label": p.label(),
        },
        "step_time_s": r.step_time_s,
        "tokens_per_s": r.tokens_per_s,
        "mfu": r.mfu,
        "hfu": r.hfu,
        "memory_per_chip_bytes": {"total": r.memory_per_chip_bytes, **r.memory.as_dict()},
        "hbm_bytes": r.hbm_bytes,
        "usable_hbm_bytes": r.usable_hbm_bytes,
        "fits": r.fits,
        "bound": r.bound,
        "breakdown": {part.name: part_dict(part) for part in parts},
        "breakdown_s": {"total": r.step_time_s, **r.breakdown.as_dict()},
        "model_flops_per_step": r.model_flops_per_step,
        "hardware_flops_per_step": r.hardware_flops_per_step,
    }


def totals_dict(t: TrainingTotals) -> dict[str, Any]:
    """The training time, chip-hours and dollars (null without ``--tokens``)."""
    return {
        "tokens": t.tokens,
        "train_time_s": t.train_time_s,
        "chip_hours": t.chip_hours,
        "cost_usd": t.cost_usd,
        "price_usd_per_chip_hour": t.price_usd_per_chip_hour,
    }


def train_payload(plan: TrainingPlan) -> dict[str, Any]:
    """``rooftop train --json``: ``best`` is the best layout with its breakdown and its step at ideal
    efficiency, ``candidates`` the ranked layouts, then the search's counts, the explanation and the
    totals."""
    setup, ranked, parts, ideal, result = plan.setup, plan.ranked, plan.parts, plan.ideal, plan.search
    return {
        "schema_version": 2,  # 2: best/candidates[].breakdown parts are objects with terms (seconds in breakdown_s)
        "model": setup.cfg.name,
        "chip": setup.chip.name,
        "topology": setup.topology.spec,
        "chips": setup.chips,
        "global_batch_sequences": setup.global_batch,
        "global_batch_tokens": setup.tokens_per_step,
        "seq_len": setup.seq_len,
        "efficiency": setup.efficiency.as_dict(),
        "optimizer": setup.precision.optimizer,
        "flash_attention": setup.flash_attention,
        "compute_dtype": setup.dtypes.matmul or setup.dtypes.activations,
        "max_nodes_per_token": setup.max_nodes_per_token or None,
        "dropout": setup.dropout,
        "framework": setup.stack.name,
        "algorithm": setup.stack.algorithm.name if setup.stack.algorithm is not None else "hierarchical",
        "best": {**step_dict(ranked[0], parts[0]), "ideal": {"step_time_s": ideal.step_time_s, "mfu": ideal.mfu}},
        "candidates": [step_dict(r, p) for r, p in zip(ranked, parts, strict=True)],
        "evaluated": result.evaluated,
        "timed": result.timed,
        "unlayable": result.unlayable,
        "explanation": explanation_lines(plan.explanation),
        **totals_dict(plan.totals),
        "jax": train_jax_dict(ranked[0].parallelism),
    }


def render_train(console: Console, plan: TrainingPlan) -> None:
    """The ranked layouts, the best one's step part by part and its memory, the explanation and the totals."""
    setup, evaluated, ranked, totals = plan.setup, plan.search.evaluated, plan.ranked, plan.totals
    title = (
        f"{setup.cfg.name} on {setup.chips} x {setup.chip.name} ({setup.topology.spec}), "
        f"{plural(evaluated, 'layout')} evaluated"
    )
    rows = [
        (
            i + 1,
            r.parallelism.label(),
            format_duration(r.step_time_s),
            f"{format_percent(r.mfu, 1)}",
            f"{r.tokens_per_s:,.0f}",
            format_bytes(r.memory_per_chip_bytes),
            words(r.bound),
        )
        for i, r in enumerate(ranked)
    ]
    console.print(table(title, ["#", "layout", "step", "MFU", "tokens/s", "mem/chip", "bound"], rows))
    best = ranked[0]
    part_rows: list[tuple[str, str, str, str]] = []
    for part in plan.parts[0]:
        if part.time_s <= 0:
            continue
        part_rows.append((words(part.name), format_duration(part.time_s), words(part.bound), ""))
        for t in part.terms:
            if t.seconds:
                part_rows.append(("  " + t.name, format_duration(t.seconds), words(t.kind), term_formula(t)))
    console.print(
        table("step time of the best layout, part by part", ["part / term", "time", "bound", "from"], part_rows)
    )
    console.print(
        table(
            f"memory per chip (HBM {format_bytes(best.hbm_bytes)}, usable {format_bytes(best.usable_hbm_bytes)})",
            ["part", "bytes"],
            [(words(k), format_bytes(v)) for k, v in best.memory.items() if v > 0],
        )
    )
    for line in explanation_lines(plan.explanation):
        say(console, line)
    if totals.tokens is not None and totals.train_time_s is not None and totals.chip_hours is not None:
        cost = totals.cost_usd
        cost_txt = f", ${cost:,.0f}" if cost is not None else " (no price for this chip: pass --price-per-chip-hour)"
        say(
            console,
            f"Training on {format_number(totals.tokens)} tokens: {format_duration(totals.train_time_s)}, "
            f"{totals.chip_hours:,.0f} chip-hours{cost_txt}",
            style="bold",
        )


def plot_train(best: StepResult, path: str) -> None:
    """Write ``train_figure`` to ``path`` (.png, .svg or .pdf), atomically."""
    from rooftop.report.plot import check_plot_path, save_figure

    check_plot_path(path)
    save_figure(train_figure(best), path)


def train_figure(best: StepResult) -> Any:
    """Two panels, as a matplotlib Figure: the step-time breakdown and the per-chip memory breakdown against HBM."""
    import matplotlib

    from rooftop.report.plot import label, literal_text, new_figure

    tab10 = matplotlib.colormaps["tab10"]
    with literal_text():
        fig, (a1, a2) = new_figure(1, 2, figsize=(11, 4.5))
        parts = [(label(words(k)), v) for k, v in best.breakdown.items() if math.isfinite(v) and v > 0]
        a1.barh([p[0] for p in parts], [p[1] for p in parts], color="tab:blue")
        a1.set_xlabel("seconds per step")
        a1.set_title(f"step {format_duration(best.step_time_s)}, MFU {format_percent(best.mfu, 1)}")
        mem = [(label(words(k)), v / 2**30) for k, v in best.memory.items() if math.isfinite(v) and v > 0]
        left = 0.0
        for i, (k, v) in enumerate(mem):
            a2.barh(["memory"], [v], left=left, label=k, color=tab10(i % 10))
            left += v
        limits = ((best.hbm_bytes, "red", "--", "HBM"), (best.usable_hbm_bytes, "orange", ":", "usable"))
        for limit, color, ls, name in limits:
            if math.isfinite(limit):
                a2.axvline(limit / 2**30, color=color, ls=ls, label=name)
        a2.set_xlabel("GiB per chip")
        a2.set_title("fits" if best.fits else "does NOT fit")
        a2.legend(fontsize=8, loc="upper right")
        fig.suptitle(label(best.parallelism.label(), 200))
    return fig
