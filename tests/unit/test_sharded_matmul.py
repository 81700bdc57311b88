"""Sharded matmuls: the collectives each case of How to Scale Your Model Part 3 needs, and their bytes."""

from __future__ import annotations

import pytest

from rooftop.errors import ShardingError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.sharding.matmul import analyze_sharded_matmul, plan_sharded_matmul
from rooftop.sharding.notation import MatmulExpr, parse_matmul, parse_tensor
from rooftop.sharding.shard import resolve_sharding, shard_array
from rooftop.sharding.strategy import Dtypes

MESH = {"X": 4, "Y": 4}
SIZES = {"I": 4096, "J": 8192, "K": 16384}


def plans(expr: str, sizes: dict[str, int] = SIZES, mesh: dict[str, int] = MESH):
    return plan_sharded_matmul(parse_matmul(expr), sizes, mesh)


def comms(strategy) -> list[tuple[str, tuple[str, ...], float]]:
    return [(s.kind, s.axes, s.bytes) for s in strategy.steps if s.kind != "matmul"]


def by_comms(expr: str, **kw):
    return {tuple((k, a) for k, a, _ in comms(s)): s for s in plans(expr, **kw)}


@pytest.fixture(scope="module")
def v5e():
    return make_mesh(parse_topology(get_chip("tpu-v5e"), "4x4"), "X=4,Y=4")


def test_case1_no_communication() -> None:
    (s,) = plans("A[I_X, J] @ B[J, K_Y] -> C[I_X, K_Y]")
    assert comms(s) == []
    assert s.matmul_cost.flops == 2 * (4096 / 4) * 8192 * (16384 / 4)
    assert s.output.notation() == "C[I_X, K_Y]"


def test_case1_inferred_output_keeps_the_input_shardings() -> None:
    (s,) = plans("A[I_X, J] @ B[J, K_Y]")
    assert s.output.notation() == "C[I_X, K_Y]" and comms(s) == []


def test_case2_gather_the_sharded_side_or_slice_the_other_and_reduce() -> None:
    found = by_comms("A[I, J_X] @ B[J, K] -> C[I, K]")
    gather = found[(("all-gather", ("X",)),)]
    assert comms(gather) == [("all-gather", ("X",), 4096 * 8192 * 2)]  # A gathered: full A per device
    reduce = found[(("all-reduce", ("X",)),)]
    assert comms(reduce) == [("all-reduce", ("X",), 4096 * 16384 * 2)]  # C{U_X}: full C per device
    assert reduce.slices and "B[J, K] -> B[J_X, K]" in reduce.slices[0]
    assert reduce.matmul_cost.flops == gather.matmul_cost.flops / 4


def test_case3_all_reduce_reduce_scatter_or_keep_unreduced() -> None:
    ar = by_comms("A[I, J_X] @ B[J_X, K] -> C[I, K]")
    assert (("all-reduce", ("X",)),) in ar
    rs = by_comms("A[I, J_X] @ B[J_X, K] -> C[I, K_X]")
    assert comms(rs[(("reduce-scatter", ("X",)),)]) == [("reduce-scatter", ("X",), 4096 * 16384 * 2)]
    keep = by_comms("A[I, J_X] @ B[J_X, K] -> C[I, K]{U_X}")
    assert () in keep
    assert keep[()].output.notation() == "C[I, K]{U_X}"


def test_case4_gather_one_side_two_outputs() -> None:
    both = plans("A[I_X, J] @ B[J, K_X]")
    assert sorted(s.output.notation() for s in both) == ["C[I, K_X]", "C[I_X, K]"]
    gathered = {s.steps[0].tensor: comms(s) for s in both}
    assert gathered == {
        "A": [("all-gather", ("X",), 4096 * 8192 * 2)],
        "B": [("all-gather", ("X",), 8192 * 16384 * 2)],
    }


def test_requested_output_may_need_an_all_to_all() -> None:
    found = by_comms("A[I_X, J] @ B[J, K] -> C[I, K_X]")
    a2a = found[(("all-to-all", ("X",)),)]
    assert comms(a2a) == [("all-to-all", ("X",), 4096 / 4 * 16384 * 2)]
    early = found[(("all-gather", ("X",)),)]  # or gather A first and slice B's K for free
    assert early.matmul_cost.flops == 2 * 4096 * 8192 * 16384 / 4


def test_output_sharding_by_slicing_replicated_inputs_costs_no_communication() -> None:
    (s,) = plans("A[I, J] @ B[J, K] -> C[I_X, K_Y]")
    assert comms(s) == [] and len(s.slices) == 2
    assert s.matmul_cost.flops == 2 * 4096 * 8192 * 16384 / 16


def test_training_pattern_gathers_the_weights(v5e) -> None:
    expr = "A[I_X, J] @ B[J_X, K_Y] -> C[I_X, K_Y]"  # data + tensor + ZeRO (Part 3 Question 6)
    best = analyze_sharded_matmul(parse_matmul(expr), SIZES, v5e).best.strategy
    assert comms(best) == [("all-gather", ("X",), 8192 * 16384 / 4 * 2)]
    # the other way (gather the activations, reduce the partial sums, slice) moves more and is ranked after it
    assert [comms(s) for s in plans(expr)] == [
        comms(best),
        [("all-gather", ("X",), 4096 * 8192 * 2), ("all-reduce", ("X",), 4096 * 16384 / 4 * 2)],
    ]


def test_dtypes_set_the_bytes() -> None:
    (s, *_) = plan_sharded_matmul(
        parse_matmul("A[I, J_X] @ B[J_X, K] -> C[I, K]{U_X}"), SIZES, MESH, Dtypes("bf16", "int8", "fp32")
    )
    assert s.matmul_cost.hbm_bytes == 4096 * 2048 * 2 + 2048 * 16384 * 1 + 4096 * 16384 * 4


def test_divisibility_and_sharding_errors() -> None:
    with pytest.raises(ShardingError, match=r"dim I=4098 .* X=4"):
        plans("A[I_X, J] @ B[J, K]", {"I": 4098, "J": 8, "K": 8})
    unreduced_input = MatmulExpr(parse_tensor("A[I, J]{U_X}"), parse_tensor("B[J, K]"), parse_tensor("C[I, K]"), True)
    with pytest.raises(ShardingError, match="unreduced"):
        plan_sharded_matmul(unreduced_input, {"I": 8, "J": 8, "K": 8}, MESH)
    with pytest.raises(ShardingError, match="no partial sums over Y"):
        plans("A[I, J_X] @ B[J_X, K] -> C[I, K]{U_Y}", {"I": 8, "J": 8, "K": 8})
    with pytest.raises(ShardingError, match="at most one dim"):
        plans("A[I_X, J_X] @ B[J, K]", {"I": 8, "J": 8, "K": 8})


def test_fastest_strategy_is_picked_and_bounds_are_ordered(v5e) -> None:
    r = analyze_sharded_matmul(parse_matmul("A[I, J_X] @ B[J_X, K] -> C[I, K_X]"), SIZES, v5e)
    assert r.best.strategy.steps[-1].kind == "reduce-scatter"
    for ts in (r.best, *r.alternatives):
        assert ts.estimate.lower_bound_s <= ts.estimate.upper_bound_s
        assert ts.estimate.lower_bound_s >= r.best.estimate.lower_bound_s
        assert ts.comm_s == pytest.approx(
            sum(t for s, t in zip(ts.strategy.steps, ts.step_times_s, strict=True) if s.kind != "matmul")
        )
    assert r.total_flops == 2 * 4096 * 8192 * 16384


def test_question4_crossover_gather_weights_vs_all_reduce(v5e) -> None:
    """Part 3 Question 4: A[B, D] . W[D_X, F]: all-gather W (2DF bytes, full FLOPs) or multiply
    shards and all-reduce C (2 x 2BF bytes, FLOPs / X); large D favours the all-reduce."""
    expr = parse_matmul("A[B, D] @ W[D_X, F] -> C[B, F]")
    big_d = analyze_sharded_matmul(expr, {"B": 128, "D": 32768, "F": 8192}, v5e)
    assert [s.kind for s in big_d.best.strategy.steps] == ["matmul", "all-reduce"]
    big_b = analyze_sharded_matmul(expr, {"B": 65536, "D": 1024, "F": 1024}, v5e)
    assert [s.kind for s in big_b.best.strategy.steps] == ["all-gather", "matmul"]


def test_shard_array_book_pop_quiz() -> None:
    rep = shard_array(parse_tensor("A[I_XY, J]"), (128, 2048), "int8", {"X": 2, "Y": 8, "Z": 2})
    assert rep.local_shape == (128 // (2 * 8), 2048)
    assert rep.bytes_per_device == 8 * 2048
    assert rep.total_bytes == 128 * 2048 * 2 and rep.copies == 2
    assert resolve_sharding(parse_tensor("A[I_XY, J]"), {"X": 2, "Y": 8}).notation() == "A[I_XY, J]"


@pytest.mark.parametrize(
    "expr", ["A[I, J] @ B[K, L]", "A[I, J] @ B[K, L] -> C[I, J, K, L]", "A[B, I] @ B[B, K] -> C[B, I, K]"]
)
def test_a_matmul_that_contracts_nothing_is_one_line(expr: str) -> None:
    """No shared dimension (or only ones the output keeps): an outer product, once priced silently as a
    512 GiB 'matmul'; now a one-line error that says what a matmul needs."""
    from tests.conftest import run_cli

    code, out, err = run_cli("matmul", expr, "--dims", "I=1024,J=1024,K=1024,L=1024,B=8", "--chip", "h100")
    assert code == 2 and out == "" and err.count("\n") == 1 and "contracts no dimension" in err
