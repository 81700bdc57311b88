"""Two runs op by op: what was added, removed or changed, and what the step's time delta is made of.

A run (:class:`Side`) is a profile (any trace ``rooftop profile`` reads, priced on a chip) or an HLO module
(priced on a chip, no measured times). Every op is reduced to its time per step on one device:

- measured_s = the op's measured total / its devices / the run's steps (step windows of the trace; 1 when
  the trace marks none);
- roofline_s = its roofline time of one execution x executions / devices / steps (an HLO module: the
  instruction's lower bound over its executions, the module being one step).

Ops are matched in three passes, each on the ops the passes before left unmatched:

1. ``instruction``: the same module, instruction name and shape (result shape of the HLO instruction; for a
   trace without HLO the shape is unknown and the name alone matches);
2. ``renumbered``: the same module, opcode, framework op (JAX's op_name scope path, the aten op) and shape
   (known: from HLO), paired in the order of their names (XLA renumbers ``fusion.12`` when the program
   changes);
3. ``framework op``: across chips and stacks, where instruction and kernel names differ: the ops of one
   framework op and family (opcode, else category) are summed on each side into one row.

A matched row is ``changed`` unless both deltas are exactly 0 (``same``); an op found on one side only is
``removed`` (A only) or ``added`` (B only), its delta the whole of its time. The step's delta is the mean
step duration of B less A's (profiles with step windows on both sides; else the summed op time per device;
HLO modules: the predicted module time); the rows with the largest measured deltas (predicted for HLO)
explain it, and ``unexplained_s`` is what the op deltas leave (idle time, gaps between ops).

Values only: report/diff.py writes the words.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rooftop.analysis.compare import ProfileReport, compare
from rooftop.analysis.hlo.analyze import HloAnalysis, analyze
from rooftop.analysis.hlo.ir import HloModule
from rooftop.analysis.hlo.parse import parse_hlo_file
from rooftop.analysis.profile import join_hlo, profile_report
from rooftop.analysis.trace.load import load_trace
from rooftop.display import Displayed
from rooftop.errors import InvalidConfigError
from rooftop.hardware.chip import Chip
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

#: rows named as the step delta's largest contributors
CONTRIBUTORS = 10


@dataclass(frozen=True)
class SideOp:
    """One op of a run, per step and device (module docstring)."""

    module: str
    name: str
    opcode: str
    shape: str
    framework_op: str
    family: str
    count: float  # executions per step and device
    measured_s: float | None  # None: an HLO module (nothing measured)
    roofline_s: float | None  # None: the op has no roofline (unknown cost)
    mesh_axes: tuple[str, ...] | None = None  # the mesh axes a collective runs over (None: not a collective)


@dataclass(frozen=True)
class Side:
    """A run reduced to its ops per step and device: ``kind`` "profile" or "hlo", ``steps`` the step windows
    the trace marks (0: none), ``step_s`` its step time (mean step duration; the summed op time per device
    without steps; the predicted module time of an HLO module) and ``step_basis`` which of those it is."""

    source: str
    kind: str
    chip: str
    steps: int
    step_s: float
    step_basis: str
    ops: tuple[SideOp, ...]
    notes: tuple[Note, ...] = ()

    def roofline_s(self) -> float:
        return sum(o.roofline_s or 0.0 for o in self.ops)


@dataclass(frozen=True)
class DiffRow:
    """A matched pair of ops (or one op on one side): ``status`` added / removed / changed / same, ``match``
    how the pair was found ("instruction", "renumbered", "framework op"; "" for one side), times per step and
    device (None: absent on that side, or no roofline), deltas B - A with an absent side counted as 0."""

    status: str
    match: str
    module: str
    name_a: str | None
    name_b: str | None
    opcode: str
    shape_a: str
    shape_b: str
    framework_op: str
    family: str
    count_a: float | None
    count_b: float | None
    measured_a_s: float | None
    measured_b_s: float | None
    delta_measured_s: float | None
    roofline_a_s: float | None
    roofline_b_s: float | None
    delta_roofline_s: float | None
    mesh_axes: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return self.name_b if self.name_b is not None and self.name_a is None else (self.name_a or "")

    def delta_s(self, kind: str) -> float:
        """The delta that explains the step of a diff of ``kind`` runs: measured (profiles), roofline (HLO)."""
        value = self.delta_measured_s if kind == "profile" else self.delta_roofline_s
        return value or 0.0


@dataclass(frozen=True, repr=False)  # the short repr of Displayed
class ProfileDiff(Displayed):
    """Run B against run A (module docstring): the rows, the step delta and its largest contributors."""

    a: Side
    b: Side
    rows: tuple[DiffRow, ...]
    contributors: tuple[DiffRow, ...]
    notes: tuple[Note, ...] = field(default=())

    @property
    def kind(self) -> str:
        return self.a.kind

    @property
    def step_delta_s(self) -> float:
        return self.b.step_s - self.a.step_s

    @property
    def roofline_delta_s(self) -> float:
        return self.b.roofline_s() - self.a.roofline_s()

    def unexplained_s(self) -> float:
        """The step delta less every row's delta: idle time and gaps between ops (0 for HLO modules, whose
        step is the sum of their ops)."""
        if self.kind == "hlo":
            return 0.0
        return math.fsum([self.b.step_s, -self.a.step_s, *(-r.delta_s(self.kind) for r in self.rows)])

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(("added", "removed", "changed", "same"), 0)
        for r in self.rows:
            out[r.status] += 1
        return out


# ---------------------------------------------------------------- the two sides


def _family(opcode: str | None, category: str) -> str:
    return opcode or category or "other"


def profile_side(report: ProfileReport, shapes: dict[str, dict[str, str]] | None = None) -> Side:
    """A :class:`ProfileReport` per step and device; ``shapes``: module -> instruction -> result shape."""
    shapes = shapes or {}
    steps = len(report.steps)
    per = max(steps, 1)
    ops = []
    for o in report.ops:
        devices = max(o.devices, 1)
        module = o.module or ""
        table = shapes.get(module) or shapes.get(re.sub(r"\([0-9]+\)$", "", module), {})
        roof = o.lower_bound_s * o.count / devices / per if o.lower_bound_s is not None else None
        ops.append(SideOp(module, o.name, o.opcode or "", table.get(o.name, ""), o.framework_op,
                          _family(o.opcode, o.category), o.count / devices / per, o.total_s / devices / per,
                          roof, o.mesh_axes))  # fmt: skip
    if steps:
        step_s, basis = sum(s.duration_s for s in report.steps) / steps, "steps"
    else:
        step_s, basis = sum(o.measured_s or 0.0 for o in ops), "op time"
    return Side(report.source, "profile", report.chip, steps, step_s, basis, tuple(ops), report.notes)


def hlo_side(analysis: HloAnalysis, op_names: dict[str, str], source: str) -> Side:
    """An :class:`HloAnalysis` as one step: each instruction's predicted time (its lower bound over its
    executions); ``op_names``: instruction -> metadata op_name."""
    ops = tuple(
        SideOp(analysis.module, t.op.name, t.op.opcode, str(t.op.shape), op_names.get(t.op.name, ""), t.op.opcode,
               t.op.executions, None, t.estimate.lower_bound_s,
               tuple(a for m in t.matches for a in (m.axes or ())) or None)
        for t in analysis.ops
    )  # fmt: skip
    total = sum(o.roofline_s or 0.0 for o in ops)
    return Side(source, "hlo", analysis.chip.name, 1, total, "predicted", ops, analysis.notes)


def _op_names(module: HloModule) -> dict[str, str]:
    return {i.name: i.metadata.get("op_name", "") for c in module.computations.values() for i in c.instructions}


def is_hlo_text(path: str | Path) -> bool:
    """A file whose first non-blank text is ``HloModule`` (an HLO text module), not a profile."""
    p = Path(path)
    if not p.is_file():
        return False
    try:
        with open(p, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return head.lstrip().startswith(b"HloModule")


def load_side(
    path: str | Path, chip: Chip, hlo: str | Path | None = None, mesh: str | None = None, topology: str | None = None
) -> Side:
    """A run from a file: an HLO text module priced on ``chip``, or a profile (``rooftop profile``'s inputs)
    priced and measured, with each op's result shape from the module's HLO when the profile has it."""
    if is_hlo_text(path):
        module = parse_hlo_file(path)
        return hlo_side(analyze(module, chip, mesh, topology), _op_names(module), str(path))
    trace = load_trace(path)
    if trace.format == "kineto" or not trace.events:
        return profile_side(profile_report(trace, chip, hlo, mesh, topology))
    joined = join_hlo(trace, chip, hlo, mesh, topology)
    report = compare(joined.trace, joined.analyses, joined.op_names, joined.sources)
    report = dataclasses.replace(report, chip=chip.name, notes=tuple(joined.notes) + report.notes)
    shapes = {m: {t.op.name: str(t.op.shape) for t in a.ops} for m, a in joined.analyses.items()}
    return profile_side(report, shapes)


# ---------------------------------------------------------------- matching


def _natural(name: str) -> tuple[str, int]:
    """``fusion.12`` sorts after ``fusion.9``."""
    m = re.fullmatch(r"(.*?)\.?([0-9]+)", name)
    return (m.group(1), int(m.group(2))) if m else (name, -1)


def _sum(values: Iterable[float | None]) -> float | None:
    vals = list(values)
    return None if any(v is None for v in vals) or not vals else sum(v for v in vals if v is not None)


def _delta(a: float | None, b: float | None, a_present: bool, b_present: bool) -> float | None:
    if (a_present and a is None) or (b_present and b is None):
        return None
    return (b or 0.0) - (a or 0.0)


def _row(match: str, a_ops: Sequence[SideOp], b_ops: Sequence[SideOp]) -> DiffRow:
    """The row of the ops ``a_ops`` (of A) and ``b_ops`` (of B), summed on each side."""
    lead = (a_ops or b_ops)[0]

    def side(ops: Sequence[SideOp], attr: str) -> float | None:
        return _sum(getattr(o, attr) for o in ops) if ops else None

    ma, mb = side(a_ops, "measured_s"), side(b_ops, "measured_s")
    ra, rb = side(a_ops, "roofline_s"), side(b_ops, "roofline_s")
    dm, dr = _delta(ma, mb, bool(a_ops), bool(b_ops)), _delta(ra, rb, bool(a_ops), bool(b_ops))
    if not a_ops:
        status = "added"
    elif not b_ops:
        status = "removed"
    else:
        status = "same" if (dm or 0.0) == 0.0 and (dr or 0.0) == 0.0 else "changed"

    def names(ops: Sequence[SideOp]) -> str | None:
        return " + ".join(o.name for o in ops) if ops else None

    return DiffRow(status, match, lead.module, names(a_ops), names(b_ops), lead.opcode,
                   a_ops[0].shape if a_ops else "", b_ops[0].shape if b_ops else "", lead.framework_op, lead.family,
                   side(a_ops, "count"), side(b_ops, "count"), ma, mb, dm, ra, rb, dr, lead.mesh_axes)  # fmt: skip


def _pair(
    a: list[SideOp], b: list[SideOp], key: Callable[[SideOp], object], match: str
) -> tuple[list[DiffRow], list[SideOp], list[SideOp]]:
    """Rows of the ops of A and B whose ``key`` agree (None: never), paired in the order of their names; the
    ops left on each side."""
    groups_b: dict[object, list[SideOp]] = defaultdict(list)
    for o in sorted(b, key=lambda o: _natural(o.name)):
        k = key(o)
        if k is not None:
            groups_b[k].append(o)
    rows, rest_a = [], []
    for o in sorted(a, key=lambda o: _natural(o.name)):
        k = key(o)
        if k is not None and groups_b.get(k):
            rows.append(_row(match, [o], [groups_b[k].pop(0)]))
        else:
            rest_a.append(o)
    left_b = [o for o in b if key(o) is None] + [o for g in groups_b.values() for o in g]
    return rows, rest_a, left_b


def _by_framework_op(a: list[SideOp], b: list[SideOp]) -> tuple[list[DiffRow], list[SideOp], list[SideOp]]:
    """One row per (framework op, family) found on both sides, each side's ops summed."""
    ga: dict[tuple[str, str], list[SideOp]] = defaultdict(list)
    gb: dict[tuple[str, str], list[SideOp]] = defaultdict(list)
    for ops, groups in ((a, ga), (b, gb)):
        for o in ops:
            if o.framework_op:
                groups[(o.framework_op, o.family)].append(o)
    both = [k for k in ga if k in gb]
    rows = [_row("framework op", ga[k], gb[k]) for k in both]
    taken = {id(o) for k in both for o in (*ga[k], *gb[k])}
    return rows, [o for o in a if id(o) not in taken], [o for o in b if id(o) not in taken]


def match_ops(a: Sequence[SideOp], b: Sequence[SideOp]) -> list[DiffRow]:
    """Every op of A and B in a row: the three passes of the module docstring, then the ops of one side."""
    rows, left_a, left_b = _pair(list(a), list(b), lambda o: (o.module, o.name, o.shape), "instruction")
    more, left_a, left_b = _pair(
        left_a, left_b, lambda o: (o.module, o.opcode, o.framework_op, o.shape) if o.framework_op and o.shape else None,
        "renumbered")  # fmt: skip
    rows += more
    more, left_a, left_b = _by_framework_op(left_a, left_b)
    rows += more
    rows += [_row("", [o], []) for o in left_a] + [_row("", [], [o]) for o in left_b]
    return rows


def diff_sides(a: Side, b: Side, contributors: int = CONTRIBUTORS) -> ProfileDiff:
    """B against A: every op matched (:func:`match_ops`), rows ranked by the size of their delta."""
    if a.kind != b.kind:
        raise InvalidConfigError(
            f"cannot diff {a.kind} {a.source} with {b.kind} {b.source}: give two profiles or two HLO modules"
        )
    kind = a.kind
    rows = sorted(match_ops(a.ops, b.ops), key=lambda r: (-abs(r.delta_s(kind)), r.module, r.name))
    notes: list[Note] = []
    if a.chip != b.chip:
        notes.append(Reason.of(ReasonCode.DIFF_CHIPS, a=a.chip, b=b.chip))
    if kind == "profile" and a.step_basis != b.step_basis:
        notes.append(Reason.of(ReasonCode.DIFF_STEP_BASES, a=a.step_basis, b=b.step_basis))
    top = tuple(r for r in rows if r.delta_s(kind) != 0.0)[:contributors]
    return ProfileDiff(a, b, tuple(rows), top, tuple(notes))


def diff_runs(
    path_a: str | Path,
    path_b: str | Path,
    chip: Chip,
    chip_b: Chip | None = None,
    mesh: str | None = None,
    topology: str | None = None,
) -> ProfileDiff:
    """``rooftop diff A B``: two profiles or two HLO modules, A priced on ``chip``, B on ``chip_b`` (default
    ``chip``)."""
    a = load_side(path_a, chip, mesh=mesh, topology=topology)
    b = load_side(path_b, chip_b or chip, mesh=mesh, topology=topology)
    return diff_sides(a, b)
