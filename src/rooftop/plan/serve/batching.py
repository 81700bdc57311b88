"""Continuous batching in steady state: TPOT, TTFT under load with queueing, and throughput of a
replica fed by a request rate (open loop, Poisson arrivals) or by a fixed number of clients
(closed loop), under a scheduler policy.

Every step is priced by plan/serve/phase.py (``mixed_step``: the decode of the running batch
plus the prefill tokens admitted that step, weights read once): nothing here re-implements a
roofline. The step time is tabulated on a grid of (running sequences, prefill tokens) and
interpolated linearly between grid points (``StepTable``): inside each segment the priced step
is a sum of max(compute, memory) terms linear in both.

How the numbers come out (``method``: "simulation"):

- ``saturated`` comes from a fluid balance, a formula: at rate lambda per replica and mean step t,
  lambda x (G - 1) x t sequences decode (Little's law) and lambda x P x t prompt tokens are
  prefilled per step, so t = step(lambda (G-1) t, lambda P t). The replica keeps up when this has
  a solution with both within the token budget (and, for prefill-first, the prefill steps' share
  of time below 1) and the running sequences within the memory's max batch; above the largest
  such rate (``capacity_requests_per_s``) the queue grows without bound and no TTFT is given.
- below it, TPOT, TTFT, the queueing delay and the prefill tokens per step come from a small
  seeded simulation of the scheduler at the step level (plan/serve/scheduler.py, ``simulate``): Poisson arrivals (or N
  clients that send a new request when one ends), FCFS, the scheduler's rule at every step, each
  step lasting what the table says. tests/unit/test_batching.py checks it against a separately
  written discrete-event simulation of the same scheduler, within 5% over a grid of rates.

Schedulers (``SCHEDULERS``):

- "chunked" (chunked prefill, Sarathi-Serve / vLLM V1 / SGLang): every step decodes every running
  sequence and fills the rest of a token budget with prompt tokens, first come first served, a
  prompt split over steps when it does not fit;
- "prefill-first" (vLLM V0 without chunked prefill, Orca-style): when prompts wait, the step
  prefills whole prompts (as many as the budget holds, at least one) and the running sequences
  wait; otherwise it decodes them all.

A request's first token comes out of the step that ends its prefill; its G - 1 other tokens out
of the next G - 1 steps that decode it. TTFT = queueing (arrival to the start of the step that
takes its first prompt tokens) + its prefill steps. ``ttft_idle_s`` is the same request on an idle
replica.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rooftop.cost.algorithms import Algorithm
from rooftop.cost.efficiency import Efficiency
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, make_mesh
from rooftop.model.config import TransformerConfig
from rooftop.model.workload import Dtypes
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.paging import Engine, KVPool, kv_pool
from rooftop.plan.serve.phase import mixed_step
from rooftop.plan.serve.scheduler import StepFn, simulate
from rooftop.plan.serve.traffic import Paging, Traffic
from rooftop.plan.serve.ttft import Stage, total, ttft_stages
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

if TYPE_CHECKING:
    from rooftop.plan.serve.sweep import ServingPlan, ServingRequest

# ---------------------------------------------------------------- the step table


class StepTable:
    """A priced step on a grid of running sequences (0, pp, 2 pp, 4 pp, ... up to the first power
    of two times pp at or above ``max_batch``) and prefill tokens (0 to ``budget`` in 8 steps),
    linear in between; ``price(n, c)`` is called once per grid point, when first needed. The grid
    does not move with ``max_batch`` beyond its power of two, so a chip with more memory prices
    the same steps the same way (the fixed points below are then monotone in the chip)."""

    def __init__(self, price: Callable[[int, float], float], max_batch: int, budget: float, pp: int = 1) -> None:
        ns, k = [0, pp], pp
        while k < max_batch:
            k *= 2
            ns.append(k)
        self.ns = ns
        self.cs = [budget * i / 8 for i in range(9)]
        self.price = price
        self.cache: dict[tuple[int, int], float] = {}
        self.seen: dict[tuple[float, float], float] = {}  # (n, c) -> step: a simulation asks the same steps again

    def _at(self, i: int, j: int) -> float:
        if (i, j) not in self.cache:
            self.cache[(i, j)] = self.price(self.ns[i], self.cs[j])
        return self.cache[(i, j)]

    def __call__(self, n: float, c: float) -> float:
        v = self.seen.get((n, c))
        if v is None:
            i, fn = _segment(self.ns, n)
            j, fc = _segment(self.cs, c)
            lo = self._at(i, j) * (1 - fc) + self._at(i, j + 1) * fc
            hi = self._at(i + 1, j) * (1 - fc) + self._at(i + 1, j + 1) * fc
            v = self.seen[(n, c)] = lo * (1 - fn) + hi * fn
        return v

    def breaks(self, a: float, b: float) -> list[float]:
        """The tau at which (a tau, b tau) crosses a grid line: between two, the step is a
        quadratic in tau (bilinear in n and c, each linear in tau)."""
        return sorted({x / a for x in self.ns[1:-1] if a > 0} | {x / b for x in self.cs[1:-1] if b > 0})


def _segment(grid: list[float] | list[int], x: float) -> tuple[int, float]:
    """(i, f): x = grid[i] + f (grid[i+1] - grid[i]), extrapolated linearly past the ends."""
    i = min(max(bisect.bisect_right(grid, x) - 1, 0), len(grid) - 2)
    return i, (x - grid[i]) / (grid[i + 1] - grid[i])


# ---------------------------------------------------------------- the fluid balance (saturation)


#: the largest mean step the fluid balance considers (seconds): beyond it, "cannot keep up"
MAX_STEP_S = 1e6
#: capacities are the largest rate on the grid 2^(k / CAPACITY_STEPS) requests/s (0.07% apart)
CAPACITY_STEPS = 1024


def _fluid_step(step: StepFn, t: Traffic, rate: float, max_batch: float) -> float | None:
    """Mean step time at ``rate`` requests/s per replica, or None when the replica cannot keep up
    (module docstring): the smallest tau >= 0 with f(tau) <= tau, f(tau) = step(rate (G-1) tau,
    rate P tau) (chunked; prefill-first: step(rate (G-1) tau, 0) / (1 - u), u the prefill steps'
    share of time), within tau_max where the running sequences reach ``max_batch`` (and, chunked,
    the step's tokens the budget). A bracketing solve, not an iteration: f is increasing, so the
    smallest fixed point is the first tau where g = f - tau reaches 0; on a StepTable g is a
    quadratic between grid crossings (``StepTable.breaks``), whose first root is solved exactly;
    for any other step function the pieces are 64 geometric ones, each root bracketed and bisected.
    A pointwise faster step lowers g everywhere, so the answer never gets worse on a better chip."""
    p, g, budget = t.computed_prompt_len, t.gen_len, t.token_budget  # prompt tokens prefilled: less the cache hits
    a, b = rate * (g - 1), rate * p
    if t.scheduler == "chunked":
        hi = min(max_batch / a if a else math.inf, budget / (a + b), MAX_STEP_S)

        def f(tau: float) -> float:
            return step(a * tau, b * tau)
    else:
        u = rate * p * step(0.0, budget) / budget
        if u >= 1:
            return None
        hi, b = min(max_batch / a if a else math.inf, MAX_STEP_S), 0.0

        def f(tau: float) -> float:
            return step(a * tau, 0.0) / (1 - u)

    if hi <= 0:  # the memory holds no sequence: nothing keeps up
        return None
    cuts = step.breaks(a, b) if isinstance(step, StepTable) else [hi * 2.0**-k for k in range(64, 0, -1)]
    edges = [0.0, *(x for x in cuts if 0 < x < hi), hi]
    for lo, up in itertools.pairwise(edges):
        root = _first_root(f, lo, up, exact=isinstance(step, StepTable))
        if root is not None:
            return root
    return None


def _first_root(f: Callable[[float], float], lo: float, hi: float, exact: bool) -> float | None:
    """The smallest x in [lo, hi] with f(x) <= x, f a quadratic there when ``exact`` (else bisected)."""
    g0, mid, g1 = f(lo) - lo, (lo + hi) / 2, f(hi) - hi
    if g0 <= 0:
        return lo
    if exact:  # g(x) = g0 + q1 s + q2 s^2, s = x - lo
        gm, h = f(mid) - mid, (hi - lo) / 2
        q2 = (g1 - 2 * gm + g0) / (2 * h * h)
        q1 = (gm - g0) / h - q2 * h
        roots = _quadratic_roots(q2, q1, g0)
        inside = [lo + s for s in roots if 0 <= s <= hi - lo]
        if inside:
            x = min(inside)
            return x if f(x) <= x * (1 + 1e-12) else _bisect(f, lo, min(hi, x * (1 + 1e-9)))
        return None
    return _bisect(f, lo, hi) if g1 <= 0 else None


def _quadratic_roots(q2: float, q1: float, q0: float) -> list[float]:
    """Real roots of q2 s^2 + q1 s + q0 (numerically stable form)."""
    if abs(q2) < 1e-300:
        return [] if q1 == 0 else [-q0 / q1]
    disc = q1 * q1 - 4 * q2 * q0
    if disc < 0:
        return []
    w = -0.5 * (q1 + math.copysign(math.sqrt(disc), q1))
    return [w / q2, q0 / w] if w else [0.0]


def _bisect(f: Callable[[float], float], lo: float, hi: float) -> float | None:
    """Bisection of f(x) <= x between lo (above) and hi (below); hi when it is not below."""
    if f(hi) > hi:
        return None
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if f(mid) <= mid else (mid, hi)
        if hi - lo <= 1e-12 * hi:
            break
    return hi


def capacity(step: StepFn, t: Traffic, max_batch: float) -> float:
    """Largest request rate per replica the fluid balance sustains: the largest 2^(k / 1024) that
    does, k found by bisection (sustainable rates are a down-set: f grows and tau_max shrinks with
    the rate), so a better chip never gets a lower figure."""

    def ok(k: int) -> bool:
        return _fluid_step(step, t, 2.0 ** (k / CAPACITY_STEPS), max_batch) is not None

    lo, hi = -40 * CAPACITY_STEPS, 0
    if not ok(lo):
        return 0.0
    while ok(hi):
        lo, hi = hi, hi + 4 * CAPACITY_STEPS
        if hi > 30 * CAPACITY_STEPS:
            return math.inf
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    capacity: float = 2.0 ** (lo / CAPACITY_STEPS)
    return capacity


# ---------------------------------------------------------------- one layout, one slice


@dataclass(frozen=True)
class SteadyState:
    """Continuous batching on one layout: per-request latencies, and rates over the whole slice.
    Beyond ``capacity_requests_per_s`` (``saturated``) the queue grows without bound: the
    load-dependent figures are None and ``reason`` says so."""

    traffic: Traffic
    replicas: int
    max_batch: int
    capacity_requests_per_s: float
    saturated: bool
    ttft_idle_s: float
    tpot_s: float | None
    ttft_s: float | None
    queue_s: float | None
    prefill_tokens_per_step: float | None
    decode_batch: float | None
    requests_per_s: float | None
    tokens_per_s: float | None
    reason: Note
    pool: KVPool | None = None  # the engine's KV block pool (None: a slot per sequence at full length)
    preemptions: int | None = None
    kv_blocks_used: float | None = None  # mean fraction of the pool's blocks in use under the load
    ttft_stages: tuple[Stage, ...] = ()  # under the load (plan/serve/ttft.py), when an engine is given
    ttft_idle_stages: tuple[Stage, ...] = ()


def idle_ttft(step: StepFn, t: Traffic) -> float:
    """One prompt on an idle replica: its chunks one step after another (chunked), or one step; a prompt
    that misses the prefix cache (all of it when every request hits: the tokens past the prefix)."""
    prompt = t.prompt_len - (t.prefix_len if t.prefix_hit_rate >= 1 else 0)
    if t.scheduler == "prefill-first":
        return step(0.0, prompt)
    full, rest = divmod(prompt, t.token_budget)
    return full * step(0.0, t.token_budget) + (step(0.0, rest) if rest else 0.0)


def idle_first_token(step: StepFn, t: Traffic, engine: Engine | None) -> tuple[float, tuple[Stage, ...]]:
    """TTFT on an idle replica (``idle_ttft``), through the engine's stages when one is given."""
    idle = idle_ttft(step, t)
    if engine is None:
        return idle, ()
    stages = ttft_stages(engine, t.prompt_len, idle, step(1.0, 0.0))
    return total(stages), stages


def fluid_batch(t: Traffic, max_batch: int, pool: KVPool | None) -> float:
    """Running sequences the memory holds on average: the slots, and with a block pool its tokens
    over a sequence's mean holding, P + (1 + r) G / 2 + block / 2 (its prompt, half its output on
    average, the reserve fraction r of the output still to come, half a block rounding)."""
    if pool is None:
        return max_batch
    e = pool.engine
    held = t.prompt_len + (1 + e.reserve_fraction) * t.gen_len / 2 + e.block_tokens / 2
    return min(max_batch, pool.tokens / held)


def paging_of(pool: KVPool | None, host_bytes_per_s: float) -> Paging | None:
    """The scheduler's view of ``pool`` (a swap moves a block over the host link)."""
    if pool is None:
        return None
    e = pool.engine
    swap = pool.bytes_per_token * e.block_tokens / host_bytes_per_s if host_bytes_per_s > 0 else 0.0
    return Paging(pool.blocks, e.block_tokens, e.reserve_fraction, e.preemption, swap)


def steady_state(
    step: StepFn,
    t: Traffic,
    max_batch: int,
    replicas: int = 1,
    pool: KVPool | None = None,
    host_bytes_per_s: float = 0.0,
    engine: Engine | None = None,
    cap: float | None = None,
) -> SteadyState:
    """TPOT, TTFT under load, queueing and throughput of ``replicas`` replicas sharing the traffic
    evenly (module docstring: the fluid balance decides saturation, the simulation the rest); with
    ``pool``, the scheduler admits, grows and preempts against the engine's KV blocks
    (plan/serve/paging.py) and ``max_batch`` is only the engine's limit on running sequences.
    ``cap``: one replica's ``capacity`` when already known (it does not depend on ``replicas``)."""
    if cap is None:
        cap = capacity(step, t, fluid_batch(t, max_batch, pool))
    idle, idle_stages = idle_first_token(step, t, engine)
    slice_cap = cap * replicas
    paging = paging_of(pool, host_bytes_per_s)
    if pool is not None and pool.blocks < pool.blocks_for(t.prompt_len + t.gen_len):
        cap = slice_cap = 0.0
    if (t.requests_per_s is not None and t.requests_per_s / replicas >= cap) or not cap:
        why: Note = Reason.of(ReasonCode.KV_POOL_TOO_SMALL) if not cap else ""
        if cap and t.requests_per_s is not None:
            why = Reason.of(ReasonCode.SATURATED, requests_per_s=t.requests_per_s, sustained=slice_cap,
                            replicas=replicas, per_replica=cap)  # fmt: skip
        return SteadyState(
            t, replicas, max_batch, slice_cap, True, idle, *(None,) * 7, why, pool, ttft_idle_stages=idle_stages
        )  # fmt: skip
    if t.requests_per_s is not None:
        r = simulate(step, t, max_batch, rate=t.requests_per_s / replicas, paging=paging)
        served = r.requests_per_s * replicas
        load: dict[str, object] = {"requests_per_s": t.requests_per_s, "share": r.requests_per_s / cap}
    else:
        assert t.concurrency is not None  # Traffic holds one of the two
        clients = max(1, round(t.concurrency / replicas))  # a replica's share, rounded
        r = simulate(step, t, max_batch, clients=clients, paging=paging)
        served = r.requests_per_s / clients * t.concurrency  # one client's rate, every client
        load = {"clients": clients, "served": served}
    stages: tuple[Stage, ...] = ()
    ttft = r.ttft_s
    if engine is not None:
        stages = ttft_stages(engine, t.prompt_len, r.ttft_s - r.queue_s, r.tpot_s, r.queue_s, r.residual_s)
        ttft = total(stages)
    return SteadyState(
        t, replicas, max_batch, slice_cap, False, idle, r.tpot_s, ttft, r.queue_s,
        r.prefill_tokens_per_step, r.decode_batch, served, served * t.gen_len,
        Reason.of(ReasonCode.UNDER_LOAD_STEADY, **load, sustained=slice_cap, decode_batch=r.decode_batch,
                  prefill_tokens=r.prefill_tokens_per_step, blocks_used=r.blocks_used if pool else None,
                  blocks=pool.blocks if pool else None, preemptions=r.preemptions),
        pool, r.preemptions if pool else None, r.blocks_used if pool else None, stages, idle_stages,
    )  # fmt: skip


def layout_step(
    cfg: TransformerConfig,
    chip: Chip,
    mesh: Mesh,
    layout: ServingLayout,
    dtypes: Dtypes,
    eff: Efficiency,
    t: Traffic,
    max_batch: int,
    algorithm: Algorithm | None = None,
) -> StepTable:
    """The StepTable of ``layout``: plan/serve/phase.mixed_step at the mean decode context
    prompt_len + gen_len / 2 (as the static batch's step)."""
    context = t.prompt_len + (t.gen_len + 1) // 2

    def price(n: int, c: float) -> float:
        return mixed_step(cfg, chip, mesh, layout, n, context, c, t.prompt_len, dtypes, eff, algorithm).time_s

    return StepTable(price, max_batch, max(t.token_budget, t.prompt_len), layout.pp)


# ---------------------------------------------------------------- every layout of a plan


@dataclass(frozen=True)
class Batching:
    """Continuous batching on each layout of a serving plan that holds the model (``layouts``:
    (layout, steady state) pairs), the choice and why."""

    traffic: Traffic
    layouts: tuple[tuple[ServingLayout, SteadyState], ...]
    chosen: int | None
    reason: Note


@dataclass(frozen=True)
class Replica:
    """What continuous batching runs on one replica of a layout, built once and priced at any
    replica count: the step table, the scheduler's slots, the engine's KV block pool (None: a
    fixed-shape slot per sequence) and the engine (admission, preemption, TTFT stages)."""

    step: StepTable
    slots: int
    pool: KVPool | None
    host_bytes_per_s: float
    engine: Engine
    caps: dict[Traffic, float] = field(default_factory=dict, compare=False, repr=False)

    def capacity(self, t: Traffic) -> float:
        """Requests/s one replica sustains under ``t`` (``capacity``), solved once per traffic."""
        if t not in self.caps:
            self.caps[t] = capacity(self.step, t, fluid_batch(t, self.slots, self.pool))
        return self.caps[t]

    def mean_step_s(self, t: Traffic, replicas: int) -> float | None:
        """The fluid balance's mean step (``_fluid_step``) with ``t``'s rate shared by ``replicas``; None
        when saturated. A cheap first guess of the TPOT under that load (the simulation gives the figure)."""
        assert t.requests_per_s is not None
        return _fluid_step(self.step, t, t.requests_per_s / replicas, fluid_batch(t, self.slots, self.pool))

    def steady_state(self, t: Traffic, replicas: int) -> SteadyState:
        """``t`` shared evenly by ``replicas`` replicas of this one (``steady_state``)."""
        return steady_state(self.step, t, self.slots, replicas, self.pool, self.host_bytes_per_s, self.engine,
                            self.capacity(t))  # fmt: skip


def layout_replica(req: ServingRequest, layout: ServingLayout, max_batch: int, t: Traffic) -> Replica:
    """One replica of ``layout`` as ``rooftop serve`` runs it under ``t`` (``max_batch``: the sequences
    its memory holds at full length): with a paged cache, the engine's pool and the request's cap on
    running sequences as the slots; with a fixed-shape cache, a slot per sequence up to the cap. The
    step is priced up to the most sequences that fit at all (each holds at least its prompt's blocks).
    ``continuous_batching`` and the serving goal (plan/goal/serve.py) both build their replicas here."""
    mesh = make_mesh(req.topology, layout.mesh_axes())
    pool = None
    if not layout.static_cache_len:  # paged: the engine's pool, the request's cap on running sequences
        pool = kv_pool(
            req.cfg, req.chip, layout, req.dtypes, max(t.token_budget, t.prompt_len), req.kv_engine,
            req.eff.usable_hbm_fraction,
        )  # fmt: skip
        slots = req.batch_cap - req.batch_cap % layout.batch_unit
    else:  # a fixed-shape slot per sequence
        slots = min(max_batch, req.batch_cap)
    grid = slots if pool is None else max(1, min(slots, pool.tokens // t.prompt_len))
    step = layout_step(req.cfg, req.chip, mesh, layout, req.dtypes, req.eff, t, grid, req.algorithm)
    return Replica(step, slots, pool, req.chip.host_bytes_per_s, req.kv_engine)


def continuous_batching(plan: ServingPlan) -> Batching:
    """Steady state of ``plan.request.traffic`` on every swept layout that holds one sequence
    (``layout_replica``: its slots, pool and step), and the choice:
    under the latency targets (TPOT <= max step latency, TTFT <= max TTFT), the lowest mean
    request latency TTFT + (G - 1) x TPOT at a rate, the most tokens/s at a concurrency."""
    req = plan.request
    t = req.traffic
    assert t is not None  # plan_serving calls this only with a rate or a concurrency
    out = []
    for summary in plan.layouts:
        if summary.max_batch < 1:
            continue
        replica = layout_replica(req, summary.layout, summary.max_batch, t)
        out.append((summary.layout, replica.steady_state(t, summary.layout.replicas)))
    chosen, reason = _choose(out, t, req.max_step_latency_s, req.max_ttft_s)
    return Batching(t, tuple(out), chosen, reason)


def _choose(
    states: list[tuple[ServingLayout, SteadyState]], t: Traffic, max_tpot: float | None, max_ttft: float | None
) -> tuple[int | None, Reason]:
    if not states:
        return None, Reason.of(ReasonCode.NO_LAYOUT_HOLDS)
    live = [i for i, (_, s) in enumerate(states) if not s.saturated]
    if not live:
        best = max(range(len(states)), key=lambda i: states[i][1].capacity_requests_per_s)
        most = states[best][1].capacity_requests_per_s
        return None, Reason.of(ReasonCode.ALL_SATURATED, most=most, layout=states[best][0].label())
    ok = [
        i
        for i in live
        if (max_tpot is None or (states[i][1].tpot_s or math.inf) <= max_tpot)
        and (max_ttft is None or (states[i][1].ttft_s or math.inf) <= max_ttft)
    ]
    if not ok:
        return None, Reason.of(ReasonCode.NONE_MEETS_UNDER_LOAD)

    def latency(i: int) -> float:
        s = states[i][1]
        return (s.ttft_s or 0.0) + (t.gen_len - 1) * (s.tpot_s or 0.0)

    if t.requests_per_s is not None:
        best = min(ok, key=latency)
        code = ReasonCode.LOWEST_LATENCY
    else:
        best = max(ok, key=lambda i: states[i][1].tokens_per_s or 0.0)
        code = ReasonCode.MOST_TOKENS
    return best, Reason.of(code, layout=states[best][0].label())
