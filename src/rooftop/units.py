"""Parsing and formatting of quantities. The only module that converts units: every
number inside rooftop is a float in SI base units (s, bytes, FLOPs, bytes/s, FLOPs/s,
dollars), and this module turns human strings into those floats and back.

Conventions: decimal prefixes (k, M, G, T, P, E) are powers of 1000, binary prefixes
(Ki, Mi, Gi, Ti, Pi) are powers of 1024, as in IEC 80000-13. "B" is bytes; a bare
count ("4M", "15T") is a plain number.
"""

from __future__ import annotations

import math
import re

from rooftop.errors import InvalidConfigError, shown

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0, "h": 3600.0, "d": 86400.0}

KIB = 2.0**10
MIB = 2.0**20
GIB = 2.0**30
TIB = 2.0**40
SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0
JOULES_PER_KWH = 3.6e6  # 1 kWh = 1000 W x 3600 s
WATTS_PER_KW = 1e3
TOKENS_PER_MILLION = 1e6  # "per million tokens" figures
NS_PER_S = 1e9  # profile clocks: XPlane times in nanoseconds (divided, so 500 ns -> 5e-07 s exactly rounded)
PS_PER_NS = 1000  # XPlane offsets and durations in picoseconds
PS_PER_S = 1e12  # a TPU op's device_duration_ps on the chip's own clock

_NUM = r"([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"  # ASCII digits only
_QTY = re.compile(rf"^\s*{_NUM}\s*([A-Za-zµ/]*)\s*$")


#: largest magnitude any quantity may have (far above every real figure; keeps products finite)
MAX_QUANTITY = 1e30


def _check_range(value: float, text: object, what: str) -> float:
    if not math.isfinite(value) or abs(value) > MAX_QUANTITY:
        raise InvalidConfigError(f"{what} {shown(text)} is out of range (a finite number of at most 1e30)")
    return value


def _split(text: str, what: str) -> tuple[float, str]:
    m = _QTY.match(str(text))
    if not m:
        raise InvalidConfigError(f"cannot read {what} {shown(text)}: expected a number with an optional unit")
    return _check_range(float(m.group(1)), text, what), m.group(2)


def _given(value: float | int, what: str) -> float:
    """A number passed as a number (a TOML or JSON value, a Python caller): finite and in range."""
    try:
        as_float = float(value)
    except OverflowError:
        as_float = math.inf
    return _check_range(as_float, value, what)


def _prefix(suffix: str, text: str, what: str) -> float:
    if suffix in _BINARY:
        return _BINARY[suffix]
    if suffix in _DECIMAL:
        return _DECIMAL[suffix]
    valid = ", ".join(k for k in [*_DECIMAL, *_BINARY] if k)
    raise InvalidConfigError(f"cannot read {what} {shown(text)}: unknown prefix {shown(suffix)} (valid: {valid})")


def parse_number(text: str | float | int) -> float:
    """A plain count with an optional SI or binary prefix: "4M" -> 4e6, "15T" -> 1.5e13, "1.5e12"."""
    if isinstance(text, (int, float)):
        return _given(text, "number")
    value, suffix = _split(text, "number")
    return value * _prefix(suffix, text, "number")


def parse_bytes(text: str | float | int) -> float:
    """Bytes: "80GiB" -> 80 * 2**30, "16 GB" -> 16e9, "4096" -> 4096."""
    if isinstance(text, (int, float)):
        return _given(text, "byte size")
    value, suffix = _split(text, "byte size")
    if suffix.endswith("B"):
        suffix = suffix[:-1]
    return value * _prefix(suffix, text, "byte size")


def parse_rate(text: str | float | int) -> float:
    """A rate per second: "819 GB/s" -> 8.19e11 bytes/s, "197 TFLOP/s" -> 1.97e14."""
    if isinstance(text, (int, float)):
        return _given(text, "rate")
    value, suffix = _split(text, "rate")
    for tail in ("B/s", "FLOP/s", "FLOPS", "/s", "Bps"):
        if suffix.endswith(tail):
            suffix = suffix[: -len(tail)]
            break
    return value * _prefix(suffix, text, "rate")


def parse_duration(text: str | float | int) -> float:
    """Seconds: "50ms" -> 0.05, "3us" -> 3e-6, "2h" -> 7200; a bare number is seconds."""
    if isinstance(text, (int, float)):
        return _given(text, "duration")
    value, suffix = _split(text, "duration")
    if suffix not in _TIME and suffix != "":
        raise InvalidConfigError(
            f"cannot read duration {shown(text)}: unknown unit {shown(suffix)} (valid: {', '.join(_TIME)})"
        )
    return value * _TIME.get(suffix, 1.0)


#: integers rooftop reads (counts, sizes, ids): ASCII digits only ("²" and "١" pass str.isdigit() but
#: are not numbers here), at most MAX_INT_DIGITS of them (far below Python's 4,300-digit conversion limit)
MAX_INT_DIGITS = 30
_ASCII_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)


def is_ascii_int(text: str) -> bool:
    """Whether ``text`` is an optionally signed run of ASCII digits of at most MAX_INT_DIGITS."""
    return bool(_ASCII_INT.fullmatch(text)) and len(text.lstrip("+-")) <= MAX_INT_DIGITS


def parse_int(text: str, what: str, lo: int | None = None, hi: int | None = None) -> int:
    """An integer written in ASCII digits, within [lo, hi] when given; a one-line InvalidConfigError
    naming ``what`` otherwise (use at every place a count, size or id is read from text)."""
    s = str(text).strip()
    if not is_ascii_int(s):
        raise InvalidConfigError(
            f"{what} {shown(text)} is not an integer (ASCII digits, at most {MAX_INT_DIGITS} of them)"
        )
    v = int(s)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        bounds = f">= {lo}" if hi is None else f"<= {hi}" if lo is None else f"in [{lo}, {hi}]"
        raise InvalidConfigError(f"{what} {shown(text)} must be {bounds}")
    return v


def parse_count(text: str | int | float, what: str, lo: int = 1, hi: int | None = None) -> int:
    """A whole number of things, written plainly or with a prefix ("4096", "8Ki", "4M", "1e6"),
    within [lo, hi]; a one-line InvalidConfigError naming ``what`` and the bounds otherwise."""
    if isinstance(text, (int, float)):
        value = _given(text, what)
    else:
        number, suffix = _split(text, what)
        value = number * _prefix(suffix, text, what)
    desc = "a positive integer" if lo == 1 else "a non-negative integer" if lo == 0 else f"an integer >= {lo}"
    if hi is not None:
        desc += f" (at most {hi:,})"
    if value != int(value) or not lo <= value <= (math.inf if hi is None else hi):
        raise InvalidConfigError(f"{what} {shown(text)} must be {desc}")
    return int(value)


_PLAIN = re.compile(rf"^\s*{_NUM}\s*$")


def parse_real(text: str, what: str, lo: float | None = None, hi: float | None = None) -> float:
    """A plain decimal number in ASCII ("0.7", "2e-3"; no prefix, no nan or inf), within [lo, hi]
    when given; a one-line InvalidConfigError naming ``what`` otherwise."""
    m = _PLAIN.match(str(text))
    if not m:
        raise InvalidConfigError(f"{what} {shown(text)} is not a number (e.g. 0.7 or 2e-3)")
    value = _check_range(float(m.group(1)), text, what)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = f">= {lo:g}" if hi is None else f"<= {hi:g}" if lo is None else f"in [{lo:g}, {hi:g}]"
        raise InvalidConfigError(f"{what} {shown(text)} must be {bounds}")
    return value


def format_plain(value: float, digits: int = 3) -> str:
    """A plain number to ``digits`` significant digits, and never in exponent notation from 1 up: a
    number that needs more digits prints whole (1002.4 -> "1002", 123456 -> "123,456", where
    "{:.3g}" gives "1e+03" and "1.23e+05"); 0.0229 -> "0.0229"."""
    text = f"{value:.{digits}g}"
    if "e" in text and math.isfinite(value) and abs(value) >= 1:
        return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.0f}"
    return text


def _scaled(value: float, steps: list[tuple[float, str]], unit: str, digits: int) -> str:
    """``value`` in the largest step it reaches (``steps`` from the largest down). A value that rounds up
    to the next larger step takes that step: 999.97 MB is "1 GB", never "1e+03 MB"; with binary steps a
    value in [1000, 1024) of a step prints whole ("1000 MiB")."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".strip()
    mag = abs(value)
    i = next((i for i, (scale, _) in enumerate(steps) if mag >= scale), len(steps) - 1)
    if i > 0 and float(f"{mag / steps[i][0]:.{digits}g}") * steps[i][0] >= steps[i - 1][0]:
        i -= 1
    scale, prefix = steps[i]
    text = format_plain(value / scale, digits)
    if "e" in text:  # below the smallest step by more than its digits show: in the base unit, as 1.73e-18 s
        base = next(p for s, p in steps if s == 1.0)
        return f"{value:.{digits}g} {base}{unit}".strip()
    return f"{text} {prefix}{unit}".strip()


_DEC_STEPS = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_BIN_STEPS = [(2.0**50, "Pi"), (2.0**40, "Ti"), (2.0**30, "Gi"), (2.0**20, "Mi"), (2.0**10, "Ki"), (1.0, "")]
_TIME_STEPS = [
    (SECONDS_PER_DAY, "d"),
    (SECONDS_PER_HOUR, "h"),
    (60.0, "min"),
    (1.0, "s"),
    (1e-3, "ms"),
    (1e-6, "us"),
    (1e-9, "ns"),
    (1e-12, "ps"),
]


def format_number(value: float, unit: str = "", digits: int = 3) -> str:
    """4.1e9 -> "4.1 G" (decimal prefixes); with unit "FLOP/s" -> "4.1 GFLOP/s"."""
    return _scaled(value, _DEC_STEPS, unit, digits)


def format_bytes(value: float, digits: int = 3, binary: bool = True) -> str:
    """85899345920 -> "80 GiB"; decimal with binary=False."""
    return _scaled(value, _BIN_STEPS if binary else _DEC_STEPS, "B", digits)


def format_rate(value: float, unit: str = "B/s", digits: int = 3) -> str:
    """2e11 -> "200 GB/s"; with unit "FLOP/s" -> "200 GFLOP/s" (decimal prefixes)."""
    return _scaled(value, _DEC_STEPS, unit, digits)


def format_duration(seconds: float, digits: int = 3) -> str:
    """Seconds in the most readable unit: 2.3e-5 -> "23 us", 5400 -> "1.5 h", 0.99996 -> "1 s"."""
    if not math.isfinite(seconds):
        return f"{seconds}"
    if seconds == 0:
        return "0 s"
    return _scaled(seconds, _TIME_STEPS, "", digits)


#: above this a ratio prints as a multiple ("56,453,303x"), not a percentage
PERCENT_LIMIT = 100.0


def format_percent(fraction: float, decimals: int = 0) -> str:
    """A fraction as a percentage with ``decimals`` places (0.423 -> "42%"); a ratio above PERCENT_LIMIT
    (10,000%) as a multiple ("56,453,303x": an efficiency of an op the roofline prices at almost nothing),
    and NaN or infinity as they are, never a ten-digit percentage or an exponent."""
    if not math.isfinite(fraction):
        return f"{fraction}"
    if abs(fraction) > PERCENT_LIMIT:
        return f"{format_plain(fraction)}x"
    return f"{fraction:.{decimals}%}"


def format_signed_percent(fraction: float, decimals: int = 1) -> str:
    """A change as a signed percentage ("+3.2%", "-0.5%"; no sign on zero), through format_percent."""
    return ("+" if fraction > 0 else "") + format_percent(fraction, decimals)


def plural(count: float, noun: str, plural_form: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is one: "1 chip", "16 chips";
    ``plural_form`` for an irregular plural."""
    number = f"{int(count)}" if math.isfinite(count) and float(count).is_integer() else f"{count:g}"
    return f"{number} {noun if count == 1 else plural_form or noun + 's'}"


def hours(seconds: float) -> float:
    return seconds / SECONDS_PER_HOUR


def usd_per_million_tokens(usd_per_hour: float, tokens_per_s: float) -> float:
    """Dollars per million tokens of hardware costing ``usd_per_hour`` that makes ``tokens_per_s``: the
    hour's dollars over the hour's tokens, per million (every serving price rooftop gives)."""
    return usd_per_hour / SECONDS_PER_HOUR / tokens_per_s * TOKENS_PER_MILLION


def days(seconds: float) -> float:
    return seconds / SECONDS_PER_DAY


def divisors(n: int) -> list[int]:
    """Divisors of ``n`` ascending, from the pairs (d, n // d) with d <= sqrt(n): the degrees a count of
    chips, heads, layers or experts splits into evenly (callers bound n, so this is at most about a
    thousand steps)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})
