"""Collective algorithms as values (cost/algorithms.py): a new algorithm registered in cost/ alone is
priced by the training step and the limits, and every algorithm's closed form (collective_rate) is the
time collective_time gives at any size.

The tree all-reduce added here ("binary-tree", registered by this file only; the built-in ``tree`` is NCCL's
double binary tree, tests/unit/test_builtin_algorithms.py) is a pipelined binary tree: a reduce up the tree,
then a broadcast down it, each ceil(log2 n) sequential steps (Thakur, Rabenseifner & Gropp 2005, "Optimization
of Collective Communication Operations in MPICH", section 4: binary-tree reduce and broadcast, log p steps
each); so 2 ceil(log2 n) steps of latency, each priced here at the network step latency. Pipelined in chunks,
each chip receives the whole V going up and again going down: 2 V over its slowest link. NCCL's tuner prices
its tree all-reduce the same way in bandwidth (src/graph/tuning.cc: the tree's algorithm bandwidth is half its
bus bandwidth, time = latency + V / algorithm bandwidth) with latency 2 x (steps inside a node + log2 nodes
network steps). Its steps' latency adds to the bandwidth term, as the ring's does.

Figures (catalog/chips/h100.toml): NVLink 18 x 2.5e10 = 4.5e11 B/s per GPU, one 5e10 B/s NIC per GPU;
NCCL's ring figures (catalog/frameworks/training.toml): 8.4 us base, 3.4 us per step inside a node,
14 us per step over the network. A 64 x 8 H100 cluster: 512 GPUs, 64 nodes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import pytest

from rooftop.cost.algorithms import (
    ALGORITHM_RULES,
    Algorithm,
    AlgorithmRule,
    Schedule,
    algorithm_names,
    levels,
    register_algorithm,
)
from rooftop.cost.collectives import collective_rate, collective_time
from rooftop.cost.cost import Comm
from rooftop.cost.efficiency import IDEAL
from rooftop.cost.groups import Group
from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.model.config import TransformerConfig
from rooftop.model.params import params_total
from rooftop.plan.limits import job_limits
from rooftop.plan.train.framework import get_framework
from rooftop.plan.train.layout import Parallelism
from rooftop.plan.train.step import TrainingSetup, evaluate, layout_mesh

H100 = get_chip("h100")
NIC, BASE, INTRA, INTER = 5e10, 8.4e-6, 3.4e-6, 14e-6
#: a small model, so that the gradients are a few MB and the collectives' latency dominates
SMALL = TransformerConfig(name="small", vocab_size=1000, d_model=256, n_layers=4, n_heads=8, d_ff=688)


def _tree(kind: str, groups: tuple[Group, ...], algo: Algorithm) -> Schedule:
    """2 ceil(log2 n) steps of the network step latency; 2 x V over the slowest level's inbound bandwidth."""
    n = math.prod(g.size for g in groups)
    slow = levels(groups)[0]
    steps = 2 * math.ceil(math.log2(n))
    inbound = sum(g.inbound_bytes_per_s for g in slow)
    names = tuple(g.name for g in slow)
    latency = algo.base_s + steps * algo.inter_step_s
    return Schedule("tree", names, slow[0].link, n, 1.0, 1.0, inbound, 2.0, steps, latency)


@pytest.fixture
def tree() -> Iterator[Algorithm]:
    register_algorithm(AlgorithmRule("binary-tree", frozenset({"all-reduce"}), _tree, source="test: binary tree"))
    try:
        yield Algorithm("binary-tree", BASE, INTRA, INTER)
    finally:
        del ALGORITHM_RULES["binary-tree"]


RING = Algorithm("ring", BASE, INTRA, INTER)


def _ring_all_reduce_s(v: float) -> float:
    """NCCL's ring over 512 GPUs: 2 x 511 shards of V / 512 through a node's 8 NICs; 8.4 us + 2 x (511 - 63)
    steps inside a node + 2 x 63 over the network."""
    return 2 * 511 * (v / 512) / (8 * NIC) + BASE + 2 * (511 - 63) * INTRA + 2 * 63 * INTER


def _tree_all_reduce_s(v: float) -> float:
    """2 V over one GPU's NIC (the fabric is the slowest level) + 8.4 us + 2 x log2(512) = 18 network steps."""
    return 2 * v / NIC + BASE + 18 * INTER


def test_a_registered_tree_is_priced_by_collective_time(tree: Algorithm) -> None:
    mesh = make_mesh(parse_topology(H100, "64x8"), "dp=512")
    v = 4e6
    ct = collective_time(Comm("all-reduce", ("dp",), v), mesh, algorithm=tree)
    assert ct.algorithm == "binary-tree" and ct.additive and ct.hops == 18
    assert ct.time_s == pytest.approx(_tree_all_reduce_s(v))
    ring = collective_time(Comm("all-reduce", ("dp",), v), mesh, algorithm=RING)
    assert ring.time_s == pytest.approx(_ring_all_reduce_s(v))
    # latency-bound: the tree's 18 steps against the ring's 1022 (4.8 ms), though it moves more bytes
    assert ct.bandwidth_time_s > ring.bandwidth_time_s and ct.time_s < ring.time_s / 5
    # the kinds it does not run keep the staged rules
    ag = collective_time(Comm("all-gather", ("dp",), v), mesh, algorithm=tree)
    assert ag.algorithm == "hierarchical" and ag.time_s == collective_time(Comm("all-gather", ("dp",), v), mesh).time_s
    assert "binary-tree" in algorithm_names()


def test_the_training_step_prices_a_new_algorithm_without_a_change_to_the_planner(tree: Algorithm) -> None:
    """Pure data parallelism over 512 GPUs, nothing of the all-reduce hidden (dp_overlap 0): the step's
    data-parallel part is one all-reduce of every parameter's bf16 gradient."""
    topo = parse_topology(H100, "64x8")
    par = Parallelism(dp=512)
    v = params_total(SMALL) * 2
    got = {}
    for algo in (RING, tree):
        stack = dataclasses.replace(get_framework("megatron"), algorithm=algo)
        setup = TrainingSetup(SMALL, H100, topo, 512, 1024, IDEAL.replace(dp_overlap=0.0), framework=stack)
        got[algo.name] = evaluate(setup, par, setup.pricer(layout_mesh(topo, par))).breakdown["data_parallel"]
    assert got["ring"] == pytest.approx(_ring_all_reduce_s(v))
    assert got["binary-tree"] == pytest.approx(_tree_all_reduce_s(v))
    assert got["binary-tree"] < got["ring"] / 5


def test_the_limits_price_a_new_algorithm_at_the_layers_message_size(tree: Algorithm) -> None:
    """dp critical tokens per chip = AR(largest layer's bf16 gradients) x C / (4 x layer params), over all
    512 GPUs: the tree's few steps lower it below the ring's by the ratio of their all-reduce times."""
    topo = parse_topology(H100, "64x8")
    layer = 4 * 256 * 256 + 3 * 256 * 688 + 2 * 256  # q, k, v, o; gate, up, down; two norms
    c = 9.895e14
    got = {}
    for algo in (RING, tree):
        lim = job_limits(SMALL, H100, topo, 512 * 1024, 1024, algorithm=algo)
        got[algo.name] = lim.limit("dp_critical_tokens_per_chip", "fabric+nvlink")
        assert got[algo.name].figure("layer_params") == layer
    assert got["ring"].figure("comm_s") == pytest.approx(_ring_all_reduce_s(2 * layer))
    assert got["binary-tree"].figure("comm_s") == pytest.approx(_tree_all_reduce_s(2 * layer))
    assert got["binary-tree"].value == pytest.approx(_tree_all_reduce_s(2 * layer) * c / (4 * layer))
    assert got["binary-tree"].value < got["ring"].value / 5


@pytest.mark.parametrize("kind", ["all-gather", "reduce-scatter", "all-reduce", "all-to-all", "permute"])
@pytest.mark.parametrize("algo", [None, RING, Algorithm("in-network")])
@pytest.mark.parametrize(("topo", "axes"), [("64x8", "dp=64,tp=8"), ("4x4x4", "X=4,Y=4,Z=4")])
def test_the_closed_form_is_the_time_at_every_size(kind: str, algo: Algorithm | None, topo: str, axes: str) -> None:
    """collective_rate(...).time_s(V) = collective_time(V).time_s from 1 byte to 100 GB, latency-bound and
    bandwidth-bound alike (in-network reduction needs switched links: GPUs only)."""
    chip = H100 if topo == "64x8" else get_chip("tpu-v5p")
    if algo is not None and algo.name == "in-network" and chip is not H100:
        return
    mesh = make_mesh(parse_topology(chip, topo), axes)
    names = tuple(a.split("=")[0] for a in axes.split(","))
    for ax in (names, names[:1], names[1:]):
        rate = collective_rate(kind, ax, mesh, network_efficiency=0.8, algorithm=algo)
        for v in (1.0, 3e3, 7e5, 2.5e8, 1e11):
            ct = collective_time(Comm(kind, ax, v), mesh, network_efficiency=0.8, algorithm=algo)
            assert rate.time_s(v) == pytest.approx(ct.time_s, rel=1e-12)


def test_in_network_is_the_sharp_flag_and_names_are_checked() -> None:
    mesh = make_mesh(parse_topology(H100, "64x8"), "dp=64,tp=8")
    v = 1e9
    flag = collective_time(Comm("all-reduce", ("dp", "tp"), v), mesh, sharp=True)
    value = collective_time(Comm("all-reduce", ("dp", "tp"), v), mesh, algorithm=Algorithm("in-network"))
    assert value.time_s == flag.time_s and value.sharp and value.algorithm == "in-network"
    with pytest.raises(InvalidConfigError, match="already registered"):
        register_algorithm(AlgorithmRule("ring", frozenset({"all-reduce"}), _tree))
    with pytest.raises(InvalidConfigError, match="kinds"):
        AlgorithmRule("odd", frozenset({"all-to-all"}), _tree)
    with pytest.raises(InvalidConfigError, match="valid: hierarchical, in-network, ring, bidirectional-ring, tree"):
        Algorithm("butterfly")
