"""rooftop diff: ops matched across two runs, the step delta and what explains it (analysis/diff.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rooftop.analysis.diff import Side, SideOp, diff_sides, match_ops
from tests.conftest import run_cli


def _op(name: str, measured: float, roofline: float | None = 1e-6, **kw: object) -> SideOp:
    fields: dict = {"module": "jit_step", "opcode": "fusion", "shape": "f32[8,8]{1,0}", "framework_op": "",
                    "family": "fusion", "count": 1.0} | kw  # fmt: skip
    return SideOp(name=name, measured_s=measured, roofline_s=roofline, **fields)


def _side(ops: list[SideOp], step_s: float, source: str = "a") -> Side:
    return Side(source, "profile", "h100", 3, step_s, "steps", tuple(ops))


def test_passes_instruction_renumbered_framework_op_and_one_sided() -> None:
    a = [
        _op("fusion.1", 5e-3),  # same instruction and shape: matched by instruction
        _op("fusion.7", 2e-3, framework_op="jit(step)/mlp/dot_general"),  # renumbered in B
        _op("gemm_a", 1e-3, framework_op="aten::mm", family="gemm", opcode="", shape=""),  # another chip's kernels
        _op("gemm_b", 2e-3, framework_op="aten::mm", family="gemm", opcode="", shape=""),
        _op("all-gather", 4e-3, opcode="all-gather", mesh_axes=("model",)),  # removed
    ]
    b = [
        _op("fusion.1", 4e-3),
        _op("fusion.9", 2.5e-3, framework_op="jit(step)/mlp/dot_general"),
        _op("Cijk_gemm", 2e-3, framework_op="aten::mm", family="gemm", opcode="", shape=""),
        _op("fusion.3", 1e-3, shape="f32[4]{0}"),  # added
    ]
    rows = {(r.name_a, r.name_b): r for r in match_ops(a, b)}
    assert rows[("fusion.1", "fusion.1")].match == "instruction"
    assert rows[("fusion.1", "fusion.1")].delta_measured_s == pytest.approx(4e-3 - 5e-3)
    assert rows[("fusion.7", "fusion.9")].match == "renumbered"
    gemm = rows[("gemm_a + gemm_b", "Cijk_gemm")]
    assert gemm.match == "framework op" and gemm.delta_measured_s == pytest.approx(2e-3 - (1e-3 + 2e-3))
    assert gemm.delta_roofline_s == pytest.approx(1e-6 - 2e-6)
    gone = rows[("all-gather", None)]
    assert gone.status == "removed" and gone.delta_measured_s == -4e-3 and gone.mesh_axes == ("model",)
    new = rows[(None, "fusion.3")]
    assert new.status == "added" and new.delta_measured_s == 1e-3 and new.delta_roofline_s == 1e-6

    diff = diff_sides(_side(a, 20e-3), _side(b, 15e-3, "b"), contributors=2)
    assert diff.step_delta_s == pytest.approx(15e-3 - 20e-3)
    op_deltas = (4e-3 - 5e-3) + (2.5e-3 - 2e-3) + (2e-3 - 3e-3) - 4e-3 + 1e-3
    assert diff.unexplained_s() == pytest.approx(-5e-3 - op_deltas)
    assert [r.name for r in diff.contributors] == ["all-gather", "fusion.1"]  # |-4 ms|, then |-1 ms| (first by name)
    assert diff.counts() == {"added": 1, "removed": 1, "changed": 3, "same": 0}


def test_unknown_roofline_leaves_the_roofline_delta_unknown() -> None:
    diff = diff_sides(_side([_op("f", 1e-3, None)], 1e-3), _side([_op("f", 2e-3, 1e-6)], 2e-3))
    (row,) = diff.rows
    assert row.delta_roofline_s is None and row.delta_measured_s == pytest.approx(1e-3)


def test_a_profile_and_an_hlo_module_do_not_diff() -> None:
    hlo = Side("m.hlo", "hlo", "h100", 1, 1e-6, "predicted", ())
    with pytest.raises(Exception, match="give two profiles or two HLO modules"):
        diff_sides(_side([], 1.0), hlo)


# ---------------------------------------------------------------- the worked example (JAX, 8 CPU devices)


def _jax8() -> Any:
    """JAX with 8 devices (the conftest's XLA flags on the CPU), else the test is skipped."""
    jax = pytest.importorskip("jax")
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 devices")
    return jax


@pytest.fixture(scope="module")
def runs(worked_profiles: dict[str, Path]) -> dict[str, Path]:
    """The naive and fixed worked examples: each one's profile (3 steps) and compiled HLO (tests/conftest.py)."""
    return worked_profiles


def _diff(*argv: str) -> dict:
    code, out, err = run_cli("diff", *argv, "--chip", "h100", "--mesh", "data=4,model=2", "--json")
    assert code == 0, err
    return json.loads(out)


def test_naive_against_fixed_removes_the_model_all_gathers(runs: dict[str, Path], tmp_path: Path) -> None:
    d = _diff(str(runs["naive"]), str(runs["fixed"]))
    gathers = [r for r in d["rows"] if r["opcode"] == "all-gather"]
    assert len(gathers) == 3  # one per layer forward, one in the backward (mock_transformer's docstring)
    assert all(r["status"] == "removed" and r["mesh_axes"] == ["model"] for r in gathers)
    assert all(r["delta_measured_s"] == -r["measured_a_s"] < 0 for r in gathers)
    # the measured step of a CPU run moves with the host's load (a 12 ms gain on an idle host, lost in the noise
    # of a busy one), so its sign is checked through what the diff attributes, not the wall clock
    assert d["step_delta_s"] == d["b"]["step_s"] - d["a"]["step_s"]
    assert d["a"]["step_basis"] == "steps" and d["a"]["steps"] == 3
    assert d["roofline_delta_s"] < 0
    assert d["contributors"] and abs(d["contributors"][0]["delta_s"]) == max(
        abs(r["delta_measured_s"] or 0) for r in d["rows"]
    )
    page = tmp_path / "diff.html"
    code, out, err = run_cli("diff", str(runs["naive"]), str(runs["fixed"]), "--chip", "h100", "--html", str(page))
    assert code == 0, err
    assert "removed" in out and "mean step" in out and "all-gather" in page.read_text()


def test_self_diff_is_all_zeros(runs: dict[str, Path]) -> None:
    d = _diff(str(runs["naive"]), str(runs["naive"]))
    assert d["step_delta_s"] == 0 and d["roofline_delta_s"] == 0 and d["unexplained_s"] == 0
    assert d["counts"]["same"] == len(d["rows"]) > 0 and d["contributors"] == []
    assert all(r["delta_measured_s"] == 0 and r["delta_roofline_s"] in (0, None) for r in d["rows"])


def test_hlo_modules_diff_by_predicted_time(runs: dict[str, Path]) -> None:
    from rooftop.analysis.diff import diff_runs
    from rooftop.analysis.hlo.analyze import analyze
    from rooftop.analysis.hlo.parse import parse_hlo_file
    from rooftop.hardware.catalog import get_chip

    chip = get_chip("h100")
    diff = diff_runs(runs["naive.hlo"], runs["fixed.hlo"], chip, mesh="data=4,model=2")
    predicted = [analyze(parse_hlo_file(runs[k]), chip, "data=4,model=2").totals()["predicted_s"]
                 for k in ("naive.hlo", "fixed.hlo")]  # fmt: skip
    assert diff.step_delta_s == pytest.approx(predicted[1] - predicted[0], rel=1e-12)
    assert sum(r.delta_s("hlo") for r in diff.rows) == pytest.approx(diff.step_delta_s, rel=1e-9)
    assert {r.name for r in diff.rows if r.opcode == "all-gather" and r.status == "removed"} == {
        "all-gather", "all-gather.1", "all-gather.2"}  # fmt: skip
    assert repr(diff).startswith("<ProfileDiff: predicted module time")
    assert diff.to_dict()["kind"] == "hlo" and "<table>" in diff._repr_html_()


def test_kineto_trace_against_itself_on_two_chips(third_party: Path) -> None:
    """The same PyTorch trace priced on an H100 and on an A100: nothing measured changes, every priced op's
    roofline moves with the chip (A100's lower peaks: longer), and the notes say the chips differ."""
    path = str(third_party / "chrome_trace" / "hta_minitoy_mi250_rocm.json.gz")
    code, out, err = run_cli("diff", path, path, "--chip", "h100", "--chip-b", "a100", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["step_delta_s"] == 0 and all(r["delta_measured_s"] == 0 for r in d["rows"])
    assert all(r["match"] == "instruction" for r in d["rows"])
    priced = [r for r in d["rows"] if r["roofline_a_s"]]
    assert priced and all(r["roofline_b_s"] > r["roofline_a_s"] for r in priced)
    assert any("priced on h100 and B on a100" in n for n in d["notes"])


def test_two_compilations_of_one_h100_step(tmp_path: Path) -> None:
    """tests/fixtures/h100: one train step compiled twice (with and without command buffers). Instruction
    numbers differ, op names and shapes do not (its README): every op matches by instruction or renumbered,
    except the eight gemms XLA gave another kernel (a Triton gemm fusion in one, a library call in the other),
    which do the same work in about the same time."""
    import gzip

    pytest.importorskip("jax")  # the XPlane reader
    h100 = Path(__file__).parents[1] / "fixtures" / "h100"
    paths = []
    for name in ("decoder", "decoder_no_graphs"):
        paths.append(tmp_path / f"{name}.xplane.pb")
        paths[-1].write_bytes(gzip.decompress((h100 / f"{name}.xplane.pb.gz").read_bytes()))
    code, out, err = run_cli("diff", *map(str, paths), "--chip", "h100", "--json")
    assert code == 0, err
    d = json.loads(out)
    one_sided = [r for r in d["rows"] if r["status"] in ("added", "removed")]
    assert all(r["match"] in ("instruction", "renumbered") for r in d["rows"] if r not in one_sided)
    assert d["counts"]["added"] == d["counts"]["removed"] == 8
    removed = sum(r["measured_a_s"] for r in one_sided if r["status"] == "removed")
    added = sum(r["measured_b_s"] for r in one_sided if r["status"] == "added")
    assert added == pytest.approx(removed, rel=0.05)
    assert {r["framework_op"] for r in one_sided if r["status"] == "added"} == {
        r["framework_op"] for r in one_sided if r["status"] == "removed"}  # fmt: skip
    assert abs(d["step_delta_s"]) < 0.01 * d["a"]["step_s"]  # the same step: within 1%
