"""Chrome / Perfetto trace-event JSON (written by JAX) and PyTorch profiler (Kineto) JSON -> event table.

Streaming: the (gzip) file is decoded in 1 MiB chunks and the ``traceEvents`` array is parsed a buffer of
events at a time (:mod:`rooftop.analysis.trace.jsonstream`); the raw text is never held whole and each
event dict is dropped once its row is stored, with only the args a report reads, so memory is bounded by
the event table itself plus one chunk. The other top-level keys (``deviceProperties``,
``distributedInfo``, ...) are small and decoded whole.

A large trace is read by several processes at once, each mapping its part of the events array
(:mod:`rooftop.analysis.trace.chrome_parts`); the table, and any error, are those of one reader.
The rules that map an event to a row are in :mod:`rooftop.analysis.trace.chrome_events`.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

from rooftop.analysis.gcpause import release_free_heap
from rooftop.analysis.trace import chrome_parts
from rooftop.analysis.trace.chrome_events import EventMapper
from rooftop.analysis.trace.chrome_read import cut, events, map_events, open_text
from rooftop.analysis.trace.events import ProgressFn, Trace
from rooftop.analysis.trace.jsonstream import JsonStream
from rooftop.errors import InvalidConfigError, ParseError


def load_json_trace(path: Path, progress: ProgressFn | None = None) -> Trace:
    """Stream a Chrome/Perfetto or Kineto JSON trace (``.json`` or gzip) into a Trace."""
    raw, text, gz = open_text(path)
    mapper = EventMapper()
    stream = JsonStream(text, str(path))
    try:
        with raw, text, chrome_parts.Parts(path, raw, gz, mapper, stream) as parts:
            between = parts.poll if parts.workers else None
            map_events(mapper, stream, events(stream, mapper.top), raw, progress, between)
            size = os.fstat(raw.fileno()).st_size if parts.merged else raw.tell()
    except UnicodeDecodeError as exc:
        what = "truncated or corrupt compressed JSON trace" if gz else "not a JSON trace (the text is not UTF-8)"
        raise ParseError(f"{what} ({cut(exc)})", source=str(path)) from exc
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ParseError(f"truncated or corrupt compressed JSON trace ({cut(exc)})", source=str(path)) from exc
    except OSError as exc:  # an I/O error while reading
        raise InvalidConfigError(f"{path}: cannot read ({exc.strerror or cut(exc)})") from exc
    if progress is not None:
        progress(mapper.count, size)
    trace = mapper.trace(str(path))
    if parts.merged:  # what taking in the parts' rows and building the table freed (gcpause.py)
        release_free_heap()
    return trace
