"""Serving with pinned layouts (``fix``: tp, pp, ep honoured or refused naming the rule) and replicas
across NVLink domains (tp or pp over the scale-out fabric, priced hierarchically and said so)."""

from __future__ import annotations

import dataclasses

import pytest

from rooftop.cli.flags import error_line
from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.workload import Dtypes
from rooftop.plan.serve import layout as sl
from rooftop.plan.serve.candidates import candidate_layouts
from rooftop.plan.serve.crossing import scale_out_axes
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.sweep import ServingRequest, plan_serving
from rooftop.report.reasons import note_texts

L70 = get_model("llama-3-70b")
H100 = get_chip("h100")
B200 = get_chip("b200")
FP4 = Dtypes("fp4", "fp4", "int4")
#: Llama 3 70B: d_model, query heads, KV heads, head dim, d_ff, layers, vocabulary
D, N, K, HD, F, LAYERS, V = 8192, 64, 8, 128, 28672, 80, 128256


def _request(chip, topology: str, fix: dict | None = None, **kw) -> ServingRequest:
    return ServingRequest(L70, chip, parse_topology(chip, topology), 2048, 256, fix=fix, **kw)


# ---------------------------------------------------------------- a pinned layout


def test_pinned_tp_over_two_nodes_decode_memory_time_is_bytes_over_bandwidth() -> None:
    """The issue's case: 70B on 16 H100 with tp=16, one replica over two 8-GPU nodes."""
    req = _request(H100, "16", {"tp": 16}, dtypes=FP4, batch=1)
    plan = plan_serving(req)
    assert {p.layout for p in plan.points} == {ServingLayout(tp=16)}
    step = plan.points[0].decode
    # weights read once: every matmul's share (the head vocabulary-parallel) + the one embedding row, / 16
    weights = LAYERS * ((2 * D * N * HD + 3 * D * F) / 16 + 2 * D * K * HD / 8) + V * D / 16 + D / 16
    # the cache of the sequence at the mean context 2048 + 128, plus the new token, over min(16, 8) KV shards
    kv = (2048 + 128 + 1) * LAYERS * 2 * K * HD * 0.5 / 8
    assert step.weights_bytes == pytest.approx(weights * 0.5, rel=1e-12)
    assert step.kv_cache_bytes == pytest.approx(kv, rel=1e-12)
    assert step.bandwidth_roofline_s == pytest.approx((weights * 0.5 + kv) / 3.35e12, rel=1e-12)
    assert step.weights_s + step.kv_cache_s == pytest.approx((weights * 0.5 + kv) / (3.35e12 * 0.85), rel=1e-12)
    # the step: at least the bandwidth floor, at most every byte at the reached bandwidth, all compute and overheads
    ceiling = step.weights_s + step.kv_cache_s + step.other_memory_s + step.compute_s + step.overhead_s
    assert step.bandwidth_roofline_s <= step.time_s <= ceiling * (1 + 1e-12)


def test_cross_node_tp_is_said_and_priced_on_the_fabric() -> None:
    plan = plan_serving(_request(H100, "16", {"tp": 16}, batch=1))
    assert plan.layouts[0].scale_out_axes == ("tp",)
    note = next(n for n in note_texts(plan.notes) if "crosses NVLink domains" in n)
    assert note.startswith("tp crosses NVLink domains in tp=16 x1 (over 2 domains, 8 chips in each)")
    assert "scale-out fabric" in note and "50 GB/s" in note
    comm = next(t for t in plan.points[0].decode.terms if t.name == "collective all-reduce tp")
    assert comm.collective is not None
    assert {g.group.link for g in comm.collective.groups} == {"fabric", "nvlink"}
    # the same replica inside one NVLink domain (a 16-GPU B200 domain of the NVL72 rack) against two 8-GPU nodes
    inside = plan_serving(_request(B200, "1x16", {"tp": 16}, batch=1))
    across = plan_serving(_request(B200, "2x8", {"tp": 16}, batch=1))
    assert inside.layouts[0].scale_out_axes == () and across.layouts[0].scale_out_axes == ("tp",)
    assert across.points[0].step_time_s > inside.points[0].step_time_s
    assert across.points[0].decode.collective_s > inside.points[0].decode.collective_s


def test_pins_replace_the_options() -> None:
    topo = parse_topology(H100, "16")
    assert {lay.tp for lay in candidate_layouts(ServingRequest(L70, H100, topo, 64, 8))} == {1, 2, 4, 8}
    pinned = candidate_layouts(ServingRequest(L70, H100, topo, 64, 8, fix={"tp": 8, "pp": 2}))
    assert pinned == [ServingLayout(tp=8, pp=2, replicas=1)]  # pp used though pp=1 holds the weights
    only_pp = candidate_layouts(ServingRequest(L70, H100, topo, 64, 8, fix={"pp": 4}))
    assert {(lay.tp, lay.pp, lay.replicas) for lay in only_pp} == {(1, 4, 4), (2, 4, 2), (4, 4, 1)}
    mix = get_model("mixtral-8x7b")
    ep = candidate_layouts(ServingRequest(mix, H100, parse_topology(H100, "8"), 64, 8, fix={"ep": 4}))
    assert {(lay.tp, lay.ep) for lay in ep} == {(4, 4), (8, 4)}


def test_tp_across_domains_joins_the_sweep_only_when_nothing_holds_the_weights_inside_one() -> None:
    big = get_model("llama-3.1-405b")
    sweep = candidate_layouts(ServingRequest(big, H100, parse_topology(H100, "2x8"), 1024, 256))
    assert ServingLayout(tp=16) in sweep and ServingLayout(tp=8, pp=2) in sweep
    small = candidate_layouts(ServingRequest(L70, H100, parse_topology(H100, "2x8"), 1024, 256))
    assert max(lay.tp for lay in small) == 8


@pytest.mark.parametrize(
    ("fix", "message"),
    [
        ({"tp": 3}, "--fix tp=3: tp=3 does not divide n_heads=64; valid: 1, 2, 4, 8"),
        ({"tp": 32}, "--fix tp=32: tp=32 chips per replica do not divide the slice's 16 chips; valid"),
        ({"tp": 8, "pp": 4}, "tp=8 x pp=4 = 32 chips per replica do not divide the slice's 16 chips"),
        ({"pp": 3}, "pp=3 does not divide n_layers=80"),
        ({"ep": 2}, "ep=2 needs a mixture-of-experts model; llama-3-70b is dense"),
        ({"tp": 0}, "pinned tp=0 must be a positive integer"),
        ({"dp": 2}, "cannot pin 'dp' (valid: tp, pp, ep, attn_dp, kv_batch)"),
    ],
)
def test_a_refused_pin_names_the_rule(fix: dict, message: str) -> None:
    with pytest.raises(InvalidConfigError) as err:
        _request(H100, "16", fix)
    assert message in error_line(err.value) and "\n" not in str(err.value)  # as the CLI says it (flags spelled)


def test_pinned_ep_and_kv_heads_and_batch_rules() -> None:
    mix = get_model("mixtral-8x7b")
    with pytest.raises(InvalidConfigError, match=r"ep=4 must divide tp=2"):
        ServingRequest(mix, H100, parse_topology(H100, "8"), 64, 8, fix={"tp": 2, "ep": 4})
    with pytest.raises(InvalidConfigError, match=r"ep=16 does not divide n_experts=8"):
        ServingRequest(mix, H100, parse_topology(H100, "16"), 64, 8, fix={"ep": 16})
    odd = dataclasses.replace(L70, n_heads=48, n_kv_heads=6)
    with pytest.raises(
        InvalidConfigError, match=r"tp=4 neither divides nor is a multiple of n_kv_heads=6; valid: 1, 2,"
    ):
        ServingRequest(odd, H100, parse_topology(H100, "8"), 64, 8, fix={"tp": 4})
    with pytest.raises(InvalidConfigError, match=r"batch=3 does not split into the pinned pp=2 microbatches"):
        _request(H100, "16", {"pp": 2}, batch=3)


def test_parse_fix_reads_the_layouts_degrees() -> None:
    assert sl.parse_fix("tp=16,pp=2") == {"tp": 16, "pp": 2}
    assert sl.parse_fix(None) == {}
    with pytest.raises(InvalidConfigError, match=r"fix cannot pin 'dp' \(valid: tp, pp, ep, attn_dp, kv_batch\)") as e:
        sl.parse_fix("dp=2")
    assert error_line(e.value).startswith("--fix cannot pin 'dp'")  # the CLI spells the option as its flag


def test_scale_out_axes_of_a_mesh() -> None:
    topo = parse_topology(H100, "4x8")
    assert scale_out_axes(make_mesh(topo, ServingLayout(tp=8, replicas=4).mesh_axes())) == ()
    assert scale_out_axes(make_mesh(topo, ServingLayout(tp=16, replicas=2).mesh_axes())) == ("tp",)
    assert scale_out_axes(make_mesh(topo, ServingLayout(tp=4, pp=4, replicas=2).mesh_axes())) == ("pp",)
