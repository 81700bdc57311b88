"""A large JSON trace read by several processes at once, each mapping its part of the events array.

Mapping the events of a JSON trace to rows is a loop in Python (about 3 us an event: most of the time a
large trace takes to load). On a machine with more than one core, a trace of more than
:data:`MIN_PART_CHARS` characters a part is split (Linux, where a process can be forked):

- the caller reads from the start, as one reader would;
- each other process (forked at the start) reads the text without decoding it up to its offset, stands at
  the first element start after it (a ``}`` ``,`` ``{`` cut: :meth:`JsonStream.cut_after`), maps the events
  from there up to the next part's cut, and sends its rows and what the events it read left behind (names,
  open B/E pairs, launches, memory samples) back through a pipe;
- every reader finds the same cut from the same offset, and the reader before a part checks it: it must
  stand exactly there, at an element start of the events array, having parsed every character before it;
- the parts are taken in order only when they chain: each starts where the one before ended, with the
  state the one before left (the process and thread names it read the events with, which JAX writes first
  and Kineto last, and no B event waiting for its E); then the table is the one reader's, row for row.

Anything else (a part's error or crash, a cut inside a value's text, names given in the middle of the
events) and the caller reads on alone from where it stands, so the table and every error are exactly those
of one reader. The parts come back pickled through pipes between rooftop's own processes (never from a
file), unpickled with only the classes a part holds.

``ROOFTOP_TRACE_PROCESSES=N`` caps the processes (1: read alone); by default one per core, at most
:data:`MAX_PROCESSES`.
"""

from __future__ import annotations

import io
import os
import pickle
import select
import sys
import warnings
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any

from rooftop.analysis.trace.chrome_events import EventMapper
from rooftop.analysis.trace.chrome_read import events, form, map_events, open_text
from rooftop.analysis.trace.events import COLUMNS, EventArgs
from rooftop.analysis.trace.jsonstream import JsonStream
from rooftop.errors import InvalidConfigError

#: a trace is split only where each part has at least this many characters (about 100,000 Kineto events:
#: a fork, a pipe and a merge cost a few hundredths of the second those take to map)
MIN_PART_CHARS = 32 << 20
MAX_PROCESSES = 8
#: what a character of a part costs, as a fraction of what decoding and mapping it costs (:func:`offsets`),
#: each measured on the Kineto, JAX and tiny-kernel traces of benchmarks/bench_profile.py (1.2M events, 2
#: processes): reading it without decoding it (gzip included: 0.05-0.15), sending its rows (pickled: 0.05-0.1)
#: and taking them in (unpickled and added: 0.06-0.12)
SKIP_COST, SEND_COST, TAKE_COST = 0.1, 0.07, 0.1
#: the caller maps a character at this many times what a part's process pays (it keeps its rows and takes
#: in the others', where a part's process sends its rows and frees them): 29 against 25 ns on the Kineto trace
CALLER_COST = 1.15
ENV = "ROOFTOP_TRACE_PROCESSES"
_ARGS = COLUMNS.index("args")
CHUNK_ROWS = 1 << 14  # rows a part's process sends at a time (about 0.7 MB pickled for Kineto events)
_SETPIPE_SZ = 1031  # fcntl's F_SETPIPE_SZ (Linux)
_PIPE_BYTES = 1 << 20  # (the most an unprivileged process may ask for, by default)
_ALLOWED = {
    ("array", "_array_reconstructor"),
    ("array", "array"),
    ("rooftop.analysis.trace.events", "MemorySample"),
    (__name__, "_proxy"),
}


def plan(raw: io.BufferedReader, gz: bool) -> list[int]:
    """The offsets of the text at which its parts after the first start (before the cut), or [] to read
    it alone: one part per core allowed (:data:`ENV`), each of at least :data:`MIN_PART_CHARS`."""
    if not sys.platform.startswith("linux"):
        return []
    allowed = processes_allowed()
    if allowed < 2:
        return []
    size = text_size(raw, gz)
    parts = min(allowed, size // MIN_PART_CHARS)
    return offsets(size, parts) if parts >= 2 else []


def processes_allowed() -> int:
    """:data:`ENV` when set (a whole number >= 1), else one per core this process may run on, at most
    :data:`MAX_PROCESSES`."""
    text = os.environ.get(ENV, "").strip()
    if text:
        if not (text.isascii() and text.isdigit() and 1 <= len(text) <= 4 and int(text) >= 1):
            raise InvalidConfigError(f"{ENV}={text[:40]!r} is not a number of processes (a whole number >= 1)")
        return int(text)
    return min(len(os.sched_getaffinity(0)), MAX_PROCESSES)


def text_size(raw: io.BufferedReader, gz: bool) -> int:
    """About how many characters the file's text has: its size, or for gzip the size its trailer gives
    (modulo 2**32: the smallest such size at least the compressed one)."""
    size = os.fstat(raw.fileno()).st_size
    if not gz or size < 18:
        return size
    try:
        raw.seek(-4, os.SEEK_END)
        text = int.from_bytes(raw.read(4), "little")
    finally:
        raw.seek(0)
    while text < size:
        text += 1 << 32
    return text


def offsets(size: int, parts: int) -> list[int]:
    """Where parts 2..``parts`` of ``size`` characters start so that every process is done at about the
    same time T (in units of the time a part's process takes to map a character). The caller maps its
    part, L_0, at :data:`CALLER_COST` a character and takes in the others' rows at :data:`TAKE_COST`:
    CALLER_COST L_0 + TAKE_COST (size - L_0) = T. Part k,
    from x_k, first reads x_k characters at :data:`SKIP_COST` each, then maps and sends its L_k:
    SKIP_COST x_k + (1 + SEND_COST) L_k = T. T is found by bisection so that the parts end at ``size``."""

    def starts(whole: float) -> list[float]:
        at = [max(0.0, (whole - TAKE_COST * size) / (CALLER_COST - TAKE_COST))]
        while len(at) < parts:
            at.append(at[-1] + max(0.0, (whole - SKIP_COST * at[-1]) / (1 + SEND_COST)))
        return at

    low, high = 0.0, 2.0 * size
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if starts(mid)[-1] < size else (low, mid)
    return [round(x) for x in starts(high)[:-1]]


class Parts:
    """The processes reading the parts after the first of a trace the caller reads with ``mapper`` and
    ``stream`` (from its start); a context manager that ends them. :meth:`poll` takes in the rows they have
    sent so far (called between the caller's batches: so a part's process never holds many rows, and the
    processes together hold about what one reader would); :attr:`merged` tells whether the caller's mapper
    holds the parts (its reader stopped at the first part's cut)."""

    def __init__(self, path: Path, raw: io.BufferedReader, gz: bool, mapper: EventMapper, stream: JsonStream):
        self.mapper, self.stream, self.merged = mapper, stream, False
        self.workers: list[_Worker] = []
        cuts = plan(raw, gz)
        if not cuts:
            return
        ident = _ident(raw)
        for k in range(len(cuts)):
            worker = _fork(path, ident, cuts, k)
            if worker is None:  # no process to be had: read alone
                self.close()
                return
            self.workers.append(worker)
        stream.split_at(cuts, self._take)

    def __enter__(self) -> Parts:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def poll(self) -> None:
        """Take in what the processes have sent, without waiting (none is wanted once the caller's reader
        has passed every cut)."""
        if not self.stream.splits:
            self.close()
        for worker in self.workers:
            worker.receive(wait=False)

    def close(self) -> None:
        """End the processes (a part not taken is not waited for) and close their pipes."""
        for worker in self.workers:
            worker.end()
        self.workers = []

    def _take(self, at: int) -> bool:
        """The caller's reader stands at the cut ``at``: take the parts that chain from there to the end of
        the text (True), or none (False: it reads on alone)."""
        for worker in self.workers:
            worker.receive(wait=True)
        workers, self.workers = self.workers, []
        chain: list[tuple[_Worker, dict[str, Any]]] = []
        end: int | None = at
        state = _state(self.mapper)
        for worker in workers:
            part = worker.part
            if part is None or part["start"] != end:
                continue
            if part["initial"] != state:
                break
            chain.append((worker, part))
            state, end = part["final"], part["end"]
            if end is None:
                break
        for worker in workers:
            worker.end()
        if end is not None:
            self.stream.splits.clear()
            return False
        _merge(self.mapper, chain)
        self.merged = True
        return True


class _Worker:
    """A part's process as the caller sees it: its pid, the read end of its pipe, the chunks of rows it has
    sent (decoded), and once it is done, its part (None: it failed)."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self.buffer = bytearray()
        self.chunks: list[list[Any]] = []  # the rows sent so far, as sent (columns of each chunk: joined once)
        self.launch_s: dict[str, float] = {}  # their events' launches (a correlation id's first)
        self.memory: list[Any] = []
        self.part: dict[str, Any] | None = None
        self.done = False

    def receive(self, wait: bool) -> None:
        """Read what the pipe holds (with ``wait``: until the part is done) and decode its whole frames."""
        while not self.done:
            if not select.select([self.fd], [], [], None if wait else 0)[0]:
                return
            try:
                data = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:  # the process ended without its part: it failed or died
                self._failed()
                return
            self.buffer += data
            self._frames()

    def _frames(self) -> None:
        while len(self.buffer) >= 8 and not self.done:
            size = int.from_bytes(self.buffer[:8], "little")
            if len(self.buffer) < 8 + size:
                return
            try:
                frame = _Unpickler(io.BytesIO(memoryview(self.buffer)[8 : 8 + size])).load()
            except Exception:
                self._failed()
                return
            del self.buffer[: 8 + size]
            if not isinstance(frame, dict):
                self._failed()
            elif "columns" in frame:
                self._add(frame)
            else:
                self.part, self.done = frame, True

    def _add(self, chunk: dict[str, Any]) -> None:
        """Add a chunk of rows (:func:`_send_rows`) to those sent before."""
        columns = chunk["columns"]
        shared, keys, values = columns[_ARGS]
        columns[_ARGS] = [s if k is None else EventArgs(s, k, v) for s, k, v in zip(shared, keys, values, strict=True)]
        self.chunks.append(columns)
        _first_wins(self.launch_s, chunk["launch_s"])
        self.memory.extend(chunk["memory"])

    def _failed(self) -> None:
        self.part, self.done, self.buffer, self.chunks, self.launch_s = None, True, bytearray(), [], {}

    def end(self) -> None:
        """Close the pipe and end the process (it has sent its part, or it is not wanted)."""
        if self.fd < 0:
            return
        os.close(self.fd)
        self.fd = -1
        try:
            os.kill(self.pid, 9)
        except OSError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except OSError:
            pass


def _state(mapper: EventMapper) -> tuple[Any, ...]:
    """What the events are read with: the process and thread names, whether host ops are the ops, and
    whether a B event waits for its E."""
    m = mapper
    return dict(m.processes), dict(m.threads), m.host_ops, m.device_planes, any(m.open.values())  # (copies)


def _merge(mapper: EventMapper, chain: list[tuple[_Worker, dict[str, Any]]]) -> None:
    """Add the parts' rows and what their events left to ``mapper``, in order, as one reader would have."""
    rows = mapper.rows
    rows.join([chunk for worker, _ in chain for chunk in worker.chunks])  # every column made once
    for worker, part in chain:
        worker.chunks = []
        _first_wins(rows.launch_s, worker.launch_s)
        mapper.memory.extend(worker.memory)
        mapper.seen += part["seen"]
        mapper.count += part["count"]
        mapper.kineto_events += part["kineto_events"]
        mapper.line_keys.update(part["line_keys"])
        mapper.top.update(part["top"])
    mapper.processes, mapper.threads, mapper.host_ops, mapper.device_planes, _ = chain[-1][1]["final"]
    mapper.lines.clear()
    mapper.open = {}


def _first_wins(launches: dict[str, float], later: dict[str, float]) -> None:
    """Add the launches of ``later`` events to ``launches``, keeping a correlation id's first."""
    for again in later.keys() & launches.keys():
        del later[again]
    launches.update(later)


def _ident(raw: io.BufferedReader) -> tuple[int, ...]:
    st = os.fstat(raw.fileno())
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _fork(path: Path, ident: tuple[int, ...], cuts: list[int], k: int) -> _Worker | None:
    """A process reading part ``k + 2`` (from ``cuts[k]``) and writing it to a pipe, or None where no process
    can be made."""
    read, write = os.pipe()
    try:
        import fcntl  # (Linux, the only system parts are read on)

        fcntl.fcntl(write, _SETPIPE_SZ, _PIPE_BYTES)  # a chunk of rows fits: the part's process rarely waits
    except OSError:
        pass
    try:
        with warnings.catch_warnings():  # Python 3.12 and JAX warn of a fork beside threads: a part's process
            warnings.simplefilter("ignore")  # runs no code of theirs (it reads text, maps it, writes a pipe)
            pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid == 0:  # the part's process: it ends here, whatever happens
        try:
            os.close(read)
            with os.fdopen(write, "wb") as out:
                try:
                    part = _read_part(path, ident, cuts, k, out)
                except Exception:  # the caller reads this part itself, and reports what is wrong
                    part = None
                _send(out, part)
        finally:
            os._exit(0)
    os.close(write)
    os.set_blocking(read, False)
    return _Worker(pid, read)


def _read_part(
    path: Path, ident: tuple[int, ...], cuts: list[int], k: int, out: io.BufferedWriter
) -> dict[str, Any] | None:
    """Map the events from the cut after ``cuts[k]`` to the next part's (or the end), starting from the
    state the events at the start of the trace give (its leading ``M`` events); send the rows to ``out`` a
    chunk at a time (:func:`_send_rows`) and return what the events left."""
    raw, text, _ = open_text(path)
    with raw, text:
        if _ident(raw) != ident:  # not the file the caller reads
            return None
        stream = JsonStream(text, str(path))
        mapper = EventMapper()
        shape = form(stream)
        for batch in events(stream, {}):  # the names given before the first timed event
            leading = 0
            while leading < len(batch) and batch[leading].__class__ is dict and batch[leading].get("ph") == "M":
                mapper.event(batch[leading])
                leading += 1
            if leading < len(batch) or stream.consumed + stream.pos >= cuts[0]:
                break
        initial = _state(mapper)
        mapper.seen = 0
        start = stream.skip_to(cuts[k])
        if start is None:
            return None
        stream.split_at(cuts[k + 1 :], lambda at: True)

        def chunk() -> None:
            if len(mapper.rows) >= CHUNK_ROWS:
                _send_rows(mapper, out)

        map_events(mapper, stream, events(stream, mapper.top, inside=shape), raw, between=chunk)
        _send_rows(mapper, out)
        return {
            "start": start,
            "end": stream.consumed + stream.pos if stream.stopped else None,
            "initial": initial,
            "final": _state(mapper),
            "seen": mapper.seen,
            "count": mapper.count,
            "kineto_events": mapper.kineto_events,
            "line_keys": mapper.line_keys,
            "top": mapper.top,
        }


def _send_rows(mapper: EventMapper, out: io.BufferedWriter) -> None:
    """Send the rows mapped so far, with the launches and memory samples of their events, and drop them
    (a correlation id launched again later is sent again: the caller keeps the first)."""
    columns = mapper.rows.take()
    args = columns[_ARGS]  # an EventArgs as its three values, in three lists (pickled without a call per row)
    columns[_ARGS] = (
        [a.shared if a.__class__ is EventArgs else a for a in args],
        [a.key if a.__class__ is EventArgs else None for a in args],
        [a.value if a.__class__ is EventArgs else None for a in args],
    )
    _send(out, {"columns": columns, "launch_s": mapper.rows.launch_s, "memory": mapper.memory})
    mapper.rows.launch_s, mapper.memory = {}, []


def _send(out: io.BufferedWriter, frame: Any) -> None:
    """One frame: its length (8 bytes, little-endian), then its pickle."""
    data = io.BytesIO()
    data.write(bytes(8))
    _Pickler(data, protocol=pickle.HIGHEST_PROTOCOL).dump(frame)
    view = data.getbuffer()
    view[:8] = (len(view) - 8).to_bytes(8, "little")
    out.write(view)
    out.flush()


def _proxy(values: dict[str, Any]) -> MappingProxyType[str, Any]:
    return MappingProxyType(values)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if obj.__class__ is MappingProxyType:  # (each one once: the memo is looked up first)
            return _proxy, (dict(obj),)
        return NotImplemented


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a trace part")
        return super().find_class(module, name)
