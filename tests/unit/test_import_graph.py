"""No import circle anywhere in rooftop, and no module below report/ and cli/ reaching up into them.

The graph is read from the source with ``ast`` over every module of ``src/rooftop``: each ``import`` and
``from ... import`` is an edge, at the top of a file or inside a function (a lazy import still closes a circle
when it runs). Importing a module also runs its parent packages' ``__init__``, so those are edges too. Only the
imports under ``if TYPE_CHECKING:`` are left out: they never run (mypy reads them, and it resolves circles)."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import rooftop

PACKAGE = "rooftop"
ROOT = Path(rooftop.__file__).parent


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


def _resolve(name: str) -> str | None:
    """The rooftop module (or package) an import of ``name`` loads; None outside rooftop."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


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
    return [".".join(parts[:k]) for k in range(1, len(parts))]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: module level, in functions and classes, not under TYPE_CHECKING."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the rooftop modules it imports (with their parent packages)."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        edges: set[str] = {a for a in _ancestors(name)}
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for target in _targets(node, name):
                resolved = _resolve(target)
                if resolved is not None and resolved != name:
                    edges.add(resolved)
                    edges.update(a for a in _ancestors(resolved) if a != name)
        graph[name] = edges
    return graph


GRAPH = import_graph()


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:  # each node a dependency of the next: reversed, each imports the next
        return list(reversed(exc.args[1]))
    return None


def test_the_graph_sees_every_kind_of_import() -> None:
    """Module level, inside a function, relative, ``from pkg import module``; TYPE_CHECKING left out."""
    assert len(MODULES) > 150 and "rooftop.display" in MODULES
    assert "rooftop.cost.roofline" in GRAPH["rooftop.plan.train.step"]  # module level
    assert "rooftop.report.train" in GRAPH["rooftop.cli.train"]
    assert "rooftop.cost" in GRAPH["rooftop.cost.roofline"]  # its package runs first
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import rooftop.report.table\n"
        "def f():\n    from rooftop.report import notebook\n    from . import units\n"
    )
    targets = {t for node in _imports(tree) for t in _targets(node, "rooftop.display")}
    assert targets == {"typing", "rooftop.report.notebook", "rooftop.units"}


def test_the_check_finds_a_circle() -> None:
    """The same check on the tree's graph with one edge added up from the ground floor fails, naming the circle."""
    graph = {name: set(edges) for name, edges in GRAPH.items()}
    graph["rooftop.units"].add("rooftop.cost.roofline")  # cost/roofline.py imports units.py
    cycle = _cycle(graph)
    assert cycle is not None and {"rooftop.units", "rooftop.cost.roofline"} <= set(cycle)


def test_no_import_cycle_anywhere() -> None:
    cycle = _cycle(GRAPH)
    if cycle is not None:
        pytest.fail(f"import cycle (each module imports the next): {' -> '.join(cycle)}")


#: the layers that render (words, JSON, tables) and parse arguments: nothing below them imports them
TOP = ("rooftop.report", "rooftop.cli")


@pytest.mark.parametrize("layer", TOP)
def test_nothing_below_reaches_up(layer: str) -> None:
    """Not even lazily inside a function: results get their notebook views registered by report/."""
    up = {
        name: sorted(t for t in edges if t == layer or t.startswith(layer + "."))
        for name, edges in GRAPH.items()
        if not name.startswith(TOP)
    }
    assert {name: targets for name, targets in up.items() if targets} == {}
