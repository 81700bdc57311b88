"""PyTorch (Kineto) traces: aten ops -> Costs (analysis/torch/ops.py) and kernels -> the ops that launched
them (analysis/torch/kineto.py), on small synthetic traces written here. Expected values are hand-derived."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rooftop.analysis.compare import OpReport, ProfileReport
from rooftop.analysis.profile import profile_report
from rooftop.analysis.torch.launches import launching_ops
from rooftop.analysis.torch.op import TorchOp
from rooftop.analysis.torch.ops import nccl_comm, op_cost
from rooftop.analysis.trace.load import load_trace
from rooftop.hardware.catalog import get_chip
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason
from rooftop.report.reasons import note_text, note_texts, sentence, why_text

H100 = get_chip("h100")
US = 1e-6


# ------------------------------------------------------------------------------------- synthetic traces


def cpu_op(name: str, ts: float, dur: float, dims: list | None = None, types: list | None = None,
           concrete: list | None = None, tid: int = 1, ext: int | None = None) -> dict[str, Any]:  # fmt: skip
    args: dict[str, Any] = {"External id": ext if ext is not None else int(ts)}
    if dims is not None:
        args |= {"Input Dims": dims, "Input type": types or ["float"] * len(dims)}
    if concrete is not None:
        args["Concrete Inputs"] = concrete
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur, "args": args}


def launch(ts: float, corr: int, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": tid, "ts": ts,
            "dur": 1.0, "args": {"correlation": corr}}  # fmt: skip


def kernel(name: str, ts: float, dur: float, corr: int, device: int = 0, **extra: Any) -> dict[str, Any]:
    args = {"device": device, "stream": 7, "correlation": corr, **extra}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": 7, "ts": ts, "dur": dur, "args": args}


def write(tmp_path: Path, events: list[dict[str, Any]]) -> Path:
    path = tmp_path / "kineto.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def by_name(report: ProfileReport) -> dict[str, OpReport]:
    return {o.name: o for o in report.ops}


MM = "aten::mm [64,128]x[128,256] fp32"
MM_FLOPS = 2 * 64 * 128 * 256
MM_BYTES = 4 * (64 * 128 + 128 * 256 + 64 * 256)
MM_LOWER_S = max(MM_FLOPS / H100.flops_per_s("fp32"), MM_BYTES / H100.hbm_bytes_per_s)  # memory-bound


def mm_trace(tmp_path: Path, kernel_us: float) -> Path:
    return write(tmp_path, [
        cpu_op("aten::mm", 10.0, 20.0, [[64, 128], [128, 256]], ["float", "float"]),
        launch(15.0, 7),
        kernel("sgemm_64x64", 40.0, kernel_us, 7),
    ])  # fmt: skip


@pytest.mark.parametrize(("efficiency", "verdict"), [(0.5, "memory-slow"), (0.9, "near roofline")])
def test_mm_kernel_priced_from_its_launching_op(tmp_path: Path, efficiency: float, verdict: str) -> None:
    report = profile_report(mm_trace(tmp_path, MM_LOWER_S / efficiency / US), H100)
    (op,) = report.ops
    assert (op.name, op.opcode, op.count, op.verdict, op.bound) == (MM, "aten::mm", 1, verdict, "memory")
    assert op.flops == MM_FLOPS and op.bytes == MM_BYTES
    assert op.lower_bound_s == pytest.approx(MM_LOWER_S)
    assert op.efficiency == pytest.approx(efficiency)
    assert report.chip == "h100" and any("1 of 1 kernels priced" in n for n in note_texts(report.notes))


def test_one_op_launching_two_kernels_is_one_execution(tmp_path: Path) -> None:
    """aten::addmm launches a bias copy and the GEMM: one execution, their durations summed."""
    path = write(tmp_path, [
        cpu_op("aten::addmm", 0.0, 50.0, [[256], [32, 128], [128, 256], [], []],
               ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"]),
        launch(5.0, 1), launch(20.0, 2),
        kernel("copy", 60.0, 3.0, 1), kernel("gemm", 64.0, 9.0, 2),
    ])  # fmt: skip
    (op,) = profile_report(path, H100).ops
    assert op.name == "aten::addmm [256]x[32,128]x[128,256] bf16"
    assert op.count == 1 and op.measured_s == pytest.approx((3.0 + 9.0) * US)
    assert op.flops == 2 * 32 * 128 * 256 + 32 * 256  # the GEMM plus the bias add
    assert op.bytes == 2 * (32 * 128 + 128 * 256 + 32 * 256) + 2 * 256


def test_backward_kernels_go_to_the_innermost_aten_op(tmp_path: Path) -> None:
    """evaluate_function: MmBackward0 > MmBackward0 (has dims, no rule) > aten::mm: the mm kernel is the
    mm's; a kernel launched by MmBackward0 itself is unknown and the reason names MmBackward0."""
    path = write(tmp_path, [
        cpu_op("autograd::engine::evaluate_function: MmBackward0", 0.0, 100.0),
        cpu_op("MmBackward0", 1.0, 98.0, [[64, 256]], ["float"]),
        cpu_op("aten::mm", 10.0, 20.0, [[64, 128], [128, 256]], ["float", "float"]),
        launch(15.0, 1), launch(50.0, 2),
        kernel("sgemm", 120.0, 10.0, 1), kernel("other", 140.0, 2.0, 2),
    ])  # fmt: skip
    ops = by_name(profile_report(path, H100))
    assert ops[MM].flops == MM_FLOPS
    other = ops["MmBackward0 [64,256] fp32"]
    assert (other.verdict, why_text(other.why)) == ("unknown cost", "no cost rule for MmBackward0")


def test_unexplained_kernels_stay_unknown_with_why(tmp_path: Path) -> None:
    path = write(tmp_path, [
        cpu_op("aten::empty", 0.0, 5.0, [[]], ["ScalarList"]),
        launch(20.0, 1), kernel("outside", 30.0, 2.0, 1),  # launched outside every op
        kernel("orphan", 40.0, 2.0, 99),  # no launch event, no External id
        kernel("orphan", 50.0, 2.0, 98), kernel("orphan", 60.0, 2.0, 97),  # two more of the same name
    ])  # fmt: skip
    report = profile_report(path, H100)
    ops = by_name(report)
    assert ops["outside"].verdict == ops["orphan"].verdict == "unknown cost"
    assert "record_shapes=True" in why_text(ops["outside"].why)
    assert why_text(ops["orphan"].why).startswith(
        "its launch (the runtime event of its correlation id) is not in the trace"
    )
    # kernels without launches group by name: one row of 3 executions, not one row per correlation id
    assert [op.count for op in report.ops if op.name == "orphan"] == [3]


def test_external_id_joins_when_there_is_no_launch_event(tmp_path: Path) -> None:
    path = write(tmp_path, [
        cpu_op("aten::mm", 10.0, 20.0, [[64, 128], [128, 256]], ["float", "float"], ext=42),
        kernel("sgemm", 40.0, 5.0, 7, **{"External id": 42}),
    ])  # fmt: skip
    assert profile_report(path, H100).ops[0].name == MM


def test_launch_is_matched_on_its_own_thread(tmp_path: Path) -> None:
    """A launch on thread 2 at a time an op of thread 1 spans is not that op's."""
    path = write(tmp_path, [
        cpu_op("aten::mm", 10.0, 20.0, [[64, 128], [128, 256]], ["float", "float"], tid=1),
        launch(15.0, 7, tid=2), kernel("sgemm", 40.0, 5.0, 7),
    ])  # fmt: skip
    (kernel_row,) = (i for i, e in enumerate(load_trace(path).events) if e.kind == "kernel")
    assert launching_ops(load_trace(path))[kernel_row][0] is None


def test_nccl_kernels_are_collectives(tmp_path: Path) -> None:
    """all-reduce of V bytes over 8 H100s on NVLink: 2 (n-1)/n x V / (18 links x 25 GB/s), bandwidth-bound."""
    big, small = 1 << 26, 1024
    nbytes = big * 2  # bf16
    lower = 2 * (8 - 1) / 8 * nbytes / (18 * 25e9)
    args: dict[str, Any] = {"Collective name": "allreduce", "dtype": "BFloat16", "Group size": 8}
    path = write(tmp_path, [
        kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 0.0, lower / 0.9 / US, 1,
               **args, **{"In msg nelems": big, "Out msg nelems": big}),
        kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 2000.0, 500.0, 2,
               **args, **{"In msg nelems": small, "Out msg nelems": small}),
        kernel("ncclDevKernel_Broadcast_RING_LL", 3000.0, 5.0, 3,
               **{**args, "Collective name": "broadcast", "In msg nelems": 100, "Out msg nelems": 100}),
    ])  # fmt: skip
    report = profile_report(path, H100)
    ops = by_name(report)
    op = ops[f"nccl allreduce {big} x BFloat16 (group of 8)"]
    assert (op.opcode, op.category, op.bound, op.mesh_axes) == ("all-reduce", "communication", "network", ("nvlink",))
    assert op.bytes == nbytes and op.lower_bound_s == pytest.approx(lower)
    assert op.verdict == "near roofline" and op.efficiency == pytest.approx(0.9)
    assert ops[f"nccl allreduce {small} x BFloat16 (group of 8)"].verdict == "latency-bound collective"
    broadcast = ops["nccl broadcast 100 x BFloat16 (group of 8)"]
    assert (broadcast.verdict, why_text(broadcast.why)) == ("unknown cost", "no collective rule for NCCL broadcast")
    default = Reason.of(ReasonCode.NCCL_TOPOLOGY_DEFAULT, ranks=8, topology="1x8", chip="h100")  # said as data
    assert default in report.notes and "(give --topology)" in sentence(default)


# ------------------------------------------------------------------------------------------ cost rules


def price(name: str, dims: list, types: list[str], concrete: list[str] | None = None):
    args = {"Input Dims": dims, "Input type": types} | ({"Concrete Inputs": concrete} if concrete else {})
    return op_cost(TorchOp.from_args(name, args))


BF16 = "c10::BFloat16"


def test_matmul_family() -> None:
    bmm = price("aten::bmm", [[4, 10, 128], [4, 128, 7]], [BF16, BF16])
    assert bmm.cost.flops == 2 * 4 * 10 * 128 * 7
    assert bmm.cost.hbm_bytes == 2 * (4 * 10 * 128 + 4 * 128 * 7 + 4 * 10 * 7)
    shared = price("aten::matmul", [[4, 10, 128], [128, 7]], [BF16, BF16])  # rows flattened, weight read once
    assert shared.cost.flops == 2 * 40 * 128 * 7 and shared.cost.hbm_bytes == 2 * (40 * 128 + 128 * 7 + 40 * 7)
    linear = price("aten::linear", [[4, 10, 128], [256, 128], [256]], [BF16] * 3)
    assert dict(linear.cost.flops_by) == {("matrix", "bf16"): 2 * 40 * 128 * 256, ("vector", "bf16"): 40 * 256}
    assert linear.cost.hbm_bytes == 2 * (40 * 128 + 256 * 128 + 40 * 256) + 2 * 256
    baddbmm = price("aten::baddbmm", [[4, 10, 7], [4, 10, 128], [4, 128, 7]], ["float"] * 3)
    assert baddbmm.cost.flops == 2 * 4 * 10 * 128 * 7 + 4 * 10 * 7
    bad = price("aten::mm", [[64, 128], [127, 256]], ["float", "float"])
    said = note_text(bad.what)
    assert bad.cost is None and "contracting dims differ" in said and said.startswith("aten::mm [64,128]x[127,256]")


def test_convolution_from_weight_dims_and_concrete_inputs() -> None:
    """3x3 conv, pad 1, stride 1 on 32x32: taps on padding excluded (cost/op.py convolution), so each
    spatial dim has 3 x 32 - 2 valid (output, tap) pairs; plus the bias add."""
    dims = [[8, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], []]
    types = ["float"] * 3 + ["ScalarList"] * 3 + ["Scalar"]
    conv = price("aten::conv2d", dims, types, ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"])
    assert dict(conv.cost.flops_by) == {("matrix", "fp32"): 2 * 8 * 16 * 3 * (3 * 32 - 2) ** 2,
                                        ("vector", "fp32"): 8 * 16 * 32 * 32}  # fmt: skip
    assert conv.cost.hbm_bytes == 4 * (8 * 3 * 32 * 32 + 16 * 3 * 3 * 3 + 8 * 16 * 32 * 32) + 4 * 16
    strided = price("aten::conv2d", dims, types, ["", "", "", "[2, 2]", "[0, 0]", "[1, 1]", "1"])
    assert strided.tag == "stride 2x2" and strided.cost.flops == 2 * 8 * 16 * 3 * (15 * 3) ** 2 + 8 * 16 * 15 * 15
    assert price("aten::conv2d", dims, types).cost is None  # stride/padding not recorded
    scalars = ["[16]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"]
    back = price("aten::convolution_backward", [[8, 16, 32, 32], [8, 3, 32, 32], [16, 3, 3, 3]] + [[]] * 8,
                 ["float"] * 3 + ["ScalarList"] * 6 + ["Scalar", "ScalarList"], ["", "", ""] + scalars)  # fmt: skip
    assert back.cost.flops == 2 * (2 * 8 * 16 * 3 * (3 * 32 - 2) ** 2)  # grad input + grad weight


def test_fused_attention() -> None:
    """4 B H Sq Sk D forward (non-causal), causal pairs S(S+1)/2, 2.5x backward; bytes Q, K, V, O."""
    b, h, s, d = 2, 8, 1024, 64
    qkv = [[b, h, s, d]] * 3
    flash = "aten::_scaled_dot_product_flash_attention"
    causal = price(flash, qkv + [[]] * 4, [BF16] * 3 + ["Scalar"] * 3 + [""], ["", "", "", "0.", "True", "False", ""])
    assert causal.tag == "causal" and causal.cost.flops == 4 * b * h * (s * (s + 1) / 2) * d
    assert causal.cost.hbm_bytes == 2 * 4 * b * h * s * d
    full = price(flash, qkv + [[]] * 4, [BF16] * 3 + ["Scalar"] * 3 + [""], ["", "", "", "0.", "False", "False", ""])
    assert full.tag == "" and full.cost.flops == 4 * b * h * s * s * d
    unknown = price("aten::_flash_attention_forward", [[b, s, h, d]] * 3 + [[]] * 7, [BF16] * 3 + [""] * 7)
    assert unknown.tag == "causal unknown" and unknown.cost.flops == 4 * b * h * s * s * d  # bshd layout
    back = price("aten::_scaled_dot_product_flash_attention_backward", [[b, h, s, d]] * 5 + [[b, h, s]] + [[]] * 9,
                 [BF16] * 5 + ["float"] + [""] * 9, [""] * 11 + ["False"])  # fmt: skip
    assert back.cost.flops == 2.5 * 4 * b * h * s * s * d
    assert back.cost.hbm_bytes == 2 * 5 * b * h * s * d + 4 * b * h * s + 2 * 3 * b * h * s * d
    assert price(flash, [[b * s, h, d]] * 3, [BF16] * 3).cost is None  # packed variable-length


def test_vector_ops_and_reductions() -> None:
    softmax = price("aten::_softmax", [[4, 1024], [], []], ["c10::Half", "Scalar", "Scalar"])
    assert dict(softmax.cost.flops_by) == {("vector", "fp16"): 5 * 4 * 1024}  # max, sub, exp, sum, div
    assert softmax.cost.hbm_bytes == 2 * (4 * 1024 + 4 * 1024)
    ln = price("aten::native_layer_norm", [[8, 512], [], [512], [512], []], [BF16, "ScalarList", BF16, BF16, "Scalar"])
    assert ln.cost.flops == 7 * 8 * 512 and ln.cost.hbm_bytes == 2 * (8 * 512 + 512 + 512 + 8 * 512)
    add = price("aten::add", [[5, 128], [128], []], ["float", "float", "Scalar"])  # broadcast bias add
    assert add.cost.flops == 5 * 128 and add.cost.hbm_bytes == 4 * (5 * 128 + 128 + 5 * 128)
    copy = price("aten::copy_", [[5, 128], [5, 128], []], [BF16, "float", "Scalar"])  # fp32 -> bf16
    assert copy.cost.flops == 0 and copy.cost.hbm_bytes == 4 * 640 + 2 * 640
    foreach = price("aten::_foreach_add_", [[[128, 128], [128]], [[128, 128], [128]], []],
                    ["TensorList", "TensorList", "Scalar"])  # fmt: skip
    assert foreach.cost.flops == 128 * 128 + 128 and foreach.cost.hbm_bytes == 3 * 4 * (128 * 128 + 128)
    summed = price("aten::sum", [[5, 128], [], [], []], ["float", "ScalarList", "Scalar", ""], ["", "[0]", "True", ""])
    assert summed.cost.flops == 640 and summed.cost.hbm_bytes == 4 * (640 + 128)
    mean = price("aten::mean", [[5, 128], [], []], ["float", "ScalarList", "Scalar"], ["", "[]", "False"])
    assert mean.cost.hbm_bytes == 4 * (640 + 1)
    unknown = price("aten::histc", [[1000]], ["float"])
    assert unknown.cost is None and unknown.what == Reason.of(ReasonCode.TORCH_NO_RULE, op="aten::histc")
    assert note_text(unknown.what) == "no cost rule for aten::histc"


def test_label_names_shapes_and_dtypes() -> None:
    op = TorchOp.from_args("aten::mm", {"Input Dims": [[4096, 4096], [4096, 4096]], "Input type": [BF16, BF16]})
    assert op.label() == "aten::mm [4096,4096]x[4096,4096] bf16"


def test_nccl_comm_bytes() -> None:
    gather = {"Collective name": "_allgather_base", "In msg nelems": 100, "Out msg nelems": 800, "dtype": "Float"}
    comm, _ = nccl_comm(gather, ("nvlink",))
    assert comm is not None and (comm.kind, comm.bytes) == ("all-gather", 4 * 800)  # the gathered size
    rs = {"Collective name": "reduce_scatter", "In msg nelems": 800, "Out msg nelems": 100, "dtype": "BFloat16"}
    assert nccl_comm(rs, ("nvlink",))[0].bytes == 2 * 800
    assert nccl_comm({"Collective name": "allreduce", "dtype": "Float"}, ("x",))[0] is None
    assert "name no collective" in note_text(nccl_comm({}, ("x",))[1])


# ------------------------------------------------------------------------------------- a real H100 trace

REAL = Path(__file__).parents[1] / "fixtures" / "h100" / "decoder_torch.json.gz"


@pytest.fixture(scope="module")
def h100_torch() -> ProfileReport:
    """tests/fixtures/h100: a 4-layer decoder train step in PyTorch 2.11 on an H100 (SDPA on cuDNN,
    fused RMSNorm, SGD's _foreach_add_), 5 steps, record_shapes=True."""
    return profile_report(REAL, H100)


def test_real_h100_trace_prices_every_kernel(h100_torch: ProfileReport) -> None:
    """Was 665 of 820: cuDNN attention forward/backward and the fused RMSNorm backward had no rule."""
    assert any("820 of 820 kernels priced" in n for n in note_texts(h100_torch.notes))
    assert all(o.lower_bound_s for o in h100_torch.ops)


def test_real_h100_cudnn_attention_is_priced_causal(h100_torch: ProfileReport) -> None:
    fwd = next(o for o in h100_torch.ops if o.name.startswith("aten::_cudnn_attention_forward"))
    bwd = next(o for o in h100_torch.ops if o.name.startswith("aten::_cudnn_attention_backward"))
    # B=4, H=16, S=2048, D=128, causal: S(S+1)/2 pairs, 2 matmuls of 2 FLOPs per pair and dim; backward 2.5x
    pairs = 2048 * 2049 / 2
    assert fwd.flops == pytest.approx(4 * 16 * pairs * 2 * 2 * 128)
    assert bwd.flops == pytest.approx(2.5 * fwd.flops)
    assert fwd.bound == "compute" and 0.3 < fwd.efficiency < 0.7  # cuDNN's flash attention: ~48% of peak


def test_real_h100_scalar_does_not_promote_a_tensor(h100_torch: ProfileReport) -> None:
    """aten::mul of an fp32 [4,2048,2048] by a Python float (a 0-dim fp64): read and written in fp32."""
    mul = next(o for o in h100_torch.ops if o.name.startswith("aten::mul [4,2048,2048]x[] fp32/fp64"))
    assert mul.bytes == pytest.approx(2 * 4 * 2048 * 2048 * 4 + 8)


def test_real_h100_faster_than_roofline_is_its_own_verdict(h100_torch: ProfileReport) -> None:
    """An op measured faster than its roofline says the figures are off, not that it is near roofline."""
    fast = [o for o in h100_torch.ops if o.efficiency and o.efficiency > 1.05]
    assert fast and all(o.verdict == "faster than roofline" for o in fast)
    assert all(o.verdict != "faster than roofline" for o in h100_torch.ops if o.efficiency <= 1.05)


def test_kineto_copies_and_fills_are_ops_priced_from_their_bytes(tmp_path: Path) -> None:
    """A device-to-device copy of B bytes reads and writes them (2 B / HBM bandwidth); a fill writes them
    (B / HBM bandwidth); a host-to-device copy crosses the host link (B / host bandwidth)."""
    b = 1 << 24

    def copy(name: str, cat: str, ts: float, corr: int) -> dict[str, Any]:
        args = {"device": 0, "stream": 7, "correlation": corr, "bytes": b, "memory bandwidth (GB/s)": 1.0}
        return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": 100.0, "args": args}

    mm = json.loads(mm_trace(tmp_path, 10.0).read_text())["traceEvents"]
    path = write(tmp_path, [*mm, copy("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 100.0, 11),
                            copy("Memset (Device)", "gpu_memset", 300.0, 12),
                            copy("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 500.0, 13)])  # fmt: skip
    ops = by_name(profile_report(path, H100))
    dtod = ops[f"Memcpy DtoD (Device -> Device) {b:,} B"]
    fill = ops[f"Memset (Device) {b:,} B"]
    htod = ops[f"Memcpy HtoD (Pageable -> Device) {b:,} B"]
    assert (dtod.opcode, dtod.bytes, dtod.flops) == ("copy", 2 * b, 0.0)
    assert dtod.lower_bound_s == pytest.approx(2 * b / H100.hbm_bytes_per_s)
    assert fill.bytes == b and fill.lower_bound_s == pytest.approx(b / H100.hbm_bytes_per_s)
    assert htod.lower_bound_s == pytest.approx(b / H100.host_bytes_per_s)
    assert MM in ops  # the kernels' ops as before


def test_kernel_without_launch_is_one_more_execution_of_the_one_op_that_launches_its_name(tmp_path: Path) -> None:
    """Kernels recorded before the trace's host activity have no launch: one whose name only aten::mm of
    one shape launches (that kernel alone) is one more execution of it; a name launched by ops of two
    shapes stays unknown."""
    events = [
        kernel("sgemm_64x64", 1.0, 3.0, 900), kernel("gemm_any", 5.0, 2.0, 901),  # before the host activity
        cpu_op("aten::mm", 10.0, 20.0, [[64, 128], [128, 256]], ["float", "float"]), launch(15.0, 7),
        kernel("sgemm_64x64", 40.0, 4.0, 7),
        cpu_op("aten::mm", 50.0, 5.0, [[8, 8], [8, 8]], ["float", "float"]), launch(51.0, 8),
        kernel("gemm_any", 60.0, 1.0, 8),
        cpu_op("aten::mm", 70.0, 5.0, [[16, 8], [8, 8]], ["float", "float"]), launch(71.0, 9),
        kernel("gemm_any", 80.0, 1.0, 9),
    ]  # fmt: skip
    report = profile_report(write(tmp_path, events), H100)
    assert any(n.startswith("1 kernels without a launch in the trace") for n in note_texts(report.notes))
    ops = by_name(report)
    mm = ops[MM]
    assert (mm.count, mm.flops) == (2, MM_FLOPS) and mm.measured_s == pytest.approx((3.0 + 4.0) / 2 * US)
    lost = ops["gemm_any"]
    assert lost.count == 1 and lost.verdict == "unknown cost" and "is not in the trace" in why_text(lost.why)


def test_kernels_without_launch_replaying_a_launched_run_take_its_ops(tmp_path: Path) -> None:
    """Eight kernels recorded before the host activity whose names, in order, are those of a launched
    stretch (mm of shape A, add, mm of shape B, add, twice): each takes its counterpart's op, although
    the GEMM kernel's name alone is launched by two shapes."""
    a, b = [[64, 128], [128, 256]], [[32, 128], [128, 256]]
    x = [[64, 256], [64, 256]]
    events: list[dict[str, Any]] = [kernel("gemm" if i % 2 == 0 else "ew", 1.0 + i, 0.5, 900 + i) for i in range(8)]
    ts, corr = 100.0, 1
    for _ in range(2):
        for op, dims, k in (("aten::mm", a, "gemm"), ("aten::add", x, "ew"), ("aten::mm", b, "gemm"),
                            ("aten::add", x, "ew")):  # fmt: skip
            events += [cpu_op(op, ts, 5.0, dims, ["float", "float"]), launch(ts + 1.0, corr),
                       kernel(k, ts + 10.0, 1.0, corr)]  # fmt: skip
            ts, corr = ts + 20.0, corr + 1
    report = profile_report(write(tmp_path, events), H100)
    counts = {o.name: o.count for o in report.ops}
    assert counts == {MM: 4, "aten::mm [32,128]x[128,256] fp32": 4, "aten::add [64,256]x[64,256] fp32": 8}
    assert report.priced_fraction() == 1.0
    assert any(n.startswith("8 kernels without a launch in the trace") for n in note_texts(report.notes))
