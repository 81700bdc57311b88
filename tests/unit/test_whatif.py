"""--what-if: a profile measured on one chip, each op's time projected onto another (analysis/whatif.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.hardware.catalog import get_chip
from tests.conftest import run_cli

HLO = "\n".join(
    [
        "HloModule m",
        "",
        "ENTRY %main (a: bf16[1024,1024], b: bf16[1024,1024], x: bf16[4096,4096], w: bf16[4096,4096])"
        " -> (bf16[1024,1024], bf16[4096,4096], bf16[1024,1024]) {",
        "  %a = bf16[1024,1024]{1,0} parameter(0)",
        "  %b = bf16[1024,1024]{1,0} parameter(1)",
        "  %x = bf16[4096,4096]{1,0} parameter(2)",
        "  %w = bf16[4096,4096]{1,0} parameter(3)",
        "  %add = bf16[1024,1024]{1,0} add(bf16[1024,1024]{1,0} %a, bf16[1024,1024]{1,0} %b)",
        "  %dot = bf16[4096,4096]{1,0} dot(bf16[4096,4096]{1,0} %x, bf16[4096,4096]{1,0} %w),"
        " lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        "  %mul = bf16[1024,1024]{1,0} multiply(bf16[1024,1024]{1,0} %a, bf16[1024,1024]{1,0} %b)",
        "  ROOT %t = (bf16[1024,1024]{1,0}, bf16[4096,4096]{1,0}, bf16[1024,1024]{1,0}) tuple(%add, %dot, %mul)",
        "}",
        "",
    ]
)
#: (instruction, measured microseconds of one run on the TPU v6e); custom.9 is not in the module: unknown cost
RUNS = (("add", 10.0), ("dot", 200.0), ("mul", 0.5), ("custom.9", 3.0))


def _profile(tmp_path: Path) -> tuple[Path, Path]:
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:TPU:0"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "XLA Ops"}}]  # fmt: skip
    events, t = [], 0.0
    for _ in range(2):
        for name, dur in RUNS:
            args = {"hlo_op": name, "hlo_module": "m"}
            events.append({"ph": "X", "pid": 1, "tid": 2, "name": name, "ts": t, "dur": dur, "args": args})
            t += dur + 1.0
    trace, hlo = tmp_path / "t.json", tmp_path / "m.hlo"
    trace.write_text(json.dumps({"traceEvents": meta + events}))
    hlo.write_text(HLO)
    return trace, hlo


def test_projection_by_hand_v6e_to_h100(tmp_path: Path) -> None:
    trace, hlo = _profile(tmp_path)
    code, out, err = run_cli("profile", str(trace), "--hlo", str(hlo), "--chip", "tpu-v6e", "--what-if", "h100",
                             "--json")  # fmt: skip
    assert code == 0, err
    w = json.loads(out)["what_if"]
    ops = {o["name"]: o for o in w["ops"]}
    v6e, h100 = get_chip("tpu-v6e"), get_chip("h100")
    add_bytes = 3 * 1024 * 1024 * 2  # two bf16 operands read, one result written
    dot_flops = 2 * 4096**3
    # add: memory-bound on both; it reached (6 MiB / v6e HBM) / 10 us of its bound, kept on the H100's
    eff = add_bytes / v6e.hbm_bytes_per_s / 10e-6
    assert ops["add"]["method"] == "efficiency" and ops["add"]["efficiency"] == pytest.approx(eff)
    assert ops["add"]["projected_s"] == pytest.approx(add_bytes / h100.hbm_bytes_per_s / eff)
    # dot: compute-bound on both: 200 us x (bf16 peak of the v6e / bf16 peak of the H100)
    assert (ops["dot"]["bound_x"], ops["dot"]["bound_y"]) == ("compute", "compute")
    expected_dot = 200e-6 * v6e.matrix_flops_per_s["bf16"] / h100.matrix_flops_per_s["bf16"]
    assert ops["dot"]["projected_s"] == pytest.approx(expected_dot)
    assert ops["dot"]["roofline_y_s"] == pytest.approx(dot_flops / h100.matrix_flops_per_s["bf16"])
    # mul ran faster than its roofline (0.5 us against 3.8 us): projected at the H100's roofline
    assert ops["mul"]["method"] == "roofline"
    assert ops["mul"]["projected_s"] == pytest.approx(add_bytes / h100.hbm_bytes_per_s)
    # custom.9 has no roofline: kept as measured
    assert ops["custom.9"]["method"] == "measured" and ops["custom.9"]["projected_s"] == pytest.approx(3e-6)
    projected = sum(o["projected_s"] for o in ops.values())  # one run of each per step
    measured = sum(dur for _, dur in RUNS) * 1e-6
    assert w["ops_projected_s"] == pytest.approx(projected) and w["ops_measured_s"] == pytest.approx(measured)
    assert w["projected_step_s"] == pytest.approx(w["measured_step_s"] - measured + projected)
    assert w["speedup"] == pytest.approx(w["measured_step_s"] / w["projected_step_s"])
    code, out, err = run_cli("profile", str(trace), "--hlo", str(hlo), "--chip", "tpu-v6e", "--what-if", "h100")
    assert code == 0 and "what if on h100" in out and "projected" in out, err
    code, _, err = run_cli("profile", str(trace), "--chip", "tpu-v6e", "--what-if", "h1000")
    assert code == 2 and "unknown chip" in err


@pytest.mark.parametrize("target", ["h100", "tpu-v5p"])
def test_v6e_profile_projected(third_party: Path, target: str) -> None:
    path = third_party / "xplane" / "xprof_tpu_v6e_inference_2.xplane.pb"
    code, out, err = run_cli("profile", str(path), "--chip", "tpu-v6e", "--what-if", target, "--json")
    assert code == 0, err
    w = json.loads(out)["what_if"]
    assert (w["chip"], w["measured_on"], w["step_basis"]) == (target, "tpu-v6e", "steps")
    ratio = get_chip("tpu-v6e").hbm_bytes_per_s / get_chip(target).hbm_bytes_per_s
    fusions = [o for o in w["ops"] if o["name"].startswith("broadcast_add_fusion")]
    assert len(fusions) == 3
    for o in fusions:  # HBM-bound on both chips: measured x the ratio of the bandwidths
        assert (o["bound_x"], o["bound_y"], o["method"]) == ("memory", "memory", "efficiency")
        assert o["projected_s"] == pytest.approx(o["measured_s"] * ratio, rel=1e-9)
    total = sum(o["total_projected_s"] for o in w["ops"])
    assert w["ops_projected_s"] == pytest.approx(total)
    assert w["projected_step_s"] == pytest.approx(w["measured_step_s"] - w["ops_measured_s"] + total)
    assert 0 < w["projected_step_s"] < 10 * w["measured_step_s"]
