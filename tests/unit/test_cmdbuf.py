"""Kernels replayed from XLA:GPU command buffers (CUDA graphs) are given back to their HLO instructions.

The alignment rules are checked on hand-written schedules; the whole path on a real H100 profile
(tests/fixtures/h100: jax 0.11 ran the step as one CUDA graph, every kernel tagged ``command_buffer_1``)."""

from __future__ import annotations

import dataclasses
import gzip
from collections import Counter
from pathlib import Path

import pytest

from rooftop.analysis.hlo.parse import parse_hlo
from rooftop.analysis.trace.cmdbuf import align, attribute_command_buffers, kernel_name
from rooftop.analysis.trace.events import COLUMNS, EventTable, OpEvent, Trace
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason
from rooftop.report.reasons import note_text, note_texts

H100 = Path(__file__).parents[1] / "fixtures" / "h100"

HLO = """HloModule jit_step, is_scheduled=true

%fused_a (p: f32[64]) -> f32[64] {
  %p = f32[64]{0} parameter(0)
  ROOT %e = f32[64]{0} exponential(%p)
}

%fused_b (p: f32[64]) -> f32[64] {
  %p = f32[64]{0} parameter(0)
  ROOT %e = f32[64]{0} exponential(%p)
}

ENTRY %main (x: f32[64], w: f32[64,64]) -> f32[64] {
  %x = f32[64]{0} parameter(0)
  %w = f32[64,64]{1,0} parameter(1)
  %fusion.1 = f32[64]{0} fusion(%x), kind=kLoop, calls=%fused_a
  %bitcast.1 = f32[1,64]{1,0} bitcast(%fusion.1)
  %custom-call.7 = (f32[1,64]{1,0}, s8[1024]{0}) custom-call(%bitcast.1, %w), custom_call_target="__cublas$lt$matmul"
  %get-tuple-element.1 = f32[1,64]{1,0} get-tuple-element(%custom-call.7), index=0
  %bitcast.2 = f32[64]{0} bitcast(%get-tuple-element.1)
  ROOT %fusion.2 = f32[64]{0} fusion(%bitcast.2), kind=kLoop, calls=%fused_b
}
"""


def _schedule() -> list:
    module = parse_hlo(HLO)
    return [i for i in module.entry.instructions if i.opcode in ("fusion", "custom-call")]


def test_kernel_names_are_instruction_names_with_underscores() -> None:
    assert kernel_name("loop_multiply_fusion.9") == "loop_multiply_fusion_9"
    assert kernel_name("custom-call.7") == "custom_call_7"


def test_align_own_names_library_kernels_and_reused_kernels() -> None:
    schedule = _schedule()
    # fusion.2 has fusion.1's body: XLA runs fusion.1's compiled kernel for it, named fusion_1
    got = align(["fusion_1", "nvjet_sm90_tst_128x256", "fusion_1"], schedule)
    assert got == ["fusion.1", "custom-call.7", "fusion.2"]


def test_align_keeps_a_second_kernel_with_its_instruction() -> None:
    schedule = _schedule()
    got = align(["fusion_1", "fusion_1", "nvjet_gemm", "splitKreduce_kernel", "fusion_2"], schedule)
    assert got == ["fusion.1", "fusion.1", "custom-call.7", "custom-call.7", "fusion.2"]


def test_align_reads_a_repeated_name_as_the_next_identical_fusion_when_that_lines_up() -> None:
    """Two identical fusions scheduled back to back (a gate and an up projection of one shape) run one
    compiled kernel twice: the second run is the next fusion, not a second kernel of the first, since
    only that reading lines the replay up (H200 decode step, tests/fixtures/h200)."""
    hlo = HLO.replace(
        "  %custom-call.7 = (f32[1,64]{1,0}, s8[1024]{0}) custom-call(%bitcast.1, %w)",
        "  %fusion.3 = f32[64]{0} fusion(%x), kind=kLoop, calls=%fused_b\n"
        "  %custom-call.7 = (f32[1,64]{1,0}, s8[1024]{0}) custom-call(%bitcast.1, %w)",
    )
    schedule = [i for i in parse_hlo(hlo).entry.instructions if i.opcode in ("fusion", "custom-call")]
    assert [i.name for i in schedule] == ["fusion.1", "fusion.3", "custom-call.7", "fusion.2"]
    got = align(["fusion_1", "fusion_1", "nvjet_gemm", "fusion_1"], schedule)
    assert got == ["fusion.1", "fusion.3", "custom-call.7", "fusion.2"]
    # with a split-K reduction after the cuBLAS call the library reading still holds
    got = align(["fusion_1", "fusion_1", "nvjet_gemm", "splitKreduce_kernel", "fusion_1"], schedule)
    assert got == ["fusion.1", "fusion.3", "custom-call.7", "custom-call.7", "fusion.2"]


def test_align_stays_linear_over_many_kernels_of_one_name() -> None:
    """20,000 runs of one compiled kernel over 20,000 identical fusions: every run could also be a second
    kernel of the fusion before, so the readings followed are bounded (16, the furthest), not one per run."""
    import time

    n = 20_000
    fusions = "\n".join(f"  %fusion.{i + 1} = f32[64]{{0}} fusion(%x), kind=kLoop, calls=%fused_a" for i in range(n))
    head = HLO.split("ENTRY")[0]
    module = parse_hlo(f"{head}ENTRY %main (x: f32[64]) -> f32[64] {{\n  %x = f32[64]{{0}} parameter(0)\n{fusions}\n"
                       f"  ROOT %t = f32[64]{{0}} copy(%fusion.{n})\n}}\n")  # fmt: skip
    schedule = [i for i in module.entry.instructions if i.opcode == "fusion"]
    start = time.perf_counter()
    got = align(["fusion_1"] * n, schedule)
    assert got == [f"fusion.{i + 1}" for i in range(n)]
    assert time.perf_counter() - start < 5  # about 0.2 s; unbounded, 3,000 runs took 2 s and 20,000 would take 90


@pytest.mark.parametrize(
    "kernels",
    [
        ["fusion_1", "nvjet_gemm"],  # a kernel short: fusion.2 never ran
        ["nvjet_gemm", "fusion_1", "fusion_2"],  # a library kernel where a generated one is due
        ["fusion_1", "fusion_2", "fusion_2"],  # a generated kernel where the cuBLAS call is due
        ["fusion_1", "nvjet_gemm", "reduce_window_3"],  # a reused kernel of another kind
    ],
)
def test_align_refuses_what_does_not_line_up(kernels: list[str]) -> None:
    assert align(kernels, _schedule()) is None


def _trace(rows: list[tuple[str, float, str]]) -> Trace:
    """One replay per correlation id: (kernel name, start, correlation)."""
    events = [OpEvent("/device:GPU:0", "Stream #14", name, "jit_step", "command_buffer_1", start, 1e-6, 0,
                      "kernel", corr) for name, start, corr in rows]  # fmt: skip
    return Trace(EventTable.from_events(events), "t", "xplane")


def test_attribution_rewrites_aligned_replays_and_names_the_rest() -> None:
    module = parse_hlo(HLO)
    good = [("fusion_1", 0.0, "1"), ("nvjet_gemm", 1.0, "1"), ("fusion_1", 2.0, "1")]
    bad = [("fusion_1", 10.0, "2"), ("nvjet_gemm", 11.0, "2")]  # fusion.2's kernel is missing
    trace, notes = attribute_command_buffers(_trace(good + bad), {"jit_step": module})
    assert list(trace.events.column("instruction")) == [
        "fusion.1", "custom-call.7", "fusion.2",  # lined up with the schedule
        "fusion.1", "command_buffer_1",  # by name only; the cuBLAS kernel stays unpriced
    ]  # fmt: skip
    (reason,) = notes
    assert reason == Reason.of(ReasonCode.COMMAND_BUFFER, module="jit_step", kernels=5, buffer="command_buffer_1",
                               aligned=1, replays=2, unpriced=1)  # fmt: skip
    note = note_text(reason)
    assert "5 kernels ran inside a CUDA graph (command_buffer_1)" in note
    assert "1 of 2 replays were lined up" in note
    assert "1 library kernels stay unpriced" in note and "--xla_gpu_enable_command_buffer=" in note


def test_no_command_buffer_leaves_the_trace_alone() -> None:
    trace = _trace([("fusion_1", 0.0, "1")])
    plain = dataclasses.replace(trace, events=EventTable({**{c: trace.events.column(c) for c in COLUMNS},
                                                          "instruction": ("fusion.1",)}))  # fmt: skip
    same, notes = attribute_command_buffers(plain, {"jit_step": parse_hlo(HLO)})
    assert same is plain and notes == []


def _load(tmp: Path, stem: str):
    from rooftop.analysis.hlo.parse import parse_hlo
    from rooftop.analysis.profile import profile_report
    from rooftop.hardware.catalog import get_chip

    xplane = tmp / f"{stem}.xplane.pb"
    xplane.write_bytes(gzip.decompress((H100 / f"{stem}.xplane.pb.gz").read_bytes()))
    module = parse_hlo(gzip.decompress((H100 / f"{stem}.hlo.txt.gz").read_bytes()).decode())
    return profile_report(xplane, get_chip("h100")), module


@pytest.fixture(scope="module")
def h100(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("jax")
    tmp = tmp_path_factory.mktemp("h100")
    return {stem: _load(tmp, stem) for stem in ("decoder", "decoder_no_graphs")}


@pytest.mark.jax
def test_real_h100_graph_kernels_each_get_their_instruction(h100) -> None:
    report, _ = h100["decoder"]
    assert any("1275 kernels ran inside a CUDA graph (command_buffer_1)" in n for n in note_texts(report.notes))
    assert any("5 of 5 replays were lined up" in n for n in note_texts(report.notes))
    # 199 fusions and 56 cuBLAS calls in the entry schedule: every one priced, 5 runs each (5 steps)
    assert Counter(o.opcode for o in report.ops) == {"fusion": 199, "custom-call": 56}
    assert all(o.count == 5 and o.lower_bound_s and o.verdict != "unknown cost" for o in report.ops)
    busy = sum(o.total_s for o in report.ops) / 5  # the kernels' busy time: 31 ms of each ~32 ms step
    assert 0.030 < busy < 0.0315
    # a cuBLAS projection: x[8192,2048] @ wqkv[2048,6144] in bf16, compute-bound on h100's 989.5 TFLOP/s
    qkv = next(o for o in report.ops if o.name == "custom-call.12")
    assert qkv.flops == pytest.approx(2 * 8192 * 2048 * 6144)
    assert qkv.bound == "compute" and qkv.lower_bound_s == pytest.approx(2 * 8192 * 2048 * 6144 / 9.895e14)
    assert 0.6 < qkv.efficiency < 0.9  # cuBLAS reaches ~80% of the datasheet peak on this shape
    # a misattributed kernel would show as an outlier: every cuBLAS call is within 0.7-0.9 of the roofline
    assert all(0.7 < o.efficiency < 0.9 for o in report.ops if o.opcode == "custom-call")


@pytest.mark.jax
def test_graph_attribution_matches_the_profile_where_kernels_name_their_ops(h100) -> None:
    """The same step profiled without command buffers (each kernel names its instruction): joined by op
    name and shape, the times the schedule alignment gives agree op by op, within run-to-run noise."""
    times = {}
    for stem, (report, module) in h100.items():
        key = {i.name: (i.metadata.get("op_name"), i.opcode, str(i.shape)) for i in module.entry.instructions}
        per: dict[tuple, list[float]] = {}
        for o in report.ops:
            per.setdefault(key[o.name], []).append(o.measured_s)
        times[stem] = per
    graphs, plain = times["decoder"], times["decoder_no_graphs"]
    ratios = [a / b for k in graphs.keys() & plain.keys() if len(graphs[k]) == len(plain[k])
              for a, b in zip(sorted(graphs[k]), sorted(plain[k]), strict=True) if b > 5e-6]  # fmt: skip
    assert len(ratios) > 200
    assert sorted(ratios)[len(ratios) // 2] == pytest.approx(1.0, abs=0.03)
    assert 0.85 < min(ratios) and max(ratios) < 1.15


@pytest.mark.jax
def test_a_kernel_without_hlo_op_gets_the_fusion_its_name_names(h100) -> None:
    report, _ = h100["decoder_no_graphs"]
    assert any(
        "5 of 5 kernels without an hlo_op were given the fusion their name names" in n for n in note_texts(report.notes)
    )
    assert all(o.lower_bound_s for o in report.ops)  # loop_convert_fusion.7 among them
    assert any(o.name == "loop_convert_fusion.7" and o.count == 5 for o in report.ops)
