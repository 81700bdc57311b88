"""Reading catalog TOML: the package's own data files and the user's (one place for both)."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from rooftop.errors import InvalidConfigError


def read_toml_file(path: str | Path, what: str) -> dict[str, Any]:
    """Parse a user's TOML file; a missing or malformed file names the file and the problem."""
    p = Path(path)
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidConfigError(f"{what} file {p} does not exist") from None
    except OSError as exc:
        raise InvalidConfigError(f"cannot read {what} file {p}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InvalidConfigError(f"{what} file {p}: not valid TOML ({reason})") from None


def builtin_tomls(folder: str) -> list[tuple[str, dict[str, Any]]]:
    """(``catalog/<folder>/<file>``, parsed data) of every built-in file, in file-name order."""
    root = resources.files("rooftop.catalog") / folder
    return [
        (f"catalog/{folder}/{entry.name}", tomllib.loads(entry.read_text(encoding="utf-8")))
        for entry in sorted(root.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".toml")
    ]


def builtin_toml(folder: str, name: str) -> dict[str, Any]:
    """One built-in file, e.g. ``builtin_toml("efficiency", "training.toml")``."""
    return tomllib.loads((resources.files("rooftop.catalog") / folder / name).read_text(encoding="utf-8"))
