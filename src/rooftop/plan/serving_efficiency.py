"""Efficiency and overhead factors of the serving planner: explicit inputs with documented defaults.

The defaults live in ``catalog/efficiency/serving.toml`` (one set for every run, each figure with
its source; overheads per chip kind because they belong to the software stack). ``IDEAL_SERVING``
is the pure roofline: every fraction 1, no fixed costs, all of HBM usable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from rooftop.catalog.io import builtin_toml
from rooftop.cost.roofline import Efficiency
from rooftop.errors import InvalidConfigError

_FRACTIONS = ("matrix", "vector", "hbm", "network", "usable_hbm_fraction")


@dataclass(frozen=True)
class ServingEfficiency:
    """Fractions of peak (``matrix``, ``vector``, ``hbm``, ``network``), fixed costs of a step
    (``kernel_s`` per kernel, ``kernels_per_layer``, ``step_s`` per step) and the fraction of HBM
    the weights and KV cache may use. ``sources`` maps each factor to (source, note)."""

    matrix: float = 1.0
    vector: float = 1.0
    hbm: float = 1.0
    network: float = 1.0
    kernel_s: float = 0.0
    kernels_per_layer: float = 0.0
    step_s: float = 0.0
    usable_hbm_fraction: float = 1.0
    sources: Mapping[str, tuple[str, str]] = field(default_factory=lambda: MappingProxyType({}), compare=False)

    def __post_init__(self) -> None:
        for name in _FRACTIONS:
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise InvalidConfigError(f"serving efficiency {name}={v} must be in (0, 1]")
        for name in ("kernel_s", "kernels_per_layer", "step_s"):
            if getattr(self, name) < 0:
                raise InvalidConfigError(f"serving overhead {name}={getattr(self, name)} must be >= 0")

    @property
    def roofline(self) -> Efficiency:
        return Efficiency(self.matrix, self.vector, self.hbm, self.network)

    def replace(self, **changes: float) -> ServingEfficiency:
        names = [f.name for f in dataclasses.fields(self) if f.name != "sources"]
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise InvalidConfigError(f"unknown serving factor {unknown[0]!r} (valid: {', '.join(names)})")
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "sources"}
        out["sources"] = {k: {"source": s, "note": n} for k, (s, n) in self.sources.items()}
        return out


IDEAL_SERVING = ServingEfficiency()


def _figure(table: Mapping[str, Any], key: str, where: str) -> tuple[float, str, str]:
    node = table.get(key)
    if not isinstance(node, Mapping) or "value" not in node or not node.get("source"):
        raise InvalidConfigError(f'{where}: {key} must be a table {{value = ..., source = "..."}}')
    return float(node["value"]), str(node["source"]), str(node.get("note", ""))


@lru_cache(maxsize=8)
def default_serving_efficiency(chip_kind: str = "gpu") -> ServingEfficiency:
    """The documented defaults for a chip kind ("gpu", "tpu"; others use "default" overheads)."""
    where = "catalog/efficiency/serving.toml"
    data = builtin_toml("efficiency", "serving.toml")
    overheads = data["overheads"]
    kind = chip_kind if chip_kind in overheads else "default"
    values: dict[str, float] = {}
    sources: dict[str, tuple[str, str]] = {}
    for section, keys in (
        (data["efficiency"], ("matrix", "vector", "hbm", "network")),
        (data["counts"], ("kernels_per_layer",)),
        (overheads[kind], ("kernel_s", "step_s")),
        (data["memory"], ("usable_hbm_fraction",)),
    ):
        for key in keys:
            value, source, note = _figure(section, key, where)
            values[key] = value
            sources[key] = (source, note)
    return ServingEfficiency(**values, sources=MappingProxyType(sources))


def parse_serving_efficiency(text: str, base: ServingEfficiency) -> ServingEfficiency:
    """ "hbm=0.9,step_s=0.002" applied over ``base``."""
    changes: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise InvalidConfigError(f"cannot read serving factor {part!r}: expected NAME=VALUE, e.g. hbm=0.9")
        key, value = (s.strip() for s in part.split("=", 1))
        try:
            changes[key] = float(value)
        except ValueError:
            raise InvalidConfigError(f"serving factor {key}={value!r} is not a number") from None
    return base.replace(**changes)
