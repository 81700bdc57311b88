"""Engine ops in a (synthetic) PyTorch trace: a symmetric-memory all-reduce is communication over the
trace's world; vLLM's paged attention takes the batch's lengths from the step annotation it ran in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rooftop.analysis.profile import profile_report
from rooftop.hardware.catalog import get_chip
from rooftop.report.reasons import collective_text, note_texts, why_text
from tests.unit.test_torch_ops import US, cpu_op, kernel, launch

H100 = get_chip("h100")
BF16 = "c10::BFloat16"


def _write(tmp_path: Path, events: list, world: int | None = 8) -> Path:
    path = tmp_path / "kineto.json"
    top = {"schemaVersion": 1, "traceEvents": events}
    if world:
        top["distributedInfo"] = {"world_size": world, "rank": 0}
    path.write_text(json.dumps(top))
    return path


def test_symm_mem_all_reduce_is_communication_over_the_world(tmp_path: Path) -> None:
    t, h = 8192, 8192  # 128 MiB: bandwidth-bound (the latency term is microseconds)
    nbytes = t * h * 2
    lower = 2 * (8 - 1) / 8 * nbytes / (18 * 25e9)  # ring all-reduce on one 8-GPU NVLink domain
    path = _write(tmp_path, [
        cpu_op("symm_mem::multimem_all_reduce_", 10.0, 20.0, [[t, h], [], []], [BF16, "str", "str"]),
        launch(15.0, 7),
        kernel("multimem_all_reduce_kernel", 40.0, 2 * lower / US, 7),
    ])  # fmt: skip
    report = profile_report(path, H100)
    (op,) = report.ops
    assert (op.opcode, op.category, op.bytes) == ("all-reduce", "communication", nbytes)
    assert op.lower_bound_s == pytest.approx(lower)
    assert op.efficiency == pytest.approx(0.5)
    assert collective_text(op.collective) == "all-reduce of 128 MiB over 8 ranks (1x8), the trace's world"
    assert report.overlap()["comm_s"] > 0


def test_symm_mem_all_reduce_without_a_world_says_why(tmp_path: Path) -> None:
    path = _write(tmp_path, [
        cpu_op("symm_mem::multimem_all_reduce_", 10.0, 20.0, [[4, 8], [], []], [BF16, "str", "str"]),
        launch(15.0, 7), kernel("multimem_all_reduce_kernel", 40.0, 5.0, 7),
    ], world=None)  # fmt: skip
    (op,) = profile_report(path, H100).ops
    assert op.lower_bound_s is None and "no distributedInfo world_size" in why_text(op.why)


def test_paged_attention_priced_from_each_steps_annotation(tmp_path: Path) -> None:
    q, kv = [32, 64, 64], [32, 8, 64]
    dims, types = [q, kv, kv, q, []], [BF16, BF16, BF16, BF16, "str"]
    events = []
    for step, (ts, keys) in enumerate(((0.0, 32_000), (1000.0, 64_000))):
        name = f"execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk{keys}sqsq32sqsk{keys})"
        events += [
            {"ph": "X", "cat": "user_annotation", "name": name, "pid": 100, "tid": 1, "ts": ts, "dur": 900.0},
            cpu_op("vllm::unified_attention_with_output", ts + 10, 20.0, dims, types, ext=step + 1),
            launch(ts + 15, step + 1), kernel("kernel_unified_attention_2d", ts + 40, 50.0, step + 1),
        ]  # fmt: skip
    ops = sorted(profile_report(_write(tmp_path, events), H100).ops, key=lambda o: o.flops or 0)
    assert [o.flops for o in ops] == [2 * 64 * 32_000 * 128, 2 * 64 * 64_000 * 128]
    assert [o.category for o in ops] == ["attention", "attention"]


def test_kineto_steps_from_engine_annotations_nested_ones_one_step(tmp_path: Path) -> None:
    """Two steps, each an SGLang step[...] annotation holding a vLLM-style execute_ one: 2 steps, each from its
    outer annotation to the next; busy is the kernel time, idle the rest."""
    events = []
    for n, ts in enumerate((0.0, 1000.0)):
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"step[DECODE bs=1 toks={n}]", "pid": 100, "tid": 1,
             "ts": ts, "dur": 900.0},
            {"ph": "X", "cat": "user_annotation", "name": "execute_1_context_0(sq0sk0sqsq0sqsk0)_generation_1"
             "(sq1sk10sqsq1sqsk10)", "pid": 100, "tid": 1, "ts": ts + 5, "dur": 800.0},
            cpu_op("aten::relu", ts + 10, 20.0, [[1024]], ["float"], ext=n + 1), launch(ts + 15, n + 1),
            kernel("relu_kernel", ts + 100, 50.0, n + 1),
        ]  # fmt: skip
    report = profile_report(_write(tmp_path, events, world=None), H100)
    assert [s.index for s in report.steps] == [0, 1]
    assert report.steps[0].duration_s == pytest.approx(1000e-6) and report.steps[0].busy_s == pytest.approx(50e-6)
    assert report.steps[1].duration_s == pytest.approx(150e-6)  # to the end of the last kernel
    assert any("2 step(s) from the engine's step annotations" in n for n in note_texts(report.notes))


def test_nccl_kernel_without_args_takes_its_call_from_record_param_comms(tmp_path: Path) -> None:
    """RCCL's ncclDevKernel_Generic names no collective: the record_param_comms op that launched it does.
    All-reduce of 2**25 bf16 over 8 H100s on NVLink: 2 (8 - 1) / 8 x V / (18 links x 25 GB/s)."""
    n = 1 << 25
    nbytes = n * 2
    lower = 2 * (8 - 1) / 8 * nbytes / (18 * 25e9)
    comms = cpu_op("record_param_comms", 10.0, 20.0, [[[n]], [], []], ["TensorList", "", ""])
    comms["args"] |= {"Collective name": "allreduce", "dtype": "BFloat16", "Group size": 8, "In msg nelems": n,
                      "Out msg nelems": n, "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"}  # fmt: skip
    path = _write(tmp_path, [comms, launch(15.0, 7), kernel("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)",
                                                            40.0, 2 * lower / US, 7)])  # fmt: skip
    (op,) = profile_report(path, H100).ops
    assert (op.name, op.opcode, op.category) == (f"nccl allreduce {n} x BFloat16 (group of 8)", "all-reduce",
                                                 "communication")  # fmt: skip
    assert op.bytes == nbytes and op.lower_bound_s == pytest.approx(lower)
    assert op.efficiency == pytest.approx(0.5)


def _collective_program(calls: list[int], lost: int, world: int = 8) -> list[dict]:
    """RCCL's ncclDevKernel_Generic on stream 7: ``lost`` kernels recorded before the host activity (no
    launch, no args), then one launched all-reduce of n bf16 per entry of ``calls``, its call in its args."""
    name = "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"
    events = [kernel(name, 1.0 + 2 * i, 1.0, 900 + i) for i in range(lost)]
    for i, n in enumerate(calls):
        ts = 100.0 + 50 * i
        call: dict[str, Any] = {"Collective name": "allreduce", "dtype": "BFloat16", "Group size": world,
                                "In msg nelems": n, "Out msg nelems": n}  # fmt: skip
        events += [cpu_op("record_param_comms", ts, 5.0), launch(ts + 1.0, i + 1),
                   kernel(name, ts + 10.0, 1.0, i + 1, **call)]  # fmt: skip
    return events


def test_collectives_without_launch_continue_their_streams_program_backwards(tmp_path: Path) -> None:
    """Launched all-reduces of 2**20 then 2**22 bf16, twice (period 2); the 3 kernels recorded before them
    continue that program backwards: the last one before is a 2**22 call (one period back from the 4th),
    then 2**20, then 2**22. Each all-reduce of V bytes over 8 H100s: 2 (8 - 1) / 8 x V / (18 x 25 GB/s)."""
    a, b = 1 << 20, 1 << 22
    report = profile_report(_write(tmp_path, _collective_program([a, b, a, b], lost=3)), H100)
    ops = {o.name: o for o in report.ops}
    small, big = ops[f"nccl allreduce {a} x BFloat16 (group of 8)"], ops[f"nccl allreduce {b} x BFloat16 (group of 8)"]
    assert (small.count, big.count) == (3, 4) and len(report.ops) == 2
    assert (small.bytes, big.bytes) == (2 * a, 2 * b)
    assert big.lower_bound_s == pytest.approx(2 * 7 / 8 * 2 * b / (18 * 25e9))
    assert report.priced_fraction() == 1.0
    assert any(n.startswith("3 kernels without a launch in the trace") for n in note_texts(report.notes))


def test_collectives_without_launch_stay_unknown_when_their_stream_repeats_no_program(tmp_path: Path) -> None:
    """Three launched all-reduces of three sizes repeat no period (a period is seen twice at least): the 2
    kernels before them keep their kernel name and no price."""
    report = profile_report(_write(tmp_path, _collective_program([1 << 20, 1 << 21, 1 << 22], lost=2)), H100)
    lost = {o.name: o for o in report.ops}["ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"]
    assert lost.count == 2 and lost.verdict == "unknown cost"
    assert report.priced_fraction() == pytest.approx(3 / 5)


def test_eager_moe_forward_takes_its_experts_from_the_ops_nested_in_it(tmp_path: Path) -> None:
    """An eager moe_forward [T, H] x logits [T, E] launching its kernel itself; the ops nested in it view bf16
    expert weights w13 [E, 2I, H], w2 [E, H, I] and the routed ids [T, k] (int32). T=2, k=2 of E=4 experts,
    H=32, I=16: 2 x T k x (2 I H + H I) FLOPs; min(E, T k) = 4 experts' weights read."""
    t, h, i, e, k = 2, 32, 16, 4, 2
    w13, w2 = [e, 2 * i, h], [e, h, i]
    path = _write(tmp_path, [
        cpu_op("vllm::moe_forward", 10.0, 50.0, [[t, h], [t, e], [], []], [BF16, BF16, "", ""]),
        cpu_op("aten::view", 12.0, 1.0, [w13, []], [BF16, "ScalarList"]),
        cpu_op("aten::view", 14.0, 1.0, [w2, []], [BF16, "ScalarList"]),
        cpu_op("aten::empty_like", 16.0, 1.0, [[t, k]], ["int"]),
        launch(30.0, 7), kernel("fused_moe_kernel", 40.0, 5.0, 7),
        cpu_op("aten::view", 70.0, 1.0, [[8, 8, 8], []], [BF16, "ScalarList"]),  # outside its span: not read
    ], world=None)  # fmt: skip
    ops = {o.opcode: o for o in profile_report(path, H100).ops}
    op = ops["vllm::moe_forward"]
    assert op.flops == 2 * t * k * (2 * i * h + h * i)
    assert op.bytes == 2 * e * (2 * i * h + h * i) + 2 * (2 * t * h) + 4 * t * k  # weights, hidden in + out, ids


def test_backend_attention_op_nested_in_vllms_layer_takes_the_step_lengths(tmp_path: Path) -> None:
    """vLLM's attention layer calls its backend's op (here vllm-flash-attention's ``fwd``), which launches the
    kernel: the innermost op carries the kernel and is priced from the step annotation it ran in."""
    q, cache = [32, 64, 64], [100, 16, 8, 64]
    name = "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32000sqsq32sqsk32000)"
    fa3_dims = [q, cache, cache, [], [], [], q, [33], [33]]
    fa3_types = [BF16, BF16, BF16, "", "", "", BF16, "int", "int"]
    events = [
        {"ph": "X", "cat": "user_annotation", "name": name, "pid": 100, "tid": 1, "ts": 0.0, "dur": 900.0},
        cpu_op("vllm::unified_attention_with_output", 10.0, 40.0, [q, q, q, q, []], [BF16] * 4 + ["str"]),
        cpu_op("_vllm_fa3_C::fwd", 15.0, 20.0, fa3_dims, fa3_types, ext=1),
        launch(20.0, 1), kernel("flash_fwd_splitkv_kernel", 60.0, 50.0, 1),
    ]  # fmt: skip
    (op,) = profile_report(_write(tmp_path, events), H100).ops
    assert op.flops == 2 * 64 * 32_000 * (64 + 64) and op.category == "attention"
    assert op.bytes == 32 * 64 * 64 * 2 + 32_000 * 8 * 128 * 2 + 32 * 64 * 64 * 2
