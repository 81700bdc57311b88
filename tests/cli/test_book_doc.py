"""docs/book.md works: every row of its table of the book's worked problems runs, and its output holds
the row's checks (``KEY ~ VALUE (TOL%)`` within TOL percent, or ``KEY == TEXT``), read from ``--json``.

A key path is dotted; ``[3]`` picks a list item by index and ``[name=x&axes=X]`` the first item whose
fields have those values."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "book.md"
CODE = re.compile(r"`([^`]+)`")
NEAR = re.compile(r"^(\S+) ~ (\S+) \((\d+(?:\.\d+)?)%\)$")
SAME = re.compile(r"^(\S+) == (.+)$")
STEP = re.compile(r"([^.\[\]]+)|\[([^\]]+)\]")


def rows() -> list[tuple[str, str, str]]:
    """(id, command, checks) of each table row: the Command and Check columns' code spans."""
    out = []
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) != 6 or not cells[2].startswith("`rooftop "):
            continue
        (command,) = CODE.findall(cells[2])
        checks = "; ".join(CODE.findall(cells[4]))
        out.append((f"Part {cells[0]}: {cells[1]}", command, checks))
    return out


def pick(data: Any, path: str) -> Any:
    for name, index in STEP.findall(path):
        if name:
            data = data[name]
        elif index.isdigit():
            data = data[int(index)]
        else:
            want = dict(part.split("=", 1) for part in index.split("&"))
            data = next(x for x in data if all(str(x.get(k)) == v for k, v in want.items()))
    return data


def test_the_table_has_every_part() -> None:
    parts = {r[0].split(":")[0] for r in rows()}
    assert {f"Part {p}" for p in ("1", "2", "3", "4", "5", "7-8", "10", "12")} <= parts
    assert len(rows()) >= 20


@pytest.mark.parametrize(("name", "command", "checks"), rows(), ids=[r[0] for r in rows()])
def test_row(name: str, command: str, checks: str) -> None:
    code, out, err = run_cli(*shlex.split(command)[1:], "--json")
    assert code == 0, f"{name}: {err}"
    data = json.loads(out)
    assert checks, f"{name}: no check"
    for check in (c.strip() for c in checks.split(";")):
        near, same = NEAR.match(check), SAME.match(check)
        if near:
            got, want, tol = pick(data, near.group(1)), float(near.group(2)), float(near.group(3)) / 100
            assert got == pytest.approx(want, rel=tol, abs=1e-12), f"{name}: {check}, got {got}"
        else:
            assert same, f"{name}: cannot read check {check!r}"
            assert str(pick(data, same.group(1))) == same.group(2), f"{name}: {check}"
