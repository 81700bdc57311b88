"""Idle time by cause, launch delays, critical paths (analysis/idle.py) and serving phases (analysis/phases.py).

HolisticTraceAnalysis 0.5.0 (pip install HolisticTraceAnalysis; not a rooftop dependency) gives, with
``TraceAnalysis(trace_dir).get_idle_time_breakdown(ranks=[0], consecutive_kernel_delay=30)``:

- hta_nccl_a100_2rank.json.gz (HTA keeps the kernels launched before the last ProfilerStep: steps 4 and 5):
  stream 7 host_wait 357,247 us, kernel_wait 2,155 us, other 0; stream 40 host_wait 381,499 us;
- hta_alexnet_a100.json.gz (no ProfilerStep: every kernel): stream 7 host_wait 12,855,007 us, kernel_wait
  104 us; stream 20 host_wait 12,011,718 us, kernel_wait 3 us.

HTA rounds each event's start up and its end down to a whole microsecond (its ns-rounding workaround), which
widens every gap by up to 2 us; rooftop keeps the trace's nanoseconds. With HTA's rounding applied to
rooftop's kernels the figures agree to the microsecond.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rooftop.analysis.idle import Kernel, critical_path, device_idle, idle_report, kernels_of, stream_idle
from rooftop.analysis.phases import annotation_phase, phase_report
from rooftop.analysis.trace.load import load_trace

US = 1e-6
HTA_NCCL = {"stream 7": {"host": 357_247, "launch": 2_155}, "stream 40": {"host": 381_499, "launch": 0}}
HTA_ALEXNET = {"stream 7": {"host": 12_855_007, "launch": 104}, "stream 20": {"host": 12_011_718, "launch": 3}}


def _k(stream: str, start: float, end: float, launch: float | None, nccl: bool = False) -> Kernel:
    return Kernel("/device:GPU:0", stream, "ncclKernel" if nccl else "gemm", start * US, end * US, 1,
                  None if launch is None else launch * US, nccl)  # fmt: skip


#: stream A: k1, k2 (launched in time, 2 us later: a launch delay), k3 (launched in time, 80 us later while
#: an NCCL kernel runs on stream B: a wait on the collective), k4 (launched 40 us after k3 ended: host-bound)
KERNELS = [_k("A", 0, 10, -5), _k("A", 12, 20, 1), _k("A", 100, 110, 15), _k("A", 200, 210, 150),
           _k("B", 30, 95, 25, nccl=True)]  # fmt: skip


def test_stream_causes_by_hand() -> None:
    (a,) = (s for s in stream_idle(sorted(KERNELS, key=lambda k: (k.stream, k.start_s))) if s.stream == "A")
    assert a.gaps == 3
    assert a.by_cause["launch"] == pytest.approx(2 * US)
    assert a.by_cause["collective"] == pytest.approx(80 * US)
    assert a.by_cause["host"] == pytest.approx(90 * US)


def test_device_idle_by_hand() -> None:
    (d,) = device_idle(KERNELS, {1: (-10 * US, 220 * US)})
    # device-wide gaps: 10-12 (k2, launched in time: launch), 20-30 (n1, launched at 25: host), 95-100 (k3:
    # launch), 110-200 (k4: host); 10 us before the first kernel, 10 after the last
    assert d.by_cause["launch"] == pytest.approx((2 + 5) * US)
    assert d.by_cause["host"] == pytest.approx((10 + 90) * US)
    assert d.by_cause["before first kernel"] == pytest.approx(10 * US)
    assert d.by_cause["after last kernel"] == pytest.approx(10 * US)
    assert d.busy_s == pytest.approx((10 + 8 + 65 + 10 + 10) * US)
    assert d.busy_s + d.idle_s == pytest.approx(d.window_s)


def test_critical_path_by_hand() -> None:
    (p,) = critical_path(KERNELS)
    # k4 <- host 90 us <- k3 <- (waited on another stream) 5 us <- the NCCL kernel on B, which has no predecessor
    assert p.kernels == 3 and p.span_s == pytest.approx((210 - 30) * US)
    assert p.by_part == pytest.approx({"compute": 20 * US, "collective": 65 * US, "host": 90 * US, "launch": 0.0,
                                       "wait": 5 * US})  # fmt: skip
    assert math.fsum(p.by_part.values()) == pytest.approx(p.span_s)


def _hta_rounded(kernels: list[Kernel]) -> list[Kernel]:
    """HTA's parser: start rounded up and end rounded down to a whole microsecond (launches too)."""

    def up(t: float | None) -> float | None:
        return None if t is None else math.ceil(round(t / US, 3)) * US

    out = [dataclasses.replace(k, start_s=up(k.start_s), end_s=math.floor(round(k.end_s / US, 3)) * US,
                               launch_s=up(k.launch_s)) for k in kernels]  # fmt: skip
    return sorted(out, key=lambda k: (k.device, k.stream, k.start_s, k.end_s))


def _totals(streams: Sequence[Any], steps: tuple[int, ...] | None) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for s in streams:
        if steps is None or s.step in steps:
            acc = out.setdefault(s.stream, {})
            for k, v in s.by_cause.items():
                acc[k] = acc.get(k, 0.0) + v / US
    return out


CASES = [("hta_nccl_a100_2rank", HTA_NCCL, (4, 5), True), ("hta_alexnet_a100", HTA_ALEXNET, None, False)]


@pytest.mark.parametrize(("name", "hta", "steps", "rounds"), CASES)
def test_idle_breakdown_against_hta(
    third_party: Path, name: str, hta: dict, steps: tuple[int, ...] | None, rounds: bool
) -> None:
    """``rounds``: the trace has sub-microsecond times, which HTA rounds (the AlexNet trace's are whole)."""
    trace = load_trace(third_party / "chrome_trace" / f"{name}.json.gz")
    ours = _totals(idle_report(trace).streams, steps)
    for stream, figures in hta.items():
        total = sum(figures.values())
        assert sum(ours[stream].values()) == pytest.approx(total, rel=0.05)  # a stream's idle time
        assert ours[stream]["host"] == pytest.approx(figures["host"], rel=0.05)
        assert ours[stream]["other"] == 0
    kernels = kernels_of(trace)
    rounded = _totals(stream_idle(_hta_rounded(kernels) if rounds else kernels), steps)
    for stream, figures in hta.items():  # as HTA rounds: every category, launch delays too, within 5%
        for cause, value in figures.items():
            assert rounded[stream][cause] == pytest.approx(value, rel=0.05, abs=1.0)


def test_launch_delays_and_paths_on_the_nccl_trace(third_party: Path) -> None:
    report = idle_report(load_trace(third_party / "chrome_trace" / "hta_nccl_a100_2rank.json.gz"))
    ls = report.launches
    assert ls.kernels == 2700 + 960 + 114 and ls.without_launch == 0  # kernels, copies and memsets
    assert 0 < ls.p50_s <= ls.p90_s <= ls.p99_s <= ls.max_s
    assert [d.step for d in report.devices] == [4, 5, 6]
    for d in report.devices:
        assert d.busy_s + d.idle_s == pytest.approx(d.window_s, rel=1e-9)
        assert d.by_cause["host"] > 0.7 * d.idle_s  # a host-bound run: HTA's host_wait is 99% of the idle time
    for p in report.paths:
        assert math.fsum(p.by_part.values()) == pytest.approx(p.span_s, rel=1e-9)


def test_annotation_names() -> None:
    assert annotation_phase("step[EXTEND bs=15 toks=15360]") == ("prefill", 15, 15360)
    assert annotation_phase("step[DECODE bs=64 toks=64]") == ("decode", 64, 64)
    assert annotation_phase("step[MIXED bs=9 toks=1000]") == ("mixed", 9, 1000)
    assert annotation_phase("execute_32_context_0(sq0sk0)_generation_32(sq32sk5)") == ("decode", 32, 32)
    assert annotation_phase("execute_130_context_2(sq64)_generation_2(sq2)") == ("mixed", 4, 130)
    assert annotation_phase("run_prefill") == ("prefill", None, None)
    assert annotation_phase("decoder_layer") is None and annotation_phase("step[IDLE bs=0]") is None


def test_prefill_and_decode_phases_of_serving_traces(third_party: Path) -> None:
    sglang = phase_report(load_trace(third_party / "chrome_trace" / "tracelens_sglang_qwen3_8b_prefilldecode_mi300x"
                                     ".json.gz"))  # fmt: skip
    (prefill,) = sglang.phases  # one EXTEND step of 15 requests, 15,360 tokens (the trace's README)
    assert (prefill.phase, prefill.steps, prefill.requests, prefill.tokens) == ("prefill", 1, 15, 15360)
    assert prefill.kernels == 527 + 7 and sglang.unassigned_kernels == 0  # every kernel and copy
    vllm = phase_report(load_trace(third_party / "chrome_trace" / "tracelens_vllm_decode_full_mi300x.json.gz"))
    (decode,) = vllm.phases
    assert (decode.phase, decode.requests) == ("decode", 32)
    assert decode.kernel_s <= decode.span_s


def test_profile_idle_cli(third_party: Path) -> None:
    import json

    from tests.conftest import run_cli

    path = third_party / "chrome_trace" / "tracelens_sglang_qwen3_8b_prefilldecode_mi300x.json.gz"
    code, out, err = run_cli("profile", str(path), "--chip", "mi300x", "--idle", "--json")
    if code == 2 and "unknown chip" in err:  # the MI300X chip file is another change's
        code, out, err = run_cli("profile", str(path), "--chip", "h100", "--idle", "--json")
    assert code == 0, err
    idle = json.loads(out)["idle"]
    assert idle["phases"][0]["phase"] == "prefill" and idle["phases"][0]["tokens"] == 15360
    assert idle["launch_delay"]["kernels"] == 527 + 7 and idle["critical_paths"]
    code, out, err = run_cli("profile", str(path), "--chip", "h100", "--idle")
    assert code == 0 and "serving phases" in out and "launch delay" in out, err


def test_jax_gpu_profile_launches_from_the_host_threads(tmp_path: Path) -> None:
    """An XPlane from a real H100 (tests/fixtures/h100, kernel by kernel): the launches are host events of the
    kernel's correlation id; the step is device-bound (the host runs ahead: kernels queue for ms)."""
    import gzip

    pytest.importorskip("jax")  # the XPlane reader
    path = tmp_path / "decoder_no_graphs.xplane.pb"
    fixture = Path(__file__).parents[1] / "fixtures" / "h100" / "decoder_no_graphs.xplane.pb.gz"
    path.write_bytes(gzip.decompress(fixture.read_bytes()))
    report = idle_report(load_trace(path))
    assert report.launches.without_launch == 0 and report.launches.kernels > 1000
    assert report.launches.p50_s > 1e-3
    for d in report.devices:
        assert d.busy_s > 0.9 * d.window_s and d.busy_s + d.idle_s == pytest.approx(d.window_s)
    for p in report.paths:
        assert p.by_part["compute"] > 0.95 * p.span_s
