"""The scheduler of a continuously batching replica, step by step: what feeds it (``Traffic``)
and a small seeded simulation (``simulate``) of its two policies, "chunked" and "prefill-first"
(plan/serve/batching.py says what each does and how the results are used). Each step lasts what a
step function says (``StepFn``: running sequences, prefill tokens -> seconds); runs of identical
decode-only steps between events are taken at once, so a simulation of 3,000 requests takes tens
of milliseconds."""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from rooftop.errors import InvalidConfigError, shown

SCHEDULERS = ("chunked", "prefill-first")
#: vLLM V1's default max_num_batched_tokens for its API server on GPUs with at least 70 GiB, and
#: SGLang's default chunked_prefill_size on large GPUs
DEFAULT_TOKEN_BUDGET = 8192
#: requests a simulation follows (the first WARMUP_FRACTION of them are not measured)
SIM_REQUESTS = 3000
#: prefill steps a simulation may take (fewer requests when each prompt takes many chunks)
SIM_PREFILL_STEPS = 200_000
#: most steps a chunked prefill may split one prompt into
MAX_CHUNKS = 256
WARMUP_FRACTION = 0.1
SEED = 20240905
#: most clients of a closed loop (each simulated: 4 requests per client at least)
MAX_CONCURRENCY = 1 << 14

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
        if self.concurrency is not None and isinstance(self.concurrency, int) and self.concurrency > MAX_CONCURRENCY:
            raise InvalidConfigError(f"concurrency={self.concurrency} is above the {MAX_CONCURRENCY} simulated")
        for name in ("concurrency", "token_budget", "prompt_len", "gen_len"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise InvalidConfigError(f"{name.replace('_', '-')}={shown(v)} must be a positive integer")
        if self.scheduler not in SCHEDULERS:
            raise InvalidConfigError(f"scheduler {shown(self.scheduler)} is not one of {', '.join(SCHEDULERS)}")
        if self.scheduler == "chunked" and self.chunks > MAX_CHUNKS:
            raise InvalidConfigError(
                f"token-budget={self.token_budget} splits a {self.prompt_len}-token prompt into {self.chunks} steps, "
                f"more than {MAX_CHUNKS}; use a budget of at least {math.ceil(self.prompt_len / MAX_CHUNKS)}"
            )

    @property
    def chunks(self) -> int:
        """Steps a prompt's prefill takes on an idle replica (1 for prefill-first)."""
        return 1 if self.scheduler == "prefill-first" else math.ceil(self.prompt_len / self.token_budget)


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
        c, started = 0.0, 0
        for r in self.waiting:  # FCFS: the prompts already started are the first ones
            if r.start_s is None:
                break
            started += 1
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
        if self.clients is not None:  # spread over one request's life, not in lockstep from time 0
            life = self.step(0.0, self.t.prompt_len) + (self.t.gen_len - 1) * self.step(self.clients, 0.0)
            self.arrivals = [i * life / self.clients for i in range(self.clients)]
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
    requests: int | None = None,
    seed: int = SEED,
) -> SimResult:
    """Run the scheduler on ``requests`` requests arriving at ``rate`` per second (Poisson) or from
    ``clients`` closed-loop clients, each step lasting ``step(running, prefill tokens)``. By default
    SIM_REQUESTS, fewer when each prompt takes many chunks (SIM_PREFILL_STEPS), and at least 4 per
    client."""
    if requests is None:
        requests = max(400, min(SIM_REQUESTS, SIM_PREFILL_STEPS // t.chunks))
        if clients is not None:
            requests = max(requests, 4 * clients)
    sim = _Sim(step, t, max_batch, rate, clients)
    sim.run(requests, seed)
    return sim.result(requests)
