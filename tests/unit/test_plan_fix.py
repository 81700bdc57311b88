"""plan/fix.py: the one reader of ``--fix NAME=VALUE,...`` (names and aliases, whole degrees, on/off
flags, words), and its one-line errors."""

from __future__ import annotations

import pytest

from rooftop.cli.flags import error_line
from rooftop.errors import InvalidConfigError
from rooftop.plan.fix import PinSpec, parse_pins, pinned_text

# ---------------------------------------------------------------- the shared --fix reader


SPEC = PinSpec(counts=("tp", "pp"), flags=("flash",), texts=("remat",), aliases={"t": "tp"})


def test_parse_pins_reads_counts_flags_words_and_aliases() -> None:
    assert parse_pins(" t=4 , pp=2,flash=off,remat=full,", SPEC) == {"tp": 4, "pp": 2, "flash": False, "remat": "full"}
    assert parse_pins(None, SPEC) == {} and parse_pins("", SPEC) == {}
    assert pinned_text({"tp": 4, "flash": True}) == "tp=4,flash=1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tp", "cannot read --fix 'tp': expected NAME=VALUE, e.g. tp=8"),
        ("xp=2", "--fix cannot pin 'xp' (valid: tp, pp, remat, flash; aliases: t = tp)"),
        ("tp=2,t=4", "--fix pins 'tp' twice"),
        ("tp=²", "--fix tp '²' is not an integer"),
        ("tp=0", "--fix tp '0' must be in [1, 16777216]"),
        ("flash=maybe", "--fix flash='maybe': expected 0 or 1"),
    ],
)
def test_parse_pins_errors_are_one_line(text: str, message: str) -> None:
    with pytest.raises(InvalidConfigError) as err:
        parse_pins(text, SPEC)
    said = error_line(err.value)  # as the CLI prints it: the option spelled as its flag
    assert message in said and "\n" not in str(err.value)
    assert message.replace("--fix", "fix") in str(err.value)  # the library names the parameter
