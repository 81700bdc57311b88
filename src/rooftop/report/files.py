"""Files rooftop writes (plots, chip files): paths checked before any work, contents written
atomically with the permissions of a normal new file.

``check_output_path`` rejects, in one line, a path nothing can be written to (empty, a folder,
a missing folder, an extension rooftop does not write) before the command measures or draws
anything. ``replacing`` hands out a temporary file made with mkstemp in the target's folder
(``O_EXCL``, an unpredictable name: a link planted beside the target is never followed),
gives it the mode ``open(path, "w")`` would (``0666 & ~umask``, or that of the regular file
it replaces) and renames it over the target; on any failure the temporary file is removed
and the target is left as it was.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from rooftop.errors import InvalidConfigError, shown


def _path(path: str) -> str:
    """A path for a message: quoted, cut only when it is very long."""
    return shown(path, limit=300)


def check_output_path(path: str, what: str, extensions: Sequence[str], example: str, flag: str = "") -> str:
    """The lower-cased extension of ``path`` (one of ``extensions``); a one-line InvalidConfigError
    naming ``path`` and what would work for an empty path, a NUL character, a bare extension, an
    unknown extension, an existing folder or a missing folder."""
    supported = ", ".join(extensions)
    if not isinstance(path, str) or not path.strip():
        raise InvalidConfigError(f"{flag or what} is empty: give a file name ending in {supported}, e.g. {example}")
    if "\0" in path:
        raise InvalidConfigError(f"{what} {_path(path)} contains a NUL character: give a plain file name")
    try:
        os.fsencode(path)
    except UnicodeError:
        raise InvalidConfigError(
            f"{what} {_path(path)} cannot be a file name here (a character this system's file names cannot hold)"
        ) from None
    if os.path.isdir(path):
        inside = os.path.join(path, example)
        raise InvalidConfigError(f"{what} {_path(path)} is a folder: give a file name, e.g. {_path(inside)}")
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1]
    if name.lower() in extensions:
        suggestion = os.path.splitext(example)[0] + name
        raise InvalidConfigError(f"{what} {_path(path)} has no name before its extension: give e.g. {suggestion}")
    if not name or ext.lower() not in extensions:
        raise InvalidConfigError(f"{what} {_path(path)} must end in {supported}, e.g. {example}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        why = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise InvalidConfigError(f"cannot write {what} {_path(path)}: {_path(folder)} {why}")
    return ext.lower()


def _umask() -> int:
    """This process's umask, read without changing it where Linux says it (else set and restored)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode(path: str) -> int:
    """The permission bits ``open(path, "w")`` would leave: those of the regular file already
    at ``path``, else ``0666 & ~umask``."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return 0o666 & ~_umask()
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else 0o666 & ~_umask()


@contextmanager
def replacing(path: str, what: str) -> Iterator[str]:
    """Yield a fresh temporary file name in ``path``'s folder; when the body returns, give it
    ``new_file_mode(path)`` and rename it over ``path`` (see the module docstring). An OSError
    becomes one line naming ``what`` and ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".rooftop-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise InvalidConfigError(f"cannot write {what} {_path(path)}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, new_file_mode(path))
        os.replace(tmp, path)
    except OSError as exc:
        raise InvalidConfigError(f"cannot write {what} {_path(path)}: {exc.strerror or exc}") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
