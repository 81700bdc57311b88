"""The notation as JAX code (Part 10): ``rooftop shard`` and a sharded ``rooftop matmul`` write the mesh and
the PartitionSpec / NamedSharding of each array; the matmul's code, run on 8 CPU devices, lowers to the
collectives rooftop's fastest strategy names, read back from the compiled HLO by ``rooftop hlo``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli


def _json(*argv: str) -> dict:
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


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


def test_training_layout_specs_lower_to_fsdp_and_tensor_parallel_collectives(tmp_path: Path) -> None:
    """A layout of fsdp=4 x tp=2 written as JAX (train_jax_dict, what `rooftop train --json` gives as
    `jax`): an MLP's forward and backward under those specs, compiled on 8 CPU devices, gathers or
    reduce-scatters the weights over fsdp and reduces the partial sums over model, as Part 5 says."""
    jax = pytest.importorskip("jax")
    import types

    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from rooftop.report.jaxspec import train_jax_dict

    par = types.SimpleNamespace(dp=1, fsdp=4, tp=2, pp=1, ep=1, cp=1, zero_stage=0)
    d = train_jax_dict(par)
    assert d["mesh"] == {"fsdp": 4, "model": 2}
    specs = d["partition_specs"]
    assert specs["mlp.w_in[D, F]"] == "P('fsdp', 'model')" and specs["mlp.w_out[F, D]"] == "P('model', 'fsdp')"
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("fsdp", "model"))
    space = {"P": P}
    x_s, wi_s, wo_s = (
        NamedSharding(mesh, eval(specs[k], space))  # our own generated PartitionSpec text
        for k in ("activations[B, T, D]", "mlp.w_in[D, F]", "mlp.w_out[F, D]")
    )

    def loss(x, w_in, w_out):
        return jnp.sum((jax.nn.gelu(x @ w_in) @ w_out) ** 2)  # needs the summed output: the model reduction

    f = jax.jit(jax.grad(loss, argnums=(1, 2)), in_shardings=(x_s, wi_s, wo_s), out_shardings=(wi_s, wo_s))
    args = (jnp.ones((16, 32, 64)), jnp.ones((64, 256)), jnp.ones((256, 64)))
    hlo = tmp_path / "mlp.hlo.txt"
    hlo.write_text(f.lower(*args).compile().as_text())
    code, out, err = run_cli("hlo", str(hlo), "--chip", "tpu-v5e", "--topology", "2x4", "--mesh", "fsdp=4,model=2",
                             "--json")  # fmt: skip
    assert code == 0, err
    axes = {tuple(i["mesh_axes"]) for i in json.loads(out)["instructions"] if i["mesh_axes"]}
    assert ("fsdp",) in axes and ("model",) in axes
