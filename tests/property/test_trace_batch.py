"""Trace JSON events mapped a batch at a time (analysis/trace/chrome_batch.py) give what the per-event rules
(EventMapper.event, one event at a time) give, to the last bit: the same rows (every column, the args with
their types), the same steps, devices, memory samples and metadata, or the same one-line error naming the
same event and line. Checked on random traces of Kineto and JAX events, usual and unusual: ids, times,
names, categories and args of the wrong types, NaN, huge numbers, step markers past int64, metadata,
B/E pairs, instants and flow events among the complete events."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooftop.analysis.trace import chrome_batch, chrome_read
from rooftop.analysis.trace.chrome_json import load_json_trace
from rooftop.analysis.trace.events import COLUMNS, Trace
from rooftop.errors import RooftopError

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))  # under -m long

ODD: list[Any] = [None, True, 1.5, float("nan"), float("inf"), -1, "²", "12", [1], {"a": 1}, 10**30, "", 2**63]
IDS = st.one_of(st.integers(0, 3), st.sampled_from(["0", "a", 1.0, None, float("nan"), True, [1]]))
TIMES = st.one_of(st.integers(-5, 10**6), st.floats(-1.0, 1e6), st.sampled_from(ODD + [1e19, -1e19, "5", 10**18 + 1]))
NAMES = st.one_of(st.sampled_from(["aten::mm", "sm90_gemm", "ncclKernel", "ProfilerStep#3", "ProfilerStep#" + "9" * 25,
                                   "cudaLaunchKernel", "MemcpyD2H", "dot.1", "%copy.2 = f32[2] copy(%p)", "1", "x"]),
                  st.sampled_from(ODD))  # fmt: skip
CATS = st.one_of(st.none(), st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "user_annotation", "gpu_memcpy",
                                             "gpu_user_annotation", "python_function", "other_cat"]),
                 st.sampled_from([1, ["kernel"]]))  # fmt: skip
ARG_KEYS = ["External id", "correlation", "device", "Input Dims", "Input type", "Concrete Inputs", "Collective name",
            "In msg nelems", "Group size", "dtype", "hlo_op", "hlo_module", "correlation_id", "step_num", "group_id",
            "memcpy_details", "run_id", "device_ordinal", "program_id", "long_name", "stream"]  # fmt: skip
ARG_VALUES = st.one_of(st.integers(0, 4), st.sampled_from(["dot.1", "m", "7", [[2, 2]], ["float"], ["", ""], 2.0]),
                       st.sampled_from(ODD))  # fmt: skip
ARGS = st.one_of(st.none(), st.dictionaries(st.sampled_from(ARG_KEYS), ARG_VALUES, max_size=6), st.just([1]))


USUAL_NAMES = ["ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#" + "9" * 25, "MemcpyD2H", "dot.1", "gemm",
               "aten::mm", "cudaLaunchKernel", "%copy.2 = f32[2] copy(%p)", "1", "ncclDevKernel"]  # fmt: skip
USUAL_CATS = [None, None, None, "kernel", "cpu_op", "cuda_runtime", "user_annotation", "gpu_user_annotation",
              "gpu_memcpy", "python_function"]  # fmt: skip
_USUAL_VALUE = st.integers(0, 3) | st.sampled_from(["dot.1", "m", "7", [[2, 2]], ["float"], ["", ""]])
USUAL_ARGS = st.none() | st.fixed_dictionaries({}, optional=dict.fromkeys(ARG_KEYS, _USUAL_VALUE))


#: a usual event's fields (made once, not per event drawn)
USUAL_PID, USUAL_TID, USUAL_DUR = st.integers(0, 2), st.sampled_from([1, 2, "t"]), st.integers(0, 99)
USUAL_TS = st.floats(0, 1e6) | st.integers(0, 10**6)
USUAL_NAME, USUAL_CAT = st.sampled_from(USUAL_NAMES), st.sampled_from(USUAL_CATS)
DELETED = st.lists(st.sampled_from(["ts", "dur", "name", "pid"]), max_size=1)


@st.composite
def complete(draw: st.DrawFn, usual: bool) -> dict[str, Any]:
    """A complete event: with ``usual``, of the types a profiler writes (few odd values), else anything."""
    if usual:
        ev: dict[str, Any] = {"ph": "X", "pid": draw(USUAL_PID), "tid": draw(USUAL_TID), "ts": draw(USUAL_TS),
                              "dur": draw(USUAL_DUR), "name": draw(USUAL_NAME)}  # fmt: skip
        cat: Any = draw(USUAL_CAT)
        args: Any = draw(USUAL_ARGS)
        if cat is not None:
            ev["cat"] = cat
        if args is not None:
            ev["args"] = args
        return ev
    ev = {"ph": "X", "pid": draw(IDS), "tid": draw(IDS), "ts": draw(TIMES), "dur": draw(TIMES), "name": draw(NAMES)}
    cat = draw(CATS)
    for key in draw(DELETED):
        del ev[key]
    if cat is not None:
        ev["cat"] = cat
    args = draw(ARGS)
    if args is not None:
        ev["args"] = args
    return ev


OTHER = st.sampled_from([
    {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "/device:GPU:0"}},
    {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
    {"ph": "M", "pid": 0, "tid": 1, "name": "thread_name", "args": {"name": "Stream #1(Kernel)"}},
    {"ph": "M", "pid": 0, "tid": 2, "name": "thread_name", "args": {"name": "Steps"}},
    {"ph": "M", "pid": 2, "tid": "t", "name": "thread_name", "args": {"name": "XLA Ops"}},
    {"ph": "B", "pid": 0, "tid": 1, "ts": 5, "name": "b"}, {"ph": "E", "pid": 0, "tid": 1, "ts": 9},
    {"ph": "E", "pid": 0, "tid": 1, "ts": 1},
    {"ph": "i", "pid": 0, "tid": 1, "ts": 3, "name": "[memory]", "args": {"Total Allocated": 5, "Device Id": 0}},
    {"ph": "s", "pid": 0, "tid": 1, "ts": 3, "id": 4, "cat": "ac2g"}, {"ph": "f", "pid": 0.5, "tid": 1},
    [1], "x", None, {"ph": "X"},
])  # fmt: skip
META = st.lists(st.sampled_from([
    {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "/device:GPU:0"}},
    {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
    {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/device:TPU:0"}},
    {"ph": "M", "pid": 0, "tid": 2, "name": "thread_name", "args": {"name": "Steps"}},
    {"ph": "M", "pid": 0, "tid": "t", "name": "thread_name", "args": {"name": "XLA Modules"}},
    {"ph": "M", "pid": 2, "tid": 1, "name": "thread_name", "args": {"name": "XLA Ops"}},
]), max_size=6)  # the metadata JAX writes first  # fmt: skip
EVENTS = st.tuples(
    META,
    st.lists(
        st.one_of(complete(usual=True), complete(usual=True), complete(usual=True), complete(usual=False), OTHER),
        max_size=40,
    ),
).map(lambda p: p[0] + p[1])


def _per_event(mapper: Any, batch: list[Any], one: Any) -> None:
    for k in range(len(batch)):
        one(k)


def _load(path: Path, batched: bool) -> tuple[str, Any]:
    """What loading ``path`` gives: the trace, every column as text (args with their types), or the error."""
    with mock.patch.object(chrome_read, "map_batch", chrome_batch.map_batch if batched else _per_event):
        try:
            trace = load_json_trace(path)
        except RooftopError as exc:
            return "error", f"{type(exc).__name__}: {exc}"
    return "trace", _text(trace)


def _text(trace: Trace) -> str:
    ev = trace.events
    columns = {c: [repr(v) for v in ev.column(c)] for c in COLUMNS if c != "args"}
    args = ev.column("args")
    columns["args"] = [f"{type(a).__name__} {dict(a)!r}" for a in args]
    first: dict[int, int] = {}  # which events share one args object (or one common part): the same ones
    columns["shared"] = [repr(first.setdefault(id(getattr(a, "shared", a)), k)) for k, a in enumerate(args)]
    rest = (trace.format, trace.devices, trace.memory, sorted(trace.metadata.items()))
    return repr((columns, [e.args for e in ev], rest))


def _write(path: Path, events: list[Any], top: str | None) -> Path:
    body = ",\n".join(json.dumps(e) for e in events)
    path.write_text("{" + top + '"traceEvents": [' + body + "]}" if top is not None else "[" + body + "]")
    return path


TOPS = st.sampled_from(['"schemaVersion": 1, ', "", '"displayTimeUnit": "ns", ', None])


def _batches_map_as_per_event(tmp_path_factory: pytest.TempPathFactory, events: list[Any], top: str | None) -> None:
    path = _write(tmp_path_factory.mktemp("t") / "t.json", events, top)
    assert _load(path, batched=True) == _load(path, batched=False)


@SETTINGS
@given(EVENTS, TOPS)
def test_batches_map_as_the_per_event_rules(tmp_path_factory: pytest.TempPathFactory, events: list[Any],
                                            top: str | None) -> None:  # fmt: skip
    _batches_map_as_per_event(tmp_path_factory, events, top)


@pytest.mark.long
@LONG
@given(EVENTS, TOPS)
def test_batches_map_as_the_per_event_rules_long(tmp_path_factory: pytest.TempPathFactory, events: list[Any],
                                                 top: str | None) -> None:  # fmt: skip
    _batches_map_as_per_event(tmp_path_factory, events, top)


def test_usual_runs_are_mapped_a_batch_at_a_time(tmp_path: Path) -> None:
    """Only the events that are not complete events reach the per-event rules (so a change that sent every
    event there, slower, would fail here), and the rows are those of the per-event rules."""
    events: list[Any] = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "/device:GPU:0"}}]
    for k in range(3000):
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0 * k, "dur": 5,
                       "args": {"Input Dims": [[2, 2]], "Input type": ["float"], "Concrete Inputs": [""],
                                "External id": k}})  # fmt: skip
        events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10.0 * k + 2, "dur": 1,
                       "args": {"External id": k, "correlation": k, "device": 0}})  # fmt: skip
    events.append({"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "python"}})
    path = _write(tmp_path / "k.json", events, '"schemaVersion": 1, ')
    calls: list[int] = []
    real = chrome_read._one

    def counted(*args: Any) -> None:
        calls.append(args[-1])
        real(*args)

    with mock.patch.object(chrome_read, "_one", counted):
        batched = _load(path, batched=True)
    assert len(calls) == 2  # the two metadata events
    assert batched == _load(path, batched=False)
    assert batched[0] == "trace"


def test_events_that_start_no_run_cost_no_set_up(tmp_path: Path) -> None:
    """Flow and empty events between the kernels (a third of a real HTA trace's events are flow events): each
    goes to the per-event rules directly; the loops of the runs are set up only where a complete event is.
    Each set-up for an event that then broke the loop at once made such traces 2-3 kernels' cost per event
    (6M empty events: 110 CPU-s; now linear at the per-event rules' cost)."""
    events: list[Any] = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "/device:GPU:0"}}]
    for k in range(500):
        events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10.0 * k, "dur": 1,
                       "args": {"correlation": k, "device": 0}})  # fmt: skip
        events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": k, "pid": 0, "tid": 7, "ts": 10.0 * k})
        events.append({})
    path = _write(tmp_path / "flow.json", events, '"schemaVersion": 1, ')
    starts: list[int] = []
    real = chrome_batch._kineto

    def counted(m: Any, batch: list[Any], first: int) -> int:
        starts.append(first)
        return real(m, batch, first)

    with mock.patch.object(chrome_batch, "_kineto", counted):
        batched = _load(path, batched=True)
    assert len(starts) == 500  # one run per kernel, none at the 1,001 other events
    assert batched == _load(path, batched=False)


def _kitchen_sink() -> list[Any]:
    """Events for every rule of the loop: Kineto step markers (with a correlation), op shapes seen again and
    new, launches, a GPU annotation that is a kernel's only launch, kernels with a link, NCCL args or none,
    devices as numbers, text or missing; JAX stream kernels and copies, step and module lines, XLA Ops,
    host ops and launches, own ids and float stats; and unusual events among them."""
    dims = {"Input Dims": [[2, 2]], "Input type": ["float"], "Concrete Inputs": [""]}
    ev: list[Any] = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "/device:GPU:0"}},
                     {"ph": "M", "pid": 0, "tid": 2, "name": "thread_name", "args": {"name": "Steps"}},
                     {"ph": "M", "pid": 0, "tid": 3, "name": "thread_name", "args": {"name": "XLA Modules"}},
                     {"ph": "M", "pid": 5, "name": "process_name", "args": {"name": "/device:TPU:1"}},
                     {"ph": "M", "pid": 5, "tid": 1, "name": "thread_name", "args": {"name": "XLA Ops"}},
                     {"ph": "M", "pid": 6, "name": "process_name", "args": {"name": "/host:CPU"}}]  # fmt: skip
    for s in range(3):
        t = 1000.0 * s
        ev += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 9, "tid": 1, "ts": t,
             "dur": 990, "args": {"correlation": 50 + s, "External id": s}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 1, "ts": t + 1, "dur": 50,
             "args": {**dims, "Input Dims": [[2, s % 2 + 2]], "External id": 10 + s, "Sequence number": 4}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 1, "ts": t + 5,
             "dur": 3, "args": {"correlation": 100 + s, "External id": 10 + s}},
            {"ph": "X", "cat": "gpu_user_annotation", "name": "nccl:all_reduce", "pid": 0, "tid": 7, "ts": t + 500,
             "dur": 3, "args": {"correlation": 200 + s, "device": 0}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 1700, "dur": 8,
             "args": {"External id": 10 + s, "correlation": 200 + s, "device": 0, "grid": [1, 1, 1]}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 20, "dur": 8,
             "args": {"External id": 10 + s, "correlation": 100 + s, "device": "1"}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 8, "ts": t + 30, "dur": 9,
             "args": {"Collective name": "allreduce", "In msg nelems": 4, "Out msg nelems": 4, "dtype": "Float",
                      "Group size": 2, "device": 0, "correlation": 300 + s}},
            {"ph": "X", "cat": "kernel", "name": "bare", "pid": 3, "tid": 8, "ts": t + 40, "dur": 1},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 8, "ts": t + 41, "dur": 1,
             "args": {"device": 0, "External id": 3}},
            {"ph": "X", "cat": "python_function", "name": "forward", "pid": 9, "tid": 1, "ts": t + 2, "dur": 1},
            {"ph": "X", "name": str(s), "pid": 0, "tid": 2, "ts": t, "dur": 900},
            {"ph": "X", "name": "jit_f(3)", "pid": 0, "tid": 3, "ts": t, "dur": 800, "args": {"run_id": 7 + s}},
            {"ph": "X", "name": "fusion.1", "pid": 0, "tid": 4, "ts": t + 3, "dur": 4,
             "args": {"hlo_op": "fusion.1", "hlo_module": "jit_f", "correlation_id": 400 + s, "step_num": "2"}},
            {"ph": "X", "name": "MemcpyD2H", "pid": 0, "tid": 4, "ts": t + 9, "dur": 1, "args": {"group_id": 1.0}},
            {"ph": "X", "name": "k", "pid": 0, "tid": 4, "ts": t + 10, "dur": 1, "args": {"memcpy_details": "x"}},
            {"ph": "X", "name": "k", "pid": 0, "tid": 4, "ts": t + 11, "dur": 1, "args": {"hlo_op": 7}},
            {"ph": "X", "name": "k", "pid": 0, "tid": 4, "ts": t + 12, "dur": 1.5, "args": {"flops": 2.5}},
            {"ph": "X", "name": "%copy.2 = f32[2] copy(%p)", "pid": 5, "tid": 1, "ts": t + 13, "dur": 1,
             "args": {"long_name": "copy", "device_duration_ps": 900}},
            {"ph": "X", "name": "thunk", "pid": 6, "tid": 2, "ts": t + 14, "dur": 1,
             "args": {"hlo_op": "add.3", "hlo_module": "jit_f", "device_ordinal": 0, "run_id": 3}},
            {"ph": "X", "name": "launch", "pid": 6, "tid": 3, "ts": t + 15, "dur": 1,
             "args": {"correlation_id": 9 + s}},
            {"ph": "X", "name": "late", "pid": 0, "tid": 4, "ts": t + 1500, "dur": 1,
             "args": {"correlation_id": 9 + s}},
            {"ph": "X", "cat": "kernel", "name": "first", "pid": 0, "tid": 7, "ts": t + 60, "dur": 8,
             "args": {"External id": 0, "correlation": 0, "device": 0}},
            {"ph": "i", "name": "[memory]", "pid": 0, "tid": 1, "ts": t,
             "args": {"Total Allocated": 9, "Device Id": 0}},
            {"ph": "s", "cat": "ac2g", "pid": 9, "tid": 1, "ts": t + 5, "id": 100 + s},
        ]  # fmt: skip
    return ev


def test_every_rule_of_the_batch_loop_as_the_per_event_rules(tmp_path: Path) -> None:
    events = _kitchen_sink()
    for top in ('"schemaVersion": 1, ', ""):
        path = _write(tmp_path / "k.json", events, top)
        batched = _load(path, batched=True)
        assert batched[0] == "trace"
        assert batched == _load(path, batched=False)


@pytest.mark.parametrize("compress", [False, True])
def test_an_error_megabytes_in_names_its_line(tmp_path: Path, compress: bool) -> None:
    """The lines of the text already dropped from the reader's buffer are counted again when an error names
    its line: event 30,001 (line 30,002 of a 3.6 MB trace, one event a line) is the bad one."""
    good = '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 1, "ts": 1, "dur": 1, "args": {"pad": "%s"}}'
    lines = [good % ("x" * 40)] * 30000 + ['{"ph": "X", "cat": "kernel", "name": "bad", "pid": 0, "tid": 1, '
                                          '"ts": 1, "dur": -5}'] + [good % "y"] * 10  # fmt: skip
    text = '{"traceEvents": [\n' + ",\n".join(lines) + "\n]}\n"
    path = tmp_path / ("t.json.gz" if compress else "t.json")
    path.write_bytes(gzip.compress(text.encode()) if compress else text.encode())
    assert len(text) > 3 << 20
    for batched in (True, False):
        kind, said = _load(path, batched)
        assert kind == "error"
        assert f"{path}:30002: trace event 30001: 'bad' has a negative duration" in said
