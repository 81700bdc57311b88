"""Profiler traces -> one table of op events.

``load_trace(path)`` reads, into the same :class:`Trace`:

- a JAX profiler log directory (``<logdir>/plugins/profile/<run>/<host>.xplane.pb``, one file per host;
  the newest run unless a run directory is given), or one ``.xplane.pb`` file — read with JAX's own
  ``jax.profiler.ProfileData`` (see :mod:`rooftop.analysis.trace_xplane`);
- Chrome / Perfetto trace-event JSON (``*.trace.json.gz``, ``perfetto_trace.json.gz``, ``.json``) written by
  JAX, and PyTorch profiler (Kineto) JSON traces — streamed, never held as text
  (see :mod:`rooftop.analysis.trace_json`).

Every row is an :class:`OpEvent` with SI seconds. ``kind`` says what the row is: ``"op"`` (one HLO
instruction executed on a device: TPU ``XLA Ops`` line, XLA:CPU thunk), ``"kernel"`` (a GPU kernel; one
HLO op may run as several), ``"step"`` (a step marker), ``"module"`` (an HLO module execution), ``"memcpy"``
(device memory copy or set) or ``"other"`` (host activity, launches, framework ops). The table is
columnar (:class:`EventTable`), a read-only sequence of ``OpEvent``.

Pure helpers on a Trace: :func:`op_executions` (kernels grouped per module, instruction and execution),
:func:`group_ops` (count, total, mean, per-device totals per op) and :func:`detect_steps`.
"""

from __future__ import annotations

import bisect
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cache
from operator import itemgetter
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, overload

from rooftop.analysis.gcpause import paused_gc
from rooftop.errors import InvalidConfigError

KINDS = ("op", "kernel", "step", "module", "memcpy", "other")
FORMATS = ("xplane", "chrome-json", "kineto")
ProgressFn = Callable[[int, int], None]
"""``progress(events_loaded, bytes_read)``; called every few thousand events and once at the end."""

_EMPTY: Mapping[str, str] = MappingProxyType({})
_FLUSH_ROWS = 1 << 14  # RowBuilder: rows collected as tuples, moved into columns this many at a time
_DIGITS = re.compile(r"(\d+)")


def args_view(raw: Mapping[Any, Any] | None) -> Mapping[str, str]:
    """Read-only string view of stored args: stats as read (str, int, float, lists) become text; internal
    ``_``-prefixed stats, unnamed stats and bytes payloads are left out. Loaders store the raw dicts so
    that the conversion is paid only for the rows that are looked at."""
    if not raw:
        return _EMPTY
    out = {}
    for k, v in raw.items():
        if not k or k[0] == "_" or v is None or isinstance(v, bytes):
            continue
        if v.__class__ is not str:
            v = json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else str(v)
        out[k] = v
    return MappingProxyType(out)


@dataclass(frozen=True, slots=True)
class OpEvent:
    """One timed event. ``module`` / ``instruction`` are the HLO module and instruction names when known."""

    device: str
    line: str
    name: str
    module: str | None
    instruction: str | None
    start_s: float
    duration_s: float
    step: int | None
    kind: str
    correlation: str | None
    args: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


COLUMNS = tuple(f.name for f in fields(OpEvent))


class MemorySample(NamedTuple):
    time_s: float
    bytes_in_use: float
    device: str


class EventTable(Sequence[OpEvent]):
    """Column store of events: one tuple per field of :class:`OpEvent`, rows materialised on access. The
    ``args`` column holds the dicts as loaded (values str, int, float or lists); ``OpEvent.args`` is their
    string view (:func:`args_view`)."""

    __slots__ = ("_cols", "_n")

    def __init__(self, columns: Mapping[str, Sequence[Any]]) -> None:
        missing = [c for c in COLUMNS if c not in columns]
        if missing:
            raise InvalidConfigError(f"event table lacks columns {missing}; needs {list(COLUMNS)}")
        cols = {c: tuple(columns[c]) for c in COLUMNS}
        lengths = {len(v) for v in cols.values()}
        if len(lengths) > 1:
            raise InvalidConfigError(f"event table columns differ in length: {sorted(lengths)}")
        self._cols = cols
        self._n = lengths.pop() if lengths else 0

    @classmethod
    def from_events(cls, events: Iterable[OpEvent]) -> EventTable:
        rows = list(events)
        return cls({c: [getattr(e, c) for e in rows] for c in COLUMNS})

    @classmethod
    def concat(cls, tables: Sequence[EventTable]) -> EventTable:
        return cls({c: [v for t in tables for v in t._cols[c]] for c in COLUMNS})

    def column(self, name: str) -> tuple[Any, ...]:
        if name not in self._cols:
            raise InvalidConfigError(f"unknown event column {name!r}; columns: {', '.join(COLUMNS)}")
        return self._cols[name]

    def __len__(self) -> int:
        return self._n

    def _row(self, i: int) -> OpEvent:
        c = self._cols
        return OpEvent(*(c[k][i] for k in COLUMNS[:-1]), args=args_view(c["args"][i]))

    @overload
    def __getitem__(self, index: int) -> OpEvent: ...
    @overload
    def __getitem__(self, index: slice) -> list[OpEvent]: ...
    def __getitem__(self, index: int | slice) -> OpEvent | list[OpEvent]:
        if isinstance(index, slice):
            return [self._row(i) for i in range(*index.indices(self._n))]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError(index)
        return self._row(index)

    def __iter__(self) -> Iterator[OpEvent]:
        for i in range(self._n):
            yield self._row(i)

    def __repr__(self) -> str:
        return f"EventTable({self._n} events)"


@dataclass(frozen=True)
class Trace:
    """A loaded profile: the event table plus what the profile says about modules, memory and devices."""

    events: EventTable
    source: str
    format: str
    hlo_protos: Mapping[str, bytes] = field(default_factory=dict)
    memory: tuple[MemorySample, ...] = ()
    devices: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise InvalidConfigError(f"unknown trace format {self.format!r}; formats: {', '.join(FORMATS)}")

    def of_kind(self, *kinds: str) -> list[OpEvent]:
        col = self.events.column("kind")
        return [self.events[i] for i, k in enumerate(col) if k in kinds]


@cache
def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that orders ``GPU:2`` before ``GPU:10``."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(text))


class RowBuilder:
    """Collects rows as tuples in :data:`COLUMNS` order (strings interned), then assigns steps and
    transposes them into an EventTable."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []  # the newest rows; cleared in place by flush()
        self.columns: list[list[Any]] = [[] for _ in COLUMNS]
        self.flushed = 0
        self.strings: dict[str, str] = {}
        self.launch_s: dict[str, float] = {}  # host launch time by correlation id (for device events)

    def flush(self) -> None:
        """Move the rows collected so far into the columns (so that row tuples never pile up)."""
        if self.rows:
            for column, values in zip(self.columns, zip(*self.rows, strict=True), strict=True):
                column.extend(values)
            self.flushed += len(self.rows)
            self.rows.clear()

    def add(
        self,
        device: str,
        line: str,
        name: str,
        module: str | None,
        instruction: str | None,
        start_s: float,
        duration_s: float,
        step: int | None,
        kind: str,
        correlation: str | None,
        args: Mapping[str, str],
    ) -> None:
        s = self.strings
        if module is not None:
            module = s.setdefault(module, module)
        if instruction is not None:
            instruction = s.setdefault(instruction, instruction)
        rows = self.rows
        rows.append((s.setdefault(device, device), s.setdefault(line, line), s.setdefault(name, name), module,
                     instruction, start_s, duration_s, step, kind, correlation, args or _EMPTY))  # fmt: skip
        if len(rows) >= _FLUSH_ROWS:
            self.flush()

    def __len__(self) -> int:
        return self.flushed + len(self.rows)

    def build(self, line_names: Mapping[str, str] | None = None) -> EventTable:
        """The table; ``line_names`` renames lines (placeholders for names a trace gives at its end)."""
        self.flush()
        cols = dict(zip(COLUMNS, self.columns, strict=True))
        self.columns, self.flushed = [[] for _ in COLUMNS], 0
        if line_names:
            cols["line"] = [line_names.get(x, x) for x in cols["line"]]
        self._assign_steps(cols)
        for c in COLUMNS:  # one column at a time, each list freed as its tuple is made (EventTable keeps tuples)
            cols[c] = tuple(cols[c])  # type: ignore[assignment]
        return EventTable(cols)

    def _assign_steps(self, c: dict[str, list[Any]]) -> None:
        """Give each event without a step the step whose marker window holds it; a device event is placed
        by the host time of its launch (same correlation id) when that is known."""
        marks = [i for i, k in enumerate(c["kind"]) if k == "step"]
        if not marks:
            return
        order = sorted(marks, key=lambda i: c["start_s"][i])
        numbers = [c["step"][i] if c["step"][i] is not None else n for n, i in enumerate(order)]
        windows = [
            (c["start_s"][i], c["start_s"][i] + c["duration_s"][i], n) for i, n in zip(order, numbers, strict=True)
        ]
        starts = [w[0] for w in windows]
        step_col, launch = c["step"], self.launch_s
        for i, (t, corr) in enumerate(zip(c["start_s"], c["correlation"], strict=True)):
            if step_col[i] is not None:
                continue
            if corr is not None and c["kind"][i] in ("kernel", "memcpy", "op"):
                t = launch.get(corr, t)
            j = bisect.bisect_right(starts, t) - 1
            if j >= 0 and t <= windows[j][1]:
                step_col[i] = windows[j][2]


def load_trace(path: str | Path, progress: ProgressFn | None = None) -> Trace:
    """Load a JAX profiler directory, ``.xplane.pb``, Chrome/Perfetto JSON or Kineto JSON trace."""
    with paused_gc():
        return _load(Path(path), progress)


def _load(p: Path, progress: ProgressFn | None) -> Trace:
    if not p.exists():
        raise InvalidConfigError(f"{p}: no such file or directory; expected a profile directory or trace file")
    if p.is_dir():
        xplanes, jsons = _profile_files(p)
        if xplanes:
            from rooftop.analysis.trace_xplane import load_xplanes

            return load_xplanes(xplanes, source=str(p), progress=progress)
        if len(jsons) > 1:
            names = ", ".join(j.name for j in jsons)
            raise InvalidConfigError(f"{p}: several JSON traces ({names}); pass one file")
        p = jsons[0]
    name = p.name.lower()
    if name.endswith(".pb"):
        from rooftop.analysis.trace_xplane import load_xplanes

        return load_xplanes([p], source=str(p), progress=progress)
    if name.endswith((".json", ".json.gz", ".gz")):
        from rooftop.analysis.trace_json import load_json_trace

        return load_json_trace(p, progress=progress)
    raise InvalidConfigError(
        f"{p}: unknown trace file type; expected .xplane.pb, .json, .json.gz or a JAX profiler directory"
    )


def _profile_files(directory: Path) -> tuple[list[Path], list[Path]]:
    """The ``*.xplane.pb`` files of the run to load, or the JSON traces, under ``directory``."""
    for run in _candidate_runs(directory):
        xplanes = sorted(run.glob("*.xplane.pb"))
        if xplanes:
            return xplanes, []
        jsons = sorted(f for f in run.iterdir() if f.is_file() and f.name.lower().endswith((".json", ".json.gz")))
        preferred = [f for f in jsons if f.name.endswith(".trace.json.gz") and not f.name.startswith("perfetto")]
        if preferred or jsons:
            return [], preferred[:1] if len(preferred) == 1 else jsons
    raise InvalidConfigError(
        f"{directory}: no profile found; expected <logdir>/plugins/profile/<run>/<host>.xplane.pb, "
        "a run directory with .xplane.pb files, or a directory with one .json/.json.gz trace"
    )


def _candidate_runs(directory: Path) -> list[Path]:
    """``directory`` itself, then the newest run under ``plugins/profile`` (or under ``directory``)."""
    runs: list[Path] = [directory]
    for base in (directory / "plugins" / "profile", directory):
        if base.is_dir():
            subdirs = [d for d in base.iterdir() if d.is_dir() and any(d.glob("*.xplane.pb"))]
            subdirs.sort(key=lambda d: (d.name, d.stat().st_mtime), reverse=True)
            runs.extend(subdirs[:1])
    return runs


# ----------------------------------------------------------------------------------------------------
# Grouping helpers (pure functions of a Trace; deterministic order)


class OpExecution(NamedTuple):
    """One execution of one op on one device: the kernels (or the single op event) it ran as."""

    device: str
    module: str | None
    instruction: str | None
    name: str
    start_s: float
    end_s: float
    busy_s: float
    events: int
    kernel_names: tuple[str, ...]
    step: int | None


@dataclass(frozen=True)
class OpGroup:
    """Statistics of one op over its executions; ``total_s`` sums the busy time of its kernels."""

    module: str | None
    instruction: str | None
    name: str
    count: int
    events: int
    total_s: float
    mean_s: float
    min_s: float
    max_s: float
    per_device_s: Mapping[str, float]
    per_device_count: Mapping[str, int]
    kernel_names: tuple[str, ...]


@dataclass(frozen=True)
class Step:
    index: int
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def op_executions(trace: Trace, kinds: Sequence[str] = ("op", "kernel"), *, by_time: bool = True) -> list[OpExecution]:
    """Op events grouped per (device, module, instruction, execution).

    An ``op`` event is one execution. Consecutive ``kernel`` events on the same device and line with the
    same (module, instruction) are one execution of that instruction (a convolution running as an im2col
    kernel and a GEMM kernel); kernels with no HLO instruction group by kernel name, one per event.
    Ordered by start time (then device, name), or by (device, line, start) with ``by_time=False``.
    """
    with paused_gc():
        return _op_executions(trace, kinds, by_time)


def _op_executions(trace: Trace, kinds: Sequence[str], by_time: bool) -> list[OpExecution]:
    ev = trace.events
    device, line, kind = ev.column("device"), ev.column("line"), ev.column("kind")
    streams: dict[tuple[str, str], list[int]] = {}
    for i, (k, d, ln) in enumerate(zip(kind, device, line, strict=True)):
        if k in kinds:
            rows = streams.get((d, ln))
            if rows is None:
                streams[(d, ln)] = [i]
            else:
                rows.append(i)
    by_name, by_start = ev.column("name").__getitem__, ev.column("start_s").__getitem__
    out: list[OpExecution] = []
    singles: dict[str, tuple[str]] = {}
    for key in sorted(streams):  # (device, line, start, name), ties in row order: two stable sorts
        rows = streams.pop(key)
        rows.sort(key=by_name)
        rows.sort(key=by_start)
        _stream_executions(ev, key[0], rows, out, singles)
    if by_time:
        _sort_by_time(out)
    return out


def _stream_executions(
    ev: EventTable, device: str, rows: list[int], out: list[OpExecution], singles: dict[str, tuple[str]]
) -> None:
    """Append the executions of one (device, line)'s op rows, in time order: consecutive kernels of the
    same (module, instruction) are one execution (an op with no instruction is keyed by its name)."""
    name, module, instruction, start, duration, step, kind = (
        ev.column(c) for c in ("name", "module", "instruction", "start_s", "duration_s", "step", "kind")
    )
    open_ = False
    prev_mod = prev_what = mod0 = inst0 = None
    name0, names, start0, end, busy, events, step0 = "", (), 0.0, 0.0, 0.0, 0, None
    for i in rows:
        inst, nm, mod, dur = instruction[i], name[i], module[i], duration[i]
        what = inst if inst is not None else nm
        if open_ and inst is not None and what == prev_what and mod == prev_mod and kind[i] == "kernel":
            if nm not in names:
                names = (*names, nm)
            end = max(end, start[i] + dur)
            busy = busy + dur
            events += 1
        else:
            if open_:
                out.append(OpExecution(device, mod0, inst0, name0, start0, end, busy, events, names, step0))
            names = singles.get(nm)
            if names is None:
                names = singles[nm] = (nm,)
            mod0, inst0, name0, start0, step0 = mod, inst, inst or nm, start[i], step[i]
            end, busy, events, open_ = start0 + dur, dur, 1, True
        prev_mod, prev_what = mod, what
    if open_:
        out.append(OpExecution(device, mod0, inst0, name0, start0, end, busy, events, names, step0))


def _sort_by_time(out: list[OpExecution]) -> None:
    """Order by (start, natural device order, name), stably: sorted by start (the streams are runs already
    in time order), then each run of equal starts by (device, name)."""
    start = itemgetter(OpExecution._fields.index("start_s"))
    out.sort(key=start)
    starts = list(map(start, out))
    done, n = 0, len(out)
    for k in [k for k in range(1, n) if starts[k] == starts[k - 1]]:
        if k < done:
            continue
        j = k + 1
        while j < n and starts[j] == starts[k]:
            j += 1
        out[k - 1 : j] = sorted(out[k - 1 : j], key=lambda e: (natural_key(e.device), e.name))
        done = j


def group_ops(trace: Trace, kinds: Sequence[str] = ("op", "kernel")) -> list[OpGroup]:
    """Per op (module, instruction — or kernel name when there is no HLO instruction): executions, total,
    mean, min, max and per-device busy seconds. Sorted by total time, then by name."""
    with paused_gc():
        return _summarise(op_executions(trace, kinds, by_time=False))


def _summarise(executions: list[OpExecution]) -> list[OpGroup]:
    acc: dict[tuple[str | None, str | None, str], list[OpExecution]] = defaultdict(list)
    for ex in executions:
        acc[(ex.module, ex.instruction, ex.name)].append(ex)
    groups = []
    for (module, inst, name), exs in acc.items():
        per_dev: dict[str, float] = defaultdict(float)
        per_count: dict[str, int] = defaultdict(int)
        for ex in exs:
            per_dev[ex.device] += ex.busy_s
            per_count[ex.device] += 1
        busy = [ex.busy_s for ex in exs]
        total = sum(busy)
        devs = sorted(per_dev, key=natural_key)
        kernels = tuple(sorted({k for ex in exs for k in ex.kernel_names}))
        groups.append(
            OpGroup(
                module,
                inst,
                name,
                len(exs),
                sum(ex.events for ex in exs),
                total,
                total / len(exs),
                min(busy),
                max(busy),
                MappingProxyType({d: per_dev[d] for d in devs}),
                MappingProxyType({d: per_count[d] for d in devs}),
                kernels,
            )
        )
    groups.sort(key=lambda g: (-g.total_s, g.module or "", g.name))
    return groups


def detect_steps(trace: Trace) -> list[Step]:
    """Steps from step markers (a ``Steps`` line, ``StepTraceAnnotation`` / ``step_num``, ``ProfilerStep#N``),
    merged across devices by step number; else the executions of the main HLO module (the module with
    the most busy time), the k-th execution on every device forming step k."""
    kind, step = trace.events.column("kind"), trace.events.column("step")
    start, dur = trace.events.column("start_s"), trace.events.column("duration_s")
    marks = [i for i, k in enumerate(kind) if k == "step"]
    if marks:
        spans: dict[int, list[float]] = {}
        numbered = sorted(marks, key=lambda i: start[i])
        for n, i in enumerate(numbered):
            index = step[i] if step[i] is not None else n
            lo, hi = spans.get(index, [start[i], start[i] + dur[i]])
            spans[index] = [min(lo, start[i]), max(hi, start[i] + dur[i])]
        return [Step(k, lo, hi) for k, (lo, hi) in sorted(spans.items())]
    return _module_steps(trace)


def _module_steps(trace: Trace) -> list[Step]:
    execs = module_executions(trace)
    if not execs:
        return []
    busy: dict[str, float] = defaultdict(float)
    for module, _device, lo, hi in execs:
        busy[module] += hi - lo
    main = min(busy, key=lambda m: (-busy[m], m))
    per_device: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for module, device, lo, hi in execs:
        if module == main:
            per_device[device].append((lo, hi))
    runs = [sorted(v) for v in per_device.values()]
    longest = max(len(v) for v in runs)
    steps = []
    for k in range(longest):
        spans = [v[k] for v in runs if len(v) > k]
        steps.append(Step(k, min(s[0] for s in spans), max(s[1] for s in spans)))
    return steps


def module_executions(trace: Trace) -> list[tuple[str, str, float, float]]:
    """(module, device, start_s, end_s) per module execution: ``module`` events when the profile has them;
    else op/kernel events grouped by ``run_id`` (XLA:CPU), or split where the module's first instruction
    comes round again (GPU kernels carry no run id)."""
    names = ("kind", "module", "device", "start_s", "duration_s", "instruction", "name", "args")
    kind, module, device, start, dur, instruction, name, args = (trace.events.column(n) for n in names)
    rows = [i for i, k in enumerate(kind) if k == "module" and module[i]]
    if rows:
        return sorted((module[i], device[i], start[i], start[i] + dur[i]) for i in rows)
    ops = [i for i, k in enumerate(kind) if k in ("op", "kernel") and module[i]]
    ops.sort(key=lambda i: (device[i], start[i]))
    spans: dict[tuple[str, str, str], tuple[float, float]] = {}
    first: dict[tuple[str, str], str] = {}
    last: dict[tuple[str, str], str] = {}
    counter: dict[tuple[str, str], int] = defaultdict(int)
    for i in ops:
        dm, what = (module[i], device[i]), instruction[i] or name[i]
        run = args[i].get("run_id")
        if run is None:
            if what == first.setdefault(dm, what) and last.get(dm, what) != what:
                counter[dm] += 1
            run = counter[dm]
        last[dm] = what
        key = (*dm, str(run))
        lo, hi = spans.get(key, (start[i], start[i] + dur[i]))
        spans[key] = (min(lo, start[i]), max(hi, start[i] + dur[i]))
    return sorted((m, d, lo, hi) for (m, d, _run), (lo, hi) in spans.items())


def hlo_proto(trace: Trace, module: str, program_id: int | str | None = None) -> bytes | None:
    """The serialized HloProto of ``module`` ("jit_f(12)", or "jit_f" with/without ``program_id``)."""
    protos = trace.hlo_protos
    if module in protos:
        return protos[module]
    if program_id is not None and f"{module}({program_id})" in protos:
        return protos[f"{module}({program_id})"]
    matches = sorted(k for k in protos if k.rsplit("(", 1)[0] == module)
    return protos[matches[-1]] if len(matches) == 1 else None


def hlo_text(trace: Trace, module: str, program_id: int | str | None = None) -> str | None:
    """HLO text of a module in the trace's metadata plane, printed by XLA (needs jax); None if absent."""
    from rooftop.analysis.trace_xplane import hlo_proto_to_text

    proto = hlo_proto(trace, module, program_id)
    return None if proto is None else hlo_proto_to_text(proto)
