"""A profile on the roofline: load the trace, find each module's HLO (embedded in the
XPlane's metadata plane, or given), time it on the chip, and compare op by op.

A PyTorch (Kineto) trace has no HLO: its kernels are joined with the aten ops that launched them
and priced from the ops' shapes and the NCCL kernels' args, in
:func:`rooftop.analysis.torch.kineto.kineto_report`."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

from rooftop.analysis.compare import ProfileReport, compare
from rooftop.analysis.copies import with_copies
from rooftop.analysis.coverage import coverage
from rooftop.analysis.device import DeviceChoice, choose_chip
from rooftop.analysis.gcpause import paused_gc
from rooftop.analysis.hlo.analyze import HloAnalysis, analyze
from rooftop.analysis.hlo.ir import HloModule, Instruction, split_top
from rooftop.analysis.hlo.parse import parse_hlo, parse_hlo_file
from rooftop.analysis.torch.capture import Capture
from rooftop.analysis.torch.kineto import kineto_report
from rooftop.analysis.trace.cmdbuf import attribute_command_buffers
from rooftop.analysis.trace.events import ProgressFn, Trace
from rooftop.analysis.trace.load import load_trace
from rooftop.analysis.trace.xplane import hlo_text
from rooftop.errors import ParseError
from rooftop.hardware.catalog import load_chips
from rooftop.hardware.chip import Chip
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason


def _op_names(module: HloModule) -> dict[str, str]:
    return {i.name: i.metadata.get("op_name", "") for c in module.computations.values() for i in c.instructions}


def _sources(module: HloModule) -> dict[str, str]:
    """instruction -> "file:line" of the code that made it (metadata, or the stack-frame tables)."""
    out = {}
    for instr in module.entry.instructions:
        try:
            where = module.source_location(instr)
        except (ParseError, ValueError):  # a malformed table entry: no location, not no report
            where = None
        if where is not None:
            out[instr.name] = f"{where[0]}:{where[1]}"
    return out


def _cpu_on_accelerator(trace: Trace, chip: Chip) -> Reason | None:
    """A note when a profile that ran on the CPU is judged against an accelerator's roofline."""
    devices = [d for d in trace.devices if "/device:" in d]
    on_cpu = bool(devices) and all("/device:CPU" in d for d in devices)
    if not on_cpu or chip.kind not in ("gpu", "tpu"):
        return None
    return Reason.of(ReasonCode.CPU_PROFILE, chip=chip.name)


def _busiest_modules(trace: Trace) -> list[str]:
    """Module names (as the events spell them) by busy time, most first."""
    busy: Counter[str] = Counter()
    ev = trace.events
    for module, kind, dur in zip(ev.column("module"), ev.column("kind"), ev.column("duration_s"), strict=True):
        if module and kind in ("op", "kernel"):
            busy[module] += dur
    return [m for m, _ in busy.most_common()]


def modules_of(trace: Trace, hlo: str | Path | None = None) -> tuple[dict[str, HloModule], list[Note]]:
    """module name -> parsed HLO: every module whose HloProto the XPlane carries, and the
    ``hlo`` file (which wins, and comes first) for the module of its name, else the busiest one.
    Notes say which modules have no HLO."""
    notes: list[Note] = []
    names = _busiest_modules(trace)
    found: dict[str, HloModule] = {}
    given = parse_hlo_file(hlo) if hlo is not None else None
    if given is not None:
        target = given.name if any(n.split("(")[0] == given.name for n in names) else (names[0] if names else None)
        if target and target.split("(")[0] != given.name:
            notes.append(Reason.of(ReasonCode.HLO_JOINED_BUSIEST, given=given.name, target=target))
        found[(target or given.name).split("(")[0]] = given
    programs = Counter(name.split("(")[0] for name in names)
    for name in names:
        base = name.split("(")[0]
        if programs[base] > 1 and name != base:  # one name, several programs: each its own HLO (xplane.py)
            base = name
        if base in found:
            continue
        try:
            several = sum(k.rsplit("(", 1)[0] == name for k in trace.hlo_protos) > 1
            text = hlo_text(trace, name, _program_of(trace, name) if several else None) if trace.hlo_protos else None
        except ParseError as exc:  # one corrupt module does not hide the others
            notes.append(Reason.of(ReasonCode.HLO_FAILED, module=base, stage="unusable", error=str(exc)))
            continue
        if text is None:
            notes.append(Reason.of(ReasonCode.HLO_MISSING, module=base))
            continue
        try:
            found[base] = parse_hlo(text, f"{trace.source}:{base}")
        except ParseError as exc:
            notes.append(Reason.of(ReasonCode.HLO_FAILED, module=base, stage="unreadable", error=str(exc)))
    return found, notes


def _program_of(trace: Trace, module: str) -> str | None:
    """The program id the events of ``module`` carry when they all carry one (a module name compiled into
    several programs of which only one ran in the trace: its events keep the plain name, and the program id
    picks its HLO among the metadata's)."""
    if "(" in module:
        return None
    ids = {
        str(a.get("program_id"))
        for m, a in zip(trace.events.column("module"), trace.events.column("args"), strict=True)
        if m == module and a and a.get("program_id") is not None
    }
    return ids.pop() if len(ids) == 1 else None


_GROUPED = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-broadcast")


def _groups_from_events(trace: Trace, modules: dict[str, HloModule]) -> list[Note]:
    """Collectives whose HloProto lost its replica groups (``replica_groups={}`` when jaxlib re-prints a TPU
    profile's proto) take them from the op event's HLO text (xprof's ``long_name``); with no text, the
    profile's devices form one group. Modules are updated in place of the dict; notes say which was used."""
    texts: dict[tuple[str, str], str] = {}
    ev = trace.events
    for module, inst, kind, args in zip(ev.column("module"), ev.column("instruction"), ev.column("kind"),
                                        ev.column("args"), strict=True):  # fmt: skip
        if kind == "op" and inst is not None and module and args and "replica_groups=" in str(args.get("long_name")):
            texts.setdefault((module.split("(")[0], inst), str(args["long_name"]))
    devices = len({d for d in trace.devices if "/device:" in d and "CPU" not in d}) or len(trace.devices)
    notes: list[Note] = []
    for name, module in modules.items():
        fixed: dict[str, Instruction] = {}
        for comp in module.computations.values():
            for instr in comp.instructions:
                base = module.base_opcode(instr)
                if base not in _GROUPED or instr.attributes.get("replica_groups", "{}").strip() not in ("{}", ""):
                    continue
                text = texts.get((name, instr.name))
                value = next((p.strip()[len("replica_groups="):] for p in split_top(text or "")
                              if p.strip().startswith("replica_groups=")), None)  # fmt: skip
                if value is not None and value != "{}":
                    notes.append(Reason.of(ReasonCode.GROUPS_FROM_EVENTS, module=name, instruction=instr.name,
                                           groups=value))  # fmt: skip
                elif devices > 1:
                    value = "{{" + ",".join(map(str, range(devices))) + "}}"
                    notes.append(Reason.of(ReasonCode.GROUPS_ALL_DEVICES, module=name, instruction=instr.name,
                                           devices=devices))  # fmt: skip
                else:
                    continue
                fixed[instr.name] = dataclasses.replace(instr, attributes={**instr.attributes, "replica_groups": value})
        if fixed:
            modules[name] = _with_instructions(module, fixed)
    return notes


def _with_instructions(module: HloModule, fixed: dict[str, Instruction]) -> HloModule:
    """``module`` with the instructions of ``fixed`` (by name) replaced."""
    comps = {}
    for cname, comp in module.computations.items():
        if not any(i.name in fixed for i in comp.instructions):
            comps[cname] = comp
            continue
        instrs = tuple(fixed.get(i.name, i) for i in comp.instructions)
        comps[cname] = dataclasses.replace(
            comp, instructions=instrs, params=tuple(fixed.get(i.name, i) for i in comp.params),
            root=fixed.get(comp.root.name, comp.root), by_name={i.name: i for i in instrs})  # fmt: skip
    return dataclasses.replace(module, computations=comps, entry=comps[module.entry.name])


def profile_report(
    source: str | Path | Trace,
    chip: Chip | str,
    hlo: str | Path | None = None,
    mesh: str | None = None,
    topology: str | None = None,
    progress: ProgressFn | None = None,
    capture: Capture | None = None,
) -> ProfileReport:
    """The ProfileReport of a trace (a path to load, or a loaded Trace) on ``chip`` (a Chip, or a catalog
    name such as "h100", as ``jaxlink.analyze`` takes): JAX traces joined with their modules' HLO
    (:func:`compare`), PyTorch traces priced from their aten ops (:func:`kineto_report`; ``capture``: the trace
    of the engine's CUDA-graph capture, for the kernels the graphs replay)."""
    if isinstance(chip, str):
        from rooftop.hardware.catalog import get_chip

        chip = get_chip(chip)
    trace = source if isinstance(source, Trace) else load_trace(source, progress)
    with paused_gc():  # millions of acyclic rows and executions: collection passes would dominate
        return _profile_report(trace, chip, hlo, mesh, topology, capture)


def _profile_report(
    trace: Trace, chip: Chip, hlo: str | Path | None, mesh: str | None, topology: str | None,
    capture: Capture | None = None,
) -> ProfileReport:  # fmt: skip
    if not trace.events:
        raise ParseError(f"{trace.source}: no trace events (is this a profiler trace?)")
    report = with_copies(_priced_report(trace, chip, hlo, mesh, topology, capture), trace, chip)
    return opening(report, choose_chip(trace, load_chips(), chip))


def opening(report: ProfileReport, choice: DeviceChoice) -> ProfileReport:
    """``report`` opening with its coverage (priced, graph-replayed and idle shares) and, when the profile
    records its device, where the chip came from or how it differs from the device (a what-if)."""
    said = choice.note()
    notes = (coverage(report).reason(), *([said] if said else []), *report.notes)
    return dataclasses.replace(report, notes=notes, device=choice.payload())


def _priced_report(
    trace: Trace, chip: Chip, hlo: str | Path | None, mesh: str | None, topology: str | None,
    capture: Capture | None = None,
) -> ProfileReport:  # fmt: skip
    if trace.format == "kineto":
        report = kineto_report(trace, chip, topology, capture)
        if hlo is not None or mesh is not None:
            extra: tuple[Note, ...] = (Reason.of(ReasonCode.HLO_MESH_UNUSED),)
            report = ProfileReport(report.source, report.chip, report.ops, report.steps, report.categories,
                                   report.sharding, report.memory, extra + report.notes)  # fmt: skip
        return report
    joined = join_hlo(trace, chip, hlo, mesh, topology)
    report = compare(joined.trace, joined.analyses, joined.op_names, joined.sources)
    notes = joined.notes
    if notes:
        report = ProfileReport(report.source, chip.name, report.ops, report.steps, report.categories,
                               report.sharding, report.memory, tuple(notes) + report.notes)  # fmt: skip
    return report


@dataclasses.dataclass(frozen=True)
class Joined:
    """A JAX trace with its modules' HLO priced on the chip: the trace (command buffers attributed), the
    analyses, each module's instruction -> op_name and -> source line, and the notes on how they were found."""

    trace: Trace
    analyses: dict[str, HloAnalysis]
    op_names: dict[str, dict[str, str]]
    sources: dict[str, dict[str, str]]
    notes: list[Note]


def join_hlo(trace: Trace, chip: Chip, hlo: str | Path | None, mesh: str | None, topology: str | None) -> Joined:
    """Find and price the HLO of every module of a JAX ``trace`` (the part of :func:`profile_report` before
    the ops are judged; analysis/hosts.py runs it on each host)."""
    modules, notes = modules_of(trace, hlo)
    trace, graph_notes = attribute_command_buffers(trace, modules)
    notes += graph_notes + _groups_from_events(trace, modules)
    given = next(iter(modules), None) if hlo is not None else None  # the --hlo module comes first
    analyses: dict[str, HloAnalysis] = {}
    for name, module in modules.items():
        try:
            analyses[name] = analyze(module, chip, mesh, topology)
        except ParseError as exc:  # a module of the profile that cannot be priced does not hide the others
            if name == given:
                raise
            notes.append(Reason.of(ReasonCode.HLO_FAILED, module=name, stage="unpriced", error=exc.one_line()))
    cpu = _cpu_on_accelerator(trace, chip)
    if cpu is not None:
        notes.append(cpu)
    return Joined(trace, analyses, {name: _op_names(m) for name, m in modules.items()},
                  {name: _sources(m) for name, m in modules.items()}, notes)  # fmt: skip
