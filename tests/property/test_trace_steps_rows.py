"""RowBuilder's step assignment gives the same steps row by row (bisect, for a small table read before
numpy is loaded) as column-wise (numpy's searchsorted)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftop.analysis.trace import rows as row_builder
from rooftop.analysis.trace.rows import RowBuilder

TIMES = st.sampled_from([0.0, 1e-6, 2e-6, 2.5e-6, 5e-6, 1e-5]) | st.floats(0, 2e-5, allow_nan=False)
ROW = st.tuples(
    st.sampled_from(["step", "kernel", "op", "memcpy", "other"]),
    TIMES,
    st.sampled_from([0.0, 1e-6, 3e-6, 1e-5]),
    st.none() | st.integers(0, 5),
    st.none() | st.integers(0, 6) | st.sampled_from(["7", "x"]),
)


def _steps(rows: list[tuple[Any, ...]], launches: dict[Any, float], by_row: bool, mp: pytest.MonkeyPatch) -> list:
    builder = RowBuilder()
    builder.launch_s.update(launches)
    for kind, start, dur, step, corr in rows:
        builder.add("/device:GPU:0", "l", kind, None, None, start, dur, step, kind, corr, {})
    mp.setattr(row_builder, "_row_by_row", lambda n: by_row)
    return list(builder.build().column("step"))


LAUNCHES = st.dictionaries(st.integers(0, 6) | st.just("7"), TIMES, max_size=5)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(ROW, max_size=30), launches=LAUNCHES)
def test_steps_row_by_row_are_the_columns(rows: list[tuple[Any, ...]], launches: dict[Any, float]) -> None:
    _row_by_row_is_the_columns(rows, launches)


@pytest.mark.long
@settings(max_examples=1000, deadline=None)
@given(rows=st.lists(ROW, max_size=30), launches=LAUNCHES)
def test_steps_row_by_row_are_the_columns_long(rows: list[tuple[Any, ...]], launches: dict[Any, float]) -> None:
    _row_by_row_is_the_columns(rows, launches)


def _row_by_row_is_the_columns(rows: list[tuple[Any, ...]], launches: dict[Any, float]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        by_row = _steps(rows, launches, True, mp)
        by_column = _steps(rows, launches, False, mp)
    assert by_row == by_column


def test_steps_row_by_row_placed_by_window_and_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Markers at 0 (step 4, 5 us) and 6 us (unnumbered: its place, 1); a kernel at 2 us in the first, one
    at 9 us launched at 1 us (correlation 3) in the first too, an op at 5.5 us in neither window."""
    rows = [("step", 0.0, 5e-6, 4, None), ("step", 6e-6, 5e-6, None, None), ("kernel", 2e-6, 1e-6, None, 1),
            ("kernel", 9e-6, 1e-6, None, 3), ("op", 5.5e-6, 1e-7, None, None)]  # fmt: skip
    assert _steps(rows, {3: 1e-6}, True, monkeypatch) == [4, 1, 4, 4, None]
