"""Matmuls written in the sharding notation, priced through cost/op.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rooftop.cost.cost import Cost
from rooftop.cost.op import Operand, matmul
from rooftop.errors import InvalidConfigError
from rooftop.sharding.notation import MatmulExpr, Tensor


@dataclass(frozen=True)
class Dtypes:
    lhs: str = "bf16"
    rhs: str = "bf16"
    out: str = "bf16"
    compute: str | None = None


def check_sizes(expr: MatmulExpr, sizes: Mapping[str, int]) -> None:
    names = dict.fromkeys([*expr.lhs.dim_names, *expr.rhs.dim_names, *expr.out.dim_names])
    missing = [n for n in names if n not in sizes]
    if missing:
        raise InvalidConfigError(
            f"--dims gives no size for {', '.join(missing)} (needed: {', '.join(names)}; e.g. --dims "
            + ",".join(f"{n}=1024" for n in names) + ")")
    extra = [n for n in sizes if n not in names]
    if extra:
        raise InvalidConfigError(f"--dims names {', '.join(extra)}, which the expression does not use")


def operand(t: Tensor, dtype: str) -> Operand:
    return Operand(t.dim_names, dtype)


def local_matmul_cost(expr: MatmulExpr, sizes: Mapping[str, int], dtypes: Dtypes = Dtypes()) -> Cost:
    """Cost of the whole (unsharded) matmul on one chip."""
    check_sizes(expr, sizes)
    return matmul(operand(expr.lhs, dtypes.lhs), operand(expr.rhs, dtypes.rhs), operand(expr.out, dtypes.out),
                  sizes, dtypes.compute)


def is_sharded(expr: MatmulExpr) -> bool:
    return any(d.axes_text for t in (expr.lhs, expr.rhs, expr.out) for d in t.dims) or bool(
        expr.lhs.unreduced_text or expr.rhs.unreduced_text or expr.out.unreduced_text)
