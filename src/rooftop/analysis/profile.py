"""A profile on the roofline: load the trace, find each module's HLO (embedded in the
XPlane's metadata plane, or given), time it on the chip, and compare op by op."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rooftop.analysis.compare import ProfileReport, compare
from rooftop.analysis.hlo import HloAnalysis, analyze
from rooftop.analysis.hlo_parse import HloModule, parse_hlo, parse_hlo_file
from rooftop.analysis.trace import ProgressFn, Trace, hlo_text, load_trace
from rooftop.errors import ParseError
from rooftop.hardware.chip import Chip


def _op_names(module: HloModule) -> dict[str, str]:
    return {i.name: i.metadata.get("op_name", "") for c in module.computations.values() for i in c.instructions}


def _busiest_modules(trace: Trace) -> list[str]:
    """Module names (as the events spell them) by busy time, most first."""
    busy: Counter[str] = Counter()
    for e in trace.events:
        if e.module and e.kind in ("op", "kernel"):
            busy[e.module] += e.duration_s
    return [m for m, _ in busy.most_common()]


def modules_of(trace: Trace, hlo: str | Path | None = None) -> tuple[dict[str, HloModule], list[str]]:
    """module name -> parsed HLO: every module whose HloProto the XPlane carries, and the
    ``hlo`` file (which wins) for the module of its name, else the busiest one. Notes say
    which modules have no HLO."""
    notes: list[str] = []
    names = _busiest_modules(trace)
    found: dict[str, HloModule] = {}
    given = parse_hlo_file(hlo) if hlo is not None else None
    if given is not None:
        target = given.name if any(n.split("(")[0] == given.name for n in names) else (names[0] if names else None)
        if target and target.split("(")[0] != given.name:
            notes.append(f"--hlo module {given.name!r} joined with the profile's busiest module {target!r}")
        found[(target or given.name).split("(")[0]] = given
    for name in names:
        base = name.split("(")[0]
        if base in found:
            continue
        text = hlo_text(trace, name) if trace.hlo_protos else None
        if text is None:
            notes.append(f"no HLO for module {base!r} in the profile (give --hlo to price its ops)")
            continue
        try:
            found[base] = parse_hlo(text, f"{trace.source}:{base}")
        except ParseError as exc:
            notes.append(f"HLO of {base!r} could not be read: {exc}")
    return found, notes


def profile_report(
    source: str | Path | Trace,
    chip: Chip,
    hlo: str | Path | None = None,
    mesh: str | None = None,
    topology: str | None = None,
    progress: ProgressFn | None = None,
) -> ProfileReport:
    trace = source if isinstance(source, Trace) else load_trace(source, progress)
    modules, notes = modules_of(trace, hlo)
    analyses: dict[str, HloAnalysis] = {name: analyze(m, chip, mesh, topology) for name, m in modules.items()}
    report = compare(trace, analyses, {name: _op_names(m) for name, m in modules.items()})
    if notes:
        report = ProfileReport(report.source, chip.name, report.ops, report.steps, report.categories,
                               report.sharding, report.memory, tuple(notes) + report.notes)  # fmt: skip
    return report
