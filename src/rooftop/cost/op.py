"""Op rules: turn an op description into a Cost. The one place per-op FLOP and byte
counts are written; models, plans and HLO analysis all call these."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rooftop.cost.cost import Cost
from rooftop.dtypes import canonical_dtype, compute_dtype, dtype_bytes
from rooftop.errors import InvalidConfigError


@dataclass(frozen=True)
class Operand:
    """A tensor by its named dims and dtype: ``Operand(("B", "D"), "bf16")``; ``kind`` says what
    its bytes are (cost.BYTE_KINDS: "weights", "activations", ...; "other" when not known)."""

    dims: tuple[str, ...]
    dtype: str = "bf16"
    kind: str = "other"

    def elements(self, sizes: Mapping[str, int]) -> float:
        return float(math.prod(_size(sizes, d) for d in self.dims))

    def nbytes(self, sizes: Mapping[str, int]) -> float:
        return self.elements(sizes) * dtype_bytes(self.dtype)


def _size(sizes: Mapping[str, int], dim: str) -> int:
    if dim not in sizes:
        raise InvalidConfigError(f"no size given for dim {dim!r} (given: {', '.join(sizes) or 'none'})")
    return sizes[dim]


def einsum_dims(lhs: Operand, rhs: Operand, out: Operand) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(contracting dims, batch dims) of a two-operand einsum. Contracting: in both
    inputs, not in the output. Batch: in both inputs and in the output."""
    both = [d for d in lhs.dims if d in rhs.dims]
    contracting = tuple(d for d in both if d not in out.dims)
    batch = tuple(d for d in both if d in out.dims)
    for d in out.dims:
        if d not in lhs.dims and d not in rhs.dims:
            raise InvalidConfigError(f"output dim {d!r} appears in neither input")
    return contracting, batch


def matmul_flops(lhs: Operand, rhs: Operand, out: Operand, sizes: Mapping[str, int]) -> float:
    """2 x (product of every distinct dim): one multiply and one add per term of each
    output element's sum (How to Scale Your Model, Part 1: FLOPs of a contraction)."""
    einsum_dims(lhs, rhs, out)
    dims = dict.fromkeys([*lhs.dims, *rhs.dims, *out.dims])
    return 2.0 * math.prod(float(_size(sizes, d)) for d in dims)


def matmul(lhs: Operand, rhs: Operand, out: Operand, sizes: Mapping[str, int], compute: str | None = None) -> Cost:
    """Cost of ``out = lhs @ rhs`` as an einsum on the matrix unit.

    FLOPs = 2 * prod(all dims); HBM bytes = lhs + rhs + out, each in its own dtype
    (bf16 activations x int8 weights read one byte per weight). The compute dtype is
    the wider input dtype unless given (bf16 x int8 computes in bf16)."""
    dtype = canonical_dtype(compute) if compute else compute_dtype(lhs.dtype, rhs.dtype)
    by: dict[str, float] = {}
    for x in (lhs, rhs, out):
        by[x.kind] = by.get(x.kind, 0.0) + x.nbytes(sizes)
    return Cost.typed({("matrix", dtype): matmul_flops(lhs, rhs, out, sizes)}, by)


def elementwise(
    elements: float,
    dtype: str = "bf16",
    flops_per_element: float = 1.0,
    inputs: int = 1,
    outputs: int = 1,
    kind: str = "other",
) -> Cost:
    """Vector-unit op over ``elements``: FLOPs = elements x flops_per_element; bytes =
    elements x (inputs + outputs) x dtype bytes (each operand read once, result written once),
    all of one ``kind``."""
    d = canonical_dtype(dtype)
    return Cost.typed(
        {("vector", d): elements * flops_per_element} if flops_per_element else {},
        {kind: elements * (inputs + outputs) * dtype_bytes(d)},
    )


def reduction(elements_in: float, elements_out: float, dtype: str = "bf16") -> Cost:
    """Reduce ``elements_in`` to ``elements_out``: one FLOP per input element, read
    the input once, write the output once."""
    d = canonical_dtype(dtype)
    return Cost({("vector", d): elements_in}, (elements_in + elements_out) * dtype_bytes(d))


def dot_general(
    lhs: tuple[Sequence[int], str],
    rhs: tuple[Sequence[int], str],
    batch: tuple[Sequence[int], Sequence[int]],
    contracting: tuple[Sequence[int], Sequence[int]],
    out_dtype: str | None = None,
) -> Cost:
    """``matmul`` of two arrays given as (dims, dtype) with XLA DotGeneral dimension numbers: ``batch`` and
    ``contracting`` list the (lhs, rhs) dim indices that pair up, the other dims are free, and the output
    is batch + lhs free + rhs free dims (XLA operation semantics, DotGeneral)."""
    if len(batch[0]) != len(batch[1]) or len(contracting[0]) != len(contracting[1]):
        raise InvalidConfigError(
            f"dot: lhs and rhs pair different numbers of dims: batch {batch}, contracting {contracting}"
        )
    sizes: dict[str, int] = {}
    names: list[tuple[str, ...]] = []
    for side, (dims, _) in enumerate((lhs, rhs)):
        side_names = []
        for i, size in enumerate(dims):
            name = (
                f"b{list(batch[side]).index(i)}"
                if i in batch[side]
                else (f"k{list(contracting[side]).index(i)}" if i in contracting[side] else f"{'mn'[side]}{i}")
            )
            if sizes.setdefault(name, max(size, 0)) != max(size, 0):
                raise InvalidConfigError(
                    f"dot: paired dim {name} is {sizes[name]} in lhs {list(lhs[0])} but {size} in rhs {list(rhs[0])}"
                )
            side_names.append(name)
        names.append(tuple(side_names))
    out = tuple(n for n in names[0] if n[0] in "bm") + tuple(n for n in names[1] if n[0] == "n")
    return matmul(Operand(names[0], lhs[1]), Operand(names[1], rhs[1]), Operand(out, out_dtype or lhs[1]), sizes)


@dataclass(frozen=True)
class ConvDim:
    """One spatial dim of a convolution as XLA's window describes it: ``input``, ``kernel`` and ``output``
    sizes, ``stride``, low padding, and the input (lhs, "base") and kernel (rhs, "window") dilations."""

    input: int
    kernel: int
    output: int
    stride: int = 1
    pad_low: int = 0
    lhs_dilation: int = 1
    rhs_dilation: int = 1

    def __post_init__(self) -> None:
        if min(self.input, self.kernel, self.output) < 0 or min(self.stride, self.lhs_dilation, self.rhs_dilation) < 1:
            raise InvalidConfigError(f"convolution dim {self}: sizes must be >= 0, stride and dilations >= 1")

    def valid_taps(self) -> int:
        """(output position, kernel position) pairs that read a real input element: output o and kernel
        tap k read the dilated input at u = o * stride + k * rhs_dilation - pad_low, which is an input
        element when u >= 0, u is a multiple of lhs_dilation and u / lhs_dilation < input; padding and the
        holes of lhs dilation cost nothing (XLA HloCostAnalysis::GetConvolutionFlops counts the same)."""
        s, d, n = self.stride, self.lhs_dilation, self.input
        taps = 0
        for k in range(self.kernel):
            c = k * self.rhs_dilation - self.pad_low
            if d == 1:  # o in [ceil(-c / s), floor((n - 1 - c) / s)] within [0, output)
                lo, hi = max(0, -(c // s)), min(self.output - 1, (n - 1 - c) // s)
                taps += max(0, hi - lo + 1)
            else:
                taps += sum(1 for o in range(self.output) if (u := o * s + c) >= 0 and u % d == 0 and u // d < n)
        return taps


def convolution_flops(
    batch: int,
    in_features: int,
    out_features: int,
    spatial: Sequence[ConvDim],
    feature_group_count: int = 1,
    batch_group_count: int = 1,
) -> float:
    """2 x (batch / batch groups) x out_features x (in_features / feature groups) x prod(valid taps per
    spatial dim): one multiply-add per (output element, kernel tap that reads input) and input feature of
    its group (XLA HloCostAnalysis::GetConvolutionFlops; a dense 2-D conv without padding is the familiar
    2 x B x H_out x W_out x K_h x K_w x C_in x C_out)."""
    if feature_group_count < 1 or batch_group_count < 1:
        raise InvalidConfigError(f"group counts must be >= 1, got {feature_group_count}, {batch_group_count}")
    taps = math.prod(float(d.valid_taps()) for d in spatial)
    return 2.0 * (batch // batch_group_count) * out_features * (in_features // feature_group_count) * taps


def convolution(
    batch: int,
    in_features: int,
    out_features: int,
    spatial: Sequence[ConvDim],
    dtypes: tuple[str, str, str] = ("bf16", "bf16", "bf16"),
    feature_group_count: int = 1,
    batch_group_count: int = 1,
) -> Cost:
    """Cost of a convolution on the matrix unit: FLOPs from ``convolution_flops``; HBM bytes = input +
    kernel + output, each read or written once in its dtype (``dtypes`` = input, kernel, output); the
    compute dtype is the wider of input and kernel, as for ``matmul``."""
    lhs, rhs, out = (canonical_dtype(d) for d in dtypes)
    groups_in = in_features // feature_group_count
    elements = (
        batch * in_features * math.prod(d.input for d in spatial),
        out_features * groups_in * math.prod(d.kernel for d in spatial),
        (batch // batch_group_count) * out_features * math.prod(d.output for d in spatial),
    )
    nbytes = sum(float(e) * dtype_bytes(d) for e, d in zip(elements, (lhs, rhs, out), strict=True))
    flops = convolution_flops(batch, in_features, out_features, spatial, feature_group_count, batch_group_count)
    return Cost({("matrix", compute_dtype(lhs, rhs)): flops} if flops else {}, nbytes)


def attended_pairs(q_len: int, kv_len: int, window: int = 0, causal: bool = True) -> float:
    """(query, key) pairs attention computes for ``q_len`` new tokens at the end of
    ``kv_len`` keys. Causal: the query at key position j (1-based) sees min(j, window) keys,
    so pairs = S(kv_len) - S(kv_len - q_len) with S(n) = sum_{j<=n} min(j, w): T(T+1)/2 for a
    training sequence, kv_len for one decode step. Not causal: q_len x kv_len (capped by window)."""
    if not causal:
        return float(q_len * (min(kv_len, window) if window else kv_len))

    def s(n: int) -> float:
        if not window or n <= window:
            return n * (n + 1) / 2
        return window * (window + 1) / 2 + (n - window) * window

    return s(kv_len) - s(kv_len - q_len)


#: backward of fused attention / forward: dQ, dK, dV and the recomputed scores — 2 matmuls
#: forward, 5 backward (FlashAttention-2, Dao 2023, section 3.1: 2.5x the forward FLOPs).
ATTENTION_BACKWARD_FACTOR = 2.5


def fused_attention_flops(
    batch: int, heads: int, q_len: int, kv_len: int, d_qk: int, d_v: int, causal: bool, backward: bool = False
) -> float:
    """Matrix FLOPs of a fused attention kernel: QK^T (2 D_qk per pair) and AV (2 D_v per pair)
    over the attended pairs of every head and sequence; x ATTENTION_BACKWARD_FACTOR backward.
    Shared by the HLO custom-call rules and the PyTorch (aten SDPA) rules."""
    pairs = attended_pairs(q_len, kv_len, 0, causal)
    return 2.0 * batch * heads * pairs * (d_qk + d_v) * (ATTENTION_BACKWARD_FACTOR if backward else 1.0)


def explicit(flops: float, hbm_bytes: float, dtype: str = "bf16", unit: str = "matrix", kind: str = "other") -> Cost:
    """An op given directly by its FLOPs and bytes (all of one ``kind``)."""
    if unit not in ("matrix", "vector"):
        raise InvalidConfigError(f"unknown compute unit {unit!r} (valid: matrix, vector)")
    if flops < 0 or hbm_bytes < 0:
        raise InvalidConfigError(f"FLOPs and bytes must be >= 0, got flops={flops}, bytes={hbm_bytes}")
    return Cost.typed({(unit, canonical_dtype(dtype)): float(flops)} if flops else {}, {kind: float(hbm_bytes)})


def shape_elements(shape: Sequence[int]) -> float:
    return float(math.prod(shape))
