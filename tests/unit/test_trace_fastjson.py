"""The trace JSON decoded with orjson (the optional ``fast`` extra) and with the json module: the same values,
the same errors, the same reports. They skip where orjson (3.10 or later) is not installed."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftop.analysis.trace import jsonstream
from rooftop.analysis.trace.jsonstream import decode_array, value_key
from rooftop.analysis.trace.load import load_trace
from rooftop.errors import ParseError
from tests.conftest import run_cli

orjson = jsonstream.fast_json
if orjson is None:
    pytest.skip("orjson 3.10 or later is not installed (the fast extra)", allow_module_level=True)

# each: json accepts it and orjson reads it otherwise (a float for a 65-bit int) or rejects it
JSON_ONLY = [
    "[18446744073709551616]",  # 2**64: orjson gives 1.8446744073709552e+19
    "[-9223372036854775809]",  # -2**63 - 1
    '[{"ts": 1' + "0" * 400 + "}]",  # the 400-zero timestamp
    "[NaN, Infinity, -Infinity]",
    "[1e400, -1e400]",  # json: inf
    '["\\ud800"]',  # a lone surrogate escape
]
# each: both accept it, with the same values
BOTH = [
    "[18446744073709551615, -9223372036854775808]",  # the 64-bit ends
    '[{"a": 1, "b": 2, "a": 3}]',  # a repeated key: the last value, at the first key's place
    "[-0.0, 0.0, -0, 1.0, 1, true, null, 1e16, 5e-324, 2.4e-324, 0.1000000000000000055511151231257827]",
    '["\\u00e9\\ud83d\\ude00", "\u00e9", "\\u0000", "a\\"b\\\\"]',
]
# each: both reject it
MALFORMED = ["[1,]", "[01]", '["a\tb"]', "[1 2]", "[.5]", "[+1]", "[1.]", '[{"a" 1}]']


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types throughout (repr tells 1 from 1.0 and -0.0 from 0.0; NaN is NaN)."""
    return repr(a) == repr(b)


@pytest.mark.parametrize("text", JSON_ONLY + BOTH, ids=range(len(JSON_ONLY + BOTH)))
def test_decode_array_is_json_loads(text: str) -> None:
    expected = json.loads(text)
    assert _same(decode_array(text), expected)
    assert _same(decode_array(text, fast=False), expected)


def test_the_json_only_texts_differ_or_fail_under_orjson() -> None:
    """The cases decode_array must keep away from orjson: it reads them otherwise, or not at all."""
    for text in JSON_ONLY:
        try:
            fast = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        assert not _same(fast, json.loads(text)), text


def test_nesting_past_the_recursion_limit_fails_as_json_does() -> None:
    text = "[" * 100_000 + "]" * 100_000
    for fast in (True, False):
        with pytest.raises(RecursionError):
            decode_array(text, fast)


@pytest.mark.parametrize("text", MALFORMED)
def test_decode_array_fails_as_json_does(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as fast:
        decode_array(text)
    with pytest.raises(json.JSONDecodeError) as plain:
        json.loads(text)
    assert (fast.value.msg, fast.value.pos) == (plain.value.msg, plain.value.pos)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)


def _decodes_as_json(values: list[Any]) -> None:
    text = json.dumps(values)  # NaN and Infinity as json writes them
    assert _same(decode_array(text), json.loads(text))


@settings(max_examples=60, deadline=None)
@given(st.lists(JSON_VALUES, max_size=6))
def test_decode_array_matches_json_on_any_values(values: list[Any]) -> None:
    _decodes_as_json(values)


@pytest.mark.long
@settings(max_examples=500, deadline=None)
@given(st.lists(JSON_VALUES, max_size=6))
def test_decode_array_matches_json_on_any_values_long(values: list[Any]) -> None:
    _decodes_as_json(values)


def _keys_equal_only_for_equal_values(a: Any, b: Any) -> None:
    """Op shapes share one dict by this key: equal keys must mean values equal with their types."""
    ka, kb = value_key(a), value_key(b)
    if ka is not None and ka == kb:
        assert _same(a, b)
    assert value_key(a) == ka  # a function of the value


@settings(max_examples=60, deadline=None)
@given(JSON_VALUES, JSON_VALUES)
def test_value_key_equal_only_for_equal_values(a: Any, b: Any) -> None:
    _keys_equal_only_for_equal_values(a, b)


@pytest.mark.long
@settings(max_examples=500, deadline=None)
@given(JSON_VALUES, JSON_VALUES)
def test_value_key_equal_only_for_equal_values_long(a: Any, b: Any) -> None:
    _keys_equal_only_for_equal_values(a, b)


def test_value_key_tells_apart_what_orjson_writes_alike() -> None:
    values = [None, math.nan, math.inf, -math.inf, 1, 1.0, True, 0.0, -0.0, "1", [1], 2**64, 2**64 + 1]
    keys = [value_key(v) for v in values]
    assert len(set(keys)) == len(values)
    assert isinstance(value_key([1, 2.5, "a"]), bytes)  # orjson's text: no null in it
    assert value_key([None]) == repr([None])  # null: orjson would write NaN alike


def _kineto(path: Path, events: list[dict[str, Any]], tail: str = "]}") -> Path:
    """A Kineto trace of ``events`` (one per line, so that the 1 MiB chunk cuts fall between them)."""
    body = ",\n".join(json.dumps(ev) for ev in events)
    with gzip.open(path, "wt") as fh:
        fh.write('{"schemaVersion": 1, "traceEvents": [\n' + body + tail)
    return path


def _kernels(n: int, **extra: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        out.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 5,
                    "args": {"Input Dims": [[64, 32], [32, 16 + i % 3]], "Input type": ["float", "float"],
                             "Concrete Inputs": ["", ""], "External id": i, "Record function id": 0}})  # fmt: skip
        out.append({"ph": "X", "cat": "kernel", "name": f"gemm_{i % 4}", "pid": 2, "tid": 7, "ts": 10.0 * i + 2,
                    "dur": 3.5, "args": {"External id": i, "device": 0, "correlation": i, "grid": [1, 2, 3],
                                         **extra}})  # fmt: skip
    return out


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """(what the CLI's profile --json prints, the loaded events' repr): with orjson, then json only."""
    out: list[tuple[Any, ...]] = []
    for fast in (orjson, None):
        monkeypatch.setattr(jsonstream, "fast_json", fast)
        code, stdout, stderr = run_cli("profile", str(path), "--chip", "h100", "--json")
        try:
            trace = load_trace(path)
        except ParseError as exc:
            out.append((code, stdout, stderr, str(exc)))
        else:
            out.append((code, stdout, stderr, repr(list(trace.events)), trace.metadata))
    return out[0], out[1]


def test_identical_reports_on_a_synthetic_kineto_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """20,000 events (about 3 MiB: several chunks, each decoded as one array), with values orjson reads
    otherwise in some of them: a 65-bit int arg, NaN, a 400-digit ts that is an error in either path."""
    events = _kernels(10_000)
    events[5_001]["args"]["grid"] = [2**64, float("nan")]  # json writes NaN; orjson rejects it
    path = _kineto(tmp_path / "t.pt.trace.json.gz", events)
    fast, plain = _both(path, monkeypatch)
    assert fast == plain
    assert fast[0] == 0 and json.loads(fast[1])["ops"]
    bad = _kineto(tmp_path / "bad.pt.trace.json.gz", events[:3000] + [{**events[0], "ts": 10**400}] + events[3000:])
    fast, plain = _both(bad, monkeypatch)
    assert fast == plain
    assert fast[0] == 2 and "trace event 3001" in fast[2] and "not a finite time" in fast[2]


@pytest.mark.parametrize(
    "name",
    [
        "hta_alexnet_a100.json.gz",
        "hta_minitoy_mi250_rocm.json.gz",
        pytest.param("hta_nccl_a100_2rank.json.gz", marks=pytest.mark.long),
        pytest.param("tracelens_sglang_qwen3_8b_prefilldecode_mi300x.json.gz", marks=pytest.mark.long),
        "tracelens_vllm_decode_full_mi300x.json.gz",
    ],
)
def test_identical_reports_on_third_party_traces(third_party: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real traces (the two largest, 12 and 19 s, in the long run): the same events and report either way."""
    fast, plain = _both(third_party / "chrome_trace" / name, monkeypatch)
    assert fast == plain
    assert fast[0] == 0


@pytest.mark.parametrize("fast", [True, False])
def test_truncated_and_malformed_traces_keep_their_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    if not fast:
        monkeypatch.setattr(jsonstream, "fast_json", None)
    events = _kernels(5_000)
    cut = _kineto(tmp_path / "cut.pt.trace.json.gz", events, tail="")
    raw = gzip.decompress(cut.read_bytes())
    cut.write_bytes(gzip.compress(raw[: len(raw) * 2 // 3]))
    with pytest.raises(ParseError, match="invalid JSON") as exc:
        load_trace(cut)
    assert "\n" not in str(exc.value)
    text = raw.decode().replace('"dur": 3.5', '"dur" 3.5', 1)  # the first kernel lacks its ':'
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    with pytest.raises(ParseError, match=r"bad\.json:3: invalid JSON \(Expecting ':' delimiter\)$"):
        load_trace(bad)


def test_cuts_inside_strings_cost_no_failed_decoding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every name holding '},{' (text that looks like the end of an event) put the batch cuts inside strings:
    each cut failed to decode (a whole batch's work, twice with orjson) before the reader fell back to one
    event at a time, 7x slower. A cut is now taken outside the strings, so no batch fails."""
    events = [{"ph": "X", "cat": "kernel", "name": f'k}},{{"x": 1}},{{{i}', "pid": 0, "tid": 7, "ts": 10.0 * i,
               "dur": 5.0, "args": {"device": 0}} for i in range(20_000)]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    real, failed = jsonstream.decode_array, []

    def counted(text: str, fast: bool = True) -> list[Any]:
        try:
            return real(text, fast)
        except (ValueError, RecursionError):
            failed.append(len(text))
            raise

    monkeypatch.setattr(jsonstream, "decode_array", counted)
    monkeypatch.setenv("ROOFTOP_TRACE_PROCESSES", "1")
    trace = load_trace(path)
    assert failed == []
    assert list(trace.events.column("name"))[:2] == ['k},{"x": 1},{0', 'k},{"x": 1},{1'] and len(trace.events) == 20_000
