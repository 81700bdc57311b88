"""Sharded matmuls over random notations, meshes and output shardings: sharding the output over one more axis
never costs more per device (the plan for the coarser output, followed by a free local slice, is one way to
get the finer one: no slower, no more FLOPs), and the plan's output is the requested sharding, axis order
included. The fastest plan may do more FLOPs than the coarser one's only by being faster."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooftop.errors import ShardingError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.sharding.matmul import analyze_sharded_matmul
from rooftop.sharding.notation import parse_matmul

AXES = ("X", "Y", "Z")
MESHES = {
    "2x2x2": make_mesh(parse_topology(get_chip("tpu-v4"), "2x2x2"), "X=2,Y=2,Z=2"),
    "4x2": make_mesh(parse_topology(get_chip("tpu-v5e"), "4x2"), "X=4,Y=2"),
}


def _sharding(draw: st.DrawFn, dims: list[str], axes: tuple[str, ...]) -> dict[str, list[str]]:
    """Each mesh axis on at most one dim (or none), in a random order within the dim."""
    out: dict[str, list[str]] = {d: [] for d in dims}
    for a in draw(st.permutations(axes)):
        d = draw(st.sampled_from([*dims, None]))
        if d is not None:
            out[d].append(a)
    return out


def _text(name: str, dims: list[str], sh: dict[str, list[str]]) -> str:
    return f"{name}[" + ", ".join(d + ("_" + "".join(sh[d]) if sh[d] else "") for d in dims) + "]"


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, str, dict[str, int]]:
    mesh = draw(st.sampled_from(sorted(MESHES)))
    axes = tuple(MESHES[mesh].shape)
    contract = draw(st.sampled_from(["J", "JL"]))
    batch = draw(st.sampled_from(["", "B"]))
    lhs = draw(st.permutations([*batch, "I", *contract]))
    rhs = draw(st.permutations([*batch, *contract, "K"]))
    out = [*batch, "I", "K"]
    a, b = _text("A", lhs, _sharding(draw, lhs, axes)), _text("B", rhs, _sharding(draw, rhs, axes))
    coarse = _sharding(draw, out, axes)
    free = [x for x in axes if not any(x in v for v in coarse.values())]
    finer = {d: list(v) for d, v in coarse.items()}
    if free:  # one more axis appended to one output dim: a free local slice of the coarser output gives it
        finer[draw(st.sampled_from(out))].append(draw(st.sampled_from(free)))
    sizes = dict.fromkeys([*out, *contract], 64)
    return mesh, f"{a} @ {b} -> {_text('C', out, coarse)}", f"{a} @ {b} -> {_text('C', out, finer)}", sizes


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_more_output_sharding_never_costs_more_per_device(case: tuple[str, str, str, dict[str, int]]) -> None:
    _finer_never_costs_more(case)


@pytest.mark.long
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_more_output_sharding_never_costs_more_per_device_long(case: tuple[str, str, str, dict[str, int]]) -> None:
    _finer_never_costs_more(case)


def test_the_issues_case_slices_the_coarser_output_and_labels_it_as_computed() -> None:
    """K over XZ needs a reduce-scatter of the partial sums over Y; K over XZY is that result sliced further,
    not a matmul of all of K (4.29 GFLOP) reduce-scattered; and the output is labelled in the order computed."""
    mesh, sizes = MESHES["2x2x2"], {"I": 512, "J": 4096, "K": 2048}
    coarse = analyze_sharded_matmul(parse_matmul("A[I, J] @ B[J_Y, K] -> C[I, K_XZ]"), sizes, mesh).best
    finer = analyze_sharded_matmul(parse_matmul("A[I, J] @ B[J_Y, K] -> C[I, K_XZY]"), sizes, mesh).best
    assert coarse.strategy.matmul_cost.flops == finer.strategy.matmul_cost.flops == 2 * 512 * (4096 / 2) * (2048 / 4)
    assert finer.estimate.lower_bound_s <= coarse.estimate.lower_bound_s
    assert [s.what for s in finer.strategy.steps][-1] == "reduce-scatter C[I, K_XZ]{U_Y} over Y -> C[I, K_XZY]"
    other = analyze_sharded_matmul(parse_matmul("A[I, J] @ B[J_Y, K] -> C[I, K_YXZ]"), sizes, mesh)
    assert {t.strategy.output.notation() for t in (other.best, *other.alternatives)} == {"C[I, K_YXZ]"}


def test_more_flops_win_only_by_the_rank_a_tie_of_lower_bounds_is_broken_by_the_upper_bound() -> None:
    """Found by the long run: C[B_Y, I_X, K] gathers A over YZ and doubles the FLOPs per device (8.39 vs 4.19
    MFLOP) at the same network-bound lower bound (5.58 us) as C[B, I_X, K]'s plan, and is chosen because its
    sum of terms, the upper bound, is smaller (6.05 vs 6.14 us): more FLOPs, but faster as the planner ranks."""
    sizes = {"B": 64, "I": 64, "K": 64, "J": 64}
    matmul = "A[B, I_XYZ, J] @ B[B, J_XYZ, K] -> "
    _finer_never_costs_more(("2x2x2", matmul + "C[B, I_X, K]", matmul + "C[B_Y, I_X, K]", sizes))


def _finer_never_costs_more(case: tuple[str, str, str, dict[str, int]]) -> None:
    mesh_name, coarse_text, finer_text, sizes = case
    mesh = MESHES[mesh_name]
    try:
        coarse = analyze_sharded_matmul(parse_matmul(coarse_text), sizes, mesh)
    except ShardingError:
        return  # the coarser output has no plan (e.g. too many ways); nothing to compare
    finer = analyze_sharded_matmul(parse_matmul(finer_text), sizes, mesh)
    c, f = coarse.best, finer.best
    assert f.estimate.lower_bound_s <= c.estimate.lower_bound_s * (1 + 1e-9), (finer_text, f.strategy.name)
    # one way does no more FLOPs per device; the fastest does more only where that makes it faster
    least = min(t.strategy.matmul_cost.flops for t in (finer.best, *finer.alternatives))
    assert least <= c.strategy.matmul_cost.flops, (finer_text, c.strategy.name)
    if f.strategy.matmul_cost.flops > c.strategy.matmul_cost.flops:  # faster as the planner ranks: lower, then upper
        fe, ce = f.estimate, c.estimate
        assert (fe.lower_bound_s, fe.upper_bound_s) < (ce.lower_bound_s, ce.upper_bound_s), finer_text
    for plan, text in ((coarse, coarse_text), (finer, finer_text)):
        want = text.split("-> ")[1]
        for t in (plan.best, *plan.alternatives):  # the label is the sharding computed, axis order included
            assert t.strategy.output.notation() == want, (text, t.strategy.name)
