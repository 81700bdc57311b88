"""Serving plans: sweep layouts and batch sizes, the latency/throughput frontier, the choice under
latency targets, and the dollar cost of tokens. Every number comes from plan/serve/phase.py
(prefill and decode priced from the model's ops); disaggregated serving is plan/serve/disagg.py.

A point is one layout (tp, ep, pp, replicas over the whole slice) at one batch per replica:

- ``step_time_s``: one decode step at the mean context of a request, prompt_len + gen_len / 2
  (time per output token); the cache must fit at the largest context, prompt_len + gen_len.
- ``ttft_s``: prefill of one prompt on an idle replica (queueing and interference with running
  decodes are not modelled here: with a request rate or a concurrency, plan/serve/batching.py
  gives TPOT and TTFT under load for continuous batching, ``ServingPlan.batching``).
- ``tokens_per_s``: output tokens per second of the slice with prefill on the same chips: each
  replica turns b prompts into b x gen_len tokens in gen_len x step + prefill(b prompts).
- cost per million tokens (price per chip-hour x chip-seconds): input tokens pay the prefill's
  chip time, output tokens the decode's: input = price x chips x prefill(b) / (b x prompt_len),
  output = price x chips x step / b (per replica).

Layouts: tp inside the fast domain (an NVLink domain on GPUs, the slice on TPUs) with replicas for
the rest; when nothing holds the weights that way, pipeline stages and tp across fast domains too.
Each TP group is also swept with its cache split over the batch where the KV heads leave copies
(kv_batch) and, for MoE models with ep = tp, with attention data-parallel (attn_dp; layout.py).
``ServingRequest.fix`` pins tp, pp, ep, attn_dp or kv_batch (``rooftop serve --fix``): only layouts with the pins are
swept, and a pinned tp may span NVLink domains. An axis that reaches over the scale-out network is
priced as what it is, a group over two link kinds (cost/collectives.py: in-domain reduce-scatter,
all-reduce across domains on the fabric, in-domain all-gather), and the plan's notes say so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from rooftop.cost.algorithms import Algorithm
from rooftop.cost.efficiency import Efficiency, default_efficiency
from rooftop.display import Displayed
from rooftop.dtypes import compute_dtype
from rooftop.errors import InvalidConfigError, ShardingError, shown
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, Topology, make_mesh
from rooftop.model.config import TransformerConfig
from rooftop.model.memory import kv_cache_bytes
from rooftop.model.workload import Dtypes
from rooftop.plan.fix import FIX, pinned_text
from rooftop.plan.serve import layout as sl
from rooftop.plan.serve import phase as inf
from rooftop.plan.serve.batching import Batching, continuous_batching
from rooftop.plan.serve.candidates import MinSlice, candidate_layouts, min_slice
from rooftop.plan.serve.critical import CriticalBatch, compute_bound_batch, critical_batch
from rooftop.plan.serve.crossing import crossing_notes, scale_out_axes
from rooftop.plan.serve.disagg import Disaggregation, disaggregate
from rooftop.plan.serve.layout import ChipMemory, ServingLayout
from rooftop.plan.serve.paging import Engine, engine_efficiency, get_engine
from rooftop.plan.serve.phase import PhaseTime
from rooftop.plan.serve.traffic import DEFAULT_TOKEN_BUDGET, Traffic
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, OptionError, Reason
from rooftop.units import plural, usd_per_million_tokens

DEFAULT_BATCH_CAP = 4096


@dataclass(frozen=True)
class ServingRequest:
    """What to serve, where, and under which targets; ``fix`` pins degrees of the layout (tp, pp, ep, attn_dp, kv_batch:
    honoured, or refused at construction naming the rule they break, layout.check_pins)."""

    cfg: TransformerConfig
    chip: Chip
    topology: Topology
    prompt_len: int
    gen_len: int
    dtypes: Dtypes = field(default_factory=Dtypes)
    batch: int | None = None
    max_step_latency_s: float | None = None
    max_ttft_s: float | None = None
    requests_per_s: float | None = None
    price_usd_per_chip_hour: float | None = None
    efficiency: Efficiency | None = None
    batch_cap: int = DEFAULT_BATCH_CAP
    fix: Mapping[str, int] | None = None
    concurrency: int | None = None  # continuous batching with this many clients (plan/serve/batching.py)
    scheduler: str = "chunked"
    token_budget: int = DEFAULT_TOKEN_BUDGET
    static_cache_len: int = 0  # the engine's fixed-shape cache per slot (ServingLayout), 0: paged
    kv_reads_per_query_head: bool = False  # the engine's decode kernel has no GQA path (ServingLayout)
    engine_name: str = "generic"  # the serving engine's KV pool, admission and preemption (plan/serve/paging.py)
    prefix_len: int = 0  # a request's prompt tokens found in the prefix cache when it hits (plan/serve/prefix.py)
    prefix_hit_rate: float = 0.0  # share of requests that hit it
    algorithm: Algorithm | None = (
        None  # how the collective library runs the TP group's collectives (None: hierarchical)
    )

    def __post_init__(self) -> None:
        for name in ("prompt_len", "gen_len", "batch_cap"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise InvalidConfigError(f"{name.replace('_', '-')}={shown(v)} must be a positive integer")
        if self.batch is not None and (not isinstance(self.batch, int) or self.batch < 1):
            raise InvalidConfigError(f"batch={shown(self.batch)} must be a positive integer")
        for name in ("max_step_latency_s", "max_ttft_s", "requests_per_s", "price_usd_per_chip_hour"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise InvalidConfigError(f"{name}={shown(v)} must be > 0")
        if self.requests_per_s is not None and self.concurrency is not None:
            raise InvalidConfigError("give a request rate or a concurrency, not both")
        # the scheduler, its budget and the concurrency are checked even when no traffic uses them
        _ = self.traffic or Traffic(self.prompt_len, self.gen_len, None, 1, self.scheduler, self.token_budget)
        self.engine(ServingLayout())  # the engine's cache fields are checked where a layout takes them
        get_engine(self.engine_name)  # a known engine, or one line naming the choices
        if self.efficiency is None:
            eff = engine_efficiency(default_efficiency("serving", self.chip.kind), get_engine(self.engine_name))
            object.__setattr__(self, "efficiency", eff)
        if self.fix:
            object.__setattr__(self, "fix", dict(self.fix))
            sl.check_pins(self.cfg, self.topology.num_chips, self.pins)
            pins = self.pins
            unit = pins.get("pp", 1) * pins.get("attn_dp", 1) * pins.get("kv_batch", 1)
            if self.batch is not None and self.batch % unit:
                what = " x ".join(f"{k}={pins[k]}" for k in ("pp", "attn_dp", "kv_batch") if k in pins)
                what += " microbatches" if what.startswith("pp") and "x" not in what else " (sequences per shard)"
                raise InvalidConfigError(
                    f"batch={self.batch} does not split into the pinned {what}; use a multiple of {unit}"
                )

    def engine(self, layout: ServingLayout) -> ServingLayout:
        """``layout`` with how this request's engine keeps and reads the cache (ServingLayout's
        ``static_cache_len`` and ``kv_reads_per_query_head``)."""
        return dataclasses.replace(
            layout, static_cache_len=self.static_cache_len, kv_reads_per_query_head=self.kv_reads_per_query_head
        )

    @property
    def kv_engine(self) -> Engine:
        """The engine whose KV pool continuous batching admits against (plan/serve/paging.py)."""
        return get_engine(self.engine_name)

    @property
    def pins(self) -> dict[str, int]:
        """The pinned degrees ({} when none)."""
        return dict(self.fix or {})

    @property
    def traffic(self) -> Traffic | None:
        """What feeds continuous batching (None: the static batch only)."""
        if self.requests_per_s is None and self.concurrency is None:
            return None
        return Traffic(self.prompt_len, self.gen_len, self.requests_per_s, self.concurrency, self.scheduler,
                       self.token_budget, self.prefix_len, self.prefix_hit_rate)  # fmt: skip

    @property
    def eff(self) -> Efficiency:
        assert self.efficiency is not None
        return self.efficiency

    @property
    def decode_context_len(self) -> int:
        return self.prompt_len + (self.gen_len + 1) // 2

    @property
    def max_context_len(self) -> int:
        return self.prompt_len + self.gen_len

    @property
    def price(self) -> float | None:
        return self.price_usd_per_chip_hour if self.price_usd_per_chip_hour else self.chip.price_usd_per_hour


@dataclass(frozen=True, repr=False)  # the short repr of Displayed
class ServingPoint(Displayed):
    batch: int
    layout: ServingLayout
    ttft_s: float
    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_chip: float
    decode_tokens_per_s: float
    prefill_batch_s: float
    kv_cache_bytes: float
    memory: ChipMemory
    fits: bool
    bound: str
    reason: Note
    cost_input_usd_per_m: float | None
    cost_output_usd_per_m: float | None
    decode: PhaseTime
    prefill: PhaseTime


@dataclass(frozen=True)
class LayoutSummary:
    layout: ServingLayout
    max_batch: int
    compute_bound_batch: int | None
    weights_per_chip_bytes: float
    limit: str  # "compute", "memory_capacity", "batch_cap", "weights"
    reason: Note
    scale_out_axes: tuple[str, ...] = ()  # the replica's axes (tp, pp) reaching over the scale-out network


@dataclass(frozen=True, repr=False)  # the short repr of Displayed
class ServingPlan(Displayed):
    request: ServingRequest
    points: tuple[ServingPoint, ...]
    frontier: tuple[int, ...]
    chosen: int | None
    chosen_reason: Note
    layouts: tuple[LayoutSummary, ...]
    min_slice: MinSlice | None
    critical_batch: CriticalBatch
    notes: tuple[Note, ...]
    disaggregation: Disaggregation | None = None  # with ``request.requests_per_s`` (plan/serve/disagg.py)
    batching: Batching | None = None  # with a rate or a concurrency (plan/serve/batching.py)


# ---------------------------------------------------------------- layouts


# ---------------------------------------------------------------- one point


def _reason(p: PhaseTime, mem: ChipMemory, fits: bool) -> Reason:
    """Why a point's step takes its time: the bound that dominates and the figures behind it."""
    if not fits:
        return Reason.of(ReasonCode.POINT_NO_FIT, memory=mem)
    if p.bound == "memory":
        return Reason.of(ReasonCode.MEMORY_BOUND, weights_bytes=p.weights_bytes, weights_s=p.weights_s,
                         kv_cache_bytes=p.kv_cache_bytes, kv_cache_s=p.kv_cache_s)  # fmt: skip
    if p.bound == "compute":
        return Reason.of(ReasonCode.COMPUTE_BOUND, flops=p.flops, compute_s=p.compute_s)
    if p.bound == "collective":
        return Reason.of(ReasonCode.COLLECTIVE_BOUND, collectives=p.collectives, collective_s=p.collective_s)
    return Reason.of(ReasonCode.FIXED_COSTS, launch_s=p.launch_s, scheduling_s=p.scheduling_s)


def evaluate_point(req: ServingRequest, layout: ServingLayout, mesh: Mesh, batch: int, ttft: PhaseTime) -> ServingPoint:
    """One (layout, batch per replica) point; ``ttft`` is the layout's one-prompt prefill."""
    cfg, chip, dt, eff = req.cfg, req.chip, req.dtypes, req.eff
    step = inf.decode_step(cfg, chip, mesh, layout, batch, req.decode_context_len, dt, eff, req.algorithm)
    pre = inf.prefill(cfg, chip, mesh, layout, batch, req.prompt_len, dt, eff, algorithm=req.algorithm)
    prefill_batch_s = pre.time_s / layout.pp  # stages pipeline over the batch's prompts
    mem = sl.chip_memory(cfg, chip, layout, batch, req.max_context_len, dt, eff)
    replica_time = req.gen_len * step.time_s + prefill_batch_s
    tokens_per_s = layout.replicas * batch * req.gen_len / replica_time
    cin = cout = None
    if req.price:
        usd_per_hour = req.price * layout.chips_per_replica  # one replica: its prompts, then its tokens
        cin = usd_per_million_tokens(usd_per_hour, batch * req.prompt_len / prefill_batch_s)
        cout = usd_per_million_tokens(usd_per_hour, batch / step.time_s)
    return ServingPoint(
        batch,
        layout,
        ttft.time_s,
        step.time_s,
        tokens_per_s,
        tokens_per_s / layout.chips,
        layout.replicas * batch / step.time_s,
        prefill_batch_s,
        kv_cache_bytes(cfg, batch, layout.static_cache_len or req.max_context_len, dt.kv_cache),
        mem,
        mem.fits,
        step.bound,
        _reason(step, mem, mem.fits),
        cin,
        cout,
        step,
        pre,
    )


def _batches(req: ServingRequest, layout: ServingLayout, fit: int) -> list[int]:
    pp = layout.batch_unit
    if req.batch is not None:
        return [req.batch] if req.batch % pp == 0 else []
    top = min(fit, req.batch_cap - req.batch_cap % pp)
    if top < pp:
        return [pp]
    out, b = [], pp
    while b <= top:
        out.append(b)
        b *= 2
    return sorted({*out, top})


def _summary(req: ServingRequest, layout: ServingLayout, fit: int) -> LayoutSummary:
    cfg, dt, eff = req.cfg, req.dtypes, req.eff
    weights = sl.weights_per_chip_bytes(cfg, layout, dt.weights)
    cb = compute_bound_batch(cfg, req.chip, layout, req.decode_context_len, dt, eff, limit=1 << 14)
    mem = sl.chip_memory(cfg, req.chip, layout, max(fit, 1), req.max_context_len, dt, eff)
    if fit == 0:
        return LayoutSummary(layout, 0, cb, weights, "weights", Reason.of(ReasonCode.LAYOUT_NO_FIT, memory=mem))
    full = {"fit": fit, "context": req.max_context_len, "memory": mem}  # the KV cache of fit sequences fills HBM
    if cb is not None and cb <= min(fit, req.batch_cap):
        return LayoutSummary(layout, fit, cb, weights, "compute", Reason.of(ReasonCode.LAYOUT_COMPUTE_BOUND, batch=cb,
                                                                            **full))  # fmt: skip
    if fit > req.batch_cap:
        capped = Reason.of(ReasonCode.LAYOUT_BATCH_CAP, cap=req.batch_cap, fit=fit)
        return LayoutSummary(layout, fit, cb, weights, "batch_cap", capped)
    filled = Reason.of(ReasonCode.LAYOUT_MEMORY_CAPACITY, compute_bound_batch=cb, **full)
    return LayoutSummary(layout, fit, cb, weights, "memory_capacity", filled)


def _mesh(req: ServingRequest, layout: ServingLayout, notes: list[Note]) -> Mesh | None:
    """The layout's mesh on the request's slice; None (and a note) when the slice cannot hold it."""
    try:
        return make_mesh(req.topology, layout.mesh_axes())
    except ShardingError as exc:
        if req.pins:
            raise OptionError(FIX, f" {pinned_text(req.pins)}: layout {layout.label()}: {exc}") from None
        notes.append(Reason.of(ReasonCode.LAYOUT_SKIPPED, layout=layout.label(), error=str(exc)))
        return None


def layout_batches(req: ServingRequest) -> tuple[tuple[ServingLayout, int], ...]:
    """Each layout ``plan_serving`` sweeps and the sequences per replica its memory holds at full length
    (its ``LayoutSummary.max_batch``; 0 when the slice cannot hold its mesh), without pricing a step:
    what the serving goal (plan/goal/serve.py) takes of a plan."""
    out = []
    for layout in _candidates(req):
        held = _mesh(req, layout, []) is not None
        fit = sl.max_batch(req.cfg, req.chip, layout, req.max_context_len, req.dtypes, req.eff) if held else 0
        out.append((layout, fit))
    return tuple(out)


def _sweep_layout(
    req: ServingRequest, layout: ServingLayout, notes: list[Note]
) -> tuple[list[ServingPoint], LayoutSummary]:
    mesh = _mesh(req, layout, notes)
    if mesh is None:
        return [], _summary(req, layout, 0)
    fit = sl.max_batch(req.cfg, req.chip, layout, req.max_context_len, req.dtypes, req.eff)
    summary = dataclasses.replace(_summary(req, layout, fit), scale_out_axes=scale_out_axes(mesh))
    ttft = inf.prefill(req.cfg, req.chip, mesh, layout, 1, req.prompt_len, req.dtypes, req.eff, algorithm=req.algorithm)
    points = [evaluate_point(req, layout, mesh, b, ttft) for b in _batches(req, layout, fit)]
    last = max((i for i, p in enumerate(points) if p.fits), default=None)
    if last is not None and req.batch is None:
        end = points[last]
        points[last] = dataclasses.replace(end, reason=Reason.of(ReasonCode.LARGEST_SWEPT, point=end.reason,
                                                                 layout=summary.reason))  # fmt: skip
    return points, summary


# ---------------------------------------------------------------- frontier and choice


def pareto_frontier(points: tuple[ServingPoint, ...] | list[ServingPoint]) -> tuple[int, ...]:
    """Indices of fitting points no other fitting point beats on both step latency (lower) and
    tokens/s per chip (higher), by increasing latency."""
    order = sorted(
        (i for i, p in enumerate(points) if p.fits),
        key=lambda i: (points[i].step_time_s, -points[i].tokens_per_s_per_chip),
    )
    out, best = [], 0.0
    for i in order:
        if points[i].tokens_per_s_per_chip > best:
            out.append(i)
            best = points[i].tokens_per_s_per_chip
    return tuple(out)


def choose(
    points: tuple[ServingPoint, ...] | list[ServingPoint], max_step_s: float | None, max_ttft_s: float | None
) -> tuple[int | None, Reason]:
    """The fitting point meeting the targets with the most tokens/s per chip (ties: lower latency)."""
    fitting = [i for i, p in enumerate(points) if p.fits]
    if not fitting:
        return None, Reason.of(ReasonCode.NO_POINT_FITS)
    ok = [
        i
        for i in fitting
        if (max_step_s is None or points[i].step_time_s <= max_step_s)
        and (max_ttft_s is None or points[i].ttft_s <= max_ttft_s)
    ]
    targets = {"max_step_s": max_step_s, "max_ttft_s": max_ttft_s}
    if not ok:
        fast = points[min(fitting, key=lambda i: points[i].step_time_s)]
        ttft = min(points[i].ttft_s for i in fitting)
        return None, Reason.of(ReasonCode.NO_POINT_MEETS, step_s=fast.step_time_s, layout=fast.layout.label(),
                               batch=fast.batch, ttft_s=ttft, **targets)  # fmt: skip
    best = max(ok, key=lambda i: (points[i].tokens_per_s_per_chip, -points[i].step_time_s))
    p = points[best]
    return best, Reason.of(ReasonCode.CHOSEN, layout=p.layout.label(), batch=p.batch, step_s=p.step_time_s,
                           tokens_per_s_per_chip=p.tokens_per_s_per_chip, **targets)  # fmt: skip


# ---------------------------------------------------------------- the plan


def _dtype_notes(req: ServingRequest) -> list[Note]:
    """A note when the chip's matrix unit has no peak for the matmuls' dtype: they are priced at the
    next wider dtype it has (hardware/chip.py, ``Chip.flops_rate``), as a compiler would run them."""
    dt = req.dtypes
    wanted = compute_dtype(dt.weights, dt.activations)
    used, peak = req.chip.flops_rate(wanted, "matrix")
    if used == wanted:
        return []
    return [Reason.of(ReasonCode.NO_MATRIX_PEAK, chip=req.chip.name, wanted=wanted, weights=dt.weights,
                      activations=dt.activations, used=used, peak=peak)]  # fmt: skip


def _candidates(req: ServingRequest) -> list[ServingLayout]:
    layouts = candidate_layouts(req)
    if not layouts:
        raise InvalidConfigError(
            f"no tensor-parallel degree of {plural(req.topology.num_chips, 'chip')} suits {req.cfg.name} "
            f"(n_heads={req.cfg.n_heads}, n_kv_heads={req.cfg.n_kv_heads})"
        )
    return layouts


def plan_serving(req: ServingRequest) -> ServingPlan:
    """Sweep every candidate layout and batch, then the frontier and the choice."""
    notes: list[Note] = []
    if req.max_context_len > req.cfg.max_seq_len:
        over = Reason.of(ReasonCode.CONTEXT_OVER_MAX, tokens=req.max_context_len, model=req.cfg.name,
                         max_seq_len=req.cfg.max_seq_len)  # fmt: skip
        notes.append(over)
    if req.price is None:
        notes.append(Reason.of(ReasonCode.NO_PRICE, chip=req.chip.name))
    notes += _dtype_notes(req)
    points: list[ServingPoint] = []
    summaries: list[LayoutSummary] = []
    for layout in _candidates(req):
        pts, summary = _sweep_layout(req, layout, notes)
        points += pts
        summaries.append(summary)
    notes += crossing_notes(req, summaries)
    frontier = pareto_frontier(points)
    chosen, why = choose(points, req.max_step_latency_s, req.max_ttft_s)
    plan = ServingPlan(
        req,
        tuple(points),
        frontier,
        chosen,
        why,
        tuple(summaries),
        min_slice(req),
        critical_batch(req.chip, req.dtypes, req.eff),
        tuple(notes),
    )
    if req.requests_per_s:
        plan = dataclasses.replace(plan, disaggregation=disaggregate(plan, req.requests_per_s))
    if req.traffic is not None:
        plan = dataclasses.replace(plan, batching=continuous_batching(plan))
        plan = _choose_under_load(plan)
    return plan


def _choose_under_load(plan: ServingPlan) -> ServingPlan:
    """With a load (a rate or a concurrency) the headline answers under it: the layout continuous
    batching chooses (latency targets checked on TPOT and TTFT under the load), at the swept batch
    that holds its mean running batch (the smallest at or above it, else the largest); none when no
    layout meets the targets under the load, whatever the static sweep would pick. The static
    choice stays in the notes."""
    b = plan.batching
    assert b is not None
    static = Reason.of(ReasonCode.STATIC_CHOICE, chosen=plan.chosen is not None, reason=plan.chosen_reason)
    notes = (*plan.notes, static)
    none = Reason.of(ReasonCode.UNDER_LOAD, reason=b.reason)
    if b.chosen is None:
        return dataclasses.replace(plan, chosen=None, chosen_reason=none, notes=notes)
    layout, state = b.layouts[b.chosen]
    mine = [i for i, p in enumerate(plan.points) if p.layout == layout and p.fits]
    if not mine:
        return dataclasses.replace(plan, chosen=None, chosen_reason=none, notes=notes)
    running = state.decode_batch or 0.0
    above = [i for i in mine if plan.points[i].batch >= running]
    best = min(above, key=lambda i: plan.points[i].batch) if above else max(mine, key=lambda i: plan.points[i].batch)
    why = Reason.of(ReasonCode.UNDER_LOAD_CHOSEN, requests_per_s=b.traffic.requests_per_s,
                    concurrency=b.traffic.concurrency, reason=b.reason, tpot_s=state.tpot_s or 0.0,
                    ttft_s=state.ttft_s or 0.0, running=running, batch=plan.points[best].batch)  # fmt: skip
    return dataclasses.replace(plan, chosen=best, chosen_reason=why, notes=notes)
