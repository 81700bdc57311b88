"""The scheduler of a continuously batching replica, step by step: a small seeded simulation
(``simulate``) of its two policies, "chunked" and "prefill-first", fed by a ``Traffic`` and
optionally a ``Paging`` pool (both in plan/serve/traffic.py; plan/serve/batching.py says what each
policy does and how the results are used). Each step lasts what a step function says (``StepFn``:
running sequences, prefill tokens -> seconds); runs of identical decode-only steps between events
are taken at once, so a simulation of 3,000 requests takes tens of milliseconds."""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from rooftop.plan.serve.traffic import Paging, Traffic

#: requests a simulation follows (the first WARMUP_FRACTION of them are not measured)
SIM_REQUESTS = 3000
#: prefill steps a simulation may take (fewer requests when each prompt takes many chunks)
SIM_PREFILL_STEPS = 200_000
WARMUP_FRACTION = 0.1
SEED = 20240905

#: (running sequences, prefill tokens) -> seconds of one step
StepFn = Callable[[float, float], float]
#: a request done: (arrival, start, first token, finish) in seconds, its output tokens
Done = tuple[float, float, float, float, int]


@dataclass(eq=False)
class _Request:
    arrival_s: float
    remaining: int  # tokens still to prefill in this round (the prompt, or all its tokens after a recompute)
    gen_left: int  # decode steps it still needs once this round's prefill ends
    start_s: float | None = None
    first_s: float | None = None
    cached: int = 0  # positions in its cache (when decoding: at decode step d0)
    d0: int = 0
    order: int = 0  # admission order: the newest is preempted first
    swapped: bool = False
    decoding: bool = False
    epoch: int = 0  # bumped each time it starts decoding: older heap entries are stale
    seeded: bool = False  # a closed loop's first request, started mid-way (not measured)
    gen_len: int = 0  # its output tokens (as Traffic's unless the lengths are drawn per request)

    @property
    def finish(self) -> int:
        return self.d0 + self.gen_left


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
    preemptions: int = 0
    blocks_used: float = 0.0  # mean fraction of the pool in use over the measured steps (0 without paging)
    residual_s: float = 0.0  # mean remaining time of the step under way at a random instant: sum d^2 / (2 sum d)


class _Sim:
    """The scheduler, step by step; runs of identical decode-only steps are taken at once."""

    def __init__(
        self, step: StepFn, t: Traffic, max_batch: int, rate: float | None, clients: int | None, paging: Paging | None
    ) -> None:
        self.step, self.t, self.max_batch = step, t, max_batch
        self.rate, self.clients = rate, clients
        self.paging = paging
        self.block = paging.block_tokens if paging else 1
        self.free = paging.blocks if paging else 0
        if paging and t.prefix_len and t.prefix_hit_rate:  # the cached prefix's blocks, held once, shared by the hits
            self.free -= self._blocks(t.prefix_len)
        self.residues = [0] * self.block  # decoding sequences by (cached - d0) mod block
        self.waiting: deque[_Request] = deque()
        self.decoding: list[tuple[int, int, int, _Request]] = []  # heap of (finish step, order, epoch, request)
        self.live = 0  # decoding requests (the heap may hold preempted ones)
        self.finish_sum = 0  # sum of the live decoding requests' finish steps
        self.now = 0.0
        self.dsteps = 0
        self.arrivals: list[float] = []  # heap of future arrival times
        self.gaps: list[float] = []  # the times between arrivals, drawn beforehand (popped from the end)
        self.lengths: list[tuple[int, int]] = []  # (prompt, output) tokens per request, likewise
        self.issued = self.admitted = self.preemptions = 0
        self.extra_s = 0.0  # swap time to add to the next step
        self.held = False  # this step preempted: it takes no prompt tokens
        self.done: list[Done] = []
        self.steps: list[
            tuple[float, float, int, float, int, int]
        ] = []  # (start, duration, decoding, prefill, steps, free)

    # ------------------------------------------------ blocks

    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.block)

    def _need(self, k: int) -> int:
        """Blocks the decoding sequences take over the next k decode steps."""
        if self.paging is None or not self.live:
            return 0
        b, d = self.block, self.dsteps
        if k == 1:
            return self.residues[-d % b]
        full, rest = divmod(k, b)
        top = -d % b  # step j takes the residue (top - j) mod b: a window of rest residues ending at top, wrapping
        lo = top - rest + 1
        res = self.residues
        part = sum(res[lo : top + 1]) if lo >= 0 else sum(res[: top + 1]) + sum(res[lo + b :])
        return full * self.live + part

    def _steps_within(self, kmax: int) -> int:
        """Most decode steps (<= kmax) whose growth the free blocks hold."""
        if self.paging is None or not self.live or self.paging.preemption == "none":
            return kmax
        b, d = self.block, self.dsteps
        k = min(kmax // b, self.free // self.live) * b
        used = k // b * self.live
        # fewer than b steps more (b more steps take another block per sequence): step k + j takes the
        # residue (top - j) mod b; the steps taken are those whose running total stays within the free blocks
        top, res = -(d + k) % b, self.residues
        grown = list(itertools.accumulate((res[top::-1] + res[:top:-1])[: kmax - k]))
        return k + bisect.bisect_right(grown, self.free - used)

    def _length(self, r: _Request) -> int:
        return r.cached + self.dsteps - r.d0

    def _reserve(self, extra: int) -> int:
        """Blocks held back for the output still to come (``Paging.reserve_fraction``)."""
        assert self.paging is not None
        f = self.paging.reserve_fraction
        if not f:
            return 0
        left = self.finish_sum - self.live * self.dsteps + extra
        left += sum(r.gen_left for r in self.waiting if r.start_s is not None)
        return math.ceil(f * left / self.block)

    def _start_decoding(self, r: _Request) -> None:
        r.d0, r.decoding, r.epoch = self.dsteps, True, r.epoch + 1
        heapq.heappush(self.decoding, (r.finish, r.order, r.epoch, r))
        self.live += 1
        self.finish_sum += r.finish
        if self.paging:
            self.residues[(r.cached - r.d0) % self.block] += 1

    def _stop_decoding(self, r: _Request) -> None:
        r.decoding = False
        self.live -= 1
        self.finish_sum -= r.finish
        if self.paging:
            self.residues[(r.cached - r.d0) % self.block] -= 1
            self.free += self._blocks(self._length(r))

    def _preempt(self) -> bool:
        """Give back the newest running request's blocks; False when none can be."""
        assert self.paging is not None
        running = [e[3] for e in self.decoding if e[3].decoding and e[2] == e[3].epoch]
        running += [r for r in self.waiting if r.start_s is not None and r.cached and not r.swapped]
        if not running:
            return False
        r = max(running, key=lambda q: q.order)
        self.preemptions += 1
        if r in self.waiting:  # a prompt part-prefilled: its chunks so far are lost
            self.free += self._blocks(r.cached)
            r.remaining, r.cached = r.remaining + r.cached, 0
            return True
        length = self._length(r)
        self._stop_decoding(r)
        r.gen_left = r.finish - self.dsteps
        if self.paging.preemption == "swap":
            r.cached, r.remaining, r.swapped = length, 0, True
        else:
            r.cached, r.remaining = 0, length
        self.waiting.appendleft(r)
        return True

    def _grow(self) -> None:
        """Free blocks for the next decode step, preempting the newest requests when the pool is short."""
        if self.paging is None:
            return
        need = self._need(1)
        if self.paging.preemption == "none":
            self.free -= need
            return
        before = self.preemptions
        while need > self.free and self._preempt():
            need = self._need(1)
        self.free -= need
        self.held = self.preemptions > before  # a step that preempts admits nothing (vLLM V1's scheduler)

    # ------------------------------------------------ arrivals, prefill, decode

    def _admit(self, rng: random.Random, total: int) -> None:
        if self.arrivals:
            if self.arrivals[0] > self.now:
                return  # nothing arrived yet (most steps)
        elif self.rate is None or self.issued >= total:
            return
        if self.rate is not None and not self.arrivals and self.issued < total:
            self.arrivals.append(self.now + self._gap(rng))  # the heap is empty: one entry, in place
        while self.arrivals and self.arrivals[0] <= self.now:
            at = heapq.heappop(self.arrivals)
            p, g = self.lengths.pop() if self.lengths else (self.t.prompt_len, self.t.gen_len)
            h = self.t.prefix_hit_rate
            if self.t.prefix_len and math.floor((self.issued + 1) * h) > math.floor(self.issued * h):
                p = max(1, p - self.t.prefix_len)  # a hit: the prefix's KV is cached (and its blocks shared)
            self.waiting.append(_Request(at, p, g - 1, gen_len=g))
            self.issued += 1
            if self.rate is not None and self.issued < total:
                heapq.heappush(self.arrivals, at + self._gap(rng))

    def _gap(self, rng: random.Random) -> float:
        assert self.rate is not None
        return self.gaps.pop() if self.gaps else rng.expovariate(self.rate)

    def _finish_prefill(self, r: _Request) -> None:
        if r.first_s is None:
            r.first_s = self.now
        if r.gen_left <= 0:
            if self.paging:
                self.free += self._blocks(r.cached)
            self._complete(r)
        else:
            self._start_decoding(r)

    def _complete(self, r: _Request) -> None:
        assert r.start_s is not None and r.first_s is not None
        if not r.seeded:
            self.done.append((r.arrival_s, r.start_s, r.first_s, self.now, r.gen_len))
        if self.clients is not None:
            heapq.heappush(self.arrivals, self.now)

    def _retire(self) -> None:
        heap, dsteps = self.decoding, self.dsteps
        while heap:
            finish, _, epoch, r = heap[0]
            stale = not r.decoding or epoch != r.epoch
            if not stale and finish > dsteps:
                break
            heapq.heappop(heap)
            if not stale:
                self._stop_decoding(r)
                self._complete(r)

    def _record(self, duration: float, n: int, c: float, k: int) -> None:
        self.steps.append((self.now, duration, n, c, k, self.free))
        self.now += duration

    def _decode(self, k: int, duration: float) -> None:
        """k decode steps of ``duration`` each, then the sequences that are done leave."""
        if self.paging:
            self.free -= self._need(k)
        self._record(duration * k, self.live, 0.0, k)
        self.dsteps += k
        self._retire()

    def _room(self, r: _Request, take: int) -> int:
        """Prompt tokens of ``r`` (at most ``take``) whose blocks the pool gives now."""
        if self.paging is None:
            return take
        held = self._blocks(r.cached)
        free = self.free - (self._reserve(r.gen_left + take) if r.start_s is None else 0)
        if self._blocks(r.cached + take) - held <= free:
            return take
        return max(0, (held + free) * self.block - r.cached)

    def _take(self, budget: float, whole: bool) -> float:
        """Prompt tokens the step takes from the queue, FCFS, within ``budget``, the free slots and blocks."""
        c, started = 0.0, 0
        for r in self.waiting:  # FCFS: the prompts already started are the first ones
            if r.start_s is None:
                break
            started += 1
        for r in self.waiting:
            if budget <= 0 or (whole and c and r.remaining > budget):
                break
            if r.swapped:  # back from host: its blocks, and the copy's time on this step
                assert self.paging is not None
                need = self._blocks(r.cached)
                if need > self.free:
                    break
                self.free -= need
                self.extra_s += 2 * need * self.paging.swap_s_per_block
                r.swapped = False
                continue
            if r.start_s is None and self.live + started >= self.max_batch:
                break
            want = r.remaining if whole else min(r.remaining, int(budget))
            take = self._room(r, want)
            if take <= 0 or (whole and take < want):
                break
            if r.start_s is None:
                r.start_s, started = self.now, started + 1
                r.order, self.admitted = self.admitted, self.admitted + 1
            if self.paging:
                self.free -= self._blocks(r.cached + take) - self._blocks(r.cached)
            r.cached += take
            r.remaining -= take
            budget -= take
            c += take
        return c

    def run(self, total: int, seed: int) -> None:
        rng = random.Random(seed)
        if self.clients is not None:
            self._seed_clients()
        done, admit, arrivals = self.done, self._admit, self.arrivals
        step = self._chunked_step if self.t.scheduler == "chunked" else self._prefill_first_step
        while len(done) < total:
            if not arrivals or arrivals[0] <= self.now:  # most steps: nothing has arrived since the last one
                admit(rng, total)
            step()

    def _seed_clients(self) -> None:
        """Start a closed loop in its mixed steady state: client i's first request already decoding,
        i (G - 1) / N of its steps done, so one request ends every (G - 1) / N steps, as many
        clients spread over their requests' lives do. The pattern is counted in steps, not seconds,
        so a faster chip runs the same pattern faster instead of locking into another phase (bursts
        of clients that end together and prefill together). Those first requests are not measured.
        Clients beyond the slots and the pool (and every client when G is 1) arrive at time 0."""
        p, g = self.t.prompt_len, self.t.gen_len
        seeded = 0
        for i in range(self.clients or 0):
            done = i * (g - 1) // (self.clients or 1)
            need = self._blocks(p + done) if self.paging else 0
            if g == 1 or seeded >= self.max_batch or need > self.free - self._need(1):
                self.arrivals.append(0.0)
                continue
            r = _Request(0.0, 0, g - 1 - done, 0.0, 0.0, p + done, seeded=True)
            r.order, self.admitted, seeded = self.admitted, self.admitted + 1, seeded + 1
            self.free -= need
            self._start_decoding(r)

    def _idle(self) -> bool:
        if self.live:
            return False
        self.now = max(self.now, self.arrivals[0]) if self.arrivals else self.now
        return True

    def _chunked_step(self) -> None:
        self.held = False
        if self.live and self.paging is not None:
            self._grow()
        n = self.live
        c = self._take(self.t.token_budget - n, whole=False) if self.waiting and not self.held else 0.0
        if not c and not self.extra_s and self._idle():
            return
        if not c and not self.extra_s:  # decode only until the next arrival, the next sequence done, the pool full
            d = self.step(n, 0.0)
            if self.paging:
                self.free += self._need(1)  # _grow took the first step's blocks; _decode takes the run's
            self._decode(self._run_length(d), d)
            return
        d = self.step(n, c) + self.extra_s
        self.extra_s = 0.0
        self._record(d, n, c, 1)
        if n:
            self.dsteps += 1
        self._end_step()

    def _prefill_first_step(self) -> None:
        c = self._take(self.t.token_budget, whole=True) if self.waiting else 0.0
        if c or self.extra_s:
            d = (self.step(0, c) if c else 0.0) + self.extra_s
            self.extra_s = 0.0
            self._record(d, 0, c, 1)
            self._end_step()
        elif not self._idle():
            self._grow()
            n = self.live
            if not n:
                return
            d = self.step(n, 0.0)
            self.free += self._need(1)
            self._decode(self._run_length(d), d)

    def _run_length(self, d: float) -> int:
        self._retire()
        k = self.decoding[0][0] - self.dsteps if self.decoding else 1
        if self.arrivals:
            k = min(k, max(1, math.ceil((self.arrivals[0] - self.now) / d)))
        return max(1, self._steps_within(max(1, k)))

    def _end_step(self) -> None:
        self._retire()
        while self.waiting and self.waiting[0].remaining == 0 and not self.waiting[0].swapped:
            self._finish_prefill(self.waiting.popleft())

    def measured(self, total: int) -> list[Done]:
        """(arrival, start, first token, finish) of the requests measured: by arrival, the first
        WARMUP_FRACTION left out (they found the replica empty, not in its steady state)."""
        return sorted(self.done)[int(total * WARMUP_FRACTION) :]

    def result(self, total: int) -> SimResult:
        done = self.measured(total)
        lo, hi = done[0][0], max(d[0] for d in done)
        g = self.t.gen_len
        span = [s for s in self.steps if lo <= s[0] < hi]
        busy = sum(s[1] for s in span) or 1.0
        mean = len(done) and 1 / len(done)
        pool = self.paging.blocks if self.paging and self.paging.blocks else 0
        used = sum((pool - s[5]) * s[1] for s in span) / busy / pool if pool else 0.0
        return SimResult(
            sum((d[3] - d[2]) / (g - 1) for d in done) * mean if g > 1 else 0.0,
            sum(d[2] - d[0] for d in done) * mean,
            sum(d[1] - d[0] for d in done) * mean,
            sum(s[3] for s in span) / max(1, sum(s[4] for s in span)),
            sum(s[2] * s[1] for s in span) / busy,
            len(done) / (max(d[3] for d in done) - lo) if self.clients is not None else (len(done) - 1) / (hi - lo),
            len(done),
            self.preemptions,
            used,
            sum(st[1] ** 2 / st[4] for st in span) / (2 * busy),
        )


def simulate(
    step: StepFn,
    t: Traffic,
    max_batch: int,
    rate: float | None = None,
    clients: int | None = None,
    requests: int | None = None,
    seed: int = SEED,
    paging: Paging | None = None,
) -> SimResult:
    """Run the scheduler on ``requests`` requests arriving at ``rate`` per second (Poisson) or from
    ``clients`` closed-loop clients, each step lasting ``step(running, prefill tokens)``. By default
    SIM_REQUESTS, fewer when each prompt takes many chunks (SIM_PREFILL_STEPS), and at least 4 per
    client."""
    if requests is None:
        requests = max(400, min(SIM_REQUESTS, SIM_PREFILL_STEPS // t.chunks))
        if clients is not None:
            requests = max(requests, 4 * clients)
    sim = _Sim(step, t, max_batch, rate, clients, paging)
    sim.run(requests, seed)
    return sim.result(requests)
