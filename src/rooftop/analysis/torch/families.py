"""Cost rules by op FAMILY for the custom ops of LLM engines (vLLM, SGLang, FlashInfer, flash-attn, AITER,
TensorRT-LLM, PyTorch's symmetric memory and functional collectives): an op is priced by what it is (a norm,
a rotary embedding, an activation, a quantization, a KV-cache write, attention, a GEMM, a fused MoE, a
collective), from the shapes and dtypes its trace records (``Input Dims`` / ``Input type``).

Which argument is what comes from the op's registered schema (:mod:`rooftop.analysis.torch.engine_ops`,
each entry with its source); an op whose name is not in that table but whose name says its family is
priced from the family's generic reading of its arguments (:func:`generic_roles`), with a note.

Memory-bound families (norm, activation, rotary, quantize, cache write) move each byte they read or write
once: the roofline is ``max(FLOPs / vector peak, bytes / HBM bandwidth)`` with the FLOPs per element of
model/config.py (a norm, SwiGLU) or stated here. Attention counts 2 (D_qk + D_v) FLOPs per attended
(query, key) pair and head (cost/op.py ``fused_attention_flops``); a GEMM 2 M N K; a fused MoE
2 x 3 x T x top-k x H x I (gate, up and down projections of every routed token)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from rooftop.analysis.torch.op import Price, TorchOp, fmt_shape
from rooftop.cost.op import explicit, fused_attention_flops
from rooftop.dtypes import dtype_bytes
from rooftop.errors import InvalidConfigError
from rooftop.model.config import MLP_KINDS, NORM_KINDS
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason

#: FLOPs per element: RMSNorm (model/config.py), SwiGLU's activation and product, rotation, quantization
RMS_FLOPS = NORM_KINDS["rmsnorm"].flops_per_element
ACT_AND_MUL_FLOPS = MLP_KINDS["swiglu"].flops_per_element
ROTARY_FLOPS = 3.0  # x1 cos - x2 sin (and its partner): two products and a sum
QUANT_FLOPS = 2.0  # a scale (one product) and a rounding conversion


@dataclass(frozen=True)
class Roles:
    """Which argument of an op is what: ``reads`` and ``writes`` (argument positions, each moved once),
    the family's named arguments in ``named`` (e.g. q, k, v, positions, cache), and flags (``add``: a
    residual sum before the norm)."""

    reads: tuple[int, ...] = ()
    writes: tuple[int, ...] = ()
    named: dict[str, int] = field(default_factory=dict)
    add: bool = False


@dataclass(frozen=True)
class SeqStats:
    """A batch's query and key lengths as an engine annotates its step: sums over the requests of sq, sk,
    sq^2 and sq x sk (vLLM's ``execute_..._context_N(sq..sk..sqsq..sqsk..)_generation_N(...)``)."""

    requests: int
    sq: int
    sk: int
    sqsq: int
    sqsk: int

    def causal_pairs(self) -> float:
        """(query, key) pairs a causal attention computes when each request's sq queries sit at the end of
        its sk keys: sum of sq sk - sq (sq - 1) / 2 (cost/op.py attended_pairs, summed)."""
        return self.sqsk - (self.sqsq - self.sq) / 2


_SEQ = r"\(sq([0-9]{1,15})sk([0-9]{1,15})sqsq([0-9]{1,30})sqsk([0-9]{1,30})\)"
_STEP_RE = re.compile(rf"execute_[0-9]+_context_([0-9]{{1,15}}){_SEQ}_generation_([0-9]{{1,15}}){_SEQ}")


def seq_stats(annotation: str) -> SeqStats | None:
    """The summed lengths of a step annotation (context and generation requests together), or None."""
    m = _STEP_RE.search(annotation)
    if m is None:
        return None
    v = [int(x) for x in m.groups()]
    return SeqStats(v[0] + v[5], v[1] + v[6], v[2] + v[7], v[3] + v[8], v[4] + v[9])


def _bytes(op: TorchOp, idx: tuple[int, ...]) -> float:
    return sum(op.nbytes(i) for i in idx if op.tensor(i) is not None or op.is_list(i))


def _moved(op: TorchOp, roles: Roles) -> float:
    return _bytes(op, roles.reads) + _bytes(op, roles.writes)


def _largest(op: TorchOp, idx: tuple[int, ...]) -> int:
    shaped = [i for i in idx if op.tensor(i) is not None]
    if not shaped:
        raise InvalidConfigError("no tensor argument of a known dtype")
    return max(shaped, key=op.elements)


def norm(op: TorchOp, roles: Roles) -> Price:
    """RMS/layer norm (with a residual add when ``roles.add``): per element of the largest activation."""
    x = _largest(op, roles.reads)
    flops = (RMS_FLOPS + (1 if roles.add else 0)) * op.elements(x)
    what = Reason.of(ReasonCode.TORCH_NORM, add=roles.add, shape=op.dims[x])
    return Price(explicit(flops, _moved(op, roles), op.dtype(x), "vector"), what)


def activation(op: TorchOp, roles: Roles) -> Price:
    """A gated activation (silu/gelu and mul): the [T, 2F] input read, the [T, F] output written."""
    shaped = [i for i in roles.reads if op.tensor(i) is not None]
    out = _largest(op, roles.writes) if roles.writes else min(shaped, key=op.elements, default=None)
    if out is None:
        raise InvalidConfigError("no tensor argument of a known dtype")
    flops = ACT_AND_MUL_FLOPS * op.elements(out)
    what = Reason.of(ReasonCode.TORCH_GATED_ACTIVATION, shape=op.dims[out])
    return Price(explicit(flops, _moved(op, roles), op.dtype(out), "vector"), what)


def rotary(op: TorchOp, roles: Roles) -> Price:
    """Rotary embedding in place: q and k read and written, one cos/sin cache row read per token."""
    q, k, pos, cache = (roles.named.get(n) for n in ("q", "k", "positions", "cache"))
    if q is None or pos is None:
        raise InvalidConfigError("no query or positions argument")
    rotated = tuple(i for i in (q, k) if i is not None and op.tensor(i) is not None)
    tokens = op.elements(pos)
    row = op.dims[cache][-1] * dtype_bytes(op.dtype(cache)) if cache is not None and op.tensor(cache) else 0
    moved = 2 * _bytes(op, rotated) + op.nbytes(pos) + tokens * row
    flops = ROTARY_FLOPS * sum(op.elements(i) for i in rotated)
    shapes = tuple(op.dims[i] for i in rotated)
    return Price(explicit(flops, moved, op.dtype(q), "vector"), Reason.of(ReasonCode.TORCH_ROTARY, shapes=shapes))


def quantize(op: TorchOp, roles: Roles) -> Price:
    """Quantization (fp8/fp4/int8): the input read, the quantized output and its scales written."""
    x = _largest(op, roles.reads)
    flops = QUANT_FLOPS * op.elements(x)
    return Price(explicit(flops, _moved(op, roles), op.dtype(x), "vector"),
                 Reason.of(ReasonCode.TORCH_QUANTIZE, shape=op.dims[x]))  # fmt: skip


def cache_write(op: TorchOp, roles: Roles) -> Price:
    """The new tokens' keys and values (``k``, ``v``) read, and written into the paged cache in the cache's
    dtype (argument ``cache``); the slot of each token (``slots``) read."""
    new = tuple(roles.named[n] for n in ("k", "v") if n in roles.named and op.tensor(roles.named[n]) is not None)
    if not new:
        raise InvalidConfigError("no key or value argument")
    cache, slots = roles.named.get("cache"), roles.named.get("slots")
    width = dtype_bytes(op.dtype(cache)) if cache is not None and op.tensor(cache) is not None else None
    written = sum(op.elements(i) * (width or dtype_bytes(op.dtype(i))) for i in new)
    moved = _bytes(op, new) + written + (op.nbytes(slots) if slots is not None and op.tensor(slots) else 0.0)
    shapes = tuple(op.dims[i] for i in new)
    what = Reason.of(ReasonCode.TORCH_CACHE_WRITE, shapes=shapes)
    return Price(explicit(0.0, moved, op.dtype(new[0]), "vector"), what)


def _heads(shape: tuple[int, ...], d: int | None = None) -> tuple[int, int]:
    """(heads, head dim) of a [T, H, D] or [T, H*D] tensor (the latter needs ``d``)."""
    if len(shape) >= 3:
        return shape[-2], shape[-1]
    if len(shape) == 2 and d:
        return shape[1] // d, d
    raise InvalidConfigError(f"cannot read heads from {fmt_shape(shape)}")


def attention(op: TorchOp, roles: Roles, stats: SeqStats | None) -> Price:
    """Attention over a batch packed as [T, H, D] queries: 4-D [B, S, H, D] q/k/v are priced from their
    lengths (causal as the op records it, else not); packed ones from the step's length annotation."""
    q, k, v = (roles.named.get(n) for n in ("q", "k", "v"))
    if q is None or op.tensor(q) is None:
        raise InvalidConfigError("no query argument")
    qs = op.dims[q]
    ks = op.dims[k] if k is not None and op.tensor(k) else qs
    vs = op.dims[v] if v is not None and op.tensor(v) else ks
    dt = op.dtype(q)
    if len(qs) == 4 and len(ks) == 4:
        causal = op.flag(roles.named["causal"]) if "causal" in roles.named else None
        b, sq, h, dqk = qs
        flops = fused_attention_flops(b, h, sq, ks[1], dqk, vs[3], bool(causal))
        moved = op.nbytes(q) + _bytes(op, tuple(i for i in (k, v) if i is not None)) + op.elements(q) * dtype_bytes(dt)
        what = Reason.of(ReasonCode.TORCH_ATTENTION, b=b, sq=sq, sk=ks[1], h=h, causal=bool(causal))
        return Price(explicit(flops, moved, dt, "matrix"), what, "causal" if causal else "")
    if stats is None:
        return Price(None, Reason.of(ReasonCode.TORCH_PAGED_NO_LENGTHS, op=op.name, shape=qs))
    heads, dqk = _heads(qs)
    kv_heads, dv = _heads(vs) if len(vs) >= 3 else (heads, dqk)
    pairs = stats.causal_pairs()
    flops = fused_attention_flops(1, heads, 1, int(pairs), dqk, dv, False)
    kv_read = float(stats.sk) * kv_heads * (dqk + dv) * dtype_bytes(op.dtype(k) if k is not None else dt)
    moved = op.nbytes(q) + kv_read + op.elements(q) / dqk * dv * dtype_bytes(dt)
    what = Reason.of(ReasonCode.TORCH_PAGED_ATTENTION, requests=stats.requests, sq=stats.sq, sk=stats.sk, pairs=pairs,
                     heads=heads, dqk=dqk, dv=dv, kv_heads=kv_heads)  # fmt: skip
    return Price(explicit(flops, moved, dt, "matrix"), what, "annotated lengths")


def gemm(op: TorchOp, roles: Roles) -> Price:
    """A GEMM x [M, K] by a weight [N, K] (``weight_nk``) or [K, N]; an out argument or Q's dtype out."""
    a, b = roles.named.get("a"), roles.named.get("b")
    if a is None or b is None:
        raise InvalidConfigError("no operands")
    x, w = op.need(a, b)
    k = x[-1] * op.packing(a)  # packed fp4 activations: two values a byte
    m = math.prod(x[:-1])
    if len(w) != 2:
        raise InvalidConfigError(f"weight {fmt_shape(w)} is not 2-D")
    packed = 2 if op.dtype(b) in ("int8", "fp4") and k == 2 * w[1] and k != w[0] else 1  # fp4: two values a byte
    n = w[0] if w[1] * packed == k else w[1] if w[0] == k else None
    if n is None:
        raise InvalidConfigError(f"contracting dims differ: {fmt_shape(x)} x {fmt_shape(w)}")
    out_bytes = float(m * n) * dtype_bytes(op.dtype(a) if op.dtype(a) not in ("fp8", "int8", "fp4") else "bf16")
    moved = op.nbytes(a) + op.nbytes(b) + out_bytes + _bytes(op, roles.reads)
    dt = "fp4" if packed == 2 else op.dtype(b) if op.dtype(b) in ("fp8", "int8") else op.dtype(a)
    what = Reason.of(ReasonCode.TORCH_GEMM, m=m, n=n, k=k, fp4=packed == 2)
    return Price(explicit(2.0 * m * n * k, moved, dt, "matrix"), what)


def moe(op: TorchOp, roles: Roles) -> Price:
    """A fused MoE: hidden [T, H], w13 [E, 2I, H] (gate and up), w2 [E, H, I] (either in any layout of
    their last two dims), topk ids [T, k]: each of the T k routed rows is multiplied by one expert's w13
    and w2, 2 FLOPs a weight element (2 x T x k x (2 I H + I H) for the usual gated MLP). fp4 weights
    are packed two a byte: an int8 w13 with no dim H but one H / 2."""
    idx = [roles.named.get(n) for n in ("hidden", "w1", "w2", "topk_ids")]
    if any(i is None or op.tensor(i) is None for i in idx):
        return Price(None, Reason.of(ReasonCode.TORCH_MOE_NO_ARGS, op=op.name))
    h, w1, w2, ids = (int(i) for i in idx if i is not None)
    x, g, d, t = (op.dims[i] for i in (h, w1, w2, ids))
    tokens, hidden, experts, top_k = math.prod(x[:-1]), x[-1], g[0], t[-1]
    if len(g) != 3 or len(d) != 3:
        raise InvalidConfigError(f"expert weights {fmt_shape(g)} and {fmt_shape(d)} are not 3-D [E, a, b]")
    packed = 2 if op.dtype(w1) in ("int8", "fp4") and hidden not in g[1:] and hidden in (2 * g[1], 2 * g[2]) else 1
    per_expert = packed * (math.prod(g[1:]) + math.prod(d[1:]))  # weight elements of one expert
    inter = per_expert // (3 * hidden)
    flops = 2.0 * tokens * top_k * per_expert
    reached = min(experts, tokens * top_k)  # experts whose weights are read (uniform routing)
    moved = (op.nbytes(w1) + op.nbytes(w2)) * reached / experts + 2 * op.nbytes(h) + op.nbytes(ids)
    dt = "fp4" if packed == 2 else op.dtype(w1) if op.dtype(w1) in ("fp8", "int8") else op.dtype(h)
    what = Reason.of(ReasonCode.TORCH_MOE, tokens=tokens, top_k=top_k, experts=experts, hidden=hidden, inter=inter,
                     reached=reached)  # fmt: skip
    return Price(explicit(flops, moved, dt, "matrix"), what)


def memory_bound(op: TorchOp, roles: Roles) -> Price:
    """Routing, sorting, top-k, sampling: every tensor argument moved once, no FLOPs counted."""
    idx = roles.reads or op.reads()
    return Price(explicit(0.0, _bytes(op, idx), op.dtype(idx[0]) if idx else "bf16", "vector"),
                 Reason.of(ReasonCode.TORCH_MEMORY_BOUND, tensors=len(idx)))  # fmt: skip


#: family -> rule (attention and collectives have their own entry points)
RULES: dict[str, Any] = {
    "norm": norm, "activation": activation, "rotary": rotary, "quantize": quantize, "cache_write": cache_write,
    "gemm": gemm, "moe": moe, "memory": memory_bound,
}  # fmt: skip
