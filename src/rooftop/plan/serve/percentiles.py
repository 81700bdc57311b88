"""Latency percentiles under a request rate: p50/p90/p99 of TTFT, TPOT and end-to-end latency of
the requests of the scheduler's simulation (plan/serve/scheduler.py, run by ``simulate_requests``) on the
layout continuous batching chose, Poisson arrivals at the rate's share of one replica, seeded.

Per request: TTFT = first token - arrival (queueing + its prefill steps), TPOT = (finish - first
token) / (G - 1), end-to-end = finish - arrival. The engine's fixed TTFT stages (plan/serve/ttft.py:
tokenizing, scheduling, detokenizing) are not in these figures: they are the simulation's own.
The requests measured are in steady state: as many again x WARMUP_FRACTION arrive before them
(on an empty replica) and after them (so the last measured do not decode on a draining replica),
not measured. The gaps between arrivals are stratified (``stratified_gaps``): with 10,000
requests, independent draws left p99 TTFT varying by ~5% (standard deviation) from seed to seed,
an unlucky seed drawing more short gaps; stratified, ~2.5%. Percentiles use the nearest-rank rule
(the ceil(q N)-th smallest).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard

from rooftop.errors import InvalidConfigError, ParseError
from rooftop.plan.serve.batching import layout_replica, paging_of
from rooftop.plan.serve.scheduler import SEED, WARMUP_FRACTION, Done, Paging, StepFn, Traffic, _Sim

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


def simulate_requests(
    step: StepFn,
    t: Traffic,
    max_batch: int,
    rate: float,
    requests: int,
    seed: int,
    paging: Paging | None = None,
    lengths: tuple[tuple[int, int], ...] = (),
    range_ratio: float = 0.0,
) -> list[Done]:
    """The ``Done`` of ``requests`` requests measured in steady state: Poisson arrivals at ``rate``
    per second (seeded, ``stratified_gaps``) on the scheduler of ``simulate``, WARMUP_FRACTION x
    ``requests`` more arriving before them (they find the replica empty) and as many after them (so
    the last measured ones share their steps with later arrivals, not with a draining replica);
    neither extra set is measured. With ``lengths``, each request's (prompt, output) tokens are
    drawn from them (seeded, uniformly, with replacement); else with ``range_ratio`` r, the prompt
    and the output lengths each drawn uniformly from the integers in [L (1 - r), L (1 + r)] (L: ``t``'s)
    as vLLM's serving benchmark draws them (``--random-range-ratio``); else ``t``'s."""
    extra = math.ceil(requests * WARMUP_FRACTION)
    total = requests + 2 * extra
    sim = _Sim(step, t, max_batch, rate, None, paging)
    rng = random.Random(seed)
    sim.gaps = stratified_gaps(rate, total, rng)
    if lengths:
        sim.lengths = rng.choices(lengths, k=total)
    elif range_ratio:
        (p0, p1), (g0, g1) = (spread(n, range_ratio) for n in (t.prompt_len, t.gen_len))
        sim.lengths = [(rng.randint(p0, p1), rng.randint(g0, g1)) for _ in range(total)]
    sim.run(total, seed)
    return sorted(sim.done)[extra : extra + requests]


def stratified_gaps(rate: float, n: int, rng: random.Random) -> list[float]:
    """n times between Poisson arrivals at ``rate``, stratified: the i-th of a shuffled 0..n-1 puts the
    gap's uniform draw in [i / n, (i + 1) / n), so each gap is exponential with mean 1 / rate, as
    independent draws, but the n gaps together cover the distribution evenly (Latin hypercube
    sampling, McKay, Beckman and Conover 1979): no seed draws too many short or long ones."""
    strata = list(range(n))
    rng.shuffle(strata)
    return [-math.log1p(-(i + rng.random()) / n) / rate for i in strata]


def spread(n: int, ratio: float) -> tuple[int, int]:
    """The lengths [int(n (1 - ratio)), int(n (1 + ratio))] (at least 1) a length n spreads over."""
    return max(1, int(n * (1 - ratio))), max(1, int(n * (1 + ratio)))


def nearest_rank(values: list[float], q: float) -> float:
    """The ceil(q N)-th smallest of ``values`` (nearest-rank percentile; q in (0, 1])."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _length(v: object, hi: int) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= hi


def read_request_trace(path: str, max_tokens: int) -> tuple[tuple[int, int], ...]:
    """(prompt, output) tokens of each request of a trace file: one JSON object per line with
    ``input_len`` and ``output_len`` (positive integers up to ``max_tokens``; other keys ignored,
    blank lines skipped). A malformed line raises naming the file and the line."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ParseError(f"cannot read the request trace: {e.__class__.__name__}", source=path) from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise ParseError("not a JSON object", source=path, line=n) from None
        p, g = (row.get(k) if isinstance(row, dict) else None for k in ("input_len", "output_len"))
        if not (_length(p, max_tokens) and _length(g, max_tokens)):
            raise ParseError(f"needs input_len and output_len, whole numbers from 1 to {max_tokens}", source=path,
                             line=n)  # fmt: skip
        out.append((p, g))
    if not out:
        raise ParseError("no requests in the trace", source=path)
    return tuple(out)


def latency_percentiles(
    plan: ServingPlan,
    requests: int = PERCENTILE_REQUESTS,
    seed: int = SEED,
    lengths: tuple[tuple[int, int], ...] = (),
    range_ratio: float = 0.0,
) -> Percentiles:
    """Percentiles on the layout continuous batching chose (module docstring), each request's
    lengths drawn from ``lengths`` or spread by ``range_ratio`` (``simulate_requests``; its steps
    still priced at the plan's lengths' mean context); raises when there is no rate, no unsaturated
    layout meets the load, or a request's prompt and output would not fit the KV pool on their own."""
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
    if not 0 <= range_ratio < 1 or math.isnan(range_ratio):
        raise InvalidConfigError(f"--random-range-ratio {range_ratio:g} must be at least 0 and below 1")
    longest = max((p + g for p, g in lengths), default=0)
    if range_ratio and not lengths:
        longest = spread(b.traffic.prompt_len, range_ratio)[1] + spread(b.traffic.gen_len, range_ratio)[1]
    if paging is not None and -(-longest // paging.block_tokens) > paging.blocks:
        raise InvalidConfigError(
            f"a request of {longest} tokens (prompt + output) does not fit the KV pool of "
            f"{paging.blocks * paging.block_tokens} tokens on its own"
        )
    done = simulate_requests(replica.step, t, replica.slots, req.requests_per_s / layout.replicas, requests, seed,
                             paging, lengths, range_ratio)  # fmt: skip
    ttft = [first - arrival for arrival, _, first, _, _ in done]
    tpot = [(end - first) / (g - 1) for _, _, first, end, g in done if g > 1] or [0.0]
    e2e = [end - arrival for arrival, _, _, end, _ in done]
    return Percentiles(
        requests,
        len(done),
        seed,
        *(tuple(nearest_rank(v, q) for q in QUANTILES) for v in (ttft, tpot, e2e)),
    )
