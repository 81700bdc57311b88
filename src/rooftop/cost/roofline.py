"""Roofline: a Cost on a Chip (and, for collectives, a Mesh) becomes an Estimate.

    compute_s = sum over (unit, dtype) of FLOPs / (peak FLOPs/s x efficiency)
    memory_s  = HBM bytes / (HBM bytes/s x efficiency)
    network_s = sum of collective times (cost/collectives.py)
    lower bound = max(compute_s, memory_s, network_s)   (perfect overlap)
    upper bound = sum(...)                              (no overlap)

(Williams, Waterman & Patterson 2009, "Roofline"; How to Scale Your Model, Part 1.)

The same formula comes in two forms: ``roofline`` times one Cost and returns an Estimate
whose Terms hold the seconds and the figures they came from; ``roofline_table`` times a
table of ops (rows) x variants (numpy broadcasting) for the planners. Both price a
FLOP through ``flop_rate`` and a byte through ``hbm_rate``. Numbers only: report/formulas.py
turns Terms into words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from rooftop.cost.cost import Comm, Cost, FlopsKey
from rooftop.cost.efficiency import IDEAL, Efficiency
from rooftop.cost.figures import (
    RULES,
    CollectiveFigures,
    F,
    Figures,
    FlopsFigures,
    HbmFigures,
    HostFigures,
    recorded,
)
from rooftop.display import Displayed
from rooftop.errors import InvalidConfigError
from rooftop.hardware.chip import Chip

if TYPE_CHECKING:
    import numpy as np

    from rooftop.cost.algorithms import Algorithm
    from rooftop.cost.collectives import CollectiveTime
    from rooftop.hardware.topology import Mesh


class MissingFigureError(LookupError):
    """A Term read for a figure its rule does not record, or for figures of another rule."""


#: ``Term.figure``'s default: the figure is required
REQUIRED: Any = object()


class TermKind(StrEnum):
    """What a Term measures; its ``bound`` when it dominates. A str: JSON and comparisons see the value."""

    COMPUTE = "compute"
    MEMORY = "memory"
    NETWORK = "network"
    LATENCY = "latency"
    HIDDEN = "hidden"
    BUBBLE = "bubble"
    OVERHEAD = "overhead"
    HOST = "host"


TERM_KINDS = tuple(TermKind)


class Bound(StrEnum):
    """The term of an Estimate that dominates (ties go to compute)."""

    COMPUTE = "compute"
    MEMORY = "memory"
    NETWORK = "network"


@dataclass(frozen=True)
class Term:
    """One time term, the figures it came from (numbers and names) and, through their type, the rule
    that gave it.

    ``figures`` is one of cost/figures.py's types, one per rule (report/formulas.py writes each out):
    ``FlopsFigures`` (FLOPs / (peak x efficiency)), ``HbmFigures`` (bytes / (HBM bytes/s x
    efficiency)), ``CollectiveFigures`` (calls x one collective's time, ``collective`` holds it),
    ``HostFigures``, and the planners' own (ops, hidden, bubble, launch, per-step, per-sequence, eager,
    sync, contention). ``kind`` is what bounds it (TERM_KINDS)."""

    name: str
    seconds: float
    kind: TermKind
    figures: Figures
    collective: CollectiveTime | None = field(default=None, compare=False)

    @property
    def rule(self) -> str:
        """The formula's name: "flops", "hbm", "collective", "host", "ops", ... (cost/figures.RULES)."""
        return RULES[type(self.figures)]

    def figure(self, key: str, default: Any = REQUIRED) -> Any:
        """The recorded figure named ``key``, looked up by name (code reads ``figures`` by attribute,
        which the type checker checks; this is for people exploring a Term). A figure the term did not
        record returns ``default``, or without one raises ``MissingFigureError`` naming the term, its
        rule and the figures it has."""
        pairs = recorded(self.figures)
        for k, v in pairs:
            if k == key:
                return v
        if default is REQUIRED:
            have = ", ".join(k for k, _ in pairs) or "none"
            raise MissingFigureError(f"term {self.name!r} (rule {self.rule!r}) has no figure {key!r}; it has: {have}")
        return default


def figures_of(term: Term, kind: type[F]) -> F:
    """``term``'s figures as the ``kind`` its rule records (typed for the reader), or
    ``MissingFigureError`` when the term is of another rule."""
    figures = term.figures
    if not isinstance(figures, kind):
        raise MissingFigureError(f"term {term.name!r} (rule {term.rule!r}) has no {kind.__name__}")
    return figures


@dataclass(frozen=True, repr=False)  # the short repr of Displayed
class Estimate(Displayed):
    chip: str
    flops: float
    hbm_bytes: float
    compute_s: float
    memory_s: float
    network_s: float
    critical_intensity: float
    terms: tuple[Term, ...] = field(default=())

    @property
    def lower_bound_s(self) -> float:
        return max(self.compute_s, self.memory_s, self.network_s)

    @property
    def upper_bound_s(self) -> float:
        return self.compute_s + self.memory_s + self.network_s

    @property
    def bound(self) -> Bound:
        """Which term dominates: compute, memory or network (ties go to compute)."""
        best = max(
            (Bound.COMPUTE, self.compute_s),
            (Bound.MEMORY, self.memory_s),
            (Bound.NETWORK, self.network_s),
            key=lambda kv: kv[1],
        )
        return best[0]

    @property
    def network_latency_bound(self) -> bool:
        """Whether every collective of the estimate is latency-bound (False when it has none)."""
        colls = [t.collective for t in self.terms if t.collective is not None]
        return bool(colls) and all(c.bound == "latency" for c in colls)

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.hbm_bytes if self.hbm_bytes else float("inf")

    @property
    def shape_efficiency(self) -> float | None:
        """The matmul's shape efficiency on the matrix unit (cost/gemm.py) when the estimate is of one
        matmul on a chip with a shape model, whether or not it divided the compute term."""
        for t in self.terms:
            if isinstance(t.figures, FlopsFigures) and t.figures.shape_efficiency is not None:
                return t.figures.shape_efficiency
        return None


def flop_rate(chip: Chip, unit: str, dtype: str, eff: Efficiency = IDEAL) -> tuple[str, float, float]:
    """(dtype the chip runs it in, peak FLOP/s, FLOP/s reached = peak x the unit's efficiency, and on
    the matrix unit x the chip's achievable fraction when ``eff.matrix_achievable`` is on)."""
    used, peak = chip.flops_rate(dtype, unit)  # type: ignore[arg-type]
    if unit != "matrix":
        return used, peak, peak * eff.vector
    return used, peak, peak * eff.matrix * achievable(chip, used, eff)


def matrix_seconds(flops_by: Mapping[FlopsKey, float], chip: Chip) -> float:
    """The time the chip's matrix units (TPU MXUs, GPU Tensor Cores) need for the matrix FLOPs of
    ``flops_by`` at their peak: sum over dtypes of FLOPs / peak. Divided by an op's (or a step's) time it is
    the matrix-unit utilisation, xprof's "MXU utilization": the FLOPs over what the unit could have done."""
    return sum(f / chip.flops_rate(d, "matrix")[1] for (u, d), f in flops_by.items() if u == "matrix" and f)


def achievable(chip: Chip, used_dtype: str, eff: Efficiency) -> float:
    """The chip's achievable fraction of its ``used_dtype`` matrix peak when ``eff.matrix_achievable``
    is on, else 1."""
    return chip.achievable_fraction(used_dtype) if eff.matrix_achievable else 1.0


def hbm_rate(chip: Chip, eff: Efficiency = IDEAL) -> float:
    """HBM bytes/s reached: peak x efficiency."""
    return chip.hbm_bytes_per_s * eff.hbm


def compute_terms(cost: Cost, chip: Chip, eff: Efficiency = IDEAL) -> list[Term]:
    """One term per (unit, dtype): FLOPs / (peak x efficiency); a matmul's term also x 1 / its shape
    efficiency (cost/gemm.py) when ``eff.matrix_shape`` is on and the chip has a shape model (the
    figure is kept either way, ``shape_applied`` saying whether it divides)."""
    terms = []
    for (unit, dtype), flops in sorted(cost.flops_by.items()):
        used, peak, rate = flop_rate(chip, unit, dtype, eff)
        reach = achievable(chip, used, eff) if unit == "matrix" else 1.0
        figures = FlopsFigures(
            flops=flops,
            chip=chip.name,
            unit=unit,
            dtype=dtype,
            used_dtype=used,
            peak_flops_per_s=peak,
            efficiency=eff.matrix if unit == "matrix" else eff.vector,
            achievable_fraction=reach if reach != 1 else None,
        )
        if unit == "matrix" and cost.gemm is not None:
            from rooftop.cost.gemm import shape_efficiency

            shape = shape_efficiency(chip, cost.gemm, used)
            if shape is not None:
                applied = bool(eff.matrix_shape)
                rate *= shape if applied else 1.0
                figures = figures._replace(shape_efficiency=shape, gemm=cost.gemm.label(), shape_applied=applied)
        terms.append(Term(f"compute {unit} {dtype}", flops / rate, TermKind.COMPUTE, figures))
    return terms


def memory_term(hbm_bytes: float, chip: Chip, eff: Efficiency = IDEAL, name: str = "memory hbm") -> Term:
    figures = HbmFigures(bytes=hbm_bytes, chip=chip.name, hbm_bytes_per_s=chip.hbm_bytes_per_s, efficiency=eff.hbm)
    return Term(name, hbm_bytes / hbm_rate(chip, eff), TermKind.MEMORY, figures)


def host_term(nbytes: float, chip: Chip, name: str = "host link", what: str = "") -> Term:
    """Bytes over the chip's host link (PCIe or the TPU host interface), each way: bytes / host
    bytes/s (infinite when the chip file gives no host link)."""
    host = chip.host_bytes_per_s
    figures = HostFigures(bytes=nbytes, chip=chip.name, host_bytes_per_s=host, what=what)
    return Term(name, nbytes / host if host > 0 else float("inf"), TermKind.HOST, figures)


def collective_term(
    comm: Comm, mesh: Mesh, chip: Chip, eff: Efficiency = IDEAL, name: str = "", algorithm: Algorithm | None = None
) -> Term:
    """``comm.count`` x the time of one ``comm`` (cost/collectives.py, network efficiency applied there;
    ``algorithm``: how the library runs it, default hierarchical)."""
    from rooftop.cost.collectives import collective_time

    ct = collective_time(comm, mesh, chip, network_efficiency=eff.network, algorithm=algorithm)
    kind = TermKind.NETWORK if ct.bound == "bandwidth" else TermKind.LATENCY
    axes = ",".join(comm.axes)
    figures = CollectiveFigures(calls=comm.count, kind=comm.kind, axes=axes, bytes=comm.bytes)
    return Term(name or f"network {comm.kind} {axes}", comm.count * ct.time_s, kind, figures, ct)


def roofline(cost: Cost, chip: Chip, mesh: Mesh | None = None, efficiency: Efficiency = IDEAL) -> Estimate:
    """Time ``cost`` on ``chip``; collectives in the cost need the ``mesh`` they run on."""
    terms = compute_terms(cost, chip, efficiency)
    compute_s = sum(t.seconds for t in terms)
    mem = memory_term(cost.hbm_bytes, chip, efficiency)
    terms.append(mem)
    network_s = 0.0
    if cost.comms:
        if mesh is None:
            raise InvalidConfigError("this cost has collectives: give a topology and mesh to time them")
        for comm in cost.comms:
            term = collective_term(comm, mesh, chip, efficiency)
            network_s += term.seconds
            terms.append(term)
    critical = _critical_intensity(cost, chip)
    return Estimate(chip.name, cost.flops, cost.hbm_bytes, compute_s, mem.seconds, network_s, critical, tuple(terms))


def _critical_intensity(cost: Cost, chip: Chip) -> float:
    """The ridge point of the unit and dtype doing most of the cost's FLOPs (the matrix unit's when it
    has matrix FLOPs, as a matmul's few vector FLOPs do not move its ridge; the vector unit's for a
    vector-only cost; bf16 on the matrix unit for a cost with no FLOPs)."""
    for unit in ("matrix", "vector"):
        flops = {d: f for (u, d), f in cost.flops_by.items() if u == unit and f}
        if flops:
            dtype = max(flops, key=lambda d: flops[d])
            return chip.flops_rate(dtype, unit)[1] / chip.hbm_bytes_per_s
    return chip.critical_intensity("bf16")


# ---------------------------------------------------------------- the same formula over a table of ops


@dataclass(frozen=True)
class RooflineTable:
    """Per-op (x variant) seconds: ``compute_s``, ``memory_s`` and ``time_s`` = their max."""

    compute_s: np.ndarray
    memory_s: np.ndarray

    @property
    def time_s(self) -> np.ndarray:
        import numpy as np

        time_s: np.ndarray = np.maximum(self.compute_s, self.memory_s)
        return time_s

    @property
    def compute_bound(self) -> np.ndarray:
        """Ops whose compute term is at least their memory term (ties go to compute, as Estimate.bound)."""
        return self.compute_s >= self.memory_s


def flops_table(costs: Sequence[Cost]) -> tuple[tuple[FlopsKey, ...], np.ndarray]:
    """(keys, FLOPs): one row per cost, one column per (unit, dtype) key that any cost uses."""
    import numpy as np

    keys = tuple(sorted({k for c in costs for k in c.flops_by}))
    index = {k: j for j, k in enumerate(keys)}
    table = np.zeros((len(costs), len(keys)))
    for i, c in enumerate(costs):
        for k, v in c.flops_by.items():
            table[i, index[k]] = v
    return keys, table


def seconds_per_flop(keys: Sequence[FlopsKey], chip: Chip, eff: Efficiency = IDEAL) -> np.ndarray:
    """1 / (peak x efficiency) of each (unit, dtype) key, as ``roofline`` prices it."""
    import numpy as np

    return np.array([1.0 / flop_rate(chip, unit, dtype, eff)[2] for unit, dtype in keys])


def roofline_table(
    flops: np.ndarray,
    keys: Sequence[FlopsKey],
    hbm_bytes: np.ndarray,
    chip: Chip,
    eff: Efficiency = IDEAL,
    shape: np.ndarray | None = None,
) -> RooflineTable:
    """``roofline`` of many ops at once: ``flops`` has the (unit, dtype) ``keys`` as its LAST axis
    (ops x keys, or ops x variants x keys), ``hbm_bytes`` the op (x variant) shape. compute_s =
    sum over keys of FLOPs / (peak x efficiency), the matrix keys' also / ``shape`` (each op's
    matmul shape efficiency, cost/gemm.py; the op shape); memory_s = bytes / (HBM x efficiency)."""
    import numpy as np

    table = np.asarray(flops, dtype=float)
    if shape is not None and len(keys):
        matrix = np.array([unit == "matrix" for unit, _ in keys])
        scale = np.where(matrix, 1.0 / np.asarray(shape, dtype=float)[..., None], 1.0)
        table = table * scale
    compute = table @ seconds_per_flop(keys, chip, eff) if len(keys) else 0.0
    memory = np.asarray(hbm_bytes, dtype=float) / hbm_rate(chip, eff)
    compute_arr = np.broadcast_to(np.asarray(compute, dtype=float), np.shape(memory)).copy()
    return RooflineTable(compute_arr, memory)
