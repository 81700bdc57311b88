"""Properties of the serving model: batching never hurts throughput until memory runs out, lighter
weights are never slower at small batch, sharding conserves bytes, the frontier is undominated."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rooftop.cost.efficiency import IDEAL, default_efficiency
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.memory import kv_cache_bytes
from rooftop.model.workload import Dtypes
from rooftop.plan.serve import layout as sl
from rooftop.plan.serve import phase as inf
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.sweep import ServingRequest, evaluate_point, pareto_frontier, plan_serving

MODELS = {name: get_model(name) for name in ("llama-3-8b", "mistral-7b", "mixtral-8x7b", "gemma-2-27b")}
CHIPS = {"h100": ("8", (1, 2, 4, 8)), "tpu-v5e": ("2x4", (1, 2, 4, 8))}

cases = st.tuples(
    st.sampled_from(sorted(MODELS)),
    st.sampled_from(sorted(CHIPS)),
    st.sampled_from((1, 2, 4, 8)),
    st.sampled_from((Dtypes(), Dtypes("int8", "bf16", "int8"), Dtypes("fp8", "fp8", "fp8"))),
    st.integers(16, 2048),
    st.integers(1, 1024),
    st.booleans(),
)


def _setup(model: str, chip_name: str, tp: int, dtypes: Dtypes, prompt: int, gen: int, ideal: bool):
    chip = get_chip(chip_name)
    topo = parse_topology(chip, CHIPS[chip_name][0])
    cfg = MODELS[model]
    layout = ServingLayout(tp=tp, replicas=topo.num_chips // tp)
    eff = IDEAL if ideal else default_efficiency("serving", chip.kind)
    req = ServingRequest(cfg, chip, topo, prompt, gen, dtypes, efficiency=eff)
    return req, layout, make_mesh(topo, layout.mesh_axes())


@settings(max_examples=25, deadline=None)
@given(cases, st.integers(1, 512), st.integers(1, 512))
def test_more_batch_never_lowers_throughput_until_memory_runs_out(case, b1: int, b2: int) -> None:
    """On the roofline without the matmul shape model. With it, throughput is a sawtooth in the batch, as on
    the hardware: 65 sequences run a 128-row tile where 64 run a 64-row one (cost/gemm.py)."""
    req, layout, mesh = _setup(*case)
    req = dataclasses.replace(req, efficiency=req.eff.replace(matrix_shape=0.0))
    if not _valid(req, layout):
        return
    small, large = sorted((b1, b2))
    fit = sl.max_batch(req.cfg, req.chip, layout, req.max_context_len, req.dtypes, req.eff)
    if large > fit:
        return
    ttft = inf.prefill(req.cfg, req.chip, mesh, layout, 1, req.prompt_len, req.dtypes, req.eff)
    a = evaluate_point(req, layout, mesh, small, ttft)
    b = evaluate_point(req, layout, mesh, large, ttft)
    assert b.decode_tokens_per_s >= a.decode_tokens_per_s * (1 - 1e-9)
    assert b.tokens_per_s >= a.tokens_per_s * (1 - 1e-9)
    assert b.step_time_s >= a.step_time_s * (1 - 1e-9)  # ... and never lowers the step time


@settings(max_examples=25, deadline=None)
@given(cases, st.integers(1, 8))
def test_int8_weights_never_slower_than_bf16_at_small_batch(case, batch: int) -> None:
    req, layout, mesh = _setup(*case)
    if not _valid(req, layout):
        return
    steps = {}
    for w in ("bf16", "int8", "int4"):
        dt = Dtypes(w, "bf16", req.dtypes.kv_cache)
        steps[w] = inf.decode_step(req.cfg, req.chip, mesh, layout, batch, req.decode_context_len, dt, req.eff).time_s
    assert steps["int8"] <= steps["bf16"] and steps["int4"] <= steps["int8"]


@settings(max_examples=30, deadline=None)
@given(cases, st.integers(1, 64))
def test_kv_cache_shards_add_up(case, batch: int) -> None:
    req, layout, _ = _setup(*case)
    if not _valid(req, layout):
        return
    per_chip = sl.kv_cache_per_chip_bytes(req.cfg, layout, batch, req.max_context_len, req.dtypes.kv_cache)
    total = kv_cache_bytes(req.cfg, batch, req.max_context_len, req.dtypes.kv_cache)
    assert per_chip * sl.kv_shards(req.cfg, layout.tp) == total
    # cache per chip never grows with tp; the step never reads more of it than the chip holds plus the new token
    step = inf.decode_step(req.cfg, req.chip, _setup(*case)[2], layout, batch, req.max_context_len, req.dtypes, req.eff)
    new_token = kv_cache_bytes(req.cfg, batch, 1, req.dtypes.kv_cache) / sl.kv_shards(req.cfg, layout.tp)
    assert step.kv_cache_bytes <= per_chip + new_token * (1 + 1e-9)


FRONTIER_CASES = (
    st.sampled_from(sorted(MODELS)),
    st.sampled_from(sorted(CHIPS)),
    st.integers(64, 4096),
    st.integers(16, 1024),
)


@settings(max_examples=3, deadline=None)
@given(*FRONTIER_CASES)
@example("mixtral-8x7b", "tpu-v5e", 2048, 512)  # a mixture of experts on a torus: the most layouts
def test_frontier_is_fitting_and_undominated(model: str, chip_name: str, prompt: int, gen: int) -> None:
    _frontier_is_fitting_and_undominated(model, chip_name, prompt, gen)


@pytest.mark.long
@settings(max_examples=40, deadline=None)
@given(*FRONTIER_CASES)
def test_frontier_is_fitting_and_undominated_long(model: str, chip_name: str, prompt: int, gen: int) -> None:
    _frontier_is_fitting_and_undominated(model, chip_name, prompt, gen)


def _frontier_is_fitting_and_undominated(model: str, chip_name: str, prompt: int, gen: int) -> None:
    chip = get_chip(chip_name)
    plan = plan_serving(ServingRequest(MODELS[model], chip, parse_topology(chip, CHIPS[chip_name][0]), prompt, gen))
    pts = plan.points
    assert pareto_frontier(pts) == plan.frontier
    for i in plan.frontier:
        assert pts[i].fits
        assert not any(
            p.fits and p.step_time_s <= pts[i].step_time_s and p.tokens_per_s_per_chip > pts[i].tokens_per_s_per_chip
            for p in pts
        )
    if plan.chosen is not None:
        assert pts[plan.chosen].fits
        assert pts[plan.chosen].tokens_per_s_per_chip == max(p.tokens_per_s_per_chip for p in pts if p.fits)


#: models whose heads split 16 ways (tp=16 over two 8-GPU nodes or inside one 16-GPU domain)
WIDE = {name: get_model(name) for name in ("llama-3-70b", "qwen2.5-72b", "llama-3.1-405b")}
DTYPES = (Dtypes(), Dtypes("fp8", "fp8", "fp8"), Dtypes("fp4", "fp4", "int4"), Dtypes("int8", "bf16", "int8"))


@settings(max_examples=20, deadline=None)
@given(
    st.sampled_from(sorted(WIDE)),
    st.sampled_from(DTYPES),
    st.sampled_from((1, 2, 4, 8)),
    st.integers(1, 256),
    st.integers(1, 8192),
    st.booleans(),
)
def test_tp_across_nvlink_domains_is_never_faster_than_inside_one(
    model: str, dtypes: Dtypes, pp: int, batch: int, context: int, ideal: bool
) -> None:
    """More bandwidth is never slower: the same tp=16 replica (or tp x pp = 16) on one 16-GPU B200 NVLink
    domain and on two 8-GPU nodes joined by the scale-out fabric (50 GB/s per GPU against 900 GB/s of
    NVLink); and on the two nodes, a faster fabric. (A fabric 4x faster is not compared with the one
    domain: each GPU's NIC then adds 200 GB/s to its 900 GB/s of NVLink, and the staged all-reduce
    overlaps the two.)"""
    cfg, chip = WIDE[model], get_chip("b200")
    if cfg.n_layers % pp:
        return
    eff = IDEAL if ideal else default_efficiency("serving", "gpu")
    layout = ServingLayout(tp=16 // pp, pp=pp)
    times = []
    for spec, dcn in (("1x16", 1.0), ("2x8", 1.0), ("2x8", 4.0)):
        c = dataclasses.replace(chip, dcn_bytes_per_s=chip.dcn_bytes_per_s * dcn)
        mesh = make_mesh(parse_topology(c, spec), layout.mesh_axes())
        step = inf.decode_step(cfg, c, mesh, layout, batch * pp, context, dtypes, eff)
        pre = inf.prefill(cfg, c, mesh, layout, 1, min(context, 2048), dtypes, eff)
        assert step.roofline_s > 0
        times.append((step.time_s, step.collective_s, pre.time_s))
    inside, across, faster = times
    for a, b in ((inside, across), (faster, across)):
        assert all(x <= y * (1 + 1e-12) for x, y in zip(a, b, strict=True))
    assert across[1] > inside[1]  # the fabric's hop latency alone makes the cross-node collectives slower


def _valid(req: ServingRequest, layout: ServingLayout) -> bool:
    try:
        sl.validate_layout(req.cfg, layout)
    except Exception:
        return False
    return True
