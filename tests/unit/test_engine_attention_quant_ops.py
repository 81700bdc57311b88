"""Engine attention, quantized/grouped GEMM, MoE and cache-write ops priced by their registered schemas
(analysis/torch/attention_ops.py, quant_ops.py, engine_ops.py): FLOPs and bytes derived by hand from each
op's arguments, on small synthetic op records."""

from __future__ import annotations

import pytest

from rooftop.analysis.torch.engine_ops import family_category, op_family
from rooftop.analysis.torch.families import seq_stats
from rooftop.analysis.torch.op import TorchOp
from rooftop.analysis.torch.ops import op_cost
from rooftop.report.reasons import note_text

BF16, F32, I32, U8, FP8 = "c10::BFloat16", "float", "int", "unsigned char", "c10::Float8_e4m3fn"
Arg = tuple[list[int], str]
NONE: Arg = ([], "")
INT: Arg = ([], "Int")
_DECODE_RUN = "flashinfer::batch_decode_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_" \
    "head_dim_qk_128_head_dim_vo_128_posenc_0_use_swa_False_use_logits_cap_False_run"  # fmt: skip
_PREFILL = "flashinfer::batch_prefill_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_" \
    "head_dim_qk_128_head_dim_vo_128_posenc_0_use_swa_False_use_logits_cap_False_f16qk_False"  # fmt: skip


def _op(name: str, *args: tuple[list[int], str], concrete: dict[int, str] | None = None) -> TorchOp:
    text = [(concrete or {}).get(i, "") for i in range(len(args))]
    return TorchOp.from_args(name, {"Input Dims": [list(d) for d, _ in args], "Input type": [t for _, t in args],
                                    "Concrete Inputs": text})  # fmt: skip


def _fb(op: TorchOp, stats: object = None) -> tuple[float, float]:
    price = op_cost(op, stats)  # type: ignore[arg-type]
    assert price.cost is not None, price.what
    return price.cost.flops, price.cost.hbm_bytes


def _decode_run(cache: list[int], layout: str) -> TorchOp:
    # (float_ws, int_ws, plan_info, q [4, 32, 128], k_cache, v_cache, kv_indptr [5], kv_indices [40],
    #  last_page_len [4], o [4, 32, 128], lse, kv_layout_code, window_left, enable_pdl)
    ws, q = ([1 << 20], U8), ([4, 32, 128], BF16)
    return _op(_DECODE_RUN, ws, ws, ([], "GenericList"), q, (cache, BF16), (cache, BF16), ([5], I32), ([40], I32),
               ([4], I32), q, NONE, INT, INT, ([], "Bool"), concrete={11: layout, 12: "-1"})  # fmt: skip


@pytest.mark.parametrize(("cache", "layout"), [([100, 16, 8, 128], "0"), ([100, 8, 16, 128], "1")])
def test_flashinfer_batch_decode_keys_from_its_pages(cache: list[int], layout: str) -> None:
    # 4 sequences on 40 pages of 16 keys: at least (40 - 4) x 16 full pages + one key on each last page
    keys = (40 - 4) * 16 + 4
    flops, moved = _fb(_decode_run(cache, layout))
    assert flops == 2 * 32 * keys * (128 + 128)  # one query per sequence: pairs = keys
    assert moved == 4 * 32 * 128 * 2 + keys * 8 * (128 + 128) * 2 + 4 * 32 * 128 * 2
    assert op_family(_DECODE_RUN) == "attention" and family_category(_DECODE_RUN) == "attention"


def test_flashinfer_paged_prefill_causal() -> None:
    # (.., q [200, 32, 128], k_cache [100, 16, 8, 128], v_cache, qo_indptr [3], kv_indptr [3], kv_indices [30],
    #  last_page_len [2], o, lse, mask_mode = 1 (causal), layout = 0 (NHD), ...)
    ws, q, cache = ([1 << 20], U8), ([200, 32, 128], BF16), ([100, 16, 8, 128], BF16)
    op = _op(_PREFILL + "_paged_run", ws, ws, ([], "GenericList"), q, cache, cache, ([3], I32), ([3], I32),
             ([30], I32), ([2], I32), q, NONE, INT, INT, concrete={12: "1", 13: "0"})  # fmt: skip
    keys = (30 - 2) * 16 + 2  # 450: 225 per sequence, 100 queries each at its end
    pairs = 2 * (100 * 225 - 100 * 99 / 2)
    flops, moved = _fb(op)
    assert flops == 2 * 32 * pairs * 256
    assert moved == 200 * 32 * 128 * 2 + keys * 8 * 256 * 2 + 200 * 32 * 128 * 2


def test_vllm_paged_attention_v2_takes_the_step_lengths() -> None:
    # (out [4, 32, 128], exp_sums, max_logits, tmp_out, query [4, 32, 128], key_cache [P, Hk, D/x, page, x],
    #  value_cache [P, Hk, D, page], num_kv_heads, scale, block_tables, seq_lens, ...)
    q = ([4, 32, 128], BF16)
    op = _op("_C::paged_attention_v2", q, ([4, 32, 2], F32), ([4, 32, 2], F32), ([4, 32, 2, 128], BF16), q,
             ([500, 8, 16, 16, 8], BF16), ([500, 8, 128, 16], BF16), INT, ([], "Double"), ([4, 64], I32), ([4], I32),
             concrete={7: "8"})  # fmt: skip
    price = op_cost(op)
    assert price.cost is None and "seq_lens" in note_text(price.what)
    stats = seq_stats("execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk4000sqsq4sqsk4000)")
    flops, moved = _fb(op, stats)
    assert flops == 2 * 32 * 4000 * 256
    assert moved == 4 * 32 * 128 * 2 + 4000 * 8 * 256 * 2 + 4 * 32 * 128 * 2
    unrecorded = TorchOp(op.name, op.dims, op.types)  # no Concrete Inputs: H_k from the cache's axis 1
    assert _fb(unrecorded, stats) == (flops, moved)


def test_mla_decode_reads_its_latent_cache_once() -> None:
    # cutlass_mla_decode(out [8, 16, 512], q_nope [8, 16, 512], q_pe [8, 16, 64], kv_c_and_k_pe_cache [P, 64, 576],
    #                    seq_lens, page_table, workspace, sm_scale, num_kv_splits)
    out = ([8, 16, 512], BF16)
    op = _op("sgl_kernel::cutlass_mla_decode", out, out, ([8, 16, 64], BF16), ([300, 64, 576], BF16), ([8], I32),
             ([8, 32], I32), ([1024], U8), ([], "Double"), INT)  # fmt: skip
    stats = seq_stats("execute_8_context_0(sq0sk0sqsq0sqsk0)_generation_8(sq8sk8192sqsq8sqsk8192)")
    flops, moved = _fb(op, stats)
    assert flops == 2 * 16 * 8192 * (576 + 512)
    assert moved == 8 * 16 * 512 * 2 + 8 * 16 * 64 * 2 + 8192 * 1 * 576 * 2 + 8 * 16 * 512 * 2


def test_flash_attn_varlen_packed_keys_causal() -> None:
    # (q [300, 16, 64], k [300, 4, 64], v, cu_seqlens_q [4], cu_seqlens_k [4], max_q, max_k, dropout, scale, causal)
    q, kv = ([300, 16, 64], BF16), ([300, 4, 64], BF16)
    op = _op("flash_attn::_flash_attn_varlen_forward", q, kv, kv, ([4], I32), ([4], I32), INT, INT,
             ([], "Double"), ([], "Double"), ([], "Bool"), concrete={9: "True"})  # fmt: skip
    flops, moved = _fb(op)
    assert flops == 2 * 16 * (3 * 100 * 101 / 2) * (64 + 64)  # 3 sequences of 100, causal
    assert moved == 300 * 16 * 64 * 2 + 300 * 4 * 128 * 2 + 300 * 16 * 64 * 2


def test_flash_attn_backward_dense() -> None:
    # (dout, q, k, v, out [2, 128, 8, 64], softmax_lse, dq, dk, dv, dropout_p, softmax_scale, causal, ...)
    b, s, h, d = 2, 128, 8, 64
    x = ([b, s, h, d], BF16)
    op = _op("flash_attn::_flash_attn_backward", x, x, x, x, x, ([b, h, s], F32), x, x, x, ([], "Double"),
             ([], "Double"), ([], "Bool"), concrete={11: "True"})  # fmt: skip
    flops, moved = _fb(op)
    assert flops == 2.5 * 2 * b * h * (s * (s + 1) / 2) * (d + d)
    assert moved == 2 * 4 * b * s * h * d * 2


def test_aiter_mha_fwd_reads_its_causal_flag() -> None:
    x = ([1, 256, 8, 128], BF16)
    scalars: list[Arg] = [([], "Double"), ([], "Double"), ([], "Bool")]
    causal = _op("aiter::mha_fwd", x, x, x, *scalars, concrete={5: "True"})
    full = _op("aiter::mha_fwd", x, x, x, *scalars, concrete={5: "False"})
    assert _fb(causal)[0] == 2 * 8 * (256 * 257 / 2) * 256 and _fb(full)[0] == 2 * 8 * 256 * 256 * 256


def test_vllm_fa3_without_lengths_says_why() -> None:
    # fwd(q [T, H, D], k [P, page, Hk, D] paged, v, ..., cu_seqlens_q [5] (7), ..., page_table (14)): the keys
    # are only in seqused_k's values
    q, cache = ([64, 32, 128], BF16), ([100, 16, 8, 128], BF16)
    args = [q, cache, cache, NONE, NONE, NONE, NONE, ([5], I32), *[NONE] * 6, ([4, 8], I32)]
    price = op_cost(_op("_vllm_fa3_C::fwd", *args))
    assert price.cost is None and "seq_lens" in note_text(price.what)
    assert family_category("_vllm_fa3_C::fwd") == "attention"


def test_awq_and_gptq_weights_hold_k_by_n_values() -> None:
    m, k, n = 16, 4096, 11008
    # awq_gemm(in_feats [M, K], kernel [K, N/8] int32, scaling_factors [K/128, N], zeros [K/128, N/8], split_k)
    awq = _op("_C::awq_gemm", ([m, k], BF16), ([k, n // 8], I32), ([k // 128, n], BF16), ([k // 128, n // 8], I32),
              INT)  # fmt: skip
    assert _fb(awq) == (2 * m * n * k, m * k * 2 + k * n // 8 * 4 + (k // 128 * n * 2 + k // 128 * n // 8 * 4)
                        + m * n * 2)  # fmt: skip
    # gptq_gemm(a, b_q_weight [K * bits / 32, N], qzeros, scales, g_idx, use_exllama, use_v2_format, bit = 4)
    gptq = _op("_C::gptq_gemm", ([m, k], BF16), ([k // 8, n], I32), ([32, n // 8], I32), ([32, n], BF16),
               ([k], I32), ([], "Bool"), ([], "Bool"), INT, concrete={7: "4"})  # fmt: skip
    assert _fb(gptq)[0] == 2 * m * n * k


def test_fp4_gemm_packs_both_operands() -> None:
    m, k, n = 8, 7168, 2048
    # cutlass_scaled_fp4_mm(out [M, N], a [M, K/2], b [N, K/2], block_scale_a, block_scale_b, alpha)
    op = _op("sgl_kernel::cutlass_scaled_fp4_mm", ([m, n], BF16), ([m, k // 2], U8), ([n, k // 2], U8),
             ([128, k // 16], FP8), ([n, k // 16], FP8), ([1], F32))  # fmt: skip
    price = op_cost(op)
    assert price.cost is not None and price.cost.flops == 2 * m * n * k and ("matrix", "fp4") in price.cost.flops_by
    assert price.cost.hbm_bytes == m * k // 2 + n * k // 2 + (128 * k // 16 + n * k // 16) + m * n * 2


def test_grouped_fp8_gemm_reads_the_experts_it_reaches() -> None:
    rows, k, n, e = 4, 2048, 768, 64  # 4 routed rows: at most 4 experts' weights read
    ptr = ([e], "long int")
    op = _op("sgl_kernel::fp8_blockwise_scaled_grouped_mm", ([rows, n], BF16), ptr, ptr, ptr, ptr, ptr,
             ([rows, k], FP8), ([e, n, k], FP8), ([rows, k // 128], F32), ([e, n // 128, k // 128], F32))  # fmt: skip
    flops, moved = _fb(op)
    assert flops == 2 * rows * n * k
    assert moved == rows * k + e * n * k * 4 / e + (rows * k // 128 * 4 + e * n // 128 * k // 128 * 4) + rows * n * 2


def test_trtllm_moe_routed_inside_by_its_top_k() -> None:
    t, h, i, e, k = 32, 2048, 768, 128, 8
    args: list[Arg] = [
        INT,
        ([t, e], F32),
        NONE,
        NONE,
        NONE,
        ([t, h], FP8),
        ([h // 128, t], F32),
        ([e, 2 * i, h], FP8),
        ([e, 2 * i // 128, h // 128], F32),
        NONE,
        NONE,
        NONE,
        NONE,
        ([e, h, i], FP8),
        ([e, h // 128, i // 128], F32),
        NONE,
        INT,
        INT,
    ]
    op = _op("flashinfer::trtllm_fp8_block_scale_moe", *args, concrete={16: str(e), 17: str(k)})
    flops, moved = _fb(op)
    assert flops == 2 * 3 * t * k * h * i
    assert moved == (e * 2 * i * h + e * h * i) * min(e, t * k) / e + 2 * t * h + t * k * 4
    assert op_family("flashinfer::trtllm_fp8_block_scale_moe") == "moe"


def test_flashinfer_append_paged_kv_cache_into_fp8() -> None:
    t, hk, d = 16, 8, 128
    cache = ([200, 16, hk, d], FP8)
    op = _op("flashinfer::append_paged_kv_cache", ([t, hk, d], BF16), ([t, hk, d], BF16), ([t], I32), ([t], I32),
             cache, cache, ([20], I32), ([3], I32), ([2], I32), INT)  # fmt: skip
    assert _fb(op) == (0.0, 2 * t * hk * d * 2 + 2 * t * hk * d * 1)


def test_rocm_skinny_gemm_either_operand_order() -> None:
    # wvSplitK(in_a [N, K] (the weight), in_b [M, K], in_bias?, CuCount)
    m, k, n = 4, 4096, 6144
    op = _op("_rocm_C::wvSplitK", ([n, k], BF16), ([m, k], BF16), NONE, INT)
    assert _fb(op) == (2 * m * n * k, (n * k + m * k + m * n) * 2)


def test_trtllm_fp4_moe_counts_packed_activations_and_weights() -> None:
    t, h, i, e, k = 4, 2048, 768, 64, 4
    args: list[Arg] = [INT, ([t, e], BF16), NONE, NONE, NONE, ([t, h // 2], U8), ([t, h // 16], FP8),
                       ([e, 2 * i, h // 2], U8), ([e, 2 * i, h // 16], FP8), *[NONE] * 5, ([e, h, i // 2], U8),
                       ([e, h, i // 16], FP8), *[NONE] * 5, INT, INT]  # fmt: skip
    op = _op("flashinfer::trtllm_fp4_block_scale_moe", *args, concrete={21: str(e), 22: str(k)})
    flops, moved = _fb(op)
    assert flops == 2 * 3 * t * k * h * i
    # weights of min(E, T k) = 16 experts; activations counted at a byte a value (module docstring)
    assert moved == (e * 2 * i * h // 2 + e * h * i // 2) * 16 / e + 2 * t * h + t * k * 4


def test_merge_and_top_k_ops_move_their_tensors_once() -> None:
    op = _op("_C::merge_attn_states", ([8, 32, 128], BF16), ([32, 8], F32), ([8, 32, 128], BF16), ([32, 8], F32),
             ([8, 32, 128], BF16), ([32, 8], F32))  # fmt: skip
    assert _fb(op) == (0.0, 3 * (8 * 32 * 128 * 2 + 32 * 8 * 4))


def test_sliding_window_caps_the_keys_a_query_sees() -> None:
    # FlashInfer decode with window_left = 63: each of the 4 queries sees at most 64 of its 145 keys
    op = _decode_run([100, 16, 8, 128], "0")
    windowed = TorchOp(op.name, op.dims, op.types, tuple("63" if i == 12 else c for i, c in enumerate(op.concrete)))
    flops, moved = _fb(windowed)
    assert flops == 2 * 32 * (4 * 64) * 256
    assert moved == 4 * 32 * 128 * 2 + (4 * 64) * 8 * 256 * 2 + 4 * 32 * 128 * 2
    # flash-attn dense, causal, window_size_left = 127: S(512) with each query seeing min(j, 128) keys
    x = ([1, 512, 8, 64], BF16)
    dense = _op("flash_attn::_flash_attn_forward", x, x, x, ([], "Double"), ([], "Double"), ([], "Bool"), INT, INT,
                concrete={5: "True", 6: "127", 7: "0"})  # fmt: skip
    assert _fb(dense)[0] == 2 * 8 * (128 * 129 / 2 + (512 - 128) * 128) * 128


def test_sliding_window_with_the_step_annotation_is_capped() -> None:
    # vllm-flash-attention varlen_fwd over a paged cache, 4 decodes of 1000 keys, window_size_left = 127
    q, cache = ([4, 32, 128], BF16), ([100, 16, 8, 128], BF16)
    args = [
        q,
        cache,
        cache,
        q,
        ([5], I32),
        ([5], I32),
        ([4], I32),
        NONE,
        ([4, 64], I32),
        *[NONE] * 6,
        ([], "Bool"),
        INT,
    ]
    op = _op("_vllm_fa2_C::varlen_fwd", *args, concrete={15: "True", 16: "127"})
    stats = seq_stats("execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk4000sqsq4sqsk4000)")
    flops, moved = _fb(op, stats)
    assert flops == 2 * 32 * min(4000, 4 * 128) * 256
    assert moved == 4 * 32 * 128 * 2 + min(4000, 4 * 127 + 4) * 8 * 256 * 2 + 4 * 32 * 128 * 2


def test_vllm_cutlass_moe_mm_weights_in_either_layout() -> None:
    # cutlass_moe_mm(out!, a [M, K] fp8 (rows permuted by expert), b [E, K, N] (a transposed view), a_scales,
    #                b_scales, expert_offsets, problem_sizes, ...)
    rows, k, n, e = 64, 2048, 1536, 8
    op = _op("_C::cutlass_moe_mm", ([rows, n], BF16), ([rows, k], FP8), ([e, k, n], FP8), ([rows, 1], F32),
             ([e, 1, n], F32), ([e], I32), ([e, 3], I32))  # fmt: skip
    flops, moved = _fb(op)
    assert flops == 2 * rows * n * k
    assert moved == rows * k + e * k * n + (rows * 4 + e * n * 4) + rows * n * 2  # min(E, M) = E: all experts read
