"""The pieces of a sharded matmul's strategy (sharding/matmul.py enumerates the strategies): the steps, the
strategy, and the planner that builds one strategy's collectives from one combination of choices (gather,
slice for free, reduce, scatter, move an axis between dims, reach the requested axis order)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rooftop.cost.cost import Cost
from rooftop.sharding.notation import MatmulExpr
from rooftop.sharding.shard import Sharding


@dataclass(frozen=True)
class Dtypes:
    lhs: str = "bf16"
    rhs: str = "bf16"
    out: str = "bf16"
    compute: str | None = None


@dataclass(frozen=True)
class Step:
    """One step of a strategy: a collective (``bytes`` as in Comm) or the local matmul (HBM bytes)."""

    kind: str
    axes: tuple[str, ...]
    bytes: float
    what: str
    tensor: str = ""


@dataclass(frozen=True)
class Strategy:
    """A way to compute a sharded matmul: the operands as multiplied, the steps, the output."""

    name: str
    steps: tuple[Step, ...]
    lhs: Sharding
    rhs: Sharding
    output: Sharding
    local_sizes: Mapping[str, int]
    matmul_cost: Cost
    cost: Cost
    slices: tuple[str, ...] = ()


class Invalid(Exception):
    """A combination of choices that cannot produce the requested output."""


def prefix(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def joined(axes: tuple[str, ...] | list[str]) -> str:
    return "".join(axes)


class Planner:
    """Builds one strategy from one combination of choices."""

    def __init__(
        self, expr: MatmulExpr, sizes: Mapping[str, int], mesh_shape: Mapping[str, int], dtypes: Dtypes
    ) -> None:
        self.expr, self.sizes, self.mesh_shape, self.dtypes = expr, sizes, mesh_shape, dtypes
        self.steps: list[Step] = []
        self.slices: list[str] = []

    def nbytes(self, t: Sharding, dtype: str) -> float:
        return t.local_bytes(self.sizes, self.mesh_shape, dtype)

    def gather(self, t: Sharding, dim: str, axes: list[str], dtype: str) -> Sharding:
        new = t.with_axes(dim, tuple(a for a in t.axes_of(dim) if a not in axes))
        self.steps.append(
            Step(
                "all-gather",
                tuple(axes),
                self.nbytes(new, dtype),
                f"all-gather {t.notation()} over {joined(axes)} -> {new.notation()}",
                t.name,
            )
        )
        return new

    def slice(self, t: Sharding, dim: str, axes: tuple[str, ...]) -> Sharding:
        clash = [a for a in axes if a in t.used or a in t.unreduced]
        if clash:
            raise Invalid(f"{t.notation()} cannot also shard {dim} over {clash[0]} (axis already used)")
        new = t.with_axes(dim, t.axes_of(dim) + axes)
        self.slices.append(f"slice {t.notation()} -> {new.notation()} (local, free)")
        return new

    def prepare(
        self,
        lhs: Sharding,
        rhs: Sharding,
        aligned: list[str],
        targets: tuple[tuple[str, ...], ...],
        conflicts: list[str],
        sides: tuple[str, ...],
        early: list[tuple[str, str, tuple[str, ...]]],
    ) -> tuple[Sharding, Sharding]:
        remove: dict[tuple[str, str], list[str]] = {}
        add: dict[tuple[str, str], tuple[str, ...]] = {}
        ts = {"lhs": lhs, "rhs": rhs}
        for side, dim, axes in early:
            remove.setdefault((side, dim), []).extend(axes)
        for u, side in zip(conflicts, sides, strict=True):
            t = ts[side]
            dim = next(d for d, ax in zip(t.dims, t.axes, strict=True) if u in ax)
            remove.setdefault((side, dim), []).append(u)
        for dim, target in zip(aligned, targets, strict=True):
            for side, t in ts.items():
                cur = t.axes_of(dim)
                p = prefix(cur, target)
                remove.setdefault((side, dim), []).extend(cur[p:])
                add[(side, dim)] = target[p:]
        dt = {"lhs": self.dtypes.lhs, "rhs": self.dtypes.rhs}
        for side in ("lhs", "rhs"):
            for dim in ts[side].dims:
                if remove.get((side, dim)):
                    ts[side] = self.gather(ts[side], dim, list(dict.fromkeys(remove[(side, dim)])), dt[side])
        for (side, dim), axes in add.items():
            if axes:
                ts[side] = self.slice(ts[side], dim, axes)
        return ts["lhs"], ts["rhs"]

    def finish(self, res: Sharding, want: Sharding) -> Sharding:
        """Collectives after the local matmul: reduce, move axes between dims, gather, slice."""
        d_out = self.dtypes.out
        missing_u = [a for a in want.unreduced if a not in res.unreduced]
        if missing_u:
            raise Invalid(
                f"the output asks for {{U_{joined(missing_u)}}} but this way leaves no partial sums over "
                f"{joined(missing_u)}"
            )
        reduce = [a for a in res.unreduced if a not in want.unreduced]
        scatter: dict[str, list[str]] = {}
        for u in reduce:
            dim = next((d for d in res.dims if u in want.axes_of(d) and u not in res.axes_of(d)), None)
            if dim is not None:
                scatter.setdefault(dim, []).append(u)
        for dim, axes in scatter.items():
            axes.sort(key=want.axes_of(dim).index)  # scattered in the requested order (K_ZY is not K_YZ)
            before = res
            res = Sharding(
                res.name,
                res.dims,
                res.with_axes(dim, res.axes_of(dim) + tuple(axes)).axes,
                tuple(a for a in res.unreduced if a not in axes),
            )
            self.steps.append(
                Step(
                    "reduce-scatter",
                    tuple(axes),
                    self.nbytes(before, d_out),
                    f"reduce-scatter {before.notation()} over {joined(axes)} -> {res.notation()}",
                    res.name,
                )
            )
        all_reduce = [a for a in reduce if a in res.unreduced]
        if all_reduce:
            before = res
            res = Sharding(res.name, res.dims, res.axes, tuple(a for a in res.unreduced if a not in all_reduce))
            self.steps.append(
                Step(
                    "all-reduce",
                    tuple(all_reduce),
                    self.nbytes(before, d_out),
                    f"all-reduce {before.notation()} over {joined(all_reduce)} -> {res.notation()}",
                    res.name,
                )
            )
        for dim in res.dims:
            gather = []
            for u in [a for a in res.axes_of(dim) if a not in want.axes_of(dim)]:
                dest = next(
                    (d for d in res.dims if d != dim and u in want.axes_of(d) and u not in res.axes_of(d)), None
                )
                if dest is None:
                    gather.append(u)
                    continue
                before = res
                res = res.with_axes(dim, tuple(a for a in res.axes_of(dim) if a != u))
                res = res.with_axes(dest, res.axes_of(dest) + (u,))
                self.steps.append(
                    Step(
                        "all-to-all",
                        (u,),
                        self.nbytes(before, d_out),
                        f"all-to-all {before.notation()} over {u} -> {res.notation()}",
                        res.name,
                    )
                )
            if gather:
                res = self.gather(res, dim, gather, d_out)
        return self.reorder(res, want)

    def reorder(self, res: Sharding, want: Sharding) -> Sharding:
        """Each output dim's axes in the requested order: axes after the first one out of order are
        gathered (K_YX holds other blocks on each device than K_XY), then the rest is sliced for free."""
        for dim in res.dims:
            cur, wanted = res.axes_of(dim), want.axes_of(dim)
            p = prefix(cur, wanted)
            if cur[p:]:
                res = self.gather(res, dim, list(cur[p:]), self.dtypes.out)
            if wanted[p:]:
                res = self.slice(res, dim, wanted[p:])
        if res.axes != want.axes or res.unreduced != want.unreduced:
            raise Invalid(f"cannot reach {want.notation()} from {res.notation()}")
        return res
