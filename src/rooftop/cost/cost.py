"""Cost: hardware-free counts of one op or a sum of ops.

A Cost is additive (``a + b``), scales by a count (``k * a``) and has a zero
(``Cost()``). FLOPs are kept per (unit, dtype) so that a mixed program is timed at
the right peak; collectives are kept as records (kind, axes, bytes, count) so that
their time is priced by one rule set (cost/collectives.py) with latency included.

HBM bytes carry their kind (``BYTE_KINDS``: weights, KV cache, activations, optimizer
state; what no op rule typed is "other"), so a planner reads how many of a step's bytes
are weights from the Cost itself, never by re-pricing. A ``CostTree`` leaf carries an
``OpTag``: what kind of op it is and how it divides over a tensor-parallel group, set
where model/ makes the op; planners read tags, never op names (sharding/tensor.py turns a
tag into per-chip fractions).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import TypeVar

from rooftop.errors import InvalidConfigError

COLLECTIVE_KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "permute")
FlopsKey = tuple[str, str]  # (unit, dtype): ("matrix", "bf16")
#: what HBM bytes are; "other" is whatever no op rule typed (bytes_of gives it as the remainder)
BYTE_KINDS = ("weights", "kv_cache", "activations", "optimizer", "other")
_TYPED_KINDS = frozenset(BYTE_KINDS) - {"other"}
_NO_BYTES: Mapping[str, float] = MappingProxyType({})


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


@dataclass(frozen=True)
class Gemm:
    """One matmul's shape: ``batch`` independent (m x k) @ (k x n) products, ``out_bytes`` per output
    element. A Cost that is one matmul (plus vector work, e.g. its bias) carries it, so that the
    roofline can price how the shape uses the matrix unit (cost/gemm.py)."""

    m: float
    n: float
    k: float
    batch: float = 1.0
    out_bytes: float = 2.0

    def __post_init__(self) -> None:
        if min(self.m, self.n, self.k, self.batch) < 0 or self.out_bytes < 0:
            raise InvalidConfigError(f"matmul shape {self} has a negative size")

    def label(self) -> str:
        b = f"{self.batch:g} x " if self.batch != 1 else ""
        return f"{b}{self.m:g}x{self.k:g} @ {self.k:g}x{self.n:g}"


_K = TypeVar("_K")


def _merge(a: Mapping[_K, float], b: Mapping[_K, float], kb: float = 1.0) -> dict[_K, float]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + kb * v
    return out


@dataclass(frozen=True)
class Cost:
    """Counts only: FLOPs per (unit, dtype), bytes through HBM (``hbm_bytes`` in all, the typed
    part of them by kind in ``bytes_by``), collectives; ``gemm`` the shape of its matmul when its
    matrix FLOPs are one matmul's (a sum with another matmul drops it)."""

    flops_by: Mapping[FlopsKey, float] = field(default_factory=lambda: MappingProxyType({}))
    hbm_bytes: float = 0.0
    comms: tuple[Comm, ...] = ()
    bytes_by: Mapping[str, float] = field(default_factory=lambda: _NO_BYTES)
    gemm: Gemm | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "flops_by", MappingProxyType(dict(self.flops_by)))
        if self.hbm_bytes < 0 or any(v < 0 for v in self.flops_by.values()):
            raise InvalidConfigError("a Cost cannot have negative FLOPs or bytes")
        if self.bytes_by:
            typed = {k: float(v) for k, v in self.bytes_by.items() if v}
            bad = sorted(set(typed) - _TYPED_KINDS)
            if bad:
                raise InvalidConfigError(f"unknown kind of HBM bytes {bad[0]!r} (valid: {', '.join(BYTE_KINDS)})")
            if any(v < 0 for v in typed.values()) or sum(typed.values()) > self.hbm_bytes * (1 + 1e-9) + 1e-6:
                raise InvalidConfigError("a Cost's typed bytes must be >= 0 and add up to at most its HBM bytes")
            object.__setattr__(self, "bytes_by", MappingProxyType(typed) if typed else _NO_BYTES)

    @staticmethod
    def of(flops: float = 0.0, hbm_bytes: float = 0.0, dtype: str = "bf16", unit: str = "matrix") -> Cost:
        return Cost({(unit, dtype): float(flops)} if flops else {}, float(hbm_bytes))

    @staticmethod
    def typed(flops_by: Mapping[FlopsKey, float], bytes_by: Mapping[str, float]) -> Cost:
        """A Cost whose every HBM byte has a kind (``bytes_by`` may name "other")."""
        return Cost(flops_by, float(sum(bytes_by.values())), (), {k: v for k, v in bytes_by.items() if k != "other"})

    def bytes_of(self, kind: str) -> float:
        """HBM bytes of one kind (BYTE_KINDS); "other" is what no rule typed."""
        if kind == "other":
            return max(0.0, self.hbm_bytes - sum(self.bytes_by.values()))
        if kind not in _TYPED_KINDS:
            raise InvalidConfigError(f"unknown kind of HBM bytes {kind!r} (valid: {', '.join(BYTE_KINDS)})")
        return self.bytes_by.get(kind, 0.0)

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
        typed = _merge(self.bytes_by, other.bytes_by) if other.bytes_by else self.bytes_by
        return Cost(
            _merge(self.flops_by, other.flops_by),
            self.hbm_bytes + other.hbm_bytes,
            self.comms + other.comms,
            typed,
            _one_gemm(self, other),
        )

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
            {kind: v * k for kind, v in self.bytes_by.items()} if self.bytes_by else _NO_BYTES,
            self.gemm,
        )

    __rmul__ = __mul__

    def with_comm(self, *comms: Comm) -> Cost:
        return Cost(self.flops_by, self.hbm_bytes, self.comms + comms, self.bytes_by, self.gemm)

    @property
    def has_matrix_flops(self) -> bool:
        return any(unit == "matrix" and v for (unit, _), v in self.flops_by.items())


def _one_gemm(a: Cost, b: Cost) -> Gemm | None:
    """The shape a sum keeps: that of its one matmul (the other side has no matrix FLOPs), else none."""
    if a.gemm is not None and not b.has_matrix_flops:
        return a.gemm
    if b.gemm is not None and not a.has_matrix_flops:
        return b.gemm
    return None


def total(costs: Iterable[Cost]) -> Cost:
    return sum(costs, Cost())


#: what an op does (OpTag.category): a weight matmul, the attention core over the cached keys and
#: values, an elementwise or reduction op, a write of new keys and values to the cache, a table lookup
OP_CATEGORIES = ("matmul", "attention", "elementwise", "io", "lookup")


#: how an op divides over a tensor-parallel group of tp chips (OpTag.split; sharding/tensor.py):
#: "tensor" Megatron column/row-parallel weight matmul (FLOPs and weights / tp); "kv_heads" the k and v
#: projections (/ the chips the KV heads spread over); "heads" per-head elementwise work (/ tp);
#: "attention" the attention core and the cache (FLOPs / tp over query heads, cache over KV heads);
#: "vocab" a vocabulary-parallel table (weights / tp); "tokens" replicated, or split over tokens under
#: sequence parallelism; "replicated" the same on every chip of the group
class Split(StrEnum):
    """How an op divides over a tensor-parallel group (see OP_SPLITS). A str: JSON and comparisons see the
    value."""

    TENSOR = "tensor"
    KV_HEADS = "kv_heads"
    HEADS = "heads"
    ATTENTION = "attention"
    VOCAB = "vocab"
    TOKENS = "tokens"
    REPLICATED = "replicated"


OP_SPLITS: tuple[Split, ...] = tuple(Split)


@dataclass(frozen=True)
class OpTag:
    """What an op is, set where model/ makes it: ``category`` (OP_CATEGORIES), ``split``
    (OP_SPLITS), ``expert`` (a routed expert's op: its weights also divide over expert
    parallelism), ``flash_recompute`` (an op a FlashAttention backward pass runs again),
    ``row_parallel`` (a "tensor" matmul split over its contracting dim, as Megatron's o and down
    projections; the others split their output features) and ``attention_block`` (an op of a
    layer's attention block, norm to residual: under attention data parallelism it runs on each
    rank's own requests); ``unfused`` marks the extra HBM traffic of an elementwise op run eagerly as
    separate kernels (model/eager.py)."""

    category: str
    split: Split
    expert: bool = False
    flash_recompute: bool = False
    row_parallel: bool = False
    attention_block: bool = False
    unfused: bool = False

    def __post_init__(self) -> None:
        if self.category not in OP_CATEGORIES:
            raise InvalidConfigError(f"unknown op category {self.category!r} (valid: {', '.join(OP_CATEGORIES)})")
        if not isinstance(self.split, Split):  # a spelling from outside the type checker: its member, or the error
            if self.split not in OP_SPLITS:
                raise InvalidConfigError(f"unknown op split {str(self.split)!r} (valid: {', '.join(OP_SPLITS)})")
            object.__setattr__(self, "split", Split(self.split))


@dataclass(frozen=True)
class CostTree:
    """A named breakdown: a Cost at each leaf, sums at each node (``layer/attention/qkv``); a leaf
    made by model/ carries its ``tag``."""

    name: str
    cost: Cost = field(default_factory=Cost)
    children: tuple[CostTree, ...] = ()
    tag: OpTag | None = None

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
        return CostTree(self.name, self.cost * k, tuple(c.scaled(k) for c in self.children), self.tag)

    def leaves(self, prefix: str = "") -> Iterator[tuple[str, CostTree]]:
        """(path, leaf) of every leaf, in order."""
        return ((path, t) for path, t in self.walk(prefix) if not t.children)
