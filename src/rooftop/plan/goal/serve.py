"""The fewest chips that serve a request rate under latency targets: ``rooftop serve --requests-per-s R
--max-ttft T --max-step-latency L`` without ``--chips``.

A deployment is ``k`` replicas of one layout (tp, pp, ep, ...: one model copy on tp x pp chips), the
rate shared evenly. The layouts are those ``rooftop serve`` sweeps on a base slice (plan/serve/sweep:
one NVLink domain of GPUs, or a TPU slice of 8 chips, grown to the smallest slice the model and one
sequence fit on); each is priced by continuous batching exactly as ``rooftop serve --chips N --requests-per-s``
prices it (plan/serve/batching.layout_replica: the step table of the layout, the engine's paged KV pool and
its admission and preemption, the fluid balance for saturation, the seeded simulation for TPOT and TTFT under
load, the engine's TTFT stages: ``--engine``) at R / k requests/s per replica.

For each layout the fewest replicas: k from R / (one replica's capacity), rounded up (fewer saturate),
doubled until TPOT <= L and TTFT <= T, then bisection down to the k whose k - 1 misses (more replicas
never serve a replica more requests, so TTFT and TPOT do not grow with k). The answer is the layout
with the fewest chips (k x chips per replica), ties to the lower mean request latency.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from rooftop.errors import InvalidConfigError
from rooftop.hardware.slices import valid_slices
from rooftop.plan.serve.batching import SteadyState, layout_replica
from rooftop.plan.serve.candidates import min_slice
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.scheduler import Traffic
from rooftop.plan.serve.sweep import ServingRequest, plan_serving

#: most replicas a goal considers per layout
MAX_REPLICAS = 1 << 16
#: which target a replica count misses first: the engine saturates, the time per output token, the first token
Miss = Literal["saturated", "tpot", "ttft"]
#: chips of the base slice of a TPU (a 2x4 or 2x2x2 slice): tensor parallelism up to 8
TPU_BASE_CHIPS = 8


@dataclass(frozen=True)
class ReplicaCount:
    """``replicas`` copies of ``layout`` at the goal's rate: meets the targets or which it misses (report/goal.py
    writes the words)."""

    layout: ServingLayout  # with ``replicas`` set to the count
    state: SteadyState
    missed: Miss | None  # the target it misses first; None: it meets them all

    @property
    def meets(self) -> bool:
        return self.missed is None


@dataclass(frozen=True)
class ServeGoal:
    """The fewest chips (``best``), the same layout with one replica fewer (``fewer``, missing), and the
    fewest replicas of every layout that holds the model (``layouts``)."""

    chip: str
    requests_per_s: float
    max_ttft_s: float | None
    max_step_latency_s: float | None
    base_topology: str
    best: ReplicaCount | None
    fewer: ReplicaCount | None
    layouts: tuple[ReplicaCount, ...]
    reason: str  # why no layout meets the goal ("" when one does: report/goal.py describes ``best``)

    @property
    def chips(self) -> int | None:
        return self.best.layout.chips if self.best is not None else None


def _missed(s: SteadyState, ttft: float | None, tpot: float | None) -> Miss | None:
    if s.saturated:
        return "saturated"
    if tpot is not None and (s.tpot_s or math.inf) > tpot:
        return "tpot"
    if ttft is not None and (s.ttft_s or math.inf) > ttft:
        return "ttft"
    return None


def base_request(req: ServingRequest) -> ServingRequest:
    """``req`` on the base slice the layouts are swept on (module docstring), with no traffic."""
    spec = req.chip.topology
    fewest = min_slice(req)
    if fewest is None:
        raise InvalidConfigError(f"{req.cfg.name} does not fit on any {req.chip.name} slice up to 4096 chips")
    want = max(spec.domain_sizes[0] if spec.kind == "switched" else TPU_BASE_CHIPS, fewest.chips)
    option = next((o for o in valid_slices(req.chip) if o.chips >= want and "*" not in o.spec), None)
    if option is None:
        raise InvalidConfigError(f"no single {req.chip.name} slice holds {want} chips")
    return dataclasses.replace(req, topology=option.topology(req.chip), requests_per_s=None, concurrency=None)


class _Counter:
    """One layout at any replica count, each priced as ``rooftop serve --chips N --fix LAYOUT`` prices it
    (plan/serve/batching.layout_replica: the same step table, KV pool, slots and engine)."""

    def __init__(self, req: ServingRequest, layout: ServingLayout, max_batch: int, traffic: Traffic) -> None:
        self.replica = layout_replica(req, layout, max_batch, traffic)
        self.req, self.layout, self.traffic = req, layout, traffic
        self.seen: dict[int, ReplicaCount] = {}

    def at(self, k: int) -> ReplicaCount:
        if k not in self.seen:
            s = self.replica.steady_state(self.traffic, k)
            missed = _missed(s, self.req.max_ttft_s, self.req.max_step_latency_s)
            self.seen[k] = ReplicaCount(dataclasses.replace(self.layout, replicas=k), s, missed)
        return self.seen[k]

    def fewest(self) -> ReplicaCount | None:
        rate = self.traffic.requests_per_s or 0.0
        cap = self.at(1).state.capacity_requests_per_s
        if self.at(1).state.ttft_idle_s > (self.req.max_ttft_s or math.inf):
            return None  # an idle replica's first token is already late: no count helps
        lo = max(0, math.ceil(rate / cap) - 1) if cap > 0 else 0
        hi = max(lo + 1, 1)
        while not self.at(hi).meets:
            lo, hi = hi, hi * 2
            if hi > MAX_REPLICAS:
                return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if mid >= 1 and self.at(mid).meets else (mid, hi)
        return self.at(hi)


def serve_goal(req: ServingRequest) -> ServeGoal:
    """The fewest chips serving ``req.requests_per_s`` under ``req``'s latency targets (module docstring)."""
    rate = req.requests_per_s
    if rate is None:
        raise InvalidConfigError("a serving goal needs --requests-per-s (and --max-ttft and/or --max-step-latency)")
    base = base_request(req)
    plan = plan_serving(base)
    traffic = Traffic(req.prompt_len, req.gen_len, rate, None, req.scheduler, req.token_budget)
    found: list[tuple[ReplicaCount, _Counter]] = []
    for summary in plan.layouts:
        if summary.max_batch < 1:
            continue
        counter = _Counter(base, summary.layout, summary.max_batch, traffic)
        best = counter.fewest()
        if best is not None:
            found.append((best, counter))
    goal = ServeGoal(req.chip.name, rate, req.max_ttft_s, req.max_step_latency_s, base.topology.spec, None, None,
                     tuple(r for r, _ in found), "")  # fmt: skip
    if not found:
        return dataclasses.replace(goal, reason=f"no layout of {req.chip.name} meets the targets at any replica count")

    def key(item: tuple[ReplicaCount, _Counter]) -> tuple[float, float]:
        s = item[0].state
        return (item[0].layout.chips, (s.ttft_s or 0.0) + (req.gen_len - 1) * (s.tpot_s or 0.0))

    best, counter = min(found, key=key)
    k = best.layout.replicas
    fewer = counter.at(k - 1) if k > 1 else None
    return dataclasses.replace(goal, best=best, fewer=fewer)
