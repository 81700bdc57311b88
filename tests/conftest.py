"""Shared test set-up: 8 host devices for JAX on the CPU, and paths to shared data."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
THIRD_PARTY = SHARED / "data" / "third_party_profiles"


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
