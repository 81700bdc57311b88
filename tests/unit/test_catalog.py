"""Every chip file loads, every figure has a source, values are plausible."""

from pathlib import Path

import pytest

from rooftop.errors import InvalidConfigError, UnknownNameError
from rooftop.hardware.catalog import get_chip, load_chip_file, load_chips

CANONICAL = ["tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x", "a100", "h100", "h100-hbm2e", "h200", "b200", "b300",
             "gb200", "gb300", "h20", "h800", "mi300x", "mi325x", "mi355x"]  # fmt: skip


def test_every_catalog_chip_present() -> None:
    assert sorted(c.name for c in load_chips()) == sorted(CANONICAL)


@pytest.mark.parametrize("name", CANONICAL)
def test_figures_have_sources_and_plausible_values(name: str) -> None:
    chip = get_chip(name)
    assert chip.sources, "no figures recorded"
    for key, fig in chip.sources.items():
        assert fig.source.strip(), f"{name}: {key} has no source"
    assert 1e14 <= chip.flops_per_s("bf16") <= 5e15
    assert 1e10 <= chip.hbm_capacity_bytes <= 4e11  # 288 GiB (MI355X, B300) is 3.09e11
    assert 5e11 <= chip.hbm_bytes_per_s <= 1e13
    assert 1e10 <= chip.link_bytes_per_s <= 2e11
    assert 1 <= chip.link_count <= 18
    assert 30 <= chip.critical_intensity("bf16") <= 700  # the H20: 148 TFLOP/s over 4 TB/s = 37
    assert chip.topology.source


@pytest.mark.parametrize(
    ("alias", "name"), [("v5e", "tpu-v5e"), ("TPU v5e", "tpu-v5e"), ("H100 SXM", "h100"), ("trillium", "tpu-v6e")]
)
def test_aliases_case_insensitive(alias: str, name: str) -> None:
    assert get_chip(alias).name == name


def test_names_and_aliases_name_one_chip_each() -> None:
    """A name or alias (normalised) belongs to one built-in chip, so looking a chip up by the name its
    file carries (one file read: catalog/chips/h100.toml for "h100") finds what the whole catalog would."""
    from rooftop.hardware import catalog

    seen: dict[str, str] = {}
    for chip in load_chips():
        for key in {catalog._norm(n) for n in (chip.name, *chip.aliases)}:
            assert seen.setdefault(key, chip.name) == chip.name, key
    for chip in load_chips():  # None where a file is named otherwise than its chip
        assert catalog._builtin_file_chip(catalog._norm(chip.name)) in (None, chip)
    assert catalog._builtin_file_chip("h100") == get_chip("H100 SXM")


def test_unknown_chip_suggests_close_names() -> None:
    with pytest.raises(UnknownNameError, match="unknown chip 'tpu-v9'; did you mean"):
        get_chip("tpu-v9")


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "mychip.toml"
    p.write_text(text)
    return p


GOOD = """
name = "mychip"
vendor = "me"
kind = "custom"
[matrix_flops_per_s]
bf16 = { value = 1e14, source = "measured" }
[memory]
hbm_bytes = { value = "8 GiB", source = "spec" }
hbm_bytes_per_s = { value = "500 GB/s", source = "spec" }
[links]
count = { value = 2, source = "spec" }
bytes_per_s = { value = 1e10, source = "spec" }
[topology]
kind = "switched"
domain_sizes = [4]
source = "spec"
"""


ACHIEVABLE = "[matrix_achievable]\n"


def test_user_chip_file_loads(tmp_path: Path) -> None:
    chip = load_chip_file(_write(tmp_path, GOOD))
    assert chip.hbm_capacity_bytes == 8 * 2**30
    assert chip.hbm_bytes_per_s == 500e9
    assert get_chip(str(tmp_path / "mychip.toml")).name == "mychip"
    assert "mychip" in [c.name for c in load_chips(tmp_path)]


@pytest.mark.parametrize(
    ("mutation", "message"),
    [
        (
            ('bf16 = { value = 1e14, source = "measured" }', "bf16 = { value = 1e14 }"),
            "'matrix_flops_per_s.bf16' has no source",
        ),
        (('hbm_bytes_per_s = { value = "500 GB/s", source = "spec" }', ""), "'memory.hbm_bytes_per_s' is missing"),
        (('kind = "custom"', 'kind = "fpga"'), "'kind' must be one of"),
        (("[topology]", "[topology]\nwraparound = 'sometimes'"), "'topology.wraparound'"),
        (('"8 GiB"', '"eight"'), "'memory.hbm_bytes' has an unreadable value"),
        (("[memory]", f"{ACHIEVABLE}bf16 = {{ value = 1.2, source = 'x' }}\n[memory]"), "must be a fraction in (0, 1]"),
        (("[memory]", f"{ACHIEVABLE}fp8 = {{ value = 0.7, source = 'x' }}\n[memory]"), "a dtype the matrix unit lacks"),
    ],
)
def test_bad_chip_file_names_file_and_field(tmp_path: Path, mutation: tuple[str, str], message: str) -> None:
    path = _write(tmp_path, GOOD.replace(*mutation))
    with pytest.raises(InvalidConfigError) as info:
        load_chip_file(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_not_toml(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="not valid TOML"):
        load_chip_file(_write(tmp_path, "name = [unclosed"))


def test_a_dtype_falls_back_down_to_fp32_on_a_unit_that_lists_only_fp32() -> None:
    """Was: int8 and fp8 stopped at bf16, so B200's vector unit (fp32 and fp64 listed) and a calibrated chip
    (fp32 only) refused them: `serve --activation-dtype fp8` on b200, `profile` with a calibrated chip."""
    b200 = get_chip("b200")
    assert b200.flops_rate("fp8", "vector") == ("fp32", 7.5e13)
    assert b200.flops_rate("int8", "vector") == ("fp32", 7.5e13)
    assert b200.flops_rate("fp4", "vector") == ("fp32", 7.5e13)
    assert b200.flops_rate("fp8", "matrix") == ("fp8", 4.5e15)  # a unit that has it keeps it
    assert get_chip("h100").flops_rate("int8", "vector") == ("bf16", 1.338e14)  # the nearest wider one first


def test_blackwell_ultra_int8_and_fp64_are_the_published_cut_rates_not_a_fallback() -> None:
    """NVIDIA cut INT8 and FP64 on Blackwell Ultra (HGX B300: INT8 2 POPS with sparsity and FP64 10 TFLOPS per
    8 GPUs; GB300 NVL72: INT8 0.165 POPS dense per GPU, FP64 1.39 TFLOPS): an int8 matmul must be priced at
    that rate, not fall back to the bf16 peak, and CDNA 4 (no TF32) prices fp32 matmuls at its FP32 matrix rate."""
    assert get_chip("b300").flops_rate("int8") == ("int8", 2e15 / 8 / 2)
    assert get_chip("b300").flops_rate("fp64") == ("fp64", 10e12 / 8)
    assert get_chip("gb300").flops_rate("int8") == ("int8", 0.165e15)
    assert get_chip("mi355x").flops_rate("fp32") == ("fp32", 157.3e12)
