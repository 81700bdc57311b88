"""plan/serve: how an engine keeps and reads the KV cache in decode (``ServingLayout.static_cache_len``,
``ServingLayout.kv_reads_per_query_head``): the bytes a decode step reads and the bytes a slot
stores, written out by hand."""

from __future__ import annotations

import pytest

from rooftop.cost.efficiency import default_efficiency
from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.workload import Dtypes, Workload
from rooftop.plan.serve import layout as sl
from rooftop.plan.serve.layout import ServingLayout, query_head_reads
from rooftop.plan.serve.per_chip import chip_cost
from rooftop.plan.serve.sweep import ServingRequest, plan_serving

MISTRAL = get_model("mistral-7b")  # 32 layers, 32 query heads, 8 KV heads of 128
LLAMA2_7B = get_model("llama-2-7b")  # 32 layers, 32 query and KV heads of 128, d_model 4096
LLAMA2_70B = get_model("llama-2-70b")  # 80 layers, 64 query heads, 8 KV heads of 128
DSV3 = get_model("deepseek-v3")
FP8 = Dtypes("fp8", "fp8", "fp8")
BF16 = Dtypes()


# ---------------------------------------------------------------- reads per query head


def test_query_head_reads_is_the_query_heads_per_kv_head_each_chip_holds() -> None:
    assert query_head_reads(MISTRAL, ServingLayout(tp=1)) == 1.0  # a GQA kernel: once per KV head
    assert query_head_reads(MISTRAL, ServingLayout(tp=1, kv_reads_per_query_head=True)) == 32 / 8
    assert query_head_reads(MISTRAL, ServingLayout(tp=2, kv_reads_per_query_head=True)) == (32 / 2) / (8 / 2)
    # tp = 16 > K = 8: each chip holds 64 / 16 = 4 query heads and one (copied) KV head
    assert query_head_reads(LLAMA2_70B, ServingLayout(tp=16, kv_reads_per_query_head=True)) == (64 / 16) / 1
    assert query_head_reads(LLAMA2_7B, ServingLayout(tp=1, kv_reads_per_query_head=True)) == 1.0  # MHA
    assert query_head_reads(DSV3, ServingLayout(tp=8, kv_reads_per_query_head=True)) == 1.0  # MLA latent


def test_reads_per_query_head_multiply_the_decode_cache_reads_not_the_write() -> None:
    batch, context = 56, 3072
    per_token = 32 * 2 * 8 * 128 * 1  # layers x (K, V) x KV heads x head dim x 1 byte (fp8)
    write = batch * 1 * per_token  # the new token's keys and values
    gqa = chip_cost(MISTRAL, Workload("decode", batch, 1, context), FP8, ServingLayout(tp=1))
    mmha = chip_cost(
        MISTRAL, Workload("decode", batch, 1, context), FP8, ServingLayout(tp=1, kv_reads_per_query_head=True)
    )
    assert gqa.kv_cache_bytes == pytest.approx(batch * context * per_token + write)
    assert mmha.kv_cache_bytes == pytest.approx(4 * batch * context * per_token + write)
    assert mmha.weights_bytes == gqa.weights_bytes


def test_reads_per_query_head_leave_prefill_alone() -> None:
    flag = ServingLayout(tp=1, kv_reads_per_query_head=True)
    w = Workload("prefill", 1, 2048)
    assert chip_cost(MISTRAL, w, FP8, flag).kv_cache_bytes == chip_cost(MISTRAL, w, FP8, ServingLayout()).kv_cache_bytes


# ---------------------------------------------------------------- a fixed-shape cache


def test_static_cache_decode_reads_every_position_of_the_slot() -> None:
    batch, context, cache = 96, 365, 2048
    layout = ServingLayout(tp=8, static_cache_len=cache)
    per_token = 32 * 2 * 32 * 128 * 2  # layers x (K, V) x heads x head dim x 2 bytes (bf16)
    dense = chip_cost(LLAMA2_7B, Workload("decode", batch, 1, context), BF16, layout)
    assert dense.kv_cache_bytes == pytest.approx((batch * cache * per_token + batch * per_token) / 8)
    same = chip_cost(LLAMA2_7B, Workload("decode", batch, 1, cache), BF16, ServingLayout(tp=8))
    assert dense.kv_cache_bytes == pytest.approx(same.kv_cache_bytes)
    assert dense.flops == pytest.approx(same.flops)


def test_static_cache_stores_every_position_of_the_slot() -> None:
    layout = ServingLayout(tp=8, static_cache_len=2048)
    per_token = 32 * 2 * 32 * 128 * 2
    assert sl.kv_cache_per_chip_bytes(LLAMA2_7B, layout, 96, 511, "bfloat16") == pytest.approx(
        96 * 2048 * per_token / 8
    )


def test_static_cache_fits_the_slots_jetstream_ran() -> None:
    """jetstream-pytorch benchmarks/summary.md (2024-03-28, TPU v5e-8, cache length 2048) ran Llama 2 7B
    in bf16 with 96 slots: 96 x 2048 x 524,288 B / 8 = 12.9 GB of cache per chip beside 1.7 GB of
    weights, inside 0.95 x 16 GiB; 128 slots (17.2 GB of cache) would not fit."""
    v5e = get_chip("tpu-v5e")
    fit = sl.max_batch(
        LLAMA2_7B, v5e, ServingLayout(tp=8, static_cache_len=2048), 511, BF16, default_efficiency("serving", "tpu")
    )
    assert 96 <= fit < 128


def test_static_cache_len_must_be_a_count() -> None:
    for bad in (-1, 2.5, True):
        with pytest.raises(InvalidConfigError, match="static_cache_len"):
            ServingLayout(static_cache_len=bad)  # type: ignore[arg-type]


def test_engine_fields_stay_out_of_the_layout_degrees() -> None:
    layout = ServingLayout(tp=8, static_cache_len=2048, kv_reads_per_query_head=True)
    assert layout.as_dict() == ServingLayout(tp=8).as_dict()
    assert layout.label() == "tp=8 x1"


# ---------------------------------------------------------------- the planner takes the engine's fields


def test_the_planner_lays_out_every_candidate_with_the_engines_cache() -> None:
    v5e = get_chip("tpu-v5e")
    req = ServingRequest(
        LLAMA2_7B, v5e, parse_topology(v5e, "2x4"), 219, 292, BF16, static_cache_len=2048, kv_reads_per_query_head=True
    )
    plan = plan_serving(req)
    assert plan.layouts and all(s.layout.static_cache_len == 2048 for s in plan.layouts)
    assert all(s.layout.kv_reads_per_query_head for s in plan.layouts)
    tp8 = next(s for s in plan.layouts if s.layout.tp == 8)
    usable = 0.95 * 16 * 2**30  # serving.toml: 95% of v5e's 16 GiB on TPUs
    per_slot = 2048 * (32 * 2 * 32 * 128 * 2) / 8  # 2,048 positions of a slot, split over 8 chips by heads
    weights = sl.weights_per_chip_bytes(LLAMA2_7B, tp8.layout, "bf16")
    assert tp8.max_batch == int((usable - weights) // per_slot)


def test_the_request_refuses_a_negative_cache_length() -> None:
    v5e = get_chip("tpu-v5e")
    with pytest.raises(InvalidConfigError, match="static_cache_len"):
        ServingRequest(LLAMA2_7B, v5e, parse_topology(v5e, "2x4"), 219, 292, static_cache_len=-1)
