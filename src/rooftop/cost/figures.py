"""The figures a Term records, one type per rule: what report/formulas.py writes each formula from.

Each rule's figures are a ``NamedTuple``, so the type checker sees both sides of a Term: a producer that
leaves a figure out or misspells its name fails to construct it (``FlopsFigures(flop=...)``: unexpected
keyword), and a reader that asks for a figure the rule does not record fails to read it
(``f.peak_flops``: no attribute), each caught by mypy before anything runs. A reader narrows a Term's
figures by their type (``isinstance``, ``match``, or ``figures_of(term, FlopsFigures)``); the rule's name
is the type's (``RULES``), so a Term's rule and figures cannot disagree.

NamedTuples rather than dataclasses: Terms are built in the serving planner's inner loops (16,000 in one
plan of a mixtral-8x7b rate scenario), and a NamedTuple costs about what the (name, value) pairs it
replaces did, pickles (Terms cross process boundaries) and compares by value. Figures that only some Terms
of a rule carry default to None ("not recorded"). Numbers and names only: no sentence is written here.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypeVar


class RoutingFigures(NamedTuple):
    """A routed-expert step's busiest expert and chip (plan/serve/phase.py), kept on its matmul terms:
    tokens routed, experts they touch, rows of the mean and of the busiest expert, and with expert
    parallelism the experts and the rows factor of the busiest chip."""

    routed_tokens: float
    experts_touched: float
    expert_mean_rows: float
    expert_busiest_rows: float
    ep: int | None = None
    busiest_chip_experts: float | None = None
    busiest_chip_rows_factor: float | None = None


class FlopsFigures(NamedTuple):
    """Rule "flops": FLOPs / (peak x efficiency [x achievable fraction] [x shape efficiency]).
    ``achievable_fraction`` is recorded when it is not 1; the shape figures when the chip has a shape
    model for the matmul, ``shape_applied`` saying whether the shape efficiency divides the time."""

    flops: float
    chip: str
    unit: str
    dtype: str
    used_dtype: str
    peak_flops_per_s: float
    efficiency: float
    achievable_fraction: float | None = None
    shape_efficiency: float | None = None
    gemm: str | None = None
    shape_applied: bool = False
    routing: RoutingFigures | None = None


class HbmFigures(NamedTuple):
    """Rule "hbm": bytes / (HBM bytes/s x efficiency)."""

    bytes: float
    chip: str
    hbm_bytes_per_s: float
    efficiency: float
    routing: RoutingFigures | None = None


class HostFigures(NamedTuple):
    """Rule "host": bytes / the host link's bytes/s; ``what`` the bytes are."""

    bytes: float
    chip: str
    host_bytes_per_s: float
    what: str = ""


class CollectiveFigures(NamedTuple):
    """Rule "collective": ``calls`` x one collective's time (the Term's ``collective`` holds it)."""

    calls: float
    kind: str
    axes: str
    bytes: float


class OpsComputeFigures(NamedTuple):
    """Rule "ops", the compute-bound ops of a step: their FLOPs at the rate they reach, summed over
    ``microbatches`` when given, with the matmuls' shape efficiency when the chip has a shape model."""

    ops: float
    flops: float
    flops_per_s: float
    chip: str
    efficiency: float
    achievable_fraction: float
    microbatches: int | None = None
    shape_efficiency: float | None = None


class OpsMemoryFigures(NamedTuple):
    """Rule "ops", the memory-bound ops of a step: their bytes / (HBM bytes/s x efficiency), summed over
    ``microbatches`` when given."""

    ops: float
    bytes: float
    chip: str
    hbm_bytes_per_s: float
    efficiency: float
    microbatches: int | None = None


class HiddenFigures(NamedTuple):
    """Rule "hidden": the communication hidden behind ``cover``; ``rule`` the hiding rule's template (its
    ``{overlap}`` the overlap), None for a training step's per-layer rule."""

    communication_s: float
    cover: str
    overlap: float
    rule: str | None = None


class BubbleFigures(NamedTuple):
    """Rule "bubble": (p-1)/v x microbatch time."""

    pp: int
    virtual_stages: int
    microbatch_s: float


class LaunchFigures(NamedTuple):
    """Rule "launch": layers x kernels per layer x seconds per kernel."""

    layers: int
    kernels_per_layer: float
    kernel_s: float


class PerStepFigures(NamedTuple):
    """Rule "per_step": the engine's fixed host work per step."""

    step_s: float


class PerSeqFigures(NamedTuple):
    """Rule "per_seq": sequences x host work per running sequence."""

    step_per_seq_s: float
    sequences: int


class EagerFigures(NamedTuple):
    """Rule "eager": kernels x the host's time to issue one, for a step above the captured graphs' batch."""

    kernels: float
    kernel_eager_s: float
    graph_max_batch: float


class SyncFigures(NamedTuple):
    """Rule "sync": sends/receives x the framework's host synchronisation each."""

    calls: float
    seconds_each: float
    framework: str


class ContentionFigures(NamedTuple):
    """Rule "contention": collectives' seconds hidden behind compute x the compute seconds lost per second."""

    hidden_s: float
    overlap_cost: float
    framework: str


Figures = (
    FlopsFigures
    | HbmFigures
    | HostFigures
    | CollectiveFigures
    | OpsComputeFigures
    | OpsMemoryFigures
    | HiddenFigures
    | BubbleFigures
    | LaunchFigures
    | PerStepFigures
    | PerSeqFigures
    | EagerFigures
    | SyncFigures
    | ContentionFigures
)

#: each figures type's rule: the name report/formulas.py and the JSON-facing code know a Term's formula by
RULES: dict[type[Any], str] = {
    FlopsFigures: "flops",
    HbmFigures: "hbm",
    HostFigures: "host",
    CollectiveFigures: "collective",
    OpsComputeFigures: "ops",
    OpsMemoryFigures: "ops",
    HiddenFigures: "hidden",
    BubbleFigures: "bubble",
    LaunchFigures: "launch",
    PerStepFigures: "per_step",
    PerSeqFigures: "per_seq",
    EagerFigures: "eager",
    SyncFigures: "sync",
    ContentionFigures: "contention",
}

F = TypeVar(
    "F",
    FlopsFigures,
    HbmFigures,
    HostFigures,
    CollectiveFigures,
    OpsComputeFigures,
    OpsMemoryFigures,
    HiddenFigures,
    BubbleFigures,
    LaunchFigures,
    PerStepFigures,
    PerSeqFigures,
    EagerFigures,
    SyncFigures,
    ContentionFigures,
)


def with_routing(figures: Figures, routing: RoutingFigures | None) -> Figures:
    """``figures`` with a routed step's ``routing`` figures kept on them when they are a flops or hbm
    term's (a matmul group's), else unchanged."""
    if routing is None or not isinstance(figures, FlopsFigures | HbmFigures):
        return figures
    return figures._replace(routing=routing)


def recorded(figures: Figures) -> tuple[tuple[str, Any], ...]:
    """The (name, value) pairs of the figures a Term recorded, nested ones (routing) flattened and the
    figures it did not record (None) left out: for ``Term.figure`` and for people reading a Term."""
    out: list[tuple[str, Any]] = []
    for name, value in zip(figures._fields, figures, strict=True):
        if isinstance(value, RoutingFigures):
            out += [(k, v) for k, v in zip(value._fields, value, strict=True) if v is not None]
        elif value is not None:
            out.append((name, value))
    return tuple(out)
