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
- ``ring``: one flat ring over all N chips of every level (NCCL's ring), its steps' latency added to
  the bandwidth term (``ring_schedule``).

To add one (a tree, a bidirectional ring, a hierarchical variant): write a function
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


def ring_schedule(kind: str, groups: tuple[Group, ...], algo: Algorithm) -> Schedule:
    """One flat ring over every group (cost/collectives.py, "Algorithm"): every chip receives N - 1
    shards of V / N (twice for an all-reduce); a level is entered through the links of the chips of
    the faster levels below it, and the slowest entry sets the term. Latency: NCCL's tuning model,
    base + (steps - X) x intra-domain step + X x inter-node step, X the steps that cross the scale-out
    fabric or DCN (chips of those levels - 1, twice for an all-reduce)."""
    n_total = math.prod(g.size for g in groups)
    factor = 2.0 if kind == "all-reduce" else 1.0
    below, worst = 1, None
    for level in reversed(levels(groups)):  # fastest level first: the chips below a level feed its links
        inbound = sum(g.inbound_bytes_per_s for g in level) * below
        if worst is None or inbound < worst[1]:
            worst = (level, inbound)
        below *= math.prod(g.size for g in level)
    assert worst is not None
    outer = math.prod(g.size for g in groups if g.link in ("fabric", "dcn"))
    steps = int(factor) * (n_total - 1)
    inter = int(factor) * (outer - 1)
    latency = algo.base_s + (steps - inter) * algo.intra_step_s + inter * algo.inter_step_s
    names = tuple(g.name for g in worst[0])
    return Schedule(
        "ring", names, worst[0][0].link, n_total, float(n_total - 1), 1 / n_total, worst[1], factor, steps, latency
    )


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
