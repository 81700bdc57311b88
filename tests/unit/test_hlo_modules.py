"""The HLO modules a profile carries: `rooftop hlo P --module NAME` and `rooftop profile P --export-hlo DIR`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rooftop.analysis.trace.hlo_modules import file_name, hlo_protos, module_key
from rooftop.cli.flags import error_line
from rooftop.errors import RooftopError
from tests.conftest import run_cli


def test_module_key_and_file_names() -> None:
    protos = {"jit_f(12)": b"", "jit_g(3)": b"", "jit_g(4)": b""}
    assert module_key(protos, "jit_f", "p") == "jit_f(12)"
    assert module_key(protos, "jit_g(4)", "p") == "jit_g(4)"
    with pytest.raises(Exception, match="2 programs are named 'jit_g'"):
        module_key(protos, "jit_g", "p")
    with pytest.raises(Exception, match="unknown HLO module 'jit_h'"):
        module_key(protos, "jit_h", "p")
    with pytest.raises(RooftopError, match="holds 3 HLO modules: give module NAME") as several:
        module_key(protos, None, "p")
    assert error_line(several.value) == "p holds 3 HLO modules: give --module NAME, one of " + ", ".join(protos)
    assert module_key({"jit_f(1)": b""}, None, "p") == "jit_f(1)"
    assert file_name("jit_f(12)") == "jit_f.12.hlo.txt" and file_name("../a b") == "_a_b.hlo.txt"


def _jax() -> Any:
    return pytest.importorskip("jax")


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A profile of two jitted functions, and the compiled HLO text of the first."""
    jax = _jax()
    out = tmp_path_factory.mktemp("prof")

    @jax.jit
    def f(a: Any) -> Any:
        return jax.numpy.tanh(a @ a.T).sum()

    @jax.jit
    def g(a: Any) -> Any:
        return a * 2.0

    x = jax.numpy.ones((64, 32))
    jax.block_until_ready((f(x), g(x)))
    with jax.profiler.trace(str(out)):
        jax.block_until_ready((f(x), g(x)))
    return out, f.lower(x).compile().as_text()


def test_hlo_reads_a_module_of_the_profile(profile: tuple[Path, str], tmp_path: Path) -> None:
    logdir, text = profile
    hlo = tmp_path / "f.hlo.txt"
    hlo.write_text(text)
    code, out, err = run_cli("hlo", str(logdir), "--module", "jit_f", "--chip", "h100", "--json", "--top", "100")
    assert code == 0, err
    carried = json.loads(out)
    code, out, err = run_cli("hlo", str(hlo), "--chip", "h100", "--json", "--top", "100")
    assert code == 0, err
    given = json.loads(out)
    # the profile's copy of f is the module compiled.as_text() prints: the same instructions and totals
    assert {i["name"] for i in carried["instructions"]} == {i["name"] for i in given["instructions"]}
    assert carried["totals"] == given["totals"] and carried["module"] == "jit_f"
    assert given["totals"]["flops"] >= 2 * 64 * 64 * 32  # the [64,32] x [32,64] matmul at least
    code, _, err = run_cli("hlo", str(logdir), "--chip", "h100")
    assert code == 2 and "give --module NAME" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli("hlo", str(hlo), "--module", "jit_f", "--chip", "h100")
    assert code == 2 and "is not one" in err


def test_profile_exports_every_module(profile: tuple[Path, str], tmp_path: Path) -> None:
    logdir, _ = profile
    folder = tmp_path / "modules"
    code, _, err = run_cli("profile", str(logdir), "--chip", "h100", "--export-hlo", str(folder), "--json")
    assert code == 0, err
    files = sorted(p.name for p in folder.iterdir())
    assert files == sorted(file_name(k) for k in hlo_protos(logdir))
    for p in folder.iterdir():
        assert run_cli("hlo", str(p), "--chip", "h100", "--json")[0] == 0
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out, err = run_cli("profile", str(logdir), "--chip", "h100", "--export-hlo", str(blocker))
    assert code == 2 and out == "" and "is a file" in err
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}')
    code, out, err = run_cli("profile", str(trace), "--chip", "h100", "--export-hlo", str(tmp_path / "none"))
    assert code == 2 and "only a JAX XPlane profile carries HLO modules" in err and not (tmp_path / "none").exists()


def test_third_party_profiles_export_modules_that_price(third_party: Path, tmp_path: Path) -> None:
    """Every module of every third-party XPlane is printed, written and read back (MI300X, gfx950, TPU v6e)."""
    _jax()  # XLA's printer turns each HloProto into text
    files = sorted((third_party / "xplane").glob("*.xplane.pb"))
    assert files
    for path in files:
        folder = tmp_path / path.name
        code, _, err = run_cli("profile", str(path), "--chip", "h100", "--export-hlo", str(folder), "--json")
        assert code == 0, err
        protos = hlo_protos(path)
        assert len(list(folder.iterdir())) == len(protos) > 0
        busiest = max(folder.iterdir(), key=lambda p: p.stat().st_size)
        code, out, err = run_cli("hlo", str(path), "--module", busiest.name.split(".")[0] + "(" +
                                 busiest.name.split(".")[1] + ")", "--chip", "h100", "--json")  # fmt: skip
        assert code == 0, err
        from_file = json.loads(run_cli("hlo", str(busiest), "--chip", "h100", "--json")[1])
        assert json.loads(out)["totals"] == from_file["totals"]
