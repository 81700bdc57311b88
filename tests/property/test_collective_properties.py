"""Properties of the collective and sharded-matmul rules that must hold for every input."""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from rooftop.cost.collectives import collective_time
from rooftop.cost.cost import Comm
from rooftop.cost.groups import Group
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.sharding.matmul import analyze_sharded_matmul, local_matmul_cost
from rooftop.sharding.notation import parse_matmul

V4 = get_chip("tpu-v4")
MESHES = {
    "ring": make_mesh(parse_topology(V4, "4x4x4"), "X=4,Y=4,Z=4"),
    "line": make_mesh(parse_topology(V4, "4x4x2"), "X=4,Y=4,Z=2"),
    "gpu": make_mesh(parse_topology(get_chip("h100"), "4x8"), "X=4,Y=8"),
}
KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "permute")
nbytes = st.floats(min_value=1.0, max_value=1e10, allow_nan=False)
axes = st.sampled_from([("X",), ("Y",), ("X", "Y")])
mesh_name = st.sampled_from(sorted(MESHES))
FAST = settings(max_examples=40, deadline=None)


def time(kind: str, ax: tuple[str, ...], v: float, name: str, chip=None):
    return collective_time(Comm(kind, ax, v), MESHES[name], chip)


@FAST
@given(st.sampled_from(KINDS), axes, mesh_name, nbytes, st.floats(min_value=1.0, max_value=100.0))
def test_time_is_monotone_in_bytes(kind: str, ax: tuple[str, ...], name: str, v: float, k: float) -> None:
    assert time(kind, ax, v * k, name).time_s >= time(kind, ax, v, name).time_s


@FAST
@given(st.sampled_from(KINDS), axes, mesh_name, nbytes, st.floats(min_value=1.0, max_value=10.0))
def test_more_bandwidth_is_never_slower(kind: str, ax: tuple[str, ...], name: str, v: float, k: float) -> None:
    chip = MESHES[name].topology.chip
    faster = dataclasses.replace(
        chip, link_bytes_per_s=chip.link_bytes_per_s * k, dcn_bytes_per_s=chip.dcn_bytes_per_s * k
    )
    assert time(kind, ax, v, name, faster).time_s <= time(kind, ax, v, name, chip).time_s * (1 + 1e-12)


@FAST
@given(axes, mesh_name, nbytes)
def test_all_reduce_is_twice_reduce_scatter(ax: tuple[str, ...], name: str, v: float) -> None:
    rs, ar = time("reduce-scatter", ax, v, name), time("all-reduce", ax, v, name)
    assert math.isclose(ar.bandwidth_time_s, 2 * rs.bandwidth_time_s, rel_tol=1e-12)
    assert ar.hops == 2 * rs.hops
    assert rs.bandwidth_time_s == time("all-gather", ax, v, name).bandwidth_time_s


@FAST
@given(st.sampled_from(KINDS[:4]), axes, nbytes)
def test_line_is_never_faster_than_ring(kind: str, ax: tuple[str, ...], v: float) -> None:
    assert time(kind, ax, v, "line").time_s >= time(kind, ax, v, "ring").time_s


@FAST
@given(st.integers(min_value=2, max_value=64), st.sampled_from(["ring", "line", "switch"]), nbytes)
def test_all_to_all_of_a_global_array_is_cheaper_than_gathering_it(n: int, shape: str, g: float) -> None:
    w = 4.5e10
    grp = Group(("X",), 0, n, "ici", shape, shape == "ring", 1, w, 2 * w if shape == "ring" else w, 1e-6, "")
    assert grp.all_to_all_s(g / n / n) <= grp.gather_s(g / n)


@FAST
@given(mesh_name, nbytes)
def test_two_axes_between_one_axis_and_two_in_sequence(name: str, v: float) -> None:
    """Gathering X and Y at once is no faster than gathering X alone with the same shard (a
    lower bound), and no slower than gathering X then Y one after the other."""
    m = MESHES[name]
    nx, ny = m.axis("X").size, m.axis("Y").size
    both = time("all-gather", ("X", "Y"), v, name).bandwidth_time_s
    only_x = time("all-gather", ("X",), v / ny, name).bandwidth_time_s
    only_y = time("all-gather", ("Y",), v / nx, name).bandwidth_time_s
    seq = only_x + time("all-gather", ("Y",), v, name).bandwidth_time_s
    assert max(only_x, only_y) <= both * (1 + 1e-12)
    assert both <= seq * (1 + 1e-12)


@FAST
@given(st.sampled_from(KINDS), axes, mesh_name, nbytes)
def test_time_is_the_larger_term(kind: str, ax: tuple[str, ...], name: str, v: float) -> None:
    ct = time(kind, ax, v, name)
    assert ct.time_s == max(ct.bandwidth_time_s, ct.latency_time_s)
    assert ct.bound == ("bandwidth" if ct.bandwidth_time_s >= ct.latency_time_s else "latency")


SUB = st.sampled_from(["", "_X", "_Y", "_XY"])
V5E = make_mesh(parse_topology(get_chip("tpu-v5e"), "4x2"), "X=4,Y=2")


def _valid(*subs: str) -> bool:
    letters = "".join(s.lstrip("_") for s in subs)
    return len(letters) == len(set(letters))


@settings(max_examples=30, deadline=None)
@given(SUB, SUB, SUB, SUB, st.sampled_from([8, 64, 512]), st.sampled_from([8, 256]), st.sampled_from([8, 128]))
def test_sharded_matmul_bounds_and_flops(i: str, jl: str, jr: str, k: str, si: int, sj: int, sk: int) -> None:
    if not (_valid(i, jl) and _valid(jr, k)):
        return
    expr = parse_matmul(f"A[I{i}, J{jl}] @ B[J{jr}, K{k}]")
    sizes = {"I": si, "J": sj, "K": sk}
    r = analyze_sharded_matmul(expr, sizes, V5E)
    unsharded = local_matmul_cost(expr, sizes).flops
    for ts in (r.best, *r.alternatives):
        assert ts.estimate.lower_bound_s <= ts.estimate.upper_bound_s
        assert ts.estimate.flops <= unsharded
        assert ts.estimate.lower_bound_s >= r.best.estimate.lower_bound_s
