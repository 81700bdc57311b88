"""Questions about one dim of a local matmul: at which size it turns compute-bound (its critical size,
"How to Scale Your Model" Part 1 "Rooflines": B > C / W_hbm for a bf16 [B, D] x [D, F] matmul, 240
on TPU v5e; Part 2 Question 4 solves the exact form, B > 271 for int8 [B, 4096] x [4096, 16384]),
and how its FLOP rate grows along that dim (Part 1's plot of FLOP/s against batch for several D, F).

Every time comes from cost/roofline.py on the cost of cost/op.matmul (numbers only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rooftop.cost.roofline import Estimate, roofline
from rooftop.dtypes import dtype_bytes
from rooftop.errors import InvalidConfigError, shown
from rooftop.hardware.chip import Chip
from rooftop.sharding.matmul import local_matmul_cost
from rooftop.sharding.notation import MatmulExpr
from rooftop.sharding.strategy import Dtypes

#: the largest size searched for a critical size (2^40: far past any real dim)
MAX_SEARCH = 1 << 40


@dataclass(frozen=True)
class CriticalSize:
    """The smallest size of ``dim`` at which the matmul's FLOPs take at least as long as its HBM
    traffic (None when no size does: the other dims are too small), the estimate there, and the book's
    closed form (ridge point x bytes of the operand without ``dim`` / 2, None when not one operand)."""

    dim: str
    size: int | None
    estimate: Estimate | None
    critical_intensity: float
    book_size: float | None
    book_dtype: str | None


def _estimate(expr: MatmulExpr, sizes: Mapping[str, int], dim: str, n: int, chip: Chip, dtypes: Dtypes) -> Estimate:
    return roofline(local_matmul_cost(expr, {**sizes, dim: n}, dtypes), chip)


def _check_dim(expr: MatmulExpr, dim: str) -> None:
    names = dict.fromkeys([*expr.lhs.dim_names, *expr.rhs.dim_names, *expr.out.dim_names])
    if dim not in names:
        raise InvalidConfigError(f"{shown(dim)} is not a dim of {expr} (dims: {', '.join(names)})")


def critical_size(expr: MatmulExpr, sizes: Mapping[str, int], dim: str, chip: Chip, dtypes: Dtypes) -> CriticalSize:
    """Solve for the critical size of ``dim`` (the other dims as given) by bisection: the ratio of
    compute to HBM time grows with the size of a dim two of the three operands carry."""
    _check_dim(expr, dim)
    top = _estimate(expr, sizes, dim, MAX_SEARCH, chip, dtypes)
    book, book_dtype = _book(expr, dim, chip, dtypes, top.critical_intensity)
    if top.compute_s < top.memory_s:
        return CriticalSize(dim, None, None, top.critical_intensity, book, book_dtype)
    lo, hi = 0, MAX_SEARCH  # compute-bound at hi; not at lo (size 0 does nothing)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        est = _estimate(expr, sizes, dim, mid, chip, dtypes)
        lo, hi = (lo, mid) if est.compute_s >= est.memory_s else (mid, hi)
    return CriticalSize(
        dim, hi, _estimate(expr, sizes, dim, hi, chip, dtypes), top.critical_intensity, book, book_dtype
    )


def _book(expr: MatmulExpr, dim: str, chip: Chip, dtypes: Dtypes, ridge: float) -> tuple[float | None, str | None]:
    """The book's approximation: when the size is small against the others, the traffic is the operand
    without ``dim`` (the weights), so intensity = 2 x size / its bytes per element: size > ridge x bytes / 2."""
    without = [(t, d) for t, d in ((expr.lhs, dtypes.lhs), (expr.rhs, dtypes.rhs)) if dim not in t.dim_names]
    if len(without) != 1:
        return None, None
    dtype = without[0][1]
    return ridge * dtype_bytes(dtype) / 2, dtype


@dataclass(frozen=True)
class SweepSeries:
    """One line of a sweep: the other dims' sizes and the estimate at each size of the swept dim."""

    label: str
    sizes: Mapping[str, int]
    points: tuple[tuple[int, Estimate], ...]


def sweep(
    expr: MatmulExpr,
    sizes: Mapping[str, int],
    dim: str,
    values: Sequence[int],
    series: Sequence[Mapping[str, int]],
    chip: Chip,
    dtypes: Dtypes,
) -> tuple[SweepSeries, ...]:
    """The roofline of the matmul at each of ``values`` of ``dim``, once per entry of ``series`` (sizes
    of the other dims that override ``sizes``; one line with ``sizes`` when empty)."""
    _check_dim(expr, dim)
    out = []
    for over in series or ({},):
        these = {**sizes, **over}
        label = ", ".join(f"{k}={v}" for k, v in over.items()) or ", ".join(
            f"{k}={v}" for k, v in sizes.items() if k != dim
        )
        points = tuple((n, _estimate(expr, these, dim, n, chip, dtypes)) for n in values)
        out.append(SweepSeries(label, these, points))
    return tuple(out)
