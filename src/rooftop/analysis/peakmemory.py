"""Memory at the peak of a profile: the busiest module's buffers at its peak (analysis/hlo/liveness.py) beside
the peak the profile measured (its memory timeline, when it has one)."""

from __future__ import annotations

from pathlib import Path

from rooftop.analysis.hlo.liveness import MemoryPeak, memory_peak
from rooftop.analysis.profile import modules_of
from rooftop.analysis.trace.events import Trace
from rooftop.reasons import Option, OptionError


def profile_peak(trace: Trace, hlo: str | Path | None = None) -> MemoryPeak:
    """The peak of the module the profile spent most time in (``hlo`` when given), from its HLO."""
    modules, _ = modules_of(trace, hlo)
    if not modules:
        raise OptionError(
            f"{trace.source}: no module with HLO in the profile for ", Option("memory"), " (give ", Option("hlo"), ")"
        )
    return memory_peak(next(iter(modules.values())))
