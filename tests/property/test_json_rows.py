"""report/serialize.write_json: a payload whose table is built a row at a time (Rows) is written as the
same text as to_json writes the payload with that table as a list."""

from __future__ import annotations

import io
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftop.report.serialize import Rows, to_json, write_json

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**1100), max_value=2**1100)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner), max_leaves=6)
ROWS = st.lists(st.dictionaries(st.text(max_size=6), VALUES, max_size=6), max_size=5)


@settings(max_examples=50, deadline=None)
@given(rows=ROWS, before=st.dictionaries(st.text(max_size=5), VALUES, max_size=3), after=VALUES)
def test_rows_written_one_at_a_time_are_the_document(
    rows: list[dict[str, Any]], before: dict[str, Any], after: Any
) -> None:
    _written_as_the_document(rows, before, after)


@pytest.mark.long
@settings(max_examples=1000, deadline=None)
@given(rows=ROWS, before=st.dictionaries(st.text(max_size=5), VALUES, max_size=3), after=VALUES)
def test_rows_written_one_at_a_time_are_the_document_long(
    rows: list[dict[str, Any]], before: dict[str, Any], after: Any
) -> None:
    _written_as_the_document(rows, before, after)


def _written_as_the_document(rows: list[dict[str, Any]], before: dict[str, Any], after: Any) -> None:
    payload = {**before, "rows": rows, "zz": after}
    lazy = {**before, "rows": Rows(list(range(len(rows))), rows.__getitem__), "zz": after}
    out = io.StringIO()
    write_json(lazy, out)
    assert out.getvalue() == to_json(payload) + "\n"


def test_rows_read_as_a_sequence() -> None:
    rows = Rows([1, 2, 3], lambda x: {"x": x, "half": x / 2, "nan": math.nan})
    assert len(rows) == 3 and rows[1] == {"x": 2, "half": 1.0, "nan": rows[1]["nan"]}
    assert [r["x"] for r in rows] == [1, 2, 3] and [r["x"] for r in rows[1:]] == [2, 3]


def test_repeated_floats_written_as_the_document() -> None:
    """A float written before is looked up, not made again: the text stays each value's own (0.0 and -0.0
    compare equal and are written apart; 1e16 and 1.0000000000000002 are not 1.0)."""
    values = [0.0, -0.0, 0.0, 1.5, 1.5, -1.5, 1e16, 1.0, 1.0000000000000002, 1.0, -0.0, 2.5e-300]
    _written_as_the_document([{"v": v, "w": [v, v]} for v in values] + [{"v": v} for v in values], {}, None)
