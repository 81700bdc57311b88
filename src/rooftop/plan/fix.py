"""Reading ``--fix NAME=VALUE,...``: the degrees and choices a user pins for a planner to honour or
refuse. One reader for every planner that takes pins, so that they share one convention: names
and aliases, whole degrees in ASCII digits, on/off flags as 0|1 (also true/false, on/off), and
one-line errors that name the bad part and what would work (``rooftop train``'s ``--fix`` follows
the same convention).

What each planner may pin (and what a pinned value must satisfy) is the planner's: this module
only reads the text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rooftop.errors import InvalidConfigError, shown
from rooftop.hardware.chip import MAX_CHIPS
from rooftop.reasons import Option, OptionError
from rooftop.units import parse_int

#: the parameter pins are given by
FIX = Option("fix")

#: spellings of an on/off pin
FLAG_WORDS = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}


@dataclass(frozen=True)
class PinSpec:
    """What a ``--fix`` may pin: ``counts`` are whole degrees in [``lowest``, MAX_CHIPS], ``flags``
    on/off choices, ``texts`` free words the planner checks itself; ``aliases`` map a short name to
    one of them (``mb`` -> ``microbatches``). ``example`` is shown when a part cannot be read."""

    counts: Sequence[str]
    flags: Sequence[str] = ()
    texts: Sequence[str] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)
    lowest: int = 1
    example: str = "tp=8"
    option: Option = FIX

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.counts, *self.texts, *self.flags)


def parse_pins(text: str | None, spec: PinSpec) -> dict[str, object]:
    """ "tp=8,pp=2" -> {"tp": 8, "pp": 2} under ``spec`` (aliases resolved to their names); ``None``
    or "" -> {}. Raises InvalidConfigError (one line) naming the part that cannot be read, a name
    that cannot be pinned (with the valid names), a value out of range, or a name given twice."""
    out: dict[str, object] = {}
    opt = spec.option
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        if "=" not in part:
            raise OptionError("cannot read ", opt, f" {shown(part)}: expected NAME=VALUE, e.g. {spec.example}")
        k, v = (s.strip() for s in part.split("=", 1))
        name = spec.aliases.get(k, k)
        if name not in spec.names:
            valid = ", ".join(spec.names)
            aliases = ", ".join(f"{a} = {n}" for a, n in spec.aliases.items())
            also = f"; aliases: {aliases}" if aliases else ""
            raise OptionError(opt, f" cannot pin {shown(k)} (valid: {valid}{also})")
        if name in out:
            raise OptionError(opt, f" pins {shown(name)} twice")
        out[name] = _value(name, k, v, spec)
    return out


def _value(name: str, key: str, value: str, spec: PinSpec) -> object:
    if name in spec.flags:
        flag = FLAG_WORDS.get(value.lower())
        if flag is None:
            raise OptionError(spec.option, f" {key}={shown(value)}: expected 0 or 1 (also true/false, on/off)")
        return flag
    if name in spec.counts:  # ASCII digits ("²" passes str.isdigit()), at most the chips of any topology
        try:
            return parse_int(value, key, spec.lowest, MAX_CHIPS)
        except InvalidConfigError as exc:  # "tp 'x' is not an integer ...", said of the option
            raise OptionError(spec.option, f" {exc}") from None
    return value


def pinned_text(pins: Mapping[str, object]) -> str:
    """{"tp": 16, "pp": 2} -> "tp=16,pp=2": the pins as a user writes them (for messages)."""
    return ",".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in pins.items())
