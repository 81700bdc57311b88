"""Search every valid training layout, drop those that do not fit, rank the rest.

Enumeration: plan/train/candidates.py, every valid layout as a row of integers, in a fixed order.
For each, remat policies are tried from the cheapest (none) to the most memory-saving (full) and the first that
fits is kept; ZeRO-1 is used whenever dp > 1 (ZeRO-0 moves the same bytes and holds more, so it is dominated),
ZeRO-2 when ZeRO-1 does not fit; offload (optimizer, then parameters) only when nothing fits on HBM.

Speed: candidates are rows of integers (candidates.candidate_rows), a Parallelism built only for those visited;
for time and cost they are visited from the lowest bound on their step time (plan/train/prune.py: the roofline of
their ops alone, plan/train/bound.py, plus the least their communication takes whatever their mesh and the
collective algorithm, plan/train/netbound.py, found for every row at once) and the search stops once a bound
exceeds the top-th step found; a layout whose bound, tightened once its mesh is known (its tensor-parallel, FSDP
and expert collectives, pipeline sends and data-parallel reduction as far as no compute hides them) and again once
its variant is (its ops exactly, remat included), exceeds it is skipped. Once a row of a mesh is priced, the
mesh's floor (its FSDP traffic and the data-parallel reduction of the fewest layers any of its rows' stages hold)
skips its later rows before anything is built.
No skipped layout can rank: the search returns what pricing every layout would.
A layout's variants are checked from one memory breakdown (plan/train/memory.MemoryTerms) without building
them; layouts that differ only in virtual stages and split their layers alike share the variant found and all
of the step but its pipeline terms; collective rates are shared by every mesh that places an axis alike, and
per-op time sums by layouts with the same tp, cp, ep and microbatch size.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from rooftop.display import Displayed
from rooftop.errors import InvalidConfigError, ShardingError, shown
from rooftop.hardware.chip import MAX_CHIPS
from rooftop.model.activations import REMAT_POLICIES
from rooftop.plan.fix import FIX
from rooftop.plan.train.bound import variant_bound_s
from rooftop.plan.train.candidates import candidate_rows, layout_template, row_layout, row_table
from rooftop.plan.train.comm import CommPricer
from rooftop.plan.train.layout import (
    Parallelism,
    StageSplit,
    microbatch_size,
    stage_split,
    validate,
)
from rooftop.plan.train.memory import MemoryTerms, activations_per_chip
from rooftop.plan.train.profile import ModelProfile
from rooftop.plan.train.prune import Pruning
from rooftop.plan.train.step import (
    StepParts,
    StepResult,
    TrainingSetup,
    layout_mesh,
    profile_for,
    step_breakdown_s,
    step_parts,
    step_result,
)
from rooftop.reasons import OptionError
from rooftop.units import parse_int

OBJECTIVES = ("time", "cost", "memory")
REMAT_ORDER = ("none", "selective", "dots", "full")
FIXABLE = ("dp", "fsdp", "tp", "pp", "ep", "cp", "microbatches", "virtual_stages", "zero_stage")
FIXABLE_TEXT = ("remat", "offload")
#: on/off choices: Megatron sequence parallelism in the norm and dropout regions (a layout's), fused flash
#: attention and dropout (the job's: the scores' HBM traffic, and dropout's masks and their memory)
FIXABLE_FLAGS = ("sequence_parallel", "flash", "dropout", "pipeline_balance", "fsdp_reshard", "grad_clip", "compile")
#: most candidate layouts one search enumerates (each a row of a few integers; DeepSeek-V3 on 65,536 GPUs with
#: 16K-token sequences has 53,401, of which the bound on the step time leaves few to price): a larger space is
#: an error asking for pinned degrees, not minutes of searching
MAX_LAYOUTS = 1_000_000


@dataclass(repr=False)  # the short repr of Displayed
class SearchResult(Displayed):
    ranked: list[StepResult]  # fitting layouts, best first
    best_unfit: StepResult | None  # the fastest layout that does not fit (when none fits)
    evaluated: int  # layout variants considered (memory checked for each)
    unlayable: int
    explanation: list[str] = field(default_factory=list)
    timed: int = 0  # variants that fit and had their step timed
    pruned: int = 0  # layouts not visited: their bound on the step time (plan/train/bound.py) cannot rank


def parse_fix(text: str | None) -> dict[str, object]:
    """ "tp=8,pp=16,remat=full" -> pinned degrees and choices."""
    out: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        if "=" not in part:
            raise OptionError("cannot read ", FIX, f" {shown(part)}: expected NAME=VALUE, e.g. tp=8")
        k, v = (s.strip() for s in part.split("=", 1))
        alias = {"mb": "microbatches", "v": "virtual_stages", "zero": "zero_stage", "sp": "sequence_parallel"}.get(k, k)
        if alias in FIXABLE_FLAGS:
            flag = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}.get(v.lower())
            if flag is None:
                raise OptionError(FIX, f" {k}={shown(v)}: expected 0 or 1 (also true/false, on/off)")
            out[alias] = flag
        elif alias in FIXABLE:  # ASCII digits ("²" passes str.isdigit()), at most the chips of any topology
            out[alias] = _fix_int(k, v)
        elif alias in FIXABLE_TEXT:
            out[alias] = v
        else:
            valid = ", ".join(FIXABLE + FIXABLE_TEXT + FIXABLE_FLAGS)
            raise OptionError(FIX, f" cannot pin {shown(k)} (valid: {valid})")
    if "remat" in out and out["remat"] not in REMAT_POLICIES:
        raise OptionError(FIX, f" remat={shown(out['remat'])} (valid: {', '.join(REMAT_POLICIES)})")
    return out


def _fix_int(key: str, value: str) -> int:
    """A pinned degree: ASCII digits, at most the chips of any topology ("--fix tp 'x' is not an integer")."""
    try:
        return parse_int(value, key, 0, MAX_CHIPS)
    except InvalidConfigError as exc:
        raise OptionError(FIX, f" {exc}") from None


Variant = tuple[str, str, int]  # (offload, remat, zero_stage)


def _variants(has_dp: bool, fix: dict[str, object]) -> list[Variant]:
    """Memory-saving variants of a layout (with dp > 1 or not), cheapest first."""
    remats = [str(fix["remat"])] if "remat" in fix else list(REMAT_ORDER)
    zeros = [int(fix["zero_stage"])] if "zero_stage" in fix else ([1, 2] if has_dp else [0])  # type: ignore[call-overload]
    # weights kept gathered from forward to backward (fsdp_reshard off) are not streamed from the host
    streams = ["params"] if fix.get("fsdp_reshard", True) else []
    offloads = [str(fix["offload"])] if "offload" in fix else ["none", "optimizer", *streams]
    # offload only when nothing fits on HBM; ZeRO-2 costs no time over ZeRO-1 here: try it before a heavier remat
    return [(offload, remat, zero) for offload in offloads for remat in remats for zero in zeros]


@dataclass
class _Context:
    """What every layout of one search shares: profiles per remat policy, pricers per mesh
    (and the collective rates they share), the variants to try and the usable HBM."""

    setup: TrainingSetup
    fix: dict[str, object]
    profiles: dict[str, ModelProfile] = field(default_factory=dict)
    pricers: dict[tuple[int, ...], CommPricer | None] = field(default_factory=dict)
    rates: dict[tuple[object, ...], tuple[float, float, bool]] = field(default_factory=dict)
    checked: set[Variant] = field(default_factory=set)
    fits: dict[tuple[int, int, StageSplit], _Fit] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.variants = {has_dp: _variants(has_dp, self.fix) for has_dp in (False, True)}
        self.first_remat = self.variants[False][0][1]
        self.usable = self.setup.chip.hbm_capacity_bytes * self.setup.efficiency.usable_hbm_fraction

    def profile(self, remat: str) -> ModelProfile:
        if remat not in self.profiles:
            self.profiles[remat] = profile_for(self.setup, remat)
        return self.profiles[remat]

    def pricer(self, base: Parallelism, degrees: tuple[int, ...] | None = None) -> CommPricer | None:
        """The layout's mesh pricer; None when its axes cannot be laid on the topology. ``degrees``: its
        (dp, fsdp, tp, pp, ep, cp), which say the same as its mesh axes and ep (a candidate row's first six)."""
        key = (base.dp, base.fsdp, base.tp, base.pp, base.ep, base.cp) if degrees is None else degrees
        if key not in self.pricers:
            try:
                mesh = layout_mesh(self.setup.topology, base)
                self.pricers[key] = CommPricer(
                    mesh, self.setup.chip, self.setup.efficiency.network, self.rates, self.setup.stack.algorithm
                )
            except ShardingError:
                self.pricers[key] = None
        return self.pricers[key]

    def make(self, base: Parallelism, variant: Variant) -> Parallelism:
        offload, remat, zero = variant
        return base.with_choices(remat, zero, offload)

    def check(self, base: Parallelism, variant: Variant) -> None:
        """Raise, as building it would, if a variant's choices are invalid (checked once each)."""
        if variant not in self.checked:
            offload, remat, zero = variant
            replace(base, remat=remat, zero_stage=zero, offload=offload)
            self.checked.add(variant)

    def fit(self, base: Parallelism, pricer: CommPricer) -> _Fit:
        """The layout's _first_fit, shared by the layouts that differ from it only in virtual stages and split
        their layers alike (layout.stage_split, under the profile the fit reads): the memory depends on the
        virtual stages through that split only. The pricer stands for all the other degrees (dp, fsdp, tp,
        pp, cp, ep) but microbatches."""
        split = stage_split(self.setup.cfg.n_layers, base, self.profile(self.first_remat).head_layers)
        key = (id(pricer), base.microbatches, split)
        found = self.fits.get(key)
        if found is None:
            found = self.fits[key] = _first_fit(self, base)
        return found

    def parts(self, par: Parallelism, pricer: CommPricer, fit: _Fit) -> StepParts:
        """The step's parts of the fit's variant ``par``, shared by the layouts that share the fit and split
        their layers alike under the variant's profile: the parts depend on the virtual stages through that
        split only (the pipeline terms are priced per layout, step.step_breakdown_s)."""
        prof = self.profile(par.remat)
        split = stage_split(prof.n_layers, par, prof.head_layers)
        found = fit.parts.get(split)
        if found is None:
            found = fit.parts[split] = step_parts(self.setup, par, pricer, prof)
        return found

    def bound(self, base: Parallelism, pricer: CommPricer, fit: _Fit) -> float:
        """bound.variant_bound_s of the fit's variant (less a margin for rounding); 0 once its parts are priced."""
        par = self.make(base, fit.variant)
        prof = self.profile(par.remat)
        if stage_split(prof.n_layers, par, prof.head_layers) in fit.parts:
            return 0.0
        return variant_bound_s(self.setup, par, pricer, prof) * (1 - 1e-9)

    def step_time(self, base: Parallelism, pricer: CommPricer, fit: _Fit) -> float:
        """The step time of the layout's kept variant (what ``step`` reports, without building it)."""
        par = self.make(base, fit.variant)
        return sum(step_breakdown_s(self.setup, par, pricer, self.parts(par, pricer, fit)).values())

    def step(self, base: Parallelism, pricer: CommPricer, fit: _Fit) -> StepResult:
        """Time the layout's kept variant."""
        par = self.make(base, fit.variant)
        parts = self.parts(par, pricer, fit)
        return step_result(self.setup, par, pricer, self.profile(par.remat), parts, dict(fit.memory))


@dataclass
class _Fit:
    """The variant of a layout the search keeps: the first that fits, else the smallest."""

    tried: int  # variants whose memory was checked
    fits: bool
    variant: Variant
    memory: dict[str, float]
    total: float  # bytes per chip
    parts: dict[StageSplit, StepParts] = field(default_factory=dict)  # its step's parts once timed, by split


def _first_fit(ctx: _Context, base: Parallelism) -> _Fit:
    """Try the variants of a layout in order; every variant's memory comes from one MemoryTerms."""
    b = microbatch_size(ctx.setup.global_batch, base)
    terms = MemoryTerms.of(ctx.setup, base, ctx.profile(ctx.first_remat), b)
    tried, smallest = 0, None
    checked = ctx.checked
    activations: dict[str, float] = {}  # per remat policy: activation bytes per token a TP rank keeps
    for variant in ctx.variants[base.dp > 1]:
        if variant not in checked:
            ctx.check(base, variant)
        offload, remat, zero = variant
        per_token = activations.get(remat)
        if per_token is None:
            per_token = activations[remat] = activations_per_chip(base, ctx.profile(remat))
        memory = terms.breakdown(per_token, zero, offload)
        total = sum(memory.values())
        tried += 1
        if total <= ctx.usable:
            return _Fit(tried, True, variant, memory, total)
        if smallest is None or total < smallest.total:
            smallest = _Fit(0, False, variant, memory, total)
    assert smallest is not None  # there is always at least one variant
    smallest.tried = tried
    return smallest


def search(
    setup: TrainingSetup,
    fix: dict[str, object] | None = None,
    objective: str = "time",
    top: int = 5,
    progress: Callable[[int], None] | None = None,
) -> SearchResult:
    """Evaluate every layout (see the module docstring) that can rank; deterministic. For time (and cost) the
    candidates are visited from the lowest bound on their step time (plan/train/bound.py) up, and the search
    stops at the first whose bound exceeds the ``top``-th fastest fitting step found: no layout past it can
    rank. Ties keep the enumeration order."""
    if objective not in OBJECTIVES:
        raise InvalidConfigError(f"unknown objective {shown(objective)} (valid: {', '.join(OBJECTIVES)})")
    ctx = _Context(setup, fix or {})
    rows = list(itertools.islice(candidate_rows(setup, ctx.fix), MAX_LAYOUTS + 1))
    if len(rows) > MAX_LAYOUTS:
        raise OptionError(
            f"{setup.cfg.name} on {setup.chips:,} chips has more than {MAX_LAYOUTS:,} layouts to search; pin some "
            "degrees with ",
            FIX,
            " (e.g. ",
            FIX,
            " tp=8,pp=8)",
        )
    top = max(top, 1)
    kth: list[float] = []  # the ``top`` fastest fitting steps so far, as a max-heap (negated)
    pruning = None
    order: Iterator[int] | range = range(len(rows))
    if objective != "memory" and rows:
        remats = sorted({remat for variants in ctx.variants.values() for _, remat, _ in variants})
        reshard = bool(ctx.fix.get("fsdp_reshard", True))
        first = ctx.profile(ctx.first_remat)
        pruning = Pruning.of(setup, row_table(rows), [ctx.profile(r) for r in remats], first, reshard, kth, top)
        order = pruning.visits()
    template = layout_template(ctx.fix)
    fitting: list[tuple[tuple[float, ...], int, Parallelism, CommPricer, _Fit]] = []
    best_unfit: tuple[float, int, StepResult] | None = None
    evaluated = unlayable = timed = visited = skipped = 0
    chips = setup.chips
    for index in order:
        if pruning is not None and pruning.beyond(index):
            break  # this bound and every later one exceed the top-th step found
        visited += 1
        base = row_layout(rows[index], template)
        try:
            validate(base, setup.cfg, chips, setup.global_batch, setup.seq_len)
        except InvalidConfigError:
            continue
        if pruning is not None and pruning.floored_out(index):  # its mesh's floor, once priced
            skipped += 1
            continue
        pricer = ctx.pricer(base, rows[index][:6])
        if pricer is None:
            unlayable += 1
            continue
        if pruning is not None and pruning.priced_out(index, base, pricer):  # the collectives no compute hides
            skipped += 1
            continue
        fit = ctx.fit(base, pricer)
        evaluated += fit.tried
        if fit.fits and pruning is not None and pruning.full() and ctx.bound(base, pricer, fit) > -kth[0]:
            skipped += 1  # its variant's ops, TP collectives and sends alone exceed the top-th step
            continue
        if fit.fits:
            step_s = ctx.step_time(base, pricer, fit)
            score = (fit.total, step_s) if objective == "memory" else (step_s, fit.total)  # cost ranks as time
            fitting.append((score, index, base, pricer, fit))
            timed += 1
            if len(kth) < top:
                heapq.heappush(kth, -step_s)
            elif step_s < -kth[0]:
                heapq.heapreplace(kth, -step_s)
        elif not fitting and (best_unfit is None or (fit.total, index) < best_unfit[:2]):
            best_unfit = (fit.total, index, ctx.step(base, pricer, fit))
        if progress is not None:
            progress(evaluated)
    fitting.sort(key=lambda entry: entry[:2])
    return SearchResult(
        [ctx.step(base, pricer, fit) for _, _, base, pricer, fit in fitting[:top]],
        best_unfit[2] if best_unfit and not fitting else None,
        evaluated,
        unlayable,
        timed=timed,
        pruned=len(rows) - visited + skipped,
    )
