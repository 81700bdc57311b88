"""Per-instruction Costs of HLO: one hand-written snippet per opcode family, expectations as arithmetic."""

# ruff: noqa: E501  (HLO fixture lines are kept verbatim, as XLA prints them)

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rooftop.analysis.hlo.analyze import analyze
from rooftop.analysis.hlo.count import HloOp, count_module
from rooftop.analysis.hlo.parse import parse_hlo
from rooftop.cost.op import ConvDim, convolution_flops, dot_general
from rooftop.errors import InvalidConfigError, ParseError
from rooftop.hardware.catalog import get_chip
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason
from rooftop.report.reasons import note_texts, why_text

SUM = "%sum (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\n"


def ops(entry: str, extra: str = "", header: str = "HloModule m") -> dict[str, HloOp]:
    text = f"{header}\n\n{SUM}\n{extra}\nENTRY %main {{\n{entry}\n}}\n"
    return {op.name: op for op in count_module(parse_hlo(text)).ops}


# --- dots and convolutions ----------------------------------------------------------------------------


def test_dot_with_batch_dims() -> None:
    got = ops(
        "  %p0 = f32[4,64,128]{2,1,0} parameter(0)\n  %p1 = f32[4,128,32]{2,1,0} parameter(1)\n"
        "  ROOT %dot = f32[4,64,32]{2,1,0} dot(%p0, %p1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}"
    )["dot"]
    assert got.cost.flops == 2 * 4 * 64 * 128 * 32
    assert dict(got.cost.cost.flops_by) == {("matrix", "fp32"): 2 * 4 * 64 * 128 * 32}
    assert got.cost.traffic.logical_bytes == (4 * 64 * 128 + 4 * 128 * 32 + 4 * 64 * 32) * 4


def test_dot_general_rejects_mismatched_contraction() -> None:
    with pytest.raises(InvalidConfigError, match="k0 is 128 in lhs"):
        dot_general(((64, 128), "bf16"), ((64, 32), "bf16"), ((), ()), ((1,), (0,)))


def test_dot_with_mismatched_dims_names_the_line() -> None:
    with pytest.raises(ParseError, match=r"<hlo>:12: dot 'dot': paired dim k0 is 8 in lhs \[4, 8\] but 4 in rhs"):
        ops(
            "  %p0 = f32[4,8] parameter(0)\n  %dot = f32[4,4] dot(%p0, %p0), lhs_contracting_dims={1}, rhs_contracting_dims={0}"
        )


def test_convolution_2d_same_padding_stride_2() -> None:
    # NHWC [8,32,32,16] * HWIO [3,3,16,32], stride 2, pad 0_1: output 16x16. Per spatial dim, kernel tap
    # k reads input 2o + k for o < 16: taps 0 and 1 always (32), tap 2 misses o = 15 (15): 47 taps.
    got = ops(
        "  %x = f32[8,32,32,16]{3,2,1,0} parameter(0)\n  %w = f32[3,3,16,32]{3,2,1,0} parameter(1)\n"
        "  ROOT %conv = f32[8,16,16,32]{3,2,1,0} convolution(%x, %w), window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f"
    )["conv"]
    assert got.cost.flops == 2 * 8 * 32 * 16 * (16 + 16 + 15) ** 2


def test_depthwise_convolution_divides_by_feature_groups() -> None:
    got = ops(
        "  %x = f32[8,32,32,16]{3,2,1,0} parameter(0)\n  %w = f32[3,3,1,16]{3,2,1,0} parameter(1)\n"
        "  ROOT %conv = f32[8,32,32,16]{3,2,1,0} convolution(%x, %w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=16"
    )["conv"]
    assert got.cost.flops == 2 * 8 * 16 * (16 // 16) * (30 * 3 + 2 * 2) ** 2  # 94 valid taps per dim


@given(
    st.integers(1, 12), st.integers(1, 4), st.integers(1, 3), st.integers(0, 3), st.integers(1, 3), st.integers(1, 3)
)
def test_valid_taps_closed_form_matches_enumeration(n: int, k: int, s: int, pad: int, lhs_d: int, rhs_d: int) -> None:
    out = max(1, ((n - 1) * lhs_d + 1 + 2 * pad - (k - 1) * rhs_d - 1) // s + 1)
    dim = ConvDim(n, k, out, s, pad, lhs_d, rhs_d)
    brute = sum(
        1
        for kk in range(k)
        for o in range(out)
        if (u := o * s + kk * rhs_d - pad) >= 0 and u % lhs_d == 0 and u // lhs_d < n
    )
    assert dim.valid_taps() == brute


def test_convolution_flops_without_padding_is_the_textbook_count() -> None:
    spatial = [ConvDim(32, 3, 30), ConvDim(32, 3, 30)]
    assert convolution_flops(8, 16, 32, spatial) == 2 * 8 * 30 * 30 * 3 * 3 * 16 * 32


# --- elementwise, transcendental, reductions -----------------------------------------------------------


def test_elementwise_and_transcendental() -> None:
    got = ops(
        "  %x = f32[64,256]{1,0} parameter(0)\n  %t = f32[64,256]{1,0} tanh(%x)\n"
        "  ROOT %m = f32[64,256]{1,0} multiply(%x, %t)"
    )
    assert (got["t"].cost.flops, got["t"].cost.transcendentals) == (0, 64 * 256)
    assert (got["m"].cost.flops, got["m"].cost.transcendentals) == (64 * 256, 0)
    assert got["t"].cost.cost.flops == 64 * 256  # timed as vector-unit work
    assert got["m"].cost.traffic.logical_bytes == 3 * 64 * 256 * 4


def test_reduce_counts_input_minus_output_times_the_reducer() -> None:
    got = ops(
        "  %x = f32[64,256]{1,0} parameter(0)\n  %z = f32[] constant(0)\n"
        "  ROOT %r = f32[64]{0} reduce(%x, %z), dimensions={1}, to_apply=%sum"
    )["r"]
    assert got.cost.flops == (64 * 256 - 64) * 1


def test_reduce_window_and_sort() -> None:
    got = ops(
        "  %x = f32[16,128]{1,0} parameter(0)\n  %z = f32[] constant(0)\n"
        "  %rw = f32[1,4]{1,0} reduce-window(%x, %z), window={size=16x32 stride=16x32}, to_apply=%sum\n"
        "  %v = f32[1000]{0} parameter(1)\n  ROOT %s = f32[1000]{0} sort(f32[1000]{0} %v), dimensions={0}, to_apply=%sum"
    )
    assert got["rw"].cost.flops == 4 * (16 * 32 - 1)
    assert got["s"].cost.flops == 1000 * 10  # n ceil(log2 n)


# --- fusions and bytes ---------------------------------------------------------------------------------

FUSED = """%fused (p0: f32[128,384], p1: f32[384,64]) -> f32[128,64] {
  %p0 = f32[128,384]{1,0} parameter(0)
  %p1 = f32[384,64]{1,0} parameter(1)
  %dot = f32[128,64]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %e = f32[128,64]{1,0} exponential(%dot)
  ROOT %a = f32[128,64]{1,0} add(%e, %dot)
}
"""


def test_fusion_flops_from_inside_bytes_at_the_boundary() -> None:
    got = ops(
        "  %x = f32[128,384]{1,0} parameter(0)\n  %w = f32[384,64]{1,0} parameter(1)\n"
        "  ROOT %f = f32[128,64]{1,0} fusion(%x, %w), kind=kOutput, calls=%fused",
        FUSED,
    )["f"]
    assert got.cost.flops == 2 * 128 * 384 * 64 + 128 * 64
    assert got.cost.transcendentals == 128 * 64
    assert got.cost.traffic.logical_bytes == (128 * 384 + 384 * 64 + 128 * 64) * 4  # no inner temporaries


def test_fused_slice_reads_only_the_slice_and_in_place_update_writes_the_update() -> None:
    extra = """%sliced (p: f32[128,384]) -> f32[128,128] {
  %p = f32[128,384]{1,0} parameter(0)
  %b = f32[2,64,384]{2,1,0} bitcast(%p)
  %s = f32[2,64,128]{2,1,0} slice(%b), slice={[0:2], [0:64], [256:384]}
  ROOT %r = f32[128,128]{1,0} bitcast(%s)
}

%update (buf: f32[16,1024], u: f32[1,1024], i: s32[]) -> f32[16,1024] {
  %buf = f32[16,1024]{1,0} parameter(0)
  %u = f32[1,1024]{1,0} parameter(1)
  %i = s32[] parameter(2)
  %zero = s32[] constant(0)
  ROOT %dus = f32[16,1024]{1,0} dynamic-update-slice(%buf, %u, %i, %zero)
}
"""
    got = ops(
        "  %x = f32[128,384]{1,0} parameter(0)\n  %f = f32[128,128]{1,0} fusion(%x), kind=kLoop, calls=%sliced\n"
        "  %buf = f32[16,1024]{1,0} parameter(1)\n  %u = f32[1,1024]{1,0} parameter(2)\n  %i = s32[] parameter(3)\n"
        "  ROOT %g = f32[16,1024]{1,0} fusion(%buf, %u, %i), kind=kLoop, calls=%update",
        extra,
    )
    assert got["f"].cost.traffic.logical_bytes == 2 * 128 * 128 * 4  # a third of x read, the output written
    assert got["g"].cost.traffic.logical_bytes == 2 * 1024 * 4 + 4  # update read and written, index read


def test_async_fusion_start_reads_what_its_fused_computation_reads() -> None:
    # XLA:GPU runs a scan's layer slice as an async fusion (jax 0.11, H100): the start reads one layer
    extra = """%fused_dynamic_slice.clone (param_0.5: f32[6,256,256], param_1.4: s32[]) -> f32[1,256,256] {
  %param_0.5 = f32[6,256,256]{2,1,0} parameter(0)
  %param_1.4 = s32[] parameter(1)
  %constant_0_1_1 = s32[] constant(0)
  ROOT %dynamic_slice.0.2 = f32[1,256,256]{2,1,0} dynamic-slice(%param_0.5, %param_1.4, %constant_0_1_1, %constant_0_1_1), dynamic_slice_sizes={1,256,256}
}
"""
    got = ops(
        "  %ws = f32[6,256,256]{2,1,0} parameter(0)\n  %i = s32[] parameter(1)\n"
        "  %fusion-start = ((f32[6,256,256]{2,1,0}, s32[]), f32[1,256,256]{2,1,0}, u32[]) fusion-start(%ws, %i), kind=kLoop, calls=%fused_dynamic_slice.clone\n"
        "  ROOT %fusion-done = f32[1,256,256]{2,1,0} fusion-done(%fusion-start)",
        extra,
    )
    assert list(got) == ["fusion-start"] and got["fusion-start"].opcode == "fusion"
    assert got["fusion-start"].cost.traffic.logical_bytes == 2 * 256 * 256 * 4 + 4  # one layer read and written


def test_tiled_padding_and_memory_spaces() -> None:
    got = ops("  %y = f32[3,5]{1,0:T(2,2)} parameter(0)\n  ROOT %c = f32[3,5]{1,0:T(2,2)S(1)} copy(%y)")["c"]
    traffic = got.cost.traffic
    assert traffic.logical_bytes == 2 * 3 * 5 * 4
    assert traffic.padded_bytes == 2 * 4 * 6 * 4  # [3,5] pads to [4,6]: 1.6x
    assert traffic.hbm_bytes == 4 * 6 * 4  # the result lives in S(1), not HBM
    assert got.memory_space == 1


def test_zero_cost_instructions_are_not_listed() -> None:
    got = ops(
        "  %x = f32[8]{0} parameter(0)\n  %c = f32[] constant(1)\n  %t = (f32[8]{0}) tuple(%x)\n"
        "  %g = f32[8]{0} get-tuple-element(%t), index=0\n  ROOT %b = f32[2,4]{1,0} bitcast(%g)"
    )
    assert got == {}


# --- control flow --------------------------------------------------------------------------------------

LOOP = """%body (s: (s32[], f32[32,64])) -> (s32[], f32[32,64]) {
  %s = (s32[], f32[32,64]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %x = f32[32,64]{1,0} get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %y = f32[32,64]{1,0} tanh(%x)
  ROOT %t = (s32[], f32[32,64]{1,0}) tuple(%next, %y)
}

%cond (c: (s32[], f32[32,64])) -> pred[] {
  %c = (s32[], f32[32,64]{1,0}) parameter(0)
  %ci = s32[] get-tuple-element(%c), index=0
  %n = s32[] constant(5)
  ROOT %lt = pred[] compare(%ci, %n), direction=LT
}
"""


@pytest.mark.parametrize(("config", "trips"), [(', backend_config={"known_trip_count":{"n":"5"}}', 5), ("", 1)])
def test_while_body_counts_trip_count_times(config: str, trips: int) -> None:
    text = f"""HloModule m

{LOOP}
ENTRY %main {{
  %x = f32[32,64]{{1,0}} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[32,64]{{1,0}}) tuple(%zero, %x)
  ROOT %w = (s32[], f32[32,64]{{1,0}}) while(%init), condition=%cond, body=%body{config}
}}
"""
    counts = count_module(parse_hlo(text))
    by_name = {op.name: op for op in counts.ops}
    assert by_name["y"].executions == trips
    assert by_name["lt"].executions == (trips + 1 if config else 1)  # the condition runs once more
    assert sum(op.cost.transcendentals * op.executions for op in counts.ops) == trips * 32 * 64
    assert (Reason.of(ReasonCode.WHILE_TRIPS_UNKNOWN, instruction="w") in counts.notes) == (not config)


# --- custom-calls --------------------------------------------------------------------------------------


def test_cublas_gemm_from_backend_config_without_workspace_bytes() -> None:
    got = ops(
        "  %a = bf16[4096,6144]{1,0} parameter(0)\n  %b = bf16[2048,6144]{1,0} parameter(1)\n"
        '  ROOT %cc = (bf16[4096,2048]{1,0}, s8[67108864]{0}) custom-call(%a, %b), custom_call_target="__cublas$gemm", '
        'backend_config={"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["1"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}}}'
    )["cc"]
    assert got.cost.flops == 2 * 4096 * 2048 * 6144
    assert got.cost.traffic.logical_bytes == (4096 * 6144 + 2048 * 6144 + 4096 * 2048) * 2


def test_cudnn_backward_filter_uses_the_forward_convolution() -> None:
    # forward: x [1,16,8,8] (bf01) * w [32,16,3,3] (oi01) -> y [1,32,6,6]; the filter gradient has
    # operands (x, dy) and result dw, with the forward's window and dim_labels.
    got = ops(
        "  %x = f32[1,16,8,8]{3,2,1,0} parameter(0)\n  %dy = f32[1,32,6,6]{3,2,1,0} parameter(1)\n"
        '  ROOT %cc = (f32[32,16,3,3]{3,2,1,0}, u8[0]{0}) custom-call(%x, %dy), window={size=3x3}, dim_labels=bf01_oi01->bf01, custom_call_target="__cudnn$convBackwardFilter"'
    )["cc"]
    assert got.cost.flops == 2 * 1 * 32 * 16 * 6 * 6 * 3 * 3


def test_transformer_engine_attention_causal_forward_and_backward() -> None:
    config = "backend_config={attn_heads = 16 : i64, input_batch = 2 : i64, kv_max_seqlen = 2048 : i64, mask_type = 2 : i64, q_max_seqlen = 2048 : i64, qk_head_dim = 128 : i64, v_head_dim = 128 : i64}"
    got = ops(
        "  %qkv = bf16[2,2048,3,16,128]{4,3,2,1,0} parameter(0)\n"
        f'  %f = (bf16[2,2048,16,128]{{3,2,1,0}}) custom-call(%qkv), custom_call_target="te_fused_attn_forward_ffi", {config}\n'
        f'  ROOT %b = (bf16[2,2048,3,16,128]{{4,3,2,1,0}}) custom-call(%qkv), custom_call_target="te_fused_attn_backward_ffi", {config}'
    )
    pairs = 2048 * 2049 // 2  # causal: query i sees i + 1 keys
    assert got["f"].cost.flops == 2 * 2 * 16 * pairs * (128 + 128)
    assert got["b"].cost.flops == 2.5 * 2 * 2 * 16 * pairs * (128 + 128)
    assert "causal" in why_text(got["f"].cost.note) and "not causal" not in why_text(got["f"].cost.note)


def test_unknown_custom_call_is_reported_not_zero() -> None:
    text = 'HloModule m\nENTRY %e {\n  %p = s32[32] parameter(0)\n  ROOT %cc = s32[32] custom-call(%p), custom_call_target="my_kernel"\n}\n'
    analysis = analyze(parse_hlo(text), get_chip("h100"))
    (timed,) = analysis.ops
    assert timed.op.cost.unknown == "custom-call my_kernel (cc)"
    assert timed.op.cost.traffic.logical_bytes == 2 * 32 * 4  # its bytes are still known
    assert "FLOPs unknown: custom-call my_kernel (cc)" in analysis.notes
    assert analysis.totals()["flops_unknown_instructions"] == 1


# --- collectives ---------------------------------------------------------------------------------------


def test_async_collective_counted_once_per_pair() -> None:
    got = ops(
        "  %x = f32[16,128]{1,0} parameter(0)\n"
        "  %ars = f32[16,128]{1,0} all-reduce-start(%x), channel_id=1, replica_groups={{0,1},{2,3},{4,5},{6,7}}, use_global_device_ids=true, to_apply=%sum\n"
        "  ROOT %ard = f32[16,128]{1,0} all-reduce-done(%ars)",
        header="HloModule m, num_partitions=8",
    )
    assert list(got) == ["ars"]
    (use,) = got["ars"].cost.collectives
    assert (use.kind, use.bytes) == ("all-reduce", 16 * 128 * 4)
    assert got["ars"].cost.flops == 16 * 128  # XLA: one FLOP per output element
    assert got["ars"].opcode == "all-reduce"


def test_all_gather_start_bytes_are_the_gathered_output() -> None:
    got = ops(
        "  %x = f32[4,128]{1,0} parameter(0)\n"
        "  %ags = (f32[4,128]{1,0}, f32[16,128]{1,0}) all-gather-start(%x), dimensions={0}, replica_groups=[2,4]<=[8], use_global_device_ids=true, channel_id=2\n"
        "  ROOT %agd = f32[16,128]{1,0} all-gather-done(%ags)",
        header="HloModule m, num_partitions=8",
    )["ags"]
    assert got.cost.collectives[0].bytes == 16 * 128 * 4
    assert got.cost.traffic.logical_bytes == (4 + 16) * 128 * 4  # operand + gathered result, not the tuple


def test_sharded_estimate_prices_the_collective_on_its_axis() -> None:
    module = parse_hlo(
        f"HloModule m, num_partitions=8\n\n{SUM}\nENTRY %e {{\n  %x = bf16[1024,1024]{{1,0}} parameter(0)\n"
        "  ROOT %ar = bf16[1024,1024]{1,0} all-reduce(%x), replica_groups={{0,2,4,6},{1,3,5,7}}, to_apply=%sum\n}\n"
    )
    analysis = analyze(module, get_chip("tpu-v5e"), "data=4,model=2", "2x4")
    (timed,) = analysis.ops
    assert [m.axes for m in timed.matches] == [("data",)]
    assert timed.estimate.network_s > 0 and timed.estimate.bound == "network"
    assert analysis.collectives_by_axis()["data"]["bytes"] == 1024 * 1024 * 2


@pytest.mark.parametrize(("mask", "pairs"), [("NO_MASK", 128 * 128), ("CAUSAL", 128 * 129 // 2)])
def test_cudnn_fmha_from_q_k_v_shapes(mask: str, pairs: int) -> None:
    got = ops(
        "  %q = bf16[2,128,4,64]{3,2,1,0} parameter(0)\n  %k = bf16[2,128,4,64]{3,2,1,0} parameter(1)\n"
        "  %v = bf16[2,128,4,64]{3,2,1,0} parameter(2)\n"
        f'  ROOT %fmha = (bf16[2,128,4,64]{{3,2,1,0}}, u8[0]{{0}}) custom-call(%q, %k, %v), custom_call_target="__cudnn$fmhaSoftmax", backend_config={{"cudnn_fmha_backend_config":{{"mask_type":"{mask}"}}}}'
    )["fmha"]
    assert got.cost.flops == 2 * 2 * 4 * pairs * (64 + 64)  # = 4 B H Sq Sk D without a mask
    assert ("not causal" in why_text(got.cost.note)) == (mask == "NO_MASK")


def test_conditional_counts_the_costliest_branch() -> None:
    extra = """%small (a: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  ROOT %n = f32[8]{0} negate(%a)
}

%big (b: f32[8]) -> f32[8] {
  %b = f32[8]{0} parameter(0)
  %m = f32[8]{0} multiply(%b, %b)
  ROOT %e = f32[8]{0} add(%m, %b)
}
"""
    text = f"HloModule m\n\n{extra}\nENTRY %main {{\n  %p = pred[] parameter(0)\n  %x = f32[8]{{0}} parameter(1)\n  ROOT %c = f32[8]{{0}} conditional(%p, %x, %x), true_computation=%small, false_computation=%big\n}}\n"
    counts = count_module(parse_hlo(text))
    assert {op.name for op in counts.ops} == {"m", "e"}
    assert Reason.of(ReasonCode.CONDITIONAL_COSTLIEST, instruction="c", branches=2) in counts.notes
    assert "conditional c: the costliest of 2 branches counted" in note_texts(counts.notes)


def test_irregular_groups_are_not_timed_and_say_so() -> None:
    module = parse_hlo(
        f"HloModule m, num_partitions=4\n\n{SUM}\nENTRY %e {{\n  %x = f32[256]{{0}} parameter(0)\n"
        "  ROOT %ar = f32[256]{0} all-reduce(%x), replica_groups={{0,3},{1,2}}, to_apply=%sum\n}\n"
    )
    analysis = analyze(module, get_chip("h100"), "data=2,model=2", "4")
    (timed,) = analysis.ops
    assert timed.estimate.network_s == 0 and not timed.matches[0].regular
    assert "all-reduce: irregular groups {0,3},{1,2}: not timed" in note_texts(analysis.notes)
    assert analysis.collectives_by_axis() == {"irregular": {"count": 1.0, "bytes": 256 * 4, "comm_s": 0.0}}
