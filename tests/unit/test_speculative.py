"""Speculative decoding and MTP (plan/serve/speculative.py): tokens per target step (Leviathan et
al. 2023, eq. 1) and the step's cost, derived by hand."""

from __future__ import annotations

import pytest

from rooftop.cli.main import build_parser
from rooftop.cli.serve import request_from_args
from rooftop.errors import InvalidConfigError
from rooftop.hardware.topology import make_mesh
from rooftop.model.catalog import get_model
from rooftop.model.workload import Workload
from rooftop.plan.serve.per_chip import chip_cost
from rooftop.plan.serve.phase import decode_step
from rooftop.plan.serve.speculative import expected_tokens, mtp_module, speculation
from rooftop.plan.serve.sweep import plan_serving


def test_expected_tokens_by_hand() -> None:
    assert expected_tokens(0.8, 3) == pytest.approx(1 + 0.8 + 0.64 + 0.512)
    assert expected_tokens(0.5, 1) == 1.5
    assert expected_tokens(1.0, 4) == 5.0
    assert expected_tokens(0.0, 4) == 1.0


@pytest.fixture(scope="module")
def target():
    argv = "serve llama-3-70b --chip h100 --chips 8 --prompt-len 2048 --gen-len 256 --batch 8 --fix tp=8".split()
    plan = plan_serving(request_from_args(build_parser().parse_args(argv)))
    return plan.request, plan.points[0].layout


def test_draft_model_step_by_hand(target) -> None:
    req, layout = target
    draft = get_model("llama-3-8b")
    s = speculation(req, layout, 8, 3, 0.8, draft)
    mesh = make_mesh(req.topology, layout.mesh_axes())
    ctx = 2048 + 128  # the mean decode context P + G / 2
    assert req.decode_context_len == ctx
    d = decode_step(draft, req.chip, mesh, layout, 8, ctx, req.dtypes, req.eff)
    assert s.draft_step.time_s == d.time_s
    assert s.step_s == pytest.approx(s.verify.time_s + 3 * d.time_s)
    assert s.tpot_s == pytest.approx(s.step_s / (1 + 0.8 + 0.64 + 0.512))
    assert s.speedup == pytest.approx(s.plain.time_s / s.tpot_s)
    # the verify step computes 4 tokens per sequence where a decode step computes 1: every per-token
    # FLOP x 4, but one row of logits per sequence in both (2 x 8192 x 128256 per sequence, over tp=8)
    # and the attention pairs 4 ctx + 6 instead of 4 x ctx (negligible here)
    logits = 8 * 2 * 8192 * 128256 / 8
    plain = chip_cost(req.cfg, Workload("decode", 8, 1, ctx), req.dtypes, layout).groups["matmul"].flops
    verify = chip_cost(req.cfg, Workload("prefill", 8, 4, ctx + 3), req.dtypes, layout).groups["matmul"].flops
    assert verify == 4 * plain - 3 * logits
    # in all (norms, activations and softmax are priced per kernel, a little apart in the two phases)
    assert s.verify.flops == pytest.approx(4 * s.plain.flops - 3 * logits, rel=1e-3)
    # the target's weights are read once for the 4 tokens: the same weight bytes, but for the embedding
    # rows of the 3 more tokens per sequence (8 x 3 rows of 8192 bf16 values, over tp=8)
    assert s.verify.weights_bytes == pytest.approx(s.plain.weights_bytes + 8 * 3 * 8192 * 2 / 8, rel=1e-12)


def test_mtp_module_is_one_block(target) -> None:
    req, layout = target
    s = speculation(req, layout, 8, 2, 0.9)
    one = mtp_module(req.cfg)
    assert (one.n_layers, s.kind) == (1, "mtp")
    assert s.tokens_per_step == pytest.approx(1 + 0.9 + 0.81)
    # one module's decode: one of the 80 blocks + the output head (8 sequences' logits over tp=8)
    logits = 8 * 2 * 8192 * 128256 / 8
    ctx = req.decode_context_len
    plain = chip_cost(req.cfg, Workload("decode", 8, 1, ctx), req.dtypes, layout).groups["matmul"].flops
    module = chip_cost(one, Workload("decode", 8, 1, ctx), req.dtypes, layout).groups["matmul"].flops
    assert module == pytest.approx((plain - logits) / 80 + logits, rel=1e-12)
    assert s.draft_step.flops == pytest.approx((s.plain.flops - logits) / 80 + logits, rel=1e-3)


def test_bad_values(target) -> None:
    req, layout = target
    with pytest.raises(InvalidConfigError, match="accept-rate=1.2 must be between 0 and 1"):
        speculation(req, layout, 8, 2, 1.2)
    with pytest.raises(InvalidConfigError, match="0 drafted tokens per step"):
        speculation(req, layout, 8, 0, 0.5)
