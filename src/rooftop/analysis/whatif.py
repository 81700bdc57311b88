"""What-if on another chip: a profile measured on chip X, each op's time projected onto chip Y.

The same trace is priced twice (the same Costs: FLOPs, bytes and collective bytes of every op; only the
chip changes): on X, where it ran, and on Y. Per op, with r_X and r_Y its roofline times of one execution
(max of compute, memory, network on each chip) and m its measured time of one execution on X:

- ``efficiency`` (the rule): e = r_X / m, the fraction of its bound the op reached on X, is carried over to
  its bound on Y: projected = r_Y / e = m x r_Y / r_X. An op that ran at 60% of its HBM time on X runs at
  60% of its bound on Y, whichever that is (``bound_changed`` says when Y's bound is not X's: a
  memory-bound op on X may be compute-bound on Y, and the efficiency is then assumed to carry across);
  the done of an overlapped transfer (its measured wait) scales the same way;
- ``roofline``: an op that ran faster than its roofline on X (e above FASTER_THAN_ROOFLINE: the chip's
  figures or the op's count are off, so e says nothing) is projected at r_Y, its roofline on Y;
- ``measured``: an op with no roofline (unknown cost) or priced at zero (bookkeeping, launch overhead:
  nothing in it scales with the chip's peaks) keeps its measured time.

The step on Y is the measured step (mean step duration; summed op time per device without step windows)
plus the ops' projected less measured time per step and device: idle time and gaps between ops are kept
as measured (a host-bound step stays host-bound), and ops that overlapped on X are assumed to overlap alike.
Collectives on Y are timed on Y's default topology for the profile's device count, over the same mesh.

Values only: report/whatif.py writes the words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rooftop.analysis.compare import FASTER_THAN_ROOFLINE, OpReport, ProfileReport
from rooftop.analysis.profile import profile_report
from rooftop.analysis.trace.events import Trace
from rooftop.analysis.trace.load import load_trace
from rooftop.errors import InvalidConfigError
from rooftop.hardware.chip import Chip
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason


@dataclass(frozen=True)
class ProjectedOp:
    """One op: measured on X, its roofline on X and Y (one execution), and its projected time on Y (one
    execution) by ``method`` (module docstring); ``total_*``: per step and device."""

    name: str
    module: str | None
    opcode: str | None
    count: int
    devices: int
    measured_s: float
    roofline_x_s: float | None
    roofline_y_s: float | None
    bound_x: str | None
    bound_y: str | None
    efficiency: float | None
    projected_s: float
    method: str
    bound_changed: bool
    total_measured_s: float
    total_projected_s: float


@dataclass(frozen=True)
class WhatIf:
    """A profile measured on ``chip_x`` projected onto ``chip_y``: the ops (by projected time, most first),
    the measured step and the projected one (per step and device)."""

    source: str
    chip_x: str
    chip_y: str
    steps: int
    step_basis: str
    measured_step_s: float
    ops: tuple[ProjectedOp, ...]
    notes: tuple[Note, ...] = ()

    @property
    def ops_measured_s(self) -> float:
        return sum(o.total_measured_s for o in self.ops)

    @property
    def ops_projected_s(self) -> float:
        return sum(o.total_projected_s for o in self.ops)

    @property
    def projected_step_s(self) -> float:
        return self.measured_step_s + self.ops_projected_s - self.ops_measured_s

    @property
    def speedup(self) -> float | None:
        """measured step / projected step (above 1: faster on Y)."""
        return self.measured_step_s / self.projected_step_s if self.projected_step_s > 0 else None

    def by_method(self) -> dict[str, float]:
        """Projected time per step and device of the ops of each method."""
        out = dict.fromkeys(("efficiency", "roofline", "measured"), 0.0)
        for o in self.ops:
            out[o.method] += o.total_projected_s
        return out


def _key(o: OpReport) -> tuple[str | None, str]:
    return (re.sub(r"\([0-9]+\)$", "", o.module) if o.module else o.module, o.name)


def project_op(x: OpReport, y: OpReport | None) -> tuple[float, str, float | None]:
    """(projected time of one execution on Y, method, efficiency on X) of the op ``x`` measured on X and
    priced on Y as ``y`` (module docstring)."""
    rx = x.lower_bound_s
    ry = y.lower_bound_s if y is not None else None
    if rx is None or ry is None or x.verdict == "unknown cost" or not x.measured_s > 0:
        return x.measured_s, "measured", None
    if rx <= 0:  # bookkeeping (or the start of an async pair whose work is priced on its done)
        return x.measured_s, "measured", None
    eff = rx / x.measured_s
    if eff > FASTER_THAN_ROOFLINE and x.verdict != "overlapped transfer":
        return ry, "roofline", eff
    return ry / eff, "efficiency", eff


def project(x: ProfileReport, y: ProfileReport, notes: tuple[Note, ...] = ()) -> WhatIf:
    """The ops of ``x`` (a profile priced on the chip it ran on) projected with ``y`` (the same trace priced
    on the other chip)."""
    if x.source != y.source:
        raise InvalidConfigError(f"what-if needs one profile priced twice, got {x.source} and {y.source}")
    on_y = {_key(o): o for o in y.ops}
    steps = len(x.steps)
    per = max(steps, 1)
    ops = []
    for o in x.ops:
        other = on_y.get(_key(o))
        projected, method, eff = project_op(o, other)
        devices = max(o.devices, 1)
        bound_y = other.bound if other is not None else None
        ops.append(ProjectedOp(
            o.name, o.module, o.opcode, o.count, o.devices, o.measured_s, o.lower_bound_s,
            other.lower_bound_s if other is not None else None, o.bound, bound_y, eff, projected, method,
            method == "efficiency" and bound_y != o.bound, o.total_s / devices / per,
            projected * o.count / devices / per))  # fmt: skip
    ops.sort(key=lambda p: (-p.total_projected_s, p.name))
    if steps:
        step_s, basis = sum(s.duration_s for s in x.steps) / steps, "steps"
    else:
        step_s, basis = sum(p.total_measured_s for p in ops), "op time"
    return WhatIf(x.source, x.chip, y.chip, steps, basis, step_s, tuple(ops), notes)


def what_if(
    source: str | Path | Trace,
    chip_x: Chip,
    chip_y: Chip,
    hlo: str | Path | None = None,
    mesh: str | None = None,
    topology: str | None = None,
) -> tuple[ProfileReport, WhatIf]:
    """The profile report on ``chip_x`` (where the trace ran) and its projection onto ``chip_y``: the trace
    read once, priced on each chip (``topology`` is X's; Y's is its default for the device count)."""
    trace = source if isinstance(source, Trace) else load_trace(source)
    x = profile_report(trace, chip_x, hlo, mesh, topology)
    y = profile_report(trace, chip_y, hlo, mesh, None)
    why = ReasonCode.TARGET_TOPOLOGY_DEFAULT
    default = Reason.of(why, chip=chip_y.name, topology=topology, source_chip=chip_x.name)
    return x, project(x, y, (default,) if topology is not None else ())
