"""Efficiency factors of the planners: explicit inputs with documented defaults.

The defaults live in ``catalog/efficiency/training.toml`` (one set for all runs, each with
its source or fitting note). Results are given twice: "ideal" (every factor 1, overlap
perfect, no reserve) and "with efficiency" (the defaults, or what the user passes).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache

from rooftop.catalog.io import builtin_toml
from rooftop.cost.roofline import Efficiency
from rooftop.errors import InvalidConfigError


@dataclass(frozen=True)
class TrainingEfficiency:
    """Fractions of peak (matrix, vector, hbm, network), the fraction of each strategy's
    communication hidden behind compute (tp_overlap, dp_overlap, fsdp_overlap) and the
    fraction of HBM kept free (memory_reserve)."""

    matrix: float = 1.0
    vector: float = 1.0
    hbm: float = 1.0
    network: float = 1.0
    tp_overlap: float = 0.0
    dp_overlap: float = 1.0
    fsdp_overlap: float = 1.0
    memory_reserve: float = 0.0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            lo = 0.0 if f.name.endswith(("overlap", "reserve")) else 1e-6
            if not lo <= v <= 1.0:
                raise InvalidConfigError(f"efficiency {f.name}={v} must be in [{lo:g}, 1]")

    @property
    def roofline(self) -> Efficiency:
        return Efficiency(self.matrix, self.vector, self.hbm, self.network)

    def replace(self, **changes: float) -> TrainingEfficiency:
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            names = ", ".join(f.name for f in dataclasses.fields(self))
            raise InvalidConfigError(f"unknown efficiency factor {sorted(unknown)[0]!r} (valid: {names})")
        return dataclasses.replace(self, **changes)


IDEAL_TRAINING = TrainingEfficiency(dp_overlap=1.0, fsdp_overlap=1.0, tp_overlap=0.0)


@lru_cache(maxsize=1)
def default_training_efficiency() -> TrainingEfficiency:
    factors = builtin_toml("efficiency", "training.toml")["factors"]
    return TrainingEfficiency(**{k: float(v["value"]) for k, v in factors.items()})


def parse_efficiency(text: str, base: TrainingEfficiency) -> TrainingEfficiency:
    """ "matrix=0.7,hbm=0.9" applied over ``base``."""
    changes: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise InvalidConfigError(f"cannot read efficiency {part!r}: expected NAME=VALUE, e.g. matrix=0.7")
        k, v = (s.strip() for s in part.split("=", 1))
        try:
            changes[k] = float(v)
        except ValueError:
            raise InvalidConfigError(f"efficiency {k}={v!r} is not a number") from None
    return base.replace(**changes)
