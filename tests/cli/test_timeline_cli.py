"""``--timeline FILE.json`` on train, serve, hlo and profile: Chrome trace JSON that ``rooftop profile`` reads
back with the same op durations."""

import gzip
import json
import os
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from rooftop.plan.train.schedule import _order, _simulate
from rooftop.report.timeline import Event, write_timeline
from tests.conftest import run_cli

FIXTURES = Path(__file__).parent.parent / "fixtures" / "h100"
NS = 1e-9  # timelines are written in whole nanoseconds (report/timeline.py _ns): a duration read back is within 1 ns
TRAIN = ["train", "llama-3-8b", "--chip", "h100", "--chips", "32", "--batch-tokens", "256Ki", "--seq-len", "4096"]


def _trace(path: Path) -> tuple[list[dict], dict[int, str], dict[tuple[int, int], str]]:
    """(complete events, process names, thread names) of a Chrome trace file, checking its form."""
    d = json.loads(path.read_text())
    assert isinstance(d["traceEvents"], list) and d["otherData"]["generator"].startswith("rooftop ")
    procs = {e["pid"]: e["args"]["name"] for e in d["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in d["traceEvents"] if e["name"] == "thread_name"}
    xs = [e for e in d["traceEvents"] if e["ph"] == "X"]
    for e in xs:  # the trace event format's complete events: microseconds, a named process and thread
        assert isinstance(e["ts"], float) and e["dur"] >= 0 and e["pid"] in procs and (e["pid"], e["tid"]) in threads
        assert "cat" not in e  # a reader takes an event with a category for a PyTorch trace
    return xs, procs, threads


def _nested(events: list[dict]) -> bool:
    """Whether the slices of each thread nest (one inside another or one after another, as the trace viewers
    draw them), with a nanosecond of rounding allowed."""
    by: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        by[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for spans in by.values():
        open_ends: list[float] = []
        for start, end in sorted(spans, key=lambda x: (x[0], -x[1])):
            while open_ends and open_ends[-1] <= start + 1e-3:
                open_ends.pop()
            if open_ends and end > open_ends[-1] + 1e-3:
                return False
            open_ends.append(end)
    return True


def _means(events: list[dict], threads: dict, skip: tuple[str, ...] = ("Steps", "XLA Modules")) -> dict[str, float]:
    by: dict[str, list[float]] = defaultdict(list)
    for e in events:
        if threads[(e["pid"], e["tid"])] not in skip:
            by[e["name"]].append(e["dur"] / 1e6)
    return {k: sum(v) / len(v) for k, v in by.items()}


def _read_back(path: Path, *extra: str) -> dict:
    code, out, err = run_cli("profile", str(path), "--chip", "h100", "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def _train(tmp_path: Path, fix: str) -> tuple[dict, list[dict], dict, dict, Path]:
    path = tmp_path / "step.json"
    code, out, err = run_cli(*TRAIN, "--fix", fix, "--top", "1", "--json", "--timeline", str(path))
    assert code == 0, err
    events, procs, threads = _trace(path)
    return json.loads(out)["best"], events, procs, threads, path


def test_train_timeline_pipeline_stages_bubble_and_round_trip(tmp_path: Path) -> None:
    best, events, procs, threads, path = _train(tmp_path, "tp=8,pp=4,mb=8,v=1")
    step = best["step_time_s"]
    assert _nested(events)
    assert sorted(procs.values()) == [f"/device:GPU:{s}" for s in range(4)]  # one lane group per stage
    lanes = set(threads.values())
    assert {"XLA Ops", "Steps", "collectives over tp", "pipeline sends (pp)", "pipeline bubble"} <= lanes
    # the step laid out ends where the model's step does (one chunk per stage: every chunk at the model's pace)
    end = max(e["ts"] + e["dur"] for e in events) / 1e6
    assert end == pytest.approx(step, rel=1e-9, abs=NS)
    # each stage idles (p - 1) microbatch times: the model's bubble, (p - 1) / v x t_mb (Narayanan 2021)
    bubble: dict[int, float] = defaultdict(float)
    for e in events:
        if threads[(e["pid"], e["tid"])] == "pipeline bubble":
            bubble[e["pid"]] += e["dur"] / 1e6
    assert len(bubble) == 4
    for seconds in bubble.values():
        assert seconds == pytest.approx(best["breakdown_s"]["pipeline_bubble"], rel=1e-9, abs=len(events) * NS)
    # 32 layers over 4 stages, each run forward and backward for each of the 8 microbatches
    names = [e["name"] for e in events if threads[(e["pid"], e["tid"])] == "XLA Ops"]
    assert names.count("layer 0 forward") == 8 and names.count("layer 31 backward") == 8
    back = _read_back(path)
    assert len(back["steps"]) == 1 and back["steps"][0]["duration_s"] == pytest.approx(step, rel=1e-9, abs=NS)
    measured = {o["name"]: o["measured_s"] for o in back["ops"]}
    expected = _means(events, threads)
    assert set(measured) == set(expected)
    for name, seconds in expected.items():
        assert measured[name] == pytest.approx(seconds, rel=1e-9, abs=NS), name


def test_train_timeline_interleaved_is_near_the_model(tmp_path: Path) -> None:
    """With 4 chunks per stage the head's ops run on one chunk where the model spreads them over the four:
    the schedule's step is within a few percent of the model's, and says both."""
    best, events, _, _, path = _train(tmp_path, "tp=8,pp=4,mb=8,v=4")
    assert _nested(events)
    meta = json.loads(path.read_text())["otherData"]
    assert meta["model_step_time_s"] == best["step_time_s"]
    assert meta["step_time_s"] == pytest.approx(max(e["ts"] + e["dur"] for e in events) / 1e6, rel=1e-9, abs=NS)
    assert meta["step_time_s"] == pytest.approx(best["step_time_s"], rel=0.03)


def test_train_timeline_of_a_balanced_interleaved_pipeline_is_the_models(tmp_path: Path) -> None:
    """Llama 3 405B's pipeline (16 stages, 8 chunks each, the embedding and the head a chunk-slot each): every
    chunk holds one layer, the first the embedding, the last the head and loss, and the schedule's step is
    the model's within a few percent."""
    path = tmp_path / "step.json"
    code, out, err = run_cli("train", "llama-3.1-405b", "--chip", "h100", "--chips", "16384", "--batch-tokens",
                             "16M", "--seq-len", "8192", "--fix", "dp=128,tp=8,pp=16,mb=16", "--top", "1", "--json",
                             "--timeline", str(path))  # fmt: skip
    assert code == 0, err
    best = json.loads(out)["best"]
    assert (best["parallelism"]["virtual_stages"], best["parallelism"]["pipeline_balance"]) == (8, True)
    meta = json.loads(path.read_text())["otherData"]
    assert meta["step_time_s"] == pytest.approx(best["step_time_s"], rel=0.03)
    events, _procs, threads = _trace(path)
    names = [e["name"] for e in events if threads[(e["pid"], e["tid"])] == "XLA Ops"]
    assert names.count("layer 0 forward") == 16 and names.count("layer 125 backward") == 16


def test_train_timeline_parts_add_up_to_the_model_breakdown(tmp_path: Path) -> None:
    best, events, _procs, threads, _ = _train(tmp_path, "tp=8,pp=1,mb=4")
    br = best["breakdown_s"]
    by_part: dict[str, float] = defaultdict(float)
    for e in events:
        if threads[(e["pid"], e["tid"])] == "XLA Ops":
            by_part[e["args"]["part"]] += e["dur"] / 1e6
        elif "exposed_s" in e["args"]:
            by_part[e["args"]["part"]] += e["args"]["exposed_s"]
    for part in ("compute_forward", "compute_backward", "tensor_parallel", "optimizer"):
        assert by_part[part] == pytest.approx(br[part], rel=1e-9, abs=len(events) * NS), part
    assert max(e["ts"] + e["dur"] for e in events) / 1e6 == pytest.approx(br["total"], rel=1e-9, abs=NS)


@pytest.mark.parametrize(("p", "v", "m"), [(1, 1, 3), (2, 1, 2), (4, 1, 8), (4, 2, 8), (4, 2, 4), (8, 5, 16)])
def test_pipeline_schedule_ends_at_the_closed_form_bubble(p: int, v: int, m: int) -> None:
    """Megatron's order with chunks of equal forward f and backward b: (m v + p - 1) (f + b) / v, the work
    plus the bubble (p - 1) / v microbatch times; each stage runs each (direction, chunk, microbatch) once."""
    f, b = 1.0, 2.0
    dur = {(fwd, vs): (f if fwd else b) / v for fwd in (True, False) for vs in range(p * v)}
    starts = _simulate(p, v, m, dur)
    for s in range(p):
        assert sorted(_order(s, p, v, m)) == sorted((fwd, c, k) for fwd in (True, False) for c in range(v)
                                                    for k in range(m))  # fmt: skip
    end = max(t + dur[(fwd, c * p + s)] for (fwd, s, c, _), t in starts.items())
    assert end == pytest.approx((m * v + p - 1) * (f + b) / v, rel=1e-12)


def test_serve_timeline_prefill_then_decode_steps(tmp_path: Path) -> None:
    path = tmp_path / "serve.json"
    argv = ["serve", "llama-3-8b", "--chip", "h100", "--chips", "8", "--prompt-len", "1024", "--gen-len", "16"]
    code, out, err = run_cli(*argv, "--batch", "8", "--json", "--timeline", str(path))
    assert code == 0, err
    events, _, threads = _trace(path)
    assert _nested(events)
    steps = [e for e in events if threads[(e["pid"], e["tid"])] == "Steps"]
    assert [e["name"] for e in steps] == ["prefill", *(f"decode {n}" for n in range(1, 17))]
    meta = json.loads(path.read_text())["otherData"]
    d = json.loads(out)
    point = d["points"][d["chosen"]]  # the chosen point's prefill of its batch and decode step
    assert (meta["prefill_batch_s"], meta["step_time_s"]) == (point["prefill_batch_s"], point["step_time_s"])
    assert steps[0]["dur"] / 1e6 == pytest.approx(meta["prefill_batch_s"], rel=1e-9, abs=NS)
    assert all(e["dur"] / 1e6 == pytest.approx(meta["step_time_s"], rel=1e-9, abs=NS) for e in steps[1:])
    back = _read_back(path)
    assert [s["duration_s"] for s in back["steps"]] == pytest.approx([e["dur"] / 1e6 for e in steps], rel=1e-9, abs=NS)
    expected = _means(events, threads)
    measured = {o["name"]: o["measured_s"] for o in back["ops"]}
    assert measured == pytest.approx(expected, rel=1e-9, abs=NS)
    decode_ops = sum(e["dur"] for e in events if e["name"].startswith("decode ") and threads[(e["pid"], e["tid"])]
                     == "XLA Ops") / 16 / 1e6  # fmt: skip
    assert decode_ops == pytest.approx(meta["step_time_s"], rel=1e-9, abs=NS)  # a step's parts fill it


def test_hlo_timeline_read_back_with_its_hlo_is_at_the_roofline(tmp_path: Path) -> None:
    """The predicted schedule, profiled against the same module: every op at efficiency 1."""
    hlo = tmp_path / "decoder.hlo.txt"
    hlo.write_bytes(gzip.decompress((FIXTURES / "decoder_no_graphs.hlo.txt.gz").read_bytes()))
    path = tmp_path / "hlo.json"
    code, out, err = run_cli("hlo", str(hlo), "--chip", "h100", "--json", "--timeline", str(path))
    assert code == 0, err
    events, _, threads = _trace(path)
    assert _nested(events)
    ops = [e for e in events if threads[(e["pid"], e["tid"])] == "XLA Ops"]
    end = max(e["ts"] + e["dur"] for e in ops) / 1e6
    assert end == pytest.approx(json.loads(out)["totals"]["predicted_s"], rel=1e-9, abs=NS)
    back = _read_back(path, "--hlo", str(hlo))
    ops = back["ops"]
    assert ops and all(o["efficiency"] == pytest.approx(1.0, abs=NS / max(o["measured_s"], NS)) for o in ops)
    # a nanosecond off is more than the verdicts' 5% only for ops shorter than 20 ns
    assert {o["verdict"] for o in ops if o["measured_s"] >= 20 * NS} == {"near roofline"}


def test_profile_timeline_keeps_every_measured_duration(tmp_path: Path) -> None:
    from rooftop.analysis.trace.load import load_trace

    path = tmp_path / "torch_tl.json"
    source = FIXTURES / "decoder_torch.json.gz"
    code, out, err = run_cli("profile", str(source), "--chip", "h100", "--json", "--timeline", str(path))
    assert code == 0, err

    def durations(trace_path: Path) -> dict[tuple[str, str], list[float]]:
        ev = load_trace(trace_path).events
        got: dict[tuple[str, str], list[float]] = defaultdict(list)
        for name, kind, dur in zip(ev.column("name"), ev.column("kind"), ev.column("duration_s"), strict=True):
            if kind in ("kernel", "op", "memcpy"):
                got[(name, kind)].append(dur)
        return got

    before, after = durations(source), durations(path)
    assert before.keys() == after.keys()
    for key, values in before.items():
        assert sorted(after[key]) == pytest.approx(sorted(values), rel=1e-9, abs=NS), key
    # each kernel with its aten op's roofline time per execution beside it, and each execution's on a lane
    lower = {o["name"]: o["lower_bound_s"] for o in json.loads(out)["ops"] if o["lower_bound_s"]}
    events, procs, _ = _trace(path)
    beside = [e for e in events if not procs[e["pid"]].startswith("predicted ") and "predicted_s" in e["args"]]
    assert len(beside) > 100 and all(e["args"]["predicted_s"] == lower[e["args"]["op"]] for e in beside)
    lane = [e for e in events if procs[e["pid"]].startswith("predicted ")]
    assert _nested(lane)
    assert lane and all(e["dur"] / 1e6 == pytest.approx(lower[e["name"]], rel=1e-9, abs=NS) for e in lane)
    mm = "aten::mm [8192,2048]x[2048,5632] bf16"
    assert sum(e["name"] == mm for e in lane) == next(o["count"] for o in json.loads(out)["ops"] if o["name"] == mm)
    back = _read_back(path)  # the predicted lane is not read back as device work
    kernels = sum(len(v) for (_, kind), v in before.items() if kind == "kernel")
    # was: each of the 820 kernels read back as a run of itself, grouped by kernel name; now the aten ops'
    # rows come back, each with its runs (a _foreach_ op's 10 kernels of one name one run, not 10: the host
    # span and launches written beside them say so) and its measured time per run
    assert kernels == 820 and sum(o["count"] for o in back["ops"] if o["opcode"] != "copy") == 700
    # and each of the 330 copies and fills (325 memsets, 5 device-to-device copies) an execution of its row
    copies_run = sum(len(v) for (_, kind), v in before.items() if kind == "memcpy")
    assert copies_run == 330 and sum(o["count"] for o in back["ops"] if o["opcode"] == "copy") == copies_run
    # the trace's copies and fills too: ops priced from their bytes, which the timeline carries (was: left out)
    rows = json.loads(out)["ops"]
    assert any(o["opcode"] == "copy" for o in rows)
    assert {o["name"]: o["count"] for o in back["ops"]} == {o["name"]: o["count"] for o in rows}
    assert {o["name"]: o["measured_s"] for o in back["ops"]} == pytest.approx(
        {o["name"]: o["measured_s"] for o in rows}, rel=1e-9, abs=NS
    )
    copies = {o["name"]: o["lower_bound_s"] for o in rows if o["opcode"] == "copy"}
    assert copies and all(copies.values())  # each priced from its bytes (its name gives them), read back alike
    assert {o["name"]: o["lower_bound_s"] for o in back["ops"] if o["opcode"] == "copy"} == pytest.approx(copies)
    assert next(o["count"] for o in rows if o["name"].startswith("aten::_foreach_add_")) == 5  # one per step
    assert len(back["steps"]) == 5


@pytest.mark.parametrize("bad", ["out.txt", "missing/dir/t.json", ".json", ""])
def test_timeline_bad_path_is_one_line_before_any_work(tmp_path: Path, bad: str) -> None:
    target = str(tmp_path / bad) if bad else ""
    code, _out, err = run_cli("hlo", str(tmp_path / "none.hlo"), "--chip", "h100", "--timeline", target)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "timeline" in err  # named before the missing HLO file is read
    assert sorted(os.listdir(tmp_path)) == []


def test_timeline_write_failing_half_way_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text("old")

    def events() -> Iterator[Event]:
        yield Event("/device:GPU:0", "XLA Ops", "a", 0.0, 1.0)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_timeline(str(path), events(), {"generator": "rooftop test"})
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["t.json"]


@pytest.mark.parametrize(
    ("name", "chip", "jax"),
    [("xplane/xprof_tpu_v6e_inference_2.xplane.pb", "tpu-v6e", True),
     ("chrome_trace/hta_nccl_a100_2rank.json.gz", "a100", False)],
)  # fmt: skip
def test_third_party_profile_timeline_reads_back_alike(tmp_path: Path, name: str, chip: str, jax: bool) -> None:
    """A TPU XPlane and a 2-rank PyTorch trace: the timeline read back has the same op executions, the same
    measured time and the same steps, and the same rows (was: a PyTorch trace's NCCL calls came back as
    kernel names)."""
    from tests.conftest import THIRD_PARTY

    if not THIRD_PARTY.is_dir():
        pytest.skip("../shared/data/third_party_profiles is not present")
    if jax:
        pytest.importorskip("jax")
    path = tmp_path / "timeline.json"
    code, out, err = run_cli("profile", str(THIRD_PARTY / name), "--chip", chip, "--json", "--timeline", str(path))
    assert code == 0, err
    before = json.loads(out)
    code, out, err = run_cli("profile", str(path), "--chip", chip, "--json")
    assert code == 0, err
    after = json.loads(out)
    for d in (before, after):  # every row, copies included (was: a PyTorch trace's copies left out)
        d["runs"] = sum(o["count"] for o in d["ops"])
        d["total_s"] = sum(o["total_s"] for o in d["ops"])
    assert after["runs"] == before["runs"] and after["total_s"] == pytest.approx(
        before["total_s"], rel=1e-12, abs=before["runs"] * NS
    )
    assert [s["duration_s"] for s in after["steps"]] == pytest.approx([s["duration_s"] for s in before["steps"]])
    # the same rows, each with the same runs and measured time per run
    assert {(o["module"], o["name"]): o["count"] for o in after["ops"]} == {
        (o["module"], o["name"]): o["count"] for o in before["ops"]
    }
    assert {(o["module"], o["name"]): o["measured_s"] for o in after["ops"]} == pytest.approx(
        {(o["module"], o["name"]): o["measured_s"] for o in before["ops"]}, rel=1e-12, abs=NS
    )


def test_timeline_of_five_programs_of_one_name_reads_back_as_five(third_party: Path, tmp_path: Path) -> None:
    """Was: ``jit_dot(21)``, ``jit_dot(34)``, ... (one jitted function compiled for five shapes) read back
    from a timeline, which carries no HLO, as one op ``jit_dot`` of 15 runs."""
    pytest.importorskip("jax")
    path = tmp_path / "timeline.json"
    source = third_party / "xplane/tracelens_jax08_gemm_mi300x.xplane.pb"
    code, out, err = run_cli("profile", str(source), "--chip", "h100", "--json", "--timeline", str(path))
    assert code == 0, err
    before, after = json.loads(out), _read_back(path)
    dots = {o["module"]: o["count"] for o in after["ops"] if o["name"] == "custom-call.1"}
    assert dots == {f"jit_dot({p})": 3 for p in (21, 34, 49, 64, 79)}
    assert {(o["module"], o["name"], o["count"]) for o in after["ops"]} == {
        (o["module"], o["name"], o["count"]) for o in before["ops"]
    }


def test_jax_cpu_profile_timeline_reads_back_alike(tmp_path: Path, worked_profiles: dict[str, Path]) -> None:
    """A JAX profile of the CPU (8 devices), whose ops run on many host threads at once: each device's op
    lines stay apart (threads all named XLA Ops), so the slices nest, and the ops, their runs, measured
    times and steps read back as they were."""
    path = tmp_path / "timeline.json"
    code, out, err = run_cli(
        "profile", str(worked_profiles["naive"]), "--chip", "h100", "--json", "--timeline", str(path)
    )
    assert code == 0, err
    events, _, _ = _trace(path)
    assert _nested(events)
    before, after = json.loads(out), _read_back(path)
    runs = {(o["module"], o["name"]): o["count"] for o in before["ops"]}
    assert len(runs) > 10 and runs == {(o["module"], o["name"]): o["count"] for o in after["ops"]}
    measured = {(o["module"], o["name"]): o["measured_s"] for o in after["ops"]}
    assert measured == pytest.approx(
        {(o["module"], o["name"]): o["measured_s"] for o in before["ops"]}, rel=1e-12, abs=NS
    )
    steps = [s["duration_s"] for s in before["steps"]]
    assert len(steps) == 3 and [s["duration_s"] for s in after["steps"]] == pytest.approx(steps, rel=1e-12, abs=NS)


def test_programs_of_one_name_stay_apart_without_hlo(tmp_path: Path) -> None:
    """Two programs of one jitted function (``jit_f(1)``, ``jit_f(2)``: one per shape) in a trace with no HLO
    to join them: two ops, each with its own runs (was: one op ``jit_f`` of all the runs). One program alone
    keeps the plain name, as before."""
    path = tmp_path / "t.json"
    events = [
        Event("/device:GPU:0", "XLA Ops", "dot.1", 1e-6 * k, 5e-7, {"hlo_op": "dot.1", "hlo_module": f"jit_f({p})"})
        for k, p in enumerate((1, 2, 2, 1, 2))
    ]
    write_timeline(str(path), events, {"generator": "rooftop test"})
    ops = {(o["module"], o["name"]): o["count"] for o in _read_back(path)["ops"]}
    assert ops == {("jit_f(1)", "dot.1"): 2, ("jit_f(2)", "dot.1"): 3}
    write_timeline(str(path), [e for e in events if e.args["hlo_module"] == "jit_f(2)"], {"generator": "rooftop test"})
    assert {(o["module"], o["name"]): o["count"] for o in _read_back(path)["ops"]} == {("jit_f", "dot.1"): 3}
