"""Today's models as stacks of typed blocks: hybrid attention / linear-attention / state-space layers,
MLP-only and mixer-only layers, chunked and NoPE attention, the language towers of vision-language
configs, each read from its published config.json (tests/fixtures/hf_configs/README.md cites them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.model.catalog import get_model
from rooftop.model.config import TransformerConfig
from rooftop.model.hf import config_from_hf, load_hf_config
from rooftop.model.layers import layer_groups
from rooftop.model.memory import kv_cache_bytes, kv_cache_bytes_per_token, state_bytes_per_sequence
from rooftop.model.params import param_tree
from rooftop.model.transformer import layer_costs
from rooftop.model.workload import Dtypes, Workload
from tests.conftest import run_cli

HF = Path(__file__).parents[1] / "fixtures" / "hf_configs"


def _cli_model(file: str) -> dict:
    code, out, err = run_cli("model", str(HF / file), "--json")
    assert code == 0, err
    return json.loads(out)


def _without_embedding_tables(file: str, figure: str) -> float:
    """A count without the input embedding and the output head (the "non-embedding" convention)."""
    tree = param_tree(load_hf_config(HF / file))
    tables = sum(k.params for k in tree.children if k.name in ("embedding", "unembedding"))
    return (tree.params if figure == "total" else tree.active) - tables


def _agrees(ours: float, card: float, unit: float) -> bool:
    """Within 0.5% of the card, or within half a unit of the card's last stated digit when the card
    rounds more coarsely than that ("80B" stands for anything in [79.5B, 80.5B))."""
    return abs(ours - card) <= max(0.005 * card, unit / 2)


# (file, rooftop's figure, the card's figure, the unit of its last digit, the card and its convention)
CARDS = [
    ("qwen3-next-80b-a3b.json", "total", 80e9, 1e9, "Qwen3-Next-80B-A3B card: 80B in total (stored weights)"),
    ("nemotron-h-8b.json", "total", 8e9, 1e9, "Nemotron-H-8B-Base-8K card / Nemotron-H report: 8B"),
    ("jamba-v0.1.json", "total", 52e9, 1e9, "Jamba (Lieber et al. 2024) Table 1: 52B available"),
    ("jamba-v0.1.json", "active", 12e9, 1e9, "Jamba Table 1: 12B active, the embedding table counted"),
    ("gemma-3-27b.json", "total", 27e9, 1e9, "Gemma 3 report Table 1: 27B (language tower)"),
    ("deepseek-v2-lite.json", "total", 15.7e9, 1e8, "DeepSeek-V2 report appendix B: 15.7B total"),
    ("gpt-oss-20b.json", "total", 20.91e9, 1e7, "gpt-oss model card Table 1: 20.91B total"),
    ("gpt-oss-20b.json", "active", 3.61e9, 1e7, "gpt-oss model card Table 1: 3.61B active, the embedding excluded"),
    ("llama-4-scout-17b-16e.json", "active", 17e9, 1e9, "Llama 4 card: Scout 17B active, the embedding counted"),
]


@pytest.mark.parametrize(("file", "figure", "card", "unit", "source"), CARDS, ids=[f"{c[0]}-{c[1]}" for c in CARDS])
def test_rooftop_model_on_a_published_config_matches_its_card(
    file: str, figure: str, card: float, unit: float, source: str
) -> None:
    ours = _cli_model(file)["params_total" if figure == "total" else "params_active"]
    assert _agrees(ours, card, unit), f"{ours:,.0f} vs {source}"


@pytest.mark.parametrize(
    ("file", "figure", "card", "source"),
    [
        # Qwen and Zhipu state the counts without the embedding and output tables (non-embedding)
        ("qwen3-next-80b-a3b.json", "active", 3e9, "Qwen3-Next-80B-A3B card: 3B activated"),
        ("glm-4.5-air.json", "total", 106e9, "GLM-4.5 report Table 1: GLM-4.5-Air 106B total"),
        ("glm-4.5-air.json", "active", 12e9, "GLM-4.5 report Table 1: GLM-4.5-Air 12B activated"),
        ("phi-4.json", "total", 14e9, "Phi-4 report: a 14-billion parameter model"),
    ],
)
def test_cards_that_count_without_the_embedding_tables(file: str, figure: str, card: float, source: str) -> None:
    assert _agrees(_without_embedding_tables(file, figure), card, 1e9), source


def test_exact_counts_by_hand() -> None:
    """Per-block arithmetic (transformers' modules for each family)."""
    nemo = _cli_model("nemotron-h-8b.json")
    # Mamba-2 layer: norm 4096; in_proj 4096 x (2 x 8192 + 2 x 8 x 128 + 128); conv (8192 + 2 x 8 x 128) x (4 + bias);
    # A_log, D, dt_bias 3 x 128; gated norm 8192; out_proj 8192 x 4096
    mamba = 4096 + 4096 * 18560 + 10240 * 5 + 384 + 8192 + 8192 * 4096
    attention = 4096 + 4096 * (4096 + 2 * 1024) + 4096 * 4096
    mlp = 4096 + 2 * 4096 * 21504  # squared ReLU: up and down only
    assert nemo["params_total"] == 24 * mamba + 4 * attention + 24 * mlp + 2 * 131072 * 4096 + 4096
    # Qwen3-Next: gated attention q_proj emits 2 x 16 x 256 (query and gate); gated DeltaNet in_proj_qkvz
    # 2 x 16 x 128 + 2 x 32 x 128, in_proj_ba 2 x 32, conv 8192 x 4, A_log and dt_bias 2 x 32, norm 128
    full = 2048 + 2048 * 8192 + 2 * 2048 * 512 + 4096 * 2048 + 2 * 256
    linear = 2048 + 2048 * 12288 + 2048 * 64 + 8192 * 4 + 64 + 128 + 4096 * 2048
    moe = 2048 + 2048 * 512 + 512 * 3 * 2048 * 512 + 3 * 2048 * 512 + 2048  # router, experts, shared, its gate
    assert _cli_model("qwen3-next-80b-a3b.json")["params_total"] == (
        12 * full + 36 * linear + 48 * moe + 2 * 151936 * 2048 + 2048
    )


def test_deepseek_v2_lite_active_by_hand_and_the_cards_rounding() -> None:
    """DeepSeek-V2 report, appendix B: V2-Lite "2.4B activated for each token", counted as the DeepSeek-V2
    entries count (active_excludes_embedding: V2's 20.85B for the report's 21B): the input embedding excluded
    (a lookup, not computed; with it V2-Lite would be 2.66B, further from the card).
    Per layer: MLA without query compression (norm; q 2048 x 16 x 192; kv_a 2048 x 576 and its norm 512; kv_b
    512 x 16 x 256; o 2048 x 2048); layer 0 a dense SwiGLU of 10944, the other 26 the router (64 x 2048) and
    6 routed + 2 shared experts of 1408; the final norm and the 102400 x 2048 head. That is 2.4514B, 2.1% over
    the card: no block of about 51M explains the gap (the nearest, the 27 kv_b up-projections, is 56.6M), and
    the report's one decimal reads 2.4514B as 2.4B (rounded down), so the test holds the exact count and the
    gap to the card, not the card within 0.5%."""
    attention = 2048 + 2048 * 16 * 192 + 2048 * 576 + 512 + 512 * 16 * 256 + 2048 * 2048
    dense, moe = 2048 + 3 * 2048 * 10944, 2048 + 64 * 2048 + (6 + 2) * 3 * 2048 * 1408
    active = _cli_model("deepseek-v2-lite.json")["params_active"]
    assert active == 27 * attention + dense + 26 * moe + 2048 + 102400 * 2048
    assert active / 2.4e9 - 1 == pytest.approx(0.0214, abs=0.0005)  # the gap the docstring explains


def test_falcon_h1_parallel_hybrid_by_hand_and_its_card() -> None:
    """Falcon-H1-7B (transformers FalconH1DecoderLayer): every layer one input norm, then attention (12 query
    heads and 2 KV heads of 128) and Mamba-2 (mamba_d_ssm 3072 in 24 heads, d_state 256, one group, conv 4
    with bias, no gated norm: mamba_rms_norm false) side by side on it, their outputs summed, then a SwiGLU
    MLP of 12288; untied 130048 x 3072 tables. Its model page: 7.59B parameters."""
    attention = 3072 + 3072 * 12 * 128 + 2 * 3072 * 2 * 128 + 12 * 128 * 3072
    # in_proj: z and x (2 x 3072), B and C (2 x 256), dt (24); conv over x, B, C (3584) x 4 taps + bias;
    # A_log, D, dt_bias per head; out_proj 3072 x 3072
    mamba = 3072 * (2 * 3072 + 2 * 256 + 24) + 3584 * 4 + 3584 + 3 * 24 + 3072 * 3072
    mlp = 3072 + 3 * 3072 * 12288
    total = _cli_model("falcon-h1-7b.json")["params_total"]
    assert total == 44 * (attention + mamba + mlp) + 2 * 130048 * 3072 + 3072
    assert abs(total - 7.59e9) <= 0.005 * 7.59e9
    cfg = load_hf_config(HF / "falcon-h1-7b.json")
    # both caches in every layer: the attention's KV grows with the context, the Mamba-2 state does not
    assert kv_cache_bytes_per_token(cfg) == 44 * 2 * 2 * 128 * 2
    assert state_bytes_per_sequence(cfg) == 44 * (3072 * 256 + 3 * 3584) * 2
    assert kv_cache_bytes(cfg, 1, 8192) - kv_cache_bytes(cfg, 1, 4096) == 4096 * kv_cache_bytes_per_token(cfg)


def test_llama4_scout_total_with_its_vision_encoder() -> None:
    """Meta's 109B for Scout includes the vision encoder, counted here from the published vision_config
    (transformers Llama4VisionModel): patch embedding 3 x 14 x 14 x 1408, class embedding 1408, positions
    (24^2 + 1) x 1408, two LayerNorms, 34 layers of biased q/k/v/o and fc1/fc2 (1408 <-> 5632) with two
    LayerNorms, the pixel-shuffle MLP (5632 x 4096 + 4096 x 4096) and the projector 4096 x 5120."""
    layer = 4 * (1408 * 1408 + 1408) + (1408 * 5632 + 5632) + (5632 * 1408 + 1408) + 4 * 1408
    vision = 588 * 1408 + 1408 + 577 * 1408 + 4 * 1408 + 34 * layer + 5632 * 4096 + 4096 * 4096 + 4096 * 5120
    text = _cli_model("llama-4-scout-17b-16e.json")["params_total"]
    assert _agrees(text + vision, 109e9, 1e9) and abs(text + vision - 109e9) < 0.005 * 109e9


def test_gemma3_as_published_takes_the_transformers_defaults() -> None:
    """The hub's Gemma 3 27B text_config leaves out vocab_size and hidden_activation (Gemma3TextConfig:
    262208, gelu_pytorch_tanh); its 25,600M non-embedding parameters (Gemma 3 report, Table 1)."""
    cfg = load_hf_config(HF / "gemma-3-27b.json")
    assert (cfg.vocab_size, cfg.mlp, cfg.attention_pattern) == (262208, "geglu", ("local",) * 5 + ("global",))
    assert _without_embedding_tables("gemma-3-27b.json", "total") == pytest.approx(25_600e6, rel=1e-4)


def test_layer_patterns_map_onto_typed_blocks() -> None:
    def groups(file: str) -> dict[str, int]:
        return {g.name: g.count for g in layer_groups(load_hf_config(HF / file))}

    assert groups("qwen3-next-80b-a3b.json") == {"moe-linear": 36, "moe-global": 12}
    assert groups("nemotron-h-8b.json") == {"ssm": 24, "dense": 24, "global": 4}
    # Jamba: attention at i % 8 == 4 (even: a dense MLP), experts at i % 2 == 1
    assert groups("jamba-v0.1.json") == {"dense-ssm": 12, "moe-ssm": 16, "dense-global": 4}
    # Llama 4: RoPE layers attend in 8192-token chunks, every 4th (NoPE) layer globally; every layer MoE
    scout = load_hf_config(HF / "llama-4-scout-17b-16e.json")
    assert {g.name: (g.count, g.window) for g in layer_groups(scout)} == {
        "moe-chunked": (36, 8192),
        "moe-global": (12, 0),
    }
    # DeepSeek-V2-Lite: one dense layer, then MLA + shared and routed experts; GLM-4.5-Air the same layout
    assert groups("deepseek-v2-lite.json") == {"dense": 1, "moe": 26}
    assert groups("glm-4.5-air.json") == {"dense": 1, "moe": 45}


def test_qwen_moe_sparse_step_and_mlp_only_layers() -> None:
    data = json.loads((HF / "qwen3-30b-a3b.json").read_text())
    cfg = config_from_hf({**data, "decoder_sparse_step": 2, "mlp_only_layers": [1]}, "q")
    # layer i is MoE when (i + 1) % 2 == 0 and i is not listed: 1, 3, 5, ... less layer 1
    assert {g.name: g.count for g in layer_groups(cfg)} == {"dense": 25, "moe": 23}


def test_linear_and_ssm_state_is_constant_in_context() -> None:
    """KV plus state per sequence: the attention layers grow with the context, the linear-attention and
    Mamba layers hold a constant state (recurrent state + conv_kernel - 1 conv inputs per channel)."""
    qn = load_hf_config(HF / "qwen3-next-80b-a3b.json")
    # 36 gated DeltaNet layers: 32 value heads x 128 x 128 state, 3 x 8192 conv inputs, bf16
    assert state_bytes_per_sequence(qn) == 36 * (32 * 128 * 128 + 3 * 8192) * 2
    # 12 full-attention layers: 2 x 2 KV heads x 256 x 2 bytes per token
    assert kv_cache_bytes_per_token(qn) == 12 * 2 * 2 * 256 * 2
    nemo = load_hf_config(HF / "nemotron-h-8b.json")
    # 24 Mamba-2 layers: 8192 x 128 state, 3 x (8192 + 2 x 8 x 128) conv inputs
    assert state_bytes_per_sequence(nemo) == 24 * (8192 * 128 + 3 * 10240) * 2
    for cfg in (qn, nemo):
        growth = kv_cache_bytes(cfg, 1, 8192) - kv_cache_bytes(cfg, 1, 4096)
        assert growth == 4096 * kv_cache_bytes_per_token(cfg)
        per_sequence = 4096 * kv_cache_bytes_per_token(cfg) + state_bytes_per_sequence(cfg)
        assert kv_cache_bytes(cfg, 3, 4096) == 3 * per_sequence


@pytest.mark.parametrize(("file", "chip", "extra"), [
    ("nemotron-h-8b.json", "h100", ()),
    ("qwen3-next-80b-a3b.json", "h200", ("--weight-dtype", "fp8")),
])  # fmt: skip
def test_rooftop_serve_holds_a_constant_state_per_sequence(file: str, chip: str, extra: tuple[str, ...]) -> None:
    """rooftop serve on one chip, one sequence: the cache it sizes grows with the context only by the
    attention layers' KV; the rest is the linear / SSM state, whatever the prompt."""
    cfg = load_hf_config(HF / file)

    def kv(prompt: int) -> float:
        argv = ("serve", str(HF / file), "--chip", chip, "--chips", "1", "--batch", "1", "--gen-len", "1")
        code, out, err = run_cli(*argv, "--prompt-len", str(prompt), *extra, "--json")
        assert code == 0, err
        return float(json.loads(out)["points"][0]["memory"]["kv_cache_bytes"])

    short, long = kv(1024), kv(8192)
    assert long - short == (8192 - 1024) * kv_cache_bytes_per_token(cfg)
    assert short == pytest.approx((1024 + 1) * kv_cache_bytes_per_token(cfg) + state_bytes_per_sequence(cfg))


def test_prefill_of_recurrent_blocks_is_priced_by_their_own_flops() -> None:
    """Gated DeltaNet: 7 dk dv FLOPs per token and value head, linear in the prompt (attention's pairs grow
    as its square); Mamba-2: 6 d_state FLOPs per token and channel."""
    qn = load_hf_config(HF / "qwen3-next-80b-a3b.json")
    lin, full = (g for g in layer_groups(qn))

    def op(cfg, group, block: str, name: str, tokens: int) -> float:
        tree = layer_costs(cfg, Workload("prefill", 1, tokens), Dtypes(), group)
        return next(leaf for path, leaf in tree.leaves() if path == f"layer/{block}/{name}").cost.flops

    assert op(qn, lin, "linear_attention", "scan", 4096) == 4096 * 32 * 128 * 128 * 7
    assert op(qn, lin, "linear_attention", "scan", 8192) == 2 * op(qn, lin, "linear_attention", "scan", 4096)
    assert op(qn, full, "attention", "scores", 8192) > 3.9 * op(qn, full, "attention", "scores", 4096)
    nemo = load_hf_config(HF / "nemotron-h-8b.json")
    ssm = next(g for g in layer_groups(nemo) if g.mixer == "ssm")
    assert op(nemo, ssm, "ssm", "scan", 4096) == 4096 * 8192 * 128 * 6


NEW_FAMILIES = ["qwen3-next-80b-a3b.json", "nemotron-h-8b.json", "jamba-v0.1.json", "llama-4-scout-17b-16e.json",
                "glm-4.5-air.json", "deepseek-v2-lite.json", "falcon-h1-7b.json"]  # fmt: skip


@pytest.mark.parametrize("file", NEW_FAMILIES)
def test_rooftop_train_runs_on_each_new_family(file: str) -> None:
    code, out, err = run_cli(
        "train", str(HF / file), "--chip", "h100", "--chips", "64", "--batch-tokens", "1M", "--seq-len", "4096",
        "--top", "1", "--json",
    )  # fmt: skip
    assert code == 0, err
    best = json.loads(out)["best"]
    assert best["step_time_s"] > 0 and 0 < best["mfu"] < 1


def test_catalog_has_todays_families_and_unknown_names_point_to_config_json() -> None:
    for name in ("qwen3-8b", "qwen3-30b-a3b", "gpt-oss-120b", "gemma-3-27b", "deepseek-v2-lite", "qwen3-next",
                 "glm-4.5-air", "llama-4-scout", "nemotron-h-8b", "jamba", "phi-4"):  # fmt: skip
        assert get_model(name).n_layers > 0
    # the catalog entry and the published config.json describe the same model
    for name, file in (
        ("qwen3-next-80b-a3b", "qwen3-next-80b-a3b.json"),
        ("nemotron-h-8b", "nemotron-h-8b.json"),
        ("falcon-h1-7b", "falcon-h1-7b.json"),
    ):
        assert param_tree(get_model(name)).params == param_tree(load_hf_config(HF / file)).params
    code, _, err = run_cli("model", "qwen3-9b")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "did you mean qwen3-8b" in err and "config.json" in err


def test_decode_reads_the_state_once_whatever_the_context() -> None:
    """A decode step reads (and writes back) each sequence's linear / SSM state once, and the attention
    layers' KV over the context: only the latter grows with the context."""
    from rooftop.model.passes import model_costs

    for file in ("qwen3-next-80b-a3b.json", "nemotron-h-8b.json", "falcon-h1-7b.json"):
        cfg = load_hf_config(HF / file)

        def cache(context: int, cfg: TransformerConfig = cfg) -> float:
            return model_costs(cfg, Workload("decode", 1, 1, context), Dtypes()).cost.bytes_of("kv_cache")

        attention_kv = kv_cache_bytes_per_token(cfg)  # bytes per cached token over the attention layers
        # a step reads every cached token's keys and values, and writes its own token's
        assert cache(8192) - cache(1024) == pytest.approx((8192 - 1024) * attention_kv)
        assert cache(1024) == pytest.approx((1024 + 1) * attention_kv + 2 * state_bytes_per_sequence(cfg))


@pytest.mark.parametrize("name", ["qwen3-next-80b-a3b", "nemotron-h-8b", "jamba-v0.1", "llama-4-scout-17b-16e",
                                  "gemma-3-27b", "glm-4.5-air", "deepseek-v2-lite", "mixtral-8x7b"])  # fmt: skip
def test_layer_groups_cover_every_layer_once(name: str) -> None:
    """The closed-form groups agree with the per-layer rule: each layer's (mixer, feed-forward, window)."""
    cfg = get_model(name)
    per_layer: dict[tuple[str, str, int], int] = {}
    for i in range(cfg.n_layers):
        key = (cfg.layer_attention(i), cfg.layer_ffn(i), cfg.layer_window(i))
        per_layer[key] = per_layer.get(key, 0) + 1
    grouped = {
        (g.mixer, "moe" if g.moe else "dense" if g.mlp else "none", g.window): g.count for g in layer_groups(cfg)
    }
    assert grouped == per_layer and sum(grouped.values()) == cfg.n_layers


def test_gpt_oss_active_counts_as_its_card_counts() -> None:
    """OpenAI's gpt-oss model card (Table 1): gpt-oss-120b 116.83B total, 5.13B active per token, the
    embedding table (201,088 x 2,880 = 579M) not counted as active; the unembedding is."""
    code, out, err = run_cli("model", "gpt-oss-120b", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["params_active"] == pytest.approx(5.13e9, rel=0.005)
    assert d["params_total"] == pytest.approx(116.83e9, rel=0.005)
    assert d["params_breakdown"]["children"][0]["name"] == "embedding"
    assert d["params_breakdown"]["children"][0]["active"] == 0


def test_a_vision_language_wrapper_is_read_through_its_text_config() -> None:
    """Any config whose own architecture is not a text model but whose text_config names one: its language
    tower (by structure, not by the wrapper's name)."""
    tower = json.loads((HF / "qwen3-8b.json").read_text())
    cfg = config_from_hf({"architectures": ["SomeVisionModelForConditionalGeneration"], "model_type": "some_vlm",
                          "text_config": tower, "vision_config": {"hidden_size": 1152}}, "vlm")  # fmt: skip
    assert (cfg.n_layers, cfg.d_model, cfg.qk_norm) == (36, 4096, True)
