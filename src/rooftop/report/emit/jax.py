"""``--emit jax``: a Python snippet that sets up a plan's layout in JAX: the mesh over the slice's devices,
the PartitionSpecs of the weights, optimizer state and activations (report/emit/specs.py), and the
train (or decode) step's ``jax.jit`` shardings.

What it does not cover (said in the snippet too): the model code itself (the specs name weights by role:
apply them to your parameter tree), pipeline schedules (pp > 1 gets a ``stage`` axis and layer-stacked
weights split on it; the microbatch loop is the framework's), MoE expert placement (ep), the remat policy
beyond naming jax.checkpoint's, offload, and placing the mesh on a TPU torus or across NVLink domains
(``jax.experimental.mesh_utils.create_device_mesh`` does that on real slices; the snippet takes the
devices in order, as on CPU).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rooftop.report.emit.specs import Spec, mesh_of, serve_specs, train_specs

if TYPE_CHECKING:
    from rooftop.model.config import TransformerConfig
    from rooftop.plan.serve.layout import ServingLayout
    from rooftop.plan.train.layout import Parallelism

#: the plan's remat policy -> the jax.checkpoint policy that keeps the same tensors
REMAT = {
    "none": None,
    "selective": "jax.checkpoint_policies.dots_with_no_batch_dims_saveable",
    "dots": "jax.checkpoint_policies.checkpoint_dots",
    "full": "jax.checkpoint_policies.nothing_saveable",
}


def _entry(e: str | tuple[str, ...] | None) -> str:
    if e is None or isinstance(e, str):
        return repr(e)
    return "(" + ", ".join(map(repr, e)) + ")"


def _specs(name: str, specs: dict[str, Spec]) -> list[str]:
    lines = [f"{name} = {{"]
    lines += [f"    {k!r}: P({', '.join(_entry(e) for e in v)})," for k, v in specs.items()]
    return [*lines, "}"]


def _header(title: str, names: tuple[str, ...], sizes: tuple[int, ...]) -> list[str]:
    n = 1
    for s in sizes:
        n *= s
    return [
        f'"""{title}"""',
        "import jax",
        "import numpy as np",
        "from jax.sharding import Mesh, NamedSharding",
        "from jax.sharding import PartitionSpec as P",
        "",
        f"AXES = {names!r}",
        f"SHAPE = {sizes!r}",
        f"mesh = Mesh(np.array(jax.devices()[:{n}]).reshape(SHAPE), AXES)",
        "",
        "",
        "def sharding(spec):",
        "    return NamedSharding(mesh, spec)",
        "",
        "",
        "def shardings(specs):",
        '    """A tree of PartitionSpecs (shaped like the parameters) -> NamedShardings."""',
        "    return jax.tree.map(sharding, specs, is_leaf=lambda x: isinstance(x, P))",
        "",
    ]


def jax_train(par: Parallelism, title: str) -> str:
    """The snippet for a training layout."""
    weights, state, activations = train_specs(par)
    names, sizes = mesh_of(par.mesh_axes())
    policy = REMAT.get(par.remat)
    lines = [
        *_header(title, names, sizes),
        "# weights by role, [in, out] as Dense kernels (Megatron split on 'model', FSDP on 'fsdp')",
        *_specs("WEIGHTS", weights),
        "# optimizer state (and gradients with ZeRO-2): the weights' split"
        + (", and over 'data'" if par.zero_stage else ""),
        *_specs("OPTIMIZER_STATE", state),
        "# activations, batch first",
        *_specs("ACTIVATIONS", activations),
        f"REMAT_POLICY = {policy or 'None'}  # remat={par.remat}: jax.checkpoint(layer, policy=REMAT_POLICY)",
        f"MICROBATCHES = {par.microbatches}  # per optimizer step (gradient accumulation, or the pipeline's)",
        "",
        "",
        "def jit_train_step(step, param_specs):",
        '    """jit ``step(params, tokens, targets) -> (loss, params)`` with the plan\'s shardings."""',
        "    params = shardings(param_specs)",
        "    tokens = sharding(ACTIVATIONS['tokens'])",
        "    return jax.jit(step, in_shardings=(params, tokens, tokens), out_shardings=(sharding(P()), params),",
        "                   donate_argnums=(0,))",
    ]
    if par.pp > 1:
        schedule = f"{par.microbatches} microbatches, {par.virtual_stages} virtual stages"
        lines.append(f"# pp={par.pp}: layer weights stacked [n_layers, ...] and split on 'stage'; the schedule "
                     f"({schedule}) is not emitted")  # fmt: skip
    if par.offload != "none":
        lines.append(f"# offload={par.offload}: not emitted (memory kinds of the shardings)")
    return "\n".join(lines) + "\n"


def jax_serve(cfg: TransformerConfig, layout: ServingLayout, batch: int, title: str) -> str:
    """The snippet for a serving layout at ``batch`` sequences per replica."""
    weights, activations = serve_specs(cfg, layout)
    names, sizes = mesh_of(layout.mesh_axes())
    lines = [
        *_header(title, names, sizes),
        "# weights by role, [in, out] as Dense kernels (Megatron split on the tensor axes)",
        *_specs("WEIGHTS", weights),
        "# activations and the KV cache, batch first",
        *_specs("ACTIVATIONS", activations),
        f"BATCH_PER_REPLICA = {batch}",
        "",
        "",
        "def jit_decode_step(step, param_specs):",
        '    """jit ``step(params, cache, tokens) -> (logits, cache)`` with the plan\'s shardings."""',
        "    params, cache = shardings(param_specs), sharding(ACTIVATIONS['kv_cache'])",
        "    return jax.jit(step, in_shardings=(params, cache, sharding(ACTIVATIONS['tokens'])),",
        "                   out_shardings=(sharding(ACTIVATIONS['logits']), cache), donate_argnums=(1,))",
    ]
    if layout.ep > 1:
        lines.append(f"# ep={layout.ep}: the experts' placement is not emitted")
    return "\n".join(lines) + "\n"
