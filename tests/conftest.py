"""Shared test set-up: 8 host devices for JAX on the CPU, and paths to shared data."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any

# pytest keeps each test module's assertion-rewritten code, and Python each imported module's bytecode, in
# __pycache__ (git-ignored); PYTHONDONTWRITEBYTECODE, set in some shells and containers, turns both off and
# makes every run compile the ~500 modules of the package and the tests again (about 25 CPU-s of the suite,
# measured on a 2-core machine). The suite keeps them whatever the shell says (set here, before any test
# module is collected; the first run after a change compiles what changed, as without the variable).
sys.dont_write_bytecode = False

# The suite's heap grows to millions of objects (JAX, XLA's executables, matplotlib, hypothesis), and Python's
# default collector thresholds (700, 10, 10) scan all of it often: about 6 CPU-s of collections over
# tests/unit alone. Young collections every 10,000 allocations and a full one considered every 100 middle
# ones (and still only once the heap has grown by a quarter) collect 20 times less often: 1.8 CPU-s there,
# the same peak memory over the plotting tests. Nothing is left uncollected, finalizers still run, and
# pytest still reports an exception raised in one.
gc.set_threshold(10_000, 10, 100)


def _xla_flags() -> str:
    """8 host devices; with a jaxlib whose XLA:CPU has them (0.10 on; an unknown flag aborts XLA), collective
    timeouts of 10 minutes: on a loaded machine the 8 device threads of a CPU collective can take longer than
    XLA's default to meet, and XLA then aborts the whole test process (seen under `rooftop calibrate`)."""
    flags = "--xla_force_host_platform_device_count=8"
    try:
        from importlib.metadata import version

        major, minor = (int(x) for x in version("jaxlib").split(".")[:2])
    except Exception:  # no jaxlib, or a version string of another form: the device count alone
        return flags
    if (major, minor) >= (0, 10):
        flags += " --xla_cpu_collective_timeout_seconds=600 --xla_cpu_collective_call_terminate_timeout_seconds=600"
    return flags


os.environ.setdefault("XLA_FLAGS", _xla_flags())
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402  (after the environment JAX reads at import)

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
THIRD_PARTY = SHARED / "data" / "third_party_profiles"


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish() -> None:
    """Collect the session's garbage once, then freeze what survives (``gc.freeze``). pytest ends a session
    with five full collections (to report exceptions raised in finalizers); over a heap holding JAX, XLA's
    executables and matplotlib each scans every object, about 3 CPU-s of the suite. The one collection here
    runs the finalizers as those would (an exception in one is still reported); the five after it then find
    only what that one's finalizers left."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _default_table_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables are drawn at the CLI's default width in every test, whatever COLUMNS the shell (or
    docs/gen_cli.py, which a test imports) has set: the CLI honours COLUMNS."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def third_party() -> Path:
    """The folder of third-party profiles; tests using it skip when ../shared is absent."""
    if not THIRD_PARTY.is_dir():
        pytest.skip("../shared/data/third_party_profiles is not present")
    return THIRD_PARTY


_WORKED: dict[str, tuple[Any, tuple[Any, ...]]] = {}


def worked_example(kind: str) -> tuple[Any, tuple[Any, ...]]:
    """``rooftop.workloads.mock_transformer(kind)`` (on the 8 CPU devices), made once per test session: the
    same jitted function for every test, so that JAX compiles it once, not once per test."""
    if kind not in _WORKED:
        from rooftop.jaxlink.workloads import mock_transformer

        _WORKED[kind] = mock_transformer(kind)
    return _WORKED[kind]


@pytest.fixture(scope="session")
def worked_profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The naive and fixed worked examples, profiled once per session (tests only read them): ``naive`` and
    ``fixed``, a jax.profiler log directory of 3 annotated steps each, and ``naive.hlo`` / ``fixed.hlo``,
    the compiled HLO text of each step. Skipped without JAX and 8 devices."""
    jax = pytest.importorskip("jax")
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 devices")
    out: dict[str, Path] = {}
    for kind in ("naive", "fixed"):
        folder = tmp_path_factory.mktemp(kind)
        step, args = worked_example(kind)
        (folder / "step.hlo.txt").write_text(step.lower(*args).compile().as_text())
        jax.block_until_ready(step(*args))
        with jax.profiler.trace(str(folder / "logdir")):
            for i in range(3):
                with jax.profiler.StepTraceAnnotation("step", step_num=i):
                    jax.block_until_ready(step(*args))
        out[kind], out[kind + ".hlo"] = folder / "logdir", folder / "step.hlo.txt"
    return out


@pytest.fixture(scope="session")
def calibration(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``rooftop calibrate --quick --repeats 1 --out PATH --json`` on the 8 CPU devices, run once per session
    (the calibrate tests and the JSON key check read it): PATH and the command's stdout."""
    pytest.importorskip("jax")
    from rooftop.jaxlink import calibrate as measuring

    path = tmp_path_factory.mktemp("cal") / "mychip.toml"
    measure = measuring.calibrate

    def kept(*args: Any, **kwargs: Any) -> Any:
        _MEASURED.append(measure(*args, **kwargs))
        return _MEASURED[-1]

    measuring.calibrate = kept
    try:
        code, out, err = run_cli("calibrate", "--quick", "--repeats", "1", "--out", str(path), "--json")
    finally:
        measuring.calibrate = measure
    assert code == 0, err
    return path, out


#: what the session's calibration measured (``calibration``): the README's `calibrate --quick` takes it
_MEASURED: list[Any] = []


def measured_calibration() -> Any:
    """The ``rooftop.jaxlink.calibrate.Calibration`` of the session's ``calibration`` (request it first)."""
    assert len(_MEASURED) == 1
    return _MEASURED[0]


def run_cli(*argv: str) -> tuple[int, str, str]:
    """Run the rooftop CLI in-process; returns (exit code, stdout, stderr)."""
    import contextlib
    import io

    from rooftop.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse errors
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def quick_and_long(quick: object, long: object) -> list[object]:
    """Parameters for a run of ``quick`` size in the default suite and one of ``long`` size marked ``long``
    (left out by default; ``python3 -m pytest -m long`` runs it)."""
    return [pytest.param(quick, id="quick"), pytest.param(long, id="long", marks=pytest.mark.long)]


def run_with_hash_seed(seed: str, *argv: str) -> str:
    """The rooftop CLI's stdout from a fresh process with ``PYTHONHASHSEED=seed`` (this checkout's src/)."""
    import subprocess
    import sys

    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "rooftop.cli.main", *argv], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
