"""Opening profile files safely: a trace path may name anything (a FIFO that blocks forever, /dev/zero that
never ends, a directory), so only regular files are opened, without blocking, and whole-file reads are
bounded. Used by the loaders (:mod:`rooftop.analysis.trace.xplane`, :mod:`rooftop.analysis.trace.chrome_json`)
and by the profile-directory walk (:mod:`rooftop.analysis.trace.load`)."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

from rooftop.errors import InvalidConfigError, ParseError, path_text

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(path: Path, mode: int) -> InvalidConfigError:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return InvalidConfigError(f"{path}: {kind}, not a regular file; give a trace file or a profile directory")


def stat_mode(path: Path) -> int | None:
    """The ``st_mode`` of ``path`` (links followed), None where nothing is there; a path that cannot be
    looked up (no permission, a loop of links, a name too long, a NUL in it) is a one-line error."""
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InvalidConfigError(f"{path_text(path)}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None


def open_regular(path: Path) -> io.BufferedReader:
    """``path`` opened for binary reading, after checking that it is (or links to) a regular file. The open
    does not block (``O_NONBLOCK``: a FIFO would wait for a writer) and the check is repeated on the open
    descriptor, so a file swapped for a device in between is refused too."""
    try:
        before = os.stat(path)
    except OSError as exc:
        raise InvalidConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    if not stat.S_ISREG(before.st_mode):
        raise _not_regular(path, before.st_mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InvalidConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode)
        return open(fd, "rb")  # the descriptor is owned (closed) by the file object
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, limit: int, what: str) -> bytes:
    """The whole of the regular file ``path``, refused when it is over ``limit`` bytes (``what`` names the
    limit, e.g. protobuf's 2 GiB message size); an empty file is a ParseError."""
    with open_regular(path) as fh:
        try:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise ParseError(f"{size} bytes, over {what}", source=str(path))
            data = fh.read(limit + 1)
        except OSError as exc:
            raise InvalidConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    if len(data) > limit:  # it grew while being read
        raise ParseError(f"over {what}", source=str(path))
    return data
