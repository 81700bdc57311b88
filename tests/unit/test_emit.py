"""Plans that run (report/emit/): the JAX snippet lowered on 8 CPU devices has the collectives the plan priced;
the MaxText, vLLM and SGLang lines use only the options those projects document."""

from __future__ import annotations

import json
import math
import shlex

import pytest

from tests.conftest import run_cli

TRAIN = ("train", "llama-3-8b", "--chip", "h100", "--chips", "8", "--batch-tokens", "64K", "--seq-len", "4096",
         "--fix", "dp=4,tp=2,zero=0")  # fmt: skip
#: collective kinds as the plan prices them: an all-reduce is a reduce-scatter then an all-gather (the ring)
SAME = {"all-reduce": {"all-reduce", "reduce-scatter", "all-gather"}}


def _json(*argv: str) -> dict:
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def _plan_collectives() -> set[tuple[str, str]]:
    """(kind, JAX axis) of every collective the plan prices with bytes, from its step's parts."""
    from rooftop.cli.main import build_parser
    from rooftop.cli.train import setup_from_args
    from rooftop.plan.train.plan import plan_training
    from rooftop.plan.train.search import parse_fix
    from rooftop.report.emit.specs import AXIS_NAMES

    args = build_parser().parse_args(list(TRAIN))
    plan = plan_training(setup_from_args(args), parse_fix(args.fix), top=1)
    out = set()
    for part in plan.parts[0]:
        for term in part.terms:
            c = term.collective
            if c is not None and c.bytes_per_device > 0:
                out |= {(c.kind, AXIS_NAMES[a]) for a in c.axes}
    return out


def test_emit_jax_lowers_with_the_collectives_the_plan_priced(tmp_path) -> None:
    jax = pytest.importorskip("jax")
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 devices")
    import jax.numpy as jnp
    from jax.sharding import NamedSharding

    text = _json(*TRAIN, "--emit", "jax")["emit"]["text"]
    ns: dict = {}
    exec(compile(text, "emitted.py", "exec"), ns)  # the snippet as a user runs it
    mesh, weights, acts = ns["mesh"], ns["WEIGHTS"], ns["ACTIVATIONS"]
    assert dict(mesh.shape) == {"data": 4, "model": 2}
    # the mock transformer's Megatron ("fixed") split is the plan's: W_in on its output dim, W_out on its input
    assert tuple(weights["mlp_in"]) == (None, "model") and tuple(weights["mlp_out"]) == ("model", None)

    def loss_fn(ps, x, y):  # the mock transformer's blocks (x + relu(x W_in) W_out), on [batch, seq, d_model]
        h = x
        for w_in, w_out in ps:
            a = jax.lax.with_sharding_constraint(jnp.maximum(h @ w_in, 0.0), NamedSharding(mesh, acts["mlp_hidden"]))
            h = jax.lax.with_sharding_constraint(h + a @ w_out, NamedSharding(mesh, acts["hidden"]))
        return jnp.mean((h - y) ** 2)

    def step(ps, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(ps, x, y)
        return loss, jax.tree.map(lambda p, g: p - 0.01 * g, ps, grads)

    batch, seq, d, f, layers = 8, 16, 128, 512, 2
    specs = [(weights["mlp_in"], weights["mlp_out"])] * layers
    params = [(jax.ShapeDtypeStruct((d, f), jnp.float32), jax.ShapeDtypeStruct((f, d), jnp.float32))] * layers
    x = jax.ShapeDtypeStruct((batch, seq, d), jnp.float32)
    jitted = ns["jit_train_step"](step, specs)
    hlo = tmp_path / "step.hlo"
    hlo.write_text(jitted.lower(params, x, x).compile().as_text())
    analysis = _json("hlo", str(hlo), "--chip", "h100", "--mesh", "data=4,model=2")
    compiled = set()
    for ins in analysis["instructions"]:
        if ins["mesh_axes"] and ins["bytes"] > 1024:  # the loss's scalar mean is not a plan's collective
            compiled |= {(ins["opcode"], a) for a in ins["mesh_axes"]}
    planned = _plan_collectives()
    assert {a for _, a in compiled} == {a for _, a in planned} == {"data", "model"}
    for kind, axis in compiled:
        assert SAME.get(kind, {kind}) & {k for k, a in planned if a == axis}, (kind, axis, planned)


#: MaxText's options (AI-Hypercomputer/maxtext, configs/base.yml: the ici_*/dcn_* parallelism axes, batch,
#: sequence, pipeline, remat and dtype settings) and the remat_policy values it lists
MAXTEXT_KEYS = {
    f"{net}_{axis}_parallelism"
    for net in ("ici", "dcn")
    for axis in ("data", "fsdp", "fsdp_transpose", "sequence", "context", "tensor", "pipeline", "expert")
}
MAXTEXT_KEYS |= {"run_name", "per_device_batch_size", "max_target_length", "num_pipeline_microbatches",
                 "gradient_accumulation_steps", "remat_policy", "dtype", "quantization"}  # fmt: skip
MAXTEXT_REMAT = {"minimal", "save_dot_except_mlpwi", "save_dot_except_mlp", "save_qkv_proj", "qkv_proj_offloaded",
                 "minimal_offloaded", "full"}  # fmt: skip
#: vLLM's engine arguments (docs.vllm.ai "Engine Arguments", `vllm serve --help`) and the choices they list
VLLM_FLAGS = {"--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size", "--enable-expert-parallel",
              "--max-num-seqs", "--max-num-batched-tokens", "--enable-chunked-prefill", "--max-model-len", "--dtype",
              "--kv-cache-dtype", "--quantization"}  # fmt: skip
VLLM_CHOICES = {"--dtype": {"auto", "half", "float16", "bfloat16", "float", "float32"},
                "--kv-cache-dtype": {"auto", "fp8", "fp8_e5m2", "fp8_e4m3"}}  # fmt: skip
#: SGLang's server arguments (docs.sglang.io "Server Arguments", `python -m sglang.launch_server --help`)
SGLANG_FLAGS = {"--model-path", "--tp-size", "--dp-size", "--ep-size", "--pp-size", "--enable-dp-attention",
                "--max-running-requests", "--chunked-prefill-size", "--context-length", "--dtype", "--kv-cache-dtype",
                "--quantization"}  # fmt: skip
SGLANG_CHOICES = {"--dtype": {"auto", "half", "float16", "bfloat16", "float", "float32"},
                  "--kv-cache-dtype": {"auto", "fp8_e5m2", "fp8_e4m3"}}  # fmt: skip


def _flags(text: str) -> dict[str, str | None]:
    """The flags of an emitted command (comments dropped) -> their values (None for a switch)."""
    words = shlex.split(" ".join(line for line in text.splitlines() if not line.startswith("#")).replace("\\", ""))
    out: dict[str, str | None] = {}
    for i, w in enumerate(words):
        if w.startswith("--"):
            out[w] = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else None
    return out


def test_emit_maxtext_uses_its_documented_keys_with_the_plans_degrees() -> None:
    d = _json("train", "llama-3-70b", "--chip", "tpu-v5p", "--topology", "2*16x16x16", "--batch-tokens", "4M",
              "--seq-len", "4096", "--emit", "maxtext")  # fmt: skip
    par = d["best"]["parallelism"]
    words = [w.removesuffix("\\").strip() for line in d["emit"]["text"].splitlines() if not line.startswith("#")
             for w in line.split() if "=" in w]  # fmt: skip
    settings = dict(w.split("=", 1) for w in words)
    assert set(settings) <= MAXTEXT_KEYS and settings["remat_policy"] in MAXTEXT_REMAT
    for axis, name in (("dp", "data"), ("fsdp", "fsdp"), ("tp", "tensor"), ("pp", "pipeline"), ("cp", "context")):
        degree = int(settings.get(f"ici_{name}_parallelism", 1)) * int(settings.get(f"dcn_{name}_parallelism", 1))
        assert degree == par[axis], axis
    dcn = [int(v) for k, v in settings.items() if k.startswith("dcn_")]
    assert dcn and math.prod(dcn) == 2  # the two slices over DCN, on the outermost axis
    per_device = float(settings["per_device_batch_size"])
    assert per_device * 2 * 16**3 == pytest.approx(d["global_batch_sequences"], rel=1e-9)
    assert int(settings["max_target_length"]) == 4096


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_emit_engines_use_their_documented_flags(engine: str) -> None:
    d = _json("serve", "llama-3-70b", "--chip", "h100", "--chips", "16", "--prompt-len", "2048", "--gen-len", "256",
              "--kv-dtype", "fp8", "--weight-dtype", "fp8", "--emit", engine)  # fmt: skip
    point = d["points"][d["chosen"]]
    par, flags = point["parallelism"], _flags(d["emit"]["text"])
    documented, choices = (VLLM_FLAGS, VLLM_CHOICES) if engine == "vllm" else (SGLANG_FLAGS, SGLANG_CHOICES)
    assert set(flags) <= documented, set(flags) - documented
    for flag, allowed in choices.items():
        assert flags.get(flag, "auto") in allowed
    tp, dp, seqs, budget, context = {
        "vllm": ("--tensor-parallel-size", "--data-parallel-size", "--max-num-seqs", "--max-num-batched-tokens",
                 "--max-model-len"),
        "sglang": ("--tp-size", "--dp-size", "--max-running-requests", "--chunked-prefill-size", "--context-length"),
    }[engine]  # fmt: skip
    assert int(flags[tp]) == par["tp"] and int(flags.get(dp) or 1) == par["replicas"]
    assert int(flags[seqs]) == point["batch"] and int(flags[budget]) == 8192 and int(flags[context]) == 2048 + 256
    assert flags["--quantization"] == "fp8" and flags["--kv-cache-dtype"].startswith("fp8")
    assert "meta-llama/Meta-Llama-3-70B" in d["emit"]["text"]  # the model's Hugging Face id from the catalog


def test_emit_jax_for_a_serving_plan_runs_and_splits_as_the_layout() -> None:
    jax = pytest.importorskip("jax")
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 devices")
    d = _json("serve", "llama-3-8b", "--chip", "h100", "--chips", "8", "--prompt-len", "512", "--gen-len", "128",
              "--fix", "tp=2", "--emit", "jax")  # fmt: skip
    par = d["points"][d["chosen"]]["parallelism"]
    ns: dict = {}
    exec(compile(d["emit"]["text"], "emitted.py", "exec"), ns)
    assert dict(ns["mesh"].shape) == {"replica": par["replicas"], "model": 2} and par["replicas"] == 4
    assert tuple(ns["WEIGHTS"]["mlp_in"]) == (None, "model") and tuple(ns["WEIGHTS"]["mlp_out"]) == ("model", None)
    # [batch, seq, kv heads, head_dim]: the batch over the replicas, llama-3-8b's 8 KV heads over tp=2
    assert tuple(ns["ACTIVATIONS"]["kv_cache"]) == ("replica", None, "model", None)
