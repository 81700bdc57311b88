"""Trace loaders: real JAX CPU profiles (8 host devices), synthetic XSpace / Chrome / Kineto traces, errors."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from rooftop.analysis.trace import jsonstream
from rooftop.analysis.trace.events import EventTable, OpEvent, Trace, correlation_key
from rooftop.analysis.trace.load import load_trace
from rooftop.analysis.trace.ops import group_ops, op_executions
from rooftop.analysis.trace.steps import Step, detect_steps, module_executions
from rooftop.analysis.trace.xplane import hlo_text
from rooftop.errors import InvalidConfigError, ParseError

STEPS = 3
DEVICES = 8


@pytest.fixture(scope="module")
def profile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real profile: a jitted, 8-way sharded step (matmul, tanh-sum, all-reduce) run 3 times."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    if jax.device_count() < DEVICES:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=8")
    mesh = Mesh(np.array(jax.devices()[:DEVICES]), ("x",))

    @jax.jit
    def train_step(a: Any, b: Any) -> Any:
        return jnp.sum(jnp.tanh(a @ b))

    a = jax.device_put(jnp.ones((64, 32)), NamedSharding(mesh, P("x", None)))
    b = jnp.ones((32, 16))
    train_step(a, b).block_until_ready()  # compile outside the profile
    logdir = tmp_path_factory.mktemp("profile")
    with jax.profiler.trace(str(logdir), create_perfetto_trace=True):
        for i in range(STEPS):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                train_step(a, b).block_until_ready()
    return logdir


@pytest.fixture(scope="module")
def run_dir(profile_dir: Path) -> Path:
    (run,) = (profile_dir / "plugins" / "profile").iterdir()
    return run


@pytest.fixture(scope="module")
def traces(profile_dir: Path, run_dir: Path) -> dict[str, Trace]:
    (xplane,) = run_dir.glob("*.xplane.pb")
    (host_json,) = (p for p in run_dir.glob("*.trace.json.gz") if not p.name.startswith("perfetto"))
    out = {"dir": load_trace(profile_dir), "xplane": load_trace(xplane), "json": load_trace(host_json)}
    perfetto = run_dir / "perfetto_trace.json.gz"
    if perfetto.exists():
        out["perfetto"] = load_trace(perfetto)
    return out


def _ops(trace: Trace) -> list[OpEvent]:
    return trace.of_kind("op")


# ----------------------------------------------------------------------------------------------------
# real JAX profiles


def test_directory_loads_jitted_ops_with_module_and_instruction(traces: dict[str, Trace]) -> None:
    trace = traces["dir"]
    assert trace.format == "xplane"
    assert trace.devices == tuple(f"/device:CPU:{i}" for i in range(DEVICES))
    ops = _ops(trace)
    assert ops and {e.module for e in ops} == {"jit_train_step"}
    instructions = {e.instruction for e in ops}
    assert any(i.startswith("all-reduce") for i in instructions)  # the sharded sum needs a collective
    assert all(e.duration_s > 0 for e in ops)
    counts = Counter(e.instruction for e in ops)
    assert set(counts.values()) == {STEPS * DEVICES}  # each op once per step on each of the 8 devices
    assert all(e.args["hlo_module"] == "jit_train_step" and "program_id" in e.args for e in ops)


def test_formats_agree_on_ops(traces: dict[str, Trace]) -> None:
    def key(trace: Trace) -> Counter:
        return Counter((e.device, e.module, e.instruction, e.step) for e in _ops(trace))

    reference = key(traces["xplane"])
    assert reference == key(traces["dir"])
    assert {t.format for name, t in traces.items() if name in ("json", "perfetto")} == {"chrome-json"}
    for name in ("json", "perfetto"):
        if name in traces:
            assert key(traces[name]) == reference, name
            json_ops = sorted((e.device, e.start_s) for e in _ops(traces[name]))
            xplane_ops = sorted((e.device, e.start_s) for e in _ops(traces["xplane"]))
            assert [d for d, _ in json_ops] == [d for d, _ in xplane_ops]
            assert all(
                abs(a[1] - b[1]) < 1e-9 for a, b in zip(json_ops, xplane_ops, strict=True)
            )  # JSON ts is us, 3 decimals


def test_steps_from_step_trace_annotation(traces: dict[str, Trace]) -> None:
    trace = traces["xplane"]
    steps = detect_steps(trace)
    assert [s.index for s in steps] == list(range(STEPS))
    assert all(s.duration_s > 0 for s in steps)
    assert all(a.end_s <= b.start_s for a, b in itertools.pairwise(steps))
    per_step = Counter(e.step for e in _ops(trace))
    n_instructions = len({e.instruction for e in _ops(trace)})
    assert per_step == {i: DEVICES * n_instructions for i in range(STEPS)}


def test_steps_fall_back_to_module_executions(traces: dict[str, Trace]) -> None:
    trace = traces["xplane"]
    without_marks = EventTable.from_events(e for e in trace.events if e.kind != "step")
    bare = dataclasses.replace(trace, events=without_marks)
    steps = detect_steps(bare)  # XLA:CPU ops carry run_id: one execution per step on each device
    assert [s.index for s in steps] == list(range(STEPS))
    marked = detect_steps(trace)
    for got, want in zip(steps, marked, strict=True):
        assert want.start_s <= got.start_s <= got.end_s <= want.end_s
    assert len(module_executions(bare)) == STEPS * DEVICES


def test_group_ops_statistics(traces: dict[str, Trace]) -> None:
    trace = traces["xplane"]
    groups = group_ops(trace)
    ops = _ops(trace)
    assert {g.instruction for g in groups} == {e.instruction for e in ops}
    for g in groups:
        durations = [e.duration_s for e in ops if e.instruction == g.instruction]
        assert g.count == g.events == len(durations) == STEPS * DEVICES
        assert g.total_s == pytest.approx(sum(durations))
        assert g.mean_s == pytest.approx(sum(durations) / len(durations))
        assert g.min_s == min(durations) and g.max_s == max(durations)
        assert sum(g.per_device_s.values()) == pytest.approx(g.total_s)
        assert dict(g.per_device_count) == {f"/device:CPU:{i}": STEPS for i in range(DEVICES)}
    assert [g.total_s for g in groups] == sorted((g.total_s for g in groups), reverse=True)
    assert group_ops(trace) == groups  # deterministic


def test_hlo_protos_from_metadata_plane(traces: dict[str, Trace]) -> None:
    trace = traces["xplane"]
    # the metadata holds the HLO of every program alive in the process (in a test session, other tests'
    # jit_train_step too): this profile's is the one its events' program id names
    program_id = next(e.args["program_id"] for e in _ops(trace))
    assert f"jit_train_step({program_id})" in trace.hlo_protos
    text = hlo_text(trace, "jit_train_step", program_id)
    assert text is not None and text.startswith("HloModule jit_train_step")
    for instruction in {e.instruction for e in _ops(trace)}:
        assert f"{instruction} = " in text
    assert hlo_text(trace, "no_such_module") is None
    assert traces["json"].hlo_protos == {}


def test_progress_callback(run_dir: Path) -> None:
    calls: list[tuple[int, int]] = []
    (xplane,) = run_dir.glob("*.xplane.pb")
    trace = load_trace(xplane, progress=lambda n, b: calls.append((n, b)))
    assert calls[-1] == (len(trace.events), xplane.stat().st_size)
    calls.clear()
    (host_json,) = (p for p in run_dir.glob("*.trace.json.gz") if not p.name.startswith("perfetto"))
    trace = load_trace(host_json, progress=lambda n, b: calls.append((n, b)))
    assert calls[-1] == (len(trace.events), host_json.stat().st_size)


def test_json_streams_across_tiny_chunks(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (host_json,) = (p for p in run_dir.glob("*.trace.json.gz") if not p.name.startswith("perfetto"))
    whole = load_trace(host_json)
    monkeypatch.setattr(jsonstream, "_CHUNK_CHARS", 7)  # every value straddles chunk boundaries
    chunked = load_trace(host_json)
    assert list(chunked.events) == list(whole.events)
    assert chunked.metadata == whole.metadata


def test_directory_resolution(run_dir: Path, tmp_path: Path) -> None:
    """Newest run of a log directory; every host file of a run (devices prefixed by host); JSON-only runs."""
    (xplane,) = run_dir.glob("*.xplane.pb")
    profile = tmp_path / "logdir" / "plugins" / "profile"
    old, new = profile / "2020_01_01_00_00_00", profile / "2030_01_01_00_00_00"
    old.mkdir(parents=True)
    new.mkdir()
    (old / "host0.xplane.pb").write_bytes(_xspace([_tpu_plane("/device:TPU:0")]))
    for host in ("hostA", "hostB"):
        (new / f"{host}.xplane.pb").write_bytes(xplane.read_bytes())
    trace = load_trace(tmp_path / "logdir")
    assert trace.metadata["hosts"] == ["hostA", "hostB"]
    assert trace.devices == tuple(f"{h}/device:CPU:{i}" for h in ("hostA", "hostB") for i in range(DEVICES))
    assert len(_ops(trace)) == 2 * len(_ops(load_trace(xplane)))
    assert load_trace(profile).devices == trace.devices
    assert load_trace(old).devices == ("/device:TPU:0",)  # a run directory given explicitly
    json_run = tmp_path / "json_run"
    json_run.mkdir()
    for f in run_dir.glob("*.json.gz"):
        (json_run / f.name).write_bytes(f.read_bytes())
    assert load_trace(json_run).source.endswith(".trace.json.gz")  # the host trace, not perfetto_trace.json.gz


# ----------------------------------------------------------------------------------------------------
# errors


def test_truncated_xplane_is_a_parse_error(run_dir: Path, tmp_path: Path) -> None:
    (xplane,) = run_dir.glob("*.xplane.pb")
    data = xplane.read_bytes()
    bad = tmp_path / "cut.xplane.pb"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError, match=r"cut\.xplane\.pb: truncated or corrupt XPlane protobuf \("):
        load_trace(bad)
    bad.write_bytes(b"")
    with pytest.raises(ParseError, match="empty file"):
        load_trace(bad)


def test_corrupt_json_gz_is_a_parse_error(run_dir: Path, tmp_path: Path) -> None:
    (host_json,) = (p for p in run_dir.glob("*.trace.json.gz") if not p.name.startswith("perfetto"))
    data = host_json.read_bytes()
    bad = tmp_path / "cut.trace.json.gz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError, match=r"cut\.trace\.json\.gz: truncated or corrupt compressed JSON"):
        load_trace(bad)
    bad.write_bytes(data[:10] + b"\x00" * 64 + data[74:])
    with pytest.raises(ParseError, match="cut.trace.json.gz"):
        load_trace(bad)


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [\n{"ph": "X", "name": "a", "ts": 1, "dur": 2},\n{"ph": "X", oops}\n]}\n')
    with pytest.raises(ParseError, match=r"bad\.json:3: invalid JSON"):
        load_trace(bad)
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": "soon", "dur": 2}]}')
    with pytest.raises(ParseError, match=r"bad\.json:1: trace event 1 has a field of the wrong type"):
        load_trace(bad)
    bad.write_text('{"displayTimeUnit": "ns"}')
    with pytest.raises(ParseError, match="no traceEvents"):
        load_trace(bad)
    bad.write_text("")
    with pytest.raises(ParseError, match="bad.json:1: expected a JSON object"):
        load_trace(bad)


def test_missing_or_empty_paths(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InvalidConfigError, match=r"empty: no profile found; expected <logdir>/plugins/profile"):
        load_trace(empty)
    with pytest.raises(InvalidConfigError, match="nowhere: no such file or directory"):
        load_trace(tmp_path / "nowhere")
    (tmp_path / "profile.txt").write_text("x")
    with pytest.raises(InvalidConfigError, match="unknown trace file type"):
        load_trace(tmp_path / "profile.txt")


def test_xplane_without_jax_says_which_extra(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rooftop.analysis.trace import xplane as reader

    (xplane,) = run_dir.glob("*.xplane.pb")
    monkeypatch.setattr(reader, "_protobuf", lambda: False)  # neither the protobuf runtime nor jaxlib's reader
    monkeypatch.setitem(sys.modules, "jaxlib._profile_data", None)
    monkeypatch.setitem(sys.modules, "jax.profiler", None)
    with pytest.raises(InvalidConfigError, match=r"needs the jax extra: pip install 'rooftop\[jax\]'"):
        load_trace(xplane)


def _same_traces(a: Trace, b: Trace) -> None:
    """Two loads of one profile hold the same rows (args compared as dicts), memory, devices and metadata."""
    for column in ("device", "line", "name", "module", "instruction", "step", "kind", "correlation"):
        assert list(a.events.column(column)) == list(b.events.column(column)), column
    for column in ("start_s", "duration_s"):
        assert list(a.events.column(column)) == list(b.events.column(column)), column
    assert [dict(x or {}) for x in a.events.column("args")] == [dict(x or {}) for x in b.events.column("args")]
    assert (a.memory, a.devices, dict(a.metadata), dict(a.hlo_protos)) == (
        b.memory,
        b.devices,
        dict(b.metadata),
        dict(b.hlo_protos),
    )


def test_xplane_read_without_jax_as_jaxlib_reads_it(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The XSpace read with the protobuf runtime (jax not imported) gives the table that jaxlib's own
    reader (ProfileData, the fallback) gives, value for value."""
    from rooftop.analysis.trace import xplane as reader

    with monkeypatch.context() as m:
        m.setitem(sys.modules, "jaxlib._profile_data", None)
        m.setitem(sys.modules, "jax.profiler", None)
        direct = load_trace(run_dir)
    with monkeypatch.context() as m:
        m.setattr(reader, "_protobuf", lambda: False)
        fallback = load_trace(run_dir)
    assert len(direct.events) > 100 and {"op", "step"} <= set(direct.events.column("kind"))
    _same_traces(direct, fallback)


def test_xplane_read_imports_no_jax(run_dir: Path) -> None:
    """Reading an .xplane.pb costs no jax import (about a CPU-second): the protobuf runtime reads it."""
    import os
    import subprocess

    import rooftop

    (xplane,) = run_dir.glob("*.xplane.pb")
    env = {**os.environ, "PYTHONPATH": str(Path(rooftop.__file__).parents[1])}  # this checkout's rooftop
    code = (
        "import sys; from rooftop.analysis.trace.load import load_trace; "
        f"n = len(load_trace({str(xplane)!r}).events); print(n, sorted(m for m in sys.modules if m.startswith('jax')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    out = done.stdout.split(" ", 1)
    assert int(out[0]) > 100 and out[1].strip() == "[]"


def test_xplane_readers_agree_on_edge_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Times truncated to whole ns toward zero (offset -1999 ps from 1000 ns: 999 ns), a ref stat as the
    name it points to, bytes as text, a stat without a value or without metadata as (None, None), several
    own ids on one event, an event without metadata named "" — the same through both readers."""
    profiler = pytest.importorskip("jax.profiler")
    from rooftop.analysis.trace import xplane as reader

    stats = " ".join(
        f'stat_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}'
        for i, n in enumerate(("hlo_op", "hlo_module", "correlation_id", "run_id", "kernel_details", "x"), 1)
    )
    events = [
        'metadata_id: 1 offset_ps: 1999 duration_ps: 2999 stats { metadata_id: 1 str_value: "fusion.1" } '
        "stats { metadata_id: 2 ref_value: 6 } stats { metadata_id: 3 int64_value: 12 } "
        "stats { metadata_id: 4 uint64_value: 18446744073709551615 }",
        'metadata_id: 1 offset_ps: -1999 duration_ps: 1 stats { metadata_id: 5 bytes_value: "grid 1" } '
        "stats { metadata_id: 9 int64_value: 3 } stats { metadata_id: 6 } stats { metadata_id: 3 str_value: '07' }",
        "metadata_id: 7 offset_ps: 5000000 duration_ps: 0 stats { metadata_id: 6 double_value: -0.5 }",
    ]
    body = " ".join(f"events {{ {e} }}" for e in events)
    text = (
        f'planes {{ id: 1 name: "/device:GPU:0" lines {{ id: 1 name: "Stream #1(Kernel)" timestamp_ns: 1000 {body} }} '
        f'event_metadata {{ key: 1 value {{ id: 1 name: "k" }} }} {stats} }}'
    )
    path = tmp_path / "t.xplane.pb"
    path.write_bytes(profiler.ProfileData.text_proto_to_serialized_xspace(text))
    direct = load_trace(path)
    monkeypatch.setattr(reader, "_protobuf", lambda: False)
    _same_traces(direct, load_trace(path))
    assert [e.start_s for e in direct.events] == [1001 / 1e9, 999 / 1e9, 6000 / 1e9]
    assert [e.duration_s for e in direct.events] == [2 / 1e9, 0.0, 0.0]
    assert [e.name for e in direct.events] == ["k", "k", ""]
    assert [e.correlation for e in direct.events] == ["12", "07", None]
    assert dict(direct.events[0].args) == {"hlo_op": "fusion.1", "hlo_module": "x", "correlation_id": "12",
                                           "run_id": str(2**64 - 1)}  # fmt: skip


# ----------------------------------------------------------------------------------------------------
# synthetic XSpace (written as text proto, serialized by jaxlib) for TPU- and GPU-style planes


#: (name, start_ns, duration_ns, stats) of one event
XEvent = tuple[str, float, float, Mapping[str, Any]]


def _xspace(planes: Sequence[tuple[str, Sequence[tuple[str, Sequence[XEvent]]]]]) -> bytes:
    """planes -> lines -> events (name, start_ns, duration_ns, stats) as a serialized XSpace."""
    profiler = pytest.importorskip("jax.profiler")
    parts = []
    for pid, (plane, lines) in enumerate(planes, 1):
        events_meta: dict[str, int] = {}
        stats_meta: dict[str, int] = {}
        body = []
        for lid, (line, events) in enumerate(lines, 1):
            evs = []
            for name, start_ns, dur_ns, stats in events:
                mid = events_meta.setdefault(name, len(events_meta) + 1)
                st = []
                for k, v in stats.items():
                    sid = stats_meta.setdefault(k, len(stats_meta) + 1)
                    value = f"str_value: {json.dumps(v)}" if isinstance(v, str) else f"int64_value: {v}"
                    st.append(f"stats {{ metadata_id: {sid} {value} }}")
                evs.append(
                    f"events {{ metadata_id: {mid} offset_ps: {int(start_ns * 1000)} "
                    f"duration_ps: {int(dur_ns * 1000)} {' '.join(st)} }}"
                )
            body.append(f'lines {{ id: {lid} name: "{line}" timestamp_ns: 0 {" ".join(evs)} }}')
        body += [f'event_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}' for n, i in events_meta.items()]
        body += [f'stat_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}' for n, i in stats_meta.items()]
        parts.append(f'planes {{ id: {pid} name: "{plane}" {" ".join(body)} }}')
    return profiler.ProfileData.text_proto_to_serialized_xspace("\n".join(parts))


def _tpu_plane(device: str) -> tuple[str, list[Any]]:
    steps: list[XEvent] = [("0", 0, 100_000, {}), ("1", 100_000, 100_000, {})]
    modules = [("jit_step(7)", 5_000, 90_000, {"run_id": 1}), ("jit_step(7)", 105_000, 90_000, {"run_id": 2})]
    ops: list[XEvent] = [
        (n, base + s, d, {})
        for base in (0, 100_000)
        for n, s, d in (("fusion.1", 10_000, 30_000), ("all-reduce.2", 50_000, 40_000))
    ]
    return device, [("XLA Ops", ops), ("XLA Modules", modules), ("Steps", steps)]


def test_tpu_style_planes(tmp_path: Path) -> None:
    path = tmp_path / "tpu.xplane.pb"
    path.write_bytes(_xspace([_tpu_plane("/device:TPU:0"), _tpu_plane("/device:TPU:1")]))
    trace = load_trace(path)
    assert trace.devices == ("/device:TPU:0", "/device:TPU:1")
    assert Counter(trace.events.column("kind")) == {"op": 8, "module": 4, "step": 4}
    ops = _ops(trace)
    assert {e.module for e in ops} == {"jit_step"}  # from the enclosing XLA Modules event
    assert Counter(e.step for e in ops) == {0: 4, 1: 4}
    assert detect_steps(trace) == [Step(0, 0.0, 100e-6), Step(1, 100e-6, 200e-6)]
    fusion = next(g for g in group_ops(trace) if g.instruction == "fusion.1")
    assert fusion.count == 4 and fusion.total_s == pytest.approx(4 * 30e-6)
    modules = next(e for e in trace.events if e.kind == "module")
    assert (modules.module, modules.start_s, modules.duration_s) == ("jit_step", 5e-6, 90e-6)


def _gpu_space() -> bytes:
    kernels: list[XEvent] = []
    launches: list[XEvent] = []
    for n, base in enumerate((91_000, 191_000)):  # device work runs after its host step window closed
        for k, (name, op, dur) in enumerate(
            (("Im2Col", "conv.1", 1_000), ("Gemm", "conv.1", 1_500), ("fusion_2", "fusion.2", 500))
        ):
            corr = 10 * (n + 1) + k
            hlo = {"hlo_op": op, "hlo_module": "jit_f", "program_id": 3, "correlation_id": corr}
            kernels.append((name, base + 1_500 * k, dur, hlo))
            launches.append(("cuLaunchKernel", 100_000 * n + 1_000 * (k + 1), 100, hlo))
    memcpy = [("MemcpyH2D", 95_000, 200, {"memcpy_details": "kind:HtoD size:1024"})]
    steps = [("train", 0, 90_000, {"step_num": 0}), ("train", 100_000, 90_000, {"step_num": 1})]
    memory = [("MemoryAllocation", 500, 0, {"allocator_name": "GPU_0_bfc", "bytes_allocated": 4096})]
    return _xspace(
        [
            ("/device:GPU:0", [("Stream #1(Kernel)", kernels), ("Stream #2(MemcpyH2D)", memcpy)]),
            ("/host:CPU", [("python", [*steps, *memory]), ("Host Threads/1", launches)]),
        ]
    )


def test_gpu_style_planes(tmp_path: Path) -> None:
    path = tmp_path / "gpu.xplane.pb"
    path.write_bytes(_gpu_space())
    trace = load_trace(path)
    assert trace.devices == ("/device:GPU:0",)
    kernels = trace.of_kind("kernel")
    assert [e.step for e in kernels] == [0, 0, 0, 1, 1, 1]  # placed through the launch's correlation id
    assert all(e.kind == "other" for e in trace.events if e.name == "cuLaunchKernel")  # launches are not ops
    assert [e.name for e in trace.of_kind("memcpy")] == ["MemcpyH2D"]
    assert trace.memory == ((0.5e-6, 4096.0, "/device:GPU:0", 0.0),)
    conv = next(g for g in group_ops(trace) if g.instruction == "conv.1")
    assert (conv.count, conv.events, conv.kernel_names) == (2, 4, ("Gemm", "Im2Col"))
    assert conv.mean_s == pytest.approx(2.5e-6)
    executions = [e for e in op_executions(trace) if e.instruction == "conv.1"]
    assert [(e.events, e.step) for e in executions] == [(2, 0), (2, 1)]
    bare = dataclasses.replace(trace, events=EventTable.from_events(e for e in trace.events if e.kind != "step"))
    assert len(detect_steps(bare)) == 2  # the module's first instruction coming round again splits executions


# ----------------------------------------------------------------------------------------------------
# synthetic Chrome / Kineto JSON


def test_kineto_json(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 9, "tid": 9, "ts": 0, "dur": 100},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 9,
            "tid": 9,
            "ts": 5,
            "dur": 20,
            "args": {"Input Dims": [[4, 8], [8, 2]]},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 9,
            "tid": 9,
            "ts": 10,
            "dur": 3,
            "args": {"correlation": 5},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 150.5,
            "dur": 40,
            "args": {"device": 0, "stream": 7, "correlation": 5},
        },
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy HtoD",
            "pid": 0,
            "tid": 7,
            "ts": 200,
            "dur": 2,
            "args": {"device": 0, "bytes": 64},
        },
        {
            "ph": "i",
            "s": "t",
            "name": "[memory]",
            "pid": 9,
            "tid": 9,
            "ts": 50,
            "args": {"Total Allocated": 2048, "Device Type": 1, "Device Id": 0},
        },
        {"ph": "s", "cat": "ac2g", "id": 5, "pid": 9, "tid": 9, "ts": 10},
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
    ]
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(
        json.dumps(
            {
                "schemaVersion": 1,
                "deviceProperties": [{"id": 0, "name": "GPU X"}],
                "traceEvents": events,
                "traceName": "t",
            }
        )
    )
    trace = load_trace(path)
    assert (trace.format, trace.devices) == ("kineto", ("/device:GPU:0",))
    (kernel,) = trace.of_kind("kernel")
    assert (kernel.device, kernel.line, kernel.start_s, kernel.duration_s) == (
        "/device:GPU:0",
        "stream 7",
        150.5e-6,
        40e-6,
    )
    assert (kernel.step, kernel.correlation, kernel.module, kernel.instruction) == (3, "5", None, None)
    cpu_op = next(e for e in trace.events if e.name == "aten::mm")
    assert (cpu_op.kind, cpu_op.args["cat"], cpu_op.args["Input Dims"]) == ("other", "cpu_op", "[[4, 8], [8, 2]]")
    assert [e.name for e in trace.of_kind("memcpy")] == ["Memcpy HtoD"]
    assert trace.memory == ((50e-6, 2048.0, "/device:GPU:0", 0.0),)
    assert detect_steps(trace) == [Step(3, 0.0, 100e-6)]
    assert trace.metadata["deviceProperties"][0]["name"] == "GPU X" and trace.metadata["trace_event_count"] == 8


def test_chrome_array_begin_end_and_unterminated(tmp_path: Path) -> None:
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:TPU:0"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "XLA Ops"}},
        {"ph": "B", "name": "fusion.4", "pid": 1, "tid": 2, "ts": 1.0, "args": {"hlo_module": "jit_g"}},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 3.5},
    ]
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps(events)[:-1] + ",\n")  # the JSON array format may omit the closing bracket
    trace = load_trace(path)
    (op,) = trace.events
    assert (op.kind, op.device, op.line, op.module, op.instruction) == (
        "op",
        "/device:TPU:0",
        "XLA Ops",
        "jit_g",
        "fusion.4",
    )
    assert op.start_s == pytest.approx(1e-6) and op.duration_s == pytest.approx(2.5e-6)


# ----------------------------------------------------------------------------------------------------
# the table


def test_event_table_behaves_as_a_sequence() -> None:
    rows = [
        OpEvent("/device:GPU:0", "s", f"k{i}", "m", f"i{i}", i * 1.0, 0.5, None, "kernel", None, {"a": "1"})
        for i in range(4)
    ]
    table = EventTable.from_events(rows)
    assert len(table) == 4 and list(table) == rows and table[-1] == rows[3] and table[1:3] == rows[1:3]
    assert EventTable.concat([table, table]).column("name") == ("k0", "k1", "k2", "k3") * 2
    with pytest.raises(IndexError):
        table[4]
    with pytest.raises(InvalidConfigError, match="unknown event column 'nme'"):
        table.column("nme")
    with pytest.raises(dataclasses.FrozenInstanceError):
        rows[0].name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        table[0].args["a"] = "2"  # type: ignore[index]
    with pytest.raises(InvalidConfigError, match="unknown trace format 'csv'"):
        Trace(table, "x", "csv")
    assert rows[2].end_s == 2.5


def test_categories_come_from_named_scopes_before_keywords() -> None:
    from rooftop.analysis.categories import category_of, phase_of, scopes_of

    name = "jit(step)/transpose(jvp(layer0/attention))/dot_general"
    assert scopes_of(name) == ["attention", "layer0", "step"]
    assert category_of(name, "fusion") == "attention" and phase_of(name) == "backward"
    # a softmax inside a scope named mlp is the MLP's (keywords alone said attention)
    assert category_of("jit(step)/jvp(block/mlp)/softmax", "fusion") == "mlp"
    assert phase_of("jit(step)/jvp(block/mlp)/softmax") == "forward"
    assert category_of("jit(step)/optimizer/sub", "fusion") == "optimizer" and phase_of("jit(step)/optimizer/sub") == ""
    assert category_of("softmax_fusion", "fusion") == "attention"  # no scopes: keywords of the name
    assert category_of("jit(step)/x/all-reduce", "all-reduce") == "communication"
    # a decode step writing its KV cache: "update" is an optimizer keyword, dynamic_update_slice is not one
    assert category_of("jit(step)/jit(main)/dynamic_update_slice", "fusion") == "other"
    assert category_of("jit(step)/optimizer/dynamic_update_slice", "fusion") == "optimizer"  # its scope says so
    assert category_of("jit(step)/apply_update/add", "fusion") == "optimizer"


def test_correlation_ids_are_the_same_key_exactly_when_their_texts_are() -> None:
    """The table keeps an id whose text is an int64's as an int (half the memory of its text), any other as
    its text: a launch's 5 and its kernel's "5" still match, "05", "5.0", True and 2**63 stay apart."""
    ids = [5, "5", "05", "-5", -5, "-0", 0, "0", 5.0, "5.0", True, "True", 2**63, str(2**63), 2**63 - 1, "+5", "", "²"]
    for a, b in itertools.product(ids, ids):
        assert (correlation_key(a) == correlation_key(b)) == (str(a) == str(b)), (a, b)
    assert correlation_key("1234567") == 1234567 and correlation_key(2**63) == str(2**63)
    with pytest.raises(ValueError):  # an int too long to write, as before
        correlation_key(int("9" * 5000))


def test_kernels_keep_text_correlation_ids(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1,
         "args": {"correlation": "7"}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 2,
         "args": {"device": 0, "correlation": 7}},
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = load_trace(path)
    assert [e.correlation for e in trace.events] == ["7", "7"]  # OpEvent: the text, whatever the table keeps
    assert list(trace.events.column("correlation")) == [7, 7]


def test_categories_ignore_the_jitted_functions_name_and_follow_what_the_op_is() -> None:
    from rooftop.analysis.categories import category_of

    # every op of a function jitted as loss_fn is not "loss": a GEMM is other, a fused attention is attention
    assert category_of("jit(loss_fn)/transpose(jvp(bsd,de->bse))/dot_general", "custom-call") == "other"
    assert category_of("jit(loss_fn)/jvp()/te_fused_attn_forward_ffi", "custom-call") == "attention"
    assert category_of("jit(train)/loss/cross_entropy/reduce_sum", "reduce") == "loss"  # a scope named loss is
    assert category_of("aiter::mha_batch_prefill [1,2] bf16", "aiter::mha_batch_prefill") == "attention"
