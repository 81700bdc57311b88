"""A small mock transformer for the classic profiling exercise (JAX, any devices).

    step, args = mock_transformer(sharding="naive")   # or "fixed"
    step(*args)                                       # one jitted training step

The model: ``layers`` blocks of attention-free MLPs with residuals (x + relu(x W_in) W_out)
and an output projection, trained with a squared loss; batch sharded over the mesh's
``data`` axis, weights over ``model``.

- ``fixed``: Megatron-style. W_in is split on its output (F) dim, W_out on its input (F) dim:
  the hidden activations stay sharded over model and each block needs ONE all-reduce of the
  [B, D] output (How to Scale Your Model, Part 3, case 3 then case 2).
- ``naive``: the weights are split on the other dims (W_in on D, its contracting dim; W_out on
  its output D) and the hidden activations are pinned replicated over model, so every block
  all-reduces the 4x larger [B, F] partial sums and all-gathers its output.
Profiling both shows the wasted collectives and what fixing them gains.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rooftop.errors import InvalidConfigError

if TYPE_CHECKING:
    from jax.stages import Wrapped

SHARDINGS = ("naive", "fixed")


def make_mesh(data: int | None = None, model: int = 2) -> Any:
    """A (data, model) mesh over all JAX devices (data = devices / model by default)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh

    devices = jax.devices()
    data = data or max(1, len(devices) // model)
    if data * model > len(devices):
        raise InvalidConfigError(
            f"mesh data={data} x model={model} needs {data * model} devices; JAX has "
            f"{len(devices)} (on CPU set XLA_FLAGS=--xla_force_host_platform_device_count=8)"
        )
    return Mesh(np.array(devices[: data * model]).reshape(data, model), ("data", "model"))


def mock_transformer(
    sharding: str = "fixed",
    batch: int = 64,
    d_model: int = 256,
    d_ff: int = 1024,
    layers: int = 2,
    mesh: Any = None,
    seed: int = 0,
) -> tuple[Wrapped, tuple[Any, ...]]:
    """(jitted train step, its arguments already placed on the mesh). The step returns
    (loss, new params) so repeated calls form a training loop."""
    if sharding not in SHARDINGS:
        raise InvalidConfigError(f"unknown sharding {sharding!r} (valid: {', '.join(SHARDINGS)})")
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = mesh or make_mesh()
    fixed = sharding == "fixed"
    w_in_spec = P(None, "model") if fixed else P("model", None)
    w_out_spec = P("model", None) if fixed else P(None, "model")
    hidden_spec = P("data", "model") if fixed else P("data", None)

    def put(x: Any, spec: Any) -> Any:
        return jax.device_put(x, NamedSharding(mesh, spec))

    key = jax.random.PRNGKey(seed)
    params = _mlp_params(key, layers, d_model, d_ff, lambda w: put(w, w_in_spec), lambda w: put(w, w_out_spec))
    x = put(jax.random.normal(jax.random.fold_in(key, 99), (batch, d_model), jnp.float32), P("data", None))
    y = put(jnp.zeros((batch, d_model), jnp.float32), P("data", None))

    def loss_fn(ps: Any, xb: Any, yb: Any) -> Any:
        h = xb
        for i, (w_in, w_out) in enumerate(ps):
            with jax.named_scope(f"layer{i}/mlp"):  # scopes name the ops in profiles: "mlp", "loss"
                a = jax.lax.with_sharding_constraint(jnp.maximum(h @ w_in, 0.0), NamedSharding(mesh, hidden_spec))
                h = jax.lax.with_sharding_constraint(h + a @ w_out, NamedSharding(mesh, P("data", None)))
        with jax.named_scope("loss"):
            return jnp.mean((h - yb) ** 2)

    @jax.jit
    def train_step(ps: Any, xb: Any, yb: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(ps, xb, yb)
        with jax.named_scope("optimizer"):
            new = jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, ps, grads)
        return loss, new

    return train_step, (params, x, y)


def _mlp_params(
    key: Any, layers: int, d_model: int, d_ff: int, place_in: Callable[[Any], Any], place_out: Callable[[Any], Any]
) -> list[tuple[Any, Any]]:
    """(w_in [d_model, d_ff], w_out [d_ff, d_model]) per layer, normal(0, 0.02), each placed on the mesh."""
    import jax
    import jax.numpy as jnp

    params = []
    for i in range(layers):
        k1, k2 = jax.random.split(jax.random.fold_in(key, i))
        w_in = jax.random.normal(k1, (d_model, d_ff), jnp.float32) * 0.02
        w_out = jax.random.normal(k2, (d_ff, d_model), jnp.float32) * 0.02
        params.append((place_in(w_in), place_out(w_out)))
    return params
