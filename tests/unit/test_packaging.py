"""Packaging rules: pyproject.toml declares compatible ranges (rooftop installs into people's JAX
environments and never forces a version), CI installs the exact pins of .ci/constraints.txt, and
.ci/run runs the README's test command (b)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CONSTRAINTS = ROOT / ".ci" / "constraints.txt"
SELF = canonicalize_name(PYPROJECT["name"])


def _declared() -> list[tuple[str, Requirement]]:
    """(where, requirement) for the core and every extra, less rooftop's own extras (``rooftop[jax]``)."""
    groups = {"dependencies": PYPROJECT["dependencies"]}
    groups |= {f"optional-dependencies.{k}": v for k, v in PYPROJECT["optional-dependencies"].items()}
    out = [(where, Requirement(line)) for where, lines in groups.items() for line in lines]
    return [(where, req) for where, req in out if canonicalize_name(req.name) != SELF]


def _pins() -> dict[str, str]:
    """{canonical name: version} from the constraints file; every line must be ``name==version``."""
    pins: dict[str, str] = {}
    for n, raw in enumerate(CONSTRAINTS.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;,]+)", line)
        assert m, f"{CONSTRAINTS.name}:{n}: {line!r} is not an exact pin (name==version)"
        name = canonicalize_name(m.group(1))
        assert name not in pins, f"{CONSTRAINTS.name}:{n}: {name} is pinned twice"
        pins[name] = m.group(2)
    return pins


DECLARED = _declared()
IDS = [f"{where}:{req.name}" for where, req in DECLARED]


def test_there_is_something_to_check() -> None:
    assert {
        "dependencies",
        "optional-dependencies.jax",
        "optional-dependencies.dask",
        "optional-dependencies.fast",
        "optional-dependencies.test",
    } == {w for w, _ in DECLARED}


@pytest.mark.parametrize(("where", "req"), DECLARED, ids=IDS)
def test_dependency_is_a_range_with_a_lower_bound(where: str, req: Requirement) -> None:
    ops = {spec.operator for spec in req.specifier}
    assert not ops & {"==", "==="}, f"{where}: {req} pins an exact version; declare a range, pin in .ci/constraints.txt"
    assert ops & {">=", ">", "~="}, f"{where}: {req} has no lower bound"


@pytest.mark.parametrize(("where", "req"), DECLARED, ids=IDS)
def test_dependency_is_pinned_in_the_constraints_inside_its_range(where: str, req: Requirement) -> None:
    pins = _pins()
    name = canonicalize_name(req.name)
    assert name in pins, f"{where}: {req.name} is not pinned in .ci/constraints.txt"
    assert req.specifier.contains(Version(pins[name]), prereleases=True), (
        f"{where}: .ci/constraints.txt pins {req.name}=={pins[name]}, outside {req}"
    )


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"^\(b\) .*?```bash\n(.+?)\n```", readme, re.S | re.M)
    assert block, "README has no command (b) block"
    command = block.group(1).strip()
    assert "-c .ci/constraints.txt" in command
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()
