"""plan/serve/layout.py and phase.py: the KV cache sharded over the batch (``kv_batch``) and attention
data parallelism (``attn_dp``): what each chip stores and reads, the collectives they add, and the
properties every layout keeps (more chips never hold more cache per chip, nor fit fewer sequences)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from rooftop.cost.efficiency import IDEAL, default_efficiency
from rooftop.cost.figures import HiddenFigures
from rooftop.cost.roofline import figures_of
from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology, topology_for_chips
from rooftop.model.catalog import get_model
from rooftop.model.memory import kv_cache_bytes
from rooftop.model.workload import Dtypes
from rooftop.plan.serve import layout as sl
from rooftop.plan.serve import phase
from rooftop.plan.serve.candidates import candidate_layouts
from rooftop.plan.serve.crossing import scale_out_axes
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.sweep import ServingRequest, plan_serving
from rooftop.report.reasons import note_texts

L70 = get_model("llama-3-70b")
MIXTRAL = get_model("mixtral-8x7b")
DSV3 = get_model("deepseek-v3")
V5E = get_chip("tpu-v5e")
H100 = get_chip("h100")
H200 = get_chip("h200")
BF16 = Dtypes()
#: Llama 3 70B: d_model, query heads, KV heads, head dim, d_ff, layers, vocabulary
D, N, K, HD, F, LAYERS, V = 8192, 64, 8, 128, 28672, 80, 128256
KV_PER_TOKEN = 2 * LAYERS * K * HD * 2  # keys and values, bf16: 327,680 bytes


# ---------------------------------------------------------------- kv_batch: the cache over the batch


def test_kv_batch_splits_the_cache_the_ways_the_kv_heads_leave() -> None:
    plain, book = ServingLayout(tp=32), ServingLayout(tp=32, kv_batch=4)
    whole = 8 * 8192 * KV_PER_TOKEN
    assert sl.kv_cache_per_chip_bytes(L70, plain, 8, 8192, "bf16") == whole / 8  # min(32, 8) head shards: 4 copies
    assert sl.kv_cache_per_chip_bytes(L70, book, 8, 8192, "bf16") == whole / 32  # 8 heads x 4 batch shards
    # weights and matmuls are those of tp=32: kv_batch moves no weight
    assert sl.weights_per_chip_bytes(L70, book, "bf16") == sl.weights_per_chip_bytes(L70, plain, "bf16")
    # stored weights: every tensor-parallel matmul / 32, k and v / 8 (8 KV heads), embedding and head / 32
    # (vocabulary-parallel), the norms on every chip; bf16
    per_layer = (2 * D * N * HD + 3 * D * F) / 32 + 2 * D * K * HD / 8 + 2 * D
    assert sl.weights_per_chip_bytes(L70, book, "bf16") == 2 * (LAYERS * per_layer + 2 * V * D / 32 + D)


def test_kv_batch_must_divide_what_the_heads_leave() -> None:
    sl.validate_layout(L70, ServingLayout(tp=32, kv_batch=2))
    with pytest.raises(InvalidConfigError, match=r"kv_batch=2 does not divide the 1 ways tp=8 leaves"):
        sl.validate_layout(L70, ServingLayout(tp=8, kv_batch=2))
    with pytest.raises(InvalidConfigError, match=r"kv_batch=3 must divide tp=32"):
        ServingLayout(tp=32, kv_batch=3)
    with pytest.raises(InvalidConfigError, match=r"use one of them"):
        ServingLayout(tp=8, kv_batch=2, attn_dp=2)


def test_kv_batch_decode_reads_its_shard_and_pays_two_all_to_alls_a_layer() -> None:
    book = ServingLayout(tp=32, kv_batch=4)
    mesh = make_mesh(parse_topology(V5E, "4x8"), book.mesh_axes())
    assert book.mesh_axes() == {"kv_batch": 4, "tp": 8} and book.tp_axes == ("kv_batch", "tp")
    step = phase.decode_step(L70, V5E, mesh, book, 64, 4096, BF16, IDEAL)
    plain = phase.decode_step(
        L70, V5E, make_mesh(mesh.topology, {"tp": 32}), ServingLayout(tp=32), 64, 4096, BF16, IDEAL
    )
    # the cache each chip reads: 64 sequences x (4096 cached + the new token), / 32 (plain: / 8)
    assert step.kv_cache_bytes == pytest.approx(64 * 4097 * KV_PER_TOKEN / 32, rel=1e-12)
    assert plain.kv_cache_bytes == pytest.approx(4 * step.kv_cache_bytes, rel=1e-12)
    assert step.weights_bytes == plain.weights_bytes and step.flops == plain.flops
    comms = phase.tp_comms(L70, book, 64, BF16)
    (ar, n_ar), (a2a, n_a2a) = comms
    assert (ar.kind, ar.axes, ar.bytes, n_ar) == ("all-reduce", ("kv_batch", "tp"), 64 * D * 2, 2 * LAYERS)
    # queries to batch sharding, outputs back: each chip's shard of 64 tokens x 64 heads x 128, bf16
    assert (a2a.kind, a2a.axes, a2a.bytes, n_a2a) == ("all-to-all", ("kv_batch",), 64 * N * HD * 2 / 32, 2 * LAYERS)
    assert step.collectives == 4 * LAYERS
    assert step.collective_s > plain.collective_s


def test_kv_batch_is_swept_where_heads_would_be_copied() -> None:
    req = ServingRequest(L70, V5E, parse_topology(V5E, "4x8"), 7680, 512)
    splits = {(lay.tp, lay.kv_batch) for lay in candidate_layouts(req)}
    assert {(16, 2), (32, 4), (32, 1), (8, 1)} <= splits
    assert not any(kb > 1 for t, kb in splits if t <= K)  # no copies to save at tp <= 8
    pinned = ServingRequest(L70, V5E, parse_topology(V5E, "4x8"), 7680, 512, fix={"kv_batch": 4})
    assert {(lay.tp, lay.kv_batch) for lay in candidate_layouts(pinned)} == {(32, 4)}


# ---------------------------------------------------------------- attn_dp: attention data parallelism


def test_attn_dp_replicates_attention_and_splits_the_cache_over_requests() -> None:
    tp8 = ServingLayout(tp=8, ep=8)
    dp8 = ServingLayout(tp=8, ep=8, attn_dp=8)
    d, n, k, h, f, e, layers = 4096, 32, 8, 128, 14336, 8, 32  # Mixtral 8x7B
    attention = 2 * d * n * h + 2 * d * k * h
    # attention weights whole on every rank (attention tp = 8 / 8 = 1), experts 8 over ep=8 (one whole each),
    # router and norms replicated, embedding and head vocabulary-parallel over the 8 chips
    expected = layers * (attention + e * 3 * d * f / 8 + d * e + 2 * d) + 2 * 32000 * d / 8 + d
    assert sl.weights_per_chip_bytes(MIXTRAL, dp8, "bf16") == 2 * expected
    assert sl.weights_per_chip_bytes(MIXTRAL, tp8, "bf16") == 2 * (expected - layers * attention * 7 / 8)
    # the cache: tp=8 splits the 8 KV heads; attn_dp=8 keeps each rank's own requests (same bytes per chip)
    whole = kv_cache_bytes(MIXTRAL, 16, 1024)
    assert sl.kv_cache_per_chip_bytes(MIXTRAL, tp8, 16, 1024, "bf16") == whole / 8
    assert sl.kv_cache_per_chip_bytes(MIXTRAL, dp8, 16, 1024, "bf16") == whole / 8


def test_mla_latent_is_replicated_under_tp_and_split_over_requests_under_attn_dp() -> None:
    per_token = 61 * (512 + 64) * 2  # DeepSeek-V3: 61 layers of the 512 latent + 64 rotary key, bf16
    assert kv_cache_bytes(DSV3, 1, 1) == per_token
    tp8, dp8 = ServingLayout(tp=8, ep=8), ServingLayout(tp=8, ep=8, attn_dp=8)
    assert sl.kv_cache_per_chip_bytes(DSV3, tp8, 64, 2048, "bf16") == 64 * 2048 * per_token  # on every chip
    assert sl.kv_cache_per_chip_bytes(DSV3, dp8, 64, 2048, "bf16") == 64 * 2048 * per_token / 8
    mem: dict[str, Any] = dict(
        cfg=DSV3, chip=H200, context_len=2048, dtypes=Dtypes("fp8"), eff=default_efficiency("serving", "gpu")
    )
    usable = 141 * 2**30 * 0.9  # H200: 141 GiB, 90% usable
    for lay, split in ((tp8, 1), (dp8, 8)):
        free = usable - sl.weights_per_chip_bytes(DSV3, lay, "fp8")
        fit = int(free // (2048 * per_token / split))
        assert sl.max_batch(layout=lay, **mem) == fit - fit % lay.batch_unit
    # the attention weights, replicated 8 times, cost some room; the cache split 8 ways more than repays it
    assert sl.max_batch(layout=dp8, **mem) > 6 * sl.max_batch(layout=tp8, **mem)


def test_attn_dp_collectives_gather_and_scatter_tokens_around_the_mlp() -> None:
    dp8 = ServingLayout(tp=8, ep=8, attn_dp=8)
    assert dp8.mesh_axes() == {"attn_dp": 8} and dp8.tp_axes == ("attn_dp",)
    (ag, n1), (rs, n2) = phase.tp_comms(DSV3, dp8, 256, BF16)
    assert (ag.kind, ag.axes, ag.bytes, n1) == ("all-gather", ("attn_dp",), 256 * 7168 * 2, 61)
    assert (rs.kind, rs.axes, rs.bytes, n2) == ("reduce-scatter", ("attn_dp",), 256 * 7168 * 2, 61)
    # two ranks of 4 chips each: the attention all-reduce stays inside a rank, over its 128 tokens
    dp2 = ServingLayout(tp=8, ep=8, attn_dp=2)
    *_, (ar, n3) = phase.tp_comms(DSV3, dp2, 256, BF16)
    assert (ar.kind, ar.axes, ar.bytes, n3) == ("all-reduce", ("tp",), 128 * 7168 * 2, 61)


def test_attn_dp_one_prompt_runs_on_one_rank() -> None:
    dp8 = ServingLayout(tp=8, ep=8, attn_dp=8)
    assert sl.busiest_fraction(dp8, 1) == 1.0 and sl.busiest_fraction(dp8, 16) == 1 / 8
    assert sl.busiest_fraction(dp8, 9) == 2 / 9


def test_pinned_attn_dp_on_deepseek_h200() -> None:
    """The issue's case: deepseek-v3 on 8 H200, attn_dp=8, ep=8, fp8 weights."""
    req = ServingRequest(
        DSV3, H200, topology_for_chips(H200, 8), 1024, 1024, Dtypes("fp8"), fix={"attn_dp": 8, "ep": 8}
    )
    plan = plan_serving(req)
    assert {p.layout for p in plan.points} == {ServingLayout(tp=8, ep=8, attn_dp=8)}
    assert plan.chosen is not None and plan.layouts[0].max_batch > 0
    with pytest.raises(InvalidConfigError, match=r"attn_dp=3 must divide tp=8"):
        ServingRequest(DSV3, H200, topology_for_chips(H200, 8), 1024, 1024, fix={"attn_dp": 3, "tp": 8})
    with pytest.raises(InvalidConfigError, match=r"batch=4 does not split into the pinned attn_dp=8"):
        ServingRequest(DSV3, H200, topology_for_chips(H200, 8), 1024, 1024, batch=4, fix={"attn_dp": 8})


def test_split_tp_group_over_two_nodes_is_priced_on_the_fabric() -> None:
    """A TP group over two NVLink domains stays a scale-out crossing when it lies on two mesh axes."""
    topo = parse_topology(H100, "16")
    for lay in (ServingLayout(tp=16, kv_batch=2), ServingLayout(tp=16, ep=16, attn_dp=2)):
        assert scale_out_axes(make_mesh(topo, lay.mesh_axes())) == ("tp",)
    req = ServingRequest(L70, H100, topo, 2048, 256, fix={"tp": 16, "kv_batch": 2}, batch=8)
    plan = plan_serving(req)
    assert plan.layouts[0].scale_out_axes == ("tp",)
    assert any(
        n.startswith("tp crosses NVLink domains in tp=16 kv_batch=2 x1 (over 2 domains") for n in note_texts(plan.notes)
    )
    a2a = next(t for t in plan.points[0].decode.terms if t.name == "collective all-to-all kv_batch")
    assert a2a.collective is not None and a2a.collective.devices == 2


# ---------------------------------------------------------------- properties


@pytest.mark.parametrize("cfg", [L70, MIXTRAL, DSV3, get_model("llama-3-8b")], ids=lambda c: c.name)
def test_more_chips_never_hold_more_cache_per_chip(cfg) -> None:
    """Per-chip cache of the best split at each tp never grows with tp, and splitting (kv_batch, attn_dp)
    never holds more than the same tp without it."""
    best = []
    for tp in (1, 2, 4, 8, 16, 32, 64):
        lays = [ServingLayout(tp=tp)]
        lays += [ServingLayout(tp=tp, kv_batch=z) for z in (2, 4, 8) if tp % z == 0]
        lays += [ServingLayout(tp=tp, attn_dp=a) for a in (2, 4, 8, tp) if tp % a == 0]
        ok = [lay for lay in lays if _valid(cfg, lay)]
        if not ok:
            continue
        kv = [sl.kv_cache_per_chip_bytes(cfg, lay, 64, 4096, "bf16") for lay in ok]
        assert all(x <= kv[0] for x in kv[1:])  # ok[0] is the plain layout when valid
        best.append(min(kv))
    assert all(b <= a for a, b in itertools.pairwise(best))


def _valid(cfg, lay: ServingLayout) -> bool:
    try:
        sl.validate_layout(cfg, lay)
    except InvalidConfigError:
        return False
    return True


@pytest.mark.parametrize(("cfg", "chip"), [(L70, V5E), (L70, H100), (MIXTRAL, H100)], ids=lambda x: x.name)
def test_max_batch_never_decreases_with_more_chips(cfg, chip) -> None:
    """The most sequences a slice holds (best layout: max batch per replica x replicas) never falls as
    the slice grows."""
    eff = default_efficiency("serving", chip.kind)
    held = []
    for n in (8, 16, 32, 64):
        req = ServingRequest(cfg, chip, topology_for_chips(chip, n), 7680, 512, efficiency=eff)
        held.append(max(sl.max_batch(cfg, chip, lay, 8192, BF16, eff) * lay.replicas for lay in candidate_layouts(req)))
    assert all(b >= a for a, b in itertools.pairwise(held)), held


# ---------------------------------------------------------------- tp_overlap: collectives under the matmuls


@pytest.mark.parametrize("batch", [1, 64, 148])
def test_tp_overlap_hides_the_collectives_bandwidth_time_under_the_matmuls(batch: int) -> None:
    """hidden = min(collectives - their latency, tp_overlap x matmul ops' time); the step loses exactly
    that, and the latency part always stays on it."""
    book = ServingLayout(tp=32, kv_batch=4)
    mesh = make_mesh(parse_topology(V5E, "4x8"), book.mesh_axes())
    base = phase.decode_step(L70, V5E, mesh, book, batch, 8192, BF16, IDEAL)
    assert base.collective_hidden_s == 0 and base.collective_exposed_s == base.collective_s
    assert not [t for t in base.terms if t.kind == "hidden"]
    for f in (0.25, 0.5, 1.0):
        step = phase.decode_step(L70, V5E, mesh, book, batch, 8192, BF16, IDEAL.replace(tp_overlap=f))
        bandwidth = step.collective_s - step.collective_latency_s
        assert step.collective_hidden_s == pytest.approx(min(bandwidth, f * step.group_s["matmul"]), rel=1e-12)
        assert step.time_s == pytest.approx(base.time_s - step.collective_hidden_s, rel=1e-12)
        assert step.collective_exposed_s >= step.collective_latency_s - 1e-15
        assert step.time_s <= base.time_s  # more overlap is never slower
        hidden = [t for t in step.terms if t.kind == "hidden"]  # traced as a negative term when there is any
        assert [(t.seconds, figures_of(t, HiddenFigures).overlap) for t in hidden] == (
            [(-step.collective_hidden_s, f)] if step.collective_hidden_s > 0 else []
        )
    # the matmuls are the ceiling: at batch 148 the all-reduces' bandwidth time is larger than them
    assert step.collective_hidden_s == pytest.approx(
        min(step.collective_s - step.collective_latency_s, step.group_s["matmul"]), rel=1e-12
    )


def test_tp_overlap_has_nothing_to_hide_without_tensor_parallelism() -> None:
    mesh = make_mesh(parse_topology(H100, "1"), {"tp": 1})
    step = phase.decode_step(
        get_model("llama-3-8b"), H100, mesh, ServingLayout(tp=1), 32, 2048, BF16, IDEAL.replace(tp_overlap=1)
    )
    assert step.collective_s == 0 and step.collective_hidden_s == 0


def test_serving_default_keeps_tp_collectives_on_the_step() -> None:
    for kind in ("gpu", "tpu"):
        eff = default_efficiency("serving", kind)
        assert eff.tp_overlap == 0 and "tp_overlap" in eff.sources
