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
from rooftop.analysis.trace.ops import group_ops
from rooftop.analysis.trace.steps import detect_steps
from rooftop.analysis.trace.xplane import hlo_text
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason
from rooftop.report.reasons import collective_text, note_texts, why_text


def _same_program(ours: str | None, derived: str) -> bool:
    """The same instructions (name, opcode, shape) in every computation. Our text also prints
    metadata (op_name, source) that the derived file, printed without it, lacks."""
    assert ours is not None
    a, b = parse_hlo(ours), parse_hlo(derived)

    def listing(m):
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
    assert len(kernels) == 79  # 40 GEMM + 39 Im3d2Col: one Im3d2Col (GPU:0) carries no hlo_op at all
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


# ------------------------------------------------------------------------------------- TPU v6e (xprof)

V6E_FUSION_FLOPS = 5 * 1024 * 1024 * 256  # one add per element of f32[5,1024,1024,256]
V6E_ARRAY = 4 * V6E_FUSION_FLOPS  # 5,368,709,120 bytes


@pytest.fixture(scope="module")
def v6e():
    from tests.conftest import THIRD_PARTY as third_party

    if not third_party.is_dir():
        pytest.skip("../shared/data/third_party_profiles is not present")
    pytest.importorskip("jax")
    from rooftop.analysis.profile import profile_report
    from rooftop.hardware.catalog import get_chip

    return profile_report(third_party / "xplane/xprof_tpu_v6e_inference_2.xplane.pb", get_chip("tpu-v6e"))


def test_v6e_every_op_has_a_cost_under_its_instruction_name(v6e) -> None:
    """Was: the XLA Ops events are named by their HLO text, taken as the instruction: 0 of 17 priced."""
    assert len(v6e.ops) == 17
    assert all(o.verdict != "unknown cost" and o.lower_bound_s is not None for o in v6e.ops)
    assert all(not o.name.startswith("%") for o in v6e.ops)


def test_v6e_fusion_matches_xprof_on_the_device_clock(v6e) -> None:
    (fusion,) = (o for o in v6e.ops if o.name == "broadcast_add_fusion.1")
    assert fusion.count == 400
    assert fusion.measured_s == pytest.approx(8155e-6, rel=0.02)  # xprof hlo_stats: 8,155 us (device_duration_ps)
    assert fusion.flops == V6E_FUSION_FLOPS  # 1.342 GFLOP
    assert fusion.bytes == 2 * V6E_ARRAY  # 10.74 GB: one array read, one written
    assert fusion.bound == "memory" and fusion.lower_bound_s == pytest.approx(2 * V6E_ARRAY / 1.638e12, rel=1e-3)


def test_v6e_host_offload_copies_are_priced_once_on_the_host_link(v6e) -> None:
    """Was: copy-start and copy-done each priced as HBM traffic. Now the pair is one transfer of one side's
    bytes over the host link (tpu-v6e: 32 GB/s), priced on the done; the start is bookkeeping."""
    dones = [o for o in v6e.ops if o.name.startswith("copy-done")]
    starts = [o for o in v6e.ops if o.name.startswith("copy-start")]
    assert len(dones) == len(starts) == 6
    assert all(o.bytes == V6E_ARRAY and o.lower_bound_s == pytest.approx(V6E_ARRAY / 32e9) for o in dones)
    assert all(o.verdict == "no modelled cost" and "priced on copy-done" in why_text(o.why) for o in starts)
    (done4,) = (o for o in dones if o.name == "copy-done.4")
    assert done4.measured_s == pytest.approx(194_433e-6, rel=0.02)  # xprof: 194,433 us, ~28 GB/s
    assert done4.verdict == "near roofline"
    waited = [o for o in dones if o.measured_s < 1e-6]  # transfers that ran behind other ops
    assert waited and all(o.verdict == "overlapped transfer" for o in waited)


def test_v6e_psum_groups_come_from_the_event_text(v6e) -> None:
    """Was: the re-printed HloProto has replica_groups={}, and rooftop said nothing moves."""
    (psum,) = (o for o in v6e.ops if o.name == "all-reduce")
    assert psum.count == 12 and psum.mesh_axes == ("axis_0",)
    # [4,2]<=[2,4]T(1,0): 8 devices
    assert collective_text(psum.collective) == "all-reduce over axis_0 (groups of 2, stride 4)"
    assert any("read from the profile's event text ([4,2]<=[2,4]T(1,0))" in n for n in note_texts(v6e.notes))


def test_v6e_memory_peak_with_and_without_the_stack(v6e) -> None:
    assert v6e.memory["peak_bytes_per_device"]["/device:TPU:0"] == 16_106_341_504  # xprof peakBytesUsageLifetime
    assert v6e.memory["peak_bytes_with_reserved_per_device"]["/device:TPU:0"] == 21_492_569_216  # peakBytesInUse


def test_jax08_gemm_one_module_name_five_programs(third_party: Path) -> None:
    """Was: the five programs of ``jit_dot`` (one per shape, each its own HLO) merged into one op with no
    HLO, and the three back-to-back runs of one kernel counted as one. xprof's per-program means."""
    pytest.importorskip("jax")
    from rooftop.analysis.profile import profile_report
    from rooftop.hardware.catalog import get_chip

    report = profile_report(third_party / "xplane/tracelens_jax08_gemm_mi300x.xplane.pb", get_chip("h100"))
    dots = {o.module: o for o in report.ops if o.name == "custom-call.1"}
    assert set(dots) == {f"jit_dot({p})" for p in (21, 34, 49, 64, 79)}
    assert all(o.count == 3 and o.lower_bound_s for o in dots.values())
    expected = {21: 10.45e-6, 34: 149.8e-6, 49: 611.0e-6, 64: 117.4e-6, 79: 184.3e-6}
    for program, mean in expected.items():
        assert dots[f"jit_dot({program})"].measured_s == pytest.approx(mean, rel=0.02)
    assert len({o.flops for o in dots.values()}) == 4  # each program priced from its own HLO (two shapes tie)


# ------------------------------------------------------------------------------------- LLM serving traces


def test_sglang_qwen3_prefill_is_priced_by_its_custom_ops(third_party: Path) -> None:
    """SGLang's Qwen3-8B step: aten GEMMs plus the engine's own ops (AITER attention and norms, sgl_kernel
    SwiGLU and rotary, the KV cache store), each priced from its Input Dims. Was 86% of kernel time."""
    from rooftop.analysis.profile import profile_report
    from rooftop.hardware.catalog import get_chip

    trace = "chrome_trace/tracelens_sglang_qwen3_8b_prefilldecode_mi300x.json.gz"
    report = profile_report(third_party / trace, get_chip("h100"))
    assert report.priced_fraction() >= 0.9
    (prefill,) = (o for o in report.ops if o.name.startswith("aiter::mha_batch_prefill"))
    # 15 sequences (qo_indptr of 16) of 1024 queries over 15616 / 15 = 1041 keys each, causal, 32 heads, D 128
    pairs = 1041 * 1042 / 2 - 17 * 18 / 2  # S(1041) - S(17): 1024 causal queries at the end of 1041 keys
    assert prefill.flops == pytest.approx(2 * 15 * 32 * pairs * (128 + 128))
    assert prefill.bound == "compute"


def test_vllm_graph_replay_says_why_it_is_unpriced(third_party: Path) -> None:
    from rooftop.analysis.profile import profile_report
    from rooftop.hardware.catalog import get_chip

    report = profile_report(third_party / "chrome_trace/tracelens_vllm_decode_full_mi300x.json.gz", get_chip("h100"))
    assert report.priced_fraction() < 0.1
    assert Reason.of(ReasonCode.GRAPH_REPLAY_NO_CAPTURE, left=421, unexplained=421) in report.notes
    unknown = [o for o in report.ops if o.verdict == "unknown cost"]
    graph = [o for o in unknown if "no cost rule" not in why_text(o.why)]  # aten::index, run eagerly, has no rule
    assert sum(o.count for o in graph) == 421 and all(
        "replayed from a CUDA/HIP graph" in why_text(o.why) for o in graph
    )


def test_te_backward_runs_are_launches_not_name_repeats(third_party: Path) -> None:
    """TE's fused-attention backward launches two identical memset kernels then three ck_tile kernels per
    run: one run is what one host thunk span of the instruction launched (5 runs of ~466 us), not a new run
    at each repeated kernel name (10 of ~233 us, FLOPs counted twice)."""
    pytest.importorskip("jax")
    trace = _load(third_party, "xplane/tracelens_jax_te_fused_attn_gfx950.xplane.pb")
    backward = [g for g in group_ops(trace) if (g.instruction or "").startswith("te_fused_attn_backward_ffi")]
    assert sorted(g.count for g in backward) == [5, 5]
    assert all(g.mean_s == pytest.approx(466e-6, rel=0.01) for g in backward)
