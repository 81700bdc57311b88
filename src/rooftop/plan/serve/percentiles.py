"""Latency percentiles under a request rate: p50/p90/p99 of TTFT, TPOT and end-to-end latency of
the requests of the scheduler's simulation (plan/serve/scheduler.py, run by ``simulate_requests``) on the
layout continuous batching chose, Poisson arrivals at the rate's share of one replica, seeded.

Per request: TTFT = first token - arrival (queueing + its prefill steps), TPOT = (finish - first
token) / (G - 1), end-to-end = finish - arrival. The engine's fixed TTFT stages (plan/serve/ttft.py:
tokenizing, scheduling, detokenizing) are not in these figures: they are the simulation's own.
The requests measured are in steady state: as many again x WARMUP_FRACTION arrive before them
(on an empty replica) and after them (so the last measured do not decode on a draining replica),
not measured (the first arrivals find an empty replica: a transient, not the steady state). Two
mechanisms keep the tail steady from seed to seed:

- the arrivals are stratified by window (``stratified_gaps``): each window of a request's decode
  gets a Poisson count of arrivals, the windows' counts covering the Poisson law evenly, so no seed
  draws too many crowded windows. At 80% of capacity (llama-3-8b on one H100, 2048 + 256 tokens,
  10,000 requests), p99 TPOT varied by ~12% (standard deviation over 8 seeds) with stratified gaps
  between arrivals, ~5% by window; p99 TTFT ~4.4% -> ~2.2%;
- more requests where the tail needs them: each percentile's 95% confidence half-width is
  estimated by batch quantiles (``half_width``: neighbours share their queue, so their latencies are
  not independent and the spread of batches, not of requests, measures it); while one is above
  TARGET_HALF_WIDTH (4%: a standard error of ~2%, so three seeds agree within 5%) the run is repeated
  once with more requests (n x 1.5 (width / target)^2, at least 4 n, at most MAX_GROWTH n: the width
  falls as 1 / sqrt(n)); ``measured`` says how many, ``half_widths`` how sure each percentile is (past
  ~85% of capacity p99 may stay above the target at 16 n: the figure says so). At 80% of capacity
  (the example above) 3 seeds' p50/p90/p99 agree within ~2% of their mean, 100,000-160,000 requests.

Percentiles use the nearest-rank rule (the ceil(q N)-th smallest).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard

from rooftop.errors import InvalidConfigError, ParseError
from rooftop.plan.serve.batching import layout_replica, paging_of
from rooftop.plan.serve.scheduler import SEED, WARMUP_FRACTION, Done, StepFn, _Sim
from rooftop.plan.serve.traffic import Paging, Traffic
from rooftop.reasons import Option, OptionError

if TYPE_CHECKING:
    from rooftop.plan.serve.sweep import ServingPlan

QUANTILES = (0.5, 0.9, 0.99)
#: requests simulated for percentiles unless told (p99 then rests on ~90 requests of the 9,000 measured)
PERCENTILE_REQUESTS = 10_000
#: most requests one command may simulate
MAX_REQUESTS = 1_000_000
#: the parameter that asks for the percentiles
PERCENTILES = Option("percentiles")
#: the relative 95% confidence half-width every percentile is simulated to (more requests until it holds)
TARGET_HALF_WIDTH = 0.04
#: the most the requests simulated grow past those asked for, for the tail's confidence
MAX_GROWTH = 16
#: batches of consecutive requests a confidence is estimated from, and Student's t(0.975) at 19 degrees of freedom
BATCHES = 20
T_975 = 2.093


@dataclass(frozen=True)
class Percentiles:
    """p50/p90/p99 (``QUANTILES``) of each latency over ``measured`` requests (seconds): ``requests``
    asked for, more when the tail needed them to reach TARGET_HALF_WIDTH (``half_widths``)."""

    requests: int
    measured: int
    seed: int
    ttft_s: tuple[float, ...]
    tpot_s: tuple[float, ...]
    e2e_s: tuple[float, ...]
    half_widths: tuple[tuple[float, ...], ...] = ()  # TTFT, TPOT, end-to-end: relative 95% half-width of each


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
    per second (seeded, ``stratified_gaps`` over windows of a request's decode on an idle replica) on
    the scheduler of ``simulate``, WARMUP_FRACTION x ``requests`` more arriving before them (they find
    the replica empty) and as many after them (so
    the last measured ones share their steps with later arrivals, not with a draining replica);
    neither extra set is measured. With ``lengths``, each request's (prompt, output) tokens are
    drawn from them (seeded, uniformly, with replacement); else with ``range_ratio`` r, the prompt
    and the output lengths each drawn uniformly from the integers in [L (1 - r), L (1 + r)] (L: ``t``'s)
    as vLLM's serving benchmark draws them (``--random-range-ratio``); else ``t``'s."""
    extra = math.ceil(requests * WARMUP_FRACTION)
    total = requests + 2 * extra
    sim = _Sim(step, t, max_batch, rate, None, paging)
    rng = random.Random(seed)
    window = max(t.gen_len * step(1.0, 0.0), 1 / rate)  # a request's decode on an idle replica, one arrival at least
    sim.gaps = stratified_gaps(rate, total, window, rng)[::-1]  # popped from the end
    if lengths:
        sim.lengths = rng.choices(lengths, k=total)
    elif range_ratio:
        (p0, p1), (g0, g1) = (spread(n, range_ratio) for n in (t.prompt_len, t.gen_len))
        sim.lengths = [(rng.randint(p0, p1), rng.randint(g0, g1)) for _ in range(total)]
    sim.run(total, seed)
    return sorted(sim.done)[extra : extra + requests]


def stratified_gaps(rate: float, n: int, window_s: float, rng: random.Random) -> list[float]:
    """The times between n Poisson arrivals at ``rate``, in order, stratified by window: the arrivals
    of each window of ``window_s`` seconds are a Poisson count of mean rate x window_s placed uniformly
    in it (which is a Poisson process there), the windows' counts drawn by Latin hypercube sampling
    (McKay, Beckman and Conover 1979): the i-th of a shuffled 0..m-1 puts window's count at the
    quantile (i + u) / m of the Poisson law, so each count is Poisson, as independent draws, but the
    m windows together cover the law evenly: no seed draws too many crowded windows (or too few).
    A tail latency is set by how many windows are crowded (a request's TPOT by the arrivals over its
    decode), so this is what keeps p99 steady from seed to seed: with independent gaps, p99 TPOT
    at 80% load varied by ~12% (standard deviation) at 10,000 requests; stratified gaps alone did
    not change that, only the count of arrivals over the whole run."""
    mean = rate * window_s
    m = max(1, math.ceil(n / mean)) if mean > 0 else 1
    strata = list(range(m))
    rng.shuffle(strata)
    counts = [_poisson_quantile((i + rng.random()) / m, mean) for i in strata]
    times: list[float] = []
    w = 0
    while len(times) < n:
        count = counts[w] if w < m else _poisson_quantile(rng.random(), mean)  # past the strata: independent
        times += sorted((w + rng.random()) * window_s for _ in range(count))
        w += 1
    times = times[:n]
    return [times[0], *(b - a for a, b in itertools.pairwise(times))]


def _poisson_quantile(u: float, mean: float) -> int:
    """The smallest k with P(X <= k) >= u, X Poisson of ``mean`` (the cumulative sum of its terms)."""
    if mean > 500:  # exp(-mean) underflows past ~745: the normal law, within a count of the Poisson's there
        return max(0, round(mean + math.sqrt(mean) * statistics.NormalDist().inv_cdf(min(max(u, 1e-12), 1 - 1e-12))))
    k, term = 0, math.exp(-mean)
    total = term
    while total < u and term > 0:
        k += 1
        term *= mean / k
        total += term
    return k


def spread(n: int, ratio: float) -> tuple[int, int]:
    """The lengths [int(n (1 - ratio)), int(n (1 + ratio))] (at least 1) a length n spreads over."""
    return max(1, int(n * (1 - ratio))), max(1, int(n * (1 + ratio)))


def nearest_rank(values: list[float], q: float) -> float:
    """The ceil(q N)-th smallest of ``values`` (nearest-rank percentile; q in (0, 1])."""
    return _ranked(sorted(values), q)


def _ranked(ordered: list[float], q: float) -> float:
    """``nearest_rank`` of values already in ascending order."""
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
        raise OptionError(PERCENTILES, " needs ", Option("requests_per_s"), " (a request rate to simulate)")
    if not 10 <= requests <= MAX_REQUESTS:
        raise OptionError(Option("requests"), f" {requests} must be between 10 and {MAX_REQUESTS}")
    if b.chosen is None:
        raise OptionError(PERCENTILES, ": no layout to simulate (", b.reason, ")")
    layout, state = b.layouts[b.chosen]
    t = b.traffic
    replica = layout_replica(req, layout, state.max_batch, t)
    paging = paging_of(replica.pool, replica.host_bytes_per_s)
    if not 0 <= range_ratio < 1 or math.isnan(range_ratio):
        raise OptionError(Option("random_range_ratio"), f" {range_ratio:g} must be at least 0 and below 1")
    longest = max((p + g for p, g in lengths), default=0)
    if range_ratio and not lengths:
        longest = spread(b.traffic.prompt_len, range_ratio)[1] + spread(b.traffic.gen_len, range_ratio)[1]
    if paging is not None and -(-longest // paging.block_tokens) > paging.blocks:
        raise InvalidConfigError(
            f"a request of {longest} tokens (prompt + output) does not fit the KV pool of "
            f"{paging.blocks * paging.block_tokens} tokens on its own"
        )
    rate, n = req.requests_per_s / layout.replicas, requests
    while True:
        done = simulate_requests(replica.step, t, replica.slots, rate, n, seed, paging, lengths, range_ratio)
        series = _latencies(done)
        ordered = [sorted(v) for v in series]
        widths = tuple(_half_widths(v, o, QUANTILES) for v, o in zip(series, ordered, strict=True))
        worst = max(max(w) for w in widths)
        most = min(MAX_GROWTH * requests, MAX_REQUESTS)
        if worst <= TARGET_HALF_WIDTH or n >= most or n > requests:
            break  # as sure as asked, or grown once: ``half_widths`` says how sure
        n = min(math.ceil(n * max(4.0, 1.5 * (worst / TARGET_HALF_WIDTH) ** 2)), most)
    ttft, tpot, e2e = (tuple(_ranked(o, q) for q in QUANTILES) for o in ordered)
    return Percentiles(requests, len(done), seed, ttft, tpot, e2e, widths)


def _latencies(done: list[Done]) -> tuple[list[float], list[float], list[float]]:
    """TTFT, TPOT and end-to-end of each request, by arrival (TPOT of the requests of 2 tokens or more)."""
    ttft = [first - arrival for arrival, _, first, _, _ in done]
    tpot = [(end - first) / (g - 1) for _, _, first, end, g in done if g > 1] or [0.0]
    e2e = [end - arrival for arrival, _, _, end, _ in done]
    return ttft, tpot, e2e


def half_width(values: list[float], q: float) -> float:
    """The 95% confidence half-width of the q-quantile of ``values`` (in arrival order), relative to it, by
    batch quantiles (Seila 1982; Asmussen and Glynn, Stochastic Simulation, IV.5): the q-quantiles of BATCHES
    runs of consecutive requests, t(0.975, BATCHES - 1) x their standard deviation / sqrt(BATCHES). Batches,
    not requests, because neighbours share their queue: their latencies are not independent. 0 with fewer
    than one request per batch or a quantile of 0."""
    return _half_widths(values, sorted(values), (q,))[0]


def _half_widths(values: list[float], ordered: list[float], qs: tuple[float, ...]) -> tuple[float, ...]:
    """``half_width`` of each q of ``qs``, ``ordered`` being ``values`` sorted: each batch sorted once."""
    size = len(values) // BATCHES
    if size < 1:
        return tuple(0.0 for _ in qs)
    batches = [sorted(values[i * size : (i + 1) * size]) for i in range(BATCHES)]
    out = []
    for q in qs:
        whole = _ranked(ordered, q)
        if whole <= 0:
            out.append(0.0)
            continue
        batch = [_ranked(b, q) for b in batches]
        out.append(T_975 * statistics.stdev(batch) / math.sqrt(BATCHES) / whole)
    return tuple(out)
