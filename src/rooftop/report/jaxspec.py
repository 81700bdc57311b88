"""The sharding notation written as JAX code: a ``Mesh`` and a ``PartitionSpec`` /
``NamedSharding`` per array ("How to Scale Your Model", Part 10 "Programming TPUs in JAX": A[I_X, J]
on Mesh({'X': .., 'Y': ..}) is ``NamedSharding(mesh, P('X', None))``; a dim over several axes is a
tuple, ``P(('X', 'Y'), None)``). Text only: rooftop never imports JAX here; the tests run the code
on 8 CPU devices and read the collectives XLA inserts back with rooftop's HLO analysis.

An unreduced axis ({U_X}) has no PartitionSpec: JAX keeps arrays reduced, so the code asks for the
reduced array and XLA inserts the sum (the all-reduce or reduce-scatter of the strategy).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rooftop.dtypes import canonical_dtype
from rooftop.sharding.notation import MatmulExpr
from rooftop.sharding.shard import Sharding

#: rooftop's dtype names -> jax.numpy's
_JNP = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "float8_e4m3fn", "int8": "int8"}


def partition_spec(t: Sharding) -> str:
    """ "P('X', None)" for A[I_X, J]; "P(('X', 'Y'), None)" for A[I_XY, J]."""
    parts = []
    for axes in t.axes:
        if not axes:
            parts.append("None")
        elif len(axes) == 1:
            parts.append(repr(axes[0]))
        else:
            parts.append("(" + ", ".join(repr(a) for a in axes) + ")")
    return f"P({', '.join(parts)})"


def mesh_code(mesh_shape: Mapping[str, int]) -> str:
    """The devices in row-major order (as ``rooftop hlo --mesh`` numbers them) under named axes; a
    ``Mesh`` of the first devices rather than ``jax.make_mesh``, whose device order and axis types vary
    between JAX versions."""
    sizes = ", ".join(str(v) for v in mesh_shape.values())
    names = ", ".join(repr(k) for k in mesh_shape)
    comma = "," if len(mesh_shape) == 1 else ""
    n = 1
    for v in mesh_shape.values():
        n *= v
    return f"Mesh(np.array(jax.devices()[:{n}]).reshape(({sizes}{comma})), ({names}{comma}))"


def _jnp(dtype: str) -> str:
    name = canonical_dtype(dtype)
    return _JNP.get(name, name)


_HEAD = (
    "import jax\nimport jax.numpy as jnp\nimport numpy as np\n"
    "from jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n\n"
)


def array_code(t: Sharding, shape: tuple[int, ...], dtype: str, mesh_shape: Mapping[str, int]) -> str:
    """A runnable snippet placing a zero array of ``shape`` with sharding ``t``."""
    return (
        f"{_HEAD}mesh = {mesh_code(mesh_shape)}\n"
        f"{t.name} = jax.device_put(jnp.zeros({tuple(shape)!r}, jnp.{_jnp(dtype)}), "
        f"NamedSharding(mesh, {partition_spec(t)}))\n"
    )


def jax_array_dict(t: Sharding, shape: tuple[int, ...], dtype: str, mesh_shape: Mapping[str, int]) -> dict[str, Any]:
    """The ``jax`` key of ``rooftop shard``."""
    return {
        "mesh": mesh_code(mesh_shape),
        "partition_spec": partition_spec(t),
        "named_sharding": f"NamedSharding(mesh, {partition_spec(t)})",
        "code": array_code(t, shape, dtype, mesh_shape),
    }


def _einsum(expr: MatmulExpr) -> str:
    letters: dict[str, str] = {}
    for d in (*expr.lhs.dim_names, *expr.rhs.dim_names, *expr.out.dim_names):
        letters.setdefault(d, "abcdefghijklmnopqrstuvwxyz"[len(letters)])

    def sub(names: tuple[str, ...]) -> str:
        return "".join(letters[n] for n in names)

    return f"{sub(expr.lhs.dim_names)},{sub(expr.rhs.dim_names)}->{sub(expr.out.dim_names)}"


def matmul_code(
    expr: MatmulExpr,
    sizes: Mapping[str, int],
    lhs: Sharding,
    rhs: Sharding,
    out: Sharding,
    dtypes: tuple[str, str],
    mesh_shape: Mapping[str, int],
) -> str:
    """A runnable snippet: the mesh, both inputs placed with their shardings, the matmul jitted with
    the output's, and its lowered HLO (``rooftop hlo`` reads it)."""
    placed = [
        f"{v} = jax.device_put(jnp.ones({tuple(sizes[d] for d in t.dims)!r}, jnp.{_jnp(dt)}), "
        f"NamedSharding(mesh, {partition_spec(t)}))\n"
        for v, t, dt in (("a", lhs, dtypes[0]), ("b", rhs, dtypes[1]))
    ]
    return (
        f"{_HEAD}mesh = {mesh_code(mesh_shape)}\n"
        + "".join(placed)
        + f"f = jax.jit(lambda a, b: jnp.einsum({_einsum(expr)!r}, a, b), "
        + f"out_shardings=NamedSharding(mesh, {partition_spec(out)}))\n"
        + "hlo = f.lower(a, b).compile().as_text()  # the collectives XLA chose: rooftop hlo reads this text\n"
    )


def jax_matmul_dict(
    expr: MatmulExpr,
    sizes: Mapping[str, int],
    lhs: Sharding,
    rhs: Sharding,
    out: Sharding,
    dtypes: tuple[str, str],
    mesh_shape: Mapping[str, int],
) -> dict[str, Any]:
    """The ``jax`` key of a sharded ``rooftop matmul``."""
    return {
        "mesh": mesh_code(mesh_shape),
        "lhs": partition_spec(lhs),
        "rhs": partition_spec(rhs),
        "out": partition_spec(out),
        "code": matmul_code(expr, sizes, lhs, rhs, out, dtypes, mesh_shape),
    }


#: a training layout's degrees -> mesh axis names, outermost first (tensor parallelism innermost, on the
#: fastest links, as plan/train/step.layout_mesh lays it)
PLAN_AXES = (("pp", "stage"), ("dp", "data"), ("fsdp", "fsdp"), ("cp", "seq"), ("ep", "expert"), ("tp", "model"))


def _spec(mesh: Mapping[str, int], *dims: tuple[str, ...]) -> str:
    parts = []
    for axes in dims:
        have = [a for a in axes if a in mesh]
        parts.append("None" if not have else repr(have[0]) if len(have) == 1 else repr(tuple(have)))
    return f"P({', '.join(parts)})"


def train_jax_dict(par: Any) -> dict[str, Any]:
    """The ``jax`` key of ``rooftop train``: the best layout as a JAX mesh (one axis per degree above 1)
    and the PartitionSpec of each kind of array ("How to Scale Your Model", Part 5 in the notation of
    Part 10): the batch over data and fsdp, the sequence over seq (context parallelism), weights'
    d_model dim over fsdp (and data under ZeRO-3), their heads / MLP width over model (Megatron), experts
    over expert, and stacked layers over stage."""
    mesh = {name: int(getattr(par, field)) for field, name in PLAN_AXES if int(getattr(par, field)) > 1}
    w = ("data", "fsdp") if int(getattr(par, "zero_stage", 0)) == 3 else ("fsdp",)
    batch = ("data", "fsdp", "expert")
    specs = {
        "activations[B, T, D]": _spec(mesh, batch, ("seq",), ()),
        "attention.w_qkv[D, N*H]": _spec(mesh, w, ("model",)),
        "attention.w_o[N*H, D]": _spec(mesh, ("model",), w),
        "mlp.w_in[D, F]": _spec(mesh, w, ("model",)),
        "mlp.w_out[F, D]": _spec(mesh, ("model",), w),
        "experts.w_in[E, D, F]": _spec(mesh, ("expert",), w, ("model",)),
        "experts.w_out[E, F, D]": _spec(mesh, ("expert",), ("model",), w),
        "embedding[V, D]": _spec(mesh, ("model",), w),
        "layers[L, ...] (stacked)": _spec(mesh, ("stage",)),
    }
    return {"mesh": mesh, "mesh_code": mesh_code(mesh) if mesh else "", "partition_specs": specs}
