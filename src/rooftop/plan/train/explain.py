"""The winning layout in words: why it wins, against what, with the numbers."""

from __future__ import annotations

from dataclasses import replace

from rooftop.cost.collectives import mesh_groups
from rooftop.cost.roofline import flop_rate
from rooftop.errors import InvalidConfigError, ShardingError
from rooftop.plan.train.layout import Parallelism, validate
from rooftop.plan.train.step import CommPricer, StepResult, TrainingSetup, evaluate, layout_mesh, profile_for
from rooftop.units import format_bytes, format_duration, plural


def critical_tokens_per_chip(setup: TrainingSetup) -> tuple[float, int, str]:
    """Per-chip batch (tokens) below which pure FSDP cannot hide its weight traffic, priced as the
    step prices it: FSDP over every chip (the mesh the step lays), per layer an all-gather of the
    weights forward, again backward and a reduce-scatter of the gradients (cost/collectives.py, the
    setup's network efficiency), against 6 FLOPs per parameter per token at the matrix peak x
    efficiency: tokens per chip > communication_s x peak x matrix / (6 x layer parameters). With
    bf16 weights and gradients over a torus of k wrapped axes this is (N-1)/N x C / (W_bidir x k),
    How to Scale Your Model Part 5's ~2550 / k on TPU v5p with its 9e10 B/s links.
    Returns (tokens, groups the gather runs over, their links)."""
    chip, eff = setup.chip, setup.efficiency
    par = Parallelism(fsdp=setup.chips)
    mesh = layout_mesh(setup.topology, par)
    pricer = CommPricer(mesh, chip, eff.network)
    _, w_bytes, g_bytes = setup.element_bytes
    params = max(g.params + g.expert_params for g in profile_for(setup, "none").groups)
    comm = 2 * pricer.time("all-gather", ("fsdp",), params * w_bytes)
    comm += pricer.time("reduce-scatter", ("fsdp",), params * g_bytes)
    rate = flop_rate(chip, "matrix", setup.dtypes.activations, eff)[2]
    groups = mesh_groups(mesh, ("fsdp",), chip) if setup.chips > 1 else ()
    links = ", ".join(f"{g.shape} of {g.size} over {g.link}" for g in groups) or "one chip"
    return comm * rate / (6 * params), len(groups), links


def _try(setup: TrainingSetup, par: Parallelism) -> StepResult | None:
    try:
        validate(par, setup.cfg, setup.chips, setup.global_batch, setup.seq_len)
        return evaluate(setup, par, CommPricer(layout_mesh(setup.topology, par), setup.chip, setup.efficiency.network))
    except (InvalidConfigError, ShardingError):
        return None


def explain(setup: TrainingSetup, best: StepResult, ideal: StepResult) -> list[str]:
    par = best.parallelism
    if not best.fits:
        return [
            f"Nothing fits: the smallest layout, {par.label()}, needs {format_bytes(best.memory_per_chip_bytes)} per "
            f"chip, more than the {format_bytes(best.usable_hbm_bytes)} usable; it does not fit (its step would take "
            f"{format_duration(best.step_time_s)}). Add chips, or allow offload/remat if pinned."
        ]
    lines = [
        f"Best layout: {par.label()}: step {format_duration(best.step_time_s)}, MFU {best.mfu:.1%} "
        f"(ideal efficiency: {format_duration(ideal.step_time_s)}, MFU {ideal.mfu:.1%}), {best.bound}-bound."
    ]
    per_chip = setup.tokens_per_step / setup.chips
    crit, _axes, links = critical_tokens_per_chip(setup)
    verdict = "below" if per_chip < crit else "above"
    lines.append(
        f"{per_chip:,.0f} tokens per chip per step is {verdict} the ~{crit:,.0f} tokens per chip that pure FSDP "
        f"needs to hide its weight traffic (its gathers and reduce-scatters priced as the step prices them, over "
        f"{links} on {setup.chip.name})."
    )
    data = min(setup.chips, setup.global_batch)
    if setup.chips % data == 0 and setup.chips == data:
        pure = _try(setup, Parallelism(fsdp=setup.chips, remat=par.remat))
        if pure is None:
            lines.append(f"FSDP over all {plural(setup.chips, 'chip')} is not a valid layout for this model and batch.")
        elif not pure.fits:
            lines.append(
                f"FSDP over all {plural(setup.chips, 'chip')} would need {format_bytes(pure.memory_per_chip_bytes)} "
                f"per chip (> {format_bytes(pure.usable_hbm_bytes)} usable)."
            )
        else:
            lines.append(
                f"FSDP over all {plural(setup.chips, 'chip')}: step {format_duration(pure.step_time_s)} "
                f"(MFU {pure.mfu:.1%}), of which {format_duration(pure.breakdown['fsdp'])} exposed FSDP "
                "communication."
            )
    else:
        lines.append(
            f"The batch of {plural(setup.global_batch, 'sequence')} cannot feed {setup.chips} data-parallel replicas, "
            "so some chips must split the model (tensor, pipeline or context parallelism)."
        )
    big = sorted(((v, k) for k, v in best.breakdown.items() if v > 0), reverse=True)[:3]
    lines.append("Step time goes to " + ", ".join(f"{k.replace('_', ' ')} {format_duration(v)}" for v, k in big) + ".")
    if par.remat != "none":
        lighter = _try(setup, replace(par, remat="none"))
        if lighter is not None and not lighter.fits:
            lines.append(
                f"remat={par.remat}: without remat the activations would need "
                f"{format_bytes(lighter.memory_per_chip_bytes)} per chip "
                f"(> {format_bytes(lighter.usable_hbm_bytes)} usable)."
            )
    if par.pp > 1:
        lines.append(
            f"Pipeline of {par.pp} stages x {par.virtual_stages} virtual with {par.microbatches} microbatches: "
            f"bubble {format_duration(best.breakdown['pipeline_bubble'])} "
            f"((p-1)/(v m) = {(par.pp - 1) / (par.virtual_stages * par.microbatches):.1%} of the work)."
        )
    return lines


def no_layout_reason(setup: TrainingSetup, fix: dict[str, object], unlayable: int) -> str:
    """Why the search found no valid layout at all (as opposed to none that fits in memory)."""
    degrees = {k: int(v) for k, v in fix.items() if k in ("dp", "fsdp", "tp", "pp", "cp") and isinstance(v, int)}
    pinned = ",".join(f"{k}={v}" for k, v in fix.items())
    where = plural(setup.chips, f"{setup.chip.name} chip")
    product = 1
    for v in degrees.values():
        product *= max(v, 1)
    if any(v < 1 for v in degrees.values()):
        return f"--fix {pinned}: every degree must be >= 1"
    if setup.chips % product:
        return f"--fix {pinned}: the pinned degrees multiply to {product}, which does not divide the {where}"
    rest = setup.chips // product
    free = {"dp": rest} if "dp" not in degrees and "fsdp" not in degrees else {}
    try:
        par = Parallelism(**{**degrees, **free, **{k: v for k, v in fix.items() if k not in degrees}})  # type: ignore[arg-type]
        validate(par, setup.cfg, setup.chips, setup.global_batch, setup.seq_len)
    except InvalidConfigError as exc:
        return f"no valid layout{f' with --fix {pinned}' if pinned else ''} for {setup.cfg.name} on {where}: {exc}"
    if unlayable:
        return (
            f"no layout{f' with --fix {pinned}' if pinned else ''} can be laid on topology {setup.topology.spec} "
            f"({unlayable} tried); try another --topology or other degrees"
        )
    return f"no valid layout{f' with --fix {pinned}' if pinned else ''} for {setup.cfg.name} on {where}"
