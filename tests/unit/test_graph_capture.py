"""Kernels replayed from a CUDA/HIP graph get their ops from the engine's capture trace
(analysis/torch/capture.py): the k-th replayed kernel of a name in a graph launch is the k-th captured launch
of that name, priced from the captured op's shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rooftop.analysis.profile import profile_report
from rooftop.analysis.torch.capture import capture_files, read_capture
from rooftop.analysis.torch.families import ACT_AND_MUL_FLOPS, RMS_FLOPS
from rooftop.hardware.catalog import get_chip
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason
from rooftop.report.reasons import note_texts, sentence
from tests.conftest import run_cli
from tests.unit.test_torch_ops import cpu_op, kernel

H100 = get_chip("h100")
BF16 = "c10::BFloat16"
T, H = 8, 1024
NORM = ("_C::rms_norm", [[T, H], [T, H], [H], []], [BF16, BF16, BF16, "double"])
ACT = ("_C::silu_and_mul", [[T, H], [T, 2 * H]], [BF16, BF16])


def _launch(ts: float, corr: int, kernel_name: str, name: str = "cudaLaunchKernel") -> dict[str, Any]:
    args = {"correlation": corr, "kernel": kernel_name}
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 100, "tid": 1, "ts": ts, "dur": 1.0, "args": args}


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _capture(folder: Path) -> Path:
    # the same kernel name launched by two ops: the norm first, then the activation
    return _write(folder / "capture_traces" / "graph_capture_rank_0.json", [
        cpu_op(NORM[0], 10.0, 20.0, NORM[1], NORM[2]), _launch(15.0, 1, "generic_kernel"),
        cpu_op(ACT[0], 40.0, 20.0, ACT[1], ACT[2]), _launch(45.0, 2, "generic_kernel"),
        cpu_op("aten::fill_", 70.0, 5.0, [[4], []], ["int", "Scalar"]), _launch(71.0, 3, "fill_kernel"),
    ])  # fmt: skip


def _replay(folder: Path, launches: int = 2) -> Path:
    events: list[dict[str, Any]] = []
    for n in range(launches):
        t0 = 1000.0 * n
        events += [
            _launch(t0, 100 + n, "", "cudaGraphLaunch"),
            kernel("generic_kernel", t0 + 10, 5.0, 100 + n), kernel("generic_kernel", t0 + 20, 7.0, 100 + n),
        ]  # fmt: skip
    return _write(folder / "profile.json", events)


def test_capture_lists_each_kernels_launching_op_in_order(tmp_path: Path) -> None:
    cap = read_capture(_capture(tmp_path))
    assert cap.launches == 3
    assert [c.op for c in cap.by_kernel["generic_kernel"]] == ["_C::rms_norm", "_C::silu_and_mul"]
    assert cap.match(["generic_kernel", "fill_kernel", "generic_kernel", "generic_kernel"]) == [0, 0, 1, -1]


def test_replayed_kernels_priced_from_the_captured_ops(tmp_path: Path) -> None:
    written = _capture(tmp_path)
    profile = _replay(tmp_path)
    assert capture_files(profile) == [written]
    report = profile_report(profile, H100, capture=read_capture(written))
    ops = {o.opcode: o for o in report.ops}
    norm, act = ops["_C::rms_norm"], ops["_C::silu_and_mul"]
    assert (norm.count, act.count) == (2, 2)  # one execution per graph launch
    assert norm.flops == RMS_FLOPS * T * H and act.flops == ACT_AND_MUL_FLOPS * T * H
    assert norm.measured_s == 5e-6 and act.measured_s == 7e-6
    assert report.priced_fraction() == 1.0
    assert any("4 graph-replayed kernels attributed" in n for n in note_texts(report.notes))
    assert any("graph-replayed share of the kernel time: 100.0%" in n for n in note_texts(report.notes))


def test_without_capture_the_replayed_share_and_the_way_to_get_one_are_said(tmp_path: Path) -> None:
    report = profile_report(_replay(tmp_path), H100)
    assert report.priced_fraction() == 0.0
    (why,) = [n for n in report.notes if isinstance(n, Reason) and n.code is ReasonCode.GRAPH_REPLAY_NO_CAPTURE]
    assert why == Reason.of(ReasonCode.GRAPH_REPLAY_NO_CAPTURE, left=4, unexplained=4)
    assert "no capture trace beside the profile" in sentence(why) and "--capture" in sentence(why)


def test_cli_finds_the_capture_beside_the_profile(tmp_path: Path) -> None:
    _capture(tmp_path)
    code, out, _ = run_cli("profile", str(_replay(tmp_path)), "--chip", "h100", "--json")
    assert code == 0 and json.loads(out)["priced_fraction"] == 1.0
    code, _, err = run_cli("profile", str(_replay(tmp_path)), "--chip", "h100", "--capture", str(tmp_path / "none"))
    assert code == 2 and "capture trace" in err


def test_moe_forward_priced_from_the_expert_weights_of_the_ops_nested_in_it(tmp_path: Path) -> None:
    """vLLM's moe_forward records only hidden [T, H] and router logits [T, E]; the ops nested in it view the
    fp4 expert weights (uint8, two values a byte: w13 [E, H/2, 2I], w2 [E, I/2, H]) and the routed ids
    [T, k]. T=4, H=64, I=48, E=8, k=2: 2 x T k x (H 2I + I H) FLOPs; all min(E, T k) = 8 experts' bytes read."""
    t, h, i, e, k = 4, 64, 48, 8, 2
    u8, i16 = "unsigned char", "short int"
    w13, w2 = [e, h // 2, 2 * i], [e, i // 2, h]
    capture = _write(tmp_path / "capture_traces" / "capture.json", [
        cpu_op("vllm::moe_forward", 10.0, 50.0, [[t, h], [t, e], [], []], [BF16, BF16, "", ""]),
        cpu_op("SortTokens", 12.0, 2.0, [[t, k], [t, k], []], [BF16, i16, "Scalar"]),
        cpu_op("aten::view", 20.0, 1.0, [w13, []], [u8, "ScalarList"]),
        cpu_op("aten::view", 22.0, 1.0, [w2, []], [u8, "ScalarList"]),
        cpu_op("aten::view", 24.0, 1.0, [w13, []], [u8, "ScalarList"]),  # seen again: counted once
        _launch(30.0, 1, "moe_kernel"),
    ])  # fmt: skip
    profile = _write(tmp_path / "profile.json", [_launch(0.0, 100, "", "hipGraphLaunch"),
                                                  kernel("moe_kernel", 10.0, 5.0, 100)])  # fmt: skip
    (op,) = profile_report(profile, H100, capture=read_capture(capture)).ops
    assert op.flops == 2 * t * k * (h * 2 * i + i * h)
    weights = e * (h // 2 * 2 * i + i // 2 * h)  # bytes (uint8)
    assert op.bytes == weights + 2 * (t * h * 2) + t * k * 4  # + hidden in and out (bf16) + the ids (as int32)
    assert op.lower_bound_s is not None and op.category == "mlp"


def test_a_capture_event_time_too_large_for_a_float_is_no_time(tmp_path: Path) -> None:
    """Was: an internal OverflowError (``float(10**400)``) on a capture event whose ``ts`` is an integer
    of 401 digits, as JSON allows; such an event is skipped like one with no time."""
    written = _capture(tmp_path)
    text = written.read_text().replace('"ts": 10.0', '"ts": 1' + "0" * 400, 1)
    assert "0" * 400 in text
    written.write_text(text)
    code, out, err = run_cli("profile", str(_replay(tmp_path)), "--chip", "h100", "--capture", str(written), "--json")
    assert code == 0, err
    assert json.loads(out)["priced_fraction"] < 1.0  # the norm's op is gone: its kernels are not attributed to it
