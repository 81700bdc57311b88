"""The fewest chips that serve a request rate under latency targets: ``rooftop serve --requests-per-s R
--max-ttft T --max-step-latency L`` without ``--chips``.

A deployment is ``k`` replicas of one layout (tp, pp, ep, ...: one model copy on tp x pp chips), the
rate shared evenly, on whole nodes or slices: k is one of the valid counts of
hardware/slices.replica_counts (GPUs: k x tp x pp chips below one NVLink domain, else whole domains;
TPUs: the replicas on valid slices), so 361 replicas of tp=2 on H100s (722 chips) is not an answer, 364
(91 nodes) may be. The layouts are those ``rooftop serve`` sweeps on a base slice (plan/serve/sweep: one
NVLink domain of GPUs, or a TPU slice of 8 chips, grown to the smallest slice the model and one sequence
fit on); each is priced by continuous batching exactly as ``rooftop serve --chips N --requests-per-s``
prices it (plan/serve/batching.layout_replica: the step table of the layout, the engine's paged KV pool and
its admission and preemption, the fluid balance for saturation, the seeded simulation for TPOT and TTFT under
load, the engine's TTFT stages: ``--engine``) at R / k requests/s per replica.

For each layout the fewest replicas, the search walking the valid counts only: a first guess k from the
fluid balance (the fewest replicas, above R / one replica's capacity, whose mean step is within L:
plan/serve/batching.Replica.mean_step_s, no simulation), corrected once by the TPOT of a short simulation
there (GUESS_REQUESTS), then steps of 1, 2, 4 ... counts away from it (down while k meets TPOT <= L and
TTFT <= T, up while it misses) to a pair that brackets the answer, then bisection down to the k whose next
smaller valid count misses (more replicas never serve a replica more requests, so TTFT and TPOT do not grow
with k: the answer is the same wherever the search starts; the guess only saves simulations, ~2.5 per
layout instead of ~6). A layout whose one-sequence decode step is over L (the step grows with its
sequences and prompt tokens) or whose idle TTFT is over T meets at no count. The answer is the layout with
the fewest chips (k x chips per replica), ties to the lower mean request latency.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from rooftop.errors import InvalidConfigError
from rooftop.hardware.slices import replica_counts, valid_slices
from rooftop.plan.serve.batching import SteadyState, idle_first_token, layout_replica, paging_of
from rooftop.plan.serve.candidates import min_slice
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.scheduler import simulate
from rooftop.plan.serve.sweep import ServingRequest, layout_batches
from rooftop.plan.serve.traffic import Traffic
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Option, OptionError, Reason

#: requests of the short simulation that corrects the first guess (the figures come from full ones)
GUESS_REQUESTS = 1500
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
    """The fewest chips (``best``), the same layout at the next smaller valid replica count (``fewer``,
    missing: one replica fewer, or one node's or slice's replicas fewer where replicas share nodes), and
    the fewest replicas of every layout that holds the model (``layouts``)."""

    chip: str
    requests_per_s: float
    max_ttft_s: float | None
    max_step_latency_s: float | None
    base_topology: str
    best: ReplicaCount | None
    fewer: ReplicaCount | None
    layouts: tuple[ReplicaCount, ...]
    reason: Note  # why no layout meets the goal ("" when one does: report/goal.py describes ``best``)

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
    """One layout at any valid replica count, each priced as ``rooftop serve --chips N --fix LAYOUT`` prices it
    (plan/serve/batching.layout_replica: the same step table, KV pool, slots and engine). The valid counts
    (hardware/slices.replica_counts: whole nodes or slices) are numbered j = 1, 2, ... (``count``); the
    search runs over j, so it never lands between them."""

    def __init__(self, req: ServingRequest, layout: ServingLayout, max_batch: int, traffic: Traffic) -> None:
        self.replica = layout_replica(req, layout, max_batch, traffic)
        self.req, self.layout, self.traffic = req, layout, traffic
        self.free, self.step = replica_counts(req.chip, layout.chips_per_replica)
        self.seen: dict[int, ReplicaCount] = {}

    def count(self, j: int) -> int:
        """The j-th valid replica count (j >= 1): 1 to ``free``, then the multiples of ``step``."""
        return j if j <= self.free else self.step * (j - self.free)

    def index(self, k: int) -> int:
        """The number of valid counts at or below k replicas."""
        return k if k <= self.free else self.free + k // self.step

    def at(self, j: int) -> ReplicaCount:
        """The j-th valid replica count, priced."""
        k = self.count(j)
        if k not in self.seen:
            s = self.replica.steady_state(self.traffic, k)
            missed = _missed(s, self.req.max_ttft_s, self.req.max_step_latency_s)
            self.seen[k] = ReplicaCount(dataclasses.replace(self.layout, replicas=k), s, missed)
        return self.seen[k]

    def saturating(self) -> int:
        """Valid counts that saturate (the first this many): their share of the rate reaches one's capacity."""
        cap = self.replica.capacity(self.traffic)
        rate = self.traffic.requests_per_s or 0.0
        return self.index(max(0, math.ceil(rate / cap) - 1)) if cap > 0 else self.index(MAX_REPLICAS)

    def least_chips(self) -> int:
        """Chips of the fewest replicas that do not saturate: no count that meets the targets has fewer."""
        return self.count(self.saturating() + 1) * self.layout.chips_per_replica

    def fewest(self) -> ReplicaCount | None:
        """The fewest replicas meeting the targets (module docstring), or None: an idle replica's first
        token already late, a decode step of one sequence already over the step latency, or no count up
        to the last of the doubling j0, 2 j0, 4 j0 ... (j0 the first count the capacity allows) within
        MAX_REPLICAS."""
        ttft, tpot = self.req.max_ttft_s, self.req.max_step_latency_s
        if idle_first_token(self.replica.step, self.traffic, self.replica.engine)[0] > (ttft or math.inf):
            return None  # an idle replica's first token is already late: no count helps
        if tpot is not None and self.replica.step(1.0, 0.0) > tpot:
            return None  # every step decodes one sequence at least, and the step grows with its work
        lo = self.saturating() if self.replica.capacity(self.traffic) > 0 else 0
        top, most = max(lo + 1, 1), self.index(MAX_REPLICAS)
        while 2 * top <= most:
            top *= 2
        guess = self._fluid_guess(lo + 1, top, tpot)
        simulated, fluid = self._short_tpot(guess), self._mean_step(guess)
        if tpot is not None and simulated and fluid:  # the guess again, the target scaled by the simulation's TPOT
            guess = self._fluid_guess(lo + 1, top, tpot * fluid / simulated)
        hi: int | None = None
        lo, hi = self._gallop(guess, lo, hi, top)
        if hi is None:
            return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if mid >= 1 and self.at(mid).meets else (mid, hi)
        return self.at(hi)

    def fewer(self, best: ReplicaCount) -> ReplicaCount | None:
        """The next smaller valid count than ``best``'s (None below one replica)."""
        j = self.index(best.layout.replicas)
        return self.at(j - 1) if j > 1 else None

    def _short_tpot(self, j: int) -> float | None:
        """TPOT of a short simulation (GUESS_REQUESTS) at the j-th count: what corrects the fluid guess (the
        answer's counts are priced in full, ``at``); None when saturated."""
        k, rate = self.count(j), self.traffic.requests_per_s or 0.0
        if rate / k >= self.replica.capacity(self.traffic):
            return None
        paging = paging_of(self.replica.pool, self.replica.host_bytes_per_s)
        return simulate(self.replica.step, self.traffic, self.replica.slots, rate / k, requests=GUESS_REQUESTS,
                        paging=paging).tpot_s  # fmt: skip

    def _mean_step(self, j: int) -> float | None:
        return self.replica.mean_step_s(self.traffic, self.count(j))

    def _fluid_guess(self, lo: int, hi: int, tpot: float | None) -> int:
        """The fewest counts in [lo, hi] whose fluid mean step (``Replica.mean_step_s``) is within ``tpot``
        (bisection: the mean step falls with the load); lo without a target, hi when none is within it."""
        if tpot is None:
            return lo

        def ok(j: int) -> bool:
            tau = self._mean_step(j)
            return tau is not None and tau <= tpot

        if ok(lo) or not ok(hi):
            return lo if ok(lo) else hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        return hi

    def _gallop(self, j: int, lo: int, hi: int | None, top: int) -> tuple[int, int | None]:
        """(a count that misses or ``lo``, a count that meets or None up to ``top``), from j in (lo, hi]:
        steps of 1, 2, 4 ... down from j while the counts meet, or up while they miss (none past ``hi``)."""
        step = 1
        if self.at(j).meets:
            while j - step > lo and self.at(j - step).meets:
                j, step = j - step, 2 * step
            return max(lo, j - step), j
        end = hi if hi is not None else top
        lo = j
        while lo < end:
            j = min(lo + step, end)
            if self.at(j).meets:
                return lo, j
            lo, step = j, 2 * step
        return lo, None


def serve_goal(req: ServingRequest, every_layout: bool = True) -> ServeGoal:
    """The fewest chips serving ``req.requests_per_s`` under ``req``'s latency targets (module docstring).
    ``every_layout`` False (``compare``, which shows only the answer): the layouts are searched by their
    fewest unsaturated chips (``_Counter.least_chips``), and one that cannot have fewer chips than the best
    found so far is not searched (branch and bound: the same answer; ``layouts`` holds the ones searched)."""
    rate = req.requests_per_s
    if rate is None:
        raise OptionError("a serving goal needs ", Option("requests_per_s"), " (and ", Option("max_ttft"), " and/or ",
                          Option("max_step_latency"), ")")  # fmt: skip
    base = base_request(req)
    traffic = Traffic(req.prompt_len, req.gen_len, rate, None, req.scheduler, req.token_budget)
    counters = [(i, _Counter(base, layout, fit, traffic)) for i, (layout, fit) in enumerate(layout_batches(base))
                if fit >= 1]  # fmt: skip
    if not every_layout:
        counters.sort(key=lambda ic: ic[1].least_chips())
    found: list[tuple[ReplicaCount, int, _Counter]] = []
    for i, counter in counters:
        if not every_layout and found and counter.least_chips() > min(r.layout.chips for r, _, _ in found):
            continue
        best = counter.fewest()
        if best is not None:
            found.append((best, i, counter))
    found.sort(key=lambda item: item[1])  # the plan's order
    goal = ServeGoal(req.chip.name, rate, req.max_ttft_s, req.max_step_latency_s, base.topology.spec, None, None,
                     tuple(r for r, _, _ in found), "")  # fmt: skip
    if not found:
        return dataclasses.replace(goal, reason=Reason.of(ReasonCode.SERVE_GOAL_UNMET, chip=req.chip.name))

    def key(item: tuple[ReplicaCount, int, _Counter]) -> tuple[float, float, int]:
        s = item[0].state
        return (item[0].layout.chips, (s.ttft_s or 0.0) + (req.gen_len - 1) * (s.tpot_s or 0.0), item[1])

    best, _, counter = min(found, key=key)
    return dataclasses.replace(goal, best=best, fewer=counter.fewer(best))
