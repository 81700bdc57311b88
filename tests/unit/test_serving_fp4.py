"""4-bit serving: fp4 (NVFP4/MXFP4) weights and activations, int4 and fp4 KV caches, fp8 activations on
B200; a chip without the rate falls back to the next wider one and says so. Hand-derived bytes and times."""

from __future__ import annotations

import pytest

from rooftop.cost.efficiency import default_efficiency
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.memory import kv_cache_bytes_per_token
from rooftop.model.workload import Dtypes, Workload
from rooftop.plan.serve import critical
from rooftop.plan.serve import layout as sl
from rooftop.plan.serve import phase as inf
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.per_chip import chip_cost
from rooftop.plan.serve.sweep import ServingRequest, plan_serving
from rooftop.report.reasons import note_texts

L8 = get_model("llama-3-8b")
L70 = get_model("llama-3-70b")
H100 = get_chip("h100")
B200 = get_chip("b200")
FP4 = Dtypes("fp4", "fp4", "int4")
#: Llama 3 70B: d_model, query heads, KV heads, head dim, d_ff, layers, vocabulary
D, N, K, HD, F, LAYERS, V = 8192, 64, 8, 128, 28672, 80, 128256


def _request(chip, topology: str, **kw) -> ServingRequest:
    return ServingRequest(L70, chip, parse_topology(chip, topology), 2048, 256, **kw)


# ---------------------------------------------------------------- 4-bit bytes


def test_fp4_weights_are_half_a_byte_per_parameter() -> None:
    # Llama 3 8B: 8,030,261,248 parameters (embedding and head untied), all on one chip
    params = 128256 * 4096 * 2 + 32 * (4096 * 4096 * 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) + 4096
    assert params == 8_030_261_248
    assert sl.weights_per_chip_bytes(L8, ServingLayout(tp=1), "fp4") == params * 0.5
    # 70B at tp=16: matmuls / 16, k and v / min(16, K=8) (a KV head per pair of chips), norms replicated,
    # embedding and head vocabulary-parallel
    per_chip = LAYERS * ((2 * D * N * HD + 3 * D * F) / 16 + 2 * D * K * HD / 8 + 2 * D) + 2 * V * D / 16 + D
    assert sl.weights_per_chip_bytes(L70, ServingLayout(tp=16), "fp4") == pytest.approx(per_chip * 0.5, rel=1e-12)
    assert sl.weights_per_chip_bytes(L70, ServingLayout(tp=16), "bf16") == pytest.approx(per_chip * 2, rel=1e-12)


def test_int4_kv_cache_is_half_of_int8() -> None:
    # 80 layers x (K and V) x 8 heads x 128 x half a byte
    assert kv_cache_bytes_per_token(L70, "int4") == 80 * 2 * 8 * 128 * 0.5 == 81_920
    assert kv_cache_bytes_per_token(L70, "int4") * 2 == kv_cache_bytes_per_token(L70, "int8")
    assert kv_cache_bytes_per_token(L70, "fp4") == kv_cache_bytes_per_token(L70, "int4")


def test_fp4_matmuls_run_at_b200s_fp4_peak() -> None:
    cb = critical.critical_batch(B200, FP4, default_efficiency("serving", "gpu"))
    assert (cb.compute_dtype, cb.peak_flops_per_s, cb.bytes_per_weight) == ("fp4", 9e15, 0.5)
    assert cb.ideal == 9e15 * 0.5 / (2 * 8e12)
    layout = ServingLayout(tp=8)
    mesh = make_mesh(parse_topology(B200, "8"), layout.mesh_axes())
    eff = default_efficiency("serving", "gpu")
    # at a compute-bound batch the fp4 matmuls take half the fp8 time: twice the peak, the same FLOPs
    fp4 = chip_cost(L70, _decode(4096), FP4, layout).groups["matmul"]
    fp8 = chip_cost(L70, _decode(4096), Dtypes("fp8", "fp8", "int4"), layout).groups["matmul"]
    assert fp4.flops == pytest.approx(fp8.flops, rel=1e-12)
    step4 = inf.decode_step(L70, B200, mesh, layout, 4096, 2048, FP4, eff)
    step8 = inf.decode_step(L70, B200, mesh, layout, 4096, 2048, Dtypes("fp8", "fp8", "int4"), eff)
    assert step4.group_bound["matmul"] == "compute"
    assert step4.group_s["matmul"] == pytest.approx(step8.group_s["matmul"] / 2, rel=1e-9)


def _decode(batch: int) -> Workload:
    return Workload("decode", batch, 1, 2048)


def test_fp4_and_fp8_activations_plan_on_b200_and_fall_back_with_a_note_on_h100() -> None:
    for dtypes in (FP4, Dtypes("bf16", "fp8", "bf16"), Dtypes("fp8", "fp8", "fp8")):
        plan = plan_serving(_request(B200, "8", dtypes=dtypes, batch=16))
        assert plan.chosen is not None and not any("matrix peak" in n for n in note_texts(plan.notes))
    plan = plan_serving(_request(H100, "8", dtypes=FP4, batch=16))
    assert plan.chosen is not None
    assert plan.critical_batch.compute_dtype == "fp8"  # H100 has no fp4 tensor-core rate: the next wider, fp8
    assert any("h100 has no fp4 matrix peak" in n and "fp8 peak" in n for n in note_texts(plan.notes))
