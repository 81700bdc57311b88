"""A continuous-batching step of a mixture of experts and under attention data parallelism
(plan/serve/phase.mixed_step): the routed experts a step reads are those all its tokens touch,
and the prompt tokens of a step spread over the attention ranks. Before, a prefill-only step read
the experts of a whole prompt whatever its size (an empty step cost more than a step of one
sequence), so the fluid balance of plan/serve/batching.py oscillated and DeepSeek-V3 on 8 H200
"sustained" 0.38 requests/s where its static batch serves 35."""

from __future__ import annotations

import pytest

from rooftop.cost.efficiency import default_efficiency
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, topology_for_chips
from rooftop.model.catalog import get_model
from rooftop.model.workload import Dtypes
from rooftop.plan.serve import phase
from rooftop.plan.serve.batching import capacity, layout_step
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.traffic import Traffic

H200 = get_chip("h200")
DT = Dtypes("fp8", "bf16", "bf16")
EFF = default_efficiency("serving", "gpu")
P = 1024  # prompt tokens


def _setup(model: str, layout: ServingLayout):
    cfg = get_model(model)
    mesh = make_mesh(topology_for_chips(H200, layout.tp * layout.pp), layout.mesh_axes())
    return lambda n, c: phase.mixed_step(cfg, H200, mesh, layout, n, P + 64, c, P, DT, EFF)


def test_the_touched_experts_formula() -> None:
    moe = get_model("deepseek-v3").moe
    assert moe is not None and (moe.n_experts, moe.top_k) == (256, 8)
    assert moe.touched(0) == 0.0
    assert moe.touched(1) == pytest.approx(8.0)  # one token: its top 8
    assert moe.touched(2) == pytest.approx(256 * (1 - (248 / 256) ** 2))  # 15.75: two tokens overlap a little
    assert moe.touched(1e6) == pytest.approx(256.0)  # every expert


def test_a_mixed_steps_expert_reads_follow_all_its_tokens() -> None:
    """Without expert parallelism (no busiest-chip factor) the weights read are the dense ones plus
    one chip's share of an expert times the experts touched: differences of the read bytes go as
    differences of E (1 - (1 - k/E)^T) over the step's T tokens, decode and prompt together."""
    step = _setup("deepseek-v3", ServingLayout(tp=8))
    moe = get_model("deepseek-v3").moe
    assert moe is not None
    w = {(n, c): step(n, c).weights_bytes for n, c in ((0, 0), (1, 0), (1, 8), (1, P), (8, 0))}
    # one decode sequence and 8 prompt tokens touch what 9 tokens touch, as 9 decode sequences would
    per_expert = (w[(1, P)] - w[(1, 0)]) / (moe.touched(1 + P) - moe.touched(1))
    assert w[(1, 8)] - w[(1, 0)] == pytest.approx(per_expert * (moe.touched(9) - moe.touched(1)), rel=1e-9)
    eight = per_expert * (moe.touched(8) - moe.touched(1))
    assert w[(8, 0)] - w[(1, 0)] == pytest.approx(eight, rel=1e-6)  # and 7 more embedding rows
    # an empty step reads the dense weights only: less than a step of one sequence (by its 8 experts,
    # less the 1,023 embedding rows more that a prefill-only step's weights count: 0.9 MB of 2.55 GB)
    assert w[(1, 0)] - w[(0, 0)] == pytest.approx(per_expert * moe.touched(1), rel=1e-3)


@pytest.mark.parametrize(
    "model,layout",
    [
        ("deepseek-v3", ServingLayout(tp=8, ep=8)),
        ("deepseek-v3", ServingLayout(tp=8, ep=8, attn_dp=8)),
        ("mixtral-8x7b", ServingLayout(tp=2, ep=2)),
    ],
)
def test_the_step_never_shortens_with_more_work(model: str, layout: ServingLayout) -> None:
    step = _setup(model, layout)
    for c in (0, 512, P, 4 * P):
        times = [step(n, c).time_s for n in (0, 8, 16, 64, 256)]
        assert times == sorted(times), (c, times)
    for n in (0, 8, 64):
        times = [step(n, c).time_s for c in (0, 1, 64, P, 8 * P)]
        assert times == sorted(times), (n, times)


def test_attention_ranks_prefill_their_own_prompts() -> None:
    """attn_dp=8: each rank prefills its own requests, so a step of 8 prompts' tokens writes one
    prompt's cache on the busiest rank, and a chunk of half a prompt half of it, all on one rank;
    with tp=8 every chip writes its heads' share of every prompt."""
    dp = _setup("deepseek-v3", ServingLayout(tp=8, ep=8, attn_dp=8))
    one = dp(0, P).kv_cache_bytes
    assert dp(0, 8 * P).kv_cache_bytes == pytest.approx(one, rel=1e-12)
    assert dp(0, 16 * P).kv_cache_bytes == pytest.approx(2 * one, rel=1e-12)
    assert dp(0, P / 2).kv_cache_bytes == pytest.approx(one / 2, rel=1e-12)
    tp = _setup("deepseek-v3", ServingLayout(tp=8, ep=8))
    assert tp(0, 8 * P).kv_cache_bytes == pytest.approx(8 * tp(0, P).kv_cache_bytes, rel=1e-12)


@pytest.mark.parametrize(
    "model,layout", [("deepseek-v3", ServingLayout(tp=8, ep=8, attn_dp=8)), ("deepseek-v3", ServingLayout(tp=8))]
)
def test_continuous_batching_sustains_what_the_static_batch_serves(model: str, layout: ServingLayout) -> None:
    """The fluid balance's saturation rate and the static batch's requests/s at the same memory-bound
    batch are two ways of pricing the same work: within 30% of each other (they were 94x apart)."""
    cfg = get_model(model)
    mesh = make_mesh(topology_for_chips(H200, layout.tp), layout.mesh_axes())
    t = Traffic(P, 128, requests_per_s=1.0)
    batch = 512
    table = layout_step(cfg, H200, mesh, layout, DT, EFF, t, batch)
    cap = capacity(table, t, batch)
    dec = phase.decode_step(cfg, H200, mesh, layout, batch, P + 64, DT, EFF)
    pre = phase.prefill(cfg, H200, mesh, layout, batch, P, DT, EFF)
    static = batch / (pre.time_s + 128 * dec.time_s)
    assert 0.7 < cap / static < 1.3, (cap, static)
