"""Matmuls written in the sharding notation, priced through cost/op.py; sharded ones get
their collectives from the Part 3 cases and their times from cost/roofline.py."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

from rooftop.cost.cost import Comm, Cost
from rooftop.cost.op import Operand, matmul
from rooftop.cost.roofline import Estimate, Term, collective_term, roofline
from rooftop.errors import ShardingError, shown
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh
from rooftop.reasons import Option, OptionError
from rooftop.sharding.notation import MatmulExpr, Tensor
from rooftop.sharding.shard import Sharding, check_elements, resolve_sharding
from rooftop.sharding.strategy import Dtypes, Invalid, Planner, Step, Strategy, joined

#: most strategies a sharded matmul enumerates (3 per sharded dim in both inputs, 2 per conflict
#: and 2**k per free input dim sharded over k axes): real matmuls shard two or three dims and have tens
MAX_STRATEGIES = 1 << 12
DEFAULT_DTYPES = Dtypes()  # bf16 operands and output


def check_sizes(expr: MatmulExpr, sizes: Mapping[str, int]) -> None:
    names = dict.fromkeys([*expr.lhs.dim_names, *expr.rhs.dim_names, *expr.out.dim_names])
    missing = [n for n in names if n not in sizes]
    if missing:
        example = ",".join(f"{n}=1024" for n in names)
        raise OptionError(  # a 10,000-character dimension name stays one short line (shown cuts it)
            Option("dims"),
            f" gives no size for {shown(', '.join(missing))} (needed: {shown(', '.join(names))}; e.g. ",
            Option("dims"),
            f" {shown(example)})",
        )
    extra = [n for n in sizes if n not in names]
    if extra:
        raise OptionError(Option("dims"), f" names {shown(', '.join(extra))}, which the expression does not use")
    check_elements([sizes[n] for n in names], f"matmul {expr}")


def operand(t: Tensor, dtype: str) -> Operand:
    return Operand(t.dim_names, dtype)


def local_matmul_cost(expr: MatmulExpr, sizes: Mapping[str, int], dtypes: Dtypes = DEFAULT_DTYPES) -> Cost:
    """Cost of the whole (unsharded) matmul on one chip."""
    check_sizes(expr, sizes)
    return matmul(
        operand(expr.lhs, dtypes.lhs),
        operand(expr.rhs, dtypes.rhs),
        operand(expr.out, dtypes.out),
        sizes,
        dtypes.compute,
    )


def is_sharded(expr: MatmulExpr) -> bool:
    return any(d.axes_text for t in (expr.lhs, expr.rhs, expr.out) for d in t.dims) or bool(
        expr.lhs.unreduced_text or expr.rhs.unreduced_text or expr.out.unreduced_text
    )


# --- Sharded matmuls: How to Scale Your Model, Part 3, "Computation With Sharded Arrays" ---
#
# Case 1: no input is sharded on a contracting dim -> multiply local blocks, no communication.
# Case 2: one input is sharded on a contracting dim -> all-gather that input's dim first, or
#         (the book's Question 4/9 alternative) slice the other input to the same axes for free
#         and reduce the partial sums afterwards.
# Case 3: both inputs are sharded the same way on the contracting dim -> local matmul gives
#         partial sums {U_X}; all-reduce them, or reduce-scatter onto the output dim the
#         requested output shards over X, or keep {U_X} when the output asks for it.
# Case 4: both inputs shard a non-contracting dim over the same axis -> one side must be
#         all-gathered first (two choices).
# Every choice is enumerated; each strategy is priced with the same roofline (local matmul
# on the chip + each collective by cost/collectives.py) and the fastest is picked (lowest
# overlapped lower bound, then serial upper bound). A requested output dim sharded over an
# axis the inputs replicate is obtained by slicing the input before the matmul (fewer FLOPs);
# an axis that must move between output dims is an all-to-all; one that must go is gathered
# before the matmul or after it (both are tried). Without a requested output, the output is
# the local result with its partial sums all-reduced, so case 4's two choices report two
# different output shardings. Axis order inside one subscript matters (J_XY is not J_YX: each
# device holds another block): the output is reached in the requested order, axes out of order
# gathered and sliced again. Each output is also planned cut short (a prefix of each dim's axes)
# and sliced locally to the rest, so sharding the output over more axes never costs more; a
# strategy another one dominates (same output, no more FLOPs or bytes, a subset of its
# collectives) is dropped.


def _freeprefix(axes: tuple[str, ...], used: set[str]) -> tuple[str, ...]:
    """The leading ``axes`` none of ``used``: those a replicated input can be sliced over before the matmul."""
    n = 0
    while n < len(axes) and axes[n] not in used:
        n += 1
    return axes[:n]


def _unique(options: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return list(dict.fromkeys(options))


def _conflicts(lhs: Sharding, rhs: Sharding) -> list[str]:
    free_l = {a for d, ax in zip(lhs.dims, lhs.axes, strict=True) if d not in rhs.dims for a in ax}
    free_r = {a for d, ax in zip(rhs.dims, rhs.axes, strict=True) if d not in lhs.dims for a in ax}
    return sorted(free_l & free_r)


def _early_gathers(
    lhs: Sharding, rhs: Sharding, target: Sharding | None
) -> list[list[tuple[str, str, tuple[str, ...]]]]:
    """Free input dims sharded over axes the output (``target``) does not shard them over: those axes can be
    gathered before the matmul (on the input) or after (on the output); the two options of each."""
    if target is None:
        return []
    out = []
    for side, t, other in (("lhs", lhs, rhs), ("rhs", rhs, lhs)):
        for d, ax in zip(t.dims, t.axes, strict=True):
            if d in target.dims and d not in other.dims:
                extra = tuple(a for a in ax if a not in target.axes_of(d))
                if extra:
                    out.append([(side, d, ()), (side, d, extra)])
    return out


def _stops(target: Sharding | None) -> list[Sharding | None]:
    """The outputs a plan may reach before its last free slices: the requested one with each dim's axes cut to
    a prefix (C[I_X, K_YZ] -> C[I_X, K_Y], C[I, K_YZ], ...). Planning each and slicing the rest locally means a
    finer output has every way to compute a coarser one, so sharding the output more never costs more."""
    if target is None:
        return [None]
    cuts = itertools.product(*(range(len(ax), -1, -1) for ax in target.axes))  # the requested output first
    return [
        Sharding(
            target.name, target.dims, tuple(ax[:n] for ax, n in zip(target.axes, c, strict=True)), target.unreduced
        )
        for c in cuts
    ]


#: collectives that cost at least as much as one of the key's kind over the same axes and bytes (an all-reduce is
#: a reduce-scatter followed by an all-gather: How to Scale Your Model, Part 3)
_AT_LEAST = {
    "all-gather": ("all-gather",),
    "reduce-scatter": ("reduce-scatter", "all-reduce"),
    "all-reduce": ("all-reduce",),
    "all-to-all": ("all-to-all",),
}


def _dominates(a: Strategy, b: Strategy) -> bool:
    """``a`` gives the same output as ``b`` and is never slower: no more FLOPs or HBM bytes in its matmul, and
    each of its collectives matched by one of ``b``'s as costly (_AT_LEAST) over the same axes and bytes or more."""
    if a.output != b.output:
        return False
    if a.matmul_cost.flops > b.matmul_cost.flops or a.matmul_cost.hbm_bytes > b.matmul_cost.hbm_bytes:
        return False
    rest = [st for st in b.steps if st.kind != "matmul"]
    for st in (st for st in a.steps if st.kind != "matmul"):
        match = next(
            (o for o in rest if o.kind in _AT_LEAST[st.kind] and o.axes == st.axes and o.bytes >= st.bytes), None
        )
        if match is None:
            return False
        rest.remove(match)
    return True


def plan_sharded_matmul(
    expr: MatmulExpr, sizes: Mapping[str, int], mesh_shape: Mapping[str, int], dtypes: Dtypes = DEFAULT_DTYPES
) -> list[Strategy]:
    """Every strategy (collectives + local matmul) for ``expr`` on a mesh of ``mesh_shape``.

    Choices enumerated: for each dim in both inputs, the sharding both sides use when they
    multiply (unsharded, the lhs's or the rhs's: gather the rest, slice replicated copies
    for free); for each axis sharding a free dim of both inputs (case 4), which side is
    gathered. The output is the requested one, or, when omitted, the local result with
    its partial sums all-reduced."""
    check_sizes(expr, sizes)
    lhs, rhs = resolve_sharding(expr.lhs, mesh_shape), resolve_sharding(expr.rhs, mesh_shape)
    for t in (lhs, rhs):
        if t.unreduced:
            raise ShardingError(
                f"input {t.notation()} is unreduced over {joined(t.unreduced)}: reduce it first "
                f"(all-reduce or reduce-scatter); inputs must hold full sums"
            )
        t.local_sizes(sizes, mesh_shape)
    target = resolve_sharding(expr.out, mesh_shape) if expr.out_given else None
    if target is not None:
        target.local_sizes(sizes, mesh_shape)
    out_dims = expr.out.dim_names
    aligned = [d for d in lhs.dims if d in rhs.dims]
    contracting = [d for d in aligned if d not in out_dims]
    conflicts = _conflicts(lhs, rhs)
    choices = [_unique([lhs.axes_of(d), rhs.axes_of(d), ()]) for d in aligned]
    stops = [(stop, _early_gathers(lhs, rhs, stop)) for stop in _stops(target)]
    ways = math.prod(len(c) for c in choices) << len(conflicts)
    combos = sum(ways << len(late) for _, late in stops)
    if combos > MAX_STRATEGIES:
        raise ShardingError(
            f"{expr} has {combos:,} ways to compute (3 per dim sharded in both inputs, 2 per axis both shard a "
            f"free dim over, for each cut of the output's axes); at most {MAX_STRATEGIES:,} are enumerated: shard "
            f"fewer dims"
        )
    found: dict[tuple[object, ...], Strategy] = {}
    reasons: list[str] = []
    for stop, late in stops:
        for targets, sides, pick in itertools.product(
            itertools.product(*choices),
            itertools.product(("lhs", "rhs"), repeat=len(conflicts)),
            itertools.product(*late),
        ):
            early = [g for g in pick if g[2]]
            planned = (aligned, contracting, targets, (conflicts, sides, early), (stop, target))
            try:
                s = _build(expr, sizes, mesh_shape, dtypes, (lhs, rhs), *planned)
            except Invalid as err:
                reasons.append(str(err))
                continue
            key = (tuple((st.kind, st.axes, round(st.bytes)) for st in s.steps), s.output.axes, s.output.unreduced)
            found.setdefault(key, s)
    if not found:
        raise ShardingError(f"no way to compute {expr}: {reasons[0] if reasons else 'no valid strategy'}")
    return _undominated(list(found.values()))


def _undominated(strategies: list[Strategy]) -> list[Strategy]:
    """The strategies no other one dominates (of two alike, the first): gathering an axis early only to slice it
    again, or cutting the output short only to slice it after, is enumerated but never kept when it only adds."""
    out = []
    for i, s in enumerate(strategies):
        if not any(j != i and _dominates(f, s) and (j < i or not _dominates(s, f)) for j, f in enumerate(strategies)):
            out.append(s)
    return out


def _build(
    expr: MatmulExpr,
    sizes: Mapping[str, int],
    mesh_shape: Mapping[str, int],
    dtypes: Dtypes,
    inputs: tuple[Sharding, Sharding],
    aligned: list[str],
    contracting: list[str],
    targets: tuple[tuple[str, ...], ...],
    gathers: tuple[list[str], tuple[str, ...], list[tuple[str, str, tuple[str, ...]]]],
    outputs: tuple[Sharding | None, Sharding | None],
) -> Strategy:
    """One strategy; ``outputs``: the output reached by collectives (a prefix of the requested one, see _stops)
    and the requested one, the rest sliced locally."""
    target, requested = outputs
    p = Planner(expr, sizes, mesh_shape, dtypes)
    lhs, rhs = p.prepare(inputs[0], inputs[1], aligned, targets, *gathers)
    out_dims = expr.out.dim_names
    unreduced = tuple(a for d in contracting for a in lhs.axes_of(d))

    def axes(d: str) -> tuple[str, ...]:
        return lhs.axes_of(d) if d in lhs.dims else rhs.axes_of(d)

    if target is not None:  # shard output dims by slicing replicated inputs first: fewer FLOPs
        for d in out_dims:
            cur, wanted, used = axes(d), target.axes_of(d), set(lhs.used + rhs.used)
            extra = _freeprefix(wanted[len(cur) :], used)
            if extra and wanted[: len(cur)] == cur:  # the free leading axes; the rest come after the matmul
                lhs = p.slice(lhs, d, extra) if d in lhs.dims else lhs
                rhs = p.slice(rhs, d, extra) if d in rhs.dims else rhs
    res = Sharding(expr.out.name, out_dims, tuple(axes(d) for d in out_dims), unreduced)
    flat = [*res.used, *res.unreduced]
    dup = sorted({a for a in flat if flat.count(a) > 1})
    if dup:
        raise Invalid(f"the local product would use mesh axis {dup[0]} twice ({res.notation()})")
    local = {**lhs.local_sizes(sizes, mesh_shape), **rhs.local_sizes(sizes, mesh_shape)}
    mm = matmul(
        operand_s(lhs, dtypes.lhs), operand_s(rhs, dtypes.rhs), Operand(out_dims, dtypes.out), local, dtypes.compute
    )
    p.steps.append(
        Step("matmul", (), mm.hbm_bytes, f"local matmul {lhs.notation()} @ {rhs.notation()} -> {res.notation()}")
    )
    want = target if target is not None else Sharding(res.name, res.dims, res.axes, ())
    output = p.finish(res, want)
    if requested is not None:
        output = p.reorder(output, requested)
    comms = tuple(Comm(s.kind, s.axes, s.bytes, label=s.what) for s in p.steps if s.kind != "matmul")
    name = " -> ".join(
        f"{s.kind} {s.tensor} over {joined(s.axes)}" if s.kind != "matmul" else "matmul" for s in p.steps
    )
    return Strategy(name, tuple(p.steps), lhs, rhs, output, local, mm, mm.with_comm(*comms), tuple(p.slices))


def operand_s(t: Sharding, dtype: str) -> Operand:
    return Operand(t.dims, dtype)


@dataclass(frozen=True)
class TimedStrategy:
    """A strategy on hardware: the roofline Estimate of its per-device cost and each step's time."""

    strategy: Strategy
    estimate: Estimate
    step_times_s: tuple[float, ...]
    step_terms: tuple[tuple[Term, ...], ...]  # each step's terms (report/formulas.py writes them out)

    @property
    def comm_s(self) -> float:
        return self.estimate.network_s


@dataclass(frozen=True)
class ShardedMatmul:
    """The fastest strategy for a sharded matmul and the alternatives, slowest last."""

    expr: MatmulExpr
    sizes: Mapping[str, int]
    dtypes: Dtypes
    best: TimedStrategy
    alternatives: tuple[TimedStrategy, ...]
    total_flops: float
    inputs: tuple[Sharding, Sharding]


def analyze_sharded_matmul(
    expr: MatmulExpr, sizes: Mapping[str, int], mesh: Mesh, chip: Chip | None = None, dtypes: Dtypes = DEFAULT_DTYPES
) -> ShardedMatmul:
    """Plan every strategy, time each with the roofline (cost/roofline.py, cost/collectives.py)
    and rank them by overlapped lower bound, then serial upper bound."""
    chip = chip or mesh.topology.chip
    strategies = plan_sharded_matmul(expr, sizes, mesh.shape, dtypes)
    timed = []
    for s in strategies:
        est = roofline(s.cost, chip, mesh)
        times: list[float] = []
        terms: list[tuple[Term, ...]] = []
        mm = roofline(s.matmul_cost, chip)
        for step in s.steps:
            if step.kind == "matmul":
                times.append(max(mm.compute_s, mm.memory_s))
                terms.append(mm.terms)
            else:
                term = collective_term(Comm(step.kind, step.axes, step.bytes), mesh, chip)
                times.append(term.seconds)
                terms.append((term,))
        timed.append(TimedStrategy(s, est, tuple(times), tuple(terms)))
    timed.sort(key=lambda t: (t.estimate.lower_bound_s, t.estimate.upper_bound_s, len(t.strategy.steps)))
    total = local_matmul_cost(expr, sizes, dtypes).flops
    inputs = (resolve_sharding(expr.lhs, mesh.shape), resolve_sharding(expr.rhs, mesh.shape))
    return ShardedMatmul(expr, dict(sizes), dtypes, timed[0], tuple(timed[1:]), total, inputs)
