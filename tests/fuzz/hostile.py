"""Hostile values, as a fuzzer (or an unlucky user) would type them, and ways to spoil a valid value.

Every function takes a ``random.Random`` so that a case is reproducible from its seed; the hypothesis
strategies in :mod:`tests.fuzz.strategies` draw from the same pools.
"""

from __future__ import annotations

import random
import re

#: characters for which str.isdigit() is true but that are not ASCII digits: "²" and "①" (category
#: No) fail int(); "٣", "３" and "𝟗" (Nd) pass int() and so slip past a check made with isdigit()
UNICODE_DIGITS = "²³¹⁴₀₉①⑵⒊❸٣۴७৪๓໒༣၃០᠒３９𝟗𝟎"
UNICODE_NUMBERS = "½¼Ⅻⅸ௰〇"

#: numbers in every spelling that breaks a naive reader
NUMBERS = (
    "0", "-0", "-1", "-4096", "1", "2", "3", "7", "1.5", "0.5", "-0.5", "1e-9", "1e-400", "1e400", "-1e400",
    "1e308", "1.7976931348623157e308", "2e308", "5e-324", "inf", "-inf", "+inf", "Infinity", "nan", "NaN", "-nan",
    "1e15", "1e12", "4294967296", "9223372036854775807", "9223372036854775808", "18446744073709551616",
    "99999999999999999999999999999", "9" * 31, "1" * 400, "1" * 4301, "1" * 5000, "1" + "0" * 400, "0x10", "0b11",
    "0o7", "1_000", "1,000", "1 000", " 8", "8 ", "+8", "08", "1e3", "1E3", "1e+3", "3.", ".5", "1..2", "1e", "e3",
    "²", "1²", "²*4", "٣", "١٢٣", "３", "𝟗", "①", "½", "Ⅻ", "8٣", "1e٣", "١e3", "2**63", "1/2", "-", "+", "",
)  # fmt: skip
SUFFIXES = ("", "k", "K", "Ki", "M", "Mi", "G", "GiB", "TiB", "T", "P", "E", "B", "MB", "ms", "us", "s", "h", "ns",
            "kk", "iB", "ZiB", "YB", "QiB", " GiB", "GB/s", "x", "%", "²")  # fmt: skip
TEXTS = (
    "", " ", "  ", "\t", "\n", "a\nb", "x\r\ny", "\x00", "a\x00b", "\x1b[31mred\x1b[0m", "\u202eevil", "\u2028",
    "\ufeffx", "\udcff", "é", "💥", "中文", "[/bold]", "[bold]", "[red on white blink]ALERT[/]", "[link=http://x]a[/link]",
    "[/]", "[", "]", "\\[x]", ":smile:", "%s%n", "{0}", "{}", "${HOME}", "$(id)", "`id`", "'", '"', "\\", "/", ".",
    "..", "-", "--", "--json", "-h", "=", ",", ",,", ";", "*", "?", "x" * 300, "A" * 10000, "é" * 5000,
    "a" * 255 + "b", "None", "null", "true", "[]", "{}", "0", "-1",
)  # fmt: skip


def number(rng: random.Random) -> str:
    """A hostile number, sometimes with a unit suffix."""
    roll = rng.random()
    if roll < 0.6:
        value = rng.choice(NUMBERS)
    elif roll < 0.75:
        value = "".join(rng.choice("0123456789" + UNICODE_DIGITS) for _ in range(rng.randint(1, 6)))
    elif roll < 0.85:
        value = str(rng.choice([-1, 1]) * rng.randint(0, 10 ** rng.randint(1, 40)))
    else:
        value = f"{rng.choice(['', '-'])}{rng.uniform(1, 10):.6g}e{rng.randint(-330, 330)}"
    return value + (rng.choice(SUFFIXES) if rng.random() < 0.3 else "")


def text(rng: random.Random) -> str:
    """A hostile string (markup, control characters, huge, empty)."""
    return rng.choice(TEXTS) if rng.random() < 0.85 else random_text(rng)


def random_text(rng: random.Random, max_len: int = 40) -> str:
    alphabet = "abcXYZ019_-=,.:[]{}()<>@#*x/\\ \t" + UNICODE_DIGITS + UNICODE_NUMBERS + "é中💥\u202e"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, max_len)))


def anything(rng: random.Random) -> str:
    return number(rng) if rng.random() < 0.5 else text(rng)


_NUM = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def spoil(rng: random.Random, valid: str) -> str:
    """A near miss of a valid value: one of its numbers replaced, a piece repeated, cut or inserted."""
    roll = rng.random()
    numbers = list(_NUM.finditer(valid))
    if roll < 0.45 and numbers:
        m = rng.choice(numbers)
        return valid[: m.start()] + number(rng) + valid[m.end() :]
    if roll < 0.55 and valid:
        at = rng.randint(0, len(valid))
        return valid[:at] + rng.choice(UNICODE_DIGITS + "²,=x*[]_ ") + valid[at:]
    if roll < 0.65 and valid:
        at = rng.randint(0, len(valid) - 1)
        return valid[:at] + valid[at + rng.randint(1, 3) :]
    if roll < 0.75:
        sep = rng.choice([",", "x", "*", ""])
        return sep.join([valid] * rng.choice([2, 3, 50, 2000]))
    if roll < 0.85:
        at = rng.randint(0, len(valid))
        return valid[:at] + text(rng) + valid[at:]
    return anything(rng)
