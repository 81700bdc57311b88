"""The fastest input shardings of a matmul on a mesh ("How to Scale Your Model", Part 3 Question 5:
"how should my inputs be sharded" for the lowest latency), searched (numbers only).

Every mesh axis takes one role: it replicates both inputs, or shards one dim in every input that
carries it (a batch dim of the left input, an output dim of the right, a contracting dim of both), or
shards a contracting dim in one input only (Part 3 Case 2). Each assignment is a sharded matmul that
sharding/matmul.py plans and times (its fastest strategy and collectives); the assignments are ranked
by that strategy's lower bound, then its upper bound. Axes alike (same size and the same links on
equal physical dims) are interchangeable, so only one assignment per multiset of roles is timed.
The output is the expression's when it names one, otherwise whatever each strategy leaves.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from rooftop.errors import ShardingError
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh
from rooftop.sharding.matmul import ShardedMatmul, analyze_sharded_matmul, check_sizes
from rooftop.sharding.notation import Dim, MatmulExpr, Tensor
from rooftop.sharding.strategy import Dtypes

#: most assignments timed (each times every strategy of one sharded matmul)
MAX_ASSIGNMENTS = 512


@dataclass(frozen=True)
class Candidate:
    """One assignment of mesh axes to dims and the sharded matmul it gives."""

    expr: MatmulExpr
    result: ShardedMatmul


def _roles(expr: MatmulExpr) -> list[tuple[str, str]]:
    """(dim, which inputs): "" replicates; "both" every input carrying the dim; "lhs"/"rhs" one input."""
    lhs, rhs = set(expr.lhs.dim_names), set(expr.rhs.dim_names)
    out: list[tuple[str, str]] = [("", "")]
    for d in dict.fromkeys([*expr.lhs.dim_names, *expr.rhs.dim_names]):
        out.append((d, "both"))
        if d in lhs and d in rhs:
            out += [(d, "lhs"), (d, "rhs")]
    return out


def _axis_kind(mesh: Mesh, name: str) -> tuple[object, ...]:
    axis = mesh.axis(name)
    return (axis.size, tuple((s.size, s.stride, s.link, s.wrap, mesh.topology.dims[s.dim].size) for s in axis.segments))


def _tensor(t: Tensor, side: str, picks: Mapping[str, tuple[str, str]], order: list[str]) -> Tensor:
    dims = []
    for d in t.dims:
        axes = [a for a in order if picks[a][0] == d.name and picks[a][1] in ("both", side)]
        dims.append(Dim(d.name, "".join(axes)))
    return Tensor(t.name, tuple(dims))


def _assignments(expr: MatmulExpr, mesh: Mesh) -> list[dict[str, tuple[str, str]]]:
    names = list(mesh.shape)
    roles = _roles(expr)
    seen: set[tuple[object, ...]] = set()
    out = []
    for combo in itertools.product(roles, repeat=len(names)):
        key = tuple(sorted((repr(_axis_kind(mesh, a)), r) for a, r in zip(names, combo, strict=True)))
        if key in seen:
            continue
        seen.add(key)
        out.append(dict(zip(names, combo, strict=True)))
        if len(out) >= MAX_ASSIGNMENTS:
            break
    return out


def search_shardings(
    expr: MatmulExpr, sizes: Mapping[str, int], mesh: Mesh, chip: Chip, dtypes: Dtypes | None = None, top: int = 10
) -> tuple[Candidate, ...]:
    """The ``top`` fastest input shardings of ``expr``'s dims on ``mesh`` (the subscripts of ``expr``'s
    inputs are ignored; see the module docstring). Assignments whose dims the axes do not divide are skipped."""
    check_sizes(expr, sizes)
    dtypes = dtypes or Dtypes()
    order = list(mesh.shape)
    found = []
    for picks in _assignments(expr, mesh):
        lhs = _tensor(expr.lhs, "lhs", picks, order)
        rhs = _tensor(expr.rhs, "rhs", picks, order)
        cand = MatmulExpr(lhs, rhs, expr.out, expr.out_given)
        try:
            found.append(Candidate(cand, analyze_sharded_matmul(cand, sizes, mesh, chip, dtypes)))
        except ShardingError:
            continue  # a dim the chosen axes do not divide
    if not found:
        raise ShardingError(f"no sharding of {expr} divides its dims over mesh {mesh.spec()}")
    found.sort(key=lambda c: (c.result.best.estimate.lower_bound_s, c.result.best.estimate.upper_bound_s))
    return tuple(found[:top])
