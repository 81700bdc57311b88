"""Reasons as data: what library code (plan/, analysis/) says about a result or an error without
writing the command line's words.

- :class:`Option` names a parameter of a library call (``"cluster"``, ``"batch_tokens"``): the library
  spells it as that name, the command line as its flag (``--cluster``, ``--batch-tokens``), so no
  flag is written below the CLI.
- :class:`Phrased` is an error whose message is a sequence of text, :class:`Option` and :class:`Reason`
  parts: ``str(err)`` is the library's spelling; the CLI re-spells the options and reasons (:meth:`Phrased.said`).
- :class:`Reason` is a note on a result: a :class:`ReasonCode` and the figures it names. ``report/``
  writes its sentence (``rooftop.report.reasons``); a library user reads ``code`` and ``figures``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeAlias

from rooftop.errors import InvalidConfigError, RooftopError
from rooftop.reason_codes import ReasonCode


@dataclass(frozen=True)
class Option:
    """A parameter a message names: ``name`` is its keyword in the Python API (and the CLI's dest)."""

    name: str

    def __str__(self) -> str:
        return self.name


#: a part of a message: text, an option, or a reason (a result's note quoted in an error)
Part: TypeAlias = "str | Option | Reason"


def said(
    parts: Iterable[Part], spell: Callable[[Option], str] = str, say: Callable[[Reason], str] | None = None
) -> str:
    """The parts as one text, each option spelled by ``spell`` (default: its name) and each reason by
    ``say`` (default: its code's value; report/ passes its sentence)."""
    return "".join(
        p if isinstance(p, str) else spell(p) if isinstance(p, Option) else say(p) if say else p.code.value
        for p in parts
    )


class Phrased(RooftopError):
    """An error whose message names options as data: ``parts`` are text and :class:`Option` values."""

    def __init__(self, *parts: Part) -> None:
        self.parts: tuple[Part, ...] = parts
        super().__init__(said(parts))

    def __reduce__(self) -> tuple[type[Phrased], tuple[Part, ...]]:
        """Rebuilt from its parts (an error raised in a worker process keeps its options)."""
        return (type(self), self.parts)

    @property
    def options(self) -> tuple[Option, ...]:
        return tuple(p for p in self.parts if isinstance(p, Option))

    def said(self, spell: Callable[[Option], str], say: Callable[[Reason], str] | None = None) -> str:
        """The message with each option spelled by ``spell`` (the CLI passes its flags) and each reason by
        ``say`` (the CLI passes report's sentences)."""
        return said(self.parts, spell, say)


class OptionError(Phrased, InvalidConfigError):
    """A value, flag or field out of range, naming the options involved as data."""


@dataclass(frozen=True)
class Reason:
    """A note on a result, as data: ``code`` and the figures it names (a sorted tuple of pairs, so a
    Reason is hashable and notes can be deduplicated). ``report.reasons.sentence`` writes its words."""

    code: ReasonCode
    figures: tuple[tuple[str, object], ...] = ()

    @classmethod
    def of(cls, code: ReasonCode, **figures: object) -> Reason:
        return cls(code, tuple(sorted(figures.items())))

    def figure(self, name: str) -> object:
        return dict(self.figures)[name]


#: a note on a result: a Reason, or (not yet converted) a sentence
Note = str | Reason


def refusal(err: RooftopError) -> Note:
    """An error kept in a result (a row that could not be planned): its options stay data when it has any."""
    return Reason.of(ReasonCode.REFUSED, parts=err.parts) if isinstance(err, Phrased) else err.one_line()
