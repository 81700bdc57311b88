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
    """A tensor by its named dims and dtype: ``Operand(("B", "D"), "bf16")``."""

    dims: tuple[str, ...]
    dtype: str = "bf16"

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
    nbytes = lhs.nbytes(sizes) + rhs.nbytes(sizes) + out.nbytes(sizes)
    return Cost({("matrix", dtype): matmul_flops(lhs, rhs, out, sizes)}, nbytes)


def elementwise(
    elements: float, dtype: str = "bf16", flops_per_element: float = 1.0, inputs: int = 1, outputs: int = 1
) -> Cost:
    """Vector-unit op over ``elements``: FLOPs = elements x flops_per_element; bytes =
    elements x (inputs + outputs) x dtype bytes (each operand read once, result written once)."""
    d = canonical_dtype(dtype)
    return Cost(
        {("vector", d): elements * flops_per_element} if flops_per_element else {},
        elements * (inputs + outputs) * dtype_bytes(d),
    )


def reduction(elements_in: float, elements_out: float, dtype: str = "bf16") -> Cost:
    """Reduce ``elements_in`` to ``elements_out``: one FLOP per input element, read
    the input once, write the output once."""
    d = canonical_dtype(dtype)
    return Cost({("vector", d): elements_in}, (elements_in + elements_out) * dtype_bytes(d))


def explicit(flops: float, hbm_bytes: float, dtype: str = "bf16", unit: str = "matrix") -> Cost:
    """An op given directly by its FLOPs and bytes."""
    if unit not in ("matrix", "vector"):
        raise InvalidConfigError(f"unknown compute unit {unit!r} (valid: matrix, vector)")
    if flops < 0 or hbm_bytes < 0:
        raise InvalidConfigError(f"FLOPs and bytes must be >= 0, got flops={flops}, bytes={hbm_bytes}")
    return Cost({(unit, canonical_dtype(dtype)): float(flops)} if flops else {}, float(hbm_bytes))


def shape_elements(shape: Sequence[int]) -> float:
    return float(math.prod(shape))
