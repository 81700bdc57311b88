"""The built-in ``tree`` and ``bidirectional-ring`` collective algorithms (cost/algorithms.py), hand-derived,
and a property every algorithm keeps: no collective beats the bytes a chip must receive over all its links.

Figures. H100 (catalog/chips/h100.toml): NVLink 18 x 2.5e10 = 4.5e11 B/s per GPU, one 5e10 B/s NIC per GPU; a
64 x 8 cluster is 64 nodes of 8, the fabric entered through a node's 8 NICs: 4e11 B/s. TPU v5p: 1e11 B/s per
ICI link each way, a wrapped dim of 4 is a ring; TPU v5e 4x4: dims without wraparound, lines of 5e10 B/s.
Latency figures (catalog/frameworks/training.toml): the tree's NCCL tuning.cc figures, 0 base and 28 us per
step inside a node and over the network; the bidirectional ring's are the ring's, 8.4 us + 3.4 us per step
inside a node + 14 us per network step.
"""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftop.cli.main import build_parser
from rooftop.cli.serve import request_from_args
from rooftop.cli.train import setup_from_args
from rooftop.cost.algorithms import GATHER_KINDS, Algorithm, algorithm_names
from rooftop.cost.collectives import collective_rate, collective_time
from rooftop.cost.cost import Comm
from rooftop.cost.efficiency import IDEAL
from rooftop.cost.groups import mesh_groups
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.workload import Dtypes
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.phase import decode_step
from rooftop.plan.train.framework import catalog_algorithm

H100 = get_chip("h100")
TREE = catalog_algorithm("tree")
BIRING = catalog_algorithm("bidirectional-ring")
RING = catalog_algorithm("ring")
NODE_ENTRY = 8 * 5e10  # a node's 8 NICs


def _h100_512(axes: str = "dp=512"):
    return make_mesh(parse_topology(H100, "64x8"), axes)


def test_catalog_figures() -> None:
    assert (TREE.base_s, TREE.intra_step_s, TREE.inter_step_s) == (0.0, 28e-6, 28e-6)
    assert (BIRING.base_s, BIRING.intra_step_s, BIRING.inter_step_s) == (8.4e-6, 3.4e-6, 14e-6)
    assert {"tree", "bidirectional-ring"} <= set(algorithm_names())


def test_tree_latency_dominated_all_reduce_over_64_nodes() -> None:
    """4 MB over 512 GPUs: a chain of 8 in each node and a tree of depth log2 64 = 6 across nodes, both ways:
    2 x (7 + 6) = 26 steps of 28 us = 728 us; the bytes 2 x 4e6 / 4e11 = 20 us. NCCL's ring over the same
    takes 2 x 511 steps: 8.4 us + 2 x 448 x 3.4 us + 2 x 63 x 14 us = 4.8188 ms."""
    ct = collective_time(Comm("all-reduce", ("dp",), 4e6), _h100_512(), algorithm=TREE)
    assert ct.algorithm == "tree" and ct.additive and ct.hops == 26 and ct.bound == "latency"
    assert ct.latency_time_s == pytest.approx(2 * (7 + 6) * 28e-6)
    assert ct.bandwidth_time_s == pytest.approx(2 * 4e6 / NODE_ENTRY)
    assert ct.time_s == pytest.approx(748e-6)
    ring = collective_time(Comm("all-reduce", ("dp",), 4e6), _h100_512(), algorithm=RING)
    assert ring.time_s == pytest.approx(2 * 511 / 512 * 4e6 / NODE_ENTRY + 8.4e-6 + 2 * 448 * 3.4e-6 + 2 * 63 * 14e-6)
    assert ct.time_s < ring.time_s / 6


def test_tree_bandwidth_dominated_all_reduce() -> None:
    """4 GB: 2 x 4e9 / 4e11 = 20 ms + 728 us = 20.728 ms; the ring's bytes are 511/512 of the tree's
    (19.96 ms) but its 4.82 ms of steps make it slower. Over the nodes alone (dp=64 of dp=64,tp=8): one
    GPU's NIC, 2 x 4e9 / 5e10 = 160 ms, and 2 x log2 64 = 12 network steps (336 us)."""
    ct = collective_time(Comm("all-reduce", ("dp",), 4e9), _h100_512(), algorithm=TREE)
    assert ct.bound == "bandwidth" and ct.time_s == pytest.approx(0.02 + 728e-6)
    ring = collective_time(Comm("all-reduce", ("dp",), 4e9), _h100_512(), algorithm=RING)
    assert ring.bandwidth_time_s == pytest.approx(ct.bandwidth_time_s * 511 / 512)
    assert ring.time_s == pytest.approx(0.0199609375 + 4.8188e-3)
    nodes = collective_time(Comm("all-reduce", ("dp",), 4e9), _h100_512("dp=64,tp=8"), algorithm=TREE)
    assert nodes.hops == 12 and nodes.time_s == pytest.approx(2 * 4e9 / 5e10 + 12 * 28e-6)


def test_tree_runs_all_reduce_only() -> None:
    mesh = _h100_512()
    for kind in ("all-gather", "reduce-scatter"):
        ct = collective_time(Comm(kind, ("dp",), 4e6), mesh, algorithm=TREE)
        assert ct.algorithm == "hierarchical" and ct.time_s == collective_time(Comm(kind, ("dp",), 4e6), mesh).time_s


V5P = get_chip("tpu-v5p")


def test_bidirectional_ring_on_a_wrapped_ici_ring() -> None:
    """An all-reduce over a ring of 4 v5p chips (W = 1e11 B/s each way): 2 x 3 steps of S = V / 4. One way, a
    chip receives each shard over one link, 2 x 3 x S / W; both ways, over two, half of it. Both take 6 steps,
    no network step: 8.4 us + 6 x 3.4 us = 28.8 us.
    Bandwidth-dominated (4 GB): 0.03 s against the ring's 0.06 s (the staged rules' own 0.03 s).
    Latency-dominated (1 kB): 28.8 us + 2 x 3 x 250 / 2e11 = 7.5 ns."""
    mesh = make_mesh(parse_topology(V5P, "4x4x4"), "X=4,Y=4,Z=4")
    lat = 8.4e-6 + 6 * 3.4e-6
    big = collective_time(Comm("all-reduce", ("X",), 4e9), mesh, algorithm=BIRING)
    assert big.algorithm == "bidirectional-ring" and big.hops == 6 and big.additive
    assert big.bandwidth_time_s == pytest.approx(2 * 3 * 1e9 / 2e11) and big.time_s == pytest.approx(0.03 + lat)
    one_way = collective_time(Comm("all-reduce", ("X",), 4e9), mesh, algorithm=RING)
    assert one_way.bandwidth_time_s == pytest.approx(2 * 3 * 1e9 / 1e11)
    assert big.bandwidth_time_s == pytest.approx(collective_time(Comm("all-reduce", ("X",), 4e9), mesh).time_s)
    small = collective_time(Comm("all-reduce", ("X",), 1e3), mesh, algorithm=BIRING)
    assert small.bound == "latency" and small.time_s == pytest.approx(lat + 7.5e-9)
    ag = collective_time(Comm("all-gather", ("X",), 4e9), mesh, algorithm=BIRING)
    assert ag.time_s == pytest.approx(3 * 1e9 / 2e11 + 8.4e-6 + 3 * 3.4e-6)


def test_bidirectional_ring_is_the_ring_where_links_already_run_both_ways() -> None:
    """A switch port (NVLink, the fabric) and a line (v5e 4x4, no wraparound) carry a one-way ring's traffic in
    both directions already: the two algorithms take the same time there."""
    line = make_mesh(parse_topology(get_chip("tpu-v5e"), "4x4"), "X=4,Y=4")
    for mesh, axes in ((_h100_512(), ("dp",)), (line, ("X",))):
        for v in (1e3, 4e9):
            a = collective_time(Comm("all-reduce", axes, v), mesh, algorithm=BIRING).time_s
            assert a == collective_time(Comm("all-reduce", axes, v), mesh, algorithm=RING).time_s


TOPOLOGIES = (
    (H100, "64x8", "dp=64,tp=8"),
    (H100, "4x8", "dp=4,tp=8"),
    (V5P, "4x4x4", "X=4,Y=4,Z=4"),
    (get_chip("tpu-v5e"), "4x4", "X=4,Y=4"),
    (V5P, "2*4x4x4", "dcn=2,X=4,Y=4,Z=4"),
)


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(TOPOLOGIES),
    st.integers(1, 15),
    st.sampled_from(sorted(GATHER_KINDS)),
    st.sampled_from(["hierarchical", "in-network", "ring", "bidirectional-ring", "tree"]),
    st.floats(1.0, 1e12),
    st.sampled_from([1.0, 0.7]),
)
def test_no_algorithm_beats_the_bandwidth_lower_bound(topo, pick, kind, name, v, eff) -> None:
    """Every chip of an all-gather must receive the (N-1)/N x V it lacks, and of a reduce-scatter send the
    (N-1)/N x V the others' shards need from it (its links are as fast each way); an all-reduce leaves every
    chip with a sum of V bytes it cannot form alone, so it receives at least V. Over all its links of the
    collective's groups at once, no algorithm is faster than those bytes over their summed bandwidth."""
    chip, spec, axes = topo
    mesh = make_mesh(parse_topology(chip, spec), axes)
    names = [a.split("=")[0] for a in axes.split(",")]
    chosen = tuple(n for i, n in enumerate(names) if pick >> i & 1) or (names[-1],)
    groups = mesh_groups(mesh, chosen, chip)
    if name == "in-network" and any(g.link not in ("nvlink", "fabric") for g in groups):
        return  # in-network reduction needs switched links
    n = math.prod(g.size for g in groups)
    need = v if kind == "all-reduce" else (n - 1) / n * v
    bound = need / sum(g.inbound_bytes_per_s for g in groups)
    algo = catalog_algorithm(name)
    ct = collective_time(Comm(kind, chosen, v), mesh, network_efficiency=eff, algorithm=algo)
    assert ct.time_s >= bound * (1 - 1e-12)
    rate = collective_rate(kind, chosen, mesh, network_efficiency=eff, algorithm=algo)
    assert rate.time_s(v) == pytest.approx(ct.time_s, rel=1e-12)


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_train_and_serve_take_the_algorithm_flag() -> None:
    """``rooftop train --algorithm tree`` replaces the framework's NCCL ring with the catalog's tree;
    hierarchical is the staged rules (no algorithm value); serve defaults to them."""
    job = ("train", "llama-3-8b", "--chip", "h100", "--chips", "64", "--batch-tokens", "4M", "--seq-len", "8192")
    assert setup_from_args(_args(*job)).stack.algorithm == RING
    assert setup_from_args(_args(*job, "--algorithm", "tree")).stack.algorithm == TREE
    assert setup_from_args(_args(*job, "--algorithm", "hierarchical")).stack.algorithm is None
    serve = ("serve", "llama-3-70b", "--chip", "h100", "--chips", "8")
    assert request_from_args(_args(*serve)).algorithm is None
    assert request_from_args(_args(*serve, "--algorithm", "bidirectional-ring")).algorithm == BIRING


def test_serving_prices_its_tp_all_reduces_by_the_algorithm() -> None:
    """A decode step of 8 sequences of llama-3-70b (d_model 8192, 80 layers, bf16) at tp=8 on one H100 node:
    two all-reduces of 8 x 8192 x 2 = 131072 B per layer, 160 in all. Under the tree, a chain of 8 GPUs up
    and down: 2 x 7 x 28 us = 392 us plus 2 x 131072 / 4.5e11 each (ideal efficiency)."""
    cfg = get_model("llama-3-70b")
    mesh = make_mesh(parse_topology(H100, "1x8"), "tp=8")
    layout = ServingLayout(tp=8)
    step = decode_step(cfg, H100, mesh, layout, 8, 1024, Dtypes(), IDEAL, TREE)
    assert step.collectives == 160
    assert step.collective_s == pytest.approx(160 * (2 * 7 * 28e-6 + 2 * 131072 / 4.5e11))
    staged = decode_step(cfg, H100, mesh, layout, 8, 1024, Dtypes(), IDEAL)
    same = decode_step(cfg, H100, mesh, layout, 8, 1024, Dtypes(), IDEAL, Algorithm("hierarchical"))
    assert staged.collective_s == same.collective_s < step.collective_s
