"""Typed errors. Every error a user can cause is a RooftopError whose message names
the bad value, the rule it broke and what would work. The CLI prints ``str(err)`` on
one line and exits with ``err.exit_code``."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` for an error message, cut to about ``limit`` characters: a 5,000-digit
    number or a megabyte-long name from an input file stays a one-line message."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 20]}...{text[-12:]} ({len(text)} characters)"


class RooftopError(Exception):
    """Base of every error rooftop raises on bad input."""

    exit_code = 2

    def one_line(self) -> str:
        return " ".join(str(self).split())


class InvalidConfigError(RooftopError):
    """A value, flag or file field is out of its valid range or inconsistent."""


class UnknownNameError(RooftopError):
    """A name (chip, model, dtype, remat policy, ...) that is not in its catalog."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        self.choices = sorted(set(choices))
        close = difflib.get_close_matches(name.lower(), [c.lower() for c in self.choices], n=3, cutoff=0.5)
        lookup = {c.lower(): c for c in self.choices}
        hint = f"; did you mean {', '.join(lookup[c] for c in close)}?" if close else ""
        super().__init__(f"unknown {kind} {name!r}{hint} (choices: {', '.join(self.choices)})")


class ParseError(RooftopError):
    """Text that could not be parsed; names the source, the line and what was expected."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None) -> None:
        self.source = source
        self.line = line
        where = ""
        if source is not None and line is not None:
            where = f"{source}:{line}: "
        elif source is not None:
            where = f"{source}: "
        elif line is not None:
            where = f"line {line}: "
        super().__init__(f"{where}{message}")


class ShardingError(InvalidConfigError):
    """A sharding or mesh that cannot be realised (indivisible dims, unknown axes)."""
