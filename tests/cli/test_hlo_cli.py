"""`rooftop hlo`: the two TPU literature instructions, the JSON contract, errors, a sharded JAX program."""

# ruff: noqa: E501  (HLO fixture lines are kept verbatim, as XLA prints them)

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

#: ``%fusion.3`` is verbatim from the literature (a TPU reduce-scatter fusion whose output stays in VMEM,
#: S(1)); ``f32[3,5]{1,0:T(2,2)}`` is the XLA tiled-layout example ([3,5] padded to [4,6]). The fused
#: bodies are written here so that the module is complete.
LITERATURE = """HloModule literature, num_partitions=8

%sum (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %s = bf16[] add(bf16[] %a, bf16[] %b)
}

%fused_computation.32 (param_0: bf16[32,32,8192]) -> bf16[32,32,8192] {
  %param_0 = bf16[32,32,8192]{2,1,0:T(8,128)(2,1)} parameter(0)
  ROOT %multiply.1 = bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)} multiply(bf16[32,32,8192]{2,1,0:T(8,128)(2,1)} %param_0, bf16[32,32,8192]{2,1,0:T(8,128)(2,1)} %param_0)
}

%all-reduce-scatter.3 (param_1: bf16[32,32,8192]) -> bf16[32,32,4096] {
  %param_1 = bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)} parameter(0)
  ROOT %reduce-scatter.1 = bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)} reduce-scatter(bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)} %param_1), channel_id=1, replica_groups={{0,1},{2,3},{4,5},{6,7}}, use_global_device_ids=true, dimensions={2}, to_apply=%sum
}

ENTRY %main (x: bf16[32,32,8192], y: f32[3,5]) -> (bf16[32,32,4096], f32[3,5]) {
  %x = bf16[32,32,8192]{2,1,0:T(8,128)(2,1)} parameter(0)
  %fusion.32 = bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)} fusion(bf16[32,32,8192]{2,1,0:T(8,128)(2,1)} %x), kind=kLoop, calls=%fused_computation.32
  %fusion.3 = bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)} fusion(bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)} %fusion.32), kind=kCustom, calls=%all-reduce-scatter.3
  %y = f32[3,5]{1,0:T(2,2)} parameter(1)
  %exponential.1 = f32[3,5]{1,0:T(2,2)} exponential(f32[3,5]{1,0:T(2,2)} %y)
  ROOT %tuple = (bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}, f32[3,5]{1,0:T(2,2)}) tuple(%fusion.3, %exponential.1)
}
"""
ARGS = ("--chip", "tpu-v5e", "--mesh", "data=4,model=2")
KEYS = (
    "name opcode computation shape dtype flops bytes padded_bytes memory_space compute_s memory_s comm_s "
    "lower_bound_s bound replica_groups mesh_axes"
).split()


@pytest.fixture
def literature(tmp_path: Path) -> str:
    path = tmp_path / "literature.hlo"
    path.write_text(LITERATURE)
    return str(path)


def as_json(*argv: str) -> dict:
    code, out, err = run_cli("hlo", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_table_shows_vmem_tiling_padding_and_the_collective_axis(literature: str) -> None:
    code, out, err = run_cli("hlo", literature, *ARGS)
    assert code == 0, err
    flat = " ".join(out.split())
    for text in ("fusion.3", "S(1)", "T(8,128)(2,1)", "reduce-scatter over model (groups of 2, stride 1)",
                 "f32[4,6], 1.6x bytes", "collectives on mesh data=4,model=2", "totals"):  # fmt: skip
        assert text in flat, text


def test_json_contract_for_the_literature_instructions(literature: str) -> None:
    d = as_json(literature, *ARGS)
    rows = {r["name"]: r for r in d["instructions"]}
    for row in rows.values():
        assert set(KEYS) <= set(row)
    fusion = rows["fusion.3"]
    assert fusion["shape"] == "bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}"
    assert (fusion["dtype"], fusion["memory_space"], fusion["opcode"]) == ("bf16", 1, "fusion")
    assert fusion["bytes"] == (32 * 32 * 8192 + 32 * 32 * 4096) * 2  # input and output, both in VMEM
    assert fusion["hbm_bytes"] == 0 and fusion["memory_s"] == 0
    assert fusion["mesh_axes"] == ["model"] and fusion["replica_groups"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert fusion["comm_bytes"] == 32 * 32 * 8192 * 2  # a reduce-scatter's Comm is its input
    assert fusion["bound"] == "network" and fusion["comm_s"] > 0
    exp = rows["exponential.1"]
    assert exp["padded_shape"] == "f32[4,6]"
    assert exp["padded_bytes"] / exp["bytes"] == (4 * 6) / (3 * 5)  # 1.6x
    assert exp["transcendentals"] == 3 * 5 and exp["flops"] == 0
    totals = d["totals"]
    assert totals["padding_waste_bytes"] == 2 * (4 * 6 - 3 * 5) * 4  # read and written
    assert totals["flops"] == 32 * 32 * 8192  # the multiply in fusion.32
    assert d["collectives_by_axis"] == [
        {"axes": "model", "count": 1.0, "bytes": 32 * 32 * 8192 * 2, "comm_s": fusion["comm_s"]}
    ]
    assert d["mesh"] == {"axes": {"data": 4, "model": 2}, "inferred": False, "how": "given"}
    assert d["top"][0] == "fusion.3" and d["schema_version"] == 1


def test_inferred_mesh_and_default_topology_are_said(literature: str) -> None:
    d = as_json(literature, "--chip", "tpu-v5e", "--top", "1")
    assert d["mesh"]["inferred"] is True
    assert any("inferred" in n for n in d["notes"]) and any("default" in n for n in d["notes"])
    assert len(d["top"]) == 1 and d["topology"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("/nonexistent/x.hlo", "--chip", "h100"), "cannot read HLO file"),
        (("{bad}", "--chip", "h100"), ":3: expected a computation"),
        (("{lit}", "--chip", "tpu-v5e", "--mesh", "data=3"), "has 3 devices but the module runs on 8"),
        (("{lit}", "--chip", "nochip"), "unknown chip"),
    ],
)
def test_errors_are_one_line_exit_2(tmp_path: Path, literature: str, argv: tuple[str, ...], message: str) -> None:
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\n\nnot an instruction\n")
    code, out, err = run_cli("hlo", *(a.format(bad=bad, lit=literature) for a in argv))
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.jax
def test_sharded_jax_program(tmp_path: Path) -> None:
    """The compiled text of an 8-device program: collectives on the right axes, FLOPs equal to XLA's."""
    pytest.importorskip("jax")
    from tests.unit.test_hlo_vs_xla import compiled

    text, xla = compiled("sharded_layer_fsdp")
    path = tmp_path / "fsdp.hlo"
    path.write_text(text)
    d = as_json(str(path), "--chip", "h100", "--mesh", "data=4,model=2", "--topology", "8")
    found = {(r["opcode"], tuple(r["mesh_axes"])) for r in d["instructions"] if r["mesh_axes"] is not None}
    assert found == {("all-gather", ("data",)), ("all-reduce", ("model",)), ("collective-permute", ("model",))}
    assert d["totals"]["flops"] == pytest.approx(xla["flops"], rel=0.01)


def test_unknown_custom_call_is_null_in_json_and_unknown_in_the_table(tmp_path: Path) -> None:
    path = tmp_path / "cc.hlo"
    path.write_text(
        'HloModule m\nENTRY %e {\n  %p = s32[32] parameter(0)\n  ROOT %cc = s32[32] custom-call(%p), custom_call_target="my_kernel"\n}\n'
    )
    (row,) = as_json(str(path), "--chip", "h100")["instructions"]
    assert row["flops"] is None and row["compute_s"] is None
    assert row["flops_unknown"] == "custom-call my_kernel (cc)" and row["bytes"] == 2 * 32 * 4
    code, out, _ = run_cli("hlo", str(path), "--chip", "h100")
    assert code == 0 and "unknown" in out and "FLOPs unknown: custom-call my_kernel" in " ".join(out.split())
