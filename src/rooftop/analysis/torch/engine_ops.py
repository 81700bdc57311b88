"""The custom ops of LLM engines as the PyTorch profiler records them, each with its family
(:mod:`rooftop.analysis.torch.families`), which argument is what, and the public registration that says
so. An op whose name is not here is priced by the family its name says (:func:`family_of`), reading its
arguments generically (:func:`generic_roles`), with a note; collectives of any implementation are
recognised by :func:`collective_kind`.

Sources (argument order of each schema; studied, not copied):
- vLLM ``csrc/torch_bindings.cpp`` (``_C``: norms, activations, rotary, quantization, scaled GEMMs),
  ``csrc/moe/torch_bindings.cpp`` (``_moe_C``), the cache ops registered as ``_C_cache_ops`` and the
  ``vllm::`` ops of ``direct_register_custom_op`` (attention, fused experts, the ROCm GEMM);
- SGLang ``sgl-kernel/csrc/common_extension.cc`` (``sgl_kernel``; the ops of the first SGLang trace read,
  and AITER's ``rmsnorm`` / ``add_rmsnorm`` / ``mha_batch_prefill``, are in :mod:`rooftop.analysis.torch.custom`);
- FlashInfer ``flashinfer/norm.py`` / ``activation.py`` (``flashinfer::``);
- flash-attn ``flash_attn/flash_attn_interface.py`` (``flash_attn::_flash_attn_forward``);
- AITER ``aiter/ops/*.py`` (``aiter::``);
- PyTorch ``torch/csrc/distributed/c10d/symm_mem`` (``symm_mem::``) and ``_c10d_functional``."""

from __future__ import annotations

from typing import NamedTuple

from rooftop.analysis.torch.attention_ops import attention_op, varlen_attention
from rooftop.analysis.torch.families import RULES, Roles, SeqStats, attention
from rooftop.analysis.torch.op import Price, TorchOp
from rooftop.analysis.torch.quant_ops import QUANT_OPS, quant_family, quant_price
from rooftop.analysis.torch.scan_ops import SCAN_OPS, scan_family, scan_price
from rooftop.analysis.torch.sources import AITER, SGL, VLLM
from rooftop.errors import InvalidConfigError
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason


class EngineOp(NamedTuple):
    family: str
    roles: Roles
    source: str


def _rw(reads: tuple[int, ...], writes: tuple[int, ...], add: bool = False, **named: int) -> Roles:
    return Roles(reads, writes, named, add)


_VLLM_CACHE = "vLLM csrc/torch_bindings.cpp (_C_cache_ops)"
_VLLM_PY = "vLLM direct_register_custom_op"
_FI = "FlashInfer norm.py / activation.py"

# fmt: off
#: op name -> (family, argument roles, source of the schema)
ENGINE_OPS: dict[str, EngineOp] = {
    # norms: rms_norm(Tensor! out, Tensor input, Tensor weight, float eps)
    "_C::rms_norm": EngineOp("norm", _rw((1, 2), (0,)), VLLM + ": rms_norm(out, input, weight, epsilon)"),
    # fused_add_rms_norm(Tensor! input, Tensor! residual, Tensor weight, float eps): both updated in place
    "_C::fused_add_rms_norm": EngineOp("norm", _rw((0, 1, 2), (0, 1), add=True),
                                       VLLM + ": fused_add_rms_norm(input!, residual!, weight, epsilon)"),
    "_C::rms_norm_static_fp8_quant": EngineOp("norm", _rw((1, 2, 3), (0,)),
                                              VLLM + ": rms_norm_static_fp8_quant(out, input, weight, scale, eps)"),
    "_C::fused_add_rms_norm_static_fp8_quant": EngineOp(
        "norm", _rw((1, 2, 3, 4), (0, 2), add=True),
        VLLM + ": fused_add_rms_norm_static_fp8_quant(out, input, residual!, weight, scale, eps)"),
    "sgl_kernel::rmsnorm": EngineOp("norm", _rw((1, 2), (0,)), SGL + ": rmsnorm(output, input, weight, eps, pdl)"),
    "sgl_kernel::fused_add_rmsnorm": EngineOp("norm", _rw((0, 1, 2), (0, 1), add=True),
                                              SGL + ": fused_add_rmsnorm(input!, residual!, weight, eps, pdl)"),
    "sgl_kernel::gemma_rmsnorm": EngineOp("norm", _rw((1, 2), (0,)), SGL + ": gemma_rmsnorm(output, input, weight)"),
    "flashinfer::rmsnorm": EngineOp("norm", _rw((1, 2), (0,)), _FI + ": rmsnorm(out, input, weight, eps)"),
    "flashinfer::fused_add_rmsnorm": EngineOp("norm", _rw((0, 1, 2), (0, 1), add=True),
                                              _FI + ": fused_add_rmsnorm(input!, residual!, weight, eps)"),
    "aiter::rms_norm": EngineOp("norm", _rw((0, 1), (0,)), AITER + ": rms_norm(input, weight, eps) -> out"),
    "aiter::rmsnorm2d_fwd": EngineOp("norm", _rw((0, 1), (0,)), AITER + ": rmsnorm2d_fwd(input, weight, eps) -> out"),
    **{n: EngineOp("norm", _rw((1, 2, 4), (0, 3), add=True),
                   AITER + f": {n[7:]}(out, input, residual_in, residual_out, weight, eps, ...)")
       for n in ("aiter::rmsnorm2d_fwd_with_add", "aiter::rmsnorm2d_fwd_with_add_ck")},
    # gated activations: (Tensor! out [T, F], Tensor input [T, 2F])
    **{f"_C::{a}": EngineOp("activation", _rw((1,), (0,)), VLLM + f": {a}(out, input)")
       for a in ("silu_and_mul", "mul_and_silu", "gelu_and_mul", "gelu_tanh_and_mul", "fatrelu_and_mul",
                 "swigluoai_and_mul")},
    **{f"sgl_kernel::{a}": EngineOp("activation", _rw((1,), (0,)), SGL + f": {a}(out, input)")
       for a in ("gelu_and_mul", "gelu_tanh_and_mul")},  # silu_and_mul: custom.py
    **{f"flashinfer::{a}": EngineOp("activation", _rw((1,), (0,)), _FI + f": {a}(out, input)")
       for a in ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul")},
    # rotary: (Tensor positions [T], Tensor! query [T, Hq*D], Tensor!? key, int head_size, Tensor cos_sin_cache, bool)
    "_C::rotary_embedding": EngineOp("rotary", Roles(named={"positions": 0, "q": 1, "k": 2, "cache": 4}),
                                     VLLM + ": rotary_embedding(positions, query!, key!, head_size, cos_sin_cache, "
                                     "is_neox)"),
    # quantization: (Tensor! out, Tensor input, Tensor scale, ...)
    "_C::static_scaled_fp8_quant": EngineOp("quantize", _rw((1, 2), (0,)),
                                            VLLM + ": static_scaled_fp8_quant(result, input, scale)"),
    "_C::dynamic_scaled_fp8_quant": EngineOp("quantize", _rw((1,), (0, 2)),
                                             VLLM + ": dynamic_scaled_fp8_quant(result, input, scale!)"),
    "_C::dynamic_per_token_scaled_fp8_quant": EngineOp(
        "quantize", _rw((1,), (0, 2)), VLLM + ": dynamic_per_token_scaled_fp8_quant(result, input, scale!, scale_ub)"),
    "_C::scaled_fp4_quant": EngineOp("quantize", _rw((1, 3), (0, 2)),
                                     VLLM + ": scaled_fp4_quant(output, input, output_scale!, input_scale)"),
    "sgl_kernel::sgl_per_token_group_quant_fp8": EngineOp(
        "quantize", _rw((0,), (1, 2)), SGL + ": sgl_per_token_group_quant_fp8(input, output_q, output_s, group, ...)"),
    # KV-cache writes: (Tensor key [T, Hk, D], Tensor value, Tensor! key_cache, Tensor! value_cache, Tensor slots, ...)
    **{f"_C_cache_ops::{n}": EngineOp("cache_write", Roles(named={"k": 0, "v": 1, "cache": 2, "slots": 4}),
                                      _VLLM_CACHE + f": {n}(key, value, key_cache!, value_cache!, slot_mapping, "
                                      "kv_cache_dtype, k_scale, v_scale)")
       for n in ("reshape_and_cache", "reshape_and_cache_flash")},
    "_C_cache_ops::concat_and_cache_mla": EngineOp(
        "cache_write", Roles(named={"k": 0, "v": 1, "cache": 2, "slots": 3}),
        _VLLM_CACHE + ": concat_and_cache_mla(kv_c, k_pe, kv_cache!, slot_mapping, kv_cache_dtype, scale)"),
    # attention over packed [T, H, D] queries and a paged KV cache
    **{n: EngineOp("attention", Roles(named={"q": 0, "k": 1, "v": 2}),
                   _VLLM_PY + f": {n[6:]}(query, key, value, [output!,] layer_name, ...)")
       for n in ("vllm::unified_attention", "vllm::unified_attention_with_output")},
    "flash_attn::_flash_attn_forward": EngineOp(
        "attention", Roles(named={"q": 0, "k": 1, "v": 2, "causal": 5}),
        "flash-attn flash_attn_interface.py: _flash_attn_forward(q, k, v, dropout_p, softmax_scale, causal, ...)"),
    # GEMMs: x [M, K] by a weight [N, K]
    "vllm::rocm_unquantized_gemm": EngineOp("gemm", Roles(reads=(2,), named={"a": 0, "b": 1}),
                                            _VLLM_PY + ": rocm_unquantized_gemm(x, weight, bias)"),
    "aiter::gemm_a16w16": EngineOp("gemm", Roles(named={"a": 0, "b": 1}), AITER + ": gemm_a16w16(A, B [N, K], ...)"),
    # cutlass_scaled_mm(Tensor! out, Tensor a [M, K], Tensor b [K, N], Tensor a_scales, Tensor b_scales, Tensor? bias)
    "_C::cutlass_scaled_mm": EngineOp("gemm", Roles(reads=(3, 4), named={"a": 1, "b": 2}),
                                      VLLM + ": cutlass_scaled_mm(out, a, b, a_scales, b_scales, bias)"),
    "sgl_kernel::fp8_scaled_mm": EngineOp("gemm", Roles(reads=(2, 3), named={"a": 0, "b": 1}),
                                          SGL + ": fp8_scaled_mm(mat_a, mat_b, scales_a, scales_b, out_dtype, bias)"),
    # fused MoE: (hidden_states [T, H], w1 [E, 2I, H], w2 [E, H, I], topk_weights [T, k], topk_ids [T, k], ...)
    **{n: EngineOp("moe", Roles(named={"hidden": 0, "w1": 1, "w2": 2, "topk_ids": 4}),
                   _VLLM_PY + f": {n[6:]}(hidden_states, w1, w2, topk_weights, topk_ids, ...)")
       for n in ("vllm::inplace_fused_experts", "vllm::outplace_fused_experts")},
    # routing: topk_softmax(Tensor! topk_weights, Tensor! topk_ids, Tensor! token_expert_indices, Tensor gating)
    "_moe_C::topk_softmax": EngineOp("memory", Roles(), "vLLM csrc/moe/torch_bindings.cpp: topk_softmax(...)"),
    "_moe_C::moe_sum": EngineOp("memory", Roles(), "vLLM csrc/moe/torch_bindings.cpp: moe_sum(input, output!)"),
    "sgl_kernel::topk_softmax": EngineOp("memory", Roles(), SGL + ": topk_softmax(...)"),
    # added from the 2026-11-29 audit (benchmarks/results/engine-op-audit-2026-11-29): schemas read at the
    # commits named there
    **{n: EngineOp("gemm", Roles(reads=(2, 3), named={"a": 0, "b": 1}), src)
       for n, src in (("aiter::gemm_a8w8", AITER + "/gemm_op_a8w8.py: gemm_a8w8(XQ, WQ [N, K], x_scale, w_scale, "
                       "bias, dtype, splitK)"),
                      ("aiter::gemm_a8w8_blockscale", AITER + "/gemm_op_a8w8.py: gemm_a8w8_blockscale(XQ, WQ, "
                       "x_scale, w_scale, dtype, ...)"),
                      ("sgl_kernel::fp8_blockwise_scaled_mm", SGL + ": fp8_blockwise_scaled_mm(mat_a, mat_b, "
                       "scales_a, scales_b, out_dtype)"),
                      ("sgl_kernel::int8_scaled_mm", SGL + ": int8_scaled_mm(mat_a, mat_b, scales_a, scales_b, "
                       "out_dtype, bias)"))},
    **{n: EngineOp("gemm", Roles(named={"a": 1, "b": 2}), src + f": {n.split('::')[1]}(output!, mat_a, mat_b)")
       for n, src in (("_C::dsv3_fused_a_gemm", VLLM), ("sgl_kernel::dsv3_fused_a_gemm", SGL),
                      ("sgl_kernel::dsv3_router_gemm", SGL), ("_C::fp32_router_gemm", VLLM))},
    "_C::cutlass_scaled_mm_azp": EngineOp("gemm", Roles(reads=(3, 4, 5), named={"a": 1, "b": 2}),
                                          VLLM + ": cutlass_scaled_mm_azp(out!, a, b, a_scales, b_scales, azp_adj, "
                                          "azp?, bias?)"),
    "flashinfer::cutlass_fused_moe": EngineOp(
        "moe", Roles(named={"hidden": 1, "w1": 4, "w2": 6, "topk_ids": 2}),
        "FlashInfer fused_moe/core.py: cutlass_fused_moe(output!, input, token_selected_experts, "
        "token_final_scales, fc1_expert_weights, fc1_expert_biases, fc2_expert_weights, ...)"),
    "flashinfer::append_paged_kv_cache": EngineOp(
        "cache_write", Roles(named={"k": 0, "v": 1, "cache": 4}),
        "FlashInfer page.py: append_paged_kv_cache(append_key, append_value, batch_indices, positions, "
        "paged_k_cache!, paged_v_cache!, kv_indices, kv_indptr, kv_last_page_len, layout)"),
    "flashinfer::append_paged_mla_kv_cache": EngineOp(
        "cache_write", Roles(named={"k": 0, "v": 1, "cache": 4}),
        "FlashInfer page.py: append_paged_mla_kv_cache(append_ckv, append_kpe, batch_indices, positions, "
        "ckv_cache!, kpe_cache!, kv_indices, kv_indptr, kv_last_page_len)"),
    # vLLM ROCm skinny GEMMs (csrc/rocm/torch_bindings.cpp @ 001cd451): a weight and activations sharing K, in
    # either order (the GEMM rule matches the contracting dim)
    **{f"_rocm_C::{n}": EngineOp("gemm", Roles(reads=extra, named={"a": 1, "b": 0}),
                                 f"vLLM csrc/rocm/torch_bindings.cpp: {n}(in_a, in_b, {args})")
       for n, extra, args in (("LLMM1", (), "rows_per_block"), ("wvSplitK", (2,), "in_bias?, CuCount"),
                              ("wvSplitKrc", (2,), "in_bias?, CuCount"),
                              ("wvSplitKQ", (2, 4, 5), "in_bias?, out_c!, scale_a, scale_b, CuCount"))},
    "aiter::fused_moe_": EngineOp("moe", Roles(named={"hidden": 0, "w1": 1, "w2": 2, "topk_ids": 4}),
                                  AITER + " fused_moe.py: fused_moe_(hidden_states, w1, w2, topk_weight, topk_ids, "
                                  "expert_mask?, ...)"),
    # memory-bound: merging partial attention results, top-k and sampling over the logits (tensors moved once)
    "_C::merge_attn_states": EngineOp("memory", Roles(), VLLM + ": merge_attn_states(output!, output_lse!?, "
                                      "prefix_output, prefix_lse, suffix_output, suffix_lse, ...)"),
    "sgl_kernel::merge_state_v2": EngineOp("memory", Roles(), SGL + ": merge_state_v2(v_a, s_a, v_b, s_b, "
                                           "v_merged!, s_merged!)"),
    **{f"_C::{n}": EngineOp("memory", Roles(), VLLM + f": {n}(logits, ...)")
       for n in ("top_k_per_row_prefill", "top_k_per_row_decode", "persistent_topk", "apply_repetition_penalties_")},
    **{f"flashinfer::{n}": EngineOp("memory", Roles(), f"FlashInfer sampling.py: {n}(...)")
       for n in ("top_k_renorm_probs", "top_k_mask_logits", "softmax")},
    "sgl_kernel::moe_fused_gate": EngineOp("memory", Roles(), SGL + ": moe_fused_gate(input, bias, ...)"),
}
# fmt: on

#: name words -> family, for an op that is not in ENGINE_OPS (first match wins; checked on the part of the
#: name after "::", lower case)
FAMILY_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cache_write", ("reshape_and_cache", "store_cache", "store_kv", "concat_and_cache", "set_kv_buffer")),
    ("attention", ("attention", "attn", "mha", "fmha", "mla_decode", "batch_prefill", "batch_decode")),
    ("moe", ("fused_experts", "fused_moe", "moe_forward")),
    ("norm", ("rmsnorm", "rms_norm", "layernorm", "layer_norm")),
    ("rotary", ("rotary", "rope")),
    ("activation", ("_and_mul", "and_mul", "swiglu")),
    ("quantize", ("quant",)),
    ("gemm", ("gemm", "scaled_mm", "_mm", "matmul")),
    ("memory", ("topk", "sort_tokens", "sorttokens", "moe_align", "moe_sum", "sampl")),
)

#: collective words -> cost/cost.py Comm kind, for any implementation (NCCL/RCCL kernels are priced from
#: their own args in kineto.py; these are the ops: symm_mem, _c10d_functional, custom all-reduces)
_COLLECTIVE_WORDS = (
    ("reduce_scatter", "reduce-scatter"), ("all_gather", "all-gather"), ("allgather", "all-gather"),
    ("all_to_all", "all-to-all"), ("alltoall", "all-to-all"), ("all_reduce", "all-reduce"),
    ("allreduce", "all-reduce"),
)  # fmt: skip


def collective_kind(name: str) -> str | None:
    """The collective an op of any implementation runs (its name after ``::``), or None."""
    base = name.rsplit("::", 1)[-1].lower()
    return next((kind for word, kind in _COLLECTIVE_WORDS if word in base), None)


#: TorchInductor's generated Triton kernels, named by kind: pointwise, reduction, persistent reduction
#: (torch/_inductor/codegen/triton.py); each reads and writes its buffers once
INDUCTOR_MEMORY = ("triton_poi_", "triton_red_", "triton_per_")


def family_of(name: str) -> str | None:
    """The family of an op not in :data:`ENGINE_OPS` by the words of its name (after ``::``), or None;
    aten ops have their own rules and are not guessed."""
    if name.startswith("aten::"):
        return None
    if name.startswith(INDUCTOR_MEMORY):
        return "memory"
    base = name.rsplit("::", 1)[-1].lower()
    return next((fam for fam, words in FAMILY_WORDS if any(w in base for w in words)), None)


#: report category of an engine op by its family (the others: by their name, analysis/compare.py)
FAMILY_CATEGORY = {"attention": "attention", "moe": "mlp", "activation": "mlp",
                   "scan": "attention", "conv1d": "attention"}  # fmt: skip


def op_family(name: str) -> str | None:
    """The family of an engine op: by its schema (the attention table of
    :mod:`rooftop.analysis.torch.attention_ops`, :data:`ENGINE_OPS`), else by its name's words."""
    if attention_op(name) is not None:
        return "attention"
    if name in QUANT_OPS:
        return quant_family(QUANT_OPS[name])
    if name in SCAN_OPS:  # linear attention, SSM scans, their conv1d (scan_ops.py)
        return scan_family(SCAN_OPS[name])
    entry = ENGINE_OPS.get(name)
    return entry.family if entry is not None else family_of(name)


def family_category(name: str) -> str | None:
    """The report category an engine op's family gives it ("communication" for any collective), or None."""
    if collective_kind(name):
        return "communication"
    return FAMILY_CATEGORY.get(op_family(name) or "")


def generic_roles(op: TorchOp, family: str) -> Roles:
    """How an op of a known family but unknown schema is read: its tensor arguments in order; the
    largest ones are caches (cache writes) or activations; the first three are q, k, v (attention); the
    first two 2-D ones a GEMM's operands; every tensor moved once (memory-bound families)."""
    tensors = [i for i in op.reads() if op.tensor(i) is not None]
    if family == "attention":
        return Roles(named=dict(zip(("q", "k", "v"), tensors, strict=False)))
    if family == "rotary":
        ints = [i for i in tensors if op.dtype(i) == "int32"]
        floats = [i for i in tensors if i not in ints]
        named = {"positions": ints[0]} if ints else {}
        named.update(zip(("q", "k"), floats, strict=False))
        return Roles(named=named)
    if family == "cache_write":
        by_size = sorted(tensors, key=op.elements)
        small = [i for i in tensors if i in by_size[: max(len(by_size) - 2, 0)]]
        floats = [i for i in small if op.dtype(i) != "int32"]
        named = dict(zip(("k", "v"), floats, strict=False))
        if len(by_size) >= 2:
            named["cache"] = by_size[-1]
        return Roles(named=named)
    if family == "gemm":
        two = [i for i in tensors if len(op.dims[i]) == 2]
        return Roles(named=dict(zip(("a", "b"), two, strict=False)))
    if family == "moe":  # the activations [T, H], the expert weights [E, a, b], the routed ids [T, k] (integers)
        named = dict(zip(("w1", "w2"), [i for i in tensors if len(op.dims[i]) == 3], strict=False))
        hidden = [i for i in tensors if len(op.dims[i]) == 2 and not op.dtype(i).startswith("int")]
        ids = [i for i in tensors if len(op.dims[i]) == 2 and op.dtype(i).startswith("int")]
        named |= {"hidden": hidden[0]} if hidden else {}
        return Roles(named=named | ({"topk_ids": ids[0]} if ids else {}))
    return Roles(reads=tuple(tensors), add=family == "norm" and "add" in op.name.rsplit("::", 1)[-1].lower())


def _failed(op: TorchOp, family: str, exc: Exception) -> Reason:
    """Why an engine op has no price: its rule refused its arguments (the error's text kept)."""
    return Reason(ReasonCode.TORCH_RULE_ERROR, (("error", str(exc)), ("family", family), ("op", op.name)))


def engine_price(op: TorchOp, stats: SeqStats | None = None) -> Price | None:
    """The Price of an engine op by its family (None when neither the table nor its name gives one);
    ``stats``: the lengths of the step it ran in, for attention over a paged cache."""
    attn = attention_op(op.name)
    if attn is not None:  # attention read by its schema
        try:
            return varlen_attention(op, attn.spec, stats)
        except (InvalidConfigError, IndexError, ValueError, ZeroDivisionError) as exc:
            return Price(None, _failed(op, "attention", exc))
    quant = QUANT_OPS.get(op.name)
    if quant is not None:  # packed, fp4 and grouped GEMMs, MoE routed inside the op
        try:
            return quant_price(op, quant)
        except (InvalidConfigError, IndexError, ValueError, ZeroDivisionError) as exc:
            return Price(None, _failed(op, quant_family(quant), exc))
    if op.name in SCAN_OPS:  # linear attention, SSM scans, their conv1d
        return scan_price(op, SCAN_OPS[op.name], stats)
    entry = ENGINE_OPS.get(op.name)
    family = entry.family if entry is not None else family_of(op.name)
    if family is None:
        return None
    roles = entry.roles if entry is not None else generic_roles(op, family)
    try:
        price = attention(op, roles, stats) if family == "attention" else RULES[family](op, roles)
    except (InvalidConfigError, IndexError, KeyError, ValueError, ZeroDivisionError) as exc:
        return Price(None, _failed(op, family, exc))
    if entry is None and price.cost is not None:
        what = Reason.of(ReasonCode.TORCH_BY_FAMILY, what=price.what, family=family, op=op.name)
        price = Price(price.cost, what, price.tag)
    return price
