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
from rooftop.units import plural


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


@dataclass(frozen=True)
class CrossDomainTp:
    """The best layout's tensor parallelism spans ``spanned`` fast domains (NVLink domains when
    ``switched``, else TPU slices) of ``inside`` chips each: its per-layer collectives cross the
    scale-out network at ``dcn_bytes_per_s`` per chip against ``fast_bytes_per_s`` inside a domain.
    ``inside_best``: the best layout with tp inside one domain (searched by the planner), if any."""

    tp: int
    spanned: int
    inside: int
    switched: bool
    dcn_bytes_per_s: float
    fast_bytes_per_s: float
    inside_best: StepResult | None


@dataclass(frozen=True)
class StageSplit:
    """How the layers fall on the pipeline stages (layout.stage_split): balanced or even, the layers
    of the last stage and of the fullest one, and the output head's weight in layers."""

    balanced: bool
    last_layers: int
    most_layers: int
    head_layers: float


@dataclass(frozen=True)
class Explanation:
    """Why the best layout wins, as data (report/train_explain.py writes it in words).

    ``tokens_per_chip`` against ``critical_tokens``, the batch per chip pure FSDP needs to hide its
    weight traffic (over ``critical_links``); ``fsdp_alone`` pure FSDP over every chip (None: not a
    valid layout) when the batch feeds a replica per chip (``batch_feeds_every_chip``); ``top_parts``
    the largest parts of the step; ``without_remat`` the same layout without remat (when it has remat);
    ``cross_domain`` and ``split`` when tp spans fast domains and when the layout pipelines."""

    chips: int
    chip: str
    global_batch: int
    best: StepResult
    ideal: StepResult
    tokens_per_chip: float
    critical_tokens: float
    critical_links: str
    batch_feeds_every_chip: bool
    fsdp_alone: StepResult | None
    top_parts: tuple[tuple[str, float], ...]
    without_remat: StepResult | None
    cross_domain: CrossDomainTp | None
    split: StageSplit | None


def explain(
    setup: TrainingSetup, best: StepResult, ideal: StepResult, inside_best: StepResult | None = None
) -> Explanation:
    """The figures that say why ``best`` wins (``ideal``: the same layout at ideal efficiency)."""
    par = best.parallelism
    fits = best.fits
    crit, _axes, links = critical_tokens_per_chip(setup) if fits else (0.0, 0, "")
    feeds = setup.chips <= setup.global_batch  # a data-parallel replica per chip
    alone = _try(setup, Parallelism(fsdp=setup.chips, remat=par.remat)) if fits and feeds else None
    big = sorted(((v, k) for k, v in best.breakdown.items() if v > 0), reverse=True)[:3]
    lighter = _try(setup, replace(par, remat="none")) if fits and par.remat != "none" else None
    return Explanation(
        setup.chips, setup.chip.name, setup.global_batch, best, ideal, setup.tokens_per_step / setup.chips, crit,
        links, feeds, alone, tuple((k, v) for v, k in big), lighter,
        _cross_domain_tp(setup, best, inside_best) if fits else None,
        _split(setup, par) if fits and par.pp > 1 else None,
    )  # fmt: skip


def _split(setup: TrainingSetup, par: Parallelism) -> StageSplit:
    """How the layers fall on the stages (layout.stage_split)."""
    prof = profile_for(setup, par.remat)
    split = stage_split(setup.cfg.n_layers, par, prof.head_layers)
    return StageSplit(par.pipeline_balance, split.last, split.most, prof.head_layers)


def tp_domains(setup: TrainingSetup, par: Parallelism) -> int:
    """How many fast domains (NVLink domains, TPU slices) the tensor-parallel axis of ``par`` spans."""
    return domains_spanned(layout_mesh(setup.topology, par).axis("tp")) if par.tp > 1 else 1


def _cross_domain_tp(setup: TrainingSetup, best: StepResult, inside_best: StepResult | None) -> CrossDomainTp | None:
    """When the best layout's tensor parallelism spans fast domains (NVLink domains, TPU slices): the rates
    its traffic crosses at and the best layout with tp inside one domain (``inside_best``), for comparison."""
    par = best.parallelism
    spanned = tp_domains(setup, par)
    if spanned <= 1:
        return None
    chip = setup.chip
    switched = chip.topology.kind == "switched"
    return CrossDomainTp(
        par.tp, spanned, par.tp // spanned, switched, chip.dcn_bytes_per_s, chip.ici_bytes_per_s, inside_best
    )


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
