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
def chip_file(calibration: tuple[Path, str]) -> Path:
    path, out = calibration
    d = json.loads(out)
    assert d["matrix_flops_per_s"]["fp32"] > 1e8  # any CPU does more than 0.1 GFLOP/s
    assert d["hbm_bytes_per_s"] > 1e8
    assert d["devices"] == 8 and d["link_bytes_per_s"] > 0
    return path


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The compiled HLO text and a profile of a small jitted function."""
    import jax
    import jax.numpy as jnp

    out = tmp_path_factory.mktemp("prog")
    f = jax.jit(lambda a, b: jnp.tanh(a @ b).sum())
    x = jnp.ones((128, 128))
    (out / "f.hlo.txt").write_text(f.lower(x, x).compile().as_text())
    jax.block_until_ready(f(x, x))
    with jax.profiler.trace(str(out / "trace")):
        jax.block_until_ready(f(x, x))
    return out / "f.hlo.txt", out / "trace"


def test_chip_file_loads_with_sources(chip_file: Path) -> None:
    chip = load_chip_file(chip_file)
    assert chip.name == "calibrated"
    measured = {k: f for k, f in chip.sources.items() if k not in ("links.count", "dcn.bytes_per_s")}
    assert all("measured by rooftop calibrate" in f.source for f in measured.values())
    assert "NOT MEASURED" in chip.sources["dcn.bytes_per_s"].source  # beyond the 8 devices: the link stands in
    assert chip.topology.domain_sizes == (8,)
    assert tomllib.loads(chip_file.read_text())["kind"] == "custom"


COMMANDS = [
    "chips {chip}",
    "matmul A[B,D]@W[D,F] --dims B=64,D=64,F=64 --chip {chip}",
    "roofline --chip {chip} --flops 1e9 --bytes 1e6",
    "collective all-gather --chip {chip} --topology 8 --axes nvlink --bytes 1MiB",
    "train llama-3-8b --chip {chip} --chips 8 --batch-tokens 32k --seq-len 2048",
    "serve llama-3-8b --chip {chip} --chips 8 --prompt-len 128 --gen-len 16",
    "hlo {hlo} --chip {chip}",
    "profile {profile} --chip {chip}",
]


@pytest.mark.parametrize("command", COMMANDS, ids=[c.split()[0] for c in COMMANDS])
def test_every_command_accepts_the_calibrated_chip(chip_file: Path, program: tuple[Path, Path], command: str) -> None:
    hlo, profile = program
    subs = {"{chip}": str(chip_file), "{hlo}": str(hlo), "{profile}": str(profile)}
    code, out, err = run_cli(*(subs.get(a, a) for a in command.split()), "--json")
    assert code == 0, err
    assert json.loads(out)["schema_version"] == (2 if command.startswith("train") else 1)


def test_bad_out_path_is_one_line(tmp_path: Path) -> None:
    code, _, err = run_cli("calibrate", "--quick", "--repeats", "1", "--out", str(tmp_path / "no" / "x.toml"))
    assert code == 2 and "cannot write chip file" in err
    assert not (tmp_path / "no").exists()


def _one_device(kind: str) -> str:
    from rooftop.jaxlink.calibrate import Calibration, Measurement, chip_toml

    cal = Calibration(kind, "gpu", 1, "0.11.2", "2026-11-26", matrix={"bf16": Measurement("bf16", 7.0e14, "m")},
                      vector=Measurement("fp32", 1.4e13, "v"), hbm=Measurement("hbm", 2.8e12, "h"),
                      memory_bytes=8e10)  # fmt: skip
    return chip_toml(cal, "one")


def test_one_device_takes_the_catalog_network_of_the_chip_jax_names() -> None:
    """Was: one device wrote the memory copy rate as its link and a domain of 1, so a profile of 8 devices
    failed with 'no fabric bandwidth (got 0.0)'. Now the network figures are the catalog's, each said so."""
    from rooftop.hardware.catalog import chip_from_dict, get_chip

    chip = chip_from_dict(tomllib.loads(_one_device("NVIDIA H100 80GB HBM3")))
    h100 = get_chip("h100")
    assert (chip.link_bytes_per_s, chip.link_count, chip.dcn_bytes_per_s) == (2.5e10, 18, 5e10)
    assert chip.host_bytes_per_s == h100.host_bytes_per_s  # PCIe: host offload copies price on it
    assert chip.topology.domain_sizes == h100.topology.domain_sizes == (8,)
    source = chip.sources["links.bytes_per_s"].source
    assert "not measured (one device): the catalog's h100 figure (NVIDIA H100 datasheet" in source
    assert chip.hbm_bytes_per_s == 2.8e12  # what was measured stays measured


def test_one_unknown_device_says_its_network_is_assumed() -> None:
    from rooftop.hardware.catalog import chip_from_dict

    chip = chip_from_dict(tomllib.loads(_one_device("Mystery Accelerator 9000")))
    assert chip.link_bytes_per_s == chip.dcn_bytes_per_s == 2.8e12  # the copy rate stands in, everywhere
    assert chip.sources["links.bytes_per_s"].source.startswith("NOT MEASURED")
    assert chip.sources["dcn.bytes_per_s"].source.startswith("NOT MEASURED")


def test_memory_sweep_sizes_stay_above_the_caches_and_inside_memory() -> None:
    from rooftop.jaxlink.calibrate import hbm_sizes

    h100 = hbm_sizes(True, False, 80e9)  # an eighth of 80 GB holds two fp32 arrays of 2^30 (8 GiB)
    assert h100 == [1 << k for k in range(26, 31)]
    assert all(8 * n >= 10 * 50 * 2**20 for n in h100)  # >= 10 x an H100's 50 MiB L2 moved
    assert hbm_sizes(True, False, 192e9)[-1] == 1 << 31  # capped at 16 GiB moved
    assert hbm_sizes(True, False, 1e9) == [1 << 26]  # a small device still gets one size
    assert hbm_sizes(False, True, 1e12) == [1 << 20, 1 << 21, 1 << 22]


@pytest.mark.jax
def test_one_cpu_device_calibration_prices_an_eight_device_profile(tmp_path: Path) -> None:
    """The issue's case: calibrate on one device, profile eight (the mock transformer's all-reduces)."""
    from rooftop.jaxlink import analyze
    from rooftop.jaxlink.calibrate import Calibration, Measurement, chip_toml
    from tests.conftest import worked_example

    cal = Calibration("cpu", "cpu", 1, "0.10.2", "2026-11-26", matrix={"fp32": Measurement("fp32", 5e10, "m")},
                      vector=Measurement("fp32", 2e10, "v"), hbm=Measurement("hbm", 1e10, "h"),
                      memory_bytes=8e9)  # fmt: skip
    path = tmp_path / "one.toml"
    path.write_text(chip_toml(cal, "one-cpu"))
    step, args = worked_example("naive")  # on 8 devices: the mesh data=4, model=2
    report = analyze(step, *args, chip=load_chip_file(path), steps=1, mesh="data=4,model=2")
    comm = [o for o in report.ops if o.category == "communication"]
    assert comm and all(o.lower_bound_s and o.lower_bound_s > 0 for o in comm)
    assert all(o.mesh_axes for o in comm)
