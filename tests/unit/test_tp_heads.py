"""One check for every head-sharded block (model/heads.py): attention's query and KV heads, gated DeltaNet's
key and value heads, Mamba-2's heads and groups; training and serving both refuse a tp that splits one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rooftop.errors import InvalidConfigError
from rooftop.model.catalog import get_model, load_models
from rooftop.model.heads import valid_tp
from rooftop.plan.serve.layout import check_tp
from rooftop.plan.train.layout import Parallelism, validate
from rooftop.units import divisors
from tests.conftest import run_cli


def test_mamba2_groups_bound_tp() -> None:
    """Nemotron-H 8B: 32 query heads, 8 KV heads, 128 Mamba-2 heads in 8 groups: tp | gcd(32, 128, 8) = 8."""
    cfg = get_model("nemotron-h-8b")
    assert valid_tp(cfg.tp_heads) == [1, 2, 4, 8]
    assert cfg.heads_fit(8) and not cfg.heads_fit(16)
    msg = "tp=16 does not divide the Mamba-2 block's ssm.n_groups=8; valid: 1, 2, 4, 8"
    with pytest.raises(InvalidConfigError, match=msg):
        validate(Parallelism(tp=16, dp=1), cfg, 16, 16, 4096)  # training
    with pytest.raises(InvalidConfigError, match=msg):
        check_tp(cfg, 16)  # serving


def test_one_mamba2_group_is_copied() -> None:
    """Falcon-H1 7B: one group, replicated on every rank; 12 query heads, 2 KV heads and 24 Mamba-2 heads
    leave tp in {1, 2, 4, 6, 12} (3 splits the query and Mamba heads but not the 2 KV heads)."""
    cfg = get_model("falcon-h1-7b")
    assert cfg.ssm is not None and cfg.ssm.n_groups == 1
    assert valid_tp(cfg.tp_heads) == [1, 2, 4, 6, 12]


def test_gated_deltanet_heads_bound_tp() -> None:
    """Qwen3-Next with 24 value heads (a variant): tp=16 splits its 16 query, 16 key heads and copies its 2
    KV heads, but not 24 value heads."""
    cfg = get_model("qwen3-next-80b-a3b")
    assert cfg.linear is not None and cfg.heads_fit(16)
    variant = replace(cfg, linear=replace(cfg.linear, n_value_heads=24))
    assert valid_tp(variant.tp_heads) == [1, 2, 4, 8]
    msg = r"tp=16 does not divide the gated DeltaNet block's linear.n_value_heads=24; valid: 1, 2, 4, 8"
    with pytest.raises(InvalidConfigError, match=msg):
        variant.check_heads(16)


@pytest.mark.parametrize("name", [entry.name for entry in load_models()])
def test_attention_rule_unchanged_where_no_other_block_splits(name: str) -> None:
    """Every catalog model: a tp that fits all blocks fits attention's rule (tp | n_heads, KV heads divide or
    are copied); a model whose only head-sharded block is attention keeps exactly that rule."""
    cfg = get_model(name)
    for tp in divisors(1024):
        attention = cfg.n_heads % tp == 0 and cfg.kv_heads_fit(tp)
        attends = any(h.field == "n_heads" for h in cfg.tp_heads)
        if cfg.heads_fit(tp) and attends:
            assert attention
        if {h.field for h in cfg.tp_heads} <= {"n_heads", "n_kv_heads"} and attends:
            assert cfg.heads_fit(tp) == attention


def test_cli_names_the_block() -> None:
    code, _, err = run_cli("train", "nemotron-h-8b", "--chip", "h100", "--chips", "16", "--batch-tokens", "64K",
                           "--seq-len", "4096", "--fix", "tp=16")  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "the Mamba-2 block's ssm.n_groups=8" in err
