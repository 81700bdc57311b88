"""Cross-check rooftop's FLOP count against XLA's cost analysis of a tiny JAX transformer.

The JAX model below has exactly the shapes of ``CFG`` (GQA, RoPE, RMSNorm, SwiGLU, untied
unembedding) and returns the logits of every position, as the forward of a training step
does (rooftop's forward also has the loss, which we subtract). XLA computes the attention
scores of every (query, key) pair and masks them afterwards, so we compare with
``causal=False``.

Agreement: the matrix-unit FLOPs differ from XLA's total only by the elementwise ops (norms,
rope, softmax, SiLU, residuals), which XLA counts one FLOP per element op; rooftop counts
those separately as vector FLOPs with per-element estimates, and the sum agrees within 0.5%.
"""

from __future__ import annotations

from typing import Any

import pytest

from rooftop.model import per_token
from rooftop.model.config import TransformerConfig
from rooftop.model.passes import model_costs
from rooftop.model.workload import Workload

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

pytestmark = pytest.mark.jax

B, T = 2, 128
CFG = TransformerConfig(
    name="tiny",
    vocab_size=512,
    d_model=256,
    n_layers=2,
    n_heads=4,
    n_kv_heads=2,
    head_dim=64,
    d_ff=512,
    mlp="swiglu",
    norm="rmsnorm",
    positions="rotary",
)
D, N, K, H, F, V = CFG.d_model, CFG.n_heads, CFG.n_kv_heads, CFG.head_dim, CFG.d_ff, CFG.vocab_size


def rms(x: Any, w: Any) -> Any:
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * w


def rope(x: Any) -> Any:
    half = x.shape[-1] // 2
    angle = jnp.arange(x.shape[1])[None, :, None, None] / (10000.0 ** (jnp.arange(half) / half))
    c, s = jnp.cos(angle), jnp.sin(angle)
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], -1)


def layer(x: Any, p: dict[str, Any]) -> Any:
    h = rms(x, p["n1"])
    q = rope(jnp.einsum("btd,dnh->btnh", h, p["q"])).reshape(B, T, K, N // K, H)
    k = rope(jnp.einsum("btd,dkh->btkh", h, p["k"]))
    v = jnp.einsum("btd,dkh->btkh", h, p["v"])
    scores = jnp.einsum("btkgh,bskh->bkgts", q, k) / jnp.sqrt(H * 1.0)
    scores = jnp.where(jnp.tril(jnp.ones((T, T), bool)), scores, -1e9)
    o = jnp.einsum("bkgts,bskh->btkgh", jax.nn.softmax(scores, -1), v).reshape(B, T, N, H)
    x = x + jnp.einsum("btnh,nhd->btd", o, p["o"])
    h = rms(x, p["n2"])
    act = jax.nn.silu(jnp.einsum("btd,df->btf", h, p["gate"])) * jnp.einsum("btd,df->btf", h, p["up"])
    return x + jnp.einsum("btf,fd->btd", act, p["down"])


def forward(params: dict[str, Any], tokens: Any) -> Any:
    x = params["emb"][tokens]
    for p in params["layers"]:
        x = layer(x, p)
    return rms(x, params["norm"]) @ params["unemb"]


def xla_flops() -> float:
    z = lambda *shape: jnp.zeros(shape, jnp.float32)
    one = {
        "n1": z(D),
        "n2": z(D),
        "q": z(D, N, H),
        "k": z(D, K, H),
        "v": z(D, K, H),
        "o": z(N, H, D),
        "gate": z(D, F),
        "up": z(D, F),
        "down": z(F, D),
    }
    params = {"emb": z(V, D), "norm": z(D), "unemb": z(D, V), "layers": [dict(one) for _ in range(CFG.n_layers)]}
    analysis = jax.jit(forward).lower(params, jnp.zeros((B, T), jnp.int32)).compile().cost_analysis()
    if isinstance(analysis, list):  # older jax returned one dict per device
        analysis = analysis[0]
    return float(analysis["flops"])


def rooftop_forward(causal: bool) -> tuple[float, float]:
    """(matrix FLOPs, vector FLOPs without the loss) of rooftop's training forward."""
    fwd = model_costs(CFG, Workload("train", B, T, causal=causal)).children[0]
    loss = next(c for c in fwd.children if c.name == "loss").cost.flops
    matrix = per_token.matrix_flops(fwd)
    return matrix, fwd.cost.flops - matrix - loss


def test_transformer_flops_agree_with_xla_cost_analysis() -> None:
    xla = xla_flops()
    matrix, vector = rooftop_forward(causal=False)
    # the matmuls by hand: 2 x tokens x matmul params + 2 x (QK^T + AV) over all T x T pairs
    params = CFG.n_layers * (D * N * H + 2 * D * K * H + N * H * D + 3 * D * F) + D * V
    assert matrix == 2 * B * T * params + CFG.n_layers * 2 * B * T * T * N * (H + H)
    assert matrix == pytest.approx(xla, rel=0.02)  # XLA's extra ~0.7%: the elementwise ops
    assert xla > matrix
    assert matrix + vector == pytest.approx(xla, rel=0.005)


def test_transformer_causal_count_is_below_what_an_unmasked_kernel_computes() -> None:
    causal, _ = rooftop_forward(causal=True)
    full, _ = rooftop_forward(causal=False)
    assert full - causal == pytest.approx(CFG.n_layers * 2 * B * (T * T - T * (T + 1) / 2) * N * (H + H))
