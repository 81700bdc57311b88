"""Attention ops of LLM engines over packed (variable-length) batches and paged KV caches, priced by what
their registered schema says each argument is (:data:`ATTENTION_OPS`, each with its source), and the rule
that prices them (:func:`varlen_attention`).

What an attention call computes is fixed by its queries, its keys and its heads: 2 (D_qk + D_v) FLOPs per
attended (query, key) pair and query head (cost/op.py ``fused_attention_flops``), and it reads its queries,
the keys and values of its KV heads once, and writes its output once. What the shapes say:

- dense [B, S, H, D] q/k/v (flash-attn, AITER ``mha_fwd``): the lengths are the shapes; causal when the op
  records it; a backward pass x ATTENTION_BACKWARD_FACTOR (cost/op.py);
- packed [T, H, D] queries with cumulative offsets [B + 1] (``cu_seqlens_q`` / ``qo_indptr``): B sequences;
  packed [T_k, H_k, D] keys give their total; a paged cache [pages, page, H_k, D] (NHD) or
  [pages, H_k, page, D] (HND) gives the keys only through the pages a call uses (``kv_indices``: at least
  (pages - B) full pages and one key on each sequence's last page: a lower bound);
- the lengths of each request, when the engine annotates its step (vLLM's ``execute_...``,
  :class:`~rooftop.analysis.torch.families.SeqStats`), and the call covers the whole batch (its queries
  number at least the step's): exact pairs.

A left window W (sliding-window attention, as the op records it) caps the keys a query sees
(cost/op.py ``attended_pairs``); with only the annotation's sums, the pairs are capped at sq x W and the
keys read at requests x (W - 1) + sq (bounds of the windowed work, not its exact value).

Sequences within a call are taken as equal in length when only sums are known: a sum of squares is least
when its parts are equal, so the pairs (and the roofline) stay a lower bound. Keys only known as values in
a tensor (``seq_lens``) and no annotation: no price, and the reason says so.

Sources (argument order of each schema; studied, not copied): vLLM ``csrc/torch_bindings.cpp`` @ 00256d59
(``paged_attention_v1/v2``, ``sm100_cutlass_mla_decode``); vllm-project/flash-attention
``csrc/flash_attn/flash_api_torch_lib.cpp`` and ``hopper/flash_api_torch_lib.cpp`` @ 617264c1
(``_vllm_fa2_C::varlen_fwd``, ``_vllm_fa3_C::fwd``); Dao-AILab/flash-attention ``flash_attn/
flash_attn_interface.py`` and ``hopper/flash_attn_interface.py`` @ 0251105a; FlashInfer ``flashinfer/
decode.py`` / ``prefill.py`` / ``utils.py`` (MaskMode, TensorLayout) @ fb28d724; AITER ``aiter/ops/mha.py``
/ ``attention.py`` @ e4048607; SGLang ``sgl-kernel/csrc/common_extension.cc`` @ 0063ef14."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from rooftop.analysis.torch.families import SeqStats
from rooftop.analysis.torch.op import Price, TorchOp, fmt_shape
from rooftop.analysis.torch.sources import AITER, SGL, VLLM
from rooftop.cost.op import ATTENTION_BACKWARD_FACTOR, attended_pairs, explicit
from rooftop.dtypes import dtype_bytes
from rooftop.errors import InvalidConfigError
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason


@dataclass(frozen=True)
class Attn:
    """Which argument of an attention op is what (positions in its schema; None: absent).

    ``q``, ``k``, ``v``: queries and keys/values (``v`` None: the latent cache of MLA, read once as both);
    ``q_pe``: the rotary part of an MLA query (D_qk = its width + q's); ``out``: the output (its last dim
    is D_v); ``cu_q`` / ``cu_k``: cumulative offsets [B + 1]; ``pages``: the page indices a call uses;
    ``table``: a block table argument (when given, k and v are a paged cache); ``causal``: a bool (or
    FlashInfer's mask-mode int, 1 = causal) argument; ``window``: the left window (keys before the query a
    query sees; -1: all); ``layout``: FlashInfer's TensorLayout argument (0 NHD,
    1 HND); ``kv_heads``: an int argument giving H_k; ``cache_kv_axis``: the
    axis of a paged cache holding H_k (vLLM's [pages, H_k, D/x, page, x] key cache: 1); ``decode``: one
    query per sequence unless offsets say otherwise; ``backward``: the backward pass."""

    q: int
    k: int
    v: int | None = None
    q_pe: int | None = None
    out: int | None = None
    cu_q: int | None = None
    cu_k: int | None = None
    pages: int | None = None
    causal: int | None = None
    window: int | None = None
    layout: int | None = None
    kv_heads: int | None = None
    cache_kv_axis: int | None = None
    table: int | None = None
    paged: bool = False
    decode: bool = False
    backward: bool = False


class AttnOp(NamedTuple):
    spec: Attn
    source: str


_VFA = "vllm-project/flash-attention flash_api_torch_lib.cpp"
_FA = "flash-attn flash_attn_interface.py"
_FI = "FlashInfer"

# fmt: off
#: op name -> (which argument is what, source of the schema)
ATTENTION_OPS: dict[str, AttnOp] = {
    # paged_attention_v1(out!, query [B, H, D], key_cache [P, Hk, D/x, page, x], value_cache, num_kv_heads, ...)
    "_C::paged_attention_v1": AttnOp(Attn(q=1, k=2, v=3, out=0, kv_heads=4, cache_kv_axis=1, paged=True, decode=True),
                                     VLLM + ": paged_attention_v1(out!, query, key_cache, value_cache, num_kv_heads, "
                                     "scale, block_tables, seq_lens, ...)"),
    "_C::paged_attention_v2": AttnOp(Attn(q=4, k=5, v=6, out=0, kv_heads=7, cache_kv_axis=1, paged=True, decode=True),
                                     VLLM + ": paged_attention_v2(out!, exp_sums!, max_logits!, tmp_out!, query, "
                                     "key_cache, value_cache, num_kv_heads, ...)"),
    "_rocm_C::paged_attention": AttnOp(Attn(q=4, k=5, v=6, out=0, kv_heads=7, cache_kv_axis=1, cu_q=11, paged=True,
                                            decode=True),
                                       "vLLM csrc/rocm/torch_bindings.cpp @ 001cd451: paged_attention(out!, exp_sums, "
                                       "max_logits, tmp_out, query, key_cache, value_cache, num_kv_heads, scale, "
                                       "block_tables, seq_lens, query_start_loc?, ...)"),
    "aiter::paged_attention_rocm": AttnOp(Attn(q=4, k=5, v=6, out=0, kv_heads=7, cache_kv_axis=1, paged=True,
                                               decode=True),
                                          AITER + "/attention.py: paged_attention_rocm(out, exp_sums, max_logits, "
                                          "tmp_out, query, key_cache, value_cache, num_kv_heads, ...)"),
    # MLA decode: q_nope [B, H, L], q_pe [B, H, R], latent cache [P, page, L + R] read once as keys and values
    "_C::sm100_cutlass_mla_decode": AttnOp(Attn(q=2, q_pe=3, k=4, out=0, paged=True, decode=True),
                                           VLLM + ": sm100_cutlass_mla_decode(out!, lse!, q_nope, q_pe, "
                                           "kv_c_and_k_pe_cache, seq_lens, page_table, workspace, ...)"),
    "sgl_kernel::cutlass_mla_decode": AttnOp(Attn(q=1, q_pe=2, k=3, out=0, paged=True, decode=True),
                                             SGL + ": cutlass_mla_decode(out!, q_nope, q_pe, kv_c_and_k_pe_cache, "
                                             "seq_lens, page_table, workspace!, sm_scale, num_kv_splits)"),
    # vLLM's flash-attention builds: packed [T, H, D] queries, a paged [P, page, Hk, D] cache or packed keys
    "_vllm_fa2_C::varlen_fwd": AttnOp(Attn(q=0, k=1, v=2, out=3, cu_q=4, cu_k=5, table=8, causal=15, window=16),
                                      _VFA + ": varlen_fwd(q!, k, v, out!?, cu_seqlens_q, cu_seqlens_k, seqused_k, "
                                      "leftpad_k, block_table, alibi_slopes, max_seqlen_q, max_seqlen_k, p_dropout, "
                                      "softmax_scale, zero_tensors, is_causal, ...)"),
    **{n: AttnOp(Attn(q=0, k=1, v=2, out=6, cu_q=7, cu_k=8, table=14, causal=24, window=25),
                 src + ": fwd(q, k, v, k_new, v_new, q_v, out, cu_seqlens_q, cu_seqlens_k, ..., page_table (14), "
                 "..., softmax_scale, is_causal (24), ...)")
       for n, src in (("_vllm_fa3_C::fwd", _VFA), ("flash_attn_3::_flash_attn_forward", "flash-attn hopper/"
                                                                                         "flash_attn_interface.py"))},
    "flash_attn::_flash_attn_forward": AttnOp(
        Attn(q=0, k=1, v=2, causal=5, window=6),
        _FA + ": _flash_attn_forward(q, k, v, dropout_p, softmax_scale, causal, window_size_left, ...)"),
    "flash_attn::_flash_attn_varlen_forward": AttnOp(
        Attn(q=0, k=1, v=2, cu_q=3, cu_k=4, table=15, causal=9, window=10),
        _FA + ": _flash_attn_varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, "
        "dropout_p, softmax_scale, causal, ...)"),
    "flash_attn::_flash_attn_backward": AttnOp(
        Attn(q=1, k=2, v=3, causal=11, window=12, backward=True),
        _FA + ": _flash_attn_backward(dout, q, k, v, out, softmax_lse, dq!, dk!, dv!, dropout_p, softmax_scale, "
        "causal, ...)"),
    "flash_attn::_flash_attn_varlen_backward": AttnOp(
        Attn(q=1, k=2, v=3, cu_q=9, cu_k=10, causal=15, window=16, backward=True),
        _FA + ": _flash_attn_varlen_backward(dout, q, k, v, out, softmax_lse, dq!, dk!, dv!, cu_seqlens_q, "
        "cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, causal, ...)"),
    "aiter::mha_fwd": AttnOp(Attn(q=0, k=1, v=2, causal=5, window=6), AITER + "/mha.py: mha_fwd(q, k, v, dropout_p, "
                             "softmax_scale, is_causal, ...)"),
    "aiter::mha_varlen_fwd": AttnOp(Attn(q=0, k=1, v=2, cu_q=3, cu_k=4, table=19, causal=12, window=13),
                                    AITER + "/mha.py: mha_varlen_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, "
                                    "max_seqlen_q, max_seqlen_k, min_seqlen_q, dropout_p, softmax_scale, "
                                    "logits_soft_cap, zero_tensors, is_causal, ...)"),
}
# fmt: on

#: FlashInfer's attention ops are registered per compiled variant, as ``flashinfer::{uri}_run`` (decode),
#: ``{uri}_paged_run`` and ``{uri}_ragged_run`` (prefill), the uri starting ``batch_decode_with_kv_cache`` or
#: ``batch_prefill_with_kv_cache`` (flashinfer/jit/attention/modules.py): (prefix, suffix) -> arguments
_FLASHINFER: tuple[tuple[str, str, AttnOp], ...] = (
    ("flashinfer::batch_decode_with_kv_cache", "_run", AttnOp(
        Attn(q=3, k=4, v=5, out=9, cu_k=6, pages=7, layout=11, window=12, paged=True, decode=True),
        _FI + " decode.py: {uri}_run(float_workspace, int_workspace, plan_info, q, paged_k_cache, paged_v_cache, "
        "paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, o, maybe_lse, kv_layout_code, ...)")),
    ("flashinfer::batch_prefill_with_kv_cache", "_paged_run", AttnOp(
        Attn(q=3, k=4, v=5, out=10, cu_q=6, cu_k=7, pages=8, causal=12, layout=13, window=14, paged=True),
        _FI + " prefill.py: {uri}_paged_run(float_workspace, int_workspace, plan_info, q, paged_k_cache, "
        "paged_v_cache, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, o, maybe_lse, "
        "mask_mode, layout, ...)")),
    ("flashinfer::batch_prefill_with_kv_cache", "_ragged_run", AttnOp(
        Attn(q=3, k=4, v=5, out=8, cu_q=6, cu_k=7, causal=10, layout=11, window=12),
        _FI + " prefill.py: {uri}_ragged_run(float_workspace, int_workspace, plan_info, q, k, v, qo_indptr, "
        "kv_indptr, o, maybe_lse, mask_mode, layout, ...)")),
)  # fmt: skip


def attention_op(name: str) -> AttnOp | None:
    """The schema reading of an engine attention op, by its registered name (FlashInfer's by the pattern its
    compiled variants are registered under), or None."""
    entry = ATTENTION_OPS.get(name)
    if entry is not None:
        return entry
    return next((e for pre, suf, e in _FLASHINFER if name.startswith(pre) and name.endswith(suf)), None)


def _count(op: TorchOp, i: int | None) -> int | None:
    """Entries of a 1-D index tensor argument (offsets [B + 1], page indices), or None when absent."""
    shape = op.tensor(i) if i is not None else None
    return int(shape[0]) if shape is not None and len(shape) == 1 else None


def _int(op: TorchOp, i: int | None) -> int | None:
    """A non-negative integer argument (a count, a layout code), or None when absent or negative."""
    values = op.ints(i, 1) if i is not None else None
    return values[0] if values and values[0] >= 0 else None


def _window(op: TorchOp, spec: Attn) -> int:
    """Keys a query sees at most (its left window and itself; 0: all)."""
    left = _int(op, spec.window)
    return left + 1 if left is not None else 0


class _Keys(NamedTuple):
    pairs: float  # attended (query, key) pairs summed over the sequences (per query head)
    keys: float  # keys read (summed over the sequences)
    how: Reason  # how the keys are known: TORCH_KEYS_ANNOTATED, _PACKED or _PAGED


def _cache_axes(op: TorchOp, spec: Attn, cache: tuple[int, ...]) -> tuple[int, int]:
    """(axis of H_k, axis of the page) of a paged cache: MLA's [P, page, D] has one KV head."""
    if len(cache) == 3:
        return -1, 1
    if spec.cache_kv_axis is not None:
        return spec.cache_kv_axis, 3
    hnd = _int(op, spec.layout) == 1  # FlashInfer TensorLayout: NHD = 0, HND = 1
    return (1, 2) if hnd else (2, 1)


def _keys(op: TorchOp, spec: Attn, q: tuple[int, int], stats: SeqStats | None, causal: bool) -> _Keys | ReasonCode:
    """The pairs and keys of a packed or paged call of ``q`` = (queries, sequences if the query's shape
    says so, else 0), or why they are not known (figures in sorted order: a Reason built once per op)."""
    tokens, window = q[0], _window(op, spec)
    if stats is not None and tokens >= stats.sq:  # the call covers the whole annotated batch
        pairs = stats.causal_pairs() if causal or spec.decode else float(stats.sqsk)
        keys = float(stats.sk)
        if window:  # each query sees at most W keys, each request reads at most its last W - 1 + sq keys
            pairs, keys = (
                min(pairs, float(stats.sq * window)),
                min(keys, float(stats.requests * (window - 1) + stats.sq)),
            )
        seen = (("requests", stats.requests), ("sk", stats.sk), ("sq", stats.sq), ("window", window))
        return _Keys(pairs, keys, Reason(ReasonCode.TORCH_KEYS_ANNOTATED, seen))
    offsets = _count(op, spec.cu_q) or _count(op, spec.cu_k)
    seqs = offsets - 1 if offsets else tokens if spec.decode else q[1]
    if not seqs or seqs < 1:
        return ReasonCode.TORCH_ATTENTION_NO_SEQUENCES
    k = op.need(spec.k)[0]
    if not spec.paged and not _paged(op, spec) and len(k) == 3:
        keys = float(k[0])
        how = Reason(ReasonCode.TORCH_KEYS_PACKED, (("keys", k[0]), ("sequences", seqs), ("window", window)))
    elif (pages := _count(op, spec.pages)) is not None:
        page = k[_cache_axes(op, spec, k)[1]]
        keys = float(max(pages - seqs, 0) * page + seqs)
        how = Reason(ReasonCode.TORCH_KEYS_PAGED, (("keys", keys), ("page", page), ("pages", pages),
                                                   ("sequences", seqs), ("window", window)))  # fmt: skip
    else:
        return ReasonCode.TORCH_ATTENTION_KEYS_IN_VALUES
    q_len, kv_len = tokens // seqs, max(int(keys) // seqs, tokens // seqs)
    pairs = seqs * attended_pairs(q_len, kv_len, window, causal)
    if window:
        keys = min(keys, float(seqs * (q_len + window - 1)))
    return _Keys(pairs, keys, how)


def _paged(op: TorchOp, spec: Attn) -> bool:
    return spec.paged or (spec.table is not None and op.tensor(spec.table) is not None)


def _dense(op: TorchOp, spec: Attn, causal: bool) -> Price:
    """[B, S, H, D] queries, keys and values: the lengths are the shapes."""
    (b, sq, h, dqk), k = op.need(spec.q, spec.k)
    v = op.tensor(spec.v) if spec.v is not None else None
    dv, dt, window = (v[-1] if v else dqk), op.dtype(spec.q), _window(op, spec)
    pairs = b * attended_pairs(sq, k[1], window, causal)
    flops = 2.0 * h * pairs * (dqk + dv) * (ATTENTION_BACKWARD_FACTOR if spec.backward else 1.0)
    moved = op.nbytes(spec.q) + sum(op.nbytes(i) for i in (spec.k, spec.v) if i is not None and op.tensor(i))
    moved = (moved + b * sq * h * dv * dtype_bytes(dt)) * (2 if spec.backward else 1)  # and their gradients
    what = Reason(ReasonCode.TORCH_DENSE_ATTENTION, (("b", b), ("backward", spec.backward), ("causal", causal),
                                                     ("dqk", dqk), ("dv", dv), ("h", h), ("sk", k[1]), ("sq", sq),
                                                     ("window", window)))  # fmt: skip
    return Price(explicit(flops, moved, dt, "matrix"), what, "causal" if causal else "")


def varlen_attention(op: TorchOp, spec: Attn, stats: SeqStats | None) -> Price:
    """An attention call priced from its schema's arguments (module docstring)."""
    q, k = op.need(spec.q, spec.k)
    causal = bool(op.flag(spec.causal)) if spec.causal is not None else False
    if len(q) == 4 and len(k) == 4 and not _paged(op, spec) and _count(op, spec.cu_q) is None:
        return _dense(op, spec, causal)
    if len(q) not in (3, 4):
        raise InvalidConfigError(f"query {fmt_shape(q)} is neither [T, H, D] nor [B, S, H, D]")
    tokens, seqs, heads, dq = (q[0], 0, q[1], q[2]) if len(q) == 3 else (q[0] * q[1], q[0], q[2], q[3])
    pe = op.tensor(spec.q_pe) if spec.q_pe is not None else None
    dqk = dq + (pe[-1] if pe else 0)
    out = op.tensor(spec.out) if spec.out is not None else None
    v = op.tensor(spec.v) if spec.v is not None else None
    dv = out[-1] if out and len(out) >= 2 else v[-1] if v and not _paged(op, spec) else dq
    found = _keys(op, spec, (tokens, seqs), stats, causal)
    if isinstance(found, ReasonCode):
        return Price(None, Reason(found, (("op", op.name), ("shape", q))))
    if _paged(op, spec):
        kv_heads = _int(op, spec.kv_heads) or (1 if len(k) == 3 else k[_cache_axes(op, spec, k)[0]])
    else:
        kv_heads = k[-2]
    width = k[-1] if spec.v is None else dqk + dv  # MLA: one latent row serves as key and value
    factor = ATTENTION_BACKWARD_FACTOR if spec.backward else 1.0
    flops = 2.0 * heads * found.pairs * (dqk + dv) * factor
    dt = op.dtype(spec.q)
    kv_read = found.keys * kv_heads * width * dtype_bytes(op.dtype(spec.k))
    q_read = op.nbytes(spec.q) + (op.nbytes(spec.q_pe) if pe and spec.q_pe is not None else 0.0)
    moved = q_read + kv_read + tokens * heads * dv * dtype_bytes(dt)
    what = Reason(ReasonCode.TORCH_PACKED_ATTENTION, (("backward", spec.backward), ("causal", causal), ("dqk", dqk),
                                                      ("dv", dv), ("heads", heads), ("keys", found.how),
                                                      ("kv_heads", kv_heads), ("pairs", found.pairs)))  # fmt: skip
    annotated = found.how.code is ReasonCode.TORCH_KEYS_ANNOTATED
    tag = "annotated lengths" if annotated else ("causal" if causal else "")
    return Price(explicit(flops, moved * (2 if spec.backward else 1), dt, "matrix"), what, tag)
