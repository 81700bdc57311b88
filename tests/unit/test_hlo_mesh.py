"""Replica groups -> mesh axes: matching on a given mesh, inferring one, collective-permute pairs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rooftop.analysis.hlo.groups import device_groups
from rooftop.analysis.hlo.mesh import (
    LogicalMesh,
    collective_use,
    given_mesh,
    infer_mesh,
    match_groups,
    match_pairs,
    place,
)
from rooftop.analysis.hlo.parse import parse_instruction
from rooftop.errors import InvalidConfigError, ShardingError
from rooftop.report.reasons import note_text, sentence

DATA_MODEL = given_mesh("data=4,model=2")  # device d = (d // 2, d % 2), as jax.sharding.Mesh numbers it


def fibres(mesh: LogicalMesh, axes: set[int]) -> list[list[int]]:
    """Groups of devices that share their coordinates on every axis not in ``axes`` (row-major)."""
    out: dict[tuple[int, ...], list[int]] = {}
    for d in range(mesh.num_devices):
        key = tuple(c for i, c in enumerate(mesh.coords(d)) if i not in axes)
        out.setdefault(key, []).append(d)
    return list(out.values())


def test_row_major_coordinates_as_jax_numbers_a_fresh_mesh() -> None:
    assert DATA_MODEL.strides == (2, 1)
    assert DATA_MODEL.coords(5) == (5 // 2, 5 % 2)


def test_model_groups_are_pairs_of_neighbours() -> None:
    match = match_groups([[0, 1], [2, 3], [4, 5], [6, 7]], DATA_MODEL)
    assert match.axes == ("model",)
    assert sentence(match.reason("all-reduce")) == "all-reduce over model (groups of 2, stride 1)"


def test_data_groups_stride_two() -> None:
    match = match_groups([[0, 2, 4, 6], [1, 3, 5, 7]], DATA_MODEL)
    assert (match.axes, match.group_size, match.strides) == (("data",), 4, (2,))


def test_empty_groups_mean_every_device_and_every_axis() -> None:
    match = match_groups([], DATA_MODEL)
    assert match.axes == ("data", "model")
    assert match.group_size == 4 * 2


def test_iota_groups_with_transpose() -> None:
    # [4,2]<=[2,4]T(1,0) = {0,4},{1,5},{2,6},{3,7}: on data=2,model=4 these differ only in data.
    groups = device_groups("[4,2]<=[2,4]T(1,0)")
    assert match_groups(groups, given_mesh("data=2,model=4")).axes == ("data",)


def test_irregular_groups_are_named_with_their_groups() -> None:
    match = match_groups([[0, 3], [1, 2], [4, 7], [5, 6]], DATA_MODEL)
    assert not match.regular
    assert sentence(match.reason("all-gather")) == "all-gather: irregular groups {0,3},{1,2},{4,7},{5,6}"


def test_partial_groups_are_irregular() -> None:
    assert not match_groups([[0, 1]], DATA_MODEL).regular  # 2 of 8 devices


def test_permute_pairs_along_data() -> None:
    pairs = [(0, 2), (2, 4), (4, 6), (6, 0), (1, 3), (3, 5), (5, 7), (7, 1)]
    match = match_pairs(pairs, DATA_MODEL)
    assert match.axes == ("data",)
    assert sentence(match.reason("collective-permute")) == "collective-permute over data (8 pairs, stride 2)"


@given(st.sampled_from([(4, 2), (2, 4), (2, 2, 2), (8,), (2, 2, 4)]), st.data())
def test_every_axis_subset_is_recognised(sizes: tuple[int, ...], data: st.DataObject) -> None:
    mesh = LogicalMesh(tuple((f"a{i}", s) for i, s in enumerate(sizes)))
    axes = data.draw(st.sets(st.integers(0, len(sizes) - 1), min_size=1))
    assert match_groups(fibres(mesh, axes), mesh).axes == tuple(f"a{i}" for i in sorted(axes))


def test_infer_mesh_from_model_and_data_groups() -> None:
    model = [[0, 1], [2, 3], [4, 5], [6, 7]]  # cuts at strides 1 and 2
    data = [[0, 2, 4, 6], [1, 3, 5, 7]]  # cuts at 2 and 8
    mesh = infer_mesh([model, data], 8)
    assert mesh.sizes == (4, 2)
    assert mesh.inferred and "inferred" in note_text(mesh.how)
    assert match_groups(model, mesh).axes == (mesh.names[1],)
    assert match_groups(data, mesh).axes == (mesh.names[0],)


def test_infer_mesh_of_three_axes() -> None:
    # {0,1,4,5}: a run of 2 at stride 1 times a run of 2 at stride 4 -> cuts 1, 2, 4, 8.
    mesh = infer_mesh([[[0, 1, 4, 5], [2, 3, 6, 7]]], 8)
    assert mesh.sizes == (2, 2, 2)
    assert match_groups([[0, 1, 4, 5], [2, 3, 6, 7]], mesh).axes == ("axis_0", "axis_2")


def test_infer_mesh_takes_the_mesh_form_in_the_text() -> None:
    raw = "mesh['x'=4,'unused'=1,'y'=2] {'x'}"
    mesh = infer_mesh([device_groups(raw)], 8, [raw])
    assert mesh.axes == (("x", 4), ("y", 2))


def test_infer_mesh_without_collectives_is_one_axis() -> None:
    assert infer_mesh([], 8).sizes == (8,)


def test_given_mesh_must_cover_the_module() -> None:
    with pytest.raises(ShardingError, match="has 6 devices but the module runs on 8"):
        given_mesh("data=3,model=2", 8)
    with pytest.raises(InvalidConfigError, match="NAME=SIZE"):
        given_mesh("data:4")


def test_collective_use_bytes_follow_the_comm_docstring() -> None:
    gather = parse_instruction(
        "%ag = f32[8,128]{1,0} all-gather(f32[2,128]{1,0} %p), dimensions={0}, replica_groups=[2,4]<=[8]"
    )
    use = collective_use(gather, "all-gather")
    assert use.bytes == 8 * 128 * 4  # the gathered output
    assert use.groups == ((0, 1, 2, 3), (4, 5, 6, 7))
    reduce = parse_instruction(
        "%rs = f32[2,128]{1,0} reduce-scatter(f32[8,128]{1,0} %p), dimensions={0}, replica_groups={}, to_apply=%s"
    )
    assert collective_use(reduce, "reduce-scatter").bytes == 8 * 128 * 4  # the input
    comm, match = place(collective_use(reduce, "reduce-scatter"), DATA_MODEL)
    assert comm is not None and comm.axes == ("data", "model") and comm.kind == "reduce-scatter"
    assert match.group_size == 8


def test_place_drops_groups_of_one() -> None:
    instr = parse_instruction("%ar = f32[4]{0} all-reduce(f32[4]{0} %p), replica_groups={{0},{1}}, to_apply=%s")
    comm, match = place(collective_use(instr, "all-reduce"), given_mesh("x=2"))
    assert comm is None and match.axes == ()
