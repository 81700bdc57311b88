import pytest

from rooftop.errors import InvalidConfigError
from rooftop.units import (
    format_bytes,
    format_duration,
    format_number,
    parse_bytes,
    parse_duration,
    parse_number,
    parse_rate,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("80GiB", 80 * 2**30), ("16 GB", 16 * 10**9), ("4096", 4096), ("1.5KiB", 1.5 * 1024), ("2 TB", 2e12)],
)
def test_parse_bytes(text: str, expected: float) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"), [("4M", 4 * 10**6), ("15T", 15 * 10**12), ("1.5e12", 1.5e12), ("2k", 2000), ("7", 7)]
)
def test_parse_number(text: str, expected: float) -> None:
    assert parse_number(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"), [("50ms", 50 * 1e-3), ("3us", 3e-6), ("2h", 2 * 3600), ("1.5", 1.5), ("10 ns", 10e-9)]
)
def test_parse_duration(text: str, expected: float) -> None:
    assert parse_duration(text) == pytest.approx(expected)


def test_parse_rate() -> None:
    assert parse_rate("819 GB/s") == 819e9
    assert parse_rate("197 TFLOP/s") == 197e12


@pytest.mark.parametrize("bad", ["", "abc", "12 XB", "1..2"])
def test_bad_quantities_name_the_value(bad: str) -> None:
    with pytest.raises(InvalidConfigError, match="cannot read"):
        parse_bytes(bad)


def test_bad_duration_unit() -> None:
    with pytest.raises(InvalidConfigError, match="unknown unit 'fortnights'"):
        parse_duration("3 fortnights")


def test_formatting() -> None:
    assert format_bytes(80 * 2**30) == "80 GiB"
    assert format_number(4.1e9, "FLOP") == "4.1 GFLOP"
    assert format_duration(2.3e-5) == "23 us"
    assert format_duration(5400) == "1.5 h"
    assert format_duration(3 * 86400) == "3 d"


def test_integers_are_ascii_digits_of_bounded_length() -> None:
    from rooftop.units import parse_int

    assert parse_int(" 42 ", "x") == 42 and parse_int("-3", "x") == -3
    for bad in ("²", "١٢", "4.5", "1e3", "", "1" * 5000):
        with pytest.raises(InvalidConfigError, match="is not an integer") as err:
            parse_int(bad, "--topology dim")
        assert len(str(err.value)) < 200  # a 5,000-digit input still gives a short line
    with pytest.raises(InvalidConfigError, match=r"must be in \[1, 8\]"):
        parse_int("9", "tp", 1, 8)
    with pytest.raises(InvalidConfigError, match="cannot read number"):
        parse_number("²")
