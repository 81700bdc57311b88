"""Third-party profiles (../shared/data/third_party_profiles, see its README.md for sources and licences):
the values the README lists, read back through rooftop's loaders.

- AMD-AGI/TraceLens (MIT) JAX XPlanes on MI300X (gfx942) and gfx950;
- facebookresearch/HolisticTraceAnalysis (MIT) PyTorch Kineto traces on A100 and MI250 (ROCm 6.2).

Known values (README "Known expected values"): the 3-D convolution ``cudnn-conv.1`` does
32,715,571,200 FLOPs per device per execution; xprof 2.24.2 reports 206,241 GFLOP/s because it counts
kernels as occurrences, per execution it is 104,426 GFLOP/s. The TE ``gemm_fusion_dot`` does
103,079,215,104 FLOPs with a 171.47 us mean (xprof: 601,166 GFLOP/s).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rooftop.analysis.hlo.parse import parse_hlo
from rooftop.analysis.trace.events import Trace
from rooftop.analysis.trace.load import load_trace
from rooftop.analysis.trace.ops import detect_steps, group_ops
from rooftop.analysis.trace.xplane import hlo_text


def _same_program(ours: str | None, derived: str) -> bool:
    """The same instructions (name, opcode, shape) in every computation. Our text also prints
    metadata (op_name, source) that the derived file, printed without it, lacks."""
    assert ours is not None
    a, b = parse_hlo(ours), parse_hlo(derived)

    def listing(m):  # type: ignore[no-untyped-def]
        return {c: [(i.name, i.opcode, str(i.shape)) for i in comp.instructions] for c, comp in m.computations.items()}

    return a.name == b.name and listing(a) == listing(b)


GPUS = tuple(f"/device:GPU:{i}" for i in range(8))
CONV_FLOPS = 32_715_571_200
GEMM_FLOPS = 103_079_215_104


def _load(third_party: Path, name: str) -> Trace:
    return load_trace(third_party / name)


@pytest.fixture
def conv3d(third_party: Path) -> Trace:
    pytest.importorskip("jax")
    return _load(third_party, "xplane/tracelens_jax_conv3d_mi300x_8gpu.xplane.pb")


def test_conv3d_mi300x_executions_and_rates(conv3d: Trace) -> None:
    assert conv3d.devices == GPUS
    assert conv3d.metadata["hostnames"] == ["tw003"]
    assert conv3d.metadata["device_properties"]["/device:GPU:0"]["core_count"] == "304"
    kernels = [e for e in conv3d.of_kind("kernel") if e.instruction == "cudnn-conv.1"]
    assert len(kernels) == 79  # 40 GEMM + 39 Im3d2Col: one Im3d2Col falls outside the trace window
    assert all(e.module == "jit_forward_3d_conv" and e.args["program_id"] == "15" for e in kernels)
    (conv,) = (g for g in group_ops(conv3d) if g.instruction == "cudnn-conv.1")
    assert (conv.count, conv.events) == (40, 79)  # 8 GPUs x 5 executions
    assert dict(conv.per_device_count) == dict.fromkeys(GPUS, 5)
    assert [k.split("_")[0] for k in conv.kernel_names] == ["Cijk", "Im3d2Col.kd"]
    assert CONV_FLOPS / conv.mean_s / 1e9 == pytest.approx(104_426, rel=2e-5)
    assert CONV_FLOPS / (conv.total_s / conv.events) / 1e9 == pytest.approx(206_241, rel=2e-5)  # xprof's figure
    assert [s.index for s in detect_steps(conv3d)] == list(range(5))  # no markers: the module's 5 executions


def test_conv3d_hlo_modules(conv3d: Trace, third_party: Path) -> None:
    assert len(conv3d.hlo_protos) == 8
    assert "jit_forward_3d_conv(15)" in conv3d.hlo_protos
    derived = third_party / "hlo" / "derived_tracelens_conv3d.jit_forward_3d_conv.after_optimizations.hlo.txt"
    assert _same_program(hlo_text(conv3d, "jit_forward_3d_conv"), derived.read_text())


def test_conv3d_legacy_layout(third_party: Path) -> None:
    pytest.importorskip("jax")
    trace = _load(third_party, "xplane/tracelens_jax_conv3d_mi300x_legacy.xplane.pb")
    kernels = trace.of_kind("kernel")
    assert {e.device for e in kernels} == {"/device:GPU:7"}
    assert not any(e.name.endswith(".kd") for e in kernels)
    conv = [e for e in kernels if e.module == "jit_forward_3d_conv" and e.instruction == "cudnn-conv.1.0"]
    assert len(conv) == 10 and sorted(n.split("_")[0] for n in {e.name for e in conv}) == ["Cijk", "Im3d2Col"]
    memcpy_lines = {e.line for e in trace.of_kind("memcpy")}
    assert memcpy_lines and all(line.startswith("Stream #") and line.endswith("(MemcpyOther)") for line in memcpy_lines)
    assert len(trace.hlo_protos) == 8


def test_te_fused_attention_gfx950(third_party: Path) -> None:
    pytest.importorskip("jax")
    trace = _load(third_party, "xplane/tracelens_jax_te_fused_attn_gfx950.xplane.pb")
    assert trace.devices == GPUS  # 8 GPU planes, only GPU:0 has events
    kernels = trace.of_kind("kernel")
    assert len(kernels) == 150 and {(e.device, e.line) for e in kernels} == {("/device:GPU:0", "Stream #2")}
    for stat in ("hlo_module", "hlo_op", "program_id", "correlation_id", "kernel_details"):
        assert all(stat in e.args for e in kernels), stat
    assert len(trace.hlo_protos) == 9
    (gemm,) = (g for g in group_ops(trace) if g.instruction == "gemm_fusion_dot")
    assert gemm.mean_s == pytest.approx(171.47e-6, abs=0.005e-6)
    assert GEMM_FLOPS / gemm.mean_s / 1e9 == pytest.approx(601_166, rel=5e-5)
    assert len(detect_steps(trace)) == gemm.count == 5
    derived = third_party / "hlo" / "derived_tracelens_te_fused_attn.jit_loss_fn.after_optimizations.hlo.txt"
    assert _same_program(hlo_text(trace, "jit_loss_fn", program_id=17), derived.read_text())


def test_kineto_nccl_two_ranks(third_party: Path) -> None:
    trace = _load(third_party, "chrome_trace/hta_nccl_a100_2rank.json.gz")
    assert trace.format == "kineto"
    info = trace.metadata["distributedInfo"]
    assert (info["rank"], info["world_size"], info["nccl_version"]) == (0, 2, "2.17.1")
    assert trace.metadata["deviceProperties"][0]["name"] == "NVIDIA A100-PG509-200"
    assert trace.metadata["trace_event_count"] == 40_573
    kernels = trace.of_kind("kernel")
    assert len(kernels) == 2_700
    allreduce = [e for e in kernels if e.name.startswith("ncclKernel_AllReduce_RING_LL_Sum_float")]
    assert allreduce
    for e in allreduce:
        assert (e.args["Collective name"], e.args["Group size"], e.args["dtype"]) == ("allreduce", "2", "Float")
        assert e.args["In msg nelems"] == e.args["Out msg nelems"] and e.args["Process Group Ranks"] == "[0, 1]"
    assert [s.index for s in detect_steps(trace)] == [4, 5, 6]  # ProfilerStep#4..6


def test_kineto_alexnet_and_rocm_minitoy(third_party: Path) -> None:
    alexnet = _load(third_party, "chrome_trace/hta_alexnet_a100.json.gz")
    assert alexnet.metadata["trace_event_count"] == 1_408
    assert len(alexnet.of_kind("kernel")) == 79
    assert "record_shapes" not in alexnet.metadata
    toy = _load(third_party, "chrome_trace/hta_minitoy_mi250_rocm.json.gz")
    assert toy.metadata["trace_event_count"] == 220
    assert toy.metadata["deviceProperties"][0]["name"] == "AMD Radeon Graphics"
    assert len(toy.of_kind("kernel")) == 14
    cats = Counter(e.args.get("cat") for e in toy.events if "Input Dims" in e.args)
    assert cats["cpu_op"] == 64
