import pytest

from rooftop.errors import InvalidConfigError, ShardingError
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_mesh_spec, parse_topology, topology_for_chips


def test_v5e_wraps_only_full_length_16_axes() -> None:
    chip = get_chip("tpu-v5e")
    assert [d.wrap for d in parse_topology(chip, "16x16").dims] == [True, True]
    assert [d.wrap for d in parse_topology(chip, "4x16").dims] == [False, True]
    assert [d.wrap for d in parse_topology(chip, "8x8").dims] == [False, False]


def test_v4_wraps_when_built_of_whole_cubes() -> None:
    chip = get_chip("tpu-v4")
    assert all(d.wrap for d in parse_topology(chip, "4x4x4").dims)
    assert all(d.wrap for d in parse_topology(chip, "4x4x8").dims)
    assert not any(d.wrap for d in parse_topology(chip, "2x2x4").dims)


def test_slice_larger_than_pod_says_the_maximum() -> None:
    with pytest.raises(InvalidConfigError, match="at most 16x16 \\(256 chips\\)"):
        parse_topology(get_chip("tpu-v5e"), "32x16")
    with pytest.raises(InvalidConfigError, match="at most 16x20x28"):
        parse_topology(get_chip("tpu-v5p"), "32x20x28")
    with pytest.raises(InvalidConfigError, match="power of two"):
        parse_topology(get_chip("tpu-v5e"), "3x4")


def test_gpu_topology_nvlink_domains() -> None:
    topo = parse_topology(get_chip("h100"), "16x8")
    assert topo.num_chips == 16 * 8
    assert [d.link for d in topo.dims] == ["fabric", "nvlink"]
    assert parse_topology(get_chip("h100"), "64").shape == (64 // 8, 8)
    with pytest.raises(InvalidConfigError, match="NVLink domain of 72"):
        parse_topology(get_chip("h100"), "2x72")


def test_multislice_adds_dcn_dim() -> None:
    topo = parse_topology(get_chip("tpu-v5e"), "4*16x16")
    assert topo.num_chips == 4 * 16 * 16
    assert topo.dims[0].link == "dcn"


def test_mesh_axes_in_order_and_spanning_dims() -> None:
    topo = parse_topology(get_chip("tpu-v5e"), "4x4")
    mesh = make_mesh(topo, "X=16")
    assert mesh.axes[0].size == 16 and len(mesh.axes[0].segments) == 2
    mesh = make_mesh(parse_topology(get_chip("h100"), "4x8"), "data=4,tensor=8")
    assert mesh.axis("tensor").links == ("nvlink",)
    assert mesh.axis("data").links == ("fabric",)


def test_mesh_errors_say_what_fits() -> None:
    topo = parse_topology(get_chip("tpu-v4"), "4x4x4")
    with pytest.raises(ShardingError, match="has 16 devices but topology 4x4x4 has 64 chips; e.g. X=4,Y=4,Z=4"):
        make_mesh(topo, "X=4,Y=4")
    v5p = parse_topology(get_chip("tpu-v5p"), "16x20x28")
    with pytest.raises(ShardingError, match="X=7 cannot be laid on topology 16x20x28"):
        make_mesh(v5p, "X=7,Y=1280")
    with pytest.raises(InvalidConfigError, match="expected NAME=SIZE"):
        parse_mesh_spec("X4")


def test_default_topology_for_chip_count() -> None:
    assert topology_for_chips(get_chip("tpu-v5p"), 64).shape == (4, 4, 4)
    assert topology_for_chips(get_chip("b200"), 16).shape == (2, 8)


@pytest.mark.parametrize("shape", ["24x24x8", "3x4x8", "20x20x20"])
def test_v5p_shapes_the_pod_cannot_have(shape: str) -> None:
    with pytest.raises(InvalidConfigError):
        parse_topology(get_chip("tpu-v5p"), shape)
