"""plan/serve/phase.py: hand-derived decode and prefill costs, sharding, memory, the critical batch."""

from __future__ import annotations

import pytest

from rooftop.cost.efficiency import (
    IDEAL,
    default_efficiency,
    parse_efficiency,
)
from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.workload import Dtypes, Workload
from rooftop.plan.serve import critical
from rooftop.plan.serve import layout as sl
from rooftop.plan.serve import phase as inf
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.per_chip import chip_cost

L70 = get_model("llama-3-70b")
L8 = get_model("llama-3-8b")
H100 = get_chip("h100")
V5E = get_chip("tpu-v5e")
BF16 = Dtypes()


def mesh_for(chip, spec: str, layout: ServingLayout):
    return make_mesh(parse_topology(chip, spec), layout.mesh_axes())


def matmul_weights_8b() -> int:
    """Llama 3 8B weights one decode token multiplies: per layer q (D x NH), k and v (D x KH each),
    o (NH x D), gate/up/down (3 x D x F); plus the unembedding V x D."""
    d, n, k, h, f, layers, v = 4096, 32, 8, 128, 14336, 32, 128256
    return layers * (d * n * h + 2 * d * k * h + n * h * d + 3 * d * f) + v * d


# ---------------------------------------------------------------- decode: the bandwidth floor


def test_decode_weights_read_once_per_step() -> None:
    layout = ServingLayout(tp=1)
    step = inf.decode_step(L8, H100, mesh_for(H100, "1", layout), layout, 1, 1024, BF16, IDEAL)
    # every matmul weight once, plus the one embedding row the token looks up, 2 bytes each
    assert step.weights_bytes == pytest.approx((matmul_weights_8b() + 4096) * 2, rel=1e-12)
    # the KV cache of the one sequence: 1024 keys read + the new token's written, x 32 layers x 2 (K and V)
    # x 8 heads x 128 x 2 bytes
    assert step.kv_cache_bytes == pytest.approx((1024 + 1) * 32 * 2 * 8 * 128 * 2, rel=1e-12)


def test_decode_latency_lower_bound_is_bytes_over_bandwidth() -> None:
    layout = ServingLayout(tp=1)
    step = inf.decode_step(L8, H100, mesh_for(H100, "1", layout), layout, 1, 1024, BF16, IDEAL)
    floor = ((matmul_weights_8b() + 4096) * 2 + (1024 + 1) * 32 * 2 * 8 * 128 * 2) / 3.35e12
    assert step.bandwidth_roofline_s == pytest.approx(floor, rel=1e-12)
    assert step.time_s >= floor
    # ideal: no fixed costs, every op memory-bound at batch 1, activations are < 0.1% of the bytes
    assert step.overhead_s == 0
    assert step.time_s == pytest.approx(floor, rel=1e-3)
    assert step.bound == "memory"


def test_decode_at_tp8_splits_weights_and_cache_eight_ways() -> None:
    one, eight = ServingLayout(tp=1), ServingLayout(tp=8)
    a = inf.decode_step(L70, H100, mesh_for(H100, "1", one), one, 4, 2048, BF16, IDEAL)
    b = inf.decode_step(L70, H100, mesh_for(H100, "8", eight), eight, 4, 2048, BF16, IDEAL)
    assert b.kv_cache_bytes == pytest.approx(a.kv_cache_bytes / 8, rel=1e-12)
    assert b.weights_bytes == pytest.approx(a.weights_bytes / 8, rel=1e-3)  # embedding row is replicated
    assert b.group_s["matmul"] == pytest.approx(a.group_s["matmul"] / 8, rel=0.01)


def test_overheads_make_70b_decode_2_to_4x_the_bandwidth_roofline() -> None:
    """The issue's calibration: a pure bandwidth roofline predicts TPOT ~2x too fast for 70B at TP 4-8
    and 3-4x at TP 8 (with fp8 weights the roofline halves but the fixed costs stay)."""
    eff = default_efficiency("serving", "gpu")
    ratios = {}
    for tp, dt in ((4, BF16), (8, BF16), (8, Dtypes("fp8", "fp8", "fp8"))):
        layout = ServingLayout(tp=tp)
        step = inf.decode_step(L70, H100, mesh_for(H100, str(tp), layout), layout, 1, 2048, dt, eff)
        ratios[(tp, dt.weights)] = step.time_s / step.bandwidth_roofline_s
        # the fixed terms are shown on their own: 160 all-reduces, 80 x 10 kernels, one step overhead
        assert step.collectives == 2 * 80
        assert step.launch_s == pytest.approx(80 * 10 * 3e-6)
        assert step.scheduling_s == pytest.approx(1e-3 + 1 * 2e-6)  # step_s + one sequence x step_per_seq_s
    assert 1.5 <= ratios[(4, "bf16")] <= 2.5
    assert 1.8 <= ratios[(8, "bf16")] <= 2.8
    assert 2.8 <= ratios[(8, "fp8")] <= 4.0


def test_host_overhead_grows_with_batch_and_without_cuda_graphs() -> None:
    """catalog/efficiency/serving.toml: 1 ms + 2 us per sequence; above 512 tokens no CUDA graph,
    so the host issues 80 x 10 kernels at 25 us = 20 ms and the step is host-bound when that
    outlasts the device's time; graph_max_batch=0 switches graphs off at every batch."""
    eff = default_efficiency("serving", "gpu")
    layout = ServingLayout(tp=8)
    mesh = mesh_for(H100, "8", layout)
    fp8 = Dtypes("fp8", "fp8", "fp8")
    at = {b: inf.decode_step(L70, H100, mesh, layout, b, 2048, fp8, eff) for b in (1, 256, 1024)}
    assert at[256].scheduling_s == pytest.approx(1e-3 + 256 * 2e-6)  # 1.512 ms
    assert at[1024].scheduling_s == pytest.approx(1e-3 + 1024 * 2e-6)
    assert at[256].launch_s == pytest.approx(80 * 10 * 3e-6)  # a captured graph
    step = at[1024]
    device = step.roofline_s + step.collective_s + 80 * 10 * 3e-6
    assert step.launch_s == pytest.approx(80 * 10 * 3e-6 + max(0.0, 80 * 10 * 25e-6 - device))
    eager = inf.decode_step(L70, H100, mesh, layout, 1, 2048, fp8, eff.replace(graph_max_batch=0))
    one = at[1]
    assert eager.time_s - one.time_s == pytest.approx(80 * 10 * 25e-6 - (one.roofline_s + one.collective_s + 2.4e-3))
    flat = eff.replace(step_per_seq_s=0.0)
    assert inf.decode_step(L70, H100, mesh, layout, 1024, 2048, fp8, flat).scheduling_s == 1e-3


def test_tp_allreduces_are_latency_bound_at_small_batch() -> None:
    layout = ServingLayout(tp=8)
    step = inf.decode_step(L70, H100, mesh_for(H100, "8", layout), layout, 1, 2048, BF16, IDEAL)
    # 8 GPUs on NVSwitch: all-reduce = 2 x ceil(log2 8) = 6 steps of 2 us = 12 us, 160 of them
    assert step.collective_s == pytest.approx(160 * 6 * 2e-6)
    assert step.collective_latency_s == pytest.approx(step.collective_s)


def test_parallel_layers_need_one_allreduce_per_layer() -> None:
    import dataclasses

    cfg = dataclasses.replace(L8, parallel_layers=True, norms_per_layer=1)
    layout = ServingLayout(tp=8)
    step = inf.decode_step(cfg, H100, mesh_for(H100, "8", layout), layout, 1, 128, BF16, IDEAL)
    assert step.collectives == 32


def test_no_collectives_without_tensor_parallelism() -> None:
    layout = ServingLayout(tp=1, replicas=8)
    step = inf.decode_step(L8, H100, mesh_for(H100, "8", layout), layout, 16, 128, BF16, IDEAL)
    assert step.collectives == 0 and step.collective_s == 0


# ---------------------------------------------------------------- the critical batch


@pytest.mark.parametrize(
    ("dtypes", "expected"),
    [
        (Dtypes("bf16"), 1.97e14 * 2 / (2 * 8.19e11)),  # bf16 weights, bf16 compute: ~240
        (Dtypes("int8"), 1.97e14 * 1 / (2 * 8.19e11)),  # int8 weights, bf16 compute: half
        (Dtypes("int8", "int8"), 3.94e14 * 1 / (2 * 8.19e11)),  # W8A8: int8 peak, 1 byte per weight
    ],
)
def test_critical_batch_is_critical_intensity_times_weight_bytes(dtypes: Dtypes, expected: float) -> None:
    assert critical.critical_batch(V5E, dtypes, IDEAL).ideal == pytest.approx(expected)
    # the priced ops of one chip cross over within ~15% of it (the activations a matmul reads and writes,
    # 2b/D of its weights per token, push it a little higher)
    found = critical.compute_bound_batch(L70, V5E, ServingLayout(tp=1), 2304, dtypes, IDEAL)
    assert found == pytest.approx(expected, rel=0.15)
    # under tensor parallelism each chip still reads whole activations but 1/tp of the weights: later
    assert critical.compute_bound_batch(L70, V5E, ServingLayout(tp=16), 2304, dtypes, IDEAL) > found


def test_critical_batch_with_efficiency() -> None:
    eff = default_efficiency("serving", "tpu")
    got = critical.critical_batch(V5E, BF16, eff)
    # matrix 0.75 of the achievable peak, which is 0.923 of v5e's datasheet (chip file), over HBM 0.85
    assert got.matrix_efficiency == pytest.approx(0.75 * 0.923)
    assert got.with_efficiency == pytest.approx(1.97e14 * 2 / (2 * 8.19e11) * 0.75 * 0.923 / 0.85)


# ---------------------------------------------------------------- KV cache and memory


def test_kv_cache_per_chip_for_gqa() -> None:
    # Llama 3 70B: 80 layers x 2 x 8 KV heads x 128 x 2 bytes = 327,680 bytes per token
    per_token = 80 * 2 * 8 * 128 * 2
    assert per_token == 327_680
    total = 4 * 1000 * per_token
    assert sl.kv_cache_per_chip_bytes(L70, ServingLayout(tp=1), 4, 1000, "bf16") == total
    assert sl.kv_cache_per_chip_bytes(L70, ServingLayout(tp=8), 4, 1000, "bf16") == total / 8
    # tp = 16 > 8 KV heads: each head lives on two chips, so still / 8
    assert sl.kv_cache_per_chip_bytes(L70, ServingLayout(tp=16), 4, 1000, "bf16") == total / 8
    assert sl.kv_cache_per_chip_bytes(L70, ServingLayout(tp=8, pp=2), 4, 1000, "int8") == total / 2 / 8 / 2


def test_mla_latent_cache_is_replicated_over_tp() -> None:
    ds = get_model("deepseek-v3")
    per_token = 61 * (512 + 64) * 1  # 61 layers x (latent 512 + rope key 64) x 1 byte
    assert sl.kv_cache_per_chip_bytes(ds, ServingLayout(tp=8), 2, 100, "fp8") == 2 * 100 * per_token


def test_weights_per_chip_tp8() -> None:
    from rooftop.model.params import params_total

    norms = 80 * 2 * 8192 + 8192  # two RMSNorms per layer and the final one stay whole on each chip
    expected = ((params_total(L70) - norms) / 8 + norms) * 2
    assert sl.weights_per_chip_bytes(L70, ServingLayout(tp=8), "bf16") == pytest.approx(expected)


def test_max_batch_fills_usable_hbm() -> None:
    eff = default_efficiency("serving", "tpu")
    layout = ServingLayout(tp=16)
    weights = sl.weights_per_chip_bytes(L70, layout, "bf16")
    per_seq = 2560 * 327_680 / 8
    expected = int((16 * 2**30 * 0.95 - weights) // per_seq)  # serving.toml: 95% of HBM usable on TPUs
    assert sl.max_batch(L70, V5E, layout, 2560, BF16, eff) == expected
    assert sl.max_batch(L70, V5E, ServingLayout(tp=8, replicas=2), 2560, BF16, eff) == 0  # 16.4 GiB of weights


# ---------------------------------------------------------------- prefill


def test_prefill_attention_is_quadratic_and_causal() -> None:
    layout = ServingLayout(tp=1)
    cost = chip_cost(L8, Workload("prefill", 1, 2048), BF16, layout)
    attention_matrix = sum(v for (unit, _), v in cost.groups["attention"].flops_by.items() if unit == "matrix")
    # QK^T and AV: 2 x 2 x N x H FLOPs per causal pair, T(T+1)/2 pairs, 32 layers
    assert attention_matrix == pytest.approx(32 * 2 * 2 * 32 * 128 * 2048 * 2049 / 2)


def test_prefill_is_compute_bound_and_dominated_by_2n_flops() -> None:
    layout = ServingLayout(tp=8)
    p = inf.prefill(L70, H100, mesh_for(H100, "8", layout), layout, 1, 2048, BF16, IDEAL)
    assert p.group_bound["matmul"] == "compute"
    from rooftop.model.params import params_matmul_active

    # 2N per prompt token (the unembedding only for the last token), plus attention
    assert p.flops > 2 * (params_matmul_active(L70) - 128256 * 8192) * 2048 / 8


# ---------------------------------------------------------------- pipeline, experts, validation


def test_pipeline_round_reads_weights_over_tp_and_cache_over_pp() -> None:
    one, two = ServingLayout(tp=4), ServingLayout(tp=4, pp=2)
    a = inf.decode_step(L70, H100, mesh_for(H100, "4", one), one, 8, 1024, BF16, IDEAL)
    b = inf.decode_step(L70, H100, mesh_for(H100, "8", two), two, 8, 1024, BF16, IDEAL)
    assert b.weights_bytes == pytest.approx(a.weights_bytes)  # each microbatch re-reads its stage's weights
    assert b.kv_cache_bytes == pytest.approx(a.kv_cache_bytes / 2)
    assert b.collectives == 2 * 80 + 2  # plus one send per stage
    with pytest.raises(InvalidConfigError, match="microbatches"):
        inf.decode_step(L70, H100, mesh_for(H100, "8", two), two, 3, 1024, BF16, IDEAL)


def test_moe_reads_only_touched_experts_at_small_batch() -> None:
    mix = get_model("mixtral-8x7b")
    layout = ServingLayout(tp=1)
    small = chip_cost(mix, Workload("decode", 1, 1, 512), BF16, layout).weights_bytes
    large = chip_cost(mix, Workload("decode", 512, 1, 512), BF16, layout).weights_bytes
    expert = 3 * 4096 * 14336 * 2  # gate, up, down of one expert, bf16
    # batch 1: top-2 of 8 experts per layer; batch 512: all 8 (and 511 more embedding rows)
    assert large - small == pytest.approx(32 * 6 * expert + 511 * 4096 * 2, rel=1e-9)


def test_expert_parallelism_busiest_chip_reads_a_whole_expert() -> None:
    mix = get_model("mixtral-8x7b")
    tp_only = chip_cost(mix, Workload("decode", 1, 1, 512), BF16, ServingLayout(tp=8))
    with_ep = chip_cost(mix, Workload("decode", 1, 1, 512), BF16, ServingLayout(tp=8, ep=8))
    expert = 3 * 4096 * 14336 * 2
    # TP: 2 touched experts / 8 chips; EP: the busiest chip holds one whole touched expert
    assert with_ep.weights_bytes - tp_only.weights_bytes == pytest.approx(32 * (1 - 2 / 8) * expert, rel=1e-6)


def test_validate_layout_names_the_rule() -> None:
    with pytest.raises(InvalidConfigError, match=r"tp=3 does not divide n_heads=64; valid: 1, 2, 4, 8"):
        sl.validate_layout(L70, ServingLayout(tp=3))
    with pytest.raises(InvalidConfigError, match="mixture-of-experts"):
        sl.validate_layout(L70, ServingLayout(tp=2, ep=2))
    with pytest.raises(InvalidConfigError, match="must divide tp"):
        ServingLayout(tp=2, ep=4)
    with pytest.raises(InvalidConfigError, match="pp=3 does not divide n_layers=80"):
        sl.validate_layout(L70, ServingLayout(tp=1, pp=3))


# ---------------------------------------------------------------- the efficiency file


def test_default_factors_have_sources_and_differ_by_stack() -> None:
    gpu, tpu = default_efficiency("serving", "gpu"), default_efficiency("serving", "tpu")
    assert (gpu.matrix, gpu.hbm, gpu.network, gpu.usable_hbm_fraction) == (0.75, 0.85, 0.80, 0.90)
    assert (gpu.kernel_s, tpu.kernel_s, gpu.step_s, gpu.kernels_per_layer) == (3e-6, 1e-6, 1e-3, 10)
    assert (gpu.step_per_seq_s, gpu.kernel_eager_s, gpu.graph_max_batch) == (2e-6, 25e-6, 512)
    assert tpu.graph_max_batch >= 1e9  # XLA: every step one compiled program
    assert default_efficiency("serving", "custom").kernel_s == 3e-6
    assert all(src for src, _ in gpu.sources.values())
    assert set(gpu.as_dict()["sources"]) >= {"matrix", "hbm", "kernel_s", "step_s", "usable_hbm_fraction"}


def test_parse_efficiency() -> None:
    eff = parse_efficiency("hbm=0.9, step_s=0.002", default_efficiency("serving", "gpu"))
    assert (eff.hbm, eff.step_s, eff.matrix) == (0.9, 0.002, 0.75)
    with pytest.raises(InvalidConfigError, match="unknown efficiency factor 'hmb'"):
        parse_efficiency("hmb=0.9", eff)
    with pytest.raises(InvalidConfigError, match=r"hbm=1.5 must be in \(0, 1\]"):
        parse_efficiency("hbm=1.5", eff)
