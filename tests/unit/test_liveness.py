"""Memory at the peak: buffers live at a scheduled module's peak (analysis/hlo/liveness.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rooftop.analysis.hlo.liveness import memory_peak
from rooftop.analysis.hlo.parse import parse_hlo
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason
from tests.conftest import run_cli

HLO = "\n".join(
    [
        "HloModule m, is_scheduled=true",
        "",
        "ENTRY %main (p: f32[256], mu: f32[8], x: f32[2]) -> (f32[1024], f32[256]) {",
        "  %p = f32[256]{0} parameter(0), metadata={op_name=\"params['w']\"}",
        "  %mu = f32[8]{0} parameter(1), metadata={op_name=\"opt_state.mu['w']\"}",
        '  %x = f32[2]{0} parameter(2), metadata={op_name="batch"}',
        "  %big = f32[4,256]{1,0} broadcast(f32[256]{0} %p), dimensions={1}",
        '  %s = f32[4,256]{1,0} exponential(f32[4,256]{1,0} %big), metadata={op_name="jit(f)/exp"'
        ' source_file="model.py" source_line=7}',
        "  %t = f32[4,256]{1,0} add(f32[4,256]{1,0} %s, f32[4,256]{1,0} %big)",
        "  %bt = f32[1024]{0} bitcast(f32[4,256]{1,0} %t)",
        "  %o = f32[1024]{0} negate(f32[1024]{0} %bt)",
        "  ROOT %r = (f32[1024]{0}, f32[256]{0}) tuple(f32[1024]{0} %o, f32[256]{0} %p)",
        "}",
        "",
    ]
)


def test_peak_by_hand() -> None:
    peak = memory_peak(parse_hlo(HLO))
    params = 256 * 4 + 8 * 4 + 2 * 4  # live over the whole program
    # schedule: p mu x | big | s | t (big and s last used here) | bt (alias of t) | o (t's last use) | tuple
    live = [params, params, params, params + 4096, params + 2 * 4096, params + 3 * 4096, params + 4096,
            params + 2 * 4096, params + 4096]  # fmt: skip
    assert peak.peak_bytes == max(live) == params + 3 * 4096
    assert peak.peak_position == 5 and peak.peak_instruction == "t"
    kinds = {b.name: b.kind for b in peak.buffers}
    assert kinds == {"big": "temporaries", "s": "temporaries", "t": "temporaries", "p": "weights",
                     "mu": "optimizer", "x": "inputs"}  # fmt: skip
    assert peak.by_kind == {"weights": 1024.0, "optimizer": 32.0, "inputs": 8.0, "temporaries": 3 * 4096.0}
    (s,) = (b for b in peak.buffers if b.name == "s")
    assert (s.shape, s.source, s.op_name, s.start, s.end) == ("f32[4,256]{1,0}", "model.py:7", "jit(f)/exp", 4, 5)
    assert [b.bytes for b in peak.buffers] == sorted((b.bytes for b in peak.buffers), reverse=True)
    assert peak.scheduled and repr(peak).startswith("<MemoryPeak: m: peak 13")


def test_unscheduled_module_is_noted() -> None:
    peak = memory_peak(parse_hlo(HLO.replace(", is_scheduled=true", "")))
    assert not peak.scheduled and peak.notes[0] == Reason.of(ReasonCode.MEMORY_NOT_SCHEDULED)


def _jax8() -> Any:
    """JAX with 8 devices (the conftest's XLA flags on the CPU), else the test is skipped."""
    jax = pytest.importorskip("jax")
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 devices")
    return jax


def test_worked_example_matches_xla_memory_analysis(tmp_path: Path) -> None:
    _jax8()
    from tests.conftest import worked_example

    step, args = worked_example("naive")
    compiled = step.lower(*args).compile()
    stats = compiled.memory_analysis()
    text = compiled.as_text()
    peak = memory_peak(parse_hlo(text))
    xla = (stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes
           - stats.alias_size_in_bytes)  # fmt: skip
    assert peak.peak_bytes == pytest.approx(xla, rel=0.05)
    # the parameters are the arguments XLA counts, to the byte: 4 weights of 128 x 1024 f32, the batch x and y
    assert peak.by_kind["weights"] + peak.by_kind["inputs"] == stats.argument_size_in_bytes
    assert peak.by_kind["weights"] == 4 * 128 * 1024 * 4 and peak.by_kind["inputs"] == 2 * 16 * 256 * 4
    weights = [b for b in peak.buffers if b.kind == "weights"]
    assert sorted(b.op_name for b in weights) == ["ps[0][0]", "ps[0][1]", "ps[1][0]", "ps[1][1]"]
    assert all(b.source.endswith(".py:" + b.source.rsplit(":", 1)[1]) for b in peak.buffers if b.source)
    hlo = tmp_path / "step.hlo.txt"
    hlo.write_text(text)
    code, out, err = run_cli("hlo", str(hlo), "--chip", "h100", "--memory", "--json")
    assert code == 0, err
    payload = json.loads(out)["memory_peak"]
    assert payload["peak_bytes"] == peak.peak_bytes and len(payload["buffers"]) == len(peak.buffers)


H100 = Path(__file__).parents[1] / "fixtures" / "h100"


def test_h100_profile_peak_against_its_allocator(tmp_path: Path) -> None:
    """The real H100 train step (tests/fixtures/h100): the peak of its scheduled module against the peak the
    profile's allocator recorded, 7,944,111,360 bytes in use."""
    import gzip

    pytest.importorskip("jax")  # the XPlane reader
    path = tmp_path / "decoder.xplane.pb"
    path.write_bytes(gzip.decompress((H100 / "decoder.xplane.pb.gz").read_bytes()))
    code, out, err = run_cli("profile", str(path), "--chip", "h100", "--memory", "--json")
    assert code == 0, err
    peak = json.loads(out)["memory_peak"]
    assert peak["measured_peak_bytes"] == 7_944_111_360
    assert peak["peak_bytes"] == pytest.approx(peak["measured_peak_bytes"], rel=0.01)
    # the attention's saved softmax (4 layers of bf16[64,2048,2048] with its workspace) is the largest part
    assert peak["by_kind"]["activations"] > 0.5 * peak["peak_bytes"]
    assert sum(peak["by_kind"].values()) == pytest.approx(peak["peak_bytes"])
