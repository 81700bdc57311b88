"""What one host contributes to a many-host report (analysis/hosts.py makes it, analysis/hostviews.py and
the merge read it): per-op counts and exact partial sums, the pricing, step markers, memory, per-collective
executions and the merged busy intervals per device."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from rooftop.analysis.compare import OpPricing
from rooftop.analysis.device import RecordedDevice
from rooftop.analysis.trace.events import MemorySample
from rooftop.analysis.trace.steps import Step, StepMark
from rooftop.reasons import Note

NS_PER_S = 1e9  # a profile's start time (its Task Environment) is in nanoseconds


@dataclasses.dataclass(frozen=True)
class OpPart:
    """One op on one host: executions, devices, the exact partials of its busy seconds and, for a
    collective, of the seconds compute overlapped and of its executions' spans; where it first ran
    (start, device, name: the order of the merged ops)."""

    count: int
    devices: int
    busy: list[float]
    hidden: list[float] | None
    spans: list[float] | None
    first: tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class CollectiveRuns:
    """The executions of one collective on one device, in order: start seconds (the host's clock) and step
    numbers (-1: none)."""

    start_s: np.ndarray
    step: np.ndarray


@dataclasses.dataclass(frozen=True)
class HostPart:
    """What one host contributes (module docstring)."""

    host: str
    events: int
    chip: str
    ops: dict[tuple[Any, ...], OpPart]
    pricing: dict[tuple[Any, ...], OpPricing]
    marks: list[StepMark]
    modules: list[tuple[str, str, float, float]]
    memory: tuple[MemorySample, ...]
    sharding: list[Note]
    notes: list[Note]
    clock_ns: int | None  # the profile's start on the host's clock (Task Environment profile_start_time)
    steps: list[Step]  # the host's own steps
    collectives: dict[tuple[Any, ...], dict[str, CollectiveRuns]]
    intervals: bytes  # per device, merged compute and communication intervals (np.savez)
    devices: tuple[RecordedDevice, ...] = ()  # the devices the host's profile records (analysis/device.py)


def clock_offsets(parts: Sequence[HostPart]) -> tuple[dict[str, float], bool]:
    """Seconds to add to each host's times to put them on one clock (each profile's start time, from its
    Task Environment); zeros and False when a host does not say when its profile started."""
    clocks = [p.clock_ns for p in parts]
    if not parts or any(c is None for c in clocks):
        return {p.host: 0.0 for p in parts}, False
    first = min(c for c in clocks if c is not None)
    return {p.host: ((p.clock_ns or first) - first) / NS_PER_S for p in parts}, True
