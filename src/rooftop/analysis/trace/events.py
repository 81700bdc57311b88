"""The event table every trace loader produces: :class:`OpEvent` rows in a columnar
:class:`EventTable`, inside a :class:`Trace` with what the profile says about modules, memory and devices.

Every row has SI seconds. ``kind`` says what the row is: ``"op"`` (one HLO instruction executed on a
device: TPU ``XLA Ops`` line, XLA:CPU thunk), ``"kernel"`` (a GPU kernel; one HLO op may run as several),
``"step"`` (a step marker), ``"module"`` (an HLO module execution), ``"memcpy"`` (device memory copy or
set) or ``"other"`` (host activity, launches, framework ops). The loaders (:mod:`rooftop.analysis.trace.xplane`,
:mod:`rooftop.analysis.trace.chrome_json`) fill a :class:`RowBuilder`; this module imports none of them.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cache
from types import MappingProxyType
from typing import Any, NamedTuple, overload

from rooftop.errors import InvalidConfigError

KINDS = ("op", "kernel", "step", "module", "memcpy", "other")
FORMATS = ("xplane", "chrome-json", "kineto")
ProgressFn = Callable[[int, int], None]
"""``progress(events_loaded, bytes_read)``; called every few thousand events and once at the end."""

_EMPTY: Mapping[str, str] = MappingProxyType({})
_FLUSH_ROWS = 1 << 14  # RowBuilder: rows collected as tuples, moved into columns this many at a time
_DIGITS = re.compile(r"([0-9]+)")  # ASCII only: "²" is a digit to str.isdigit but not to int()


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
    """Memory in use on a device at a time; ``reserved_bytes`` is what the runtime holds beside the heap
    (the TPU program stack), which xprof's peakBytesInUse adds."""

    time_s: float
    bytes_in_use: float
    device: str
    reserved_bytes: float = 0.0


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
        c = self._cols  # positional, in the field order of OpEvent (faster than keywords or unpacking)
        return OpEvent(c["device"][i], c["line"][i], c["name"][i], c["module"][i], c["instruction"][i],
                       c["start_s"][i], c["duration_s"][i], c["step"][i], c["kind"][i], c["correlation"][i],
                       args_view(c["args"][i]))  # fmt: skip

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
    """Sort key that orders ``GPU:2`` before ``GPU:10``: text parts as text, runs of ASCII digits by value,
    compared as (length without leading zeros, digits), so a 5,000-digit run needs no int conversion."""
    parts = _DIGITS.split(str(text))
    return tuple((len(p.lstrip("0")), p.lstrip("0"), p) if k % 2 else p for k, p in enumerate(parts))


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
