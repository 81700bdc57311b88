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
    assert all("measured by rooftop calibrate" in f.source for k, f in chip.sources.items() if k != "links.count")
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
