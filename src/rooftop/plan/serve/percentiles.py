"""Latency percentiles under a request rate: p50/p90/p99 of TTFT, TPOT and end-to-end latency of
the requests of the scheduler's simulation (plan/serve/scheduler.py, ``simulate_requests``) on the
layout continuous batching chose, Poisson arrivals at the rate's share of one replica, seeded.

Per request: TTFT = first token - arrival (queueing + its prefill steps), TPOT = (finish - first
token) / (G - 1), end-to-end = finish - arrival. The engine's fixed TTFT stages (plan/serve/ttft.py:
tokenizing, scheduling, detokenizing) are not in these figures: they are the simulation's own.
The requests measured are in steady state: as many again x WARMUP_FRACTION arrive before them
(on an empty replica) and after them (so the last measured do not decode on a draining replica),
not measured. The gaps between arrivals are stratified (scheduler.stratified_gaps): with 10,000
requests, independent draws left p99 TTFT varying by ~5% (standard deviation) from seed to seed,
an unlucky seed drawing more short gaps; stratified, ~2.5%. Percentiles use the nearest-rank rule
(the ceil(q N)-th smallest).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rooftop.errors import InvalidConfigError
from rooftop.plan.serve.batching import layout_replica, paging_of
from rooftop.plan.serve.scheduler import SEED, simulate_requests

if TYPE_CHECKING:
    from rooftop.plan.serve.sweep import ServingPlan

QUANTILES = (0.5, 0.9, 0.99)
#: requests simulated for percentiles unless told (p99 then rests on ~90 requests of the 9,000 measured)
PERCENTILE_REQUESTS = 10_000
#: most requests one command may simulate
MAX_REQUESTS = 1_000_000


@dataclass(frozen=True)
class Percentiles:
    """p50/p90/p99 (``QUANTILES``) of each latency over ``measured`` requests (seconds)."""

    requests: int
    measured: int
    seed: int
    ttft_s: tuple[float, ...]
    tpot_s: tuple[float, ...]
    e2e_s: tuple[float, ...]


def nearest_rank(values: list[float], q: float) -> float:
    """The ceil(q N)-th smallest of ``values`` (nearest-rank percentile; q in (0, 1])."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def latency_percentiles(plan: ServingPlan, requests: int = PERCENTILE_REQUESTS, seed: int = SEED) -> Percentiles:
    """Percentiles on the layout continuous batching chose (module docstring); raises when there is
    no rate or no unsaturated layout meets the load."""
    req, b = plan.request, plan.batching
    if b is None or req.requests_per_s is None:
        raise InvalidConfigError("--percentiles needs --requests-per-s (a request rate to simulate)")
    if not 10 <= requests <= MAX_REQUESTS:
        raise InvalidConfigError(f"--requests {requests} must be between 10 and {MAX_REQUESTS}")
    if b.chosen is None:
        raise InvalidConfigError(f"--percentiles: no layout to simulate ({b.reason})")
    layout, state = b.layouts[b.chosen]
    t = b.traffic
    replica = layout_replica(req, layout, state.max_batch, t)
    paging = paging_of(replica.pool, replica.host_bytes_per_s)
    done = simulate_requests(replica.step, t, replica.slots, req.requests_per_s / layout.replicas, requests, seed,
                             paging)  # fmt: skip
    ttft = [first - arrival for arrival, _, first, _ in done]
    g = t.gen_len
    tpot = [(end - first) / (g - 1) for _, _, first, end in done] if g > 1 else [0.0] * len(done)
    e2e = [end - arrival for arrival, _, _, end in done]
    return Percentiles(
        requests,
        len(done),
        seed,
        *(tuple(nearest_rank(v, q) for q in QUANTILES) for v in (ttft, tpot, e2e)),
    )
