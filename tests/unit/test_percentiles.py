"""Latency percentiles of the request-by-request simulation (plan/serve/percentiles.py,
plan/serve/scheduler.simulate_requests): nearest-rank percentiles, stratified Poisson gaps, a
hand-derived idle replica, and p50/p90/p99 stable within 5% across 3 seeds at 10,000 requests."""

from __future__ import annotations

import math
import random

import pytest

from rooftop.cli.main import build_parser
from rooftop.cli.serve import request_from_args
from rooftop.plan.serve.percentiles import latency_percentiles, nearest_rank, simulate_requests, stratified_gaps
from rooftop.plan.serve.scheduler import Traffic
from rooftop.plan.serve.sweep import plan_serving


def test_nearest_rank_of_1_to_100() -> None:
    values = [float(v) for v in range(100, 0, -1)]
    assert nearest_rank(values, 0.5) == 50.0  # ceil(0.5 x 100) = 50th smallest
    assert nearest_rank(values, 0.9) == 90.0
    assert nearest_rank(values, 0.99) == 99.0
    assert nearest_rank([7.0], 0.99) == 7.0


def test_stratified_gaps_cover_each_stratum_once() -> None:
    rate, n = 4.0, 1000
    gaps = stratified_gaps(rate, n, random.Random(1))
    # the exponential CDF 1 - exp(-rate g) of the gaps falls once in each [i / n, (i + 1) / n)
    strata = sorted(math.floor(n * -math.expm1(-rate * g)) for g in gaps)
    assert strata == list(range(n))
    # mean 1 / rate = 0.25 s: stratified, within 1% (independent draws: ~3% standard deviation at n = 1000)
    assert sum(gaps) / n == pytest.approx(1 / rate, rel=0.01)


def test_idle_replica_latencies_by_hand() -> None:
    """Every step 10 ms; one request every ~1000 s: no queue, so TTFT = one prefill step = 10 ms,
    TPOT = 10 ms, end-to-end = 1 prefill step + (G - 1) decode steps = 8 x 10 ms."""
    t = Traffic(prompt_len=512, gen_len=8, requests_per_s=1e-3)
    done = simulate_requests(lambda n, c: 0.01, t, max_batch=4, rate=1e-3, requests=50, seed=3)
    assert len(done) == 50
    for arrival, _, first, end, g in done:
        assert g == 8
        assert first - arrival == pytest.approx(0.01)
        assert (end - first) / (8 - 1) == pytest.approx(0.01)
        assert end - arrival == pytest.approx(8 * 0.01)


def test_percentiles_stable_across_seeds() -> None:
    """p50/p90/p99 of TTFT, TPOT and end-to-end at 10,000 requests, half the layout's capacity:
    each of 3 seeds within 5% of their mean."""
    argv = "serve llama-3-8b --chip h100 --chips 1 --prompt-len 2048 --gen-len 256 --requests-per-s 5".split()
    plan = plan_serving(request_from_args(build_parser().parse_args(argv)))
    assert plan.batching is not None and plan.batching.chosen is not None
    runs = [latency_percentiles(plan, 10_000, seed) for seed in (1, 2, 3)]
    for p in runs:
        assert p.measured == 10_000
        assert p.ttft_s[0] <= p.ttft_s[1] <= p.ttft_s[2] and p.e2e_s[0] <= p.e2e_s[2]
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        for i in range(3):
            v = [getattr(p, name)[i] for p in runs]
            mean = sum(v) / 3
            assert max(abs(x - mean) for x in v) <= 0.05 * mean, (name, i, v)


def test_lengths_drawn_per_request_by_hand() -> None:
    """Every step 10 ms, no queue; outputs of 2 or 8 tokens drawn per request: end-to-end is
    2 x 10 ms or 8 x 10 ms, TPOT always 10 ms, and both lengths are drawn."""
    t = Traffic(prompt_len=100, gen_len=5, requests_per_s=1e-3)
    done = simulate_requests(lambda n, c: 0.01, t, 4, 1e-3, 200, 5, lengths=((100, 2), (100, 8)))
    e2e = sorted({round(end - arrival, 9) for arrival, _, _, end, _ in done})
    assert e2e == [2 * 0.01, 8 * 0.01]
    assert {g for *_, g in done} == {2, 8}
    assert all((end - first) / (g - 1) == pytest.approx(0.01) for _, _, first, end, g in done)


def test_constant_trace_is_the_fixed_lengths() -> None:
    """A trace whose every request is (P, G) gives the same requests as P and G themselves."""
    t = Traffic(prompt_len=300, gen_len=20, requests_per_s=40.0)

    def step(n: float, c: float) -> float:
        return 0.002 + 1e-4 * n + 2e-6 * c

    fixed = simulate_requests(step, t, 64, 40.0, 500, 9)
    traced = simulate_requests(step, t, 64, 40.0, 500, 9, lengths=((300, 20),))
    assert fixed == traced


def test_random_range_ratio_by_hand() -> None:
    """Lengths spread by r = 0.5 around P = 100, G = 10 (vLLM's random dataset): prompts in
    [50, 150], outputs in [5, 15], each integer as likely; on an idle replica with 10 ms steps each
    request's end-to-end is G x 10 ms."""
    t = Traffic(prompt_len=100, gen_len=10, requests_per_s=1e-3)
    done = simulate_requests(lambda n, c: 0.01, t, 4, 1e-3, 2000, 11, range_ratio=0.5)
    gens = [g for *_, g in done]
    assert set(gens) == set(range(5, 16))
    assert sum(gens) / len(gens) == pytest.approx(10, rel=0.05)
    assert all(end - arrival == pytest.approx(g * 0.01) for arrival, _, _, end, g in done)
