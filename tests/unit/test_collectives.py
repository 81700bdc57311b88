"""Collective times, each expectation written as the arithmetic of cost/collectives.py's rules.

tpu-v4: W = 4.5e10 B/s per ICI link each way, 1 us per hop. tpu-v5e: W = 5e10, dims wrap only
at 16. h100: NVLink 18 x 2.5e10 = 4.5e11 per GPU, NIC 5e10 per GPU, 2 us NVLink step, 5 us
scale-out step.
"""

from __future__ import annotations

import math

import pytest

from rooftop.cost.collectives import collective_time
from rooftop.cost.cost import Comm, Cost
from rooftop.cost.groups import Group, mesh_groups
from rooftop.cost.roofline import roofline
from rooftop.errors import InvalidConfigError, ShardingError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.report.formulas import collective_formula, collective_why

W4 = 4.5e10
W5E = 5e10
MIB = 2.0**20


def mesh(chip: str, topo: str, axes: str | None = None):
    c = get_chip(chip)
    return make_mesh(parse_topology(c, topo), axes)


@pytest.fixture(scope="module")
def v4():
    return mesh("tpu-v4", "4x4x4", "X=4,Y=4,Z=4")


def t(kind: str, axes: str, nbytes: float, m, sharp: bool = False):
    return collective_time(Comm(kind, tuple(axes.split(",")), nbytes), m, sharp=sharp)


def test_ring_all_gather_is_half_the_gathered_bytes_over_one_link(v4) -> None:
    v = 1024 * 4096 * 2 / 4  # bf16[B_X, D_Y] gathered over X: 2 MiB per device
    ct = t("all-gather", "X", v, v4)
    assert ct.bandwidth_time_s == pytest.approx((4 - 1) / 2 * (v / 4) / W4)
    assert ct.bandwidth_time_s == pytest.approx((4 - 1) / 4 * v / (2 * W4))  # (N-1)/N x V / (2W)
    assert ct.latency_time_s == pytest.approx((4 // 2) * 1e-6)
    assert ct.hops == 2 and ct.bound == "bandwidth" and ct.devices == 4
    assert ct.time_s == pytest.approx(0.75 * 23.3e-6, rel=1e-3)
    assert "wraparound" in collective_why(ct, get_chip("tpu-v4")) and "ring of 4" in collective_formula(ct)


def test_small_arrays_are_latency_bound(v4) -> None:
    ct = t("all-gather", "X", 128 * 2, v4)
    assert ct.bound == "latency"
    assert ct.time_s == pytest.approx(2 * 1e-6)
    assert ct.bandwidth_time_s == pytest.approx((4 - 1) / 2 * (256 / 4) / W4)


def test_line_without_wraparound_moves_n_minus_1_shards_and_says_why() -> None:
    m = mesh("tpu-v5e", "4x4", "X=4,Y=4")
    v = 2 * MIB
    ct = t("all-gather", "X", v, m)
    assert ct.bandwidth_time_s == pytest.approx((4 - 1) * (v / 4) / W5E)
    assert ct.hops == 4 - 1 and ct.latency_time_s == pytest.approx(3e-6)
    why = collective_why(ct, get_chip("tpu-v5e"))
    assert "no wraparound on X: line of 4" in why
    assert "wrap only at the full length 16" in why
    ring = t("all-gather", "X", v, mesh("tpu-v5e", "16x16", "X=16,Y=16"))
    assert ring.bandwidth_time_s == pytest.approx((16 - 1) / 2 * (v / 16) / W5E)


def test_same_axis_line_costs_more_than_ring() -> None:
    ring = t("all-gather", "X", 8 * MIB, mesh("tpu-v4", "4x4x4", "X=4,Y=4,Z=4"))
    line = t("all-gather", "X", 8 * MIB, mesh("tpu-v4", "4x4x2", "X=4,Y=4,Z=2"))  # not whole cubes: no wrap
    assert line.bandwidth_time_s / ring.bandwidth_time_s == pytest.approx((4 - 1) / ((4 - 1) / 2))
    assert "whole 4x4x4 cubes" in collective_why(line, get_chip("tpu-v4"))


def test_two_axes_work_together(v4) -> None:
    v = 8 * MIB
    s = v / 16
    ct = t("all-gather", "X,Y", v, v4)
    ingress = (16 - 1) * s / (2 * W4 + 2 * W4)
    assert ct.bandwidth_time_s == pytest.approx(max(ingress, (4 - 1) / 2 * s / W4))
    assert ct.hops == 2 + 2
    # one axis laid over two dims (X=16 over a 4x4 plane) is priced the same way
    x16 = t("all-gather", "X", v, mesh("tpu-v4", "4x4x4", "X=16,Z=4"))
    assert x16.bandwidth_time_s == pytest.approx(ct.bandwidth_time_s)
    assert "X@dim0" in collective_formula(x16)


def test_reduce_scatter_all_reduce_all_to_all_permute(v4) -> None:
    v = 4 * MIB
    ag = t("all-gather", "X", v, v4)
    rs = t("reduce-scatter", "X", v, v4)
    ar = t("all-reduce", "X", v, v4)
    assert rs.bandwidth_time_s == ag.bandwidth_time_s and rs.hops == ag.hops
    assert ar.bandwidth_time_s == pytest.approx(2 * rs.bandwidth_time_s) and ar.hops == 2 * rs.hops
    a2a = t("all-to-all", "X", v, v4)
    assert a2a.bandwidth_time_s == pytest.approx((4 * 4 // 4) * (v / 4) / (2 * W4))
    perm = t("permute", "X", v, v4)
    assert perm.bandwidth_time_s == pytest.approx(v / W4) and perm.hops == 1


def test_all_to_all_on_a_line_is_twice_the_ring() -> None:
    v = 4 * MIB
    ring = t("all-to-all", "X", v, mesh("tpu-v4", "4x4x4", "X=4,Y=4,Z=4"))
    line = t("all-to-all", "X", v, mesh("tpu-v4", "4x4x2", "X=4,Y=4,Z=2"))
    assert line.bandwidth_time_s == pytest.approx(2 * ring.bandwidth_time_s)
    assert line.bandwidth_time_s == pytest.approx((4 * 4 // 4) * (v / 4) / W4)


def test_permute_on_a_line_waits_for_the_wrap_message() -> None:
    ct = t("permute", "X", 1024, mesh("tpu-v5e", "4x4", "X=4,Y=4"))
    assert ct.hops == 4 - 1 and ct.bandwidth_time_s == pytest.approx(1024 / W5E)


def test_outer_factor_of_a_dim_shares_its_links() -> None:
    m = mesh("tpu-v4", "4x4x4", "X=2,Y=2,Z=16")  # X takes chips 0 and 2 of dim 0: stride 2
    (g,) = mesh_groups(m, ("X",))
    assert (g.size, g.stride, g.shape) == (2, 2, "ring")
    assert g.link_bytes_per_s == pytest.approx(W4 / 2)
    ct = t("all-gather", "X", 2 * MIB, m)
    assert ct.bandwidth_time_s == pytest.approx((2 - 1) / 2 * MIB / (W4 / 2))  # half of each shard per path
    assert ct.hops == 1 * 2
    # gathering X and Y together uses the whole ring of dim 0
    (xy,) = mesh_groups(m, ("X", "Y"))
    assert (xy.size, xy.stride, xy.shape) == (4, 1, "ring")


def test_nvlink_switch_and_fabric() -> None:
    m = mesh("h100", "16x8", "data=16,model=8")
    v = 1024 * 16384 * 2  # Part 12 pop quiz 1
    node = t("all-gather", "model", v, m)
    assert node.bandwidth_time_s == pytest.approx((8 - 1) * (v / 8) / (18 * 2.5e10))
    assert node.hops == math.ceil(math.log2(8)) and node.latency_time_s == pytest.approx(3 * 2e-6)
    fab = t("all-gather", "data", v, m)
    assert fab.bandwidth_time_s == pytest.approx((16 - 1) * (v / 16) / 5e10)
    assert fab.latency_time_s == pytest.approx(4 * 5e-6)


def test_hierarchical_all_reduce_across_fabric_and_nvlink() -> None:
    m = mesh("h100", "16x8", "data=16,model=8")
    v = 2.0**30
    s = v / 128
    ct = t("all-reduce", "data,model", v, m)
    cross_node = 2 * (16 - 1) * s / 5e10  # AR of V/8 per GPU over its NIC
    in_node = 2 * (8 - 1) * (16 * s) / 4.5e11  # RS then AG of V inside the node
    assert ct.bandwidth_time_s == pytest.approx(max(cross_node, in_node))
    assert ct.latency_time_s == pytest.approx(2 * (4 * 5e-6 + 3 * 2e-6))
    assert "hierarchical" in collective_why(ct, get_chip("h100"))


def test_sharp_all_reduce_moves_v_once() -> None:
    m = mesh("h100", "16x8", "data=16,model=8")
    v = 2.0**30
    plain = t("all-reduce", "model", v, m)
    sharp = t("all-reduce", "model", v, m, sharp=True)
    assert sharp.bandwidth_time_s == pytest.approx(v / 4.5e11)
    assert plain.bandwidth_time_s == pytest.approx(2 * (8 - 1) / 8 * v / 4.5e11)
    assert sharp.hops == 2
    with pytest.raises(InvalidConfigError, match=r"in-network reduction \(sharp, or algorithm in-network\).*ici"):
        t("all-reduce", "X", v, mesh("tpu-v4", "4x4x4"), sharp=True)  # the library names its parameters


def test_dcn_between_tpu_slices() -> None:
    m = mesh("tpu-v5e", "2*16x16")
    v = 64 * MIB
    ct = t("all-gather", "dcn", v, m)
    assert ct.bandwidth_time_s == pytest.approx((2 - 1) * (v / 2) / 3.125e9)
    assert ct.latency_time_s == pytest.approx(1 * 5e-6)
    both = t("all-gather", "dcn,X", v, m)  # dcn first with the smallest shards, then the ring of 16
    assert both.bandwidth_time_s == pytest.approx(max((v / 32) / 3.125e9, 8 * (v / 16) / W5E))


def test_odd_ring_rounds_up() -> None:
    g = Group(("X",), 0, 5, "ici", "ring", True, 1, W4, 2 * W4, 1e-6, "")
    assert g.gather_s(100.0) == pytest.approx(2 * 100 / W4)
    assert g.hops == 5 // 2
    assert g.all_to_all_s(100.0) == pytest.approx((25 // 4) * 100 / (2 * W4))


def test_size_one_axis_moves_nothing() -> None:
    m = mesh("h100", "8", "X=1,Y=8")
    ct = t("all-reduce", "X", 1e6, m)
    assert ct.time_s == 0 and ct.devices == 1


def test_bad_axes_raise(v4) -> None:
    with pytest.raises(ShardingError, match="unknown mesh axis 'Q'"):
        t("all-gather", "Q", 1.0, v4)
    with pytest.raises(ShardingError, match="twice"):
        t("all-gather", "X,X", 1.0, v4)
    with pytest.raises(ShardingError, match="at least one"):
        collective_time(Comm("all-gather", (), 1.0), v4)


def test_roofline_prices_comms_with_the_same_rule(v4) -> None:
    comm = Comm("all-reduce", ("X", "Y"), 3 * MIB, count=4)
    est = roofline(Cost().with_comm(comm), get_chip("tpu-v4"), v4)
    assert est.network_s == pytest.approx(4 * collective_time(comm, v4).time_s)
    assert est.bound == "network"


def test_nccl_ring_over_nodes_adds_its_steps_latency_to_the_bandwidth_term() -> None:
    """One flat ring over 512 H100 (64 nodes x 8): every GPU receives 511 shards of S = V / 512; a node's 8 GPUs
    enter the ring through their 8 NICs (8 x 50 GB/s), each GPU through NVLink (450 GB/s): the fabric sets the
    term. Latency, NCCL's tuning model: 8.4 us + (511 - 63) x 3.4 us + 63 x 14 us, added to the bandwidth term.
    An all-reduce is twice both (2 x 511 steps, 2 x 63 over the network)."""
    from rooftop.cost.algorithms import Algorithm

    m = mesh("h100", "64x8", "fsdp=512")
    ring = Algorithm("ring", 8.4e-6, 3.4e-6, 14e-6)
    v = 100e6
    ct = collective_time(Comm("all-gather", ("fsdp",), v), m, network_efficiency=0.8, algorithm=ring)
    bw = 511 * (v / 512) / (8 * 5e10) / 0.8
    lat = 8.4e-6 + (511 - 63) * 3.4e-6 + 63 * 14e-6
    assert ct.bandwidth_time_s == pytest.approx(bw)
    assert ct.latency_time_s == pytest.approx(lat)
    assert ct.time_s == pytest.approx(bw + lat) and ct.additive and ct.hops == 511
    ar = collective_time(Comm("all-reduce", ("fsdp",), v), m, network_efficiency=0.8, algorithm=ring)
    assert ar.time_s == pytest.approx(2 * bw + 8.4e-6 + 2 * (511 - 63) * 3.4e-6 + 2 * 63 * 14e-6)
    staged = collective_time(Comm("all-gather", ("fsdp",), v), m, network_efficiency=0.8)
    assert staged.time_s == pytest.approx(max(staged.bandwidth_time_s, staged.latency_time_s))
    assert ct.time_s > staged.time_s  # the ring's latency: 2.4 ms against a few hops
    assert "ring steps" in collective_formula(ct)
    with pytest.raises(InvalidConfigError, match="algorithm"):
        Algorithm("butterfly")
