"""How the loaders build the event table: a :class:`RowBuilder` collects rows (strings interned, each
event's args stored as an :class:`~rooftop.analysis.trace.events.EventArgs` whose common part is shared),
then places each event in its step's window and transposes the rows into an
:class:`~rooftop.analysis.trace.events.EventTable`. The loaders (:mod:`rooftop.analysis.trace.xplane`,
:mod:`rooftop.analysis.trace.chrome_json`) import this module; it imports none of them.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import sys
from array import array
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rooftop.analysis.gcpause import release_free_heap
from rooftop.analysis.trace.events import _EMPTY, COLUMNS, FLOAT_COLUMNS, OWN_ARGS, EventArgs, EventTable, _column

FLUSH_ROWS = 1 << 14  # RowBuilder: rows collected as tuples, moved into columns this many at a time
_OWN = frozenset(OWN_ARGS)
#: classes of values no value of another of them equals (1 == True == 1.0, so bool and float are not here)
_PLAIN: frozenset[Any] = frozenset({str, int, type(None), bytes})
_BY_TEXT = object()  # marks the keys of args compared by the text of their values
_MAX_SHARED = 1 << 14  # distinct shared args kept before interning must pay its way (a hit per entry)


def empty_columns() -> list[Any]:
    return [array("d") if c in FLOAT_COLUMNS else [] for c in COLUMNS]


class RowBuilder:
    """Collects rows as tuples in :data:`COLUMNS` order (strings interned, args stored by :meth:`args`),
    then assigns steps and transposes them into an EventTable."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []  # the newest rows; cleared in place by flush()
        self.columns: list[Any] = empty_columns()
        self.flushed = 0
        self.strings: dict[str, str] = {}
        self.launch_s: dict[str, float] = {}  # host launch time by correlation id (for device events)
        self.shared: dict[tuple[Any, ...], Mapping[str, Any]] = {}  # args without their own ids -> one dict
        self.own_keys: dict[tuple[str, ...], tuple[str, ...]] = {}
        self.hits = 0
        self._appenders: list[Callable[[Any], None]] = []
        self._appenders_of: list[Any] | None = None  # the columns whose appends those are

    def args(self, args: dict[str, Any]) -> Mapping[str, Any]:
        """``args`` as stored: its :data:`OWN_ARGS` (ids that differ on every event) kept apart in an
        :class:`EventArgs`, the rest replaced by the first equal dict seen (values compared with their types:
        ``1``, ``1.0`` and ``true`` differ). ``args`` is the loader's own dict: its own ids are popped."""
        if not args:
            return _EMPTY
        if _OWN.isdisjoint(args):
            return self._shared(args)
        own = _OWN.intersection(args)
        key: Any
        value: Any
        if len(own) == 1:
            (key,) = own
            value = args.pop(key)
        else:
            names = tuple(k for k in OWN_ARGS if k in own)
            key = self.own_keys.setdefault(names, names)
            value = tuple([args.pop(k) for k in key])
        return EventArgs(self._shared(args) if args else _EMPTY, key, value)

    def _shared(self, args: dict[str, Any]) -> Mapping[str, Any]:
        if _PLAIN.issuperset(map(type, args.values())):  # equal keys: equal values of the same classes
            key: tuple[Any, ...] = tuple(args.items())
        else:  # floats, booleans, lists, objects: by class and text (repr tells -0.0 from 0.0, [1] from [1.0])
            try:
                key = (_BY_TEXT, *[(k, v.__class__, v if v.__class__ in _PLAIN else repr(v)) for k, v in args.items()])
            except (RecursionError, ValueError):  # nested too deep, or an int too long to write
                return args
        shared = self.shared
        hit = shared.get(key)
        if hit is not None:
            self.hits += 1
            return hit
        if len(shared) < _MAX_SHARED or self.hits >= len(shared):  # past the cap, only while it pays
            shared[key] = args
        return args

    def flush(self) -> None:
        """Move the rows collected so far into the columns (so that row tuples never pile up)."""
        if self.rows:
            for column, values in zip(self.columns, zip(*self.rows, strict=True), strict=True):
                column.extend(values)
            self.flushed += len(self.rows)
            self.rows.clear()

    def appenders(self) -> list[Callable[[Any], None]]:
        """The ``append`` of each column, in :data:`COLUMNS` order, for a loop that adds rows straight to
        the columns (no row tuple, nothing to transpose), the rows collected so far moved in first; the loop
        appends to every column (or to all but those it fills after it) and then calls :meth:`appended`.
        The list is made once per set of columns (a trace whose runs are one event long asks for it per
        event)."""
        if self.rows:
            self.flush()
        columns = self.columns
        if self._appenders_of is not columns:
            self._appenders, self._appenders_of = [column.append for column in columns], columns
        return self._appenders

    def appended(self, n: int, none: Sequence[int] = ()) -> None:
        """``n`` rows were added through :meth:`appenders`; the columns at the indices ``none`` (of
        :data:`COLUMNS`) are given None for each of them here."""
        if n == 1:
            appenders = self._appenders if self._appenders_of is self.columns else self.appenders()
            for c in none:
                appenders[c](None)
        else:
            for c in none:
                self.columns[c].extend(itertools.repeat(None, n))
        self.flushed += n

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
        args: Mapping[str, Any],
    ) -> None:
        """One row; ``args`` as :meth:`args` stores them."""
        s = self.strings
        if module is not None:
            module = s.setdefault(module, module)
        if instruction is not None:
            instruction = s.setdefault(instruction, instruction)
        rows = self.rows
        rows.append((s.setdefault(device, device), s.setdefault(line, line), s.setdefault(name, name), module,
                     instruction, start_s, duration_s, step, kind, correlation, args))  # fmt: skip
        if len(rows) >= FLUSH_ROWS:
            self.flush()

    def __len__(self) -> int:
        return self.flushed + len(self.rows)

    def take(self) -> list[Any]:
        """The rows so far as columns (in :data:`COLUMNS` order); the builder is left without them."""
        self.flush()
        columns, self.columns, self.flushed = self.columns, empty_columns(), 0
        return columns

    def extend(self, *columns: Sequence[Any]) -> None:
        """Add rows given as one sequence per column (in :data:`COLUMNS` order, all of one length) after
        those so far, each column extended in place."""
        self.flush()
        for column, values in zip(self.columns, columns, strict=True):
            column.extend(values)
        self.flushed += len(columns[0])

    def join(self, parts: Sequence[list[Any]]) -> None:
        """Add rows given as sets of columns (each as :meth:`take` returns them), in order, after those so
        far. Each column is made once at its final length and each part's column emptied as it is copied:
        joining the parts one after another (or extending) leaves the heap each outgrown column held behind,
        free but not given back (90 MiB of a 1.2M-event trace read by 8 processes)."""
        self.flush()
        self.flushed += sum(len(part[0]) for part in parts)
        self._appenders_of = None  # the columns are new lists
        for c, column in enumerate(self.columns):
            if column.__class__ is array:  # 8 bytes a row, grown in place
                for part in parts:
                    column.extend(part[c])
                    part[c] = column[:0]
                continue
            merged = [None] * (len(column) + sum(len(part[c]) for part in parts))
            merged[: len(column)] = column
            at = len(column)
            self.columns[c] = column = merged
            for part in parts:
                piece, part[c] = part[c], []
                merged[at : at + len(piece)] = piece
                at += len(piece)
                del piece
            if len(parts) > 1:  # the parts' lists of this column, freed: given back before the next is made
                release_free_heap()

    def build(self, line_names: Mapping[str, str] | None = None) -> EventTable:
        """The table; ``line_names`` renames lines (placeholders for names a trace gives at its end)."""
        self.shared.clear()
        cols = dict(zip(COLUMNS, self.take(), strict=True))
        if line_names:
            cols["line"] = list(map(line_names.get, cols["line"], cols["line"]))
        self._assign_steps(cols)
        for c in COLUMNS:  # one column at a time, each list freed as its tuple is made (EventTable keeps tuples)
            cols[c] = _column(c, cols[c])
        return EventTable(cols)

    def _assign_steps(self, c: dict[str, Any]) -> None:
        """Give each event without a step the step whose marker window holds it (the last window to start
        by then, if it has not ended); a device event is placed by the host time of its launch (same
        correlation id) when that is known. Column-wise, a chunk of rows at a time (bisected at once); a
        table of at most :data:`_FEW_ROWS` rows read before numpy is loaded is placed row by row with
        ``bisect`` instead (the same windows and comparisons: importing numpy would cost more)."""
        kind_col, step_col = c["kind"], c["step"]
        kinds = {k: n for n, k in enumerate(dict.fromkeys(kind_col))}  # each kind's code, read once per row
        if "step" not in kinds:
            return
        if _row_by_row(len(kind_col)):
            _place_rows(c, *_windows(c, [i for i, k in enumerate(kind_col) if k == "step"]), self.launch_s)
            return
        import numpy as np  # loaded with the analysis, not with the loaders' imports

        kind = np.fromiter(map(kinds.__getitem__, kind_col), np.int32, len(kind_col))
        numbers, lo_list, hi_list = _windows(c, np.flatnonzero(kind == kinds["step"]).tolist())
        launched = np.isin(kind, [kinds[k] for k in _LAUNCHED if k in kinds])
        del kind
        start = np.frombuffer(c["start_s"], np.float64) if isinstance(c["start_s"], array) else np.asarray(c["start_s"])
        lo, hi = np.array(lo_list, np.float64), np.array(hi_list, np.float64)
        launch, corr_col = self.launch_s, c["correlation"]
        for first in range(0, len(step_col), FLUSH_ROWS):
            last = min(len(step_col), first + FLUSH_ROWS)
            rows = np.flatnonzero(np.fromiter(map(operator.is_, step_col[first:last], itertools.repeat(None)), bool,
                                              last - first)) + first  # fmt: skip
            t = start[rows]
            if launch:  # a device event at its launch
                device = launched[rows]
                at = rows[device]
                t[device] = np.fromiter(map(launch.get, map(corr_col.__getitem__, at.tolist()), start[at].tolist()),
                                        np.float64, len(at))  # fmt: skip
            j = np.searchsorted(lo, t, "right") - 1
            inside = j >= 0
            inside[inside] = t[inside] <= hi[j[inside]]
            for i, n in zip(rows[inside].tolist(), j[inside].tolist(), strict=True):
                step_col[i] = numbers[n]


#: kinds of event placed in a step by the host time of their launch (when it is known)
_LAUNCHED = ("kernel", "memcpy", "op")
_FEW_ROWS = 1 << 16


def _row_by_row(rows: int) -> bool:
    """Whether steps are assigned row by row: a small table read before numpy is loaded."""
    return rows <= _FEW_ROWS and "numpy" not in sys.modules


def _windows(c: dict[str, Any], marks: list[int]) -> tuple[list[Any], list[float], list[float]]:
    """The step markers (rows ``marks``) by start: each one's step number (its own, or its place) and
    its window's start and end."""
    start, step_col = c["start_s"], c["step"]
    order = sorted(marks, key=start.__getitem__)
    numbers = [step_col[i] if step_col[i] is not None else n for n, i in enumerate(order)]
    return numbers, [start[i] for i in order], [start[i] + c["duration_s"][i] for i in order]


def _place_rows(
    c: dict[str, Any], numbers: list[Any], lo: list[float], hi: list[float], launch: dict[str, Any]
) -> None:
    """RowBuilder._assign_steps a row at a time: ``bisect_right`` where the columns use searchsorted."""
    start, step_col, kind_col, corr_col = c["start_s"], c["step"], c["kind"], c["correlation"]
    for i, step in enumerate(step_col):
        if step is None:
            t = start[i]
            if launch and kind_col[i] in _LAUNCHED:
                t = launch.get(corr_col[i], t)
            j = bisect.bisect_right(lo, t) - 1
            if j >= 0 and t <= hi[j]:
                step_col[i] = numbers[j]
