"""Op rules: turn an op description into a Cost. The one place per-op FLOP and byte
counts are written; models, plans and HLO analysis all call these."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from rooftop.cost.cost import Cost, Gemm
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
    cost = Cost.typed({("matrix", dtype): matmul_flops(lhs, rhs, out, sizes)}, by)
    return replace(cost, gemm=matmul_shape(lhs, rhs, out, sizes))


def matmul_shape(lhs: Operand, rhs: Operand, out: Operand, sizes: Mapping[str, int]) -> Gemm:
    """The einsum as ``batch`` (m x k) @ (k x n): k the contracting dims, batch the dims in both inputs
    and the output, m the other lhs dims, n the other rhs dims (each a product of sizes)."""
    contracting, batch = einsum_dims(lhs, rhs, out)

    def prod(dims: Sequence[str]) -> float:
        return float(math.prod(_size(sizes, d) for d in dims))

    paired = set(contracting) | set(batch)
    return Gemm(
        prod([d for d in lhs.dims if d not in paired]),
        prod([d for d in rhs.dims if d not in paired]),
        prod(contracting),
        prod(batch),
        dtype_bytes(out.dtype),
    )


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
    for k, (which, (dims, _)) in enumerate(zip(("lhs", "rhs"), (lhs, rhs), strict=True)):
        paired = [*batch[k], *contracting[k]]
        if any(not 0 <= i < len(dims) for i in paired) or len(set(paired)) != len(paired):
            raise InvalidConfigError(
                f"dot: {which} batch {list(batch[k])} and contracting {list(contracting[k])} dims must be "
                f"distinct dims of the {which} [{', '.join(map(str, dims))}] (0 to {len(dims) - 1})"
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
        values = (self.input, self.kernel, self.output, self.stride, self.pad_low, self.lhs_dilation, self.rhs_dilation)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise InvalidConfigError(f"convolution dim {self}: sizes, stride, padding and dilations are integers")
        if min(self.input, self.kernel, self.output) < 0 or min(self.stride, self.lhs_dilation, self.rhs_dilation) < 1:
            raise InvalidConfigError(f"convolution dim {self}: sizes must be >= 0, stride and dilations >= 1")

    def valid_taps(self) -> int:
        """(output position, kernel position) pairs that read a real input element: output o and kernel
        tap k read the dilated input at u = o * stride + k * rhs_dilation - pad_low, which is an input
        element when u >= 0, u is a multiple of lhs_dilation and u / lhs_dilation < input; padding and the
        holes of lhs dilation cost nothing (XLA HloCostAnalysis::GetConvolutionFlops counts the same).

        Counted in closed form (no loop over the sizes): the pairs with u a multiple of lhs_dilation form
        a 2-D lattice, and the count of its points in the polygon of the bounds is a sum of floors of
        linear functions (``_lattice_count``)."""
        return _lattice_count(self.output, self.kernel, self.input, self.stride, self.rhs_dilation,
                              self.lhs_dilation, self.pad_low)  # fmt: skip


def floor_sum(n: int, m: int, a: int, b: int) -> int:
    """sum_{i=0}^{n-1} floor((a i + b) / m) for m >= 1 and any integers a, b, in O(log) steps (the
    Euclid-like reduction of AtCoder Library's floor_sum)."""
    total = 0
    while n > 0:
        if a >= m or a < 0:
            total += (a // m) * n * (n - 1) // 2
            a %= m
        if b >= m or b < 0:
            total += (b // m) * n
            b %= m
        y_max = a * n + b
        if y_max < m:
            break
        n, b, m, a = y_max // m, y_max % m, a, m
    return total


def _lattice_count(out: int, kernel: int, n: int, s: int, r: int, d: int, p: int) -> int:
    """#{(o, k): 0 <= o < out, 0 <= k < kernel, u = s o + r k - p, 0 <= u <= (n - 1) d, d | u}.

    The (o, k) with d | s o + r k - p are o = o0 + P t and k = c0 - c1 t + M e for integers t, e (P, M
    from gcds, c0, c1 from a modular inverse). For each t the bounds on k and on u confine e to
    [max of two lower lines, min of two upper lines] in t; the count is the sum over t of
    floor(upper) - ceil(lower) + 1 where that is positive, done piecewise with ``floor_sum``."""
    if min(out, kernel, n) <= 0:
        return 0
    g1 = math.gcd(r, d)
    h = math.gcd(s, g1)
    if p % h:
        return 0
    big_p = g1 // h  # o runs over o0 + P t
    o0 = (p // h) * pow(s // h, -1, big_p) % big_p if big_p > 1 else 0
    big_m = d // g1  # k runs over c0 - c1 t + M e
    w = pow(r // g1, -1, big_m) if big_m > 1 else 0
    a0, a1 = (p - s * o0) // g1, s * big_p // g1
    c0, c1 = (a0 * w) % big_m, (a1 * w) % big_m
    t_hi = (out - 1 - o0) // big_p
    if t_hi < 0:
        return 0
    u0, u1, ue = s * o0 + r * c0 - p, s * big_p - r * c1, r * big_m  # u = u0 + u1 t + ue e
    # Lines (slope, intercept, denominator) in t: e >= lower, e <= upper.
    lowers = ((c1, -c0, big_m), (-u1, -u0, ue))
    uppers = ((c1, kernel - 1 - c0, big_m), (-u1, (n - 1) * d - u0, ue))
    cuts = {0, t_hi + 1}
    for (a1_, b1_, m1_), (a2_, b2_, m2_) in (lowers, uppers):
        num, den = b2_ * m1_ - b1_ * m2_, a1_ * m2_ - a2_ * m1_  # crossing at t = num / den
        if den:
            cut = num // den + 1 if den > 0 else (-num) // (-den) + 1
            if 0 < cut <= t_hi:
                cuts.add(cut)
    total = 0
    edges = sorted(cuts)
    from fractions import Fraction  # here: fractions loads decimal, which a one-op command never needs

    for x, y in itertools.pairwise(edges):
        lo = max(lowers, key=lambda ln: Fraction(ln[0] * x + ln[1], ln[2]))
        hi = min(uppers, key=lambda ln: Fraction(ln[0] * x + ln[1], ln[2]))
        x, y = _nonempty(lo, hi, x, y - 1)
        if x <= y:
            count = y - x + 1
            total += floor_sum(count, hi[2], hi[0], hi[0] * x + hi[1])
            total += floor_sum(count, lo[2], -lo[0], -(lo[0] * x + lo[1])) + count
    return total


def _nonempty(lo: tuple[int, int, int], hi: tuple[int, int, int], x: int, y: int) -> tuple[int, int]:
    """The t in [x, y] where upper(t) - lower(t) >= 0 (there floor(upper) - ceil(lower) + 1 >= 0, and it is
    <= 0 elsewhere): a linear inequality alpha t + beta >= 0."""
    alpha = hi[0] * lo[2] - lo[0] * hi[2]
    beta = hi[1] * lo[2] - lo[1] * hi[2]
    if alpha > 0:
        x = max(x, -(beta // alpha))
    elif alpha < 0:
        y = min(y, beta // -alpha)
    elif beta < 0:
        return 1, 0
    return x, y


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
    _check_groups(batch, in_features, feature_group_count, batch_group_count)
    taps = math.prod(float(d.valid_taps()) for d in spatial)
    return 2.0 * (batch // batch_group_count) * float(out_features) * (in_features // feature_group_count) * taps


def _check_groups(batch: int, in_features: int, feature_group_count: int, batch_group_count: int) -> None:
    """Group counts are >= 1 and divide what they split (XLA's convolution shape rules)."""
    if feature_group_count < 1 or batch_group_count < 1:
        raise InvalidConfigError(
            f"convolution group counts must be >= 1, got feature_group_count={feature_group_count}, "
            f"batch_group_count={batch_group_count}"
        )
    if in_features % feature_group_count or batch % batch_group_count:
        raise InvalidConfigError(
            f"convolution feature_group_count={feature_group_count} must divide the {in_features} input features "
            f"and batch_group_count={batch_group_count} the batch of {batch}"
        )


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
    _check_groups(batch, in_features, feature_group_count, batch_group_count)
    groups_in = in_features // feature_group_count
    elements = (
        float(batch) * in_features * math.prod(float(d.input) for d in spatial),
        float(out_features) * groups_in * math.prod(float(d.kernel) for d in spatial),
        float(batch // batch_group_count) * out_features * math.prod(float(d.output) for d in spatial),
    )
    nbytes = sum(e * dtype_bytes(d) for e, d in zip(elements, (lhs, rhs, out), strict=True))
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
