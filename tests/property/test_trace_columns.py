"""The column-wise trace analysis gives what the event-by-event rules give, to the last bit.

Executions, per-op groups, interval merges, windows, collective overlap, step placement and the innermost op
holding a kernel's launch are computed with numpy sorts over the whole table (analysis/trace/ops.py,
analysis/intervals.py, RowBuilder, analysis/torch/launches.py). Each is
checked here against the rule it implements written out one event at a time (the code they replaced), on
random tables with ties in time, repeated kernel names, instructions that are another event's name, and
windows that end anywhere. Sums are compared with ==: the report must not change in its last digit.
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections import defaultdict
from types import MappingProxyType
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooftop.analysis import intervals
from rooftop.analysis.torch import launches
from rooftop.analysis.trace.events import COLUMNS, EventArgs, EventTable, OpEvent, Trace, natural_key
from rooftop.analysis.trace.ops import OpExecution, OpGroup, first_codes, group_ops, op_executions
from rooftop.analysis.trace.rows import RowBuilder

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))  # under -m long

# ---------------------------------------------------------------------------------------------------
# the event-by-event rules


def reference_executions(table: EventTable, kinds: tuple[str, ...], by_time: bool) -> list[OpExecution]:
    """Executions as found one event at a time: per (device, line) in sorted order, events by (start,
    name, row); a kernel continues the execution before it when its instruction equals the previous
    event's (instruction, or name without one), with the same module, and a name not yet in it."""
    c = {name: table.column(name) for name in COLUMNS}
    streams: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, k in enumerate(c["kind"]):
        if k in kinds:
            streams[(c["device"][i], c["line"][i])].append(i)
    out: list[OpExecution] = []
    for key in sorted(streams):
        rows = sorted(streams[key], key=lambda i: (c["start_s"][i], c["name"][i]))
        current: dict[str, Any] | None = None
        prev: tuple[Any, Any] | None = None
        for i in rows:
            inst, nm, mod, dur = c["instruction"][i], c["name"][i], c["module"][i], c["duration_s"][i]
            what = inst if inst is not None else nm
            if (current is not None and inst is not None and prev == (mod, what) and c["kind"][i] == "kernel"
                    and nm not in current["names"]):  # fmt: skip
                current["names"].append(nm)
                current["end"] = max(current["end"], c["start_s"][i] + dur)
                current["busy"] = current["busy"] + dur
                current["events"] += 1
            else:
                if current is not None:
                    out.append(_execution(key[0], current))
                current = {"mod": mod, "inst": inst, "name": inst or nm, "start": c["start_s"][i],
                           "end": c["start_s"][i] + dur, "busy": dur, "events": 1, "names": [nm],
                           "step": c["step"][i]}  # fmt: skip
            prev = (mod, what)
        if current is not None:
            out.append(_execution(key[0], current))
    if by_time:
        out.sort(key=lambda e: e.start_s)
        runs = itertools.groupby(range(len(out)), key=lambda k: out[k].start_s)
        for _, group in runs:
            ks = list(group)
            out[ks[0] : ks[-1] + 1] = sorted(out[ks[0] : ks[-1] + 1], key=lambda e: (natural_key(e.device), e.name))
    return out


def _execution(device: str, x: dict[str, Any]) -> OpExecution:
    return OpExecution(device, x["mod"], x["inst"], x["name"], x["start"], x["end"], x["busy"], x["events"],
                       tuple(x["names"]), x["step"])  # fmt: skip


def reference_groups(execs: list[OpExecution]) -> list[OpGroup]:
    acc: dict[tuple, list[OpExecution]] = defaultdict(list)
    for ex in execs:
        acc[(ex.module, ex.instruction, ex.name)].append(ex)
    groups = []
    for (module, inst, name), exs in acc.items():
        per_dev: dict[str, float] = defaultdict(float)
        per_count: dict[str, int] = defaultdict(int)
        for ex in exs:
            per_dev[ex.device] += ex.busy_s
            per_count[ex.device] += 1
        busy = [ex.busy_s for ex in exs]
        devs = sorted(per_dev, key=natural_key)
        groups.append(OpGroup(module, inst, name, len(exs), sum(ex.events for ex in exs), sum(busy),
                              sum(busy) / len(exs), min(busy), max(busy),
                              MappingProxyType({d: per_dev[d] for d in devs}),
                              MappingProxyType({d: per_count[d] for d in devs}),
                              tuple(sorted({k for ex in exs for k in ex.kernel_names}))))  # fmt: skip
    groups.sort(key=lambda g: (-g.total_s, g.module or "", g.name))
    return groups


def reference_overlap(lo: float, hi: float, merged: list[tuple[float, float]]) -> float:
    """The walk of _overlap: up to 64 intervals from the first that ends after lo, one at a time."""
    ends = [e for _, e in merged]
    first = bisect.bisect_right(ends, lo)
    total = 0.0
    for j in range(first, min(first + intervals._WALK, len(merged))):
        s, e = merged[j]
        total += max(0.0, min(hi, e) - max(lo, s))
        if hi < e:
            return total
    return total if first + intervals._WALK >= len(merged) else intervals._Prefix(merged).within(lo, hi)


# ---------------------------------------------------------------------------------------------------
# random tables

TIMES = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 1e-6, 2.5e-6]) | st.floats(0, 10, allow_nan=False)


#: an event's fields (made once: a strategy built inside the draw loop is built and validated per event)
FIELDS = (
    st.sampled_from(["/device:GPU:0", "/device:GPU:10", "/device:GPU:2"]),
    st.sampled_from(["s1", "s2"]),
    st.sampled_from(["k0", "k1", "k2", "a"]),
    st.sampled_from([None, "m", "jit_f(3)"]),
    st.sampled_from([None, None, "a", "b", "k0", ""]),  # the instruction; "k0": also a kernel's name
    TIMES,
    st.sampled_from([0.0, 0.25, 1.0]) | st.floats(0, 3, allow_nan=False),
    st.sampled_from([None, 0, 1]),
    st.sampled_from(["kernel", "kernel", "op", "other", "memcpy"]),
)
DEVICE, STREAM, NAME, MODULE, INSTRUCTION, START, DURATION, STEP, KIND = FIELDS


@st.composite
def tables(draw: st.DrawFn) -> EventTable:
    n = draw(st.integers(0, 40))
    rows = []
    for _ in range(n):
        inst = draw(INSTRUCTION)
        rows.append(OpEvent(draw(DEVICE), draw(STREAM), draw(NAME), draw(MODULE), inst, draw(START), draw(DURATION),
                            draw(STEP), draw(KIND), None))  # fmt: skip
    return EventTable.from_events(rows)


def _same(a: list[Any], b: list[Any]) -> bool:
    """Equal, floats compared by their bits (== would call -0.0 and 0.0 the same)."""
    return repr(a) == repr(b)


KINDS = st.sampled_from([("op", "kernel"), ("kernel",), ("op",)])


@SETTINGS
@given(tables(), st.booleans(), KINDS)
def test_executions_are_those_of_the_event_by_event_rule(table: EventTable, by_time: bool, kinds: tuple) -> None:
    _executions_as_event_by_event(table, by_time, kinds)


@pytest.mark.long
@LONG
@given(tables(), st.booleans(), KINDS)
def test_executions_are_those_of_the_event_by_event_rule_long(table: EventTable, by_time: bool, kinds: tuple) -> None:
    _executions_as_event_by_event(table, by_time, kinds)


def _executions_as_event_by_event(table: EventTable, by_time: bool, kinds: tuple) -> None:
    trace = Trace(table, "t", "chrome-json")
    want = reference_executions(table, kinds, by_time)
    assert _same(op_executions(trace, kinds, by_time=by_time), want)
    assert _same(group_ops(trace, kinds), reference_groups(reference_executions(table, kinds, False)))


# ---------------------------------------------------------------------------------------------------
# intervals

SPANS = st.lists(st.tuples(TIMES, st.floats(0, 3, allow_nan=False)), max_size=60)


@SETTINGS
@given(SPANS)
def test_merge_is_the_pairwise_merge(spans: list[tuple[float, float]]) -> None:
    pairs = [(s, s + d) for s, d in spans]
    merged = intervals.merge(np.array([s for s, _ in pairs], float), np.array([e for _, e in pairs], float))
    assert _same(merged.pairs(), intervals._merge(pairs))


@SETTINGS
@given(SPANS, st.lists(st.tuples(st.floats(-1, 14, allow_nan=False), st.floats(0, 14, allow_nan=False)), max_size=30),
       st.integers(1, 70))  # fmt: skip
def test_windows_and_overlaps_are_those_of_one_window_at_a_time(
    spans: list[tuple[float, float]], windows: list[tuple[float, float]], walk: int
) -> None:
    merged = intervals._merge([(s, s + d) for s, d in spans])
    m = intervals.Merged.of(merged)
    lo = np.array([a for a, _ in windows], float)
    hi = np.array([a + w for a, w in windows], float)
    assert _same(m.within_all(lo, hi).tolist(), [m.within(a, b) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)])
    saved = intervals._WALK
    intervals._WALK = walk  # short walks reach the prefix sums on small lists
    try:
        want = [reference_overlap(a, b, merged) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
        assert _same(intervals._overlaps(lo, hi, m).tolist(), want)
        assert _same(
            [
                intervals._overlap(a, b, merged, intervals._Prefix(merged))
                for a, b in zip(lo.tolist(), hi.tolist(), strict=True)
            ],
            want,
        )
    finally:
        intervals._WALK = saved


@SETTINGS
@given(st.lists(st.integers(-5, 5) | st.integers(-(2**40), 2**40), max_size=80))
def test_first_codes_number_keys_by_first_appearance(keys: list[int]) -> None:
    code, first = first_codes(np.array(keys, np.int64))
    seen: dict[int, int] = {}
    assert code.tolist() == [seen.setdefault(k, len(seen)) for k in keys]
    assert first.tolist() == [keys.index(k) for k in seen]


# ---------------------------------------------------------------------------------------------------
# the row builder: steps placed by bisection, args shared by value and type


MARKS = st.lists(st.tuples(TIMES, st.floats(0, 3, allow_nan=False), st.sampled_from([None, 4, 7])), max_size=6)


@SETTINGS
@given(
    MARKS,
    st.lists(
        st.tuples(
            TIMES,
            st.sampled_from(["kernel", "other", "op"]),
            st.sampled_from([None, "c1", "c2"]),
            st.sampled_from([None, 9]),
        ),
        max_size=30,
    ),
    st.dictionaries(st.sampled_from(["c1", "c2", "c3"]), TIMES),
)
def test_steps_are_placed_as_one_event_at_a_time(
    marks: list[tuple[float, float, int | None]], events: list[tuple[float, str, str | None, int | None]],
    launches: dict[str, float],
) -> None:  # fmt: skip
    rows = RowBuilder()
    rows.launch_s.update(launches)
    for start, dur, number in marks:
        rows.add("/host:CPU", "t", "ProfilerStep", None, None, start, dur, number, "step", None, {})
    for start, kind, corr, step in events:
        rows.add("/device:GPU:0", "s", "k", None, None, start, 1.0, step, kind, corr, {})
    table = rows.build()
    order = sorted(range(len(marks)), key=lambda k: marks[k][0])
    numbers = [marks[k][2] if marks[k][2] is not None else n for n, k in enumerate(order)]
    windows = [(marks[k][0], marks[k][0] + marks[k][1], n) for k, n in zip(order, numbers, strict=True)]
    want = []
    for start, kind, corr, step in [(s, "step", None, n) for s, _, n in marks] + events:
        t = launches.get(corr, start) if corr is not None and kind in ("kernel", "memcpy", "op") else start
        j = bisect.bisect_right([w[0] for w in windows], t) - 1
        want.append(windows[j][2] if step is None and j >= 0 and t <= windows[j][1] else step)
    assert list(table.column("step")) == want


def test_args_are_shared_only_when_equal_value_for_value_and_type() -> None:
    rows = RowBuilder()
    values = [1, 1.0, True, -0.0, 0.0, "1", [1], [1.0], [True], {"x": [1]}, None]
    stored = [rows.args({"v": v}) for v in values] + [rows.args({"v": v}) for v in values]
    first, again = stored[: len(values)], stored[len(values) :]
    assert all(a is b for a, b in zip(first, again, strict=True))  # the same args: one dict
    assert len({id(a) for a in first}) == len(values)  # values equal by == but of another type: apart
    assert [repr(a["v"]) for a in first] == [repr(v) for v in values]


def test_own_ids_stay_with_their_event() -> None:
    rows = RowBuilder()
    one = rows.args({"hlo_op": "dot.1", "correlation_id": 5, "run_id": 2})
    two = rows.args({"hlo_op": "dot.1", "correlation_id": 6, "run_id": 2})
    assert isinstance(one, EventArgs) and isinstance(two, EventArgs) and one.shared is two.shared
    assert dict(one) == {"hlo_op": "dot.1", "correlation_id": 5, "run_id": 2}
    assert (two["correlation_id"], two.get("run_id"), two.get("nope", 3), len(two)) == (6, 2, 3, 3)
    assert "correlation_id" in two and "nope" not in two and one != two
    kernel = rows.args({"External id": 7})
    assert dict(kernel) == {"External id": 7} and kernel.get("cat") is None


def test_table_keeps_times_as_doubles_and_accepts_other_numbers() -> None:
    events = [OpEvent("d", "l", "n", None, None, 1, 2, None, "kernel", None)]
    table = EventTable.from_events(events)
    assert isinstance(table.column("start_s"), array) and table[0].start_s == 1.0
    odd = EventTable({**{c: table.column(c) for c in COLUMNS}, "start_s": ("x",)})
    assert odd.column("start_s") == ("x",)  # not numbers: kept as given


def reference_innermost(spans: list[tuple[float, float]], t: float) -> int:
    """The innermost span holding ``t`` by its definition: of the spans (sorted by start, longest first)
    with start <= t <= end, the last; -1 for none."""
    return max((j for j, (start, end) in enumerate(spans) if start <= t <= end), default=-1)


SPAN_TIMES = st.integers(0, 40).map(float) | st.sampled_from([0.5, 7.25, 1e-9])


@SETTINGS
@given(st.lists(st.tuples(SPAN_TIMES, SPAN_TIMES), max_size=30), st.lists(SPAN_TIMES | st.just(-1.0), max_size=30),
       st.sampled_from([0, 1, 64]))  # fmt: skip
def test_innermost_span_lookup_is_the_sweep_and_the_definition(pairs: list[tuple[float, float]], times: list[float],
                                                               hops: int) -> None:  # fmt: skip
    """Nested, overlapping, touching and empty spans; times before, inside, between and after them; the
    look-up with few hops allowed (the sweep takes over) and with many."""
    spans = sorted(((s, s + d) for s, d in pairs), key=lambda p: (p[0], -(p[1] - p[0])))
    starts, ends = np.array([s for s, _ in spans]), np.array([e for _, e in spans])
    with mock.patch.object(launches, "_MAX_HOPS", hops):
        found = launches.innermost(starts, ends, np.array(times)).tolist()
    assert found == [reference_innermost(spans, t) for t in times]
    ordered = sorted(times)
    assert launches.sweep(starts.tolist(), ends.tolist(), ordered) == [reference_innermost(spans, t) for t in ordered]
