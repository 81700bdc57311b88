"""Many hosts: one profile per host (``plugins/profile/<run>/<host>.xplane.pb``, as ``jax.profiler`` writes on
every process of a job), each loaded and reduced to per-op and per-step aggregates in its own worker, the
aggregates merged into the same :class:`ProfileReport` as one process loading every file would make.

A worker (:func:`reduce_host`) loads one host, joins it with its modules' HLO (analysis/profile.py
:func:`join_hlo`) and keeps, per op, the counts, the exact partials of its busy seconds and of a collective's
overlap (analysis/exact.py: sums that merge to the same bits in any grouping), the pricing, where it first
ran; the step markers or module executions; memory samples; per device its merged busy intervals (as bytes,
spilled to disk by the coordinator); and what the cross-host views need (analysis/hostviews.py). Steps span
every host (a step runs from the first marker's start to the last one's end), so each host's busy time per
step is measured in a second pass over the spilled intervals, one host at a time.

Workers are local processes (``workers``) or the workers of a Dask distributed cluster (``cluster``, a
scheduler address; the ``dask`` extra). Memory: a worker holds one host's trace at a time; the coordinator
one host's intervals at a time, and every host's aggregates (per op and per collective execution, not per
event)."""

from __future__ import annotations

import dataclasses
import glob
import io
import os
import stat
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from rooftop.analysis.cluster import dask_parts, local_parts
from rooftop.analysis.compare import (
    Measured,
    OpPricing,
    ProfileReport,
    analyses_notes,
    assemble_parts,
    memory_summary,
    price_ops,
)
from rooftop.analysis.device import choose_from, recorded_devices
from rooftop.analysis.exact import array_partials, total
from rooftop.analysis.gcpause import paused_gc
from rooftop.analysis.hostpart import CollectiveRuns, HostPart, OpPart
from rooftop.analysis.hostviews import HostViews, host_views
from rooftop.analysis.intervals import (
    Merged,
    Runs,
    StepSums,
    device_intervals,
    device_step_sums,
    is_collective,
    overlap_parts,
    step_table,
)
from rooftop.analysis.profile import join_hlo, opening
from rooftop.analysis.trace.events import Trace, natural_key
from rooftop.analysis.trace.files import stat_mode
from rooftop.analysis.trace.load import profile_files
from rooftop.analysis.trace.ops import executions
from rooftop.analysis.trace.steps import Step, module_executions, step_marks, steps_of
from rooftop.analysis.trace.xplane import load_xplanes
from rooftop.errors import InvalidConfigError, RooftopError
from rooftop.hardware.catalog import load_chips
from rooftop.hardware.chip import Chip
from rooftop.reasons import Option, OptionError

HostProgress = Callable[[int, int, str, int], None]
"""``progress(hosts_done, hosts, host, events)``: called as each host's aggregates arrive"""


def host_files(paths: Sequence[str | Path]) -> list[Path]:
    """The ``.xplane.pb`` files of the hosts: each path a profile directory (its newest run), a run
    directory, an ``.xplane.pb`` file or a glob pattern of them. Host names (file names) must differ."""
    found: list[Path] = []
    for given in paths:
        text = str(given)
        matches = sorted(glob.glob(text)) if _pattern(text) else [text]
        if not matches:
            raise InvalidConfigError(f"{text}: matches no file or directory")
        for m in matches:
            p = Path(m)
            mode = stat_mode(p)
            if mode is not None and stat.S_ISDIR(mode):
                xplanes, jsons = profile_files(p)
                found += xplanes or jsons
            else:
                found.append(p)
    found = _once(found)
    bad = [p for p in found if not p.name.endswith(".xplane.pb")]
    if bad:
        raise InvalidConfigError(f"{bad[0]}: many hosts are read from .xplane.pb files; pass one trace of another kind")
    names = [host_name(p) for p in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InvalidConfigError(f"two hosts named {twice[0]!r} ({len(twice)} names repeat): give each host once")
    return found


def _once(files: list[Path]) -> list[Path]:
    """``files`` with each file once: a second name of one (a link, or the file given twice) is the same host."""
    seen: set[tuple[int, int]] = set()
    out = []
    for f in files:
        try:
            st = os.stat(f)
        except (OSError, ValueError):  # read (and reported) as it is
            out.append(f)
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            out.append(f)
    return out


def many_hosts(paths: Sequence[str | Path]) -> bool:
    """Whether ``paths`` name several hosts: more than one path, a glob pattern, or a profile directory whose
    run holds several ``.xplane.pb`` files (anything else is read by one process, as one trace)."""
    if len(paths) != 1 or _pattern(str(paths[0])):
        return True
    p = Path(paths[0])
    try:
        return p.is_dir() and len(profile_files(p)[0]) > 1
    except (RooftopError, OSError):  # the one-trace path says what is wrong with it
        return False


def _pattern(text: str) -> bool:
    """A glob pattern, not the name of a file (a name may hold ``[``)."""
    return glob.has_magic(text) and not os.path.lexists(text)


def host_name(path: Path) -> str:
    return path.name.removesuffix(".xplane.pb")


def _packed(chip: Chip) -> dict[str, Any]:
    """A Chip as fields a worker can be sent (its read-only mappings as dicts: those do not pickle)."""
    return {f.name: dict(v) if isinstance(v := getattr(chip, f.name), MappingProxyType) else v
            for f in dataclasses.fields(chip)}  # fmt: skip


def _unpacked(fields: dict[str, Any]) -> Chip:
    values: dict[str, Any] = {k: MappingProxyType(v) if isinstance(v, dict) else v for k, v in fields.items()}
    return Chip(**values)


def reduce_host(
    path: Path, chip: Chip | dict[str, Any], hlo: str | None, mesh: str | None, topology: str | None
) -> HostPart:
    """Load one host and reduce it to its aggregates (:class:`HostPart`); ``chip`` may come packed."""
    chip = _unpacked(chip) if isinstance(chip, dict) else chip
    with paused_gc():
        trace = load_xplanes([Path(path)], source=str(path), host=host_name(Path(path)))
        if not trace.events:
            raise InvalidConfigError(f"{path}: no trace events (is this a profiler trace?)")
        return _reduce(trace, chip, hlo, mesh, topology)


def _reduce(trace: Trace, chip: Chip, hlo: str | None, mesh: str | None, topology: str | None) -> HostPart:
    joined = join_hlo(trace, chip, hlo, mesh, topology)
    trace = joined.trace
    execs = executions(trace)
    grouped, pricings = price_ops(execs, joined.analyses, joined.op_names, joined.sources)
    compute, comm = device_intervals(execs)
    ops, pricing = {}, {}
    collectives: dict[tuple[Any, ...], dict[str, CollectiveRuns]] = {}
    steps_col = trace.events.column("step")
    for (key, members), priced in zip(grouped, pricings, strict=True):
        runs = Runs(execs, members)
        collective = bool(priced.opcode and is_collective(priced.opcode))
        hidden, spans = overlap_parts(runs, compute) if collective else (None, None)
        head = int(members[0])
        first = (float(execs.start_s[head]), natural_key(execs.devices[int(execs.device[head])]), key[2])
        ops[key] = OpPart(len(runs), runs.devices(), array_partials(execs.busy_s[members]), hidden, spans, first)
        pricing[key] = priced
        if collective or is_collective(key[1] or key[2]):
            collectives[key] = _collective_runs(execs, members, steps_col)
    sharding, notes = analyses_notes(joined.analyses)
    notes = joined.notes + notes
    marks = step_marks(trace)
    modules = [] if marks else module_executions(trace)
    env = trace.metadata.get("environment", {})
    clock = env.get("profile_start_time")
    return HostPart(
        trace.metadata["hosts"][0], len(trace.events), chip.name if joined.analyses or notes else "-", ops, pricing,
        marks, modules, trace.memory, sharding, notes, int(clock) if str(clock or "").isdigit() else None,
        steps_of(marks, modules), collectives, _intervals_bytes(compute, comm), recorded_devices(trace))  # fmt: skip


def _collective_runs(execs: Any, members: np.ndarray, steps_col: Sequence[Any]) -> dict[str, CollectiveRuns]:
    out = {}
    for d in np.unique(execs.device[members]).tolist():
        mine = members[execs.device[members] == d]
        order = np.argsort(execs.start_s[mine], kind="stable")
        mine = mine[order]
        step = [steps_col[r] for r in execs.row[mine].tolist()]
        numbers = np.array([-1 if s is None else s for s in step], np.int64)
        out[execs.devices[d]] = CollectiveRuns(execs.start_s[mine].copy(), numbers)
    return out


def _intervals_bytes(compute: Mapping[str, Merged], comm: Mapping[str, Merged]) -> bytes:
    arrays: dict[str, np.ndarray] = {}
    devices = sorted(set(compute) | set(comm))
    for n, d in enumerate(devices):
        for kind, table in (("compute", compute), ("comm", comm)):
            if d in table:
                arrays[f"{kind}{n}_starts"], arrays[f"{kind}{n}_ends"] = table[d].starts, table[d].ends
    buf = io.BytesIO()
    arrays["devices"] = np.array(devices, dtype=str)
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return buf.getvalue()


def _step_sums(path: Path, steps: Sequence[Step]) -> dict[str, StepSums]:
    """Per device of one host, its busy, communication and overlap seconds in the (global) steps."""
    with np.load(path, allow_pickle=False) as z:
        devices = [str(d) for d in z["devices"]] if "devices" in z.files else []
        tables: tuple[dict[str, Merged], dict[str, Merged]] = ({}, {})
        for n, d in enumerate(devices):
            for kind, table in zip(("compute", "comm"), tables, strict=True):
                if f"{kind}{n}_starts" in z.files:
                    table[d] = Merged(z[f"{kind}{n}_starts"], z[f"{kind}{n}_ends"])
    return device_step_sums(steps, *tables)


@dataclasses.dataclass(frozen=True)
class Merge:
    """The merged report and the host parts' views (analysis/hostviews.py), with how the work was run."""

    report: ProfileReport
    hosts: tuple[str, ...]
    views: HostViews
    workers: int
    engine: str


def many_host_report(
    paths: Sequence[str | Path],
    chip: Chip,
    hlo: str | None = None,
    mesh: str | None = None,
    topology: str | None = None,
    *,
    workers: int | None = None,
    cluster: str | None = None,
    progress: HostProgress | None = None,
    source: str | None = None,
) -> Merge:
    """The report of every host of ``paths`` (:func:`host_files`), each host reduced in a worker: ``workers``
    local processes (default: :func:`default_workers`; 1 runs in this process) or the Dask cluster at
    ``cluster``. Equal to :func:`~rooftop.analysis.profile.profile_report` of one process on the same files."""
    files = host_files(paths)
    if workers is not None and workers < 1:
        raise OptionError(Option("workers"), f" {workers}: give 1 or more")
    n = len(files)
    with tempfile.TemporaryDirectory(prefix="rooftop-hosts-") as spill:
        parts: list[HostPart | None] = [None] * n
        priced: dict[tuple[Any, ...], tuple[int, OpPricing]] = {}
        count = workers or default_workers(files)
        args = (_packed(chip), hlo, mesh, topology)
        runs = (
            dask_parts(reduce_host, files, args, cluster) if cluster else local_parts(reduce_host, files, args, count)
        )
        for done, (i, part) in enumerate(runs, 1):
            spilled = Path(spill) / f"{i}.npz"
            spilled.write_bytes(part.intervals)
            for key, op in part.pricing.items():  # one per op is kept: the first host's, as one process does
                if key not in priced or priced[key][0] > i:
                    priced[key] = (i, op)
            parts[i] = dataclasses.replace(part, intervals=str(spilled).encode(), pricing={})
            if progress is not None:
                progress(done, n, part.host, part.events)
        ready = [p for p in parts if p is not None]
        pricing = {key: p for key, (_, p) in priced.items()}
        report, steps = _merge(ready, pricing, source or ", ".join(map(str, paths)))
        sums: dict[str, StepSums] = {}
        for p in ready:  # one host's intervals at a time
            sums.update(_step_sums(Path(p.intervals.decode()), steps))
    report = dataclasses.replace(report, steps=tuple(step_table(steps, sums)))
    report = opening(report, choose_from((d for p in ready for d in p.devices), load_chips(), chip))
    used = 0 if cluster else min(count, n)  # a cluster's workers are its own
    return Merge(report, tuple(p.host for p in ready), host_views(ready), used, "dask" if cluster else "processes")


#: bytes of profile per local worker below which a process's start (a Python with JAX: seconds) is not repaid
BYTES_PER_WORKER = 64 << 20


def default_workers(files: Sequence[Path]) -> int:
    """One process per CPU, at most one per host and one per :data:`BYTES_PER_WORKER` of profile (small
    profiles are read in this process)."""
    size = sum(os.stat(f).st_size for f in files)
    return max(1, min(len(files), os.cpu_count() or 1, -(-size // BYTES_PER_WORKER)))


def _merge(
    parts: Sequence[HostPart], pricing: Mapping[tuple[Any, ...], OpPricing], source: str
) -> tuple[ProfileReport, list[Step]]:
    """The report of the parts (steps left empty: measured after, per host) and the steps of every host."""
    firsts: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for p in parts:
        for key, op in p.ops.items():
            firsts[key] = min(firsts.get(key, op.first), op.first)
    ops = []
    for key in sorted(firsts, key=firsts.__getitem__):
        mine = [p.ops[key] for p in parts if key in p.ops]
        busy = total(x for o in mine for x in o.busy)
        exposed = None
        if all(o.spans is not None for o in mine):
            spans = total(x for o in mine for x in o.spans or ())
            exposed = total(x for o in mine for x in o.hidden or ()) / spans if spans else None
        measured = Measured(sum(o.count for o in mine), sum(o.devices for o in mine), busy, exposed)
        ops.append(pricing[key].report(measured, {}))
    marks = [m for p in parts for m in p.marks]
    steps = steps_of(marks, [] if marks else sorted(m for p in parts for m in p.modules))
    memory = memory_summary(sorted(s for p in parts for s in p.memory))
    notes = list(dict.fromkeys(n for p in parts for n in p.notes))
    label = next((p.chip for p in parts if p.chip != "-"), "-")
    report = assemble_parts(source, label, ops, (), memory, parts[0].sharding if parts else (), notes)
    return report, steps
