"""Paged KV admission (plan/serve/paging.py, plan/serve/scheduler.py): the engine's block pool
from hand-derived figures, admission by the blocks in use (not the full length), growth and
preemption when the pool runs out, and the no-evict reservation."""

from __future__ import annotations

import json

import pytest

from rooftop.hardware.catalog import get_chip
from rooftop.model.catalog import get_model
from rooftop.model.workload import Dtypes
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.paging import get_engine, kv_pool
from rooftop.plan.serve.scheduler import SEED, _Sim, simulate
from rooftop.plan.serve.traffic import Paging, Traffic
from tests.conftest import run_cli

GIB = 1 << 30
#: the issue's command: llama-3.1-70b on 2 B200 in fp8, 1024 + 8192 tokens, 128 clients
C128 = (
    "serve llama-3.1-70b --chip b200 --chips 2 --prompt-len 1024 --gen-len 8192 --weight-dtype fp8 "
    "--activation-dtype fp8 --fix tp=2 --concurrency 128 --json"
).split()


def test_the_pool_is_carved_as_vllm_carves_it() -> None:
    """llama-3.1-70b (D 8192, F 28672, 64 heads, 8 KV heads of 128, 80 layers, vocabulary 128256) at
    tp 2 on a B200 (180 GiB), fp8 weights, bf16 cache, an 8192-token profiling pass."""
    cfg, chip = get_model("llama-3.1-70b"), get_chip("b200")
    pool = kv_pool(cfg, chip, ServingLayout(tp=2), Dtypes("fp8", "fp8", "bf16"), 8192, get_engine("generic"))
    layer = (8192 * 8192 * 2 + 8192 * 1024 * 2 + 3 * 8192 * 28672) / 2 + 2 * 8192  # sharded, norms replicated
    weights = 80 * layer + 2 * 128256 * 8192 / 2 + 8192  # 1 byte each; vocab-parallel tables; final norm
    assert pool.weights_bytes == weights == 35_277_512_704
    width = 2 * 8192 + (64 + 2 * 8) * 128 / 2 + 3 * 28672 / 2  # residual + normed, q/k/v, gate/up + activated
    activations = 8192 * width * 2 + 256 * 128256 / 2 * 4  # bf16; the sampler's fp32 logits of 256 rows
    assert pool.activations_bytes == activations
    expected_pool = 0.9 * 180 * GIB - weights - activations - 1 * GIB - 1 * GIB  # graphs, runtime
    assert pool.pool_bytes == pytest.approx(expected_pool)
    per_token = 2 * 80 * 8 * 128 * 2 / 2  # K and V, 80 layers, 8 heads of 128, bf16, over tp 2
    assert pool.bytes_per_token == per_token == 163_840
    assert pool.blocks == int(expected_pool // (16 * per_token)) == 51_650


def test_the_issue_command_keeps_128_in_flight_with_ttft_under_a_second() -> None:
    """Reserving prompt + output for every slot fits 826,400 / 9,216 = 89 sequences; by the blocks
    they hold (a sequence holds 1024 + 4096 tokens on average: 128 x 5,120 = 655,360 < 826,400) all
    128 run, and no request waits for a slot."""
    assert 51_650 * 16 // (1024 + 8192) == 89 and 128 * (1024 + 8192 // 2) < 51_650 * 16
    code, out, err = run_cli(*C128)
    assert code == 0, err
    layout = json.loads(out)["continuous_batching"]["layouts"][0]
    assert layout["kv_pool"]["blocks"] == 51_650
    assert layout["decode_batch"] > 127.5
    assert layout["ttft_s"] < 1.0 and layout["queue_s"] < 0.1
    assert layout["preemptions"] == 0


def test_no_evict_reservation_queues_what_the_pool_cannot_finish() -> None:
    """TensorRT-LLM's GUARANTEED_NO_EVICT holds prompt + output for each admitted request: 32-token
    blocks, 0.9 of the memory left free: about 26.5k blocks, 92 requests of 9,216 tokens."""
    code, out, err = run_cli(*C128, "--engine", "trtllm")
    assert code == 0, err
    layout = json.loads(out)["continuous_batching"]["layouts"][0]
    blocks = layout["kv_pool"]["blocks"]
    assert layout["kv_pool"]["block_tokens"] == 32 and layout["preemptions"] == 0
    assert layout["decode_batch"] <= blocks * 32 / (1024 + 8192) + 1
    assert layout["queue_s"] > 10


def _step(n: float, c: float) -> float:
    return 0.010 + 50e-6 * n + 10e-6 * c


def test_a_short_pool_preempts_and_still_serves_every_request() -> None:
    """100 blocks of 16 tokens hold 1,600 tokens: 32 clients of 32 + 64 tokens (96 each, 3,072 in
    all at the end) overflow it, so the newest sequences are preempted and recomputed; every
    request is still served, and the pool is never over-committed."""
    t = Traffic(32, 64, concurrency=32, token_budget=512)
    sim = _Sim(_step, t, 1000, None, 32, Paging(100, 16))
    sim.run(400, SEED)
    assert min(s[5] for s in sim.steps) >= 0  # free blocks never below 0
    paged = sim.result(400)
    assert paged.preemptions > 0 and paged.requests >= 400 - 40  # all but the warm-up measured
    assert 0.8 < paged.blocks_used <= 1.0
    assert paged.decode_batch < 1600 / 32  # fewer than the prompts alone would fill
    roomy = simulate(_step, t, 1000, clients=32, requests=400, paging=Paging(10_000, 16))
    assert roomy.preemptions == 0 and roomy.decode_batch > paged.decode_batch


def test_no_evict_never_preempts_and_holds_the_reservation() -> None:
    t = Traffic(32, 64, concurrency=32, token_budget=512)
    r = simulate(
        _step, t, 1000, clients=32, requests=400, paging=Paging(100, 16, reserve_fraction=1.0, preemption="none")
    )
    assert r.preemptions == 0
    assert r.decode_batch <= 100 * 16 / (32 + 64) + 1  # (32 + 64)-token requests, reserved whole


def test_swap_pays_the_host_link_instead_of_recomputing() -> None:
    t = Traffic(32, 64, concurrency=32, token_budget=512)
    swap = simulate(
        _step, t, 1000, clients=32, requests=400, paging=Paging(100, 16, preemption="swap", swap_s_per_block=1e-4)
    )
    assert swap.preemptions > 0 and swap.requests >= 360


def test_unknown_engine_is_one_line() -> None:
    code, _, err = run_cli(*C128, "--engine", "vllmm")
    assert code == 2 and "vllmm" in err and len(err.strip().splitlines()) == 1
