"""Third-party PyTorch (Kineto) traces on the roofline (../shared/data/third_party_profiles/chrome_trace,
facebookresearch/HolisticTraceAnalysis, MIT; see that folder's README.md): kernels joined with the aten ops
that launched them and priced from their Input Dims, NCCL kernels as collectives. Every expected count
below is derived by hand from the ops' recorded shapes.

- hta_minitoy_mi250_rocm: one training step of Linear(128, 128) -> ReLU -> MSE loss on a batch of 5,
  fp32, SGD (record_shapes=True); 14 kernels. The MI250 is not in the catalog: the counts are
  hardware-free, the times are on an A100 (all these tiny ops are memory-bound: bytes / 2.039 TB/s).
- hta_nccl_a100_2rank: rank 0 of a 2-rank DDP job; its NCCL all-reduce kernels carry Collective name,
  In/Out msg nelems, dtype Float and Group size 2 (no record_shapes).
- hta_alexnet_a100: no record_shapes, so no kernel can be priced.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.analysis.compare import OpReport, ProfileReport
from rooftop.analysis.profile import profile_report
from rooftop.hardware.catalog import get_chip
from rooftop.report.reasons import note_texts, why_text
from tests.conftest import run_cli

A100 = get_chip("a100")
US = 1e-6
MINITOY = "chrome_trace/hta_minitoy_mi250_rocm.json.gz"
NCCL = "chrome_trace/hta_nccl_a100_2rank.json.gz"
ALEXNET = "chrome_trace/hta_alexnet_a100.json.gz"


def _ops(report: ProfileReport) -> dict[str, OpReport]:
    return {o.name: o for o in report.ops}


@pytest.fixture
def minitoy(third_party: Path) -> ProfileReport:
    return profile_report(third_party / MINITOY, A100)


#: name -> (FLOPs, bytes, measured seconds per execution) of one execution, from the trace's Input Dims.
MINITOY_OPS = {
    # nn.Linear forward: bias [128] + x [5,128] @ W^T [128,128]; a bias-copy kernel and the GEMM kernel
    "aten::addmm [128]x[5,128]x[128,128] fp32": (
        2 * 5 * 128 * 128 + 5 * 128, 4 * (5 * 128 + 128 * 128 + 5 * 128) + 4 * 128, (6.88 + 17.6) * US),
    # weight gradient in AddmmBackward0: grad^T [128,5] @ x [5,128]
    "aten::mm [128,5]x[5,128] fp32": (2 * 128 * 5 * 128, 4 * (128 * 5 + 5 * 128 + 128 * 128), 12.64 * US),
    # bias gradient: sum over the batch dim of [5,128]
    "aten::sum [5,128] fp32": (5 * 128, 4 * (5 * 128 + 128), 13.6 * US),
    # (x - y)^2 of two [5,128]
    "aten::mse_loss [5,128]x[5,128] fp32": (2 * 5 * 128, 4 * 3 * 5 * 128, 8.32 * US),
    # SGD step: p += -lr * g over [128,128] and [128]
    "aten::_foreach_add_ [2 tensors]x[2 tensors]": (128 * 128 + 128, 3 * 4 * (128 * 128 + 128), 8.481 * US),
    # AccumulateGrad of the weight
    "aten::add_ [128,128]x[128,128] fp32": (128 * 128, 3 * 4 * 128 * 128, 4.16 * US),
}  # fmt: skip


@pytest.mark.parametrize("name", list(MINITOY_OPS))
def test_minitoy_ops_priced_from_input_dims(minitoy: ProfileReport, name: str) -> None:
    flops, nbytes, measured_s = MINITOY_OPS[name]
    op = _ops(minitoy)[name]
    assert (op.flops, op.bytes, op.count) == (flops, nbytes, 1)
    assert op.measured_s == pytest.approx(measured_s)
    assert op.lower_bound_s == pytest.approx(nbytes / 2.039e12)  # memory-bound on the A100
    assert (op.bound, op.verdict) == ("memory", "memory-slow")


def test_minitoy_every_kernel_has_its_op(minitoy: ProfileReport) -> None:
    assert note_texts(minitoy.notes)[0].startswith("coverage: 100.0% of the op time priced")
    assert any(n.startswith("PyTorch trace: 14 of 14 kernels priced") for n in note_texts(minitoy.notes))
    assert sum(o.count for o in minitoy.ops) == 13 + 2  # 14 kernels (addmm's two are one execution), 2 copies
    # ROCm records its two host-to-device copies without a size: each is the [5, 128] fp32 tensor of the
    # aten op that launched it, 5 x 128 x 4 bytes over the host link
    copy = _ops(minitoy)["Memcpy HtoD (Host -> Device) 2,560 B"]
    assert (copy.opcode, copy.count, copy.bytes) == ("copy", 2, 5 * 128 * 4)
    assert all(o.verdict != "unknown cost" for o in minitoy.ops)
    assert _ops(minitoy)["aten::mse_loss [5,128]x[5,128] fp32"].category == "loss"


def test_nccl_allreduce_kernels_are_all_reduce_comms(third_party: Path) -> None:
    """Each all-reduce of n fp32 elements over the 2 ranks is a Comm of 4 n bytes; on 2 A100s on NVLink:
    2 (2-1)/2 x 4 n / (12 links x 25 GB/s)."""
    report = profile_report(third_party / NCCL, A100)
    allreduce = {o.name: o for o in report.ops if o.opcode == "all-reduce"}
    nelems = (6_637_568, 2_431_040, 2_049_000, 7_875_584, 6_563_840)
    assert set(allreduce) == {f"nccl allreduce {n} x Float (group of 2)" for n in nelems}
    for n in nelems:
        op = allreduce[f"nccl allreduce {n} x Float (group of 2)"]
        assert (op.count, op.bytes, op.mesh_axes, op.category) == (3, 4 * n, ("nvlink",), "communication")
        assert op.lower_bound_s == pytest.approx(2 * (2 - 1) / 2 * 4 * n / (12 * 25e9))
        assert op.efficiency == pytest.approx(op.lower_bound_s / op.measured_s)
        assert op.verdict in ("exposed communication", "slow hidden communication", "near roofline")
    broadcasts = [o for o in report.ops if o.opcode == "broadcast"]
    assert {o.name for o in broadcasts} == {"nccl broadcast 53120 x Float (group of 2)",
                                            "nccl broadcast 53 x Long (group of 2)"}  # fmt: skip
    assert {why_text(o.why) for o in broadcasts} == {"no collective rule for NCCL broadcast"}
    assert any(
        n.startswith("PyTorch trace: 15 of 2700 kernels priced") for n in note_texts(report.notes)
    )  # 5 x 3 steps
    assert "recorded on 'NVIDIA A100-PG509-200', which no catalog chip matches; priced on a100 as asked" in note_texts(
        report.notes
    )
    assert all(s.comm_s > 0 for s in report.steps)  # NCCL kernels count as communication in the steps


def test_alexnet_without_record_shapes_stays_unknown(third_party: Path) -> None:
    report = profile_report(third_party / ALEXNET, A100)
    kernels = [o for o in report.ops if o.opcode != "copy"]
    assert sum(o.count for o in kernels) == 79
    assert {o.verdict for o in kernels} == {"unknown cost"}
    assert all("record_shapes=True" in why_text(o.why) for o in kernels)
    # its copies and fills carry their bytes: priced without shapes (the 150,994,944-byte weights over the
    # A100's host link, PCIe 4.0 x16 at 32 GB/s)
    (weights,) = (o for o in report.ops if o.name == "Memcpy HtoD (Pageable -> Device) 150,994,944 B")
    assert weights.lower_bound_s == pytest.approx(150_994_944 / A100.host_bytes_per_s)
    assert any(n.startswith("no cpu_op carries Input Dims") for n in note_texts(report.notes))


def test_cli_profile_of_a_kineto_trace(third_party: Path) -> None:
    code, out, _ = run_cli("profile", str(third_party / MINITOY), "--chip", "a100", "--json")
    assert code == 0
    ops = {o["name"]: o for o in json.loads(out)["ops"]}
    assert ops["aten::mm [128,5]x[5,128] fp32"]["flops"] == 2 * 128 * 5 * 128
