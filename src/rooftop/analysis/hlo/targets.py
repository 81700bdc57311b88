"""Custom-call targets: the cost rule of every target rooftop knows, and Pallas TPU kernels.

``TARGETS`` maps a ``custom_call_target`` to its rule (prefixes end in ``*``):

- ``marker``: no work, no bytes. TPU async collective ends (``AsyncCollectiveStart`` / ``AsyncCollectiveDone``:
  the collective of their chain is priced once, where the transfer happens, see
  :mod:`rooftop.analysis.hlo.count`), ``AssumeGatherIndicesInBound``, ``X64Combine`` (two 32-bit halves seen as
  one 64-bit value) and ``AllocateBuffer`` (an uninitialised output buffer: XLA counts 0 bytes; a v5p
  profile shows 0.07 us for a 134 MB one).
- ``data``: no FLOPs, operands and results at the boundary: sharding annotations and host offload.
- ``gemm`` (cuBLAS / rocBLAS), ``conv`` (cuDNN), ``attention`` (cuDNN fmha, TransformerEngine): FLOPs from
  the operand shapes and backend_config (:mod:`rooftop.analysis.hlo.rules`).
- ``pallas``: a Pallas / Mosaic TPU kernel (``tpu_custom_call``), priced by ``pallas_flops``.
- any other target: FLOPs unknown, reported by name; its bytes are still counted at the boundary.

Pallas kernels. The kernel's name comes from backend_config ``name`` (at the top or in
``custom_call_config``), the ``kernel_name`` attribute, metadata ``op_name`` (JAX names the scope after the
kernel: ``.../splash_mha_fwd_no_residuals/pallas_call``) or the instruction's name. An attention kernel
(splash, flash, ``mha`` / ``mqa``; not paged decode kernels) is priced from q, k, v, its first three
floating-point operands of rank >= 2, laid out [..., heads, seq, head_dim] as the Pallas TPU kernels take
them (splash's ``q_layout`` = 0 in the kernel metadata means [..., head_dim, seq]): B = the product of the
dims before heads. Its phase comes from its structure, never from words in its name (``_phase``: a forward
takes no array shaped like q, k or v besides them; a backward returns dQ, dK and dV, or all three), and a
backward kernel does the matmuls its phase does, each costing half the forward: ``dq`` 3 (recompute S, dP,
dQ), ``dkv`` 4 (S, dP, dV, dK), a fused backward 5 (the 2.5x of FlashAttention-2). Its (query, key) pairs are
the live fraction of a block mask read from an 8-bit constant operand (``_block_mask``); without one, the
causal count when the config, kernel metadata or name says ``causal``, else every pair. The forward is
cost/op.py's fused attention (2 matmuls, 2 B H pairs (D_qk + D_v)). Any other kernel with a
``cost_estimate`` in its config (``pl.CostEstimate``) takes its FLOPs and transcendentals from there; without
one its FLOPs are unknown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from rooftop.analysis.hlo.ir import Instruction, unquote
from rooftop.analysis.hlo.shapes import MAX_INT, Shape
from rooftop.cost.op import fused_attention_flops
from rooftop.dtypes import hlo_dtype
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason


def _words(rule: str, text: str) -> dict[str, str]:
    return dict.fromkeys(text.split(), rule)


#: custom_call_target -> rule; a key ending in * matches every target it starts.
TARGETS: dict[str, str] = {
    **_words("marker", "AsyncCollectiveStart AsyncCollectiveDone AssumeGatherIndicesInBound X64Combine AllocateBuffer"),
    **_words("data", "Sharding SPMDFullToShardShape SPMDShardToFullShape MoveToHost MoveToDevice LayoutConstraint "
                     "annotate_device_placement"),
    **_words("gemm", "__cublas$gemm __cublas$lt$matmul __cublas$lt$matmul$f8 __rocblas$gemm"),
    **_words("conv", "__cudnn$convForward __cudnn$convBiasActivationForward __cudnn$convForwardGraph "
                     "__cudnn$convBackwardInput __cudnn$convBackwardFilter"),
    **_words("attention", "__cudnn$fmha* te_fused_attn*"),
    **_words("pallas", "tpu_custom_call"),
}  # fmt: skip
_PREFIXES = tuple((k[:-1], v) for k, v in TARGETS.items() if k.endswith("*"))
_ATTENTION_RE = re.compile(r"splash|flash|attention|(?:^|[_/.])m[hq]a(?:[_/.]|$)", re.IGNORECASE)
_MASK_VALUES = re.compile(r"-?[0-9]+|true|false")
_FLOAT = ("bf16", "f16", "f32", "f64", "f8")


def rule_of(target: str) -> str:
    """The cost rule of a custom_call_target ("marker", "data", "gemm", ...), "unknown" when none."""
    found = TARGETS.get(target)
    if found is None:
        found = next((rule for prefix, rule in _PREFIXES if target.startswith(prefix)), "unknown")
    return found


def moves_nothing(target: str) -> bool:
    """A zero-work target: no FLOPs and no bytes."""
    return rule_of(target) == "marker"


def _json(text: Any) -> dict[str, Any]:
    if not isinstance(text, str):
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def kernel_config(instr: Instruction) -> dict[str, Any]:
    """A Pallas kernel's settings: backend_config's ``custom_call_config`` with the top level's other keys,
    and the ``xprof_metadata`` of its ``kernel_metadata`` frontend attribute."""
    config = dict(instr.backend_config or {})
    inner = config.pop("custom_call_config", None)
    if isinstance(inner, dict):
        config |= {k: v for k, v in inner.items() if k != "body"}
    meta = _json(_braced(instr.attributes.get("frontend_attributes", ""), "kernel_metadata="))
    return config | meta | _json(meta.get("xprof_metadata"))


def _braced(text: str, key: str) -> str:
    """The value after ``key`` in ``text``: a ``{...}`` block (strings skipped) or a quoted string, unquoted."""
    start = text.find(key)
    if start < 0:
        return ""
    start += len(key)
    if text.startswith('"', start):
        end = re.match(r'"(?:[^"\\]|\\.)*"', text[start:])
        return unquote(end.group()) if end else ""
    depth = 0
    for match in re.finditer(r'"(?:[^"\\]|\\.)*"|[{}]', text[start:]):
        token = match.group()
        depth += (token == "{") - (token == "}")
        if depth == 0:
            return text[start : start + match.end()]
    return ""


def kernel_names(instr: Instruction, config: dict[str, Any]) -> list[str]:
    """Where a kernel says its name, most specific first."""
    names = [config.get("name"), config.get("kernel_name"), instr.attributes.get("kernel_name"), instr.op_name]
    return [unquote(n) for n in names if isinstance(n, str) and n] + [instr.name]


def _count(value: Any) -> float | None:
    text = str(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else ""
    try:
        number = float(text)
    except ValueError:
        return None
    return number if 0 <= number <= MAX_INT else None


def _causal(config: dict[str, Any], names: list[str]) -> bool:
    for key in ("causal", "is_causal"):
        if isinstance(config.get(key), bool):
            return bool(config[key])
    text = " ".join(names) + " " + " ".join(str(v) for k, v in config.items() if "mask" in k.lower())
    return "causal" in text.lower()


def _dims(shape: Shape, layout: Any) -> tuple[int, int, int, int]:
    """(batch, heads, seq, head_dim) of [..., heads, seq, head_dim] ([..., head_dim, seq] for layout 0)."""
    dims = [max(d, 0) for d in shape.dims]
    seq, dim = (dims[-1], dims[-2]) if str(layout) == "0" else (dims[-2], dims[-1])
    heads = dims[-3] if len(dims) >= 3 else 1
    batch = 1
    for d in dims[:-3]:
        batch *= d
    return batch, heads, seq, dim


def _phase(shapes: list[Shape], result: Shape, tensors: list[Shape]) -> tuple[str, int]:
    """(phase, matmuls) of an attention kernel from what it takes and returns, never from its name: the
    float operands and results shaped like q, k or v (dims and dtype). A forward takes q, k and v and no
    other such array; a backward also takes the output's cotangent dO (and often O), and returns dQ ("dq",
    3 matmuls: S, dP, dQ), dK and dV ("dkv", 4: S, dP, dV, dK) or all three ("fused", 5)."""
    like = {(t.dtype, tuple(t.dims)) for t in tensors[:3]}
    extra = [s for s in tensors[3:] if (s.dtype, tuple(s.dims)) in like]
    if not extra:
        return "forward", 2
    outs = [leaf for leaf in result.leaves() if (leaf.dtype, tuple(leaf.dims)) in like]
    return {1: ("dq", 3), 2: ("dkv", 4)}.get(len(outs), ("fused backward", 5))


def _block_mask(
    instr: Instruction, constant: Callable[[str], Instruction | None], sq: int, sk: int, config: dict[str, Any]
) -> tuple[float, Note] | None:
    """(live fraction, what was read) from a block-sparse mask operand: an 8-bit integer or pred constant
    of rank >= 2 whose last two dims are the kernel's query and key blocks (Sq / block_q by Sk / block_kv
    when the config gives the block sizes); live blocks are the nonzero entries (splash attention's block
    mask: 0 masked out, 1 partial, 2 full; a partial block is computed whole). None when no such operand
    is a constant with its values in the text."""
    bq, bk = _count(config.get("block_q")), _count(config.get("block_kv"))
    for name in instr.operands:
        node = constant(name)
        if node is None or node.shape.dtype not in ("s8", "u8", "pred") or node.shape.rank < 2:
            continue
        nq, nk = node.shape.dims[-2:]
        if bq and bk:
            fits = nq == -(-sq // int(bq)) and nk == -(-sk // int(bk))
        else:
            fits = 0 < nq <= sq and 0 < nk <= sk and sq % nq == 0 and sk % nk == 0 and nq * nk > 1
        values = _MASK_VALUES.findall(node.attributes.get("literal", ""))
        if not fits or len(values) != node.shape.num_elements or not values:
            continue
        live = sum(1 for v in values if v not in ("0", "false"))
        read = Reason.of(ReasonCode.BLOCK_MASK, mask=node.name, dtype=node.shape.dtype, dims=tuple(node.shape.dims),
                         live=live, blocks=len(values))  # fmt: skip
        return live / len(values), read
    return None


def pallas_flops(
    instr: Instruction, shapes: list[Shape], constant: Callable[[str], Instruction | None] = lambda _: None
) -> tuple[dict[tuple[str, str], float], float, Note] | None:
    """(FLOPs by (unit, rooftop dtype), transcendentals, note) of a Pallas TPU kernel (module docstring);
    None when neither its name nor a cost_estimate prices it. ``constant``: the constant instruction an
    operand name stands for (a block mask), None for any other."""
    config = kernel_config(instr)
    names = kernel_names(instr, config)
    name = next((n for n in names if _ATTENTION_RE.search(n) and "paged" not in n.lower()), None)
    tensors = [s for s in shapes if s.rank >= 2 and s.dtype.startswith(_FLOAT)]
    if name is not None and len(tensors) >= 3:
        q, k, v = tensors[:3]
        b, h, sq, dqk = _dims(q, config.get("q_layout"))
        sk, dv = _dims(k, config.get("k_layout"))[2], _dims(v, config.get("v_layout"))[3]
        phase, matmuls = _phase(shapes, instr.shape, tensors)
        mask = _block_mask(instr, constant, sq, sk, config)
        pairs: dict[str, object] = {"blocks": None, "read": None, "causal": False, "share": None}
        if mask is not None:
            pairs["blocks"], pairs["read"] = mask
            flops = fused_attention_flops(b, h, sq, sk, dqk, dv, False, False) * mask[0]
        else:
            causal = _causal(config, names)
            flops = fused_attention_flops(b, h, sq, sk, dqk, dv, causal, False)
            dense = fused_attention_flops(b, h, sq, sk, dqk, dv, False, False)
            pairs["causal"], pairs["share"] = causal, flops / dense if dense else None
        flops *= matmuls / 2
        note = Reason.of(ReasonCode.PALLAS_ATTENTION, kernel=name, matmuls=matmuls, phase=phase, b=b, h=h, sq=sq,
                         sk=sk, dqk=dqk, dv=dv, **pairs)  # fmt: skip
        return {("matrix", hlo_dtype(q.dtype)): flops}, 0.0, note
    estimate = config.get("cost_estimate")
    if isinstance(estimate, dict) and (flops_est := _count(estimate.get("flops"))) is not None:
        trans = _count(estimate.get("transcendentals")) or 0.0
        dtype = hlo_dtype(tensors[0].dtype if tensors else "f32")
        by = {("matrix", dtype): flops_est} | ({("vector", "fp32"): trans} if trans else {})
        return by, trans, Reason.of(ReasonCode.PALLAS_COST_ESTIMATE, kernel=names[0])
    return None
