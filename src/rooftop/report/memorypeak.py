"""Memory at the peak (analysis/hlo/liveness.py): the ``memory_peak`` payload and its table."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from rooftop.report.reasons import note_texts
from rooftop.report.table import say, table
from rooftop.units import format_bytes

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.analysis.hlo.liveness import MemoryPeak


def peak_payload(peak: MemoryPeak, measured: float | None = None) -> dict[str, Any]:
    """The ``memory_peak`` key of ``rooftop hlo --memory`` and ``rooftop profile --memory``; ``measured``: the
    profile's measured peak (its memory timeline), when it has one."""
    return {
        "module": peak.module,
        "peak_bytes": peak.peak_bytes,
        "peak_position": peak.peak_position,
        "peak_instruction": peak.peak_instruction,
        "scheduled": peak.scheduled,
        "by_kind": dict(peak.by_kind),
        "buffers": [dataclasses.asdict(b) for b in peak.buffers],
        "measured_peak_bytes": measured,
        "notes": note_texts(peak.notes),
    }


def render_peak(console: Console, peak: MemoryPeak, top: int, measured: float | None = None) -> None:
    """The ``top`` largest buffers live at the peak, then the bytes by kind."""
    rows = [(b.name, b.kind, format_bytes(b.bytes), b.shape, b.op_name or "-", b.source.rsplit("/", 1)[-1] or "-")
            for b in peak.buffers[: max(top, 1)]]  # fmt: skip
    console.print(
        table(
            f"memory at the peak of {peak.module}: {format_bytes(peak.peak_bytes)} at {peak.peak_instruction} "
            f"(position {peak.peak_position}), the largest buffers live there",
            ["buffer", "kind", "bytes", "shape", "op_name", "source"],
            rows,
        )
    )
    say(console, "by kind: " + ", ".join(f"{k} {format_bytes(v)}" for k, v in peak.by_kind.items()))
    if measured is not None:
        say(console, f"the profile's measured peak: {format_bytes(measured)} (its memory timeline)")
    for note in note_texts(peak.notes):
        say(console, f"note: {note}", style="dim")
