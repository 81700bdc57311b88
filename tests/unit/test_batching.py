"""Continuous batching (plan/serve/batching.py) against a discrete-event simulation of the same
scheduler written here, separately: one event per step, every request an object, no shortcut
(batching.simulate takes runs of identical decode steps at once and keeps the running sequences
in a heap). Both draw their own Poisson arrivals (different seeds), so agreement is statistical."""

from __future__ import annotations

import math
import random

import pytest

from rooftop.cost.efficiency import default_efficiency
from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.workload import Dtypes
from rooftop.plan.serve import phase
from rooftop.plan.serve.batching import StepTable, capacity, idle_ttft, layout_step, steady_state
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.scheduler import simulate
from rooftop.plan.serve.traffic import Traffic
from rooftop.report.reasons import note_text


def toy_step(n: float, c: float) -> float:
    """A step shaped like a priced one: 10 ms of weights, 50 us per running sequence's cache, and
    compute-bound beyond 200 tokens at 10 us a token."""
    return 0.010 + 50e-6 * n + max(0.0, 10e-6 * (n + c) - 0.002)


def des(step, t: Traffic, max_batch: int, rate: float, requests: int, seed: int) -> tuple[float, float]:
    """(mean TPOT, mean TTFT): every step simulated, requests admitted FCFS at step boundaries."""
    rng = random.Random(seed)
    arrivals, at = [], 0.0
    for _ in range(requests):
        at += rng.expovariate(rate)
        arrivals.append(at)
    queue: list[dict] = []  # waiting or prefilling, in arrival order
    running: list[dict] = []  # decoding
    finished: list[dict] = []
    now, nxt = 0.0, 0
    while len(finished) < requests:
        while nxt < requests and arrivals[nxt] <= now:
            queue.append({"arrival": arrivals[nxt], "left": t.prompt_len, "started": False, "tokens": 0})
            nxt += 1
        if not queue and not running:
            now = arrivals[nxt]
            continue
        decode = running if t.scheduler == "chunked" or not queue else []
        budget = t.token_budget - len(decode) if t.scheduler == "chunked" else t.token_budget
        taken = 0
        for r in queue:
            if budget <= 0 or (t.scheduler == "prefill-first" and taken and r["left"] > budget):
                break
            if not r["started"]:
                if len(running) + sum(q["started"] for q in queue) >= max_batch:
                    break
                r["started"] = True
            take = r["left"] if t.scheduler == "prefill-first" else min(r["left"], budget)
            r["left"] -= take
            budget -= take
            taken += take
        if t.scheduler == "prefill-first" and taken:
            decode = []
        now += step(len(decode), taken)
        for r in decode:
            r["tokens"] += 1
            if r["tokens"] == t.gen_len:
                r["end"] = now
        finished += [r for r in decode if "end" in r]
        running = [r for r in running if "end" not in r]
        while queue and queue[0]["left"] == 0:
            r = queue.pop(0)
            r["first"], r["tokens"] = now, 1
            running.append(r)
    done = sorted(finished, key=lambda r: r["arrival"])[requests // 10 :]
    tpot = sum((r["end"] - r["first"]) / (t.gen_len - 1) for r in done) / len(done)
    ttft = sum(r["first"] - r["arrival"] for r in done) / len(done)
    return tpot, ttft


@pytest.mark.parametrize("scheduler", ["chunked", "prefill-first"])
@pytest.mark.parametrize("load", [0.1, 0.3, 0.5, 0.7])
def test_steady_state_matches_a_discrete_event_simulation(scheduler: str, load: float) -> None:
    t = Traffic(512, 48, requests_per_s=1.0, scheduler=scheduler, token_budget=1024)
    rate = load * capacity(toy_step, t, 256)
    model = simulate(toy_step, t, 256, rate=rate, requests=4000)
    tpot, ttft = des(toy_step, t, 256, rate, requests=8000, seed=7)
    assert model.tpot_s == pytest.approx(tpot, rel=0.05)
    assert model.ttft_s == pytest.approx(ttft, rel=0.05)
    assert model.requests_per_s == pytest.approx(rate, rel=0.05)


def test_fluid_balance_decides_saturation() -> None:
    """Chunked, budget 1024, P = 512, G = 48: at capacity the step holds 1024 tokens, so
    rate x (47 + 512) x step(47 rate t, 512 rate t) = 1024 with t the step: the bisection's rate
    satisfies it, and the fluid step there is the toy step of those loads."""
    t = Traffic(512, 48, requests_per_s=1.0, token_budget=1024)
    cap = capacity(toy_step, t, 10_000)
    tau = 1024 / (cap * (47 + 512))
    assert toy_step(47 * cap * tau, 512 * cap * tau) == pytest.approx(tau, rel=0.01)
    over = steady_state(toy_step, Traffic(512, 48, requests_per_s=1.05 * cap, token_budget=1024), 10_000)
    assert over.saturated and over.ttft_s is None and over.tpot_s is None and "without bound" in note_text(over.reason)
    under = steady_state(toy_step, Traffic(512, 48, requests_per_s=0.5 * cap, token_budget=1024), 10_000)
    assert not under.saturated and under.ttft_s is not None and under.ttft_s > under.ttft_idle_s


def test_no_capacity_when_the_memory_holds_no_sequence() -> None:
    # a KV pool of fewer tokens than one request holds: no running sequence, nothing sustained (not a crash)
    for scheduler in ("chunked", "prefill-first"):
        t = Traffic(512, 48, requests_per_s=1.0, token_budget=1024, scheduler=scheduler)
        assert capacity(toy_step, t, 0) == 0.0
        assert capacity(StepTable(toy_step, 8, 1024), t, 0) == 0.0


def test_ttft_grows_with_load_and_idle_ttft_is_the_lower_limit() -> None:
    t = Traffic(512, 48, requests_per_s=1.0, token_budget=1024)
    cap = capacity(toy_step, t, 256)
    ttfts = [simulate(toy_step, t, 256, rate=f * cap).ttft_s for f in (0.01, 0.4, 0.8)]
    assert ttfts[0] < ttfts[1] < ttfts[2]
    # idle: one 512-token step, 10 ms + 512 x 10 us - 2 ms; at 1% load a prompt waits at most for
    # part of a decode step already under way (half of one on average when the replica is busy)
    idle = idle_ttft(toy_step, t)
    assert idle == pytest.approx(0.010 + 512 * 10e-6 - 0.002)
    assert idle < ttfts[0] < idle + toy_step(1, 0) / 2


def test_chunked_idle_ttft_splits_the_prompt_over_the_budget() -> None:
    t = Traffic(2500, 8, requests_per_s=1.0, token_budget=1024)
    assert idle_ttft(toy_step, t) == pytest.approx(2 * toy_step(0, 1024) + toy_step(0, 452))


def test_closed_loop_little_law() -> None:
    """N clients: N = throughput x (TTFT + (G - 1) x TPOT) (Little's law over a request's life)."""
    t = Traffic(512, 48, concurrency=32, token_budget=1024)
    r = simulate(toy_step, t, 256, clients=32)
    assert 32 == pytest.approx(r.requests_per_s * (r.ttft_s + 47 * r.tpot_s), rel=0.03)


def test_traffic_is_validated() -> None:
    with pytest.raises(InvalidConfigError, match="one of the two"):
        Traffic(10, 10)
    with pytest.raises(InvalidConfigError, match="one of the two"):
        Traffic(10, 10, requests_per_s=1.0, concurrency=2)
    with pytest.raises(InvalidConfigError, match="scheduler"):
        Traffic(10, 10, requests_per_s=1.0, scheduler="fifo")
    with pytest.raises(InvalidConfigError, match="token-budget"):
        Traffic(10, 10, requests_per_s=1.0, token_budget=0)


def test_step_table_is_exact_on_its_grid_and_linear_between() -> None:
    table = StepTable(lambda n, c: 1.0 + 2.0 * n + 3.0 * c, 100, 800.0)
    assert table.ns == [0, 1, 2, 4, 8, 16, 32, 64, 128]  # powers of two up to the first at or above 100
    assert table(3, 150.0) == pytest.approx(1.0 + 2.0 * 3 + 3.0 * 150)
    assert table(100, 800.0) == pytest.approx(1.0 + 200 + 2400)


# ---------------------------------------------------------------- the priced mixed step


@pytest.fixture(scope="module")
def llama70b():
    chip = get_chip("h100")
    layout = ServingLayout(tp=8)
    mesh = make_mesh(parse_topology(chip, "8"), layout.mesh_axes())
    return get_model("llama-2-70b"), chip, mesh, layout, Dtypes("fp8", "fp8", "fp8"), default_efficiency("serving")


def test_mixed_step_reduces_to_decode_and_prefill(llama70b) -> None:
    cfg, chip, mesh, layout, dt, eff = llama70b
    dec = phase.decode_step(cfg, chip, mesh, layout, 64, 2048, dt, eff)
    assert phase.mixed_step(cfg, chip, mesh, layout, 64, 2048, 0, 1024, dt, eff).time_s == pytest.approx(dec.time_s)
    pre = phase.prefill(cfg, chip, mesh, layout, 1, 1024, dt, eff)
    assert phase.mixed_step(cfg, chip, mesh, layout, 0, 2048, 1024, 1024, dt, eff).time_s == pytest.approx(pre.time_s)


def test_mixed_step_reads_the_weights_once(llama70b) -> None:
    """Decode of 64 plus one prompt in one step costs less than the two apart, by about the
    weights' read time (both memory-bound parts read the same weights)."""
    cfg, chip, mesh, layout, dt, eff = llama70b
    dec = phase.decode_step(cfg, chip, mesh, layout, 64, 2048, dt, eff)
    pre = phase.prefill(cfg, chip, mesh, layout, 1, 128, dt, eff)
    mixed = phase.mixed_step(cfg, chip, mesh, layout, 64, 2048, 128, 128, dt, eff)
    assert mixed.weights_bytes == dec.weights_bytes
    assert mixed.time_s < dec.time_s + pre.time_s - 0.5 * dec.weights_s
    assert mixed.time_s > dec.time_s


def test_priced_steady_state_is_consistent(llama70b) -> None:
    """Llama-2-70B FP8 on 8 H100 at 5 requests/s of 2048 + 256 tokens: below capacity; TPOT at
    least the decode step of the mean running batch alone; TTFT at least the idle one."""
    cfg, chip, mesh, layout, dt, eff = llama70b
    t = Traffic(2048, 256, requests_per_s=5.0)
    step = layout_step(cfg, chip, mesh, layout, dt, eff, t, 256)
    s = steady_state(step, t, 256)
    assert not s.saturated and s.capacity_requests_per_s > 5
    assert s.tpot_s is not None and s.ttft_s is not None and s.decode_batch is not None
    assert s.tpot_s >= step(s.decode_batch, 0) * 0.99
    assert s.ttft_s > s.ttft_idle_s
    assert s.requests_per_s == pytest.approx(5.0, rel=0.05)
    assert s.tokens_per_s == pytest.approx(5.0 * 256, rel=0.05)
    assert math.isfinite(s.capacity_requests_per_s)


def test_chunks_are_bounded() -> None:
    assert Traffic(2048, 8, requests_per_s=1.0, token_budget=8).chunks == 256
    assert Traffic(2048, 8, requests_per_s=1.0, token_budget=1, scheduler="prefill-first").chunks == 1
    with pytest.raises(InvalidConfigError, match="use a budget of at least 8"):
        Traffic(2048, 8, requests_per_s=1.0, token_budget=7)


def test_concurrency_below_the_replicas_serves_only_its_clients() -> None:
    """One client over 8 replicas: one request in flight, so the slice serves one client's rate."""
    one = steady_state(toy_step, Traffic(512, 48, concurrency=1, token_budget=1024), 256, replicas=1)
    spread = steady_state(toy_step, Traffic(512, 48, concurrency=1, token_budget=1024), 256, replicas=8)
    assert spread.requests_per_s == pytest.approx(one.requests_per_s)
    assert one.requests_per_s is not None and one.ttft_s is not None and one.tpot_s is not None
    assert one.requests_per_s == pytest.approx(1 / (one.ttft_s + 47 * one.tpot_s), rel=0.01)


def test_prefix_cache_hits_in_the_simulation_by_hand() -> None:
    """Steps of 10 ms + 10 us per prompt token, one output token (a request ends with its prefill step), one
    request every ~1000 s (an idle replica): a miss prefills its 1000 tokens, 10 ms + 10 ms = 20 ms; a hit on a
    600-token prefix only the other 400, 10 ms + 4 ms = 14 ms. Half the requests hit (every other one), so the
    mean TTFT is (20 + 14) / 2 = 17 ms and the prompt tokens per step (1000 + 400) / 2 = 700."""

    def step(n: float, c: float) -> float:
        return 0.010 + 10e-6 * c

    plain = Traffic(1000, 1, requests_per_s=1e-3)
    half = Traffic(1000, 1, requests_per_s=1e-3, prefix_len=600, prefix_hit_rate=0.5)
    every = Traffic(1000, 1, requests_per_s=1e-3, prefix_len=600, prefix_hit_rate=1.0)
    assert simulate(step, plain, 8, rate=1e-3, requests=400).ttft_s == pytest.approx(0.020)
    r = simulate(step, half, 8, rate=1e-3, requests=400)
    assert r.ttft_s == pytest.approx((0.020 + 0.014) / 2)
    # the steps between the first and the last measured arrival: 359 of them, one more of one kind (+-300 / 359)
    assert r.prefill_tokens_per_step == pytest.approx(700, abs=300 / 359 + 1e-9)
    assert simulate(step, every, 8, rate=1e-3, requests=400).ttft_s == pytest.approx(0.014)
    assert idle_ttft(step, every) == pytest.approx(0.014) and idle_ttft(step, half) == pytest.approx(0.020)
    # the fluid balance prefills 1000 - 0.5 x 600 = 700 tokens a request: prefill-first at budget 8192 keeps up
    # while rate x 700 x step(0, 8192) / 8192 < 1, so its capacity is above the plain one's
    assert capacity(step, half, 256) > capacity(step, plain, 256)
