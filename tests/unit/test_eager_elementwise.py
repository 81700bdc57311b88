"""Eager elementwise kernels (model/eager.py): their HBM traffic for one Llama layer, hand-derived from the
kernels torchtitan's Llama code launches, and the step term it becomes."""

from __future__ import annotations

import pytest

from rooftop.cost.efficiency import default_efficiency
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.eager import unfused_kernels_per_layer
from rooftop.model.transformer import layer_costs
from rooftop.model.workload import Workload
from rooftop.plan.train.breakdown import breakdown_of
from rooftop.plan.train.framework import get_framework
from rooftop.plan.train.layout import Parallelism
from rooftop.plan.train.parts import StepPartName
from rooftop.plan.train.step import TrainingSetup, evaluate, layout_mesh

#: Llama 3 8B: d_model 4096, 32 query heads and 8 KV heads of 128, SwiGLU hidden 14336, bf16 (2 bytes)
#: RMSNorm eager: float (2 + 4), pow (4 + 4), mean (4), mul by rsqrt (4 + 4), type_as (4 + 2), mul by weight
#: (2 + 2) = 36 bytes an element against the fused 2 + 2; rotary on q and k: float (2 + 4), complex multiply
#: (4 + 4), type_as (4 + 2) = 20 against 4; SwiGLU: silu (2 + 2) and multiply (4 + 2) = 10 against 6.
LLAMA_8B_EXTRA_PER_TOKEN = 2 * (36 - 4) * 4096 + (20 - 4) * (32 + 8) * 128 + (10 - 6) * 14336


def _layer_bytes(model: str, fused: bool) -> dict[str, float]:
    tree = layer_costs(get_model(model), Workload("train", 1, 1024, fused=fused))
    return {name: leaf.cost.hbm_bytes / 1024 for name, leaf in tree.leaves()}


def test_one_llama_layer_eager_traffic_by_hand() -> None:
    fused, eager = _layer_bytes("llama-3-8b", True), _layer_bytes("llama-3-8b", False)
    extra = {k: v for k, v in eager.items() if k not in fused}
    assert extra == {
        "layer/attention/norm_unfused": pytest.approx((36 - 4) * 4096),
        "layer/attention/rope_unfused": pytest.approx((20 - 4) * (32 + 8) * 128),
        "layer/mlp/norm_unfused": pytest.approx((36 - 4) * 4096),
        "layer/mlp/act_unfused": pytest.approx((10 - 6) * 14336),
    }
    assert sum(extra.values()) == pytest.approx(LLAMA_8B_EXTRA_PER_TOKEN)
    assert all(eager[k] == fused[k] for k in fused)  # the fused ops themselves are unchanged
    # 2 norms x 8 kernels, rotary 3 kernels on q and on k, silu and multiply, 2 residual adds
    assert unfused_kernels_per_layer(get_model("llama-3-8b")) == 2 * 8 + 2 * 3 + 2 + 2


def test_layernorm_and_ungated_gelu_are_one_kernel_eagerly() -> None:
    """GPT-3 (LayerNorm, GELU, learned positions): one kernel each eagerly: nothing added."""
    assert _layer_bytes("gpt-3-175b", False) == _layer_bytes("gpt-3-175b", True)


def test_step_prices_the_eager_traffic_as_a_term() -> None:
    """compile=0 adds, per microbatch, the layers' eager bytes over HBM forward, twice that backward and once
    more in the recompute of full remat (norms, rope and activations are recomputed), as its own term."""
    chip, eff = get_chip("h100"), default_efficiency("training")
    fw = get_framework("pytorch-fsdp2")
    par = Parallelism(fsdp=8, microbatches=2, remat="full")
    steps, parts = [], []
    for fused in (True, False):
        setup = TrainingSetup(get_model("llama-3-8b"), chip, parse_topology(chip, "1x8"), 16, 4096,
                              fw.efficiency(eff), framework=fw, fused_elementwise=fused)  # fmt: skip
        steps.append(evaluate(setup, par, setup.pricer(layout_mesh(setup.topology, par))))
        parts.append({p.name: p for p in breakdown_of(setup, par)})
    # 16 sequences over 8 chips in 2 microbatches: 1 sequence of 4096 tokens per microbatch, 32 layers
    forward = 2 * 32 * 4096 * LLAMA_8B_EXTRA_PER_TOKEN / (chip.hbm_bytes_per_s * eff.hbm)
    (fused_step, eager_step), (_, eager_parts) = steps, parts
    phases: tuple[tuple[StepPartName, int], ...] = (
        ("compute_forward", 1),
        ("compute_backward", 2),
        ("compute_recompute", 1),
    )
    for name, times in phases:
        added = eager_step.breakdown[name] - fused_step.breakdown[name]
        assert added == pytest.approx(times * forward, rel=1e-6)
        term = next(t for t in eager_parts[name].terms if t.name == "unfused elementwise kernels")
        assert term.seconds == pytest.approx(times * forward, rel=1e-6)
    assert eager_step.step_time_s > fused_step.step_time_s
