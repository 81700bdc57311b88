"""rooftop.analysis imports cleanly and its modules import each other without a circle.

The import graph is read from the source with ``ast``: every ``import`` / ``from ... import`` of a
rooftop.analysis module, at the top of a file or inside a function (a lazy import still closes a
circle), is an edge; importing a module also runs its parent packages, so they are edges too."""

from __future__ import annotations

import ast
import graphlib
import importlib
from pathlib import Path

import pytest

import rooftop.analysis

PACKAGE = "rooftop.analysis"
ROOT = Path(rooftop.analysis.__file__).parent


def _module_names() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join((PACKAGE, *parts))] = path
    return out


MODULES = _module_names()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(name: str, importer: str) -> str | None:
    """The rooftop.analysis module (or package) an import of ``name`` loads; None outside rooftop.analysis."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name if name.startswith(PACKAGE) and name != importer else None


def _targets(node: ast.Import | ast.ImportFrom, importer: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: from the importer's package, ``level`` steps up
        package = importer if _is_package(importer) else importer.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    # ``from pkg import mod`` imports the submodule pkg.mod; ``from mod import name`` the module itself
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:k]) for k in range(len(PACKAGE.split(".")), len(parts))]


def import_graph() -> dict[str, set[str]]:
    """module -> the rooftop.analysis modules it imports (with their parent packages)."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, name):
                    resolved = _resolve(target, name)
                    if resolved is not None:
                        edges.add(resolved)
                        edges.update(a for a in _ancestors(resolved) if a != name)
        graph[name] = edges
    return graph


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_imports(name: str) -> None:
    assert importlib.import_module(name).__name__ == name


def test_the_graph_sees_the_imports() -> None:
    graph = import_graph()
    assert "rooftop.analysis.trace.events" in graph["rooftop.analysis.trace.load"]
    assert "rooftop.analysis.trace.events" in graph["rooftop.analysis.trace.xplane"]
    assert "rooftop.analysis.hlo.ir" in graph["rooftop.analysis.hlo.parse"]
    assert "rooftop.analysis.compare" in graph["rooftop.analysis.torch.kineto"]


def test_no_import_cycle_inside_analysis() -> None:
    sorter = graphlib.TopologicalSorter(import_graph())
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle in rooftop.analysis: {' -> '.join(exc.args[1])}")


def test_event_types_import_no_loader() -> None:
    """The loaders import the event table, never the other way round."""
    assert not {m for m in import_graph()["rooftop.analysis.trace.events"] if m.startswith(PACKAGE + ".trace.")}


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _is_package(n)))
def test_packages_reexport_nothing(name: str) -> None:
    """A package's __init__ holds its docstring only: every name is imported from the module defining it."""
    body = ast.parse(MODULES[name].read_text(encoding="utf-8")).body
    assert all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body), name
