"""Third-party HLO dumps (../shared/data/third_party_profiles/hlo, sources and licences in its README.md)
counted by rooftop against the values the README lists.

- AMD-AGI/TraceLens (MIT): the 3-D convolution ``cudnn-conv.1`` does 32,715,571,200 FLOPs per device per
  execution (XLA HloCostAnalysis on the equivalent ``convolution``); the TE ``gemm_fusion_dot`` does
  103,079,215,104 FLOPs.
- sail-sg/hloenv (Apache-2.0): XLA's whole-module FLOPs, 824,755,486,720 (EfficientNet, 73 convolutions
  incl. depthwise and padded strided ones) and 1,362,948 (MAML train step). XLA sums per-instruction
  counts stored as 32-bit floats, so its EfficientNet total is rounded (9,676,848,000 FLOPs of one
  convolution are kept as 9,676,848,128); rooftop's exact sum is within 1e-6 of it.
- openxla/xla (Apache-2.0): three all-gathers over all 8 devices and an unknown custom-call.
- openxla/xprof (Apache-2.0): TPU v6e instruction strings with tiled layouts and memory spaces.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.analysis.hlo.analyze import analyze
from rooftop.analysis.hlo.count import count_module
from rooftop.analysis.hlo.mesh import infer_mesh, match_groups
from rooftop.analysis.hlo.parse import parse_hlo_file, parse_instruction
from rooftop.hardware.catalog import get_chip
from rooftop.report.reasons import note_texts
from tests.conftest import run_cli

CONV_FLOPS = 32_715_571_200
GEMM_FLOPS = 103_079_215_104


def flops_of(third_party: Path, name: str) -> dict[str, float]:
    counts = count_module(parse_hlo_file(third_party / "hlo" / name))
    return {op.name: op.cost.flops * op.executions for op in counts.ops}


def test_conv3d_cudnn_forward(third_party: Path) -> None:
    flops = flops_of(third_party, "derived_tracelens_conv3d.jit_forward_3d_conv.after_optimizations.hlo.txt")
    assert flops["cudnn-conv.1"] == CONV_FLOPS
    # bf012 input [1,16,32,60,104], kernel [5120,16,1,2,2], stride 1x2x2, pad 1 each side: the padded
    # output positions read no input, so the valid taps per dim are 32, 60 and 104 (not 34, 62, 106).
    assert CONV_FLOPS == 2 * 1 * 5120 * 16 * 32 * 60 * 104


def test_transformer_engine_module(third_party: Path) -> None:
    name = "derived_tracelens_te_fused_attn.jit_loss_fn.after_optimizations.hlo.txt"
    flops = flops_of(third_party, name)
    assert flops["gemm_fusion_dot"] == GEMM_FLOPS == 2 * 2 * 4096 * 6144 * 1024
    assert flops["custom-call.1"] == 2 * 4096 * 2048 * 6144  # __cublas$gemm from its backend_config
    causal_pairs = 2048 * 2049 // 2  # mask_type = 2 (NVTE causal)
    assert flops["te_fused_attn_forward_ffi.10"] == 2 * 2 * 16 * causal_pairs * (128 + 128)
    assert flops["te_fused_attn_backward_ffi.12"] == 2.5 * 2 * 2 * 16 * causal_pairs * (128 + 128)
    counts = count_module(parse_hlo_file(third_party / "hlo" / name))
    assert not any(op.cost.unknown for op in counts.ops)
    # the cuBLAS scratch workspace (s8[67108864]) is not traffic
    gemm = next(op for op in counts.ops if op.name == "custom-call.1")
    assert gemm.cost.traffic.logical_bytes == (4096 * 6144 + 2048 * 6144 + 4096 * 2048) * 2


@pytest.mark.parametrize(
    ("name", "xla_flops", "rel"),
    [
        ("hloenv_efficientnet_jit_lambda.before_optimizations.hlo.txt", 824_755_486_720, 1e-6),
        ("hloenv_maml_flax_jit_train_step.before_optimizations.hlo.txt", 1_362_948, 0.0),
    ],
)
def test_hloenv_modules_match_xla(third_party: Path, name: str, xla_flops: int, rel: float) -> None:
    assert sum(flops_of(third_party, name).values()) == pytest.approx(xla_flops, rel=rel, abs=0)


def test_collective_cse_module(third_party: Path) -> None:
    path = third_party / "hlo" / "openxla_xla_gpu_hlo_collective_cse.hlo"
    analysis = analyze(parse_hlo_file(path), get_chip("h100"))
    assert analysis.mesh.num_devices == 8  # from the groups: the header has no num_partitions
    gathers = [t for t in analysis.ops if t.op.opcode == "all-gather"]
    assert len(gathers) == 3
    assert all(t.op.cost.collectives[0].bytes == 32 * 4 for t in gathers)  # s32[32] gathered
    assert all(m.group_size == 8 and m.regular for t in gathers for m in t.matches)
    assert analysis.totals()["flops_unknown_instructions"] == 1
    assert any("custom-call my_custom_call1" in n for n in note_texts(analysis.notes))


def test_xprof_tpu_instructions(third_party: Path) -> None:
    lines = (third_party / "hlo" / "xprof_tpu_inference_2.extracted_instructions.hlo.txt").read_text().splitlines()
    instrs = {i.name: i for i in (parse_instruction(line) for line in lines if line.strip())}
    groups = instrs["all-reduce"].replica_groups
    assert groups == [[0, 4], [1, 5], [2, 6], [3, 7]]  # [4,2]<=[2,4]T(1,0)
    mesh = infer_mesh([groups], 8)
    assert mesh.sizes == (2, 4)
    match = match_groups(groups, mesh)
    assert (match.axes, match.strides) == ((mesh.names[0],), (4,))
    dest, source, context = instrs["copy-start.1"].shape.tuple_shapes or ()
    assert (dest.layout.memory_space, source.layout.memory_space, context.layout.memory_space) == (5, 0, 2)
    assert dest.padded_bytes == dest.logical_bytes == 5 * 1024 * 1024 * 256 * 4  # (8,128) tiles divide
    scalar = instrs["broadcast.2"].operand_shapes[0]
    assert scalar is not None and (scalar.logical_bytes, scalar.padded_bytes) == (4, 128 * 4)


@pytest.mark.parametrize(
    "name",
    [
        "derived_tracelens_te_fused_attn.jit_loss_fn.after_optimizations.hlo.txt",
        "derived_tracelens_conv3d.jit_forward_3d_conv.after_optimizations.hlo.txt",
        "hloenv_maml_flax_jit_train_step.before_optimizations.hlo.txt",
    ],
)
def test_cli_reads_every_dump(third_party: Path, name: str) -> None:
    code, out, err = run_cli("hlo", str(third_party / "hlo" / name), "--chip", "h100", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["totals"]["flops"] == pytest.approx(sum(flops_of(third_party, name).values()))
    assert data["instructions"] and all(r["lower_bound_s"] >= 0 for r in data["instructions"])
