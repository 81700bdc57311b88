"""`rooftop calibrate` measures this machine's JAX device and writes a chip file that every
command's --chip accepts (8 CPU devices in the tests)."""

import json
import tomllib
from pathlib import Path

import pytest

from rooftop.hardware.catalog import load_chip_file
from tests.conftest import run_cli

pytest.importorskip("jax")


@pytest.fixture(scope="module")
def chip_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cal") / "mychip.toml"
    code, out, err = run_cli("calibrate", "--quick", "--repeats", "1", "--out", str(path), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["matrix_flops_per_s"]["fp32"] > 1e8  # any CPU does more than 0.1 GFLOP/s
    assert d["hbm_bytes_per_s"] > 1e8
    assert d["devices"] == 8 and d["link_bytes_per_s"] > 0
    return path


def test_chip_file_loads_with_sources(chip_file: Path) -> None:
    chip = load_chip_file(chip_file)
    assert chip.name == "calibrated"
    assert all("measured by rooftop calibrate" in f.source for k, f in chip.sources.items() if k != "links.count")
    assert chip.topology.domain_sizes == (8,)
    assert tomllib.loads(chip_file.read_text())["kind"] == "custom"


@pytest.mark.parametrize(
    "argv",
    [
        ["chips", "{chip}", "--json"],
        ["matmul", "A[B,D] @ W[D,F]", "--dims", "B=64,D=64,F=64", "--chip", "{chip}", "--json"],
        ["roofline", "--chip", "{chip}", "--flops", "1e9", "--bytes", "1e6", "--json"],
        [
            "collective",
            "all-gather",
            "--chip",
            "{chip}",
            "--topology",
            "8",
            "--axes",
            "nvlink",
            "--bytes",
            "1MiB",
            "--json",
        ],
        [
            "train",
            "llama-3-8b",
            "--chip",
            "{chip}",
            "--chips",
            "8",
            "--batch-tokens",
            "32k",
            "--seq-len",
            "2048",
            "--json",
        ],
    ],
)
def test_every_command_accepts_the_calibrated_chip(chip_file: Path, argv: list[str]) -> None:
    code, out, err = run_cli(*(a.replace("{chip}", str(chip_file)) for a in argv))
    assert code == 0, err
    assert json.loads(out)["schema_version"] == 1


def test_bad_out_path_is_one_line(tmp_path: Path) -> None:
    code, _, err = run_cli("calibrate", "--quick", "--repeats", "1", "--out", str(tmp_path / "no" / "x.toml"))
    assert code == 2 and "cannot write chip file" in err
    assert not (tmp_path / "no").exists()
