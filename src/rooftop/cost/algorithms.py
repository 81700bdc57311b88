"""Collective algorithms as values: how a library runs all-gather, reduce-scatter and all-reduce.

An ``Algorithm`` (a name and its latency figures) is what a caller passes to
``cost/collectives.collective_time``; the name picks an ``AlgorithmRule`` from the registry here,
which prices the collective. Nothing outside cost/ looks at the name: a planner holds the value
and hands it on, so an algorithm registered here (``register_algorithm``) is priced by every
planner without a change to them.

Every rule is an alpha-beta model (Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective
Communication Operations in MPICH", section 2: time = alpha x steps + beta x bytes), so the time of
a collective of V bytes per device is affine in V: a bandwidth term linear in V and a latency term
that does not depend on V, which either overlap (the staged rules: max of the two) or add (a ring
whose steps each wait for the slowest hop: their sum). ``Schedule`` is one algorithm's closed form
for one collective on its groups: bandwidth seconds = factor x units x (share x V) / bytes_per_s,
and ``latency_s`` over ``steps`` sequential steps.

Built in (module docstring of cost/collectives.py for the derivations):
- ``hierarchical`` (the default, ``algorithm=None``): the staged rules, slowest level first, the
  bandwidth term the max over levels, latency the hops of every group, max(bandwidth, latency);
- ``in-network``: the staged rules with the all-reduce summed by the switches (NVLink SHARP,
  InfiniBand SHARP), V / B per switched level in 2 steps; the same as ``collective_time(sharp=True)``;
- ``ring``: one flat ring over all N chips of every level (NCCL's ring), running one way, its steps'
  latency added to the bandwidth term (``ring_schedule``);
- ``bidirectional-ring``: the same ring with V split in halves sent round both ways, so a wrapped ICI
  ring's two links both carry data (``bidirectional_ring_schedule``);
- ``tree``: the all-reduce as a reduce up and a broadcast down NCCL's double binary tree
  (``tree_schedule``); all-gather and reduce-scatter keep the staged rules.
Their latency figures are data (catalog/frameworks/training.toml: a library's, or ``[algorithms]``).

To add one (a hierarchical variant, a butterfly): write a function
``(kind, groups, algorithm) -> Schedule`` and register an ``AlgorithmRule`` with the kinds it runs
(the others keep the staged rules); a library's entry in catalog/frameworks/training.toml can then
name it, with its latency figures. all-to-all and permute are priced by their own rules whatever
the algorithm.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from rooftop.cost.groups import Group
from rooftop.errors import InvalidConfigError, shown

GATHER_KINDS = frozenset({"all-gather", "reduce-scatter", "all-reduce"})


@dataclass(frozen=True)
class Algorithm:
    """How a collective library runs the gather family: ``name`` picks the registered rule
    (``algorithm_names``); the latency figures are the rule's inputs (a ring's: ``base_s`` per
    collective plus ``intra_step_s`` per step inside a node / ICI domain and ``inter_step_s`` per step
    over the scale-out fabric or DCN, NCCL's tuning model; they come from the caller's data)."""

    name: str = "hierarchical"
    base_s: float = 0.0
    intra_step_s: float = 0.0
    inter_step_s: float = 0.0

    def __post_init__(self) -> None:
        if self.name not in ALGORITHM_RULES:
            raise InvalidConfigError(
                f"unknown collective algorithm {shown(self.name)} (valid: {', '.join(algorithm_names())})"
            )
        for f in ("base_s", "intra_step_s", "inter_step_s"):
            if not 0 <= getattr(self, f) < 1:
                raise InvalidConfigError(
                    f"collective algorithm {self.name}: {f}={getattr(self, f)} must be in [0, 1) s"
                )

    @property
    def rule(self) -> AlgorithmRule:
        return ALGORITHM_RULES[self.name]


@dataclass(frozen=True)
class Schedule:
    """One algorithm's closed form for one collective on its groups (module docstring): bandwidth
    seconds per byte of V = factor x units x share / bytes_per_s (before network efficiency),
    ``latency_s`` over ``steps``; ``additive``: the two add rather than overlap.

    ``rule`` names the schedule (e.g. "ring"), ``names`` the groups it runs over, ``shape`` the link
    kind that sets the bandwidth term and ``size`` the chips in the collective."""

    rule: str
    names: tuple[str, ...]
    shape: str
    size: int
    units: float
    share: float  # bytes of one unit (a shard) per byte of V: 1 / N when the unit is a shard
    bytes_per_s: float
    factor: float
    steps: int
    latency_s: float
    additive: bool = True

    @property
    def per_byte_s(self) -> float:
        return self.factor * self.units * self.share / self.bytes_per_s


ScheduleFn = Callable[[str, tuple[Group, ...], Algorithm], Schedule]


@dataclass(frozen=True)
class AlgorithmRule:
    """A registered algorithm: the collective kinds it runs (the others keep the staged rules), and
    either its ``schedule`` function or, for the staged rules, None (``in_network``: switched levels
    sum the all-reduce themselves)."""

    name: str
    kinds: frozenset[str]
    schedule: ScheduleFn | None = None
    in_network: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        if not self.kinds <= GATHER_KINDS:
            raise InvalidConfigError(
                f"algorithm {shown(self.name)}: kinds {sorted(self.kinds)} must be among {sorted(GATHER_KINDS)}"
            )

    def runs(self, kind: str) -> bool:
        return kind in self.kinds


ALGORITHM_RULES: dict[str, AlgorithmRule] = {}


def register_algorithm(rule: AlgorithmRule) -> AlgorithmRule:
    """Add ``rule`` to the algorithms ``Algorithm`` may name (a name taken raises)."""
    if rule.name in ALGORITHM_RULES:
        raise InvalidConfigError(f"collective algorithm {shown(rule.name)} is already registered")
    ALGORITHM_RULES[rule.name] = rule
    return rule


def algorithm_names() -> tuple[str, ...]:
    return tuple(ALGORITHM_RULES)


def levels(groups: tuple[Group, ...]) -> list[list[Group]]:
    """Groups by link kind, slowest level (least inbound bandwidth per chip) first."""
    kinds: dict[str, list[Group]] = {}
    for g in groups:
        kinds.setdefault(g.link, []).append(g)
    return sorted(kinds.values(), key=lambda gs: sum(g.inbound_bytes_per_s for g in gs))


def _entry(groups: tuple[Group, ...], rate: Callable[[Group], float]) -> tuple[list[Group], float]:
    """The level a flat schedule enters slowest and that entry's bytes/s: a level is entered through
    the links of the chips of the faster levels below it (one channel per NIC on a rail-optimised GPU
    node, so a node's m GPUs bring m x B), ``rate`` being what one chip receives from one group."""
    below, worst = 1, None
    for level in reversed(levels(groups)):  # fastest level first: the chips below a level feed its links
        inbound = sum(rate(g) for g in level) * below
        if worst is None or inbound < worst[1]:
            worst = (level, inbound)
        below *= math.prod(g.size for g in level)
    assert worst is not None
    return worst


def _one_way(g: Group) -> float:
    """Bytes/s a chip receives from ``g`` when every ring runs one way: one link of an ICI ring or line
    (its predecessor's), its port on a switch (which sends and receives at once)."""
    return g.link_bytes_per_s


def _both_ways(g: Group) -> float:
    """Bytes/s a chip receives from ``g`` when rings run both ways: both links of a wrapped ICI ring; a
    line's links and a switch port already carry a one-way ring's traffic in both directions, so the
    same as one way there (cost/groups.py: inbound)."""
    return g.inbound_bytes_per_s


def _ring_latency(kind: str, groups: tuple[Group, ...], algo: Algorithm) -> tuple[int, float]:
    """(steps, seconds) of a flat ring: NCCL's tuning model, base + (steps - X) x intra-domain step +
    X x inter-node step, X the steps that cross the scale-out fabric or DCN (chips of those levels - 1,
    twice for an all-reduce)."""
    factor = 2 if kind == "all-reduce" else 1
    n_total = math.prod(g.size for g in groups)
    steps = factor * (n_total - 1)
    inter = factor * (_outer(groups) - 1)
    return steps, algo.base_s + (steps - inter) * algo.intra_step_s + inter * algo.inter_step_s


def _outer(groups: tuple[Group, ...]) -> int:
    """Chips of the scale-out levels (fabric, dcn): NCCL's nodes."""
    return math.prod(g.size for g in groups if g.link in ("fabric", "dcn"))


def _flat_ring(
    kind: str, groups: tuple[Group, ...], algo: Algorithm, rule: str, rate: Callable[[Group], float]
) -> Schedule:
    n_total = math.prod(g.size for g in groups)
    level, inbound = _entry(groups, rate)
    steps, latency = _ring_latency(kind, groups, algo)
    factor = 2.0 if kind == "all-reduce" else 1.0
    names = tuple(g.name for g in level)
    return Schedule(
        rule, names, level[0].link, n_total, float(n_total - 1), 1 / n_total, inbound, factor, steps, latency
    )


def ring_schedule(kind: str, groups: tuple[Group, ...], algo: Algorithm) -> Schedule:
    """One flat ring over every group, running one way (cost/collectives.py, "Algorithm"): every chip
    receives N - 1 shards of V / N (twice for an all-reduce) from its predecessor, over one link of an
    ICI ring or its switch port; the slowest level's entry sets the term (``_entry``). Latency: NCCL's
    tuning model (``_ring_latency``)."""
    return _flat_ring(kind, groups, algo, "ring", _one_way)


def bidirectional_ring_schedule(kind: str, groups: tuple[Group, ...], algo: Algorithm) -> Schedule:
    """The ring with V split in two halves sent round in opposite directions: each step a chip sends
    and receives S / 2 each way instead of S one way, so a wrapped ICI ring's two links both carry
    data and its term halves (How to Scale Your Model, Part 3: on a bidirectional ring the shards flow
    both ways, (n-1)/n x V / (2W)); on switched links and lines, whose links a one-way ring already
    uses both ways, it equals the ring. The halves step together: the ring's N - 1 steps (twice for
    an all-reduce) and their latency."""
    return _flat_ring(kind, groups, algo, "bidirectional-ring", _both_ways)


def tree_schedule(kind: str, groups: tuple[Group, ...], algo: Algorithm) -> Schedule:
    """All-reduce as a reduce up a tree and a broadcast down it, pipelined in chunks (NCCL's tree:
    a double binary tree over the nodes, Sanders, Speck & Traeff 2009, "Two-tree algorithms for full
    bandwidth broadcast, reduction and scan", Parallel Computing 35(12); a chain through each node's
    chips). Bandwidth: with the two complementary trees each carrying half of V, every chip receives
    V going up and V coming down, 2 V through the slowest level's entry (``_entry``), as NCCL's tuner
    prices it (src/graph/tuning.cc: the tree's algorithm bandwidth is half its bus bandwidth, time =
    latency + V / algorithm bandwidth). Latency, NCCL's model: base + 2 x ((chips per node - 1) x
    intra-domain step + floor(log2 nodes) x inter-node step), nodes = chips of the fabric / DCN levels."""
    n_total = math.prod(g.size for g in groups)
    nodes = _outer(groups)
    inner, depth = n_total // nodes, nodes.bit_length() - 1
    level, inbound = _entry(groups, _both_ways)
    steps = 2 * ((inner - 1) + depth)
    latency = algo.base_s + 2 * ((inner - 1) * algo.intra_step_s + depth * algo.inter_step_s)
    names = tuple(g.name for g in level)
    return Schedule("tree", names, level[0].link, n_total, 1.0, 1.0, inbound, 2.0, steps, latency)


register_algorithm(
    AlgorithmRule("hierarchical", GATHER_KINDS, source="How to Scale Your Model, Parts 3 and 12 (staged levels)")
)
register_algorithm(
    AlgorithmRule(
        "in-network",
        frozenset({"all-reduce"}),
        in_network=True,
        source="How to Scale Your Model, Part 12, 'In network reductions' (NVLink SHARP, InfiniBand SHARP)",
    )
)
register_algorithm(
    AlgorithmRule("ring", GATHER_KINDS, ring_schedule, source="NCCL ring; NCCL src/graph/tuning.cc latency model")
)
register_algorithm(
    AlgorithmRule(
        "bidirectional-ring",
        GATHER_KINDS,
        bidirectional_ring_schedule,
        source="How to Scale Your Model, Part 3 (bidirectional ring); NCCL src/graph/tuning.cc ring latency model",
    )
)
register_algorithm(
    AlgorithmRule(
        "tree",
        frozenset({"all-reduce"}),
        tree_schedule,
        source="Sanders, Speck & Traeff 2009 (double binary tree); NCCL src/graph/tuning.cc tree model",
    )
)
