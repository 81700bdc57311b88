"""Chip internals and fabrics: the figures loaded equal the datasheets', and they add up to the catalog's peaks.

Sources: NVIDIA's A100 and H100 architecture whitepapers, Google's Cloud TPU system-architecture pages, and
"How to Scale Your Model" Part 12 (GPUs; its GPU specs table, node and SuperPOD sections) and Part 2 (TPUs).
"""

from __future__ import annotations

import json

import pytest

from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import chip_from_dict, get_chip
from tests.conftest import run_cli

KIB = 1024


@pytest.mark.parametrize(
    ("name", "sms", "clock_hz", "smem_kib", "l1_kib"),
    [
        ("a100", 108, 1.41e9, 164, 192),  # A100 whitepaper: 108 SMs, 1410 MHz boost, 164 KB of 192 KB
        ("h100", 132, 1.83e9, 228, 256),  # H100 whitepaper: 132 SMs, 1830 MHz Tensor Core clock, 228 of 256 KB
        ("h200", 132, 1.83e9, 228, 256),  # same GH100 compute as H100 SXM5
        ("b200", 148, 1.86e9, 228, 256),  # the book: 148 SMs; CUDA guide CC 10.0: 228 KB shared per SM
    ],
)
def test_gpu_internals_are_the_datasheet_figures(name: str, sms: int, clock_hz: float, smem_kib: int, l1_kib: int):
    n = get_chip(name).internals
    assert n.sms == sms
    assert n.tensor_cores_per_sm == 4
    assert n.tensor_cores == sms * 4
    assert n.clock_hz == clock_hz
    assert n.shared_memory_bytes_per_sm == smem_kib * KIB
    assert n.l1_shared_bytes_per_sm == l1_kib * KIB
    assert n.register_bytes_per_sm == 65536 * 4  # 64K 32-bit registers per SM, every generation since Volta


def test_each_generation_doubles_the_tensor_core_rate_per_sm():
    """A100: 256 FMA per Tensor Core per clock x 4 x 2 = 2048 FLOPs per SM per clock; Hopper doubles it, and
    the book estimates Blackwell doubles it again."""
    rates = [get_chip(n).internals.matrix_flops_per_cycle_per_sm for n in ("a100", "h100", "b200")]
    assert rates == [256 * 4 * 2, 2 * 256 * 4 * 2, 4 * 256 * 4 * 2]


def test_h100_tensor_cores_times_clock_give_the_datasheet_peak():
    """132 SMs x 4 Tensor Cores x 1024 dense bf16 FLOPs each per cycle x 1.83 GHz = 989.4 TFLOP/s, the
    datasheet's 1,979 sparse / 2."""
    h100 = get_chip("h100")
    derived = 132 * 4 * 1024 * 1.83e9
    assert h100.matrix_peak_from_internals() == pytest.approx(derived)
    assert derived == pytest.approx(h100.matrix_flops_per_s["bf16"], rel=1e-3)


@pytest.mark.parametrize("name", ["a100", "h100", "h200", "b200", "tpu-v4", "tpu-v5e", "tpu-v5p"])
def test_internals_add_up_to_the_catalog_peak(name: str):
    """SMs x FLOPs per cycle x clock (GPU), TensorCores x MXUs x 2 x side^2 x clock (TPU): within 0.5% of the
    vendor's bf16 peak (A100 3.119e14 vs 3.12e14; v5e 1.966e14 vs 1.97e14). B200's clock is the book's estimate
    from the same peak, so for it this checks the arithmetic only."""
    chip = get_chip(name)
    assert chip.matrix_peak_from_internals() == pytest.approx(chip.matrix_flops_per_s["bf16"], rel=5e-3)


def test_tpu_internals_are_the_docs_figures():
    """Cloud TPU docs: v4 and v5e TensorCores have 4 MXUs of 128x128, v6e 2 of 256x256; the VPU is 8 x 128."""
    shapes = {n: get_chip(n).internals for n in ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e")}
    assert {n: (i.mxus_per_core, i.mxu_size) for n, i in shapes.items()} == {
        "tpu-v4": (4, 128), "tpu-v5e": (4, 128), "tpu-v5p": (4, 128), "tpu-v6e": (2, 256)
    }  # fmt: skip
    assert all((i.vpu_sublanes, i.vpu_lanes) == (8, 128) for i in shapes.values())
    assert get_chip("tpu-v5p").internals.clock_hz == 1.75e9
    assert get_chip("tpu-v6e").internals.clock_hz is None  # Google publishes no v6e clock
    assert get_chip("tpu-v6e").matrix_peak_from_internals() is None


@pytest.mark.parametrize("name", ["h100", "h200", "b200"])
def test_the_reference_fabric_is_a_full_fat_tree(name: str):
    """The DGX SuperPOD (H100, H200, B200): 8 leaf switches of 64 x 50 GB/s give each of a unit's 256 GPUs its
    400 Gb/s NIC with half their ports; 16 spine switches give 1024 GPUs 50 GB/s each."""
    chip = get_chip(name)
    f = chip.fabric
    assert f.leaf_switch_bytes_per_s == f.leaf_switch_ports * 50e9 == 64 * 50e9
    assert f.leaf_switches * f.leaf_switch_bytes_per_s / 2 == f.leaf_gpus * chip.dcn_bytes_per_s == 12.8e12
    assert f.spine_switches * f.spine_switch_bytes_per_s == f.spine_gpus * chip.dcn_bytes_per_s == 51.2e12


def test_h100_fabric_is_a_full_fat_tree():
    """The DGX H100 SuperPOD: a node's 4 NVSwitches (64 x 25 GB/s each) carry more than its 8 GPUs' 450 GB/s;
    8 leaf switches of 64 x 50 GB/s give each of 256 GPUs its 50 GB/s NIC with half their ports; 16 spine
    switches give 1024 GPUs 50 GB/s each."""
    h100 = get_chip("h100")
    f = h100.fabric
    assert f.nvswitch_bytes_per_s == 64 * 25e9
    assert f.nvswitches_per_node * f.nvswitch_bytes_per_s >= 8 * h100.link_count * h100.link_bytes_per_s
    assert f.leaf_switch_bytes_per_s == 64 * 50e9
    assert f.leaf_switches * f.leaf_switch_bytes_per_s / 2 == f.leaf_gpus * h100.dcn_bytes_per_s == 12.8e12
    assert f.spine_switches * f.spine_switch_bytes_per_s == f.spine_gpus * h100.dcn_bytes_per_s == 51.2e12


def test_a100_fabric_lists_its_node_only():
    f = get_chip("a100").fabric
    assert f.nvswitches_per_node == 6 and f.leaf_switches is None and f.spine_switches is None


def test_b200_nvswitches_serve_every_nvlink_port():
    b200 = get_chip("b200")
    f = b200.fabric
    assert f.nvswitches_per_node * f.nvswitch_ports == 8 * b200.link_count  # 2 x 72 = 8 GPUs x 18 links
    assert f.nvswitches_per_node * f.nvswitch_bytes_per_s == 8 * b200.link_count * b200.link_bytes_per_s


def test_chips_name_shows_internals_and_json_carries_them():
    code, out, _ = run_cli("chips", "h100", "--json")
    assert code == 0
    chip = json.loads(out)["chip"]
    assert chip["internals"]["sms"] == 132 and chip["internals"]["tensor_cores"] == 528
    assert chip["internals"]["matrix_peak_from_internals_flops_per_s"] == pytest.approx(132 * 4096 * 1.83e9)
    assert chip["fabric"]["spine_switches"] == 16
    assert chip["sources"]["internals.sms"]["source"].startswith("NVIDIA H100")
    code, out, _ = run_cli("chips", "h100")
    assert code == 0
    assert "Tensor Cores per chip" in out and "528" in out and "1.83 GHz" in out and "228 KiB" in out
    code, out, _ = run_cli("chips", "tpu-v5p")
    assert "8 x 128" in out and "VPU shape" in out


def _chip(**tables: dict) -> dict:
    base = {
        "name": "x", "vendor": "v", "kind": "gpu",
        "matrix_flops_per_s": {"bf16": {"value": 1e15, "source": "s"}},
        "memory": {"hbm_bytes": {"value": 1e10, "source": "s"}, "hbm_bytes_per_s": {"value": 1e12, "source": "s"}},
        "links": {"count": {"value": 1, "source": "s"}, "bytes_per_s": {"value": 1e10, "source": "s"}},
        "topology": {"kind": "switched", "domain_sizes": [8], "source": "s"},
    }  # fmt: skip
    return base | tables


def test_internals_are_optional_and_checked():
    assert chip_from_dict(_chip()).internals.sms is None
    assert chip_from_dict(_chip()).matrix_peak_from_internals() is None
    with pytest.raises(InvalidConfigError, match=r"internals\.smz.*is not a known figure.*sms"):
        chip_from_dict(_chip(internals={"smz": {"value": 1, "source": "s"}}))
    with pytest.raises(InvalidConfigError, match=r"internals\.sms.*whole number"):
        chip_from_dict(_chip(internals={"sms": {"value": 1.5, "source": "s"}}))
    with pytest.raises(InvalidConfigError, match="has no source"):
        chip_from_dict(_chip(fabric={"leaf_switches": {"value": 8}}))
