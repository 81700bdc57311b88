"""The training search's bound and its batched enumeration against the straightforward search: every layout
validated, laid on the mesh, its first fitting variant found and its step priced on its own (plan/train/step.
evaluate), no sharing between layouts and no pruning. The search must return the same layouts, in the same
order, with the same step times."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooftop.cost.efficiency import default_efficiency
from rooftop.errors import InvalidConfigError, ShardingError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.plan.train.bound import (
    _unique_rows,
    dp_bound_s,
    fsdp_bound_s,
    least_held_layers,
    step_lower_bounds,
    variant_bound_s,
)
from rooftop.plan.train.candidates import (
    ROW_FIELDS,
    candidate_layouts,
    candidate_rows,
    layout_template,
    row_layout,
    row_table,
)
from rooftop.plan.train.layout import stage_split, validate
from rooftop.plan.train.netbound import network_floor
from rooftop.plan.train.search import _Context, _first_fit, search
from rooftop.plan.train.step import StepResult, TrainingSetup, evaluate, layout_mesh


def _setup(model: str, chip_name: str, topo: str, batch: int, seq: int) -> TrainingSetup:
    chip = get_chip(chip_name)
    return TrainingSetup(get_model(model), chip, parse_topology(chip, topo), batch, seq, default_efficiency("training"))


def _straightforward(setup: TrainingSetup, fix: dict[str, object], top: int) -> list[StepResult]:
    ctx = _Context(setup, fix)
    fitting = []
    for base in candidate_layouts(setup, fix):
        try:
            validate(base, setup.cfg, setup.chips, setup.global_batch, setup.seq_len)
            pricer = setup.pricer(layout_mesh(setup.topology, base))
        except (InvalidConfigError, ShardingError):
            continue
        fit = _first_fit(ctx, base)
        if fit.fits:
            fitting.append(evaluate(setup, ctx.make(base, fit.variant), pricer))
    fitting.sort(key=lambda r: (r.step_time_s, r.memory_per_chip_bytes))
    return fitting[:top]


CASES = [
    ("llama-3-70b", "h100", "8x8", 128, 4096, {}),
    ("llama-3-70b", "tpu-v5p", "4x4x4", 256, 8192, {"remat": "none"}),
    ("mixtral-8x7b", "tpu-v5e", "4x8", 64, 4096, {}),
    ("deepseek-v3", "h100", "32x8", 512, 4096, {"tp": 2}),
]


@pytest.mark.parametrize(("model", "chip", "topo", "batch", "seq", "fix"), CASES)
def test_search_ranks_as_the_straightforward_search(
    model: str, chip: str, topo: str, batch: int, seq: int, fix: dict[str, object]
) -> None:
    setup = _setup(model, chip, topo, batch, seq)
    want = _straightforward(setup, fix, 3)
    got = search(setup, dict(fix), top=3)
    assert want, "the case has fitting layouts"
    assert [r.parallelism for r in got.ranked] == [r.parallelism for r in want]
    assert [r.step_time_s for r in got.ranked] == pytest.approx([r.step_time_s for r in want], rel=1e-12)


@pytest.mark.parametrize(
    ("model", "chip", "topo", "batch", "seq"),
    [
        ("mixtral-8x7b", "tpu-v5e", "4x8", 64, 4096),
        # parallel layers (one tensor-parallel pair a layer) and a GPU stack that hides pipeline sends
        ("palm-540b", "h100", "64x8", 256, 2048),
        # FSDP and data-parallel layouts on NCCL, whose hidden collectives take compute (bound.fsdp_bound_s, dp_bound_s)
        ("llama-3-8b", "h100", "4x8", 64, 4096),
        # expert all-to-alls on NCCL (bound.ep_bound_s: at least overlap_cost of them)
        ("mixtral-8x7b", "h100", "4x8", 64, 4096),
    ],
)
def test_the_bound_is_below_every_priced_step(model: str, chip: str, topo: str, batch: int, seq: int) -> None:
    """Each layout the search prices takes at least its bound (what lets the search skip the rest)."""
    import numpy as np

    setup = _setup(model, chip, topo, batch, seq)
    result = search(setup, {}, top=10_000)
    ctx = _Context(setup, {})
    rows = np.array([[getattr(r.parallelism, f) for f in ROW_FIELDS] for r in result.ranked], dtype=np.int64)
    profiles = [ctx.profile(r) for r in ("none", "selective", "dots", "full")]
    bounds, per_layer = step_lower_bounds(rows, setup.global_batch, profiles)
    steps = np.array([r.step_time_s for r in result.ranked])
    assert len(steps) > 50 and np.all(bounds <= steps) and np.all(bounds > 0)
    # and with every layout's communication at its least before its mesh is built (netbound.network_floor)
    held = least_held_layers(rows, ctx.profile(ctx.first_remat))[2]
    network = network_floor(rows, setup, ctx.profile(ctx.first_remat), per_layer, held)
    assert np.all(bounds + network <= steps * (1 + 1e-12)) and np.any(network > 0)
    for r in result.ranked:  # and the bound of each layout's kept variant, once its mesh is known
        par = r.parallelism
        pricer = setup.pricer(layout_mesh(setup.topology, par))
        assert 0 < variant_bound_s(setup, par, pricer, ctx.profile(par.remat)) <= r.step_time_s * (1 + 1e-12)


@pytest.mark.parametrize(
    ("model", "chip", "topo", "batch", "seq"),
    [("llama-3-8b", "h100", "4x8", 64, 4096), ("mixtral-8x7b", "tpu-v5e", "4x8", 64, 4096)],
)
def test_the_mesh_floor_is_below_every_priced_step(model: str, chip: str, topo: str, batch: int, seq: int) -> None:
    """What the search skips a mesh's later rows by (prune.Pruning.comm_floor): the rows' compute bound, plus per layer
    the FSDP traffic and once the data-parallel reduction of a stage of the fewest layers any row of the mesh
    holds (bound.least_held_layers), is at most each priced step; and that reduction at most the layout's own."""
    setup = _setup(model, chip, topo, batch, seq)
    result = search(setup, {}, top=10_000)
    ctx = _Context(setup, {})
    prof = ctx.profile(ctx.first_remat)
    table = row_table(list(candidate_rows(setup, {})))
    mesh_of, fewest, holds = least_held_layers(table, prof)
    where = {tuple(row): mesh_of[i] for i, row in enumerate(table.tolist())}
    assert [
        stage_split(prof.n_layers, row_layout(tuple(row), layout_template({})), prof.head_layers).held
        for row in table.tolist()
    ] == holds.tolist()
    rows = np.array([[getattr(r.parallelism, f) for f in ROW_FIELDS] for r in result.ranked], dtype=np.int64)
    profiles = [ctx.profile(r) for r in ("none", "selective", "dots", "full")]
    bounds, per_layer = step_lower_bounds(rows, setup.global_batch, profiles)
    floored = 0
    for r, bound, layers, row in zip(result.ranked, bounds, per_layer, rows.tolist(), strict=True):
        par, held = r.parallelism, int(fewest[where[tuple(row)]])
        pricer = setup.pricer(layout_mesh(setup.topology, par))
        assert held <= stage_split(prof.n_layers, par, prof.head_layers).held
        dp_least = dp_bound_s(setup, par, pricer, prof, held)
        assert dp_least <= dp_bound_s(setup, par, pricer, prof) * (1 + 1e-12)
        fsdp = fsdp_bound_s(setup, par, pricer, prof) if par.fsdp_reshard else 0.0
        assert bound + layers * fsdp + dp_least <= r.step_time_s * (1 + 1e-12)
        floored += dp_least > 0
    assert len(result.ranked) > 50 and (floored > 0) == (setup.stack.overlap_cost > 0)


def test_the_search_skips_layouts_by_the_bound_and_keeps_the_fastest() -> None:
    setup = _setup("llama-3-70b", "h100", "8x8", 128, 4096)
    full = search(setup, {}, objective="memory", top=10_000)  # the memory objective visits every layout
    fastest = min(full.ranked, key=lambda r: (r.step_time_s, r.memory_per_chip_bytes))
    got = search(setup, {}, top=1)
    assert full.pruned == 0 and got.pruned > 0 and got.timed < full.timed
    assert got.ranked[0].parallelism == fastest.parallelism and got.ranked[0].step_time_s == fastest.step_time_s


def test_a_space_over_the_cap_is_refused_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import rooftop.plan.train.search as search_module

    monkeypatch.setattr(search_module, "MAX_LAYOUTS", 10)
    with pytest.raises(InvalidConfigError, match="more than 10 layouts to search; pin some degrees"):
        search(_setup("llama-3-70b", "h100", "8x8", 128, 4096))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(*[st.integers(-3, 9)] * 3), min_size=1, max_size=40))
def test_unique_rows_are_numpys(rows: list[tuple[int, int, int]]) -> None:
    """bound._unique_rows (by np.lexsort) gives np.unique(axis=0, return_inverse=True)'s rows, order and index."""
    table = np.array(rows, dtype=np.int64)
    keys, index = _unique_rows(table)
    want_keys, want_index = np.unique(table, axis=0, return_inverse=True)
    assert keys.tolist() == want_keys.tolist() and index.tolist() == want_index.ravel().tolist()
    assert (keys[index] == table).all()


_TOPOLOGIES = [
    ("h100", "4x8", {"dp": 2, "fsdp": 2, "ep": 2, "tp": 4}),
    ("h100", "16x8", {"dp": 4, "fsdp": 8, "tp": 4}),
    ("h100", "16x8", {"dp": 2, "pp": 2, "fsdp": 8, "cp": 2, "tp": 2}),
    ("tpu-v5p", "4x4x8", {"dp": 2, "fsdp": 4, "cp": 2, "tp": 8}),
    ("tpu-v5e", "8x16", {"dp": 4, "ep": 4, "tp": 8}),
    ("tpu-v5e", "4*4x8", {"dp": 8, "fsdp": 2, "tp": 8}),
]


@pytest.mark.parametrize(("chip_name", "topo", "axes"), _TOPOLOGIES)
def test_the_least_collective_time_is_below_every_algorithms(chip_name: str, topo: str, axes: dict[str, int]) -> None:
    """netbound's premise: on any axes of a mesh, every registered algorithm (and the rules all-to-all and permute
    keep whatever the algorithm) prices a collective at no less than netbound.least_collective_s at the chip's
    ingress and, over the scale-out domains the axes span, at its NIC's. Not slack by much: on one NVLink or ICI
    axis within the share of the chip's links the axis uses (2 of the 8 ICI links and the NIC of a multislice
    v5e chip: a fifth), and across domains within a half of some algorithm's time."""
    import itertools

    from rooftop.cost.algorithms import Algorithm, algorithm_names
    from rooftop.cost.collectives import collective_time
    from rooftop.cost.cost import Comm
    from rooftop.hardware.topology import domains_spanned, make_mesh
    from rooftop.plan.train.netbound import chip_ingress, least_collective_s, scale_out_rate

    chip = get_chip(chip_name)
    topology = parse_topology(chip, topo)
    mesh = make_mesh(topology, axes)
    rate, out_rate = chip_ingress(chip, topology) * 0.8, scale_out_rate(chip, topology) * 0.8
    names = list(mesh.shape)
    tight = tight_out = 0.0
    for size in (1, 2, 3):
        for picked in itertools.combinations(names, size):
            n = np.array([float(np.prod([mesh.shape[a] for a in picked]))])
            for kind in ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "permute"):
                if kind == "permute" and size > 1:
                    continue
                n_out = int(np.prod([domains_spanned(mesh.axis(a)) for a in picked]))
                want = float(least_collective_s(kind, n, 2.0**24, rate, n_out, out_rate)[0])
                for name in (*algorithm_names(), None):
                    algo = Algorithm(name) if name is not None else None
                    try:
                        got = collective_time(
                            Comm(kind, picked, 2.0**24), mesh, chip, network_efficiency=0.8, algorithm=algo
                        )
                    except InvalidConfigError:  # in-network reduction off switched links
                        continue
                    assert want <= got.time_s * (1 + 1e-12), (kind, picked, name)
                    if size == 1 and topology.dims[mesh.axis(picked[0]).segments[0].dim].link in ("nvlink", "ici"):
                        tight = max(tight, want / got.time_s)
                    if n_out > 1:
                        tight_out = max(tight_out, want / got.time_s)
    assert tight > 0.2 and (tight_out > 0.5 or scale_out_rate(chip, topology) == 0)


# the stack's own algorithm (NCCL's ring), the others registered, FSDP launch costs, synchronous pipeline sends
STACKS = [
    ("megatron", ""),
    ("megatron", "hierarchical"),
    ("megatron", "in-network"),
    ("megatron", "tree"),
    ("megatron", "bidirectional-ring"),
    ("pytorch-fsdp1", ""),
    ("megatron-2021", ""),
]


@pytest.mark.parametrize(("framework", "algorithm"), STACKS)
@pytest.mark.parametrize(
    ("model", "chip", "topo", "batch", "seq"),
    [("llama-3-8b", "h100", "4x8", 64, 4096), ("mixtral-8x7b", "h100", "4x8", 64, 4096)],
)
def test_the_network_floor_is_below_each_layouts_priced_bounds(
    model: str, chip: str, topo: str, batch: int, seq: int, framework: str, algorithm: str
) -> None:
    """netbound.network_floor of every candidate row, whatever the stack's algorithm, is at most what the search
    adds once the row's mesh is priced: per layer its tensor-parallel, ring-attention, FSDP and expert bounds, its
    pipeline's sends and its data-parallel reduction (bound.py), each at least as large as its counterpart."""
    from dataclasses import replace

    from rooftop.cost.algorithms import Algorithm
    from rooftop.plan.train.bound import cp_bound_s, ep_bound_s, pipeline_bound_s, tp_bound_s
    from rooftop.plan.train.framework import get_framework

    base = _setup(model, chip, topo, batch, seq)
    stack = get_framework(framework)
    stack = replace(stack, algorithm=Algorithm(algorithm) if algorithm else stack.algorithm)
    setup = replace(base, framework=stack, efficiency=replace(base.efficiency, ep_overlap=0.0))
    ctx = _Context(setup, {})
    prof = ctx.profile(ctx.first_remat)
    table = row_table(list(candidate_rows(setup, {})))
    _, per_layer = step_lower_bounds(table, setup.global_batch, [ctx.profile(r) for r in ("none", "full")])
    held = least_held_layers(table, prof)[2]
    floor = network_floor(table, setup, prof, per_layer, held)
    template, checked = layout_template({}), 0
    for i, row in enumerate(table.tolist()):
        par = row_layout(tuple(row), template)
        try:
            validate(par, setup.cfg, setup.chips, setup.global_batch, setup.seq_len)
            pricer = setup.pricer(layout_mesh(setup.topology, par))
        except (InvalidConfigError, ShardingError):
            continue
        per = (
            tp_bound_s(setup, par, pricer)
            + cp_bound_s(setup, par, pricer)
            + fsdp_bound_s(setup, par, pricer, prof)
            + ep_bound_s(setup, par, pricer, prof)
        )
        priced = per_layer[i] * per + pipeline_bound_s(setup, par, pricer) + dp_bound_s(setup, par, pricer, prof)
        assert floor[i] <= priced * (1 + 1e-12), row
        checked += floor[i] > 0
    assert checked > 100


@pytest.mark.parametrize(
    ("model", "chip_name", "topo", "batch"),
    [
        ("llama-3-70b", "h100", "8192x8", 65536),
        ("deepseek-v3", "h100", "256x8", 4096),
        ("mixtral-8x7b", "tpu-v5e", "4*4x8", 256),
        ("llama-3-8b", "h100", "6x8", 96),  # axes that take part of a dim (dp=4 on 6 nodes: 2 of them, then 2 GPUs)
    ],
)
def test_scale_out_ways_are_the_meshes(model: str, chip_name: str, topo: str, batch: int) -> None:
    """netbound.scale_out_ways lays every candidate row's axes as step.layout_mesh does: per mesh axis, the
    domains it spans over the scale-out network (topology.domains_spanned of make_mesh's segments)."""
    from rooftop.hardware.topology import domains_spanned
    from rooftop.plan.train.netbound import MESH_ORDER, scale_out_ways

    setup = _setup(model, chip_name, topo, batch, 4096)
    table = row_table(list(candidate_rows(setup, {})))
    ways = scale_out_ways(table, setup.topology)
    template, laid = layout_template({}), 0
    for row, got in zip(table.tolist(), ways.tolist(), strict=True):
        try:
            mesh = layout_mesh(setup.topology, row_layout(tuple(row), template))
        except ShardingError:
            continue
        want = [domains_spanned(mesh.axis(a)) if a in mesh.shape else 1 for a in MESH_ORDER]
        assert got == want, row
        laid += max(want) > 1
    assert laid > 100
