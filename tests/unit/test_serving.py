"""plan/serve/sweep.py and plan/serve/disagg.py: the sweep, frontier, choice, cost, disaggregation."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.memory import kv_cache_bytes
from rooftop.model.workload import Dtypes
from rooftop.plan.serve.candidates import min_slice
from rooftop.plan.serve.disagg import disaggregate
from rooftop.plan.serve.sweep import ServingRequest, choose, pareto_frontier, plan_serving
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason
from rooftop.report.reasons import note_text, note_texts

V5E = get_chip("tpu-v5e")
H100 = get_chip("h100")
L70 = get_model("llama-3-70b")


@pytest.fixture(scope="module")
def v5e_plan():
    """The issue's done criterion: llama-3-70b on a 4x4 v5e, prompt 2048, generate 512."""
    return plan_serving(ServingRequest(L70, V5E, parse_topology(V5E, "4x4"), 2048, 512))


def test_done_criterion_small_batch_step_is_the_bandwidth_floor(v5e_plan) -> None:
    first = v5e_plan.points[v5e_plan.frontier[0]]
    assert first.batch == 1 and first.layout.tp == 16
    d = first.decode
    floor = (d.weights_bytes + d.kv_cache_bytes) / 8.19e11  # weights + KV per chip / HBM bandwidth
    assert d.bandwidth_roofline_s == pytest.approx(floor)
    # the roofline part is that floor at 85% of peak bandwidth (plus the tiny activations) ...
    assert d.roofline_s == pytest.approx(floor / 0.85, rel=0.02)
    # ... and the fixed costs are shown separately and add up to the step
    assert d.collective_s == pytest.approx(160 * 12e-6)  # 4x4 without wraparound: 2 x (3 + 3) hops of 1 us
    assert d.launch_s == pytest.approx(80 * 10 * 1e-6)
    assert d.scheduling_s == pytest.approx(1e-3 + 2e-6)  # step_s + one sequence x step_per_seq_s
    assert first.step_time_s == pytest.approx(d.roofline_s + d.collective_s + d.launch_s + d.scheduling_s)
    assert first.bound == "memory"


def test_done_criterion_large_batch_end_is_memory_capacity(v5e_plan) -> None:
    last = v5e_plan.points[v5e_plan.frontier[-1]]
    summary = next(s for s in v5e_plan.layouts if s.layout == last.layout)
    assert summary.limit == "memory_capacity"
    # the book's layout (the cache sharded over the batch the 16 / 8 = 2 ways the KV heads leave) holds
    # twice the sequences of tp=16 with two copies of every KV head
    assert last.layout.kv_batch == 2 and last.batch == summary.max_batch == 2 * 69
    plain = next(s for s in v5e_plan.layouts if s.layout.tp == 16 and s.layout.kv_batch == 1)
    assert plain.max_batch == 69  # (0.95 x 16 GiB - 8.37 GiB of weights) / (2560 x 327,680 / 8) = 69.9
    assert "memory capacity" in note_text(last.reason) and "compute-bound only from batch" in note_text(last.reason)
    assert summary.compute_bound_batch > summary.max_batch
    # layouts whose weights alone overflow 16 GiB x 0.95 (TPU serving default) say so
    tp8 = next(s for s in v5e_plan.layouts if s.layout.tp == 8)
    assert tp8.limit == "weights" and tp8.max_batch == 0


def test_frontier_is_monotone_and_undominated(v5e_plan) -> None:
    pts = v5e_plan.points
    front = [pts[i] for i in v5e_plan.frontier]
    assert all(p.fits for p in front)
    assert all(a.step_time_s < b.step_time_s for a, b in itertools.pairwise(front))
    assert all(a.tokens_per_s_per_chip < b.tokens_per_s_per_chip for a, b in itertools.pairwise(front))
    for f in front:
        assert not any(
            p.fits and p.step_time_s < f.step_time_s and p.tokens_per_s_per_chip > f.tokens_per_s_per_chip for p in pts
        )
    assert pareto_frontier([]) == ()


def test_choose_respects_targets(v5e_plan) -> None:
    pts = v5e_plan.points
    best, why = choose(pts, None, None)
    assert best == max((i for i, p in enumerate(pts) if p.fits), key=lambda i: pts[i].tokens_per_s_per_chip)
    assert "no latency target" in note_text(why)
    tight, why = choose(pts, 0.020, None)
    assert pts[tight].step_time_s <= 0.020 and "step <= 20 ms" in note_text(why)
    assert all(
        p.tokens_per_s_per_chip <= pts[tight].tokens_per_s_per_chip for p in pts if p.fits and p.step_time_s <= 0.02
    )
    none, why = choose(pts, 0.001, None)
    assert none is None and "no point meets step <= 1 ms" in note_text(why)
    none, why = choose(pts, None, 0.01)
    assert none is None and "TTFT" in note_text(why)


def test_cost_per_million_tokens_arithmetic(v5e_plan) -> None:
    p = v5e_plan.points[v5e_plan.frontier[0]]
    usd_per_s = 1.20 / 3600 * 16  # catalog price x chips of the replica
    assert p.cost_output_usd_per_m == pytest.approx(1e6 * usd_per_s * p.step_time_s / p.batch)
    assert p.cost_input_usd_per_m == pytest.approx(1e6 * usd_per_s * p.prefill_batch_s / (p.batch * 2048))
    # tokens/s with prefill on the same chips: batch x gen / (gen x step + prefill of the batch)
    assert p.tokens_per_s == pytest.approx(p.batch * 512 / (512 * p.step_time_s + p.prefill_batch_s))


def test_no_price_gives_null_cost_and_a_note() -> None:
    h200 = dataclasses.replace(get_chip("h200"), price_usd_per_hour=None)  # a chip with no price
    plan = plan_serving(ServingRequest(get_model("llama-3-8b"), h200, parse_topology(h200, "1"), 512, 128, batch=8))
    assert all(p.cost_input_usd_per_m is None and p.cost_output_usd_per_m is None for p in plan.points)
    assert Reason.of(ReasonCode.NO_PRICE, chip="h200") in plan.notes  # a reason as data, its sentence in report/
    assert "chip h200 has no catalog price: cost is null (pass --price-per-chip-hour)" in note_texts(plan.notes)
    priced = plan_serving(
        ServingRequest(
            get_model("llama-3-8b"), h200, parse_topology(h200, "1"), 512, 128, batch=8, price_usd_per_chip_hour=4.0
        )
    )
    p = priced.points[0]
    assert p.cost_output_usd_per_m == pytest.approx(1e6 * 4.0 / 3600 * p.step_time_s / 8)


def test_fixed_batch_evaluates_only_that_batch() -> None:
    plan = plan_serving(ServingRequest(get_model("llama-3-8b"), H100, parse_topology(H100, "8"), 1024, 256, batch=32))
    assert {p.batch for p in plan.points} == {32}
    assert {p.layout.tp for p in plan.points} == {1, 2, 4, 8}


def test_pipeline_layouts_only_when_tp_alone_cannot_hold_the_weights() -> None:
    big = get_model("llama-3.1-405b")
    plan = plan_serving(ServingRequest(big, H100, parse_topology(H100, "2x8"), 1024, 256))
    assert any(p.layout.pp > 1 for p in plan.points)
    chosen = plan.points[plan.chosen]
    assert chosen.layout.tp == 8 and chosen.layout.pp == 2 and chosen.batch % 2 == 0
    small = plan_serving(ServingRequest(L70, H100, parse_topology(H100, "8"), 1024, 256))
    assert all(p.layout.pp == 1 for p in small.points)


def test_min_slice() -> None:
    # 70B in bf16: 141 GB of weights; a v5e holds 16 GiB x 0.9, so 16 chips (tp=8 needs 16.4 GiB)
    assert min_slice(ServingRequest(L70, V5E, parse_topology(V5E, "4x4"), 2048, 512)).chips == 16
    # int8 halves it: 8 chips of 8.2 GiB
    req = ServingRequest(L70, V5E, parse_topology(V5E, "4x4"), 2048, 512, Dtypes("int8", "bf16", "int8"))
    assert min_slice(req).chips == 8
    # an H100 holds 72 GiB: two GPUs
    assert min_slice(ServingRequest(L70, H100, parse_topology(H100, "8"), 2048, 512)).chips == 2


def test_moe_sweeps_expert_parallel_layouts() -> None:
    mix = get_model("mixtral-8x7b")
    plan = plan_serving(ServingRequest(mix, H100, parse_topology(H100, "8"), 512, 128, batch=1))
    eps = {(p.layout.tp, p.layout.ep) for p in plan.points}
    assert {(8, 1), (8, 8), (2, 2), (4, 4)} <= eps
    by = {(p.layout.tp, p.layout.ep): p for p in plan.points}
    assert by[(8, 8)].step_time_s > by[(8, 1)].step_time_s  # at batch 1 one chip reads a whole expert


def test_request_validation() -> None:
    topo = parse_topology(H100, "8")
    with pytest.raises(InvalidConfigError, match="prompt-len"):
        ServingRequest(L70, H100, topo, 0, 10)
    with pytest.raises(InvalidConfigError, match="max_step_latency_s"):
        ServingRequest(L70, H100, topo, 10, 10, max_step_latency_s=-1.0)


def test_disaggregation_pools_and_kv_transfer() -> None:
    plan = plan_serving(
        ServingRequest(
            L70,
            H100,
            parse_topology(H100, "8"),
            2048,
            512,
            Dtypes("fp8", "fp8", "fp8"),
            max_step_latency_s=0.05,
            max_ttft_s=1.0,
        )
    )
    d = disaggregate(plan, 10.0)
    per_request = kv_cache_bytes(L70, 1, 2048, "fp8")
    assert d.kv_transfer_bytes == per_request == 2048 * 80 * 2 * 8 * 128 * 1
    pre = plan.points[d.prefill.point]
    chips = pre.layout.chips_per_replica
    # a permute over the scale-out axis (cost/collectives.py): max(bandwidth / efficiency, one 5 us step)
    assert d.kv_transfer_s == pytest.approx(max(per_request / (chips * 5e10 * 0.8), 5e-6))
    assert d.prefill.replicas == math.ceil(10.0 * pre.ttft_s)
    assert d.prefill.ttft_s == pytest.approx(pre.ttft_s + d.kv_transfer_s) and d.prefill.ttft_s <= 1.0
    dec = plan.points[d.decode.point]
    assert dec.step_time_s <= 0.05
    assert d.decode.replicas == math.ceil(10.0 * 512 * dec.step_time_s / dec.batch)
    col = plan.points[d.colocated.point]
    assert d.colocated.time_per_output_token_s == pytest.approx(col.step_time_s + col.prefill_batch_s / 512)
    assert d.recommendation in ("disaggregated", "colocated")
    assert d.cost["disaggregated"]["output"] == pytest.approx(1e6 * 2.99 / 3600 * d.decode.chips / (10.0 * 512))
