"""Reading catalog TOML: the package's own data files and the user's (one place for both),
and the one reader of a user's text file (a chip, model or config.json file)."""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from rooftop.errors import InvalidConfigError, one_line, path_text

#: largest chip, model or config file read (the real ones are a few KB)
MAX_FILE_BYTES = 16 * 2**20


def is_directory(path: str | Path) -> bool:
    """Whether ``path`` names a directory; False for a name the system refuses (too long, a NUL byte), so
    that the reader then says what is wrong with it in one line (``Path.is_dir`` raises on those)."""
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):
        return False


def read_text_file(path: str | Path, what: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a user's regular file of at most ``max_bytes``. A missing file, a
    directory, a FIFO or device (``/dev/zero``, which would never end, or a pipe, which would
    block), an unreadable path, a huge file or bytes that are not UTF-8 raise one
    InvalidConfigError naming the file."""
    name = path_text(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InvalidConfigError(f"{what} file {name} does not exist") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a usable path"
        raise InvalidConfigError(f"cannot read {what} file {name}: {reason}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file (a pipe, device or socket)"
            raise InvalidConfigError(f"{what} file {name} is {kind}; give a {what} file")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise InvalidConfigError(f"cannot read {what} file {name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if total > max_bytes:
        raise InvalidConfigError(f"{what} file {name} is larger than {max_bytes // 2**20} MiB; is it the right file?")
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidConfigError(f"{what} file {name} is not UTF-8 text (byte {exc.start})") from None


def read_toml_file(path: str | Path, what: str) -> dict[str, Any]:
    """Parse a user's TOML file; a missing or malformed file names the file and the problem."""
    text = read_text_file(path, what)
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError, ValueError) as exc:
        # ValueError: an integer past Python's 4,300-digit conversion limit
        reason = "nested too deeply" if isinstance(exc, RecursionError) else one_line(str(exc), 200)
        if type(exc) is ValueError:
            reason = "a number has too many digits"
        raise InvalidConfigError(f"{what} file {path_text(path)}: not valid TOML ({reason})") from None


def builtin_tomls(folder: str, stem: Callable[[str], bool] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(``catalog/<folder>/<file>``, parsed data) of every built-in file, in file-name order (only those
    whose name without ``.toml`` ``stem`` accepts, when given)."""
    root = resources.files("rooftop.catalog") / folder
    return [
        (f"catalog/{folder}/{entry.name}", tomllib.loads(entry.read_text(encoding="utf-8")))
        for entry in sorted(root.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".toml") and (stem is None or stem(entry.name.removesuffix(".toml")))
    ]


def builtin_toml(folder: str, name: str) -> dict[str, Any]:
    """One built-in file, e.g. ``builtin_toml("efficiency", "training.toml")``."""
    return tomllib.loads((resources.files("rooftop.catalog") / folder / name).read_text(encoding="utf-8"))
