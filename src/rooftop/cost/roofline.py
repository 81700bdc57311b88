"""Roofline: a Cost on a Chip (and, for collectives, a Mesh) becomes an Estimate.

    compute_s = sum over (unit, dtype) of FLOPs / (peak FLOPs/s x efficiency)
    memory_s  = HBM bytes / (HBM bytes/s x efficiency)
    network_s = sum of collective times (cost/collectives.py)
    lower bound = max(compute_s, memory_s, network_s)   (perfect overlap)
    upper bound = sum(...)                              (no overlap)

(Williams, Waterman & Patterson 2009, "Roofline"; How to Scale Your Model, Part 1.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rooftop.cost.cost import Cost
from rooftop.errors import InvalidConfigError
from rooftop.hardware.chip import Chip
from rooftop.units import format_bytes, format_number, format_rate

if TYPE_CHECKING:
    from rooftop.hardware.topology import Mesh


@dataclass(frozen=True)
class Efficiency:
    """Fractions of peak actually reached. 1.0 everywhere is the ideal roofline."""

    matrix: float = 1.0
    vector: float = 1.0
    hbm: float = 1.0
    network: float = 1.0

    def __post_init__(self) -> None:
        for name in ("matrix", "vector", "hbm", "network"):
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise InvalidConfigError(f"efficiency {name}={v} must be in (0, 1]")

    @property
    def is_ideal(self) -> bool:
        return self.matrix == self.vector == self.hbm == self.network == 1.0


IDEAL = Efficiency()


@dataclass(frozen=True)
class Term:
    """One time term and the figures it came from."""

    name: str
    seconds: float
    formula: str


@dataclass(frozen=True)
class Estimate:
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
    def bound(self) -> str:
        """Which term dominates: "compute", "memory" or "network" (ties go to compute)."""
        best = max(
            ("compute", self.compute_s), ("memory", self.memory_s), ("network", self.network_s), key=lambda kv: kv[1]
        )
        return best[0]

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.hbm_bytes if self.hbm_bytes else float("inf")


def compute_terms(cost: Cost, chip: Chip, eff: Efficiency = IDEAL) -> list[Term]:
    terms = []
    for (unit, dtype), flops in sorted(cost.flops_by.items()):
        used, rate = chip.flops_rate(dtype, unit)  # type: ignore[arg-type]
        factor = eff.matrix if unit == "matrix" else eff.vector
        note = f" ({dtype} runs at {used} peak)" if used != dtype else ""
        eff_txt = f" x {factor:g}" if factor != 1 else ""
        terms.append(
            Term(
                f"compute {unit} {dtype}",
                flops / (rate * factor),
                f"{format_number(flops, 'FLOP')} / ({chip.name} {unit} {used} "
                f"{format_rate(rate, 'FLOP/s')}{eff_txt}){note}",
            )
        )
    return terms


def roofline(cost: Cost, chip: Chip, mesh: Mesh | None = None, efficiency: Efficiency = IDEAL) -> Estimate:
    """Time ``cost`` on ``chip``; collectives in the cost need the ``mesh`` they run on."""
    terms = compute_terms(cost, chip, efficiency)
    compute_s = sum(t.seconds for t in terms)
    memory_s = cost.hbm_bytes / (chip.hbm_bytes_per_s * efficiency.hbm)
    eff_txt = f" x {efficiency.hbm:g}" if efficiency.hbm != 1 else ""
    terms.append(
        Term(
            "memory hbm",
            memory_s,
            f"{format_bytes(cost.hbm_bytes)} / ({chip.name} HBM {format_rate(chip.hbm_bytes_per_s)}{eff_txt})",
        )
    )
    network_s = 0.0
    if cost.comms:
        if mesh is None:
            raise InvalidConfigError("this cost has collectives: give a topology and mesh to time them")
        from rooftop.cost.collectives import collective_time

        for comm in cost.comms:
            ct = collective_time(comm, mesh, chip)
            t = ct.time_s * comm.count / efficiency.network
            network_s += t
            terms.append(Term(f"network {comm.kind} {','.join(comm.axes)}", t, ct.formula))
    dtype = _dominant_dtype(cost)
    critical = chip.critical_intensity(dtype) if dtype else chip.critical_intensity("bf16")
    return Estimate(chip.name, cost.flops, cost.hbm_bytes, compute_s, memory_s, network_s, critical, tuple(terms))


def _dominant_dtype(cost: Cost) -> str | None:
    matrix = {d: f for (u, d), f in cost.flops_by.items() if u == "matrix"}
    if not matrix:
        return None
    return max(matrix, key=lambda d: matrix[d])
