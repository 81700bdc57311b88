"""Quantized and grouped GEMMs and fused MoE ops of LLM engines whose weights are packed (several values in
one stored element) or whose routing is an integer argument, priced by what their registered schema says
each argument is (:data:`QUANT_OPS`, each with its source), by :func:`quantized_gemm` and :func:`routed_moe`.

A GEMM of activations [M, K] by a weight holding K x N values is 2 M N K FLOPs; it reads the activations,
the weight as stored (packed) and its scales/zeros once, and writes [M, N] (bf16 when the activations are
8-bit or 4-bit, else in their dtype). What the shapes say of N and K:

- an int32 weight packs 32 / bits values per element (GPTQ/AWQ: ``bits`` an argument, AWQ 4): N = its
  elements x 32 / bits / K; or N is an argument (Marlin's ``size_n``);
- fp4 (NVFP4/MXFP4) GEMMs pack two values a byte in both operands ([M, K/2] by [N, K/2]): K = 2 x a's last
  dim;
- a grouped GEMM multiplies each row of a [M, K] (rows already permuted by expert) by one expert's
  [N, K] (or [K, N]) slice of b [E, N, K]: 2 M N K FLOPs, and min(E, M) experts' weights read (uniform
  routing, as the fused-MoE rule).

A fused MoE whose top-k is an integer argument (it routes from the logits itself) is priced as the fused-MoE
family (:func:`rooftop.analysis.torch.families.moe`) with that top-k: its [T, k] routed ids are counted as
read in int32, standing for the router logits it reads; fp4 activations (a byte holding two values) are
read as H bytes a token, not H / 2 (the weights, read once per reached expert, dominate).

Sources (argument order of each schema; studied, not copied): vLLM ``csrc/torch_bindings.cpp`` @ 00256d59
(``gptq_gemm``, ``awq_gemm``, ``marlin_gemm``, ``dsv3_fused_a_gemm``) and ``csrc/libtorch_stable/
torch_bindings.cpp`` @ 0135b6c0 (the CUTLASS fp4 and grouped GEMMs); SGLang ``sgl-kernel/csrc/
common_extension.cc`` @ 0063ef14; AITER ``aiter/ops/gemm_op_a4w4.py`` @ e4048607; FlashInfer
``flashinfer/fused_moe/core.py`` @ fb28d724."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from rooftop.analysis.torch.families import Roles, moe
from rooftop.analysis.torch.op import Price, TorchOp, fmt_shape
from rooftop.analysis.torch.sources import SGL, VLLM
from rooftop.cost.op import explicit
from rooftop.dtypes import dtype_bytes
from rooftop.errors import InvalidConfigError
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason


@dataclass(frozen=True)
class Mm:
    """Which argument of a quantized GEMM is what: ``a`` activations [M, K], ``b`` the weight, ``reads``
    its scales/zeros; ``n``: an int argument giving N; ``bits``: an int argument giving the weight's bits
    (else ``default_bits``); ``fp4``: both operands two values a byte; ``grouped``: b is [E, N, K]."""

    a: int
    b: int
    reads: tuple[int, ...] = ()
    n: int | None = None
    bits: int | None = None
    default_bits: int = 4
    fp4: bool = False
    grouped: bool = False


@dataclass(frozen=True)
class Moe:
    """A fused MoE routed inside the op: hidden [T, H], gate/up and down weights, and the top-k argument."""

    hidden: int
    w1: int
    w2: int
    top_k: int


class QuantOp(NamedTuple):
    spec: Mm | Moe
    source: str


_VLLM_STABLE = "vLLM csrc/libtorch_stable/torch_bindings.cpp @ 0135b6c0 (namespace _C)"

# fmt: off
#: op name -> (which argument is what, source of the schema)
QUANT_OPS: dict[str, QuantOp] = {
    "_C::gptq_gemm": QuantOp(Mm(0, 1, (2, 3), bits=7), VLLM + ": gptq_gemm(a, b_q_weight, b_gptq_qzeros, "
                             "b_gptq_scales, b_g_idx, use_exllama, use_v2_format, bit)"),
    "sgl_kernel::gptq_gemm": QuantOp(Mm(0, 1, (2, 3), bits=6), SGL + ": gptq_gemm(a, b_q_weight, b_gptq_qzeros, "
                                     "b_gptq_scales, b_g_idx, use_shuffle, bit)"),
    "_C::awq_gemm": QuantOp(Mm(0, 1, (2, 3)), VLLM + ": awq_gemm(_in_feats, _kernel, _scaling_factors, _zeros, "
                            "split_k_iters) (4-bit)"),
    "_C::marlin_gemm": QuantOp(Mm(0, 2, (4,), n=13), VLLM + ": marlin_gemm(a, c?, b_q_weight, b_bias?, b_scales, "
                               "a_scales?, global_scale?, b_zeros?, g_idx?, perm?, workspace, b_type_id, size_m, "
                               "size_n, size_k, ...)"),
    "sgl_kernel::gptq_marlin_gemm": QuantOp(Mm(0, 2, (3,), n=11), SGL + ": gptq_marlin_gemm(a, c?, b_q_weight, "
                                            "b_scales, global_scale?, b_zeros?, g_idx?, perm?, workspace, "
                                            "b_q_type_id, size_m, size_n, size_k, ...)"),
    "sgl_kernel::cutlass_scaled_fp4_mm": QuantOp(Mm(1, 2, (3, 4), fp4=True), SGL + ": cutlass_scaled_fp4_mm(out!, "
                                                 "a, b, block_scale_a, block_scale_b, alpha)"),
    "aiter::gemm_a4w4": QuantOp(Mm(0, 1, (2, 3), fp4=True), "AITER aiter/ops/gemm_op_a4w4.py: gemm_a4w4(A [M, K/2], "
                                "B [N, K/2], A_scale, B_scale, bias, ...)"),
    **{f"_C::{n}": QuantOp(spec, _VLLM_STABLE + f": {n}(out!, a, b, {rest})")
       for n, spec, rest in (
           ("cutlass_scaled_fp4_mm", Mm(1, 2, (3, 4), fp4=True), "block_scale_a, block_scale_b, alpha"),
           ("cutlass_fp4_group_mm", Mm(1, 2, (3, 4), fp4=True, grouped=True),
            "a_blockscale, b_blockscales, alphas, problem_sizes, expert_offsets, sf_offsets"),
           ("cutlass_mxfp4_group_mm", Mm(1, 2, (3, 4), fp4=True, grouped=True),
            "a_blockscale, b_blockscales, problem_sizes, expert_offsets, sf_offsets"),
           ("cutlass_moe_mm", Mm(1, 2, (3, 4), grouped=True), "a_scales, b_scales, expert_offsets, problem_sizes, "
            "a_strides, b_strides, c_strides, per_act_token, per_out_ch"))},
    "sgl_kernel::cutlass_fp4_group_mm": QuantOp(Mm(1, 2, (3, 4), fp4=True, grouped=True),
                                                SGL + ": cutlass_fp4_group_mm(output!, a, b, a_blockscale, "
                                                "b_blockscale, alphas, ab_strides, c_strides, problem_sizes, "
                                                "expert_offsets, sf_offsets)"),
    "sgl_kernel::fp8_blockwise_scaled_grouped_mm": QuantOp(
        Mm(6, 7, (8, 9), grouped=True), SGL + ": fp8_blockwise_scaled_grouped_mm(output, a_ptrs, b_ptrs, out_ptrs, "
        "a_scales_ptrs, b_scales_ptrs, a, b, scales_a, scales_b, ...)"),
    "flashinfer::trtllm_bf16_moe": QuantOp(
        Moe(hidden=5, w1=6, w2=7, top_k=10), "FlashInfer fused_moe/core.py: trtllm_bf16_moe(routing_input_mode, "
        "routing_logits?, routing_bias?, topk_ids?, expert_weights?, hidden_states, gemm1_weights, gemm2_weights, "
        "gemm1_lora_delta?, num_experts, top_k, ...)"),
    "flashinfer::trtllm_fp8_per_tensor_scale_moe": QuantOp(
        Moe(hidden=2, w1=3, w2=6, top_k=9), "FlashInfer fused_moe/core.py: trtllm_fp8_per_tensor_scale_moe("
        "routing_logits, routing_bias?, hidden_states, gemm1_weights, output1_scales_scalar, "
        "output1_scales_gate_scalar, gemm2_weights, output2_scales_scalar, num_experts, top_k, ...)"),
    "flashinfer::trtllm_fp4_block_scale_moe": QuantOp(
        Moe(hidden=5, w1=7, w2=14, top_k=22), "FlashInfer fused_moe/core.py: trtllm_fp4_block_scale_moe("
        "routing_input_mode, routing_logits?, topk_ids?, topk_weights?, routing_bias?, hidden_states, "
        "hidden_states_scale?, gemm1_weights, gemm1_weights_scale, gemm1_bias?, ..., gemm2_weights (14), ..., "
        "num_experts, top_k (22), ...)"),
    "flashinfer::trtllm_fp8_block_scale_moe": QuantOp(
        Moe(hidden=5, w1=7, w2=13, top_k=17), "FlashInfer fused_moe/core.py: trtllm_fp8_block_scale_moe("
        "routing_input_mode, routing_logits?, topk_ids?, expert_weights?, routing_bias?, hidden_states, "
        "hidden_states_scale, gemm1_weights, gemm1_weights_scale, ..., gemm2_weights, gemm2_weights_scale, output?, "
        "num_experts, top_k, ...)"),
}
# fmt: on

_OUT_WIDE = ("fp8", "int8", "int32", "fp4")  # activations so narrow the output is bf16


def _n_of(op: TorchOp, spec: Mm, k: int) -> int:
    """N of the GEMM (module docstring)."""
    given = op.ints(spec.n, 1) if spec.n is not None else None
    if given:
        if given[0] < 1:
            raise InvalidConfigError(f"size_n {given[0]} is not a count")
        return given[0]
    a, b = op.need(spec.a, spec.b)
    if spec.grouped or spec.fp4:
        tail = b[-2:]
        if len(tail) != 2 or a[-1] not in tail:
            raise InvalidConfigError(f"weight {fmt_shape(b)} has no dim {a[-1]} to contract with {fmt_shape(a)}")
        return tail[0] if tail[1] == a[-1] else tail[1]
    if op.dtype(spec.b) != "int32":
        raise InvalidConfigError(f"weight {fmt_shape(b)} {op.dtype(spec.b)} is not int32-packed")
    bits = (op.ints(spec.bits, 1) if spec.bits is not None else None) or (spec.default_bits,)
    if bits[0] not in (2, 3, 4, 8):
        raise InvalidConfigError(f"{bits[0]}-bit weights")
    values = op.elements(spec.b) * 32 / bits[0]
    if values % k:
        raise InvalidConfigError(f"weight {fmt_shape(b)} of {bits[0]}-bit values is no multiple of K={k}")
    return int(values // k)


def quantized_gemm(op: TorchOp, spec: Mm) -> Price:
    """2 M N K FLOPs; the activations, the stored weight (min(E, M) of E experts' when grouped), the scales
    read and [M, N] written."""
    a, b = op.need(spec.a, spec.b)
    k = a[-1] * (2 if spec.fp4 else 1)
    m = math.prod(a[:-1])
    n = _n_of(op, spec, k)
    a_dt = op.dtype(spec.a)
    out = float(m * n) * dtype_bytes("bf16" if a_dt in _OUT_WIDE else a_dt)
    experts = b[0] if spec.grouped and len(b) == 3 else 1
    weights = op.nbytes(spec.b) * min(experts, m) / experts
    scales = sum(op.nbytes(i) for i in spec.reads if op.tensor(i) is not None)
    moved = op.nbytes(spec.a) + weights + scales + out
    dt = "fp4" if spec.fp4 else op.dtype(spec.b) if op.dtype(spec.b) in ("fp8", "int8") else a_dt
    what = Reason(ReasonCode.TORCH_QUANT_GEMM, (("dtype", op.dtype(spec.b)), ("experts", experts), ("fp4", spec.fp4),
                                                ("grouped", spec.grouped), ("k", k), ("m", m), ("n", n),
                                                ("reached", min(experts, m)), ("weight", b)))  # fmt: skip
    return Price(explicit(2.0 * m * n * k, moved, dt, "matrix"), what)


def routed_moe(op: TorchOp, spec: Moe) -> Price:
    """The fused-MoE family's price with the op's top-k argument standing for routed ids [T, k] (int32)."""
    top_k = op.ints(spec.top_k, 1)
    hidden = op.tensor(spec.hidden)
    if not top_k or top_k[0] < 1 or hidden is None:
        return Price(None, Reason(ReasonCode.TORCH_MOE_NOT_RECORDED, (("op", op.name),)))
    tokens = math.prod(hidden[:-1])
    dims = list(op.dims)
    if op.dtype(spec.hidden) == "int8" and op.dtype(spec.w1) == "int8":  # fp4 activations too: two a byte
        dims[spec.hidden] = (*hidden[:-1], 2 * hidden[-1])
    with_ids = TorchOp(op.name, (*dims, (tokens, top_k[0])), (*op.types, "int"),
                       (*op.concrete, *[""] * max(0, len(op.dims) + 1 - len(op.concrete))))  # fmt: skip
    roles = Roles(named={"hidden": spec.hidden, "w1": spec.w1, "w2": spec.w2, "topk_ids": len(op.dims)})
    return moe(with_ids, roles)


def quant_price(op: TorchOp, entry: QuantOp) -> Price:
    return routed_moe(op, entry.spec) if isinstance(entry.spec, Moe) else quantized_gemm(op, entry.spec)


def quant_family(entry: QuantOp) -> str:
    return "moe" if isinstance(entry.spec, Moe) else "gemm"
