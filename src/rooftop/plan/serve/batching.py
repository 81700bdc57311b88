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
  seeded simulation of the scheduler at the step level (``simulate``): Poisson arrivals (or N
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
import heapq
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from rooftop.cost.efficiency import Efficiency
from rooftop.errors import InvalidConfigError, shown
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh
from rooftop.model.config import Dtypes, TransformerConfig
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.phase import mixed_step

SCHEDULERS = ("chunked", "prefill-first")
#: vLLM V1's default max_num_batched_tokens for its API server on GPUs with at least 70 GiB, and
#: SGLang's default chunked_prefill_size on large GPUs
DEFAULT_TOKEN_BUDGET = 8192
#: requests a simulation follows (the first WARMUP_FRACTION of them are not measured)
SIM_REQUESTS = 3000
WARMUP_FRACTION = 0.1
SEED = 20240905

#: (running sequences, prefill tokens) -> seconds of one step
StepFn = Callable[[float, float], float]


@dataclass(frozen=True)
class Traffic:
    """What feeds one serving deployment: a request rate over the slice (``requests_per_s``) or a
    number of clients each with one request in flight (``concurrency``), the lengths, the policy."""

    prompt_len: int
    gen_len: int
    requests_per_s: float | None = None
    concurrency: int | None = None
    scheduler: str = "chunked"
    token_budget: int = DEFAULT_TOKEN_BUDGET

    def __post_init__(self) -> None:
        if (self.requests_per_s is None) == (self.concurrency is None):
            raise InvalidConfigError("continuous batching needs a request rate or a concurrency (one of the two)")
        if self.requests_per_s is not None and not (0 < self.requests_per_s < math.inf):
            raise InvalidConfigError(f"requests-per-s={shown(self.requests_per_s)} must be a finite number > 0")
        for name in ("concurrency", "token_budget", "prompt_len", "gen_len"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise InvalidConfigError(f"{name.replace('_', '-')}={shown(v)} must be a positive integer")
        if self.scheduler not in SCHEDULERS:
            raise InvalidConfigError(f"scheduler {shown(self.scheduler)} is not one of {', '.join(SCHEDULERS)}")


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


# ---------------------------------------------------------------- the simulation


@dataclass
class _Request:
    arrival_s: float
    remaining: int
    start_s: float | None = None
    first_s: float = 0.0


@dataclass(frozen=True)
class SimResult:
    """Means over the measured requests (and over the steps while they ran)."""

    tpot_s: float
    ttft_s: float
    queue_s: float
    prefill_tokens_per_step: float
    decode_batch: float
    requests_per_s: float
    requests: int


class _Sim:
    """The scheduler, step by step; runs of identical decode-only steps are taken at once."""

    def __init__(self, step: StepFn, t: Traffic, max_batch: int, rate: float | None, clients: int | None) -> None:
        self.step, self.t, self.max_batch = step, t, max_batch
        self.rate, self.clients = rate, clients
        self.waiting: deque[_Request] = deque()
        self.decoding: list[tuple[int, float, float, float]] = []  # (last decode step, first token, arrival, start)
        self.now = 0.0
        self.dsteps = 0
        self.arrivals: list[float] = []  # heap of future arrival times
        self.issued = 0
        self.done: list[tuple[float, float, float, float]] = []  # (arrival, start, first token, finish)
        self.steps: list[tuple[float, float, int, float, int]] = []  # (start, duration, decoding, prefill, steps)

    def _admit(self, rng: random.Random, total: int) -> None:
        if self.rate is not None and not self.arrivals and self.issued < total:
            self.arrivals = [self.now + rng.expovariate(self.rate)]
        while self.arrivals and self.arrivals[0] <= self.now:
            at = heapq.heappop(self.arrivals)
            self.waiting.append(_Request(at, self.t.prompt_len))
            self.issued += 1
            if self.rate is not None and self.issued < total:
                heapq.heappush(self.arrivals, at + rng.expovariate(self.rate))

    def _finish_prefill(self, r: _Request) -> None:
        r.first_s = self.now
        assert r.start_s is not None
        if self.t.gen_len == 1:
            self._complete(r.arrival_s, r.start_s, r.first_s)
        else:
            heapq.heappush(self.decoding, (self.dsteps + self.t.gen_len - 1, r.first_s, r.arrival_s, r.start_s))

    def _complete(self, arrival: float, start: float, first: float) -> None:
        self.done.append((arrival, start, first, self.now))
        if self.clients is not None:
            heapq.heappush(self.arrivals, self.now)

    def _decode(self, k: int, duration: float) -> None:
        """k decode steps of ``duration`` each, then the sequences that are done leave."""
        self.steps.append((self.now, duration * k, len(self.decoding), 0.0, k))
        self.now += duration * k
        self.dsteps += k
        while self.decoding and self.decoding[0][0] <= self.dsteps:
            _, first, arrival, start = heapq.heappop(self.decoding)
            self._complete(arrival, start, first)

    def _take(self, budget: float, whole: bool) -> float:
        """Prompt tokens the step takes from the queue, FCFS, within ``budget`` and the free slots."""
        c, started = 0.0, sum(1 for r in self.waiting if r.start_s is not None)
        for r in self.waiting:
            if budget <= 0 or (whole and c and r.remaining > budget):
                break
            if r.start_s is None:
                if len(self.decoding) + started >= self.max_batch:
                    break
                r.start_s, started = self.now, started + 1
            take = r.remaining if whole else min(r.remaining, int(budget))
            r.remaining -= take
            budget -= take
            c += take
        return c

    def run(self, total: int, seed: int) -> None:
        rng = random.Random(seed)
        if self.clients is not None:
            self.arrivals = [0.0] * self.clients
        while len(self.done) < total:
            self._admit(rng, total)
            if self.t.scheduler == "chunked":
                self._chunked_step()
            else:
                self._prefill_first_step()

    def _idle(self) -> bool:
        if self.decoding:
            return False
        self.now = max(self.now, self.arrivals[0]) if self.arrivals else self.now
        return True

    def _chunked_step(self) -> None:
        n = len(self.decoding)
        c = self._take(self.t.token_budget - n, whole=False) if self.waiting else 0.0
        if not c and self._idle():
            return
        if not c:  # decode only until the next arrival or the next sequence done
            d = self.step(n, 0.0)
            self._decode(self._run_length(d), d)
            return
        d = self.step(n, c)
        self.steps.append((self.now, d, n, c, 1))
        self.now += d
        if n:
            self.dsteps += 1
        self._end_step()

    def _prefill_first_step(self) -> None:
        n = len(self.decoding)
        c = self._take(self.t.token_budget, whole=True) if self.waiting else 0.0
        if c:
            d = self.step(0, c)
            self.steps.append((self.now, d, 0, c, 1))
            self.now += d
            self._end_step()
        elif not self._idle():
            d = self.step(n, 0.0)
            self._decode(self._run_length(d), d)

    def _run_length(self, d: float) -> int:
        k = self.decoding[0][0] - self.dsteps
        if self.arrivals:
            k = min(k, max(1, math.ceil((self.arrivals[0] - self.now) / d)))
        return max(1, k)

    def _end_step(self) -> None:
        while self.decoding and self.decoding[0][0] <= self.dsteps:
            _, first, arrival, start = heapq.heappop(self.decoding)
            self._complete(arrival, start, first)
        while self.waiting and self.waiting[0].remaining == 0:
            self._finish_prefill(self.waiting.popleft())

    def result(self, total: int) -> SimResult:
        done = sorted(self.done)[int(total * WARMUP_FRACTION) :]
        lo, hi = done[0][0], max(d[0] for d in done)
        g = self.t.gen_len
        span = [s for s in self.steps if lo <= s[0] < hi]
        busy = sum(s[1] for s in span) or 1.0
        mean = len(done) and 1 / len(done)
        return SimResult(
            sum((d[3] - d[2]) / (g - 1) for d in done) * mean if g > 1 else 0.0,
            sum(d[2] - d[0] for d in done) * mean,
            sum(d[1] - d[0] for d in done) * mean,
            sum(s[3] for s in span) / max(1, sum(s[4] for s in span)),
            sum(s[2] * s[1] for s in span) / busy,
            len(done) / (max(d[3] for d in done) - lo) if self.clients is not None else (len(done) - 1) / (hi - lo),
            len(done),
        )


def simulate(
    step: StepFn,
    t: Traffic,
    max_batch: int,
    rate: float | None = None,
    clients: int | None = None,
    requests: int = SIM_REQUESTS,
    seed: int = SEED,
) -> SimResult:
    """Run the scheduler on ``requests`` requests arriving at ``rate`` per second (Poisson) or from
    ``clients`` closed-loop clients, each step lasting ``step(running, prefill tokens)``."""
    sim = _Sim(step, t, max_batch, rate, clients)
    sim.run(requests, seed)
    return sim.result(requests)


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
        load = f"{t.requests_per_s:.4g} requests/s, {r.requests_per_s / cap:.0%} of the {slice_cap:.4g} sustained"
    else:
        assert t.concurrency is not None  # Traffic holds one of the two
        clients = max(1, round(t.concurrency / replicas))
        r = simulate(step, t, max_batch, clients=clients)
        load = f"{clients} clients per replica, {r.requests_per_s * replicas:.4g} requests/s"
    served = r.requests_per_s * replicas
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
