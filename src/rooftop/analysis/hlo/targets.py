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
dims before heads. Causal when the config, kernel metadata or name says ``causal``; else every (query, key)
pair is counted (a splash mask's sparsity lives in its block-mask operands and is not read). The forward
is cost/op.py's fused attention (2 matmuls, 2 B H pairs (D_qk + D_v)); a backward kernel does the matmuls
its phase does, each costing half the forward: ``dq`` 3 (recompute S, dP, dQ), ``dkv`` 4 (S, dP, dV, dK), a
fused backward 5 (the 2.5x of FlashAttention-2). Any other kernel with a ``cost_estimate`` in its config
(``pl.CostEstimate``) takes its FLOPs and transcendentals from there; without one its FLOPs are unknown.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rooftop.analysis.hlo.ir import Instruction, unquote
from rooftop.analysis.hlo.rules import rooftop_dtype
from rooftop.analysis.hlo.shapes import MAX_INT, Shape
from rooftop.cost.op import fused_attention_flops


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
_PHASES = (("dkv", 4), ("dq", 3), ("bwd", 5), ("backward", 5), ("grad", 5))
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


def pallas_flops(instr: Instruction, shapes: list[Shape]) -> tuple[dict[tuple[str, str], float], float, str] | None:
    """(FLOPs by (unit, rooftop dtype), transcendentals, note) of a Pallas TPU kernel (module docstring);
    None when neither its name nor a cost_estimate prices it."""
    config = kernel_config(instr)
    names = kernel_names(instr, config)
    name = next((n for n in names if _ATTENTION_RE.search(n) and "paged" not in n.lower()), None)
    tensors = [s for s in shapes if s.rank >= 2 and s.dtype.startswith(_FLOAT)]
    if name is not None and len(tensors) >= 3:
        q, k, v = tensors[:3]
        b, h, sq, dqk = _dims(q, config.get("q_layout"))
        sk, dv = _dims(k, config.get("k_layout"))[2], _dims(v, config.get("v_layout"))[3]
        causal = _causal(config, names)
        lowered = name.lower()
        phase, matmuls = next(((p, n) for p, n in _PHASES if re.search(rf"(?:^|[_/.\-]){p}", lowered)), ("fwd", 2))
        flops = fused_attention_flops(b, h, sq, sk, dqk, dv, causal, False) * matmuls / 2
        what = f"{matmuls} attention matmuls ({phase})"
        note = (f"Pallas kernel {name}: {what}, B={b} H={h} Sq={sq} Sk={sk} D={dqk}/{dv}, "
                f"{'' if causal else 'not '}causal")  # fmt: skip
        return {("matrix", rooftop_dtype(q.dtype)): flops}, 0.0, note
    estimate = config.get("cost_estimate")
    if isinstance(estimate, dict) and (flops_est := _count(estimate.get("flops"))) is not None:
        trans = _count(estimate.get("transcendentals")) or 0.0
        dtype = rooftop_dtype(tensors[0].dtype if tensors else "f32")
        by = {("matrix", dtype): flops_est} | ({("vector", "fp32"): trans} if trans else {})
        return by, trans, f"Pallas kernel {names[0]}: FLOPs from its cost_estimate"
    return None
