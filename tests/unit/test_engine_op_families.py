"""Engine custom ops priced by their family (analysis/torch/families.py, engine_ops.py): FLOPs and bytes
derived by hand from each op's registered schema."""

from __future__ import annotations

import pytest

from rooftop.analysis.torch.engine_ops import collective_kind, family_of
from rooftop.analysis.torch.families import ACT_AND_MUL_FLOPS, RMS_FLOPS, seq_stats
from rooftop.analysis.torch.op import TorchOp
from rooftop.analysis.torch.ops import op_cost
from rooftop.report.reasons import note_text

BF16, F32, I64, U8 = "c10::BFloat16", "float", "long int", "unsigned char"


def _op(name: str, *args: tuple[list[int], str], concrete: list[str] | None = None) -> TorchOp:
    dims = [list(d) for d, _ in args]
    return TorchOp.from_args(name, {"Input Dims": dims, "Input type": [t for _, t in args],
                                    "Concrete Inputs": concrete or [""] * len(args)})  # fmt: skip


def _fb(op: TorchOp, stats: object = None) -> tuple[float, float]:
    price = op_cost(op, stats)  # type: ignore[arg-type]
    assert price.cost is not None, price.what
    return price.cost.flops, price.cost.hbm_bytes


def test_vllm_fused_add_rms_norm_in_place() -> None:
    # fused_add_rms_norm(input! [T, H], residual! [T, H], weight [H], eps): input and residual read and written
    t, h = 16, 4096
    op = _op("_C::fused_add_rms_norm", ([t, h], BF16), ([t, h], BF16), ([h], BF16), ([], "double"))
    assert _fb(op) == ((RMS_FLOPS + 1) * t * h, 2 * (2 * t * h * 2) + h * 2)


def test_vllm_rms_norm_out_of_place() -> None:
    t, h = 8, 2048
    op = _op("_C::rms_norm", ([t, h], BF16), ([t, h], BF16), ([h], BF16), ([], "double"))
    assert _fb(op) == (RMS_FLOPS * t * h, 2 * t * h * 2 + h * 2)


def test_unknown_norm_name_priced_by_its_family_with_a_note() -> None:
    op = _op("newlib::fused_rmsnorm_v9", ([4, 256], BF16), ([256], BF16))
    price = op_cost(op)
    assert price.cost is not None and "priced by its family, norm" in note_text(price.what)
    assert price.cost.hbm_bytes == 4 * 256 * 2 + 256 * 2 and price.cost.flops == RMS_FLOPS * 4 * 256


def test_silu_and_mul() -> None:
    t, f = 32, 1024
    op = _op("_C::silu_and_mul", ([t, f], BF16), ([t, 2 * f], BF16))
    assert _fb(op) == (ACT_AND_MUL_FLOPS * t * f, (t * f + t * 2 * f) * 2)


def test_rotary_embedding_in_place() -> None:
    # (positions [T], query [T, 32*128], key [T, 8*128], head_size, cos_sin_cache [P, 128], is_neox)
    t = 64
    op = _op("_C::rotary_embedding", ([t], I64), ([t, 4096], BF16), ([t, 1024], BF16), ([], "Scalar"),
             ([8192, 128], BF16), ([], "Scalar"))  # fmt: skip
    flops, moved = _fb(op)
    assert flops == 3 * t * (4096 + 1024)
    assert moved == 2 * (t * 4096 + t * 1024) * 2 + t * 4 + t * 128 * 2  # long int is counted as 4 bytes (int32)


def test_static_scaled_fp8_quant() -> None:
    t, h = 16, 4096
    op = _op("_C::static_scaled_fp8_quant", ([t, h], "c10::Float8_e4m3fn"), ([t, h], BF16), ([1], F32))
    assert _fb(op) == (2 * t * h, t * h * 2 + 4 + t * h * 1)


def test_reshape_and_cache_flash_into_an_fp8_cache() -> None:
    # (key [T, Hk, D], value, key_cache [B, 16, Hk, D], value_cache, slot_mapping [T], dtype, k_scale, v_scale)
    t, hk, d = 32, 8, 128
    fp8 = "c10::Float8_e4m3fn"
    cache = ([1000, 16, hk, d], fp8)
    op = _op("_C_cache_ops::reshape_and_cache_flash", ([t, hk, d], BF16), ([t, hk, d], BF16), cache, cache,
             ([t], I64), ([], "str"), ([], F32), ([], F32))  # fmt: skip
    assert _fb(op) == (0.0, 2 * t * hk * d * 2 + 2 * t * hk * d * 1 + t * 4)


def test_paged_attention_needs_the_step_lengths() -> None:
    q, kv = ([32, 64, 64], BF16), ([32, 8, 64], BF16)
    op = _op("vllm::unified_attention_with_output", q, kv, kv, q, ([], "str"))
    assert op_cost(op).cost is None and "no step annotation" in note_text(op_cost(op).what)
    # 2 prefills of 100 and 300 new tokens over 100 and 500 keys, and 4 decodes over 1000 keys each
    stats = seq_stats("execute_404_context_2(sq400sk600sqsq100000sqsk160000)_generation_4(sq4sk4000sqsq4sqsk4000)")
    assert stats is not None and stats.requests == 6 and stats.sq == 404
    pairs = (100 * 100 - 100 * 99 / 2) + (300 * 500 - 300 * 299 / 2) + 4 * 1000
    assert stats.causal_pairs() == pairs
    flops, moved = _fb(op, stats)
    assert flops == 2 * 64 * pairs * (64 + 64)
    assert moved == 32 * 64 * 64 * 2 + 4600 * 8 * (64 + 64) * 2 + 32 * 64 * 64 * 2


def test_flash_attn_4d_causal() -> None:
    b, s, h, d = 2, 128, 8, 64
    x = ([b, s, h, d], BF16)
    op = _op("flash_attn::_flash_attn_forward", x, x, x, ([], "Scalar"), ([], "Scalar"), ([], "Scalar"),
             concrete=["", "", "", "0.0", "0.125", "True"])  # fmt: skip
    flops, moved = _fb(op)
    assert flops == 2 * b * h * (s * (s + 1) / 2) * (d + d)
    assert moved == 4 * b * s * h * d * 2


def test_rocm_unquantized_gemm() -> None:
    m, k, n = 32, 2880, 5120
    op = _op("vllm::rocm_unquantized_gemm", ([m, k], BF16), ([n, k], BF16), ([n], BF16))
    assert _fb(op) == (2 * m * n * k, (m * k + n * k + m * n + n) * 2)


def test_fused_experts_bf16_and_fp4_packed() -> None:
    t, h, i, e, k = 64, 2048, 768, 128, 8
    ids = ([t, k], "int")
    op = _op("vllm::inplace_fused_experts", ([t, h], BF16), ([e, 2 * i, h], BF16), ([e, h, i], BF16),
             ([t, k], F32), ids)  # fmt: skip
    flops, moved = _fb(op)
    assert flops == 2 * 3 * t * k * h * i
    assert moved == (e * 2 * i * h + e * h * i) * 2 * min(e, t * k) / e + 2 * t * h * 2 + t * k * 4
    packed = _op("vllm::inplace_fused_experts", ([1, h], BF16), ([e, 2 * i, h // 2], U8), ([e, h, i // 2], U8),
                 ([1, k], F32), ([1, k], "int"))  # fmt: skip
    price = op_cost(packed)
    assert price.cost is not None and price.cost.flops == 2 * 3 * 1 * k * h * i
    assert ("matrix", "fp4") in price.cost.flops_by
    assert price.cost.hbm_bytes == (e * 2 * i * h // 2 + e * h * i // 2) * k / e + 2 * h * 2 + k * 4


@pytest.mark.parametrize(
    ("name", "kind"),
    [("symm_mem::multimem_all_reduce_", "all-reduce"), ("_C_custom_ar::all_reduce", "all-reduce"),
     ("_c10d_functional::all_gather_into_tensor", "all-gather"), ("trtllm::allreduce", "all-reduce"),
     ("_c10d_functional::reduce_scatter_tensor", "reduce-scatter"), ("vllm::rms_norm", None)],
)  # fmt: skip
def test_collectives_of_any_implementation(name: str, kind: str | None) -> None:
    assert collective_kind(name) == kind


def test_family_words() -> None:
    assert family_of("aiter::paged_attention_rocm") == "attention"
    assert family_of("sgl_kernel::apply_rope_pos_ids_cos_sin_cache") == "rotary"
    assert family_of("aten::rms_norm") is None  # aten ops have their own rules
    assert family_of("mylib::unrelated") is None
    assert family_of("TopK") == "memory" and family_of("triton_poi_fused__to_copy_1") == "memory"


def test_inductor_pointwise_kernel_moves_its_buffers_once() -> None:
    op = _op("triton_poi_fused__to_copy_1", ([131072, 64], F32), ([131072, 64], BF16), ([], "Scalar"))
    assert _fb(op) == (0.0, 131072 * 64 * (4 + 2))


def test_other_engines_ops_of_known_families_are_priced_by_family() -> None:
    # a quantization of another engine (name not in the table): every tensor argument moved once
    t, h = 16, 4096
    op = _op("trtllm::fp8_quantize_1x128", ([t, h], BF16))
    price = op_cost(op)
    assert price.cost is not None and "priced by its family, quantize" in note_text(price.what)
    assert (price.cost.flops, price.cost.hbm_bytes) == (2 * t * h, t * h * 2)
    # a 4-D attention of another library: priced from q/k/v as flash-attn's (not causal: no flag read)
    b, s, heads, d = 1, 256, 4, 64
    x = ([b, s, heads, d], BF16)
    price = op_cost(_op("mylib::fmha_fwd", x, x, x))
    assert price.cost is not None and price.cost.flops == 2 * b * heads * s * s * (d + d)
