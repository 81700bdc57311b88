"""The values of ``rooftop limits`` (``JobLimits``, one ``Limit`` per threshold) and the sets of
physical dims its thresholds are priced over (``AxisSet``: a collective over them priced by
cost/collectives.py). The thresholds themselves are plan/limits.py's; report/limits.py writes them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rooftop.cost.algorithms import Algorithm
from rooftop.cost.collectives import Rate, collective_rate
from rooftop.cost.efficiency import Efficiency
from rooftop.cost.groups import Group, mesh_groups
from rooftop.hardware.topology import Mesh
from rooftop.plan.train.step import TrainingSetup


@dataclass(frozen=True)
class AxisSet:
    """Physical dims of the topology that a data or model axis may span: their default mesh axes
    (one per dim: X, Y, Z or dcn / fabric / nvlink), chips, link groups (cost/collectives.py) and the
    all-gather bandwidth term per gathered byte (network efficiency applied)."""

    name: str
    axes: tuple[str, ...]
    chips: int
    groups: tuple[Group, ...]
    gather_s_per_byte: float

    @property
    def gather_bytes_per_s(self) -> float:
        """W: bandwidth per chip of an all-gather over the set, (N-1)/N x V / t(V). k wrapped ICI
        rings give 2 x link x k (the book's bidirectional W_ici x n_axes), a switched level its
        per-chip bandwidth."""
        return (self.chips - 1) / self.chips / self.gather_s_per_byte


@dataclass(frozen=True)
class Limit:
    """One threshold: ``value`` priced through the cost core, ``book_value`` the book's closed form
    with the same figures (None where the book gives none), ``figures`` every number it used
    (symbol -> value); ``job`` the job's own figure it is compared with and ``met`` whether the
    job is on the good side (None without one)."""

    name: str
    rule: str
    value: float
    book_value: float | None
    unit: str
    axes: str = ""
    figures: tuple[tuple[str, float], ...] = ()
    job: float | None = None
    met: bool | None = None

    def figure(self, key: str) -> float:
        for k, v in self.figures:
            if k == key:
                return v
        raise KeyError(key)


@dataclass(frozen=True)
class JobLimits:
    """The thresholds of one job: ``setup`` holds the model, chip, topology, efficiency and
    precision; ``flops_per_s`` is C (matrix peak x efficiency in the activation dtype);
    ``f_active`` / ``f_weights`` the MLP widths a token runs through / a layer stores (F and F for a
    dense model; (k + shared) F_e and (E + shared) F_e for an MoE layer)."""

    setup: TrainingSetup
    batch_tokens: int | None
    seq_len: int | None
    weight_dtype: str
    flops_per_s: float
    f_active: float
    f_weights: float
    axis_sets: tuple[AxisSet, ...]
    limits: tuple[Limit, ...] = field(default=())
    algorithm: Algorithm | None = None  # how the collectives run (cost/algorithms.py; None: hierarchical)

    @property
    def batch_sequences(self) -> int | None:
        return None if self.batch_tokens is None else self.setup.global_batch

    @property
    def tokens_per_chip(self) -> float | None:
        return None if self.batch_tokens is None else self.batch_tokens / self.setup.chips

    def limit(self, name: str, axes: str = "") -> Limit:
        """The limit called ``name`` (over ``axes`` for the per-axis ones)."""
        for lim in self.limits:
            if lim.name == name and lim.axes == axes:
                return lim
        raise KeyError(f"{name} over {axes!r}")


def axes_rate(
    kind: str, mesh: Mesh, axes: tuple[str, ...], eff: Efficiency, algorithm: Algorithm | None = None
) -> Rate:
    """A ``kind`` collective over ``axes`` under ``algorithm`` in closed form (cost/collectives.Rate:
    seconds per byte, latency); nothing moves when the axes have 1 chip."""
    axes = tuple(a for a in axes if a in mesh.shape and mesh.shape[a] > 1)
    if not axes:
        return Rate(0.0, 0.0)
    return collective_rate(kind, axes, mesh, network_efficiency=eff.network, algorithm=algorithm)


def _per_byte(kind: str, mesh: Mesh, axes: tuple[str, ...], eff: Efficiency, algorithm: Algorithm | None) -> float:
    """Bandwidth seconds per byte of a ``kind`` collective over ``axes`` (0 when they have 1 chip)."""
    return axes_rate(kind, mesh, axes, eff, algorithm).per_byte_s


def axis_set(mesh: Mesh, axes: tuple[str, ...], eff: Efficiency, algorithm: Algorithm | None = None) -> AxisSet:
    """The AxisSet of ``axes`` of ``mesh`` (its all-gathers run by ``algorithm``, default hierarchical)."""
    groups = mesh_groups(mesh, axes)
    w = _per_byte("all-gather", mesh, axes, eff, algorithm)
    return AxisSet("+".join(axes), axes, mesh.size(axes), groups, w)


def axis_sets(mesh: Mesh, eff: Efficiency, algorithm: Algorithm | None = None) -> tuple[AxisSet, ...]:
    """Each physical dim alone, then the innermost two, three, ... up to all of them together."""
    names = [a.name for a in mesh.axes if a.size > 1]
    picks = [(n,) for n in names] + [tuple(names[-k:]) for k in range(2, len(names) + 1)]
    return tuple(axis_set(mesh, p, eff, algorithm) for p in picks)
