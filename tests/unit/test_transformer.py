"""Transformer math on small configs, every expected value written out as arithmetic."""

from __future__ import annotations

import pytest

from rooftop.cost.op import attended_pairs
from rooftop.model import activations, per_token
from rooftop.model import memory as mem
from rooftop.model import transformer as tf
from rooftop.model.blocks import MLAConfig, MoEConfig
from rooftop.model.config import TransformerConfig
from rooftop.model.layers import layer_groups
from rooftop.model.params import param_tree, params_matmul_active, params_total
from rooftop.model.passes import model_costs
from rooftop.model.workload import Workload

# D=256, N=8 heads of H=32, K=2 KV heads, F=688 SwiGLU, V=1000, L=4, untied.
SMALL = TransformerConfig(name="small", vocab_size=1000, d_model=256, n_layers=4, n_heads=8, n_kv_heads=2, d_ff=688)
LAYER_MATMUL = 256 * 8 * 32 + 2 * 256 * 2 * 32 + 8 * 32 * 256 + 3 * 256 * 688
SMALL_N = 4 * LAYER_MATMUL + 1000 * 256  # layers + unembedding; the embedding lookup is no matmul


def small_attention_per_token(t: int) -> float:
    return 4 * 2 * 8 * (32 + 32) * (t + 1) / 2  # L x (QK^T + AV per pair) x mean keys per query


def test_small_params_by_hand() -> None:
    tree = param_tree(SMALL)
    assert tree.params == 2 * 1000 * 256 + 4 * (LAYER_MATMUL + 2 * 256) + 256
    assert tree.active == tree.params
    assert tree.matmul == SMALL_N
    assert tree.find("layers/dense/attention/k").params == 4 * 256 * 2 * 32
    assert tree.find("layers/dense").count == 4


def test_tied_embeddings_store_once_but_multiply() -> None:
    tied = TransformerConfig(
        name="t", vocab_size=1000, d_model=256, n_layers=4, n_heads=8, n_kv_heads=2, d_ff=688, tied_embeddings=True
    )
    assert params_total(tied) == params_total(SMALL) - 1000 * 256
    assert params_matmul_active(tied) == SMALL_N


def test_biases_and_learned_positions_and_layernorm() -> None:
    gpt = TransformerConfig(
        name="g",
        vocab_size=100,
        d_model=64,
        n_layers=2,
        n_heads=4,
        d_ff=256,
        mlp="gelu",
        norm="layernorm",
        norm_bias=True,
        positions="learned",
        max_seq_len=128,
        tied_embeddings=True,
        qkv_bias=True,
        out_bias=True,
        mlp_bias=True,
    )
    layer = (4 * 64 * 64 + 4 * 64) + (2 * 64 * 256 + 256 + 64) + 2 * 2 * 64  # attn+biases, mlp+biases, 2 LNs
    assert params_total(gpt) == 100 * 64 + 128 * 64 + 2 * layer + 2 * 64
    assert params_matmul_active(gpt) == 2 * (4 * 64 * 64 + 2 * 64 * 256) + 100 * 64


def test_attended_pairs_closed_forms() -> None:
    assert attended_pairs(10, 10) == 10 * 11 / 2
    assert attended_pairs(10, 10, window=4) == 1 + 2 + 3 + 4 * 7
    assert attended_pairs(1, 100) == 100
    assert attended_pairs(1, 100, window=4) == 4
    assert attended_pairs(4, 10) == 7 + 8 + 9 + 10  # a chunk after 6 cached tokens
    assert attended_pairs(10, 10, causal=False) == 10 * 10


def test_six_n_plus_attention_rule() -> None:
    t = 512
    a = small_attention_per_token(t)
    assert per_token.attention_flops_per_token(SMALL, t) == pytest.approx(a)
    assert per_token.flops_per_token_forward(SMALL, t) == pytest.approx(2 * SMALL_N + a)
    assert per_token.flops_per_token_train(SMALL, t) == pytest.approx(6 * SMALL_N + 3 * a)


def test_remat_recompute_flops() -> None:
    t = 512
    a = small_attention_per_token(t)
    layers_n = 4 * LAYER_MATMUL
    assert per_token.recompute_flops_per_token(SMALL, t, "none") == 0
    assert per_token.recompute_flops_per_token(SMALL, t, "selective") == pytest.approx(a)
    assert per_token.recompute_flops_per_token(SMALL, t, "dots") == pytest.approx(a)  # + vector ops only
    assert per_token.recompute_flops_per_token(SMALL, t, "full") == pytest.approx(2 * layers_n + a)
    assert per_token.flops_per_token_train(SMALL, t, "full") == pytest.approx(6 * SMALL_N + 3 * a + 2 * layers_n + a)


def test_op_level_selective_remat_recomputes_every_second_matmul() -> None:
    """torchtitan's op-level policy: per layer, the weight matmuls counted in forward order (q, k, v, o, gate,
    up, down); the 2nd, 4th and 6th (k, o, up) run again, the attention core does not. Llama 3.1 8B: d 4096,
    8 KV heads of 128, F 14336, 32 layers; what a layer keeps per token: input, q, v, the flash softmax
    statistics (2 x 32 heads), the attention output and gate, in bf16."""
    from rooftop.model.catalog import get_model

    cfg = get_model("llama-3.1-8b")
    k, o, up = 4096 * 1024, 4096 * 4096, 4096 * 14336
    assert per_token.recompute_flops_per_token(cfg, 8192, "selective-op") == 2 * 32 * (k + o + up)
    kept = 4096 + 4096 + 1024 + 2 * 32 + 4096 + 14336
    assert activations.activation_bytes_per_token(cfg, 8192, "selective-op", flash=True) == 32 * kept * 2


def test_layer_ops_prefill_and_decode() -> None:
    b, t = 2, 16
    pre = dict(tf.layer_costs(SMALL, Workload("prefill", b, t)).walk())
    assert pre["layer/attention/q"].cost.flops == 2 * b * t * 256 * 8 * 32
    assert pre["layer/attention/scores"].cost.flops == 2 * b * (t * (t + 1) / 2) * 8 * 32
    assert pre["layer/mlp/down"].cost.flops == 2 * b * t * 688 * 256
    assert pre["layer/attention/kv_cache_write"].cost.hbm_bytes == b * t * 2 * 2 * 32 * 2
    dec = dict(tf.layer_costs(SMALL, Workload("decode", b, 1, 100)).walk())
    assert dec["layer/attention/values"].cost.flops == 2 * b * 100 * 8 * 32
    # decode reads the whole weight: the q projection moves 256 x 256 bf16 weights + tiny activations
    assert dec["layer/attention/q"].cost.hbm_bytes == (256 * 256 + b * 256 + b * 256) * 2
    assert dec["layer/attention/scores"].cost.hbm_bytes == b * 256 * 2 + b * 100 * 2 * 32 * 2


def test_int8_kv_cache_halves_decode_kv_reads() -> None:
    from rooftop.model.workload import Dtypes

    w = Workload("decode", 1, 1, 1000)
    bf16 = dict(tf.layer_costs(SMALL, w).walk())["layer/attention/scores"].cost.hbm_bytes
    int8 = dict(tf.layer_costs(SMALL, w, Dtypes(kv_cache="int8")).walk())["layer/attention/scores"].cost.hbm_bytes
    assert bf16 - int8 == 1000 * 2 * 32 * (2 - 1)


def test_model_costs_structure_and_train_is_three_forwards() -> None:
    w = Workload("train", 2, 64)
    tree = model_costs(SMALL, w)
    names = [c.name for c in tree.children]
    assert names == ["forward", "backward", "recompute"]
    fwd, bwd, _ = tree.children
    assert bwd.cost.flops == pytest.approx(2 * fwd.cost.flops)
    assert per_token.matrix_flops(tree) == pytest.approx(3 * per_token.matrix_flops(fwd))
    pre = model_costs(SMALL, Workload("prefill", 2, 64))
    # prefill computes logits of the last token only
    assert dict(pre.walk())["model/unembedding"].cost.flops == 2 * 2 * 256 * 1000


def test_sliding_window_groups_and_attention() -> None:
    cfg = TransformerConfig(
        name="w",
        vocab_size=1000,
        d_model=256,
        n_layers=4,
        n_heads=8,
        n_kv_heads=2,
        d_ff=688,
        sliding_window=64,
        attention_pattern=("local", "global"),
    )
    groups = layer_groups(cfg)
    assert [(g.name, g.count, g.window) for g in groups] == [("dense-local", 2, 64), ("dense-global", 2, 0)]
    t = 256
    local = attended_pairs(t, t, 64) / t
    glob = (t + 1) / 2
    assert per_token.attention_flops_per_token(cfg, t) == pytest.approx(2 * 2 * 8 * 64 * (local + glob))
    assert mem.kv_cache_bytes(cfg, 3, 1000) == 3 * (2 * 64 + 2 * 1000) * 2 * 2 * 32 * 2


SMALL_MOE = TransformerConfig(
    name="moe",
    vocab_size=1000,
    d_model=256,
    n_layers=4,
    n_heads=8,
    n_kv_heads=2,
    d_ff=688,
    moe=MoEConfig(n_experts=4, top_k=2, d_ff_expert=128, n_shared_experts=1, first_dense_layers=1),
)


def test_moe_params_total_and_active() -> None:
    attn = 256 * 8 * 32 + 2 * 256 * 2 * 32 + 8 * 32 * 256 + 256
    expert = 3 * 256 * 128
    moe_layer = attn + 256 + 256 * 4 + 4 * expert + expert
    dense_layer = attn + 256 + 3 * 256 * 688
    emb = 2 * 1000 * 256 + 256
    tree = param_tree(SMALL_MOE)
    assert [(g.name, g.count) for g in layer_groups(SMALL_MOE)] == [("dense", 1), ("moe", 3)]
    assert tree.params == emb + dense_layer + 3 * moe_layer
    assert tree.active == emb + dense_layer + 3 * (moe_layer - 2 * expert)
    assert tree.find("layers/moe/moe/experts").active == 3 * 2 * expert


def test_moe_ops_and_expert_weight_reads() -> None:
    g = layer_groups(SMALL_MOE)[1]
    dec = dict(tf.layer_costs(SMALL_MOE, Workload("decode", 1, 1, 10), group=g).walk())
    assert dec["layer/moe/experts/up"].cost.flops == 2 * 2 * 256 * 128  # 1 token x top-2
    # one token touches exactly its 2 experts: E (1 - (1 - k/E)^1) = k
    assert dec["layer/moe/experts/up"].cost.hbm_bytes == (2 * 256 + 2 * 256 * 128 + 2 * 128) * 2
    big = dict(tf.layer_costs(SMALL_MOE, Workload("prefill", 64, 128), group=g).walk())
    weights = big["layer/moe/experts/up"].cost.hbm_bytes - (64 * 128 * 2 * (256 + 128)) * 2
    assert weights == pytest.approx(4 * 256 * 128 * 2)  # every expert read once


SMALL_MLA = TransformerConfig(
    name="mla",
    vocab_size=1000,
    d_model=256,
    n_layers=4,
    n_heads=8,
    d_ff=688,
    mla=MLAConfig(kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32, q_lora_rank=96),
)
MLA_ATTN = 256 * 96 + 96 + 96 * 8 * 48 + 256 * (64 + 16) + 64 + 64 * 8 * (32 + 32) + 8 * 32 * 256 + 256


def test_mla_params_and_kv_cache() -> None:
    assert param_tree(SMALL_MLA).find("layers/dense/attention").params == 4 * MLA_ATTN
    assert SMALL_MLA.head_dim == 32 + 16
    assert mem.kv_cache_bytes_per_token(SMALL_MLA) == 4 * (64 + 16) * 2
    assert mem.kv_cache_bytes_per_token(SMALL_MLA, "fp8") == 4 * (64 + 16) * 1


def test_mla_absorbed_decode_keeps_matmul_flops_and_changes_attention() -> None:
    ctx = 300
    dec = model_costs(SMALL_MLA, Workload("decode", 1, 1, ctx))
    attn = sum(t.cost.flops for _, t in dec.walk() if t.name in ("scores", "values"))
    assert attn == 4 * ctx * (2 * 8 * (64 + 16) + 2 * 8 * 64)  # over the latent: R_kv + H_rope, then R_kv
    assert per_token.matrix_flops(dec) - attn == 2 * params_matmul_active(SMALL_MLA)
    t = 128
    naive = per_token.attention_flops_per_token(SMALL_MLA, t)
    assert naive == pytest.approx(4 * 2 * 8 * (48 + 32) * (t + 1) / 2)
    forward = per_token.flops_per_token_forward(SMALL_MLA, t)
    assert forward == pytest.approx(2 * params_matmul_active(SMALL_MLA) + naive)


def test_kv_cache_gqa() -> None:
    assert mem.kv_cache_bytes_per_token(SMALL) == 4 * 2 * 2 * 32 * 2
    assert mem.kv_cache_bytes(SMALL, 8, 1000, "int8") == 8 * 1000 * 4 * 2 * 2 * 32 * 1


def test_activations_match_korthikanti_without_dropout() -> None:
    """Korthikanti 2022 section 4.1: 34 s b h + 5 a s^2 b bytes per layer with dropout; minus the
    dropout masks/outputs (2 s b h + 3 a s^2 b) that is 32 D + 2 N T bytes per token."""
    d, n, t = 256, 8, 512
    gpt = TransformerConfig(
        name="g",
        vocab_size=1000,
        d_model=d,
        n_layers=3,
        n_heads=n,
        d_ff=4 * d,
        mlp="gelu",
        norm="layernorm",
        norm_bias=True,
        positions="learned",
        max_seq_len=t,
    )
    layer = activations.activation_bytes_per_token_layer
    assert layer(gpt, t, "none") == 32 * d + 2 * n * t
    assert layer(gpt, t, "selective") == 32 * d
    assert layer(gpt, t, "full") == 2 * d
    assert activations.activation_bytes_per_token(gpt, t, "full") == 3 * 2 * d
    assert layer(gpt, t, "dots") == 2 * (d + 3 * d + d + 4 * d)  # input, q/k/v, o, up


def test_training_bytes_per_param() -> None:
    per_param = mem.training_bytes_per_param()
    assert per_param.as_dict() == {"weights": 2, "grads": 2, "master": 4, "optimizer": 8}
    assert per_param.total == 2 + 2 + 4 + 8
    p = mem.TrainingPrecision(params="fp32", grads="fp32", master=None, optimizer="sgd")
    assert mem.training_bytes_per_param(p).total == 4 + 4
    got = mem.training_memory_bytes(SMALL, batch=2, seq_len=64, remat="full")
    assert got["activations"] == 2 * 64 * 4 * 2 * 256
    assert got["logits"] == 2 * 64 * 1000 * 4
    assert got["weights"] == 2 * params_total(SMALL)
    assert got.total == sum(got.as_dict().values())
