"""The winning layout in words: why it wins, against what, with the numbers."""

from __future__ import annotations

from dataclasses import dataclass, replace

from rooftop.cost.algorithms import Algorithm
from rooftop.cost.groups import mesh_groups
from rooftop.cost.roofline import flop_rate
from rooftop.errors import InvalidConfigError, ShardingError
from rooftop.hardware.topology import Mesh, domains_spanned
from rooftop.plan.fix import FIX
from rooftop.plan.train.comm import CommPricer
from rooftop.plan.train.layout import Parallelism, stage_split, validate
from rooftop.plan.train.step import StepResult, TrainingSetup, evaluate, layout_mesh, profile_for
from rooftop.reasons import Option, Part
from rooftop.units import format_bytes, format_duration, format_rate, plural


def critical_tokens_per_chip(setup: TrainingSetup) -> tuple[float, int, str]:
    """Per-chip batch (tokens) below which pure FSDP over every chip (the mesh the step lays)
    cannot hide its weight traffic (``fsdp_critical_tokens``). With bf16 weights and gradients
    over a torus of k wrapped axes this is (N-1)/N x C / (W_bidir x k), How to Scale Your Model
    Part 5's ~2550 / k on TPU v5p with its 9e10 B/s links.
    Returns (tokens, groups the gather runs over, their links)."""
    mesh = layout_mesh(setup.topology, Parallelism(fsdp=setup.chips))
    groups = mesh_groups(mesh, ("fsdp",), setup.chip) if setup.chips > 1 else ()
    links = ", ".join(f"{g.shape} of {g.size} over {g.link}" for g in groups) or "one chip"
    return fsdp_critical_tokens(setup, mesh, ("fsdp",)).tokens, len(groups), links


@dataclass(frozen=True)
class CriticalTokens:
    """Tokens per chip above which a data axis hides its weight traffic behind compute, and what
    it was priced from: the largest layer's parameters, the seconds of its collectives on the
    axes, the FLOPs per parameter per token they hide behind and the FLOP rate (peak x matrix
    efficiency): ``tokens = comm_s x flops_per_s / (flops_per_param x layer_params)``."""

    tokens: float
    layer_params: float
    comm_s: float
    flops_per_param: float
    flops_per_s: float


def _layer_params(setup: TrainingSetup) -> float:
    """Parameters of the largest layer (routed experts included: their weights move too)."""
    return max(g.params + g.expert_params for g in profile_for(setup, "none").groups)


def fsdp_critical_tokens(
    setup: TrainingSetup, mesh: Mesh, axes: tuple[str, ...], algorithm: Algorithm | None = None
) -> CriticalTokens:
    """FSDP over ``axes`` of ``mesh``, priced as the step prices it (CommPricer: cost/collectives.py
    with the setup's network efficiency): per layer an all-gather of the weights forward, again
    backward and a reduce-scatter of the gradients, against 6 FLOPs per parameter per token at the
    matrix peak x efficiency. Hidden when tokens per chip > (2 AG + RS) x rate / (6 x layer
    parameters); bandwidth-bound with bf16 weights and gradients this is (N-1)/N x C / W, W the
    all-gather bandwidth per chip of the axes (How to Scale Your Model Part 5: B/X > C/W_ici). A
    bandwidth rule: the collectives are priced by ``algorithm`` (default cost/collectives.py's staged
    rules, without the framework's per-step ring latency, which the step itself adds) at the layer's
    message size."""
    params = _layer_params(setup)
    _, w_bytes, g_bytes = setup.element_bytes
    pricer = CommPricer(mesh, setup.chip, setup.efficiency.network, algorithm=algorithm)
    comm = 2 * pricer.time("all-gather", axes, params * w_bytes) + pricer.time("reduce-scatter", axes, params * g_bytes)
    rate = flop_rate(setup.chip, "matrix", setup.dtypes.activations, setup.efficiency)[2]
    return CriticalTokens(comm * rate / (6 * params), params, comm, 6.0, rate)


def dp_critical_tokens(
    setup: TrainingSetup, mesh: Mesh, axes: tuple[str, ...], algorithm: Algorithm | None = None
) -> CriticalTokens:
    """Pure data parallelism over ``axes``: per layer an all-reduce of the gradients, which only the
    backward pass (4 FLOPs per parameter per token) can hide (How to Scale Your Model Part 5, "Data
    Parallelism": T_math = 2 x 2 x B L D F / (X C) against T_comm = 2 x 2 x L D F / W for the
    backward pass). Hidden when tokens per chip > AR x rate / (4 x layer parameters); with bf16
    gradients, (N-1)/N x C / W as for FSDP (an all-reduce is a reduce-scatter and an all-gather); a
    bandwidth rule, as ``fsdp_critical_tokens``."""
    params = _layer_params(setup)
    pricer = CommPricer(mesh, setup.chip, setup.efficiency.network, algorithm=algorithm)
    comm = pricer.time("all-reduce", axes, params * setup.element_bytes[2])
    rate = flop_rate(setup.chip, "matrix", setup.dtypes.activations, setup.efficiency)[2]
    return CriticalTokens(comm * rate / (4 * params), params, comm, 4.0, rate)


def _try(setup: TrainingSetup, par: Parallelism) -> StepResult | None:
    try:
        validate(par, setup.cfg, setup.chips, setup.global_batch, setup.seq_len)
        return evaluate(setup, par, setup.pricer(layout_mesh(setup.topology, par)))
    except (InvalidConfigError, ShardingError):
        return None


def explain(
    setup: TrainingSetup, best: StepResult, ideal: StepResult, inside_best: StepResult | None = None
) -> list[str]:
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
    lines += _cross_domain_tp(setup, best, inside_best)
    if par.pp > 1:
        lines.append(
            f"Pipeline of {par.pp} stages x {par.virtual_stages} virtual with {par.microbatches} microbatches: "
            f"bubble {format_duration(best.breakdown['pipeline_bubble'])} "
            f"((p-1)/(v m) = {(par.pp - 1) / (par.virtual_stages * par.microbatches):.1%} of the work). "
            + _split_words(setup, par)
        )
    return lines


def _split_words(setup: TrainingSetup, par: Parallelism) -> str:
    """How the layers fall on the stages (layout.stage_split), in words."""
    prof = profile_for(setup, par.remat)
    split = stage_split(setup.cfg.n_layers, par, prof.head_layers)
    head = f"the output head and loss (worth {prof.head_layers:.2f} of a layer)"
    if par.pipeline_balance:
        return (
            f"Balanced split (pipeline_balance): the last stage holds {plural(split.last, 'layer')} and {head}, "
            f"the others up to {split.most}."
        )
    return f"Even split: up to {plural(split.most, 'layer')} a stage, the last one with {head} on top."


def tp_domains(setup: TrainingSetup, par: Parallelism) -> int:
    """How many fast domains (NVLink domains, TPU slices) the tensor-parallel axis of ``par`` spans."""
    return domains_spanned(layout_mesh(setup.topology, par).axis("tp")) if par.tp > 1 else 1


def _cross_domain_tp(setup: TrainingSetup, best: StepResult, inside_best: StepResult | None) -> list[str]:
    """When the best layout's tensor parallelism spans fast domains (NVLink domains, TPU slices): what of its
    traffic crosses the scale-out network, how much of the step is exposed tensor-parallel time, and the best
    layout with tp inside one domain (``inside_best``, searched by the planner), for comparison."""
    par = best.parallelism
    spanned = tp_domains(setup, par)
    if spanned <= 1:
        return []
    chip, inside = setup.chip, par.tp // spanned
    switched = chip.topology.kind == "switched"
    what, fast = ("NVLink domains", "NVLink") if switched else ("slices", "ICI")
    line = (
        f"tp={par.tp} spans {spanned} {what} of {inside}: its per-layer all-gathers and reduce-scatters cross the "
        f"{'scale-out fabric' if switched else 'data-center network'} at {format_rate(chip.dcn_bytes_per_s)} per chip "
        f"(against {format_rate(chip.ici_bytes_per_s)} over {fast}); exposed tensor-parallel time "
        f"{format_duration(best.breakdown['tensor_parallel'])} of the {format_duration(best.step_time_s)} step."
    )
    if inside_best is not None:
        alt = inside_best
        parts = ", ".join(
            f"{k.replace('_', ' ')} {format_duration(alt.breakdown[k])}"
            for k in ("tensor_parallel", "fsdp", "pipeline_bubble", "data_parallel")
            if alt.breakdown[k] > 0
        )
        line += (
            f" The best layout with tp inside one, {alt.parallelism.label()}: step {format_duration(alt.step_time_s)} "
            f"({alt.step_time_s / best.step_time_s - 1:+.1%}; {parts})."
        )
    return [line]


def no_layout_reason(setup: TrainingSetup, fix: dict[str, object], unlayable: int) -> tuple[Part, ...]:
    """Why the search found no valid layout at all (as opposed to none that fits in memory): the parts of
    an :class:`~rooftop.reasons.OptionError` (the pins are the ``fix`` option's, a topology ``topology``'s)."""
    degrees = {k: int(v) for k, v in fix.items() if k in ("dp", "fsdp", "tp", "pp", "cp") and isinstance(v, int)}
    pinned = ",".join(f"{k}={v}" for k, v in fix.items())
    where = plural(setup.chips, f"{setup.chip.name} chip")
    product = 1
    for v in degrees.values():
        product *= max(v, 1)
    with_pins: tuple[Part, ...] = (" with ", FIX, f" {pinned}") if pinned else ()
    if any(v < 1 for v in degrees.values()):
        return FIX, f" {pinned}: every degree must be >= 1"
    if setup.chips % product:
        return FIX, f" {pinned}: the pinned degrees multiply to {product}, which does not divide the {where}"
    rest = setup.chips // product
    free = {"dp": rest} if "dp" not in degrees and "fsdp" not in degrees else {}
    try:
        par = Parallelism(**{**degrees, **free, **{k: v for k, v in fix.items() if k not in degrees}})  # type: ignore[arg-type]
        validate(par, setup.cfg, setup.chips, setup.global_batch, setup.seq_len)
    except InvalidConfigError as exc:
        return "no valid layout", *with_pins, f" for {setup.cfg.name} on {where}: {exc}"
    if unlayable:
        tried = f" can be laid on topology {setup.topology.spec} ({unlayable} tried); try another "
        return "no layout", *with_pins, tried, Option("topology"), " or other degrees"
    return "no valid layout", *with_pins, f" for {setup.cfg.name} on {where}"
