"""A real H200 profile of a serving decode step (tests/fixtures/h200, made by
benchmarks/serving_decode_check.py): Llama-3-8B shapes, batch 64, a 2,048-position cache, 5 steps.

Its kernels ran on a stream the profiler names ``Stream #14(Compute,MemcpyD2D)``: a stream that also ran
copies. rooftop used to take any line with ``Memcpy`` in its name for a copy line and dropped every
kernel on it (the report had no op); and the gate and up projections, identical fusions back to back,
run one compiled kernel twice, which the CUDA-graph alignment read as a second kernel of the gate
(0 of 5 replays lined up)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from rooftop.analysis.trace.classify import line_role
from rooftop.report.reasons import note_texts

H200 = Path(__file__).parents[1] / "fixtures" / "h200"


def test_a_stream_that_also_copies_is_a_kernel_stream() -> None:
    assert line_role("/device:GPU:0", "Stream #14(Compute,MemcpyD2D)") == "stream"
    assert line_role("/device:GPU:0", "Stream #14(MemcpyD2D,Compute)") == "stream"
    assert line_role("/device:GPU:0", "Stream #15(MemcpyH2D)") == "stream"  # its events say memcpy themselves
    assert line_role("/device:GPU:0", "Memcpy") == "memcpy"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("jax")
    from rooftop.analysis.profile import profile_report
    from rooftop.hardware.catalog import get_chip

    tmp = tmp_path_factory.mktemp("h200")
    xplane = tmp / "decode.xplane.pb"
    xplane.write_bytes(gzip.decompress((H200 / "decode.xplane.pb.gz").read_bytes()))
    return profile_report(xplane, get_chip("h200")), xplane


@pytest.mark.jax
def test_every_kernel_of_the_decode_step_is_read_and_lined_up(report) -> None:
    from jax.profiler import ProfileData

    rep, xplane = report
    # the kernels of jit_step, read straight from the file: 2,595 (519 a step), 50.36 ms in all
    data = ProfileData.from_file(str(xplane))
    kernels = [e.duration_ns * 1e-9 for plane in data.planes if plane.name == "/device:GPU:0" for line in plane.lines
               for e in line.events if dict(e.stats).get("hlo_module") == "jit_step"
               and "memcpy_details" not in dict(e.stats)]  # fmt: skip
    assert len(kernels) == 2595
    ops = [o for o in rep.ops if o.opcode != "copy"]  # the runtime's memory copies are ops of their own
    assert sum(o.total_s for o in ops) == pytest.approx(sum(kernels), rel=1e-9)
    assert all(o.lower_bound_s is not None for o in rep.ops if o.opcode == "copy")
    assert any(
        "2595 kernels ran inside a CUDA graph" in n and "5 of 5 replays were lined up" in n
        for n in note_texts(rep.notes)
    )
    assert all(o.count % 5 == 0 and o.lower_bound_s for o in ops)  # every op priced, every step


@pytest.mark.jax
def test_the_attention_scores_read_one_layers_cache(report) -> None:
    """``einsum("bkgd,bksd->bkgs")``: q [64, 8, 4, 128] against one layer's K cache [64, 8, 2048, 128] in
    bf16, scores [64, 8, 4, 2048] out in bf16: memory-bound on h200's 4.8 TB/s."""
    rep, _ = report
    scores = next(o for o in rep.ops if o.name == "gemm_fusion_dot.32")
    nbytes = 64 * 8 * 2048 * 128 * 2 + 64 * 32 * 128 * 2 + 64 * 32 * 2048 * 2  # 277.3 MB
    assert scores.count == 5 and scores.bound == "memory"  # layer 1 of 32 (the layers are unrolled), 5 steps
    assert scores.lower_bound_s == pytest.approx(nbytes / 4.8e12, rel=1e-3)  # 57.8 us
    assert 0.75 < scores.efficiency < 0.95  # 68 us measured: the cache streams at ~85% of peak
