"""Reading an HLO text file: opened once (a named pipe without a writer is an error, not a wait) and
cut into lines in large chunks with a bound on a line's length."""

from __future__ import annotations

import io
import os
import select
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rooftop.errors import ParseError

#: the longest line read (a multi-line literal joined is bounded the same way by the parser)
MAX_LINE_CHARS = 64 << 20


def open_text(path: str | Path, source: str) -> io.BufferedReader:
    """The file, opened for reading. A pipe is opened without blocking: a named pipe that no process
    writes to is an error (reading it would wait forever), one with a writer (``<(zcat dump.gz)``)
    is then read as it comes."""
    if not stat.S_ISFIFO(os.stat(path).st_mode):
        return open(path, "rb")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        ready, _, _ = select.select([fd], [], [], 0.5)
        first = os.read(fd, 1 << 16) if ready else None
    except BlockingIOError:
        first = None  # a writer that has not written yet
    except OSError:
        os.close(fd)
        raise
    if first == b"":
        os.close(fd)
        raise ParseError("a pipe that no process writes to: nothing to read", source=source)
    os.set_blocking(fd, True)
    return io.BufferedReader(Prefixed(fd, first or b""))


class Prefixed(io.RawIOBase):
    """A file descriptor whose first bytes were already read (``head``)."""

    def __init__(self, fd: int, head: bytes) -> None:
        self.fd, self.head = fd, head

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.head:
            n = min(len(buffer), len(self.head))
            buffer[:n] = self.head[:n]
            self.head = self.head[n:]
            return n
        data = os.read(self.fd, len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            os.close(self.fd)
        super().close()


def text_lines(
    handle: Any, source: str = "<hlo>", chunk_chars: int = 1 << 22, max_line_chars: int = MAX_LINE_CHARS
) -> Iterator[str]:
    """Lines of a text file without their newlines, read in large chunks (memory stays bounded: a line
    longer than ``max_line_chars`` is a ParseError, not an ever-growing buffer)."""
    parts: list[str] = []
    size = number = 0
    while True:
        chunk = handle.read(chunk_chars)
        if not chunk:
            break
        lines = chunk.split("\n")
        if len(lines) == 1:  # no newline in this chunk: the line goes on
            parts.append(chunk)
            size += len(chunk)
            if size > max_line_chars:
                raise ParseError(f"line longer than {max_line_chars} characters", source=source, line=number + 1)
            continue
        yield "".join(parts) + lines[0]
        yield from lines[1:-1]
        number += len(lines) - 1
        parts, size = [lines[-1]], len(lines[-1])
    yield "".join(parts)
