"""The notation as JAX code (Part 10): ``rooftop shard`` and a sharded ``rooftop matmul`` write the mesh and
the PartitionSpec / NamedSharding of each array; the matmul's code, run on 8 CPU devices, lowers to the
collectives rooftop's fastest strategy names, read back from the compiled HLO by ``rooftop hlo``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli


def _json(*argv: str) -> dict:  # type: ignore[type-arg]
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_shard_partition_spec() -> None:
    """Part 3's pop quiz array A[I_XY, J] on {X: 2, Y: 8, Z: 2}: P(('X', 'Y'), None) on a (2, 8, 2) mesh."""
    d = _json("shard", "A[I_XY, J]", "--shape", "128,2048", "--dtype", "int8", "--mesh", "X=2,Y=8,Z=2")
    assert d["jax"]["partition_spec"] == "P(('X', 'Y'), None)"
    assert d["jax"]["mesh"] == "Mesh(np.array(jax.devices()[:32]).reshape((2, 8, 2)), ('X', 'Y', 'Z'))"
    assert "jnp.int8" in d["jax"]["code"]


@pytest.mark.parametrize(
    ("expr", "kind"),
    [
        ("A[B, D_X] @ W[D_X, F] -> C[B, F]", "all-reduce"),  # Part 3 case 3: partial sums over X
        ("A[B_X, D] @ W[D, F] -> C[B, F]", "all-gather"),  # the output asked unsharded
    ],
)
def test_matmul_code_lowers_to_the_strategys_collectives(expr: str, kind: str, tmp_path: Path) -> None:
    pytest.importorskip("jax")
    mesh = ("--chip", "tpu-v5e", "--topology", "2x4", "--mesh", "X=2,Y=4")
    d = _json("matmul", expr, "--dims", "B=64,D=256,F=128", *mesh)
    kinds = {s["kind"] for s in d["steps"] if s["kind"] != "matmul"}
    assert kinds == {kind}
    space: dict[str, object] = {}
    exec(compile(d["jax"]["code"], "<rooftop jax code>", "exec"), space)  # our own generated text
    hlo = tmp_path / "m.hlo.txt"
    hlo.write_text(str(space["hlo"]))
    h = _json("hlo", str(hlo), *mesh)
    found = {i["opcode"].removesuffix("-start"): i["mesh_axes"] for i in h["instructions"] if i["mesh_axes"]}
    assert kind in found and found[kind] == ["X"]
