"""Cost: hardware-free counts of one op or a sum of ops.

A Cost is additive (``a + b``), scales by a count (``k * a``) and has a zero
(``Cost()``). FLOPs are kept per (unit, dtype) so that a mixed program is timed at
the right peak; collectives are kept as records (kind, axes, bytes, count) so that
their time is priced by one rule set (cost/collectives.py) with latency included.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from rooftop.errors import InvalidConfigError

COLLECTIVE_KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "permute")
FlopsKey = tuple[str, str]  # (unit, dtype): ("matrix", "bf16")


@dataclass(frozen=True)
class Comm:
    """One collective: ``kind`` over mesh ``axes``.

    ``bytes`` is the per-device array size the collective is named after: the gathered
    (output) bytes for all-gather, the input bytes for reduce-scatter and all-reduce,
    the per-device buffer for all-to-all, the sent bytes for permute. ``count`` repeats
    it (e.g. once per layer), which multiplies both its bandwidth and latency terms.
    """

    kind: str
    axes: tuple[str, ...]
    bytes: float
    count: float = 1.0
    label: str = ""

    def __post_init__(self) -> None:
        if self.kind not in COLLECTIVE_KINDS:
            raise InvalidConfigError(f"unknown collective kind {self.kind!r} (valid: {', '.join(COLLECTIVE_KINDS)})")
        if self.bytes < 0 or self.count < 0:
            raise InvalidConfigError(f"collective {self.kind}: bytes and count must be >= 0")

    def scaled(self, k: float) -> Comm:
        return Comm(self.kind, self.axes, self.bytes, self.count * k, self.label)


def _merge(a: Mapping[FlopsKey, float], b: Mapping[FlopsKey, float], kb: float = 1.0) -> dict[FlopsKey, float]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + kb * v
    return out


@dataclass(frozen=True)
class Cost:
    """Counts only: FLOPs per (unit, dtype), bytes through HBM, collectives."""

    flops_by: Mapping[FlopsKey, float] = field(default_factory=lambda: MappingProxyType({}))
    hbm_bytes: float = 0.0
    comms: tuple[Comm, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "flops_by", MappingProxyType(dict(self.flops_by)))
        if self.hbm_bytes < 0 or any(v < 0 for v in self.flops_by.values()):
            raise InvalidConfigError("a Cost cannot have negative FLOPs or bytes")

    @staticmethod
    def of(flops: float = 0.0, hbm_bytes: float = 0.0, dtype: str = "bf16", unit: str = "matrix") -> Cost:
        return Cost({(unit, dtype): float(flops)} if flops else {}, float(hbm_bytes))

    @property
    def flops(self) -> float:
        return sum(self.flops_by.values())

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per HBM byte (inf when the op touches no memory)."""
        return self.flops / self.hbm_bytes if self.hbm_bytes else float("inf")

    @property
    def comm_bytes(self) -> float:
        return sum(c.bytes * c.count for c in self.comms)

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(_merge(self.flops_by, other.flops_by), self.hbm_bytes + other.hbm_bytes, self.comms + other.comms)

    def __radd__(self, other: object) -> Cost:
        if other == 0:
            return self
        return NotImplemented

    def __mul__(self, k: float) -> Cost:
        if not isinstance(k, (int, float)) or k < 0:
            return NotImplemented
        return Cost(
            {key: v * k for key, v in self.flops_by.items()},
            self.hbm_bytes * k,
            tuple(c.scaled(k) for c in self.comms),
        )

    __rmul__ = __mul__

    def with_comm(self, *comms: Comm) -> Cost:
        return Cost(self.flops_by, self.hbm_bytes, self.comms + comms)


def total(costs: Iterable[Cost]) -> Cost:
    return sum(costs, Cost())


@dataclass(frozen=True)
class CostTree:
    """A named breakdown: a Cost at each leaf, sums at each node (``layer/attention/qkv``)."""

    name: str
    cost: Cost = field(default_factory=Cost)
    children: tuple[CostTree, ...] = ()

    @staticmethod
    def node(name: str, children: Iterable[CostTree]) -> CostTree:
        kids = tuple(children)
        return CostTree(name, total(c.cost for c in kids), kids)

    def walk(self, prefix: str = "") -> Iterator[tuple[str, CostTree]]:
        path = f"{prefix}/{self.name}" if prefix else self.name
        yield path, self
        for child in self.children:
            yield from child.walk(path)

    def scaled(self, k: float) -> CostTree:
        return CostTree(self.name, self.cost * k, tuple(c.scaled(k) for c in self.children))
