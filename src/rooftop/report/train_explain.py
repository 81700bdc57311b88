"""The winning training layout in words: why it wins, against what, with the numbers
(plan/train/explain.py returns the figures as an Explanation)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rooftop.units import format_bytes, format_duration, format_percent, format_rate, format_signed_percent, plural

if TYPE_CHECKING:
    from rooftop.plan.train.explain import CrossDomainTp, Explanation, StageSplit
    from rooftop.plan.train.parts import StepPartName
    from rooftop.plan.train.step import StepResult

#: the parts of the step a layout with tp inside one domain is compared on
_COMPARED: tuple[StepPartName, ...] = ("tensor_parallel", "fsdp", "pipeline_bubble", "data_parallel")


def explanation_lines(ex: Explanation) -> list[str]:
    """One sentence a line: the best layout, the FSDP threshold, pure FSDP, where the step goes, remat,
    tensor parallelism across fast domains and the pipeline."""
    best, par = ex.best, ex.best.parallelism
    if not best.fits:
        return [
            f"Nothing fits: the smallest layout, {par.label()}, needs {format_bytes(best.memory_per_chip_bytes)} per "
            f"chip, more than the {format_bytes(best.usable_hbm_bytes)} usable; it does not fit (its step would take "
            f"{format_duration(best.step_time_s)}). Add chips, or allow offload/remat if pinned."
        ]
    lines = [
        f"Best layout: {par.label()}: step {format_duration(best.step_time_s)}, MFU {format_percent(best.mfu, 1)} "
        f"(ideal efficiency: {format_duration(ex.ideal.step_time_s)}, MFU {format_percent(ex.ideal.mfu, 1)}), "
        f"{best.bound}-bound.",
        f"{ex.tokens_per_chip:,.0f} tokens per chip per step is "
        f"{'below' if ex.tokens_per_chip < ex.critical_tokens else 'above'} the ~{ex.critical_tokens:,.0f} tokens "
        "per chip that pure FSDP needs to hide its weight traffic (its gathers and reduce-scatters priced as the "
        f"step prices them, over {ex.critical_links} on {ex.chip}).",
        _fsdp_alone(ex),
        "Step time goes to " + ", ".join(f"{k.replace('_', ' ')} {format_duration(v)}" for k, v in ex.top_parts) + ".",
    ]
    lighter = ex.without_remat
    if lighter is not None and not lighter.fits:
        lines.append(
            f"remat={par.remat}: without remat the activations would need "
            f"{format_bytes(lighter.memory_per_chip_bytes)} per chip "
            f"(> {format_bytes(lighter.usable_hbm_bytes)} usable)."
        )
    if ex.cross_domain is not None:
        lines.append(_cross_domain(ex.cross_domain, best))
    if ex.split is not None:
        lines.append(
            f"Pipeline of {par.pp} stages x {par.virtual_stages} virtual with {par.microbatches} microbatches: "
            f"bubble {format_duration(best.breakdown['pipeline_bubble'])} "
            f"((p-1)/(v m) = {format_percent((par.pp - 1) / (par.virtual_stages * par.microbatches), 1)} of the work). "
            + _split_words(ex.split)
        )
    return lines


def _fsdp_alone(ex: Explanation) -> str:
    chips = plural(ex.chips, "chip")
    pure = ex.fsdp_alone
    if not ex.batch_feeds_every_chip:
        return (
            f"The batch of {plural(ex.global_batch, 'sequence')} cannot feed {ex.chips} data-parallel replicas, "
            "so some chips must split the model (tensor, pipeline or context parallelism)."
        )
    if pure is None:
        return f"FSDP over all {chips} is not a valid layout for this model and batch."
    if not pure.fits:
        return (
            f"FSDP over all {chips} would need {format_bytes(pure.memory_per_chip_bytes)} "
            f"per chip (> {format_bytes(pure.usable_hbm_bytes)} usable)."
        )
    return (
        f"FSDP over all {chips}: step {format_duration(pure.step_time_s)} "
        f"(MFU {format_percent(pure.mfu, 1)}), of which {format_duration(pure.breakdown['fsdp'])} "
        "exposed FSDP communication."
    )


def _split_words(split: StageSplit) -> str:
    head = f"the output head and loss (worth {split.head_layers:.2f} of a layer)"
    if split.balanced:
        return (
            f"Balanced split (pipeline_balance): the last stage holds {plural(split.last_layers, 'layer')} and "
            f"{head}, the others up to {split.most_layers}."
        )
    return f"Even split: up to {plural(split.most_layers, 'layer')} a stage, the last one with {head} on top."


def _cross_domain(x: CrossDomainTp, best: StepResult) -> str:
    what, fast = ("NVLink domains", "NVLink") if x.switched else ("slices", "ICI")
    line = (
        f"tp={x.tp} spans {x.spanned} {what} of {x.inside}: its per-layer all-gathers and reduce-scatters cross the "
        f"{'scale-out fabric' if x.switched else 'data-center network'} at {format_rate(x.dcn_bytes_per_s)} per chip "
        f"(against {format_rate(x.fast_bytes_per_s)} over {fast}); exposed tensor-parallel time "
        f"{format_duration(best.breakdown['tensor_parallel'])} of the {format_duration(best.step_time_s)} step."
    )
    alt = x.inside_best
    if alt is not None:
        parts = ", ".join(f"{k.replace('_', ' ')} {format_duration(alt.breakdown[k])}" for k in _COMPARED
                          if alt.breakdown[k] > 0)  # fmt: skip
        line += (
            f" The best layout with tp inside one, {alt.parallelism.label()}: step {format_duration(alt.step_time_s)} "
            f"({format_signed_percent(alt.step_time_s / best.step_time_s - 1)}; {parts})."
        )
    return line
