"""The planners consume block costs and model properties (what the KV cache holds, whether KV heads
constrain tp, how many tensor-parallel regions a layer has), never a model-variant flag: no file of
plan/ reads a variant field of TransformerConfig (MLA, linear attention, SSM, the layer patterns,
the biases and norms). Mixture of experts stays readable: expert parallelism is a degree of the layout,
and the planners size it from the expert count."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import rooftop.plan
from rooftop.model.config import TransformerConfig

PLAN = Path(rooftop.plan.__file__).parent

#: the fields of TransformerConfig a planner may read: sizes and counts, the name, and the experts
SIZES = {"name", "vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "n_kv_heads", "head_dim", "max_seq_len"}
ALLOWED = SIZES | {"moe", "source"}
VARIANT_FLAGS = sorted(f.name for f in dataclasses.fields(TransformerConfig) if f.name not in ALLOWED)
#: the methods of TransformerConfig that read a layer's kind (the planners get them through model/layers.py
#: and the block costs instead)
LAYER_KIND = ("layer_attention", "layer_ffn", "layer_is_moe", "layer_window", "mlp_kind", "norm_kind")


def _hits() -> list[str]:
    names = "|".join(VARIANT_FLAGS + list(LAYER_KIND))
    access = re.compile(rf"\.(?:{names})\b|getattr\([^)]*[\"'](?:{names})[\"']")
    out = []
    for path in sorted(PLAN.rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if access.search(code):
                out.append(f"{path.relative_to(PLAN.parent)}:{n}: {line.strip()}")
    return out


def test_the_flags_cover_the_variants() -> None:
    for flag in ("mla", "linear", "ssm", "parallel_layers", "attention_pattern", "sliding_window", "qk_norm"):
        assert flag in VARIANT_FLAGS


def test_plan_tests_no_model_variant_flag() -> None:
    assert _hits() == []


def test_the_search_finds_a_flag() -> None:
    """The pattern catches what it is for (a copy of the old serving check), and not a size."""
    access = re.compile(rf"\.(?:{'|'.join(VARIANT_FLAGS)})\b")
    assert access.search("    if cfg.mla is None and k % tp and tp % k:")
    assert access.search("    per_layer = 1 if req.cfg.parallel_layers else 2")
    assert not access.search("    k = cfg.n_kv_heads")
