"""Cost rules for the custom ops LLM serving engines register with PyTorch (SGLang's ``sgl_kernel`` and
``sglang``, AMD's AITER), priced from the Input Dims the trace records, like the aten rules of
:mod:`rooftop.analysis.torch.ops` (which looks here for a name it has no rule for).

Argument positions are those of each op's schema as the trace records it (``Input Dims`` /
``Concrete Inputs``): SGLang's ``sgl-kernel`` and ``python/sglang/srt/layers`` registrations and AITER's
``aiter/ops`` declarations. Each rule says what it assumes in the ``what`` of its Price.

- norms (``aiter::rmsnorm``, ``aiter::add_rmsnorm``) and ``sgl_kernel::silu_and_mul``: vector ops, one
  read of each input and one write of each output, FLOPs per element as the aten norms and SwiGLU count;
- ``sgl_kernel::rotary_embedding``: q and k rotated in place (read and written once), one row of the
  cos/sin cache read per token, 3 FLOPs per rotated element (two products and a sum);
- ``sglang::store_cache``: the new tokens' K and V written into the paged cache (read once, written once);
- ``aiter::mha_batch_prefill``: fused attention over a batch of sequences packed in one [T, H, D] query:
  the number of sequences from ``qo_indptr`` (its length less one) and the tokens of K/V actually read
  from ``kv_indices``; sequence lengths are not recorded (only their sums), so each sequence is priced as
  T / n queries over its share of the keys. Equal lengths give the least work (a sum of squares is
  smallest when the parts are equal), so the roofline stays a lower bound.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from rooftop.analysis.torch.op import Price, TorchOp, Vec, vector_price
from rooftop.cost.op import attended_pairs, explicit, fused_attention_flops
from rooftop.dtypes import dtype_bytes
from rooftop.model.config import MLP_KINDS, NORM_KINDS
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason

Rule = Callable[[TorchOp], Price]
_RMS = NORM_KINDS["rmsnorm"].flops_per_element
_SILU = MLP_KINDS["swiglu"].flops_per_element - 1  # less the gate product (as the aten silu rule)

#: FLOPs per rotated element of a rotary embedding: x1 cos - x2 sin (and its partner)
ROTARY_FLOPS_PER_ELEMENT = 3.0


def _rotary(op: TorchOp) -> Price:
    """(positions [T], query [T, Hq*D], key [T, Hk*D], head_size, cos_sin_cache [P, D], is_neox)."""
    positions, q, k = op.need(0, 1, 2)
    cache = op.need(4)[0]
    tokens = positions[0]
    moved = 2 * (op.nbytes(1) + op.nbytes(2)) + op.nbytes(0) + tokens * cache[-1] * dtype_bytes(op.dtype(4))
    elements = float(op.elements(1) + op.elements(2))
    cost = explicit(ROTARY_FLOPS_PER_ELEMENT * elements, moved, op.dtype(1), "vector")
    return Price(cost, Reason.of(ReasonCode.TORCH_ROTARY_CACHE, q=q, k=k, tokens=tokens))


def _store_cache(op: TorchOp) -> Price:
    """(k [T, Hk*D], v [T, Hk*D], k_cache, v_cache, loc [T], ...): T rows written into each cache."""
    k, v = op.need(0, 1)
    moved = 2 * (op.nbytes(0) + op.nbytes(1)) + op.nbytes(4)
    return Price(explicit(0.0, moved, op.dtype(0), "vector"), Reason.of(ReasonCode.TORCH_CACHE_STORE, k=k, v=v))


def _batch_prefill(op: TorchOp) -> Price:
    """(q [T, Hq, D], k_cache [P, Hk, D], v_cache, qo_indptr [n+1], kv_indptr [n+1], kv_indices [K],
    max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, logits_soft_cap, zero_tensors, is_causal, ...)."""
    q, k, v, qo_indptr = op.need(0, 1, 2, 3)
    tokens, heads, d_qk = q
    kv_heads, d_v = k[1], v[2]
    sequences = max(1, qo_indptr[0] - 1)
    indices = op.tensor(5)
    kv_tokens = indices[0] if indices else tokens
    causal = op.flag(12)
    q_len, kv_len = tokens // sequences, max(tokens, kv_tokens) // sequences
    flops = fused_attention_flops(sequences, heads, q_len, kv_len, d_qk, d_v, bool(causal))
    dt = op.dtype(0)
    kv_read = float(kv_tokens * kv_heads * (d_qk + d_v)) * dtype_bytes(op.dtype(1))
    moved = op.nbytes(0) + kv_read + float(tokens * heads * d_v) * dtype_bytes(dt)
    pairs = attended_pairs(q_len, kv_len, 0, bool(causal))
    what = Reason.of(ReasonCode.TORCH_BATCH_PREFILL, sequences=sequences, q_len=q_len, kv_len=kv_len, heads=heads,
                     kv_heads=kv_heads, pairs=pairs, causal=bool(causal))  # fmt: skip
    return Price(explicit(flops, moved, dt, "matrix"), what, "causal" if causal else "")


#: custom op name -> rule
CUSTOM: dict[str, Rule] = {
    "aiter::rmsnorm": partial(vector_price, spec=Vec(_RMS, reads=(1, 2), out=0)),  # (out, input, weight, eps)
    # (out, input, residual_in, residual_out, weight, eps): the sum is written as the new residual too
    "aiter::add_rmsnorm": partial(vector_price, spec=Vec(_RMS + 1, reads=(1, 2, 4), out=0, outputs=2)),
    "sgl_kernel::silu_and_mul": partial(vector_price, spec=Vec(_SILU + 1, reads=(1,), out=0)),  # (out, input [T, 2F])
    "sgl_kernel::rotary_embedding": _rotary,
    "sglang::store_cache": _store_cache,
    "aiter::mha_batch_prefill": _batch_prefill,
}
