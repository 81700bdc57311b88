"""Reading a Chrome / Perfetto or Kineto JSON trace: the (gzip) text opened as a stream, its traceEvents
array handed out in lists (:func:`events`), and each list mapped to rows (:func:`map_events`). One reader
reads a whole trace (:mod:`rooftop.analysis.trace.chrome_json`), or several read a part each
(:mod:`rooftop.analysis.trace.chrome_parts`); both go through these functions, so a part is read exactly as
the whole would read it.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from rooftop.analysis.trace.chrome_batch import map_batch
from rooftop.analysis.trace.chrome_events import EventMapper
from rooftop.analysis.trace.events import ProgressFn
from rooftop.analysis.trace.files import open_regular
from rooftop.analysis.trace.jsonstream import JsonStream
from rooftop.errors import InvalidConfigError

_PROGRESS_EVERY = 1 << 16
#: the two forms of a trace: an object with a traceEvents array, or the Chrome "JSON array format"
OBJECT, ARRAY = "object", "array"


def open_text(path: Path) -> tuple[io.BufferedReader, io.TextIOWrapper, bool]:
    """The raw file (a regular file: :func:`open_regular`), its text and whether it is gzip-compressed."""
    raw = open_regular(path)
    try:
        magic = raw.read(2)
        raw.seek(0)
    except OSError as exc:
        raw.close()
        raise InvalidConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    gz = magic == b"\x1f\x8b"
    stream: gzip.GzipFile | io.BufferedReader = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw
    return raw, io.TextIOWrapper(stream, encoding="utf-8"), gz


def form(stream: JsonStream) -> str:
    """Whether the document is an object (:data:`OBJECT`) or an array of events (:data:`ARRAY`)."""
    char = stream.peek()
    if char == "[":
        return ARRAY
    if char != "{":
        stream.fail("expected a JSON object with traceEvents or an array of trace events")
    return OBJECT


def events(stream: JsonStream, top: dict[str, Any], inside: str | None = None) -> Iterator[list[Any]]:
    """The trace events, in lists (:meth:`JsonStream.array`); the other top-level values into ``top``.
    ``inside``: the reader stands at an element of the events array of a document of that form
    (:meth:`JsonStream.skip_to`). When the array stops at a split (``stream.stopped``), so does this."""
    shape = inside or form(stream)
    if shape == ARRAY:
        yield from stream.array(unterminated_ok=True, resume=inside is not None)
        return
    if inside is None:
        stream.pos += 1
    else:
        top["traceEvents"] = True
        yield from stream.array(resume=True)
        if stream.stopped:
            return
        _after_value(stream)
    while stream.peek() != "}":
        key = stream.value()
        if not isinstance(key, str):
            stream.fail("expected a string key")
        stream.expect(":", "':'")
        if key == "traceEvents":
            top[key] = True
            yield from stream.array()
            if stream.stopped:
                return
        else:
            top[key] = stream.value()
        _after_value(stream)
    if "traceEvents" not in top:
        stream.fail("no traceEvents array in the JSON object")


def _after_value(stream: JsonStream) -> None:
    if stream.peek() == ",":
        stream.pos += 1
    elif stream.peek() != "}":
        stream.fail("expected ',' or '}'")


def map_events(
    mapper: EventMapper,
    stream: JsonStream,
    batches: Iterator[list[Any]],
    raw: io.BufferedReader,
    progress: ProgressFn | None = None,
    between: Callable[[], None] | None = None,
) -> None:
    """Map each list of events to rows (:func:`map_batch`), calling ``between()`` after each and
    ``progress`` every :data:`_PROGRESS_EVERY` events; a bad value fails the stream at its line, naming the
    event."""
    n = mapper.seen  # every event handed out is counted there, mapped or not
    for batch in batches:
        map_batch(mapper, batch, partial(_one, mapper, stream, batch, n))
        if between is not None:
            between()
        if progress is not None:
            for at in range(n + _PROGRESS_EVERY - n % _PROGRESS_EVERY, n + len(batch) + 1, _PROGRESS_EVERY):
                progress(at, raw.tell())
        n += len(batch)


def _one(mapper: EventMapper, stream: JsonStream, batch: list[Any], before: int, k: int) -> None:
    """Map event ``k`` of ``batch`` (``before`` events came before it) by the per-event rules; a bad value
    fails the stream at its line, naming the event."""
    try:
        mapper.event(batch[k])
    except (TypeError, AttributeError) as exc:
        stream.failed_at(k, f"trace event {before + k + 1} has a field of the wrong type ({cut(exc)})")
    except ValueError as exc:
        stream.failed_at(k, f"trace event {before + k + 1}: {cut(exc)}")


def cut(exc: Exception) -> str:
    """An exception's text on one line of at most ~300 characters (it may quote a huge value)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else f"{text[:280]}... ({len(text)} characters)"
