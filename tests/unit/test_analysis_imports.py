"""rooftop.analysis imports cleanly, its loaders sit above its event table, and its packages re-export
nothing. The import graph (and the check that it has no circle anywhere in the tree) is
tests/unit/test_import_graph.py's."""

from __future__ import annotations

import ast
import importlib

import pytest

from tests.unit.test_import_graph import GRAPH
from tests.unit.test_import_graph import MODULES as ALL_MODULES

PACKAGE = "rooftop.analysis"
MODULES = {name: path for name, path in ALL_MODULES.items() if name == PACKAGE or name.startswith(PACKAGE + ".")}


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def import_graph() -> dict[str, set[str]]:
    """module -> the rooftop.analysis modules it imports (with their parent packages)."""
    return {name: {m for m in GRAPH[name] if m in MODULES and m != PACKAGE} for name in MODULES}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_imports(name: str) -> None:
    assert importlib.import_module(name).__name__ == name


def test_the_graph_sees_the_imports() -> None:
    graph = import_graph()
    assert "rooftop.analysis.trace.events" in graph["rooftop.analysis.trace.load"]
    assert "rooftop.analysis.trace.events" in graph["rooftop.analysis.trace.xplane"]
    assert "rooftop.analysis.hlo.ir" in graph["rooftop.analysis.hlo.parse"]
    assert "rooftop.analysis.compare" in graph["rooftop.analysis.torch.kineto"]


def test_event_types_import_no_loader() -> None:
    """The loaders import the event table, never the other way round."""
    assert not {m for m in import_graph()["rooftop.analysis.trace.events"] if m.startswith(PACKAGE + ".trace.")}


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _is_package(n)))
def test_packages_reexport_nothing(name: str) -> None:
    """A package's __init__ holds its docstring only: every name is imported from the module defining it."""
    body = ast.parse(MODULES[name].read_text(encoding="utf-8")).body
    assert all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body), name
