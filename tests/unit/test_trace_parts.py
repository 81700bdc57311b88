"""A JSON trace read by several processes (analysis/trace/chrome_parts.py) loads exactly as one reader
loads it: the same table, row for row, the same metadata, and the same error where the trace has one;
where the parts cannot be taken (names in the middle of the events, a B/E pair across a cut, a cut inside
a string, a part that fails), the caller reads on alone."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_profile import jax_chrome, kineto_json
from rooftop.analysis.trace import chrome_parts
from rooftop.analysis.trace.events import COLUMNS, Trace
from rooftop.analysis.trace.jsonstream import JsonStream
from rooftop.analysis.trace.load import load_trace
from rooftop.errors import InvalidConfigError, RooftopError
from tests.conftest import quick_and_long
from tests.fuzz.oracle import Special
from tests.fuzz.targets import make_case

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parts are read by forked processes")
THIRD_PARTY = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "third_party_profiles" / "chrome_trace"


def _snapshot(trace: Trace) -> tuple[Any, ...]:
    """Everything a loaded trace holds, as text (NaN and the classes of values compared too)."""
    cols = trace.events._cols
    columns = tuple(
        repr([(a.__class__.__name__, sorted(a.items(), key=repr)) for a in cols[c]])
        if c == "args"
        else repr(list(cols[c]))
        for c in COLUMNS
    )
    return columns, trace.format, trace.devices, repr(trace.memory), repr(trace.metadata), dict(trace.hlo_protos)


def _outcome(path: Path) -> Any:
    try:
        return _snapshot(load_trace(path))
    except RooftopError as exc:
        return f"{type(exc).__name__}: {exc}"


@pytest.fixture()
def split(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Load with parts of at least 256 characters, in up to 3 processes; counts the parts taken."""
    taken = {"merges": 0, "parts": 0}
    merge = chrome_parts._merge

    def counted(mapper: Any, chain: list[Any]) -> None:
        taken["merges"] += 1
        taken["parts"] += len(chain)
        merge(mapper, chain)

    monkeypatch.setattr(chrome_parts, "MIN_PART_CHARS", 256)
    monkeypatch.setattr(chrome_parts, "_merge", counted)
    monkeypatch.setenv(chrome_parts.ENV, "3")
    return taken


def _alone(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setenv(chrome_parts.ENV, "1")
        return _outcome(path)


@pytest.mark.parametrize("kind", ["kineto", "jax"])
def test_parts_load_the_same_table(
    kind: str, tmp_path: Path, split: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / f"t.{kind}.json.gz"
    (kineto_json if kind == "kineto" else jax_chrome)(path, 6000)
    alone = _alone(path, monkeypatch)
    assert split["merges"] == 0
    assert _outcome(path) == alone
    assert (split["merges"], split["parts"]) == (1, 2)  # the caller's part and two others: all three taken


def test_an_uncompressed_trace_and_two_processes(
    tmp_path: Path, split: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    gz = tmp_path / "t.pt.trace.json.gz"
    kineto_json(gz, 3000)
    path = tmp_path / "t.pt.trace.json"
    path.write_bytes(gzip.decompress(gz.read_bytes()))
    monkeypatch.setenv(chrome_parts.ENV, "2")
    alone = _alone(path, monkeypatch)
    assert _outcome(path) == alone and (split["merges"], split["parts"]) == (1, 1)


def _events(n: int, pid: int = 1) -> list[dict[str, Any]]:
    return [
        {"ph": "X", "cat": "kernel", "name": f"k{i % 5}", "pid": pid, "tid": 7, "ts": 10.0 * i, "dur": 4.0,
         "args": {"device": 0, "correlation": i, "External id": i}}
        for i in range(n)
    ]  # fmt: skip


def _write(path: Path, events: list[Any], head: str = '{"traceEvents":[', tail: str = '],"traceName":"t"}') -> Path:
    path.write_text(head + ",\n".join(json.dumps(e) for e in events) + tail)
    return path


@pytest.mark.parametrize(
    "case",
    [
        "names_in_the_middle",  # a thread named half-way: the state a later part starts from differs
        "begin_end_across",  # a B/E pair that spans the whole trace: a B waits at every cut
        "cut_in_a_string",  # the text "}, {" inside a name, where the cuts are
        "bare_array",  # the JSON array format, its "]" left out
        "metadata_after",  # Kineto's deviceProperties and names after the events
    ],
)
def test_fallbacks_and_forms_load_as_one_reader(
    case: str, tmp_path: Path, split: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[Any] = _events(400)
    head, tail = '{"traceEvents":[', '],"traceName":"t"}'
    if case == "names_in_the_middle":
        events.insert(200, {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "stream 7"}})
    elif case == "begin_end_across":
        events.insert(1, {"ph": "B", "name": "outer", "pid": 1, "tid": 9, "ts": 1.0})
        events.append({"ph": "E", "pid": 1, "tid": 9, "ts": 9000.0})
    elif case == "cut_in_a_string":
        for e in events:
            e["name"] = "a}, {b" * 20
    elif case == "bare_array":
        head, tail = "[", ",\n"
    else:
        events.append({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "rank 0"}})
        tail = '],"deviceProperties":[{"id":0,"name":"GPU X"}],"schemaVersion":1}'
    path = _write(tmp_path / "t.json", events, head, tail)
    alone = _alone(path, monkeypatch)
    assert not isinstance(alone, str)
    assert _outcome(path) == alone
    taken = case in ("bare_array", "metadata_after", "cut_in_a_string")
    assert (split["merges"] > 0) == taken


@pytest.mark.parametrize("at", [50, 390])
def test_an_error_in_a_part_is_the_one_reader_error(
    at: int, tmp_path: Path, split: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[Any] = _events(400)
    events[at]["ts"] = "soon"
    path = _write(tmp_path / "t.json", events)
    alone = _alone(path, monkeypatch)
    assert isinstance(alone, str) and f"t.json:{at + 1}: trace event {at + 1} " in alone  # (one event a line)
    assert _outcome(path) == alone and split["merges"] == 0


def test_a_part_that_fails_is_read_by_the_caller(
    tmp_path: Path, split: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "t.json", _events(400))
    alone = _alone(path, monkeypatch)

    def dies(*args: Any) -> None:
        os._exit(3)

    monkeypatch.setattr(chrome_parts, "_read_part", dies)
    assert _outcome(path) == alone and split["merges"] == 0


@pytest.mark.parametrize("seeds", quick_and_long(20, 120))
def test_fuzzed_traces_load_as_one_reader(
    tmp_path: Path, split: dict[str, int], monkeypatch: pytest.MonkeyPatch, seeds: int
) -> None:
    """The fuzz suite's mutated JSON traces (wrong types, huge values, NaN, B/E out of order, broken
    structure): the same table or the same one-line error either way."""
    compared = 0
    for seed in range(seeds):
        case = make_case("trace", seed)
        for name, data in case.files.items():
            if isinstance(data, Special) or not name.endswith((".json", ".json.gz")):
                continue
            path = tmp_path / f"{seed}-{Path(name).name}"
            path.write_bytes(gzip.compress(data) if name in case.compress else data)
            assert _outcome(path) == _alone(path, monkeypatch), (seed, name)
            compared += 1
    # (60 seeds: 34 files, 21 of them read in parts; 20 seeds: 9 files)
    assert compared >= seeds * 0.4 and split["merges"] >= seeds // 10, (compared, split["merges"])


@pytest.mark.skipif(not THIRD_PARTY.is_dir(), reason="third-party traces not present")
@pytest.mark.parametrize("max_bytes", quick_and_long(1_000_000, None))
def test_real_chrome_traces_load_as_one_reader(
    split: dict[str, int], monkeypatch: pytest.MonkeyPatch, max_bytes: int | None
) -> None:
    """Every real trace (the quick run: those under 1 MB on disk) read in parts as by one reader."""
    paths = sorted(p for p in THIRD_PARTY.rglob("*") if p.name.endswith((".json", ".json.gz")))
    paths = [p for p in paths if max_bytes is None or p.stat().st_size < max_bytes]
    assert paths
    for path in paths:
        assert _outcome(path) == _alone(path, monkeypatch), path
    assert split["merges"] >= 1


def test_offsets_balance_the_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    size = 10**9
    for parts in (2, 3, 8):
        cuts = chrome_parts.offsets(size, parts)
        assert len(cuts) == parts - 1 and cuts == sorted(cuts) and 0 < cuts[0] and cuts[-1] < size
        bounds = [0, *cuts, size]
        lengths = [b - a for a, b in itertools.pairwise(bounds)]
        take, skip, send = chrome_parts.TAKE_COST, chrome_parts.SKIP_COST, chrome_parts.SEND_COST
        caller = chrome_parts.CALLER_COST * lengths[0] + take * (size - lengths[0])
        others = [skip * bounds[k] + (1 + send) * lengths[k] for k in range(1, parts)]
        assert max(others) - min(others) < 1e-6 * size and abs(caller - others[0]) < 1e-6 * size
        assert all(a > b for a, b in itertools.pairwise(lengths[1:]))  # further on: more to skip, shorter
    for name in ("SKIP_COST", "SEND_COST", "TAKE_COST"):
        monkeypatch.setattr(chrome_parts, name, 0.0)
    monkeypatch.setattr(chrome_parts, "CALLER_COST", 1.0)
    assert chrome_parts.offsets(1200, 4) == [300, 600, 900]  # free to skip, send and take: equal parts
    monkeypatch.setattr(chrome_parts, "CALLER_COST", 2.0)
    assert chrome_parts.offsets(1000, 2) == [333]  # a caller at twice the cost: a third of the text


@pytest.mark.parametrize("value", ["0", "x", "²", "-2", "99999"])
def test_a_bad_process_count_is_one_line(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(chrome_parts.ENV, value)
    with pytest.raises(InvalidConfigError, match=chrome_parts.ENV) as info:
        chrome_parts.processes_allowed()
    assert "\n" not in str(info.value)


def test_one_process_or_a_small_trace_is_read_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "t.json", _events(400))
    with path.open("rb") as raw:
        monkeypatch.setenv(chrome_parts.ENV, "4")
        assert chrome_parts.plan(raw, False) == []  # 40 KB: under MIN_PART_CHARS a part
        monkeypatch.setattr(chrome_parts, "MIN_PART_CHARS", 256)
        assert len(chrome_parts.plan(raw, False)) == 3
        monkeypatch.setenv(chrome_parts.ENV, "1")
        assert chrome_parts.plan(raw, False) == []


def test_every_reader_finds_the_same_cut() -> None:
    """The cut after an offset is the first "}" "," "{" from it, wherever the reader's chunks end (here
    the whitespace between is cut by the 1 Mi-character chunk at every place), and None without one."""
    for pad in range(1, 45):
        text = '[{"a": "' + "x" * ((1 << 20) - 10 - pad) + '"}' + " " * 20 + ",\n" + " " * 20 + '{"b": 1}]'
        assert JsonStream(io.StringIO(text), "t").cut_after(3) == text.index('{"b"')
        reader = JsonStream(io.StringIO(text), "t")
        assert reader.skip_to(1 << 19) == text.index('{"b"') and reader.peek() == "{"
    assert JsonStream(io.StringIO('[{"a": "}, {"}]'), "t").cut_after(0) == 11  # (in a string)
    assert JsonStream(io.StringIO('[{"a": 1}]'), "t").cut_after(0) is None


def test_join_of_several_parts_is_their_rows_in_order_and_empties_them() -> None:
    """RowBuilder.join takes every part's columns at once (each column made once at its final length): the
    rows are those of the parts one after another, and each part's columns are left empty."""
    from array import array

    from rooftop.analysis.trace.events import COLUMNS
    from rooftop.analysis.trace.rows import RowBuilder, empty_columns

    def part(tag: str, n: int) -> list:
        cols = empty_columns()
        for i in range(n):
            for c, name in enumerate(COLUMNS):
                cols[c].append(float(i) if isinstance(cols[c], array) else f"{tag}{name}{i}")
        return cols

    rows = RowBuilder()
    rows.extend(*part("own", 2))
    parts = [part("a", 3), part("b", 0), part("c", 1)]
    rows.join(parts)
    assert len(rows) == 6
    names = rows.take()[COLUMNS.index("name")]
    assert names == ["ownname0", "ownname1", "aname0", "aname1", "aname2", "cname0"]
    assert all(len(column) == 0 for p in parts for column in p)
