"""Efficiency: the one type of every factor that separates a roofline from a real run.

Every planner and every analysis reads the same fields:

- fractions of peak reached: ``matrix``, ``vector`` (FLOP/s of each compute unit), ``hbm``
  (bytes/s of HBM), ``network`` (bytes/s of links; divides only a collective's bandwidth
  term, in cost/collectives.py);
- fractions of communication hidden behind compute in a training step: ``tp_overlap``,
  ``dp_overlap``, ``fsdp_overlap``, ``ep_overlap`` (plan/train/step.py: compute hides communication at
  most once);
- HBM headroom: ``memory_reserve``, the fraction of HBM kept free for the framework,
  fragmentation and temporaries (serving's ``usable_hbm_fraction`` is 1 - memory_reserve);
- fixed costs of a serving step: ``kernel_s`` per kernel, ``kernels_per_layer``, ``step_s``;
  host costs that grow with the batch: ``step_per_seq_s`` per sequence of a step (scheduling,
  sampling, output processing), and ``kernel_eager_s``, the host's time to issue one kernel
  when the step does not run as a captured CUDA graph (steps of more than ``graph_max_batch``
  tokens; ``graph_max_batch=0``: no graphs);
- ``matrix_shape``: 1 prices how each matmul's shape uses the matrix unit (tile and wave
  quantization, cost/gemm.py) on top of ``matrix``, 0 leaves ``matrix`` alone for every matmul;
- ``matrix_achievable``: 1 caps the matrix peak at what the chip's best large matmul measurably
  sustains (the chip file's ``matrix_achievable``, e.g. 0.80 of the datasheet on an H100 SXM), so
  ``matrix`` is then the fraction of that ceiling a whole run reaches; 0 uses the datasheet.

``Efficiency()`` (``IDEAL``) is the pure roofline: every fraction 1, communication hidden
where the step allows it (FSDP and data-parallel traffic behind compute, none for TP), no
headroom and no fixed costs. The documented defaults of each planner are data files
(catalog/efficiency/training.toml, serving.toml), every figure with its source; one loader
(``default_efficiency``) and one parser of user overrides (``parse_efficiency``) serve both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from rooftop.catalog.io import builtin_toml
from rooftop.errors import InvalidConfigError, shown
from rooftop.units import parse_real

PEAK_FRACTIONS = ("matrix", "vector", "hbm", "network")
OVERLAPS = ("tp_overlap", "dp_overlap", "fsdp_overlap", "ep_overlap")
OVERHEADS = ("kernel_s", "kernels_per_layer", "step_s", "step_per_seq_s", "kernel_eager_s", "graph_max_batch")
SWITCHES = ("matrix_shape", "matrix_achievable")  # 0 or 1
#: other spellings accepted by ``parse_efficiency`` (name -> (field, value -> field value))
ALIASES: dict[str, tuple[str, Callable[[float], float]]] = {
    "usable_hbm_fraction": ("memory_reserve", lambda v: 1.0 - v)
}
PURPOSES = ("training", "serving")
#: upper bounds of the fixed costs: far above any real stack, low enough that a serving sweep's
#: times and token rates stay finite (a kernel launch is microseconds, a step's overhead milliseconds)
OVERHEAD_LIMITS = {
    "kernel_s": 1.0,
    "kernels_per_layer": 1e6,
    "step_s": 3600.0,
    "step_per_seq_s": 1.0,
    "kernel_eager_s": 1.0,
    "graph_max_batch": 1e9,
}


@dataclass(frozen=True)
class Efficiency:
    """Fractions of peak, overlap fractions, HBM headroom and fixed costs (module docstring).
    ``sources`` maps a factor to (source, note) when it came from a data file."""

    matrix: float = 1.0
    vector: float = 1.0
    hbm: float = 1.0
    network: float = 1.0
    tp_overlap: float = 0.0
    dp_overlap: float = 1.0
    fsdp_overlap: float = 1.0
    ep_overlap: float = 0.0
    memory_reserve: float = 0.0
    kernel_s: float = 0.0
    kernels_per_layer: float = 0.0
    step_s: float = 0.0
    step_per_seq_s: float = 0.0
    kernel_eager_s: float = 0.0
    graph_max_batch: float = 0.0
    matrix_shape: float = 0.0
    matrix_achievable: float = 0.0
    sources: Mapping[str, tuple[str, str]] = field(default_factory=lambda: MappingProxyType({}), compare=False)

    def __post_init__(self) -> None:
        for name in PEAK_FRACTIONS:
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise InvalidConfigError(f"efficiency {name}={v} must be in (0, 1]")
        for name in OVERLAPS:
            v = getattr(self, name)
            if not 0 <= v <= 1:
                raise InvalidConfigError(f"efficiency {name}={v} must be in [0, 1]")
        if not 0 <= self.memory_reserve < 1:
            raise InvalidConfigError(
                f"efficiency memory_reserve={self.memory_reserve} must be in [0, 1) "
                "(usable_hbm_fraction = 1 - memory_reserve must be in (0, 1])"
            )
        for name in OVERHEADS:
            v = getattr(self, name)
            if not 0 <= v <= OVERHEAD_LIMITS[name]:
                raise InvalidConfigError(f"overhead {name}={v} must be in [0, {OVERHEAD_LIMITS[name]:g}]")
        for name in SWITCHES:
            if getattr(self, name) not in (0.0, 1.0):
                raise InvalidConfigError(f"efficiency {name}={getattr(self, name)} must be 0 (off) or 1 (on)")

    @property
    def usable_hbm_fraction(self) -> float:
        """Fraction of HBM that weights, state, activations and KV cache may fill."""
        return 1.0 - self.memory_reserve

    @property
    def is_ideal(self) -> bool:
        return (
            all(getattr(self, name) == 1.0 for name in PEAK_FRACTIONS)
            and not self.matrix_shape
            and not self.matrix_achievable
        )

    def replace(self, **changes: float) -> Efficiency:
        names = factor_names()
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise InvalidConfigError(f"unknown efficiency factor {shown(unknown[0])} (valid: {', '.join(names)})")
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]  # factors are floats, checked above

    def as_dict(self) -> dict[str, Any]:
        """Every factor (and ``usable_hbm_fraction``) with the sources of the defaults used."""
        out: dict[str, Any] = {name: getattr(self, name) for name in factor_names()}
        out["usable_hbm_fraction"] = self.usable_hbm_fraction
        out["sources"] = {k: {"source": s, "note": n} for k, (s, n) in self.sources.items()}
        return out


IDEAL = Efficiency()


def factor_names() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(Efficiency) if f.name != "sources")


def _figure(table: Mapping[str, Any], key: str, where: str) -> tuple[float, str, str]:
    node = table.get(key)
    if not isinstance(node, Mapping) or "value" not in node or not node.get("source"):
        raise InvalidConfigError(f'{where}: {key} must be a table {{value = ..., source = "..."}}')
    return float(node["value"]), str(node["source"]), str(node.get("note", ""))


@lru_cache(maxsize=16)
def default_efficiency(purpose: str, chip_kind: str = "gpu") -> Efficiency:
    """The documented defaults of a planner: ``purpose`` "training" or "serving"; serving's
    fixed costs depend on the software stack, so on the chip kind ("gpu", "tpu"; other kinds
    use the file's "default" overheads). Factors a file leaves out keep the ideal value."""
    if purpose not in PURPOSES:
        raise InvalidConfigError(f"unknown efficiency purpose {purpose!r} (valid: {', '.join(PURPOSES)})")
    where = f"catalog/efficiency/{purpose}.toml"
    data = builtin_toml("efficiency", f"{purpose}.toml")
    sections = [data.get("factors", {}), data.get("efficiency", {}), data.get("counts", {}), data.get("memory", {})]
    overheads = data.get("overheads", {})
    if overheads:
        sections.append(overheads[chip_kind if chip_kind in overheads else "default"])
    values: dict[str, float] = {}
    sources: dict[str, tuple[str, str]] = {}
    for section in sections:
        for key in section:
            value, source, note = _figure(section, key, where)
            name, convert = ALIASES.get(key, (key, lambda v: v))
            values[name] = convert(value)
            sources[name] = (source, note)
            if key != name:  # also under the name the file uses (serving's usable_hbm_fraction)
                sources[key] = (source, note)
    unknown = sorted(set(values) - set(factor_names()))
    if unknown:
        raise InvalidConfigError(f"{where}: unknown factor {unknown[0]!r}")
    return Efficiency(**values, sources=MappingProxyType(sources))


def parse_efficiency(text: str, base: Efficiency) -> Efficiency:
    """ "matrix=0.7,hbm=0.9,step_s=0.002" applied over ``base`` (``usable_hbm_fraction=0.9`` is
    read as ``memory_reserve=0.1``)."""
    changes: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise InvalidConfigError(f"cannot read efficiency {shown(part)}: expected NAME=VALUE, e.g. matrix=0.7")
        key, value = (s.strip() for s in part.split("=", 1))
        number = parse_real(value, f"efficiency {shown(key)}")  # ASCII digits; no nan, inf or 1e400
        name, convert = ALIASES.get(key, (key, float))
        changes[name] = convert(number)
    return base.replace(**changes)
