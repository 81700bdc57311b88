"""One collective rule for every caller: roofline(), the training step and the serving step time the
same collective identically, network efficiency applied once (to the bandwidth term only)."""

from __future__ import annotations

import dataclasses

import pytest

from rooftop.cost.cost import Comm, Cost
from rooftop.cost.efficiency import Efficiency
from rooftop.cost.roofline import roofline
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.workload import Dtypes
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.phase import decode_step
from rooftop.plan.train.comm import CommPricer

H100 = get_chip("h100")
MESH = make_mesh(parse_topology(H100, "1x8"), {"tp": 8})
EFF = Efficiency(network=0.8)


def _roofline_s(nbytes: float) -> float:
    return roofline(Cost().with_comm(Comm("all-reduce", ("tp",), nbytes)), H100, MESH, EFF).network_s


def test_a_4kib_all_reduce_over_8_h100_is_latency_bound_at_12_us_everywhere() -> None:
    # bandwidth: 2 x (8-1) x (4096/8) B / 4.5e11 B/s / 0.8 = 20 ns; latency: 2 x ceil(log2 8) steps x 2 us = 12 us
    expected = max(2 * (8 - 1) * (4096 / 8) / (18 * 2.5e10) / 0.8, 2 * 3 * 2e-6)
    assert expected == pytest.approx(12e-6)
    assert _roofline_s(4096) == pytest.approx(expected)  # the latency is not divided by the efficiency
    assert CommPricer(MESH, H100, EFF.network).time("all-reduce", ("tp",), 4096) == pytest.approx(expected)


@pytest.mark.parametrize("nbytes", [4096, 2.0**20, 2.0**30])
def test_training_and_roofline_agree_at_every_size(nbytes: float) -> None:
    assert CommPricer(MESH, H100, EFF.network).time("all-reduce", ("tp",), nbytes) == pytest.approx(_roofline_s(nbytes))


def test_serving_prices_its_tp_all_reduces_as_roofline_does() -> None:
    cfg = get_model("llama-3-8b")
    eff = dataclasses.replace(EFF, kernels_per_layer=0.0)
    step = decode_step(cfg, H100, MESH, ServingLayout(tp=8), 1, 1024, Dtypes(), eff)
    (term,) = [t for t in step.terms if t.collective is not None and t.collective.kind == "all-reduce"]
    calls = 2 * cfg.n_layers  # after attention and after the MLP of every layer
    per_call = term.seconds / calls
    assert per_call == pytest.approx(_roofline_s(1 * cfg.d_model * 2))  # one token's bf16 activations
    assert step.collective_s == pytest.approx(calls * per_call)
