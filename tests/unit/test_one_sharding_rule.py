"""One op-sharding rule (sharding/tensor.py) for training time, training memory and serving: on every
catalog model, at each tp its heads allow, with and without sequence parallelism, the three agree op by
op, weight by weight and kept tensor by kept tensor; and the rule's cases, hand-derived on llama-3-8b."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from rooftop.cost.cost import OpTag, Split
from rooftop.cost.efficiency import IDEAL
from rooftop.hardware.catalog import get_chip
from rooftop.model.activations import activation_tensors, kept_split
from rooftop.model.catalog import get_model, load_models
from rooftop.model.config import TransformerConfig
from rooftop.model.layers import layer_groups
from rooftop.model.tags import OP_TAGS
from rooftop.plan.serve.layout import ServingLayout, weights_per_chip_bytes
from rooftop.plan.serve.layout import share as serve_share
from rooftop.plan.train.layout import Parallelism
from rooftop.plan.train.memory import activations_per_chip, params_per_chip
from rooftop.plan.train.profile import ModelProfile, model_profile, op_roofline

MODELS = [entry.name for entry in load_models()]
SEQ = 256  # short sequences: the rule does not depend on the length


def _tps(cfg: TransformerConfig) -> list[int]:
    """The tp up to 16 that the query heads and the KV heads allow (one past K when K < 16)."""
    return [t for t in (2, 4, 8, 16) if cfg.n_heads % t == 0 and cfg.kv_heads_fit(t)]


@cache
def _profile(name: str) -> ModelProfile:
    return model_profile(get_model(name), SEQ, "none", get_chip("h100"), IDEAL)


@pytest.mark.parametrize("name", MODELS)
def test_training_time_divides_each_op_as_serving_does(name: str) -> None:
    cfg, prof = get_model(name), _profile(name)
    for tp in _tps(cfg):
        for sp in (False, True):
            _, flops, nbytes = op_roofline(prof, Parallelism(tp=tp, sequence_parallel=sp), 1)
            for i, (tag, gemm) in enumerate(zip(prof.tags, prof.shapes, strict=True)):
                assert tag is not None
                s = serve_share(tag, cfg, tp, sp, gemm)
                assert flops[i] == pytest.approx(prof.flops[i] * s.flops), (tp, sp, i, tag)
                want = prof.weight_bytes[i] * s.weights + prof.act_bytes[i] * s.act
                assert nbytes[i] == pytest.approx(want), (tp, sp, i, tag)


@pytest.mark.parametrize("name", MODELS)
def test_training_memory_holds_the_weights_serving_holds(name: str) -> None:
    cfg, prof = get_model(name), _profile(name)
    for tp in _tps(cfg):
        dense, expert = params_per_chip(prof, Parallelism(tp=tp))
        assert (dense + expert) * 2 == pytest.approx(weights_per_chip_bytes(cfg, ServingLayout(tp=tp), "bf16"))


def _op_output_split(tag: OpTag) -> str:
    """How an op's output divides over the group: a row-parallel matmul's is whole once reduced (a sequence
    region), a column-parallel matmul's and the attention core's are split by heads like a per-head op's."""
    if tag.row_parallel:
        return "tokens"
    return "heads" if tag.split in ("tensor", "attention") else tag.split


@pytest.mark.parametrize("name", MODELS)
def test_kept_tensors_divide_as_the_ops_that_make_them(name: str) -> None:
    cfg = get_model(name)
    for group in layer_groups(cfg):
        for t in activation_tensors(cfg, SEQ, group, flash=True):
            op = t.name.rsplit("/", 1)[-1]
            if op in OP_TAGS and not t.name.startswith("moe/experts/"):  # routed experts: their ep layout
                assert kept_split(t.name) == _op_output_split(OP_TAGS[op]), t.name


def test_the_rule_by_hand_on_llama_3_8b() -> None:
    """llama-3-8b: 32 query heads, 8 KV heads of 128, d_model 4096. At tp = 16 the k and v projections split
    only 8 ways; without sequence parallelism the norms stay whole on every rank, with it they split 16 ways."""
    prof = _profile("llama-3-8b")
    forward = [i for i, tag in enumerate(prof.tags) if tag is not None and prof.phase[i] == 0 and prof.group[i] >= 0]
    k_op = next(i for i in forward if prof.tags[i].split == "kv_heads")
    norm_op = next(i for i in forward if prof.tags[i].split == "tokens")
    assert prof.act_bytes[norm_op] > 0
    for sp, norm_ways in ((False, 1), (True, 16)):
        _, flops, nbytes = op_roofline(prof, Parallelism(tp=16, sequence_parallel=sp), 1)
        assert flops[k_op].sum() == pytest.approx(prof.flops[k_op].sum() / 8)
        assert nbytes[norm_op] == pytest.approx(prof.act_bytes[norm_op] / norm_ways)
    # the weights: k and v (4096 x 1024 each per layer) over 8, the norms (2 x 4096 per layer, and the final
    # one) whole, every other weight over 16
    dense, _ = params_per_chip(prof, Parallelism(tp=16))
    kv, norms = 32 * 2 * 4096 * 1024, 32 * 2 * 4096 + 4096
    assert dense == pytest.approx(kv / 8 + norms + (prof.params_total - kv - norms) / 16)


def test_kept_activations_by_hand_on_llama_3_8b() -> None:
    """Per token per layer (bf16, no remat, flash): the k and v outputs (1024 each) over min(tp, 8); the
    sequence regions the policy keeps (input, two norms, residual: 4 x 4096; the o output is a "dots" tensor)
    whole without sequence parallelism."""
    prof = _profile("llama-3-8b")
    by_split = dict(prof.activation_bytes_by_split)
    assert by_split[Split.KV_HEADS] == 32 * 2 * 1024 * 2
    assert by_split[Split.TOKENS] == 32 * 4 * 4096 * 2
    rest = prof.activation_bytes_per_token - by_split[Split.KV_HEADS] - by_split[Split.TOKENS]
    got = activations_per_chip(Parallelism(tp=16, sequence_parallel=False), prof)
    assert got == pytest.approx(by_split[Split.KV_HEADS] / 8 + by_split[Split.TOKENS] + rest / 16)
    got_sp = activations_per_chip(Parallelism(tp=16, sequence_parallel=True), prof)
    assert got_sp == pytest.approx(by_split[Split.KV_HEADS] / 8 + (by_split[Split.TOKENS] + rest) / 16)
    assert np.isclose(sum(by_split.values()), prof.activation_bytes_per_token)
