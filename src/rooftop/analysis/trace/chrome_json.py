"""Chrome / Perfetto trace-event JSON (written by JAX) and PyTorch profiler (Kineto) JSON -> event table.

Streaming: the (gzip) file is decoded in 1 MiB chunks and the ``traceEvents`` array is parsed a buffer of
events at a time (:mod:`rooftop.analysis.trace.jsonstream`); the raw text is never held whole and each
event dict is dropped once its row is stored, with only the args a report reads, so memory is bounded by
the event table itself plus one chunk. The other top-level keys (``deviceProperties``,
``distributedInfo``, ...) are small and decoded whole.

The rules that map an event to a row are in :mod:`rooftop.analysis.trace.chrome_events`.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from rooftop.analysis.trace.chrome_batch import map_batch
from rooftop.analysis.trace.chrome_events import EventMapper
from rooftop.analysis.trace.events import ProgressFn, Trace
from rooftop.analysis.trace.files import open_regular
from rooftop.analysis.trace.jsonstream import JsonStream
from rooftop.errors import InvalidConfigError, ParseError

_PROGRESS_EVERY = 1 << 16


def _open_text(path: Path) -> tuple[io.BufferedReader, io.TextIOWrapper, bool]:
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


def load_json_trace(path: Path, progress: ProgressFn | None = None) -> Trace:
    """Stream a Chrome/Perfetto or Kineto JSON trace (``.json`` or gzip) into a Trace."""
    raw, text, gz = _open_text(path)
    mapper = EventMapper()
    stream = JsonStream(text, str(path))
    try:
        with raw, text:
            n = 0
            for batch in _events(stream, mapper.top):
                map_batch(mapper, batch, partial(_one, mapper, stream, batch, n))
                if progress is not None:
                    for at in range(n + _PROGRESS_EVERY - n % _PROGRESS_EVERY, n + len(batch) + 1, _PROGRESS_EVERY):
                        progress(at, raw.tell())
                n += len(batch)
            size = raw.tell()
    except UnicodeDecodeError as exc:
        what = "truncated or corrupt compressed JSON trace" if gz else "not a JSON trace (the text is not UTF-8)"
        raise ParseError(f"{what} ({_cut(exc)})", source=str(path)) from exc
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ParseError(f"truncated or corrupt compressed JSON trace ({_cut(exc)})", source=str(path)) from exc
    except OSError as exc:  # an I/O error while reading
        raise InvalidConfigError(f"{path}: cannot read ({exc.strerror or _cut(exc)})") from exc
    if progress is not None:
        progress(mapper.count, size)
    return mapper.trace(str(path))


def _one(mapper: EventMapper, stream: JsonStream, batch: list[Any], before: int, k: int) -> None:
    """Map event ``k`` of ``batch`` (``before`` events came before it) by the per-event rules; a bad value
    fails the stream at its line, naming the event."""
    try:
        mapper.event(batch[k])
    except (TypeError, AttributeError) as exc:
        stream.failed_at(k, f"trace event {before + k + 1} has a field of the wrong type ({_cut(exc)})")
    except ValueError as exc:
        stream.failed_at(k, f"trace event {before + k + 1}: {_cut(exc)}")


def _events(stream: JsonStream, top: dict[str, Any]) -> Iterator[list[Any]]:
    """The trace events, in lists (:meth:`JsonStream.array`); the other top-level values into ``top``."""
    char = stream.peek()
    if char == "[":
        yield from stream.array(unterminated_ok=True)
        return
    if char != "{":
        stream.fail("expected a JSON object with traceEvents or an array of trace events")
    stream.pos += 1
    while stream.peek() != "}":
        key = stream.value()
        if not isinstance(key, str):
            stream.fail("expected a string key")
        stream.expect(":", "':'")
        if key == "traceEvents":
            top[key] = True
            yield from stream.array()
        else:
            top[key] = stream.value()
        if stream.peek() == ",":
            stream.pos += 1
        elif stream.peek() != "}":
            stream.fail("expected ',' or '}'")
    if "traceEvents" not in top:
        stream.fail("no traceEvents array in the JSON object")


def _cut(exc: Exception) -> str:
    """An exception's text on one line of at most ~300 characters (it may quote a huge value)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else f"{text[:280]}... ({len(text)} characters)"
