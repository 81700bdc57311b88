"""Prefix caching (plan/serve/prefix.py): the prefill a hit saves, derived by hand."""

from __future__ import annotations

import pytest

from rooftop.cli.main import build_parser
from rooftop.cli.serve import request_from_args
from rooftop.cost.op import attended_pairs
from rooftop.errors import InvalidConfigError
from rooftop.hardware.topology import make_mesh
from rooftop.plan.serve.phase import prefill
from rooftop.plan.serve.prefix import prefix_cache
from rooftop.plan.serve.sweep import plan_serving

P, L = 2048, 1536


@pytest.fixture(scope="module")
def setup():
    argv = f"serve llama-3-8b --chip h100 --chips 1 --prompt-len {P} --gen-len 128 --batch 1".split()
    plan = plan_serving(request_from_args(build_parser().parse_args(argv)))
    return plan.request, plan.points[0].layout


def test_hit_saves_a_prefill_of_the_prefix(setup) -> None:
    req, layout = setup
    pc = prefix_cache(req, layout, L, 0.75)
    mesh = make_mesh(req.topology, layout.mesh_axes())
    prefix_alone = prefill(req.cfg, req.chip, mesh, layout, 1, L, req.dtypes, req.eff)
    # the skipped work is the prefix's own prefill (L tokens through the weights, L (L + 1) / 2
    # causal pairs) less its one token of logits (a hit still computes the last prompt token's:
    # 2 x d_model x vocab = 2 x 4096 x 128256 FLOPs)
    cfg = req.cfg
    assert (cfg.d_model, cfg.vocab_size) == (4096, 128256)
    assert pc.miss.flops - pc.hit.flops == pytest.approx(prefix_alone.flops - 2 * 4096 * 128256, rel=1e-12)
    # the pairs: the P - L new tokens see P (P + 1) / 2 - L (L + 1) / 2 (query j sees j keys)
    assert attended_pairs(P - L, P, 0, True) == P * (P + 1) / 2 - L * (L + 1) / 2
    # expected over requests: 0.75 hit, 0.25 miss
    assert pc.expected_flops == pytest.approx(0.75 * pc.hit.flops + 0.25 * pc.miss.flops)
    assert pc.expected_prefill_s == pytest.approx(0.75 * pc.hit.time_s + 0.25 * pc.miss.time_s)
    # compute-bound at 2048 tokens: the time saved is close to the FLOPs saved (fixed costs aside)
    assert pc.hit.time_s < pc.miss.time_s
    assert 0 < pc.saved_fraction < 0.75 * (pc.miss.flops - pc.hit.flops) / pc.miss.flops + 0.02


def test_prefix_bad_values(setup) -> None:
    req, layout = setup
    with pytest.raises(InvalidConfigError, match="prefix-len=2048 must be at least 1 and below"):
        prefix_cache(req, layout, P, 0.5)
    with pytest.raises(InvalidConfigError, match="prefix-hit-rate=1.5 must be between 0 and 1"):
        prefix_cache(req, layout, 16, 1.5)
