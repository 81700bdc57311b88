"""PyTorch (Kineto) traces on the roofline: aten ops and NCCL kernels -> Costs, and kernels -> the ops
that launched them.

A trace recorded with ``record_shapes=True`` names, on each ``cpu_op`` event, the aten op and its
arguments: ``Input Dims`` (a shape per argument, ``[]`` for a scalar, a list of shapes for a
TensorList), ``Input type`` (``float``, ``c10::BFloat16``, ``Scalar``, ...) and, in PyTorch >= 2.1,
``Concrete Inputs`` (scalar arguments as text: strides, ``is_causal``). :func:`op_cost` prices one such
op through the rules of cost/op.py, from the table :data:`RULES` (op name -> rule and its argument
positions, as in ATen's native_functions.yaml):

- mm [M,K]x[K,N], bmm [B,M,K]x[B,K,N], matmul (batch dims broadcast), linear (input [..., K], weight
  [N, K]), addmm / baddbmm / linear with bias: cost/op.py ``matmul`` (2 M K N FLOPs; bytes = A + B + C),
  plus M x N vector FLOPs and the bias bytes for the bias add;
- conv1d/2d/3d, convolution, cudnn/miopen convolution: cost/op.py ``convolution`` from the weight dims,
  stride, padding, dilation and groups (``Concrete Inputs``; unknown without them);
  ``convolution_backward``: the forward cost per gradient in ``output_mask`` (grad input and grad
  weight are each a convolution of the same FLOPs and bytes), plus the bias-gradient reduction;
- fused attention (SDPA, flash, memory-efficient, cuDNN, forward and backward): 2 B H pairs (D_qk + D_v)
  FLOPs forward, 2.5x backward (the convention of analysis/hlo/pricing.py for fused attention
  custom-calls; PyTorch's FlopCounterMode counts the same 2 and 5 matmuls), pairs = Sq x Sk, or
  cost/op.py ``attended_pairs`` when ``is_causal`` is known true; bytes = the tensors read + the output
  (forward) or dQ, dK, dV (backward) written: the scores never reach HBM;
- elementwise, normalization, softmax, copies and fills (:data:`VECTOR`): vector-unit FLOPs per output
  element (the model/ constants for softmax, norms and activations; 1 for arithmetic), bytes = the
  tensors read + the output written, each at its own shape and dtype (cost/op.py ``elementwise`` with
  broadcasting); ``_foreach_*`` ops over their TensorLists;
- reductions (:data:`REDUCTIONS`): cost/op.py ``reduction``, the output from the reduced ``dim``;
- gathers and their gradients (embedding, index_select, gather, nll_loss): :mod:`rooftop.analysis.torch.gathers`.

Any other op: no Cost, and the reason names it. int64 tensors are counted as int32 (rooftop has no
64-bit integer type), as rooftop/dtypes.py's one table does for HLO's s64.

:func:`nccl_comm` turns an NCCL kernel's args (``Collective name``, ``In msg nelems``, ``Out msg
nelems``, ``dtype``, ``Group size``; PyTorch >= 2.3) into a cost/cost.py ``Comm``: all-reduce and
reduce-scatter name their input bytes, all-gather its gathered output, all-to-all its buffer.
The join of kernels to the ops that launched them, and the report, are in :mod:`rooftop.analysis.torch.kineto`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from rooftop.analysis.torch.custom import CUSTOM
from rooftop.analysis.torch.engine_ops import engine_price
from rooftop.analysis.torch.families import SeqStats
from rooftop.analysis.torch.gathers import GATHERS
from rooftop.analysis.torch.op import (
    NCCL_KINDS,
    Price,
    TorchOp,
    Vec,
    fmt_shape,
    size_value,
    vector_price,
)
from rooftop.cost.cost import Comm, Cost
from rooftop.cost.op import (
    ConvDim,
    Operand,
    attended_pairs,
    convolution,
    explicit,
    fused_attention_flops,
    matmul,
    reduction,
)
from rooftop.dtypes import NCCL_DTYPES, compute_dtype, dtype_bytes
from rooftop.errors import InvalidConfigError, shown
from rooftop.model.config import MLP_KINDS, NORM_KINDS
from rooftop.model.transformer import SOFTMAX_FLOPS_PER_ELEMENT
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

# ---------------------------------------------------------------------------------------------- matmuls


def _bias(op: TorchOp, i: int | None, out_elements: float, dtype: str) -> Cost:
    """The bias add fused into a GEMM: one vector FLOP per output element, the bias read once."""
    if i is None or op.tensor(i) is None:
        return Cost()
    return explicit(out_elements, op.nbytes(i), dtype, "vector")


def _matmul(op: TorchOp, a: int, b: int, bias: int | None = None, weight_nk: bool = False) -> Price:
    """``a @ b`` with torch.matmul's broadcasting (1-D operands promoted), or ``a @ b.T`` for a
    linear weight [N, K] (``weight_nk``); batch dims of both operands must match or one must have none."""
    x, w = op.need(a, b)
    if weight_nk:
        if len(w) not in (1, 2):
            raise InvalidConfigError(f"linear weight {fmt_shape(w)} is not [N, K]")
        w = (w[-1], w[0] if len(w) == 2 else 1)
    x2 = (1, *x) if len(x) == 1 else x
    w2 = (*w, 1) if len(w) == 1 else w
    if x2[-1] != w2[-2]:
        raise InvalidConfigError(f"contracting dims differ: {fmt_shape(x)} x {fmt_shape(w)}")
    bx, bw = x2[:-2], w2[:-2]
    if bx and bw and bx != bw:
        raise InvalidConfigError(f"broadcast batch dims {fmt_shape(bx)} vs {fmt_shape(bw)} are not modelled")
    da, db = op.dtype(a), op.dtype(b)
    pack = op.packing(a) if op.packing(a) == op.packing(b) else 1  # packed fp4 operands: two values a byte along K
    k = x2[-1] * pack
    sizes = {"B": math.prod(bx or bw), "M": math.prod(x2[:-1]) if not bw else x2[-2], "K": k, "N": w2[-1]}
    lhs = Operand(("B", "M", "K") if bx and bw else ("M", "K"), da)
    rhs = Operand(("B", "K", "N") if bw else ("K", "N"), db)
    out = Operand(("B", "M", "N") if bw else ("M", "N"), compute_dtype(da, db))
    cost = matmul(lhs, rhs, out, sizes) + _bias(op, bias, out.elements(sizes), out.dtype)
    dims = tuple((d, sizes[d]) for d in dict.fromkeys(lhs.dims + rhs.dims))
    return Price(cost, Reason.of(ReasonCode.TORCH_MATMUL, dims=dims, bias=bool(bias is not None and op.tensor(bias))))


# ------------------------------------------------------------------------------------------ convolutions


@dataclass(frozen=True)
class Conv:
    """Argument positions of a convolution op (native_functions.yaml)."""

    stride: int
    padding: int
    dilation: int
    groups: int
    bias: int | None = 2
    transposed: int | None = None
    grad: bool = False  # convolution_backward(grad_output, input, weight, ...): output_mask at groups + 1


def _conv(op: TorchOp, spec: Conv) -> Price:
    first = 1 if spec.grad else 0
    x, w = op.need(first, first + 1)
    n = len(w) - 2
    if n < 1 or len(x) not in (n + 1, n + 2):
        raise InvalidConfigError(f"input {fmt_shape(x)} and weight {fmt_shape(w)} are not a convolution")
    if spec.transposed is not None and op.flag(spec.transposed):
        return Price(None, Reason.of(ReasonCode.TORCH_TRANSPOSED_CONV, op=op.name))
    stride, dilation, groups = op.ints(spec.stride, n), op.ints(spec.dilation, n), op.ints(spec.groups, 1)
    pad_text = op.text(spec.padding)
    padding = op.ints(spec.padding, n) if pad_text not in ("same", "valid") else None
    if stride is None or dilation is None or groups is None or (padding is None and pad_text not in ("same", "valid")):
        return Price(None, Reason.of(ReasonCode.TORCH_CONV_PARAMS_MISSING, op=op.name))
    given = f"stride {shown(stride)}, padding {shown(padding)}, dilation {shown(dilation)}, groups {shown(groups)}"
    if len(stride) != n or len(dilation) != n or (padding is not None and len(padding) != n) or len(groups) != 1:
        raise InvalidConfigError(f"{given}: expected {n} strides, paddings and dilations and one group count")
    if min(stride) < 1 or min(dilation) < 1 or groups[0] < 1 or (padding is not None and min(padding) < 0):
        raise InvalidConfigError(f"{given}: stride, dilation and groups are at least 1, padding at least 0")
    batch, channels, spatial_in = (x[0], x[1], x[2:]) if len(x) == n + 2 else (1, x[0], x[1:])
    dims = []
    for i, (size, k) in enumerate(zip(spatial_in, w[2:], strict=True)):
        s, d = stride[i], dilation[i]
        p = padding[i] if padding is not None else (d * (k - 1) // 2 if pad_text == "same" else 0)
        out = size if pad_text == "same" else (size + 2 * p - d * (k - 1) - 1) // s + 1
        dims.append(ConvDim(size, k, out, s, p, 1, d))
    dt = op.dtype(first)
    g = groups[0]
    fwd = convolution(batch, channels, w[0], dims, (dt, op.dtype(first + 1), dt), g)
    out_elements = float(batch) * w[0] * math.prod(float(d.output) for d in dims)
    tag = "stride " + "x".join(map(str, stride)) if any(v != 1 for v in stride) else ""
    if not spec.grad:
        return Price(fwd + _bias(op, spec.bias, out_elements, dt),
                     Reason.of(ReasonCode.TORCH_CONV, rank=len(dims), groups=g), tag)  # fmt: skip
    mask = re.findall(r"True|False", op.text(spec.groups + 1) or "[True, True, True]")
    grads = sum(m == "True" for m in mask[:2])
    bias = reduction(out_elements, w[0], dt) if len(mask) > 2 and mask[2] == "True" else Cost()
    return Price(fwd * grads + bias, Reason.of(ReasonCode.TORCH_CONV_BACKWARD, grads=grads), tag)


# ------------------------------------------------------------------------------------------- attention


@dataclass(frozen=True)
class Attn:
    """A fused attention op: the argument of Q (K and V follow), the layout of Q/K/V ("bhsd" for the
    SDPA ops, "bshd" for the flash / memory-efficient kernels), where the causal flag is (``mask``:
    an xformers custom_mask_type, 1 and 2 causal) and whether it is the backward."""

    q: int
    layout: str
    causal: int | None
    mask: bool = False
    backward: bool = False


def _attention(op: TorchOp, spec: Attn) -> Price:
    q, k, v = op.need(spec.q, spec.q + 1, spec.q + 2)
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return Price(None, Reason.of(ReasonCode.TORCH_VARLEN_ATTENTION, op=op.name, shape=q))
    if spec.layout == "bhsd":
        (b, h, sq, dqk), sk = q, k[2]
    else:
        (b, sq, h, dqk), sk = q, k[1]
    dv = v[3]
    raw = op.text(spec.causal) if spec.causal is not None else None
    if raw is None or spec.causal is None:
        causal = None
    else:
        causal = raw in ("1", "2") if spec.mask else op.flag(spec.causal)
    pairs = attended_pairs(sq, sk, 0, bool(causal))
    flops = fused_attention_flops(b, h, sq, sk, dqk, dv, bool(causal), spec.backward)
    dt = op.dtype(spec.q)
    read = sum(op.nbytes(i) for i in op.reads())
    if spec.backward:  # dQ, dK, dV
        written = sum(op.nbytes(i) for i in (spec.q, spec.q + 1, spec.q + 2))
    else:  # the output, Q's shape with D_v
        written = float(b * h * sq * dv) * dtype_bytes(dt)
    tag = {True: "causal", False: "", None: "causal unknown"}[causal]
    what = Reason.of(ReasonCode.TORCH_FUSED_ATTENTION, backward=spec.backward, b=b, h=h, pairs=pairs, dqk=dqk, dv=dv,
                     causal=causal)  # fmt: skip
    return Price(explicit(flops, read + written, dt, "matrix"), what, tag)


# ---------------------------------------------------------------------------- vector ops and reductions


def _reduce(op: TorchOp, dim: int) -> Price:
    (x,) = op.need(0)
    given = dim < len(op.types) and (
        op.types[dim] == "ScalarList" or (op.types[dim] == "Scalar" and len(op.dims) > dim + 1)
    )
    axes = op.ints(dim, 1) if given and op.text(dim) not in (None, "[]") else None
    kept = [s for i, s in enumerate(x) if axes is not None and i not in {a % max(len(x), 1) for a in axes}]
    out = float(math.prod(kept))
    what = Reason.of(ReasonCode.TORCH_REDUCTION, elements=math.prod(x), out=out)
    return Price(reduction(float(math.prod(x)), out, op.dtype(0)), what)


_LN, _RMS = NORM_KINDS["layernorm"].flops_per_element, NORM_KINDS["rmsnorm"].flops_per_element
_GELU, _SILU = MLP_KINDS["gelu"].flops_per_element, MLP_KINDS["swiglu"].flops_per_element - 1  # less the gate
_SIGMOID = 3.0  # exp, add, divide (model/config.py MLP_KINDS swiglu)


def _names(*words: str, inplace: bool = True) -> list[str]:
    return [f"aten::{w}{s}" for w in words for s in (("", "_") if inplace else ("",))]


# fmt: off
#: Vector ops: name -> Vec (FLOPs per output element are estimates: one per arithmetic op, a
#: transcendental as one, as model/config.py counts activations and norms).
VECTOR: dict[str, Vec] = {
    **dict.fromkeys(_names("add", "sub", "mul", "div", "rsub", "neg", "abs", "relu", "clamp", "clamp_min",
                           "clamp_max", "threshold", "maximum", "minimum", "where", "eq", "ne", "lt", "le", "gt",
                           "ge", "exp", "log", "sqrt", "rsqrt", "pow", "tanh", "sin", "cos", "reciprocal", "sign",
                           "floor", "ceil", "round", "erf", "masked_fill", "logical_not", "bitwise_and",
                           "bitwise_or", "addcmul", "lerp", "cumsum", "hardtanh", "leaky_relu"), Vec()),
    **dict.fromkeys(_names("threshold_backward", "addcdiv", "mse_loss", inplace=False), Vec(2.0)),  # (x - y)^2
    **dict.fromkeys(_names("tanh_backward", "sigmoid_backward", "mse_loss_backward", inplace=False), Vec(3.0)),
    **dict.fromkeys(_names("sigmoid"), Vec(_SIGMOID)),
    **dict.fromkeys(_names("gelu"), Vec(_GELU)), **dict.fromkeys(_names("silu"), Vec(_SILU)),
    "aten::gelu_backward": Vec(_GELU + 1), "aten::silu_backward": Vec(_SILU + 2),
    **dict.fromkeys(_names("_softmax", "softmax", "_log_softmax", "log_softmax", inplace=False),
                    Vec(SOFTMAX_FLOPS_PER_ELEMENT, out=0)),
    **dict.fromkeys(_names("_softmax_backward_data", "_log_softmax_backward_data", inplace=False), Vec(3.0, out=0)),
    **dict.fromkeys(_names("native_layer_norm", "layer_norm", "native_group_norm", "native_batch_norm",
                           "cudnn_batch_norm", "miopen_batch_norm", "_batch_norm_impl_index", "batch_norm",
                           "_native_batch_norm_legit", "_batch_norm_with_update", inplace=False), Vec(_LN, out=0)),
    **dict.fromkeys(_names("rms_norm", "_fused_rms_norm", inplace=False), Vec(_RMS, out=0)),
    **dict.fromkeys(_names("native_layer_norm_backward", "native_batch_norm_backward", "native_group_norm_backward",
                           inplace=False), Vec(2 * _LN, out=1)),
    "aten::_fused_rms_norm_backward": Vec(2 * _RMS, out=1),  # (grad_out, input, shape, rstd, weight, mask)
    "aten::cudnn_batch_norm_backward": Vec(2 * _LN, out=0), "aten::miopen_batch_norm_backward": Vec(2 * _LN, out=0),
    "aten::native_dropout": Vec(2.0, out=0, outputs=2), "aten::native_dropout_backward": Vec(1.0, out=0),
    "aten::copy_": Vec(0.0, reads=(1,), out=0), "aten::_copy_from": Vec(0.0, reads=(0,), out=1),
    **dict.fromkeys(_names("clone", "contiguous", "_to_copy", "cat", inplace=False), Vec(0.0, reads=(0,), out=0)),
    **dict.fromkeys(_names("fill", "zero", "normal", "uniform", "random", "bernoulli", "exponential"),
                    Vec(0.0, reads=(), out=0)),
    "aten::_fused_adam_": Vec(12.0, reads=(0, 1, 2, 3), out=0, outputs=3),  # p, m, v updated from p, g, m, v
    "aten::_fused_adamw_": Vec(13.0, reads=(0, 1, 2, 3), out=0, outputs=3),
}
#: Reductions: name -> position of the ``dim`` argument (absent or [] reduces everything).
REDUCTIONS: dict[str, int] = {
    **dict.fromkeys(_names("sum", "mean", "amax", "amin", "max", "min", "var", "std", "argmax", "argmin",
                           "logsumexp", "prod", "any", "all", inplace=False), 1),
    "aten::linalg_vector_norm": 2, "aten::norm": 2,
}
#: Fused attention: name -> (argument of Q, Q/K/V layout, argument of is_causal).
_ATTENTION = {
    "scaled_dot_product_attention": (0, "bhsd", 5), "_scaled_dot_product_flash_attention": (0, "bhsd", 4),
    "_scaled_dot_product_efficient_attention": (0, "bhsd", 6),
    "_scaled_dot_product_cudnn_attention": (0, "bhsd", 6), "_flash_attention_forward": (0, "bshd", 8),
    "_scaled_dot_product_flash_attention_backward": (1, "bhsd", 11),
    "_scaled_dot_product_efficient_attention_backward": (1, "bhsd", 11),
    "_scaled_dot_product_cudnn_attention_backward": (1, "bhsd", 14), "_flash_attention_backward": (1, "bshd", 11),
    # what _scaled_dot_product_cudnn_attention calls and whose kernels run (PyTorch 2.5+):
    # (q, k, v, attn_bias, cum_seq_q, cum_seq_k, max_q, max_k, compute_log_sumexp, dropout_p, is_causal, ...)
    "_cudnn_attention_forward": (0, "bhsd", 10),
    # (grad_out, q, k, v, out, logsumexp, philox_seed, philox_offset, attn_bias, cum_seq_q, cum_seq_k, max_q,
    #  max_k, dropout_p, is_causal, scale)
    "_cudnn_attention_backward": (1, "bhsd", 14),
}
Rule = Callable[[TorchOp], Price]
#: aten op name -> rule.
RULES: dict[str, Rule] = {
    **dict.fromkeys(("aten::mm", "aten::bmm", "aten::matmul"), partial(_matmul, a=0, b=1)),
    **dict.fromkeys(("aten::addmm", "aten::baddbmm", "aten::addmm_", "aten::baddbmm_", "aten::_addmm_activation"),
                    partial(_matmul, a=1, b=2, bias=0)),
    "aten::linear": partial(_matmul, a=0, b=1, bias=2, weight_nk=True),
    "aten::_scaled_mm": partial(_matmul, a=0, b=1, bias=4),
    **dict.fromkeys(("aten::conv1d", "aten::conv2d", "aten::conv3d"), partial(_conv, spec=Conv(3, 4, 5, 6))),
    **dict.fromkeys(("aten::convolution", "aten::_convolution"), partial(_conv, spec=Conv(3, 4, 5, 8, transposed=6))),
    "aten::cudnn_convolution": partial(_conv, spec=Conv(3, 2, 4, 5, bias=None)),
    "aten::miopen_convolution": partial(_conv, spec=Conv(4, 3, 5, 6)),
    "aten::convolution_backward": partial(_conv, spec=Conv(4, 5, 6, 9, bias=None, transposed=7, grad=True)),
    **{f"aten::{name}": partial(_attention, spec=Attn(q, layout, causal, backward=name.endswith("backward")))
       for name, (q, layout, causal) in _ATTENTION.items()},
    "aten::_efficient_attention_forward": partial(_attention, spec=Attn(0, "bshd", 9, mask=True)),
    "aten::_efficient_attention_backward": partial(_attention, spec=Attn(1, "bshd", 14, mask=True, backward=True)),
    **{name: partial(vector_price, spec=spec) for name, spec in VECTOR.items()},
    **{name: partial(_reduce, dim=dim) for name, dim in REDUCTIONS.items()},
    **GATHERS,
}
# fmt: on


def op_cost(op: TorchOp, stats: SeqStats | None = None) -> Price:
    """The Cost of one execution of ``op`` (module docstring), or None and the reason; ``stats``: the
    query and key lengths of the step it ran in (engine attention over a paged cache)."""
    if op.problem is not None:
        return Price(None, op.problem)
    rule = RULES.get(op.name)
    if rule is None and op.name.startswith("aten::_foreach_"):
        rule = partial(vector_price, spec=Vec())
    if rule is None:
        rule = CUSTOM.get(op.name)  # serving engines' custom ops
    if rule is None:
        engine = engine_price(op, stats)  # engine ops by family
        return engine if engine is not None else Price(None, Reason.of(ReasonCode.TORCH_NO_RULE, op=op.name))
    try:
        return rule(op)
    except (InvalidConfigError, IndexError, ValueError) as exc:
        figures = (("args", op.label()[len(op.name) + 1 :]), ("error", str(exc)), ("op", op.name))
        return Price(None, Reason(ReasonCode.TORCH_ARGS_ERROR, figures))


def nccl_comm(args: Mapping[str, Any], axes: tuple[str, ...]) -> tuple[Comm | None, Note]:
    """The Comm an NCCL kernel ran, over mesh ``axes``, from its args; or None and why."""
    name = str(args.get("Collective name", ""))
    kind = NCCL_KINDS.get(name)
    if not name:
        return None, Reason(ReasonCode.NCCL_NO_COLLECTIVE)
    if kind is None:
        return None, Reason.of(ReasonCode.NCCL_NO_RULE, collective=name)
    dtype = NCCL_DTYPES.get(str(args.get("dtype")))
    key = "Out msg nelems" if kind == "all-gather" or name == "recv" else "In msg nelems"
    nelems = size_value(args.get(key))
    if dtype is None or nelems is None:
        return None, Reason.of(ReasonCode.NCCL_ARGS, collective=shown(name), key=key, count=shown(args.get(key)),
                               dtype=shown(args.get("dtype")))  # fmt: skip
    return Comm(kind, axes, float(nelems) * dtype_bytes(dtype), label=f"nccl {name}"), ""
