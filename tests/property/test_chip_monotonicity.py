"""A better chip never makes a training step slower: the property the one overlap model exists for.

Improving any figure of the chip (matrix or vector FLOP/s, HBM bandwidth or capacity, link or
scale-out bandwidth, a latency, the host link) must never make a given layout's step slower, nor the
best layout's step (the search picks from at least the same fitting layouts, each no slower). Before
the step priced each communication's cover separately, the same backward compute hid both the FSDP
traffic and the gradient all-reduce, so a faster chip could shrink the cover by more than it saved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooftop.cost.efficiency import default_efficiency
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import topology_for_chips
from rooftop.model.activations import REMAT_POLICIES
from rooftop.model.catalog import get_model
from rooftop.plan.train.comm import CommPricer
from rooftop.plan.train.layout import Parallelism, validate
from rooftop.plan.train.search import search
from rooftop.plan.train.step import TrainingSetup, evaluate, layout_mesh
from rooftop.units import divisors

MODELS = ("llama-3-8b", "llama-2-13b", "mistral-7b", "mixtral-8x7b", "gemma-2-27b", "llama-3-70b")
CHIPS = ("h100", "a100", "b200", "tpu-v5e", "tpu-v5p", "tpu-v4")
FIGURES = (
    "matrix",
    "vector",
    "hbm_bw",
    "hbm_capacity",
    "link_bw",
    "link_latency",
    "dcn_bw",
    "scaleout_latency",
    "host_bw",
)
EFF = default_efficiency("training")


def improve(chip: Chip, figure: str, k: float) -> Chip:
    """``chip`` with one figure better by a factor ``k`` > 1 (bandwidths and peaks up, latencies down)."""
    figures: dict[str, Callable[[], dict[str, Any]]] = {
        "matrix": lambda: {
            "matrix_flops_per_s": MappingProxyType({d: v * k for d, v in chip.matrix_flops_per_s.items()})
        },
        "vector": lambda: {
            "vector_flops_per_s": MappingProxyType({d: v * k for d, v in chip.vector_flops_per_s.items()})
        },
        "hbm_bw": lambda: {"hbm_bytes_per_s": chip.hbm_bytes_per_s * k},
        "hbm_capacity": lambda: {"hbm_capacity_bytes": chip.hbm_capacity_bytes * k},
        "link_bw": lambda: {"link_bytes_per_s": chip.link_bytes_per_s * k},
        "link_latency": lambda: {"link_latency_s": chip.link_latency_s / k},
        "dcn_bw": lambda: {"dcn_bytes_per_s": chip.dcn_bytes_per_s * k},
        "scaleout_latency": lambda: {"scaleout_latency_s": chip.scaleout_latency_s / k},
        "host_bw": lambda: {"host_bytes_per_s": chip.host_bytes_per_s * k},
    }
    return dataclasses.replace(chip, **figures[figure]())


def _setup(model: str, chip: Chip, chips: int, batch: int, seq: int) -> TrainingSetup:
    return TrainingSetup(get_model(model), chip, topology_for_chips(chip, chips), batch, seq, EFF)


def _step(setup: TrainingSetup, par: Parallelism) -> float:
    pricer = CommPricer(layout_mesh(setup.topology, par), setup.chip, setup.efficiency.network)
    return evaluate(setup, par, pricer).step_time_s


@st.composite
def layouts(draw: st.DrawFn) -> tuple[TrainingSetup, Parallelism, str, float]:
    """A random model, chip, slice, batch and valid layout (dp and fsdp > 1 with one microbatch
    included), and the figure to improve by how much."""
    model = draw(st.sampled_from(MODELS))
    chip = get_chip(draw(st.sampled_from(CHIPS)))
    chips = draw(st.sampled_from((8, 16, 32, 64)))
    seq = draw(st.sampled_from((2048, 4096, 8192)))
    batch = draw(st.sampled_from((chips, 2 * chips, 4 * chips)))
    setup = _setup(model, chip, chips, batch, seq)
    cfg = setup.cfg
    tps = [
        t
        for t in divisors(chips)
        if t <= 8 and cfg.n_heads % t == 0 and (cfg.n_kv_heads % t == 0 or t % cfg.n_kv_heads == 0)
    ]
    tp = draw(st.sampled_from(tps))
    cp = draw(st.sampled_from([c for c in (1, 2) if (chips // tp) % c == 0]))
    rest = chips // (tp * cp)
    pp = draw(st.sampled_from([p for p in divisors(rest) if p <= 4 and cfg.n_layers >= 2 * p]))
    data = rest // pp
    fsdp = draw(st.sampled_from(divisors(data)))
    dp = data // fsdp
    ep = 1
    if cfg.moe is not None:
        ep = draw(
            st.sampled_from([e for e in divisors(cfg.moe.n_experts) if e <= data and (fsdp % e == 0 or dp % e == 0)])
        )
    per_replica = max(1, batch // data)
    m = draw(st.sampled_from(sorted({1, pp, per_replica} & set(range(pp, per_replica + 1))) or [pp]))
    par = Parallelism(
        dp=dp,
        fsdp=fsdp,
        tp=tp,
        pp=pp,
        cp=cp,
        ep=ep,
        microbatches=m,
        remat=draw(st.sampled_from(tuple(REMAT_POLICIES))),
        zero_stage=draw(st.sampled_from((1, 2))) if dp > 1 else 0,
    )
    validate(par, cfg, chips, batch, seq)
    return setup, par, draw(st.sampled_from(FIGURES)), draw(st.floats(1.01, 4.0))


def _layout_never_slower(case: tuple[TrainingSetup, Parallelism, str, float]) -> None:
    setup, par, figure, k = case
    base = _step(setup, par)
    better = _step(dataclasses.replace(setup, chip=improve(setup.chip, figure, k)), par)
    assert better <= base * (1 + 1e-9), (figure, k, par.label(), base, better)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts())
def test_a_better_chip_never_slows_a_layout(case: tuple[TrainingSetup, Parallelism, str, float]) -> None:
    _layout_never_slower(case)


@pytest.mark.long
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts())
def test_a_better_chip_never_slows_a_layout_long(case: tuple[TrainingSetup, Parallelism, str, float]) -> None:
    _layout_never_slower(case)


BEST_LAYOUT_CASES = (
    st.sampled_from(("llama-3-8b", "mistral-7b", "llama-2-13b", "mixtral-8x7b")),
    st.sampled_from(CHIPS),
    st.sampled_from((8, 16, 32)),
    st.sampled_from((1, 2, 4)),
    st.sampled_from(FIGURES),
    st.floats(1.01, 4.0),
)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(*BEST_LAYOUT_CASES)
def test_a_better_chip_never_slows_the_best_layout(
    model: str, chip_name: str, chips: int, per_chip: int, figure: str, k: float
) -> None:
    _best_layout_never_slower(model, chip_name, chips, per_chip, figure, k)


@pytest.mark.long
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(*BEST_LAYOUT_CASES)
def test_a_better_chip_never_slows_the_best_layout_long(
    model: str, chip_name: str, chips: int, per_chip: int, figure: str, k: float
) -> None:
    _best_layout_never_slower(model, chip_name, chips, per_chip, figure, k)


def _best_layout_never_slower(model: str, chip_name: str, chips: int, per_chip: int, figure: str, k: float) -> None:
    chip = get_chip(chip_name)
    base = search(_setup(model, chip, chips, chips * per_chip, 4096), top=1)
    better = search(_setup(model, improve(chip, figure, k), chips, chips * per_chip, 4096), top=1)
    if base.ranked:
        assert better.ranked, (figure, "a layout that fit no longer fits")
        assert better.ranked[0].step_time_s <= base.ranked[0].step_time_s * (1 + 1e-9), (
            figure,
            k,
            base.ranked[0].parallelism.label(),
            better.ranked[0].parallelism.label(),
        )
