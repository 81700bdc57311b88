"""jsonstream.long_digits: whether a batch's text holds 19 or more ASCII digits in a row (an integer orjson
would read as a float, so the json module decodes that batch). Exact at every offset and on both of its
paths: a few 8-digit words measured one by one, many searched whole."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftop.analysis.trace.jsonstream import _FEW_WORDS, decode_array, long_digits

LONG = re.compile(rb"[0-9]{19}")


@pytest.mark.parametrize("run", [0, 1, 8, 15, 18, 19, 20, 27, 64])
def test_a_run_is_long_from_19_digits_at_every_offset(run: int) -> None:
    for at in range(17):
        text = b"x" * at + b"7" * run + b"]"
        assert long_digits(text) == (run >= 19), (at, run)
        assert long_digits(b"7" * run) == (run >= 19)


@pytest.mark.parametrize("words", [_FEW_WORDS - 1, _FEW_WORDS + 40])
def test_many_shorter_runs_are_not_long_but_one_among_them_is(words: int) -> None:
    """18-digit runs hold a whole 8-digit word each (either path is taken by their number); a 19th digit
    anywhere makes one long."""
    shorter = b",".join([b"123456789012345678"] * words)
    assert not long_digits(b"[" + shorter + b"]")
    for cut in (9, len(shorter) // 2 - 3, len(shorter) - 30):
        longer = shorter[:cut] + shorter[cut:].replace(b"8,", b"89,", 1)
        assert long_digits(longer) == bool(LONG.search(longer))
        assert long_digits(longer)


def test_timestamps_are_not_long_and_the_batch_is_orjsons() -> None:
    """16-digit microsecond timestamps (Kineto on a wall clock) are shorter; an int past 64 bits is not."""
    stamps = b"[" + b",".join(b'{"ts":%d.%d}' % (1712345678901234 + k, k % 10) for k in range(300)) + b"]"
    assert not long_digits(stamps)
    assert decode_array(stamps.decode())[3] == {"ts": 1712345678901237.3}
    assert decode_array('[{"id":18446744073709551616}]') == [{"id": 2**64}]  # json's int, not orjson's float


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from([b",", b".", b"-", b'"', b"e", b" "])), max_size=200))
def test_long_digits_is_the_regular_expression(parts: list[tuple[int, bytes]]) -> None:
    text = b"".join(b"9" * n + sep for n, sep in parts)
    assert long_digits(text) == bool(LONG.search(text))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from([b",", b".", b'"', b" "])), max_size=100))
def test_long_digits_before_numpy_is_loaded_is_the_regular_expression(parts: list[tuple[int, bytes]]) -> None:
    """A small trace read before numpy is loaded: its text searched whole (no numpy import), the same answer."""
    import sys

    from rooftop.analysis.trace import jsonstream

    text = b"".join(b"9" * n + sep for n, sep in parts)
    with pytest.MonkeyPatch.context() as mp:
        mp.delitem(sys.modules, "numpy")
        mp.setattr(jsonstream, "_searched", 0)
        assert long_digits(text) == bool(LONG.search(text))
        assert "numpy" not in sys.modules
