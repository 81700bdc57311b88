"""Typed errors. Every error a user can cause is a RooftopError whose message names
the bad value, the rule it broke and what would work. The CLI prints ``str(err)`` on
one line and exits with ``err.exit_code``."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` for an error message, cut to about ``limit`` characters: a 5,000-digit
    number or a megabyte-long name from an input file stays a one-line message."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<an integer of about {int(value.bit_length() * 0.30103):,} digits>"  # repr() fails past 4,300
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # e.g. an int past Python's digit limit inside a container
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[: limit - 20]}...{text[-12:]} ({len(text)} characters)"


def path_text(path: object) -> str:
    """A path for a message: as given, or cut (quoted, with its length) past 300 characters."""
    text = str(path)
    return text if len(text) <= 300 else shown(text, 300)


#: characters that must not reach a terminal as they are: C0/C1 controls (ESC starts an
#: escape sequence, CR overwrites the line), bidirectional overrides and isolates, and
#: line/paragraph separators, and lone surrogates (JSON can spell them; no terminal encoding can)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(m: re.Match[str]) -> str:
    char = m.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: object) -> str:
    """``text`` as a string whose control characters are written out (``\\x1b``, ``\\n``): what
    reaches a terminal from an input file (a name, a path, an error message) is shown, never obeyed."""
    return _UNSAFE.sub(_escape_char, str(text))


#: longest error line the CLI prints (a backstop; messages cut what they echo with ``shown``)
MAX_MESSAGE_CHARS = 2000


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` on one line (whitespace runs, newlines included, become one space), cut in the
    middle beyond ``limit`` characters."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    keep = max(limit - 40, 20)
    return f"{flat[: keep // 2]} ...({len(flat) - keep} characters cut)... {flat[-(keep // 2) :]}"


class RooftopError(Exception):
    """Base of every error rooftop raises on bad input."""

    exit_code = 2

    def one_line(self, limit: int = MAX_MESSAGE_CHARS) -> str:
        """The message on one line (every run of whitespace, newlines included, is one space),
        cut in the middle beyond ``limit`` characters: a backstop for a message that echoes a
        huge input without going through ``shown``."""
        return one_line(visible(" ".join(str(self).split())), limit)


class InvalidConfigError(RooftopError):
    """A value, flag or file field is out of its valid range or inconsistent."""


#: names longer than this get no did-you-mean (difflib's cost grows with the length)
_MAX_MATCHED = 200


class UnknownNameError(RooftopError):
    """A name (chip, model, dtype, remat policy, ...) that is not in its catalog."""

    def __init__(self, kind: str, name: object, choices: Iterable[str], also: str = "") -> None:
        self.kind = kind
        self.name = name
        self.choices = sorted({str(c) for c in choices})
        hint = ""
        if isinstance(name, str) and len(name) <= _MAX_MATCHED:  # a name from a file may be anything
            lookup = {c.lower(): c for c in self.choices}
            close = difflib.get_close_matches(name.lower(), list(lookup), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(lookup[c] for c in close)}?" if close else ""
        also = f"; {also}" if also else ""
        super().__init__(f"unknown {kind} {shown(name)}{hint} (choices: {', '.join(self.choices)}){also}")


class ParseError(RooftopError):
    """Text that could not be parsed; names the source, the line and what was expected."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None) -> None:
        self.source = source
        self.line = line
        where = ""
        if source is not None and line is not None:
            where = f"{path_text(source)}:{line}: "
        elif source is not None:
            where = f"{path_text(source)}: "
        elif line is not None:
            where = f"line {line}: "
        super().__init__(f"{where}{message}")


class ShardingError(InvalidConfigError):
    """A sharding or mesh that cannot be realised (indivisible dims, unknown axes)."""
