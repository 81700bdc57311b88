"""The event table every trace loader produces: :class:`OpEvent` rows in a columnar
:class:`EventTable`, inside a :class:`Trace` with what the profile says about modules, memory and devices.

Every row has SI seconds. ``kind`` says what the row is: ``"op"`` (one HLO instruction executed on a
device: TPU ``XLA Ops`` line, XLA:CPU thunk), ``"kernel"`` (a GPU kernel; one HLO op may run as several),
``"step"`` (a step marker), ``"module"`` (an HLO module execution), ``"memcpy"`` (device memory copy or
set) or ``"other"`` (host activity, launches, framework ops). The loaders (:mod:`rooftop.analysis.trace.xplane`,
:mod:`rooftop.analysis.trace.chrome_json`) fill a :class:`~rooftop.analysis.trace.rows.RowBuilder`; this module
imports none of them.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cache
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar, overload

from rooftop.errors import InvalidConfigError

KINDS = ("op", "kernel", "step", "module", "memcpy", "other")
FORMATS = ("xplane", "chrome-json", "kineto")
ProgressFn = Callable[[int, int], None]
"""``progress(events_loaded, bytes_read)``; called every few thousand events and once at the end."""

_EMPTY: Mapping[str, str] = MappingProxyType({})
#: columns stored as machine doubles (8 bytes a value, not a pointer to a 24-byte float object)
FLOAT_COLUMNS = ("start_s", "duration_s")
#: args that identify one event (a correlation or External id, a run, a flow): each event keeps its own
#: value; the rest of its args is a dict shared with every event whose other args are the same
OWN_ARGS = ("correlation_id", "External id", "run_id", "device_offset_ps", "device_duration_ps", "flow", "_p", "_c")
_T = TypeVar("_T")
_DIGITS = re.compile(r"([0-9]+)")  # ASCII only: "²" is a digit to str.isdigit but not to int()
_INT64 = 1 << 63


def correlation_key(value: Any) -> int | str:
    """A correlation id as the table keeps it: an int where its text is an int64's (``5`` and ``"5"``),
    else its text (``"05"``, ``"5.0"``, ``"True"``). Two ids are the same key exactly when their texts are
    equal, as when every id was kept as text, at half the memory (a 7-digit id: 28 bytes, not 56); the
    text of an int past Python's 4,300-digit limit cannot be written (a ValueError, as before).
    ``OpEvent.correlation`` is the text."""
    if value.__class__ is int:
        return value if -_INT64 <= value < _INT64 else str(value)
    text = value if value.__class__ is str else str(value)
    if 0 < len(text) <= 20 and text.isascii() and (text.isdigit() or (text[0] == "-" and text[1:].isdigit())):
        number = int(text)
        if -_INT64 <= number < _INT64 and str(number) == text:
            return number
    return text


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


class EventArgs(Mapping[str, Any]):
    """The args of one event as two parts: ``shared``, a dict of the args it has in common with other
    events (one dict for all of them), and its own value(s) of the :data:`OWN_ARGS` keys it has (``key``
    a name and ``value`` its value, or a tuple of names and a tuple of values). Read-only."""

    __slots__ = ("key", "shared", "value")

    def __init__(self, shared: Mapping[str, Any], key: str | tuple[str, ...], value: Any) -> None:
        self.shared, self.key, self.value = shared, key, value

    def __getitem__(self, name: str) -> Any:
        key = self.key
        if key.__class__ is str:
            if name == key:
                return self.value
        elif name in key:
            return self.value[key.index(name)]
        return self.shared[name]

    def get(self, name: str, default: Any = None) -> Any:
        key = self.key
        if key.__class__ is str:
            if name == key:
                return self.value
        elif name in key:
            return self.value[key.index(name)]
        return self.shared.get(name, default)

    def __contains__(self, name: object) -> bool:
        key = self.key
        return (name == key if key.__class__ is str else name in key) or name in self.shared

    def __iter__(self) -> Iterator[str]:
        yield from self.shared
        if self.key.__class__ is str:
            yield self.key
        else:
            yield from self.key

    def __len__(self) -> int:
        return len(self.shared) + (1 if self.key.__class__ is str else len(self.key))

    def __repr__(self) -> str:
        return f"EventArgs({dict(self)!r})"


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


def _column(name: str, values: Sequence[Any]) -> Sequence[Any]:
    """A column as stored: times as an ``array('d')`` (when every value is a number), the others as tuples."""
    if name in FLOAT_COLUMNS:
        if values.__class__ is array and values.typecode == "d":
            return values
        try:
            return array("d", values)
        except (TypeError, OverflowError):  # not numbers (a hand-made table): kept as given
            pass
    return values if values.__class__ is tuple else tuple(values)


class EventTable(Sequence[OpEvent]):
    """Column store of events: one sequence per field of :class:`OpEvent`, rows materialised on access:
    ``start_s`` and ``duration_s`` as ``array('d')``, the others as tuples. The ``args`` column holds the
    args as loaded (values str, int, float or lists; a dict, or an :class:`EventArgs` whose common part is
    shared with other events); ``OpEvent.args`` is their string view (:func:`args_view`). The
    ``correlation`` column holds ids as :func:`correlation_key` keeps them (an int where the text is an
    integer's); ``OpEvent.correlation`` is their text."""

    __slots__ = ("_cols", "_derived", "_n")

    def __init__(self, columns: Mapping[str, Sequence[Any]]) -> None:
        missing = [c for c in COLUMNS if c not in columns]
        if missing:
            raise InvalidConfigError(f"event table lacks columns {missing}; needs {list(COLUMNS)}")
        cols = {c: _column(c, columns[c]) for c in COLUMNS}
        lengths = {len(v) for v in cols.values()}
        if len(lengths) > 1:
            raise InvalidConfigError(f"event table columns differ in length: {sorted(lengths)}")
        self._cols = cols
        self._n = lengths.pop() if lengths else 0
        self._derived: dict[Hashable, Any] = {}

    @classmethod
    def from_events(cls, events: Iterable[OpEvent]) -> EventTable:
        rows = list(events)
        return cls({c: [getattr(e, c) for e in rows] for c in COLUMNS})

    @classmethod
    def concat(cls, tables: Sequence[EventTable]) -> EventTable:
        return cls({c: [v for t in tables for v in t._cols[c]] for c in COLUMNS})

    def column(self, name: str) -> Sequence[Any]:
        if name not in self._cols:
            raise InvalidConfigError(f"unknown event column {name!r}; columns: {', '.join(COLUMNS)}")
        return self._cols[name]

    def derived(self, key: Hashable, make: Callable[[], _T]) -> _T:
        """A value computed from the table (whose columns never change) once: ``make()`` the first time
        ``key`` is asked for, the same value after that (an analysis that reads a column's codes several
        times pays for them once)."""
        if key not in self._derived:
            self._derived[key] = make()
        return self._derived[key]  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return self._n

    def _row(self, i: int) -> OpEvent:
        c = self._cols  # positional, in the field order of OpEvent (faster than keywords or unpacking)
        corr = c["correlation"][i]  # (an int or its text: correlation_key)
        text = corr if corr is None or corr.__class__ is str else str(corr)
        return OpEvent(c["device"][i], c["line"][i], c["name"][i], c["module"][i], c["instruction"][i],
                       c["start_s"][i], c["duration_s"][i], c["step"][i], c["kind"][i], text,
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
