"""How much of a profile the report explains: the share of the measured op time that has a roofline (priced)
and the rest, the share replayed from CUDA/HIP graphs, and the share of the steps' time the devices sat idle.
Figures of a :class:`~rooftop.analysis.compare.ProfileReport`, so every profile format gets the same."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rooftop.analysis.compare import OpReport, ProfileReport
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason

#: the suffix of a report row of replayed kernels attributed from a capture trace (analysis/torch/kineto.py)
_REPLAYED_ROW = "(graph replay)"


@dataclass(frozen=True)
class Coverage:
    """Shares in [0, 1] (None when the profile has no op time or no steps)."""

    priced: float | None
    unpriced: float | None
    graph_replayed: float | None
    idle: float | None

    def reason(self) -> Reason:
        """The note a report opens with (report/reasons.py writes it)."""
        return Reason.of(ReasonCode.COVERAGE, priced=self.priced, unpriced=self.unpriced,
                         graph_replayed=self.graph_replayed, idle=self.idle)  # fmt: skip

    def payload(self) -> dict[str, float | None]:
        return {"priced_fraction": self.priced, "unpriced_fraction": self.unpriced,
                "graph_replayed_fraction": self.graph_replayed, "idle_fraction": self.idle}  # fmt: skip


def replayed(op: OpReport) -> bool:
    """Whether the op's time was replayed from a CUDA/HIP graph (attributed from a capture or not)."""
    first = op.why[0] if op.why else None  # the reason an op has no cost (analysis/torch/launches.py)
    return op.name.endswith(_REPLAYED_ROW) or (
        isinstance(first, Reason) and first.code is ReasonCode.KERNEL_GRAPH_REPLAYED
    )


def coverage(report: ProfileReport) -> Coverage:
    """The shares of ``report`` (module docstring)."""
    total = math.fsum(o.total_s for o in report.ops)
    priced = report.priced_fraction()
    graph = math.fsum(o.total_s for o in report.ops if replayed(o)) / total if total > 0 else None
    span = math.fsum(s.duration_s for s in report.steps)
    idle = math.fsum(s.idle_s for s in report.steps) / span if span > 0 else None
    return Coverage(priced, None if priced is None else 1.0 - priced, graph, idle)
