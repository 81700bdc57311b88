import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftop.cost.efficiency import Efficiency
from rooftop.cost.op import explicit
from rooftop.cost.roofline import roofline
from rooftop.hardware.catalog import get_chip

flops = st.floats(min_value=0, max_value=1e18, allow_nan=False)
nbytes = st.floats(min_value=1, max_value=1e13, allow_nan=False)
frac = st.floats(min_value=0.05, max_value=1.0)
CHIPS = [get_chip(n) for n in ("tpu-v5e", "h100", "tpu-v5p")]


@settings(max_examples=200, deadline=None)
@given(flops, nbytes, flops, nbytes)
def test_cost_addition_is_commutative_and_additive(f1: float, b1: float, f2: float, b2: float) -> None:
    a, b = explicit(f1, b1), explicit(f2, b2, unit="vector")
    assert a + b == b + a
    assert (a + b).flops == f1 + f2
    assert (a + b).hbm_bytes == b1 + b2


@settings(max_examples=200, deadline=None)
@given(flops, nbytes, st.sampled_from(CHIPS), st.sampled_from(["matrix", "vector"]))
def test_bounds_are_the_chip_figures_max_and_sum(f: float, b: float, chip, unit: str) -> None:
    """compute = FLOPs / the chip's bf16 peak of that unit, memory = bytes / its HBM bandwidth (the catalog's
    figures, read here directly); lower bound = the larger, upper bound = the sum."""
    est = roofline(explicit(f, b, unit=unit), chip)
    peak = (chip.matrix_flops_per_s if unit == "matrix" else chip.vector_flops_per_s or chip.matrix_flops_per_s)["bf16"]
    compute_s, memory_s = f / peak, b / chip.hbm_bytes_per_s
    assert math.isclose(est.compute_s, compute_s, rel_tol=1e-12, abs_tol=1e-300)
    assert math.isclose(est.memory_s, memory_s, rel_tol=1e-12)
    assert math.isclose(est.lower_bound_s, max(compute_s, memory_s), rel_tol=1e-12)
    assert math.isclose(est.upper_bound_s, compute_s + memory_s, rel_tol=1e-12)


@settings(max_examples=200, deadline=None)
@given(flops, nbytes, frac, frac, st.sampled_from(CHIPS))
def test_more_bandwidth_or_flops_is_never_slower(f: float, b: float, e1: float, e2: float, chip) -> None:
    lo, hi = sorted([e1, e2])
    cost = explicit(f, b)
    slow = roofline(cost, chip, efficiency=Efficiency(matrix=lo, hbm=lo))
    fast = roofline(cost, chip, efficiency=Efficiency(matrix=hi, hbm=hi))
    assert fast.lower_bound_s <= slow.lower_bound_s * (1 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(flops, nbytes, st.floats(min_value=1, max_value=100))
def test_scaling_a_cost_scales_time(f: float, b: float, k: float) -> None:
    chip = CHIPS[0]
    one = roofline(explicit(f, b), chip)
    many = roofline(k * explicit(f, b), chip)
    assert abs(many.upper_bound_s - k * one.upper_bound_s) <= 1e-9 * max(1.0, many.upper_bound_s)


KEYS = [("matrix", "bf16"), ("matrix", "fp8"), ("matrix", "int8"), ("vector", "fp32"), ("vector", "bf16")]
op_costs = st.lists(
    st.tuples(st.lists(st.tuples(st.sampled_from(KEYS), flops), max_size=3), nbytes), min_size=1, max_size=12
)


@settings(max_examples=200, deadline=None)
@given(op_costs, frac, frac, frac, st.sampled_from(CHIPS))
def test_the_table_roofline_is_the_scalar_roofline(ops, matrix: float, vector: float, hbm: float, chip) -> None:
    """roofline_table (numpy over ops) gives every op the compute and memory seconds roofline() gives it."""
    from rooftop.cost.cost import Cost
    from rooftop.cost.roofline import flops_table, roofline_table

    costs = []
    for terms, b in ops:
        by: dict[tuple[str, str], float] = {}
        for key, f in terms:
            by[key] = by.get(key, 0.0) + f
        costs.append(Cost(by, b))
    eff = Efficiency(matrix=matrix, vector=vector, hbm=hbm)
    keys, table = flops_table(costs)
    got = roofline_table(table, keys, np.array([c.hbm_bytes for c in costs]), chip, eff)
    for i, c in enumerate(costs):
        est = roofline(c, chip, efficiency=eff)
        assert abs(got.compute_s[i] - est.compute_s) <= 1e-9 * est.compute_s + 1e-300
        assert abs(got.memory_s[i] - est.memory_s) <= 1e-12 * est.memory_s
        assert got.time_s[i] == max(got.compute_s[i], got.memory_s[i])
        assert bool(got.compute_bound[i]) == (got.compute_s[i] >= got.memory_s[i])
