"""Costs that say what they are: HBM bytes by kind in Cost, a tag on every op model/ makes, and how a
tagged op divides over a tensor-parallel group (sharding/tensor.py)."""

from __future__ import annotations

import json

import pytest

from rooftop.cost.cost import OP_SPLITS, Cost, OpTag, Split
from rooftop.cost.op import Operand, explicit, matmul
from rooftop.errors import InvalidConfigError
from rooftop.model.catalog import get_model, load_models
from rooftop.model.memory import kv_cache_bytes
from rooftop.model.params import ParamTree, param_tree, params_matmul_active
from rooftop.model.passes import model_costs, train_leaves
from rooftop.model.workload import Dtypes, Workload
from rooftop.sharding.tensor import kv_shards, share

WORKLOADS = (Workload("train", 2, 512), Workload("prefill", 2, 256), Workload("decode", 4, 1, 300))


def _param_leaves(tree: ParamTree) -> list[ParamTree]:
    out: list[ParamTree] = []
    for child in tree.children:
        out += _param_leaves(child) if child.children else [child]
    return out


# ---------------------------------------------------------------- bytes by kind


def test_matmul_types_its_operands_bytes() -> None:
    sizes = {"B": 8, "D": 16, "F": 32}
    c = matmul(
        Operand(("B", "D"), "bf16", "activations"),
        Operand(("D", "F"), "int8", "weights"),
        Operand(("B", "F"), "bf16", "activations"),
        sizes,
    )
    assert c.bytes_of("weights") == 16 * 32 * 1
    assert c.bytes_of("activations") == 8 * 16 * 2 + 8 * 32 * 2
    assert c.bytes_of("other") == 0
    assert c.hbm_bytes == 16 * 32 + 8 * 16 * 2 + 8 * 32 * 2


def test_typed_bytes_add_and_scale_with_the_cost() -> None:
    a = explicit(10.0, 100.0, kind="weights")
    b = explicit(0.0, 60.0, kind="kv_cache") + Cost.of(0.0, 40.0)  # 40 untyped bytes
    s = 3 * (a + b)
    assert (s.bytes_of("weights"), s.bytes_of("kv_cache"), s.bytes_of("other")) == (300, 180, 120)
    assert s.hbm_bytes == 3 * (100 + 60 + 40)


def test_unknown_or_inconsistent_kinds_are_refused() -> None:
    with pytest.raises(InvalidConfigError, match="unknown kind of HBM bytes 'gradients'"):
        explicit(0.0, 1.0, kind="gradients")
    with pytest.raises(InvalidConfigError, match="add up to at most"):
        Cost({}, 10.0, (), {"weights": 11.0})
    with pytest.raises(InvalidConfigError, match="unknown kind"):
        Cost().bytes_of("gradients")


def test_decode_reads_every_matmul_weight_once_and_the_cache_of_every_sequence() -> None:
    """Hand-derived: a decode step of b sequences reads each matmul weight once (N of 6N, output head
    included), one embedding row per sequence, and the cache at the context plus the new token's."""
    cfg = get_model("llama-3-8b")
    b, ctx = 3, 100
    cost = model_costs(cfg, Workload("decode", b, 1, ctx), Dtypes()).cost
    assert cost.bytes_of("weights") == pytest.approx((params_matmul_active(cfg) + b * cfg.d_model) * 2)
    assert cost.bytes_of("kv_cache") == pytest.approx(kv_cache_bytes(cfg, b, ctx) + kv_cache_bytes(cfg, b, 1))
    assert cost.bytes_of("other") == 0


def test_training_has_no_cache_bytes() -> None:
    cost = model_costs(get_model("llama-3-8b"), Workload("train", 1, 1024), Dtypes(), "full").cost
    assert cost.bytes_of("kv_cache") == 0
    assert cost.bytes_of("weights") > 0 and cost.bytes_of("activations") > 0


# ---------------------------------------------------------------- tags


@pytest.mark.parametrize("name", [e.config.name for e in load_models()])
def test_every_op_and_weight_of_every_catalog_model_is_tagged_and_typed(name: str) -> None:
    cfg = get_model(name)
    for w in WORKLOADS:
        tree = model_costs(cfg, w, Dtypes(), "selective" if w.phase == "train" else "none")
        untagged = [path for path, leaf in tree.leaves() if leaf.tag is None]
        assert not untagged, untagged[:3]
        assert tree.cost.bytes_of("other") == 0  # every byte has a kind
    assert all(leaf.tag is not None for leaf in _param_leaves(param_tree(cfg)))


def test_routed_experts_are_tagged_expert_and_nothing_else_is() -> None:
    cfg = get_model("mixtral-8x7b")
    tree = model_costs(cfg, Workload("decode", 1, 1, 10), Dtypes())
    expert_paths = {path for path, leaf in tree.leaves() if leaf.tag is not None and leaf.tag.expert}
    assert expert_paths and all("/experts/" in p for p in expert_paths)
    routed = sum(p.params for p in _param_leaves(param_tree(cfg)) if p.tag is not None and p.tag.expert)
    moe = cfg.moe
    assert moe is not None
    assert routed == cfg.n_layers * moe.n_experts * 3 * cfg.d_model * moe.d_ff_expert


def test_train_leaves_give_each_op_its_phase_and_layer_group() -> None:
    cfg = get_model("gemma-2-27b")  # two layer groups (global and sliding-window attention)
    tree = model_costs(cfg, Workload("train", 1, 256), Dtypes(), "full")
    seen = list(train_leaves(tree))
    assert len(seen) == sum(1 for _ in tree.leaves())
    assert {phase for phase, _, _ in seen} == {0, 1, 2}
    assert all(group is not None for phase, group, _ in seen if phase == 2)  # recompute is layers only
    assert {g for _, g, leaf in seen if leaf.tag is not None and leaf.tag.category == "lookup"} == {None}


def test_a_bad_tag_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match="unknown op split"):
        OpTag("matmul", "diagonal")  # type: ignore[arg-type]  # a spelling from outside the type checker
    with pytest.raises(InvalidConfigError, match="unknown op category"):
        OpTag("conv", Split.TENSOR)
    # a spelled split becomes its member: the same value, printed and compared as before
    spelled = OpTag("matmul", "kv_heads")  # type: ignore[arg-type]
    assert spelled.split is Split.KV_HEADS and spelled == OpTag("matmul", Split.KV_HEADS)
    assert f"{Split.KV_HEADS}" == "kv_heads" and json.dumps(Split.KV_HEADS) == '"kv_heads"'


# ---------------------------------------------------------------- one rule for how a tagged op divides


@pytest.mark.parametrize("split", OP_SPLITS)
@pytest.mark.parametrize("sp", [False, True])
def test_sharding_never_increases_a_chips_share(split: Split, sp: bool) -> None:
    tag = OpTag("matmul", split)
    prev = share(tag, 1, 8, sp)
    assert (prev.flops, prev.weights, prev.kv, prev.act) == (1.0, 1.0, 1.0, 1.0)
    for tp in (2, 4, 8, 16, 32):
        s = share(tag, tp, 8, sp)
        for a, b in ((s.flops, prev.flops), (s.weights, prev.weights), (s.kv, prev.kv), (s.act, prev.act)):
            assert 0 < a <= b
        prev = s


def test_kv_heads_replicate_past_the_kv_head_count() -> None:
    assert [kv_shards(tp, 8) for tp in (1, 4, 8, 16, 64)] == [1, 4, 8, 8, 8]
    assert kv_shards(16, None) == 1  # MLA's latent cache has no heads to split
    assert share(OpTag("matmul", Split.KV_HEADS), 16, 8).weights == 1 / 8
    assert share(OpTag("attention", Split.ATTENTION), 16, 8).kv == 1 / 8
    assert share(OpTag("attention", Split.ATTENTION), 16, 8).flops == 1 / 16
    assert share(OpTag("matmul", Split.TENSOR), 4, 8).act == (1 + 1 / 4) / 2
    assert share(OpTag("elementwise", Split.TOKENS), 4, 8, sequence_parallel=True).act == 1 / 4
    assert share(OpTag("elementwise", Split.TOKENS), 4, 8).act == 1.0
