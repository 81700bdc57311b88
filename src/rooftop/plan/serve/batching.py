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
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rooftop.cost.efficiency import Efficiency
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, make_mesh
from rooftop.model.config import Dtypes, TransformerConfig
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.phase import mixed_step
from rooftop.plan.serve.scheduler import StepFn, Traffic, simulate

if TYPE_CHECKING:
    from rooftop.plan.serve.sweep import ServingPlan

# ---------------------------------------------------------------- the step table


class StepTable:
    """A priced step on a grid of running sequences (0, pp, 2 pp, 4 pp, ... up to ``max_batch``)
    and prefill tokens (0 to ``budget`` in ``c_points`` steps), linear in between; ``price(n, c)``
    is called once per grid point, when first needed."""

    def __init__(self, price: Callable[[int, float], float], max_batch: int, budget: float, pp: int = 1) -> None:
        top = max(max_batch - max_batch % pp, pp)
        ns = {0, top}
        k = pp
        while k < top:
            ns.add(k)
            k *= 2
        self.ns = sorted(ns)
        self.cs = [budget * i / 8 for i in range(9)]
        self.price = price
        self.cache: dict[tuple[int, int], float] = {}

    def _at(self, i: int, j: int) -> float:
        if (i, j) not in self.cache:
            self.cache[(i, j)] = self.price(self.ns[i], self.cs[j])
        return self.cache[(i, j)]

    def __call__(self, n: float, c: float) -> float:
        i, fn = _segment(self.ns, n)
        j, fc = _segment(self.cs, c)
        lo = self._at(i, j) * (1 - fc) + self._at(i, j + 1) * fc
        hi = self._at(i + 1, j) * (1 - fc) + self._at(i + 1, j + 1) * fc
        return lo * (1 - fn) + hi * fn


def _segment(grid: list[float] | list[int], x: float) -> tuple[int, float]:
    """(i, f): x = grid[i] + f (grid[i+1] - grid[i]), extrapolated linearly past the ends."""
    i = min(max(bisect.bisect_right(grid, x) - 1, 0), len(grid) - 2)
    return i, (x - grid[i]) / (grid[i + 1] - grid[i])


# ---------------------------------------------------------------- the fluid balance (saturation)


def _fluid_step(step: StepFn, t: Traffic, rate: float, max_batch: int) -> float | None:
    """Mean step time at ``rate`` requests/s per replica, or None when the replica cannot keep up
    (module docstring): fixed point of t = step(rate (G-1) t, rate P t) from below."""
    p, g, budget = t.prompt_len, t.gen_len, t.token_budget
    tau = step(0.0, 0.0)
    for _ in range(200):
        n, c = rate * (g - 1) * tau, rate * p * tau
        if n > max_batch:
            return None
        if t.scheduler == "chunked":
            if n + c > budget:
                return None
            new = step(n, c)
        else:  # decode steps of n, and prefill steps of full budgets taking a share u of the time
            u = rate * p * step(0.0, budget) / budget
            if u >= 1:
                return None
            new = step(n, 0.0) / (1 - u)
        if new > 1e6:
            return None
        if abs(new - tau) <= 1e-9 * new:
            return new
        tau = new
    return None


def capacity(step: StepFn, t: Traffic, max_batch: int) -> float:
    """Largest request rate per replica the fluid balance sustains (bisection, 0.1%)."""
    lo, hi = 0.0, 1.0
    while _fluid_step(step, t, hi, max_batch) is not None:
        lo, hi = hi, hi * 2
        if hi > 1e9:
            return math.inf
    while hi - lo > 1e-3 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _fluid_step(step, t, mid, max_batch) is not None else (lo, mid)
    return lo


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
    reason: str


def idle_ttft(step: StepFn, t: Traffic) -> float:
    """One prompt on an idle replica: its chunks one step after another (chunked), or one step."""
    if t.scheduler == "prefill-first":
        return step(0.0, t.prompt_len)
    full, rest = divmod(t.prompt_len, t.token_budget)
    return full * step(0.0, t.token_budget) + (step(0.0, rest) if rest else 0.0)


def steady_state(step: StepFn, t: Traffic, max_batch: int, replicas: int = 1) -> SteadyState:
    """TPOT, TTFT under load, queueing and throughput of ``replicas`` replicas sharing the traffic
    evenly (module docstring: the fluid balance decides saturation, the simulation the rest)."""
    cap = capacity(step, t, max_batch)
    idle = idle_ttft(step, t)
    slice_cap = cap * replicas
    if t.requests_per_s is not None and t.requests_per_s / replicas >= cap:
        return SteadyState(
            t, replicas, max_batch, slice_cap, True, idle, *(None,) * 7,
            f"saturated: {t.requests_per_s:.4g} requests/s exceed the {slice_cap:.4g} this layout sustains "
            f"({replicas} x {cap:.4g}); the queue grows without bound, so no TTFT",
        )  # fmt: skip
    if t.requests_per_s is not None:
        r = simulate(step, t, max_batch, rate=t.requests_per_s / replicas)
        served = r.requests_per_s * replicas
        load = f"{t.requests_per_s:.4g} requests/s, {r.requests_per_s / cap:.0%} of the {slice_cap:.4g} sustained"
    else:
        assert t.concurrency is not None  # Traffic holds one of the two
        clients = max(1, round(t.concurrency / replicas))  # a replica's share, rounded
        r = simulate(step, t, max_batch, clients=clients)
        served = r.requests_per_s / clients * t.concurrency  # one client's rate, every client
        load = f"{clients} clients per replica, {served:.4g} requests/s"
    return SteadyState(
        t, replicas, max_batch, slice_cap, False, idle, r.tpot_s, r.ttft_s, r.queue_s,
        r.prefill_tokens_per_step, r.decode_batch, served, served * t.gen_len,
        f"{load}: {r.decode_batch:.3g} sequences decode per step on average, "
        f"{r.prefill_tokens_per_step:.4g} prompt tokens prefilled per step",
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
) -> StepTable:
    """The StepTable of ``layout``: plan/serve/phase.mixed_step at the mean decode context
    prompt_len + gen_len / 2 (as the static batch's step)."""
    context = t.prompt_len + (t.gen_len + 1) // 2

    def price(n: int, c: float) -> float:
        return mixed_step(cfg, chip, mesh, layout, n, context, c, t.prompt_len, dtypes, eff).time_s

    return StepTable(price, max_batch, max(t.token_budget, t.prompt_len), layout.pp)


# ---------------------------------------------------------------- every layout of a plan


@dataclass(frozen=True)
class Batching:
    """Continuous batching on each layout of a serving plan that holds the model (``layouts``:
    (layout, steady state) pairs), the choice and why."""

    traffic: Traffic
    layouts: tuple[tuple[ServingLayout, SteadyState], ...]
    chosen: int | None
    reason: str


def continuous_batching(plan: ServingPlan) -> Batching:
    """Steady state of ``plan.request.traffic`` on every swept layout that holds one sequence
    (its max batch, capped at the request's batch cap, as the scheduler's slots), and the choice:
    under the latency targets (TPOT <= max step latency, TTFT <= max TTFT), the lowest mean
    request latency TTFT + (G - 1) x TPOT at a rate, the most tokens/s at a concurrency."""
    req = plan.request
    t = req.traffic
    assert t is not None  # plan_serving calls this only with a rate or a concurrency
    out = []
    for summary in plan.layouts:
        if summary.max_batch < 1:
            continue
        layout = summary.layout
        slots = min(summary.max_batch, req.batch_cap)
        mesh = make_mesh(req.topology, layout.mesh_axes())
        step = layout_step(req.cfg, req.chip, mesh, layout, req.dtypes, req.eff, t, slots)
        out.append((layout, steady_state(step, t, slots, layout.replicas)))
    chosen, reason = _choose(out, t, req.max_step_latency_s, req.max_ttft_s)
    return Batching(t, tuple(out), chosen, reason)


def _choose(
    states: list[tuple[ServingLayout, SteadyState]], t: Traffic, max_tpot: float | None, max_ttft: float | None
) -> tuple[int | None, str]:
    if not states:
        return None, "no layout holds the model and one sequence"
    live = [i for i, (_, s) in enumerate(states) if not s.saturated]
    if not live:
        best = max(range(len(states)), key=lambda i: states[i][1].capacity_requests_per_s)
        return None, (
            f"every layout is saturated: the queue grows without bound; the most any sustains is "
            f"{states[best][1].capacity_requests_per_s:.4g} requests/s ({states[best][0].label()})"
        )
    ok = [
        i
        for i in live
        if (max_tpot is None or (states[i][1].tpot_s or math.inf) <= max_tpot)
        and (max_ttft is None or (states[i][1].ttft_s or math.inf) <= max_ttft)
    ]
    if not ok:
        return None, "no unsaturated layout meets the latency targets under this load"

    def latency(i: int) -> float:
        s = states[i][1]
        return (s.ttft_s or 0.0) + (t.gen_len - 1) * (s.tpot_s or 0.0)

    if t.requests_per_s is not None:
        best = min(ok, key=latency)
        why = "lowest mean request latency (TTFT + (G - 1) x TPOT)"
    else:
        best = max(ok, key=lambda i: states[i][1].tokens_per_s or 0.0)
        why = "most output tokens/s"
    return best, f"{why} under the targets: {states[best][0].label()}"
