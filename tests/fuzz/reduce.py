"""Shrink a failing case to a small reproducer that fails the same way (same :meth:`Outcome.key`):
command-line arguments dropped one by one, then the case's main file cut down line by line (ddmin).
Bounded by a time budget; whatever is smallest when it runs out is kept."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from tests.fuzz.oracle import Case, Outcome, run_case

Run = Callable[[Case], Outcome]


def reduce_case(case: Case, key: str, budget_s: float = 60.0, run: Run = run_case) -> Case:
    """The smallest variant of ``case`` found within ``budget_s`` whose outcome has ``key``."""
    deadline = time.monotonic() + budget_s

    def same(candidate: Case) -> bool:
        if time.monotonic() > deadline:
            return False
        return run(candidate).key() == key

    case = _reduce_argv(case, same)
    if case.main_file and isinstance(case.files.get(case.main_file), bytes):
        case = _reduce_lines(case, same, deadline)
    return case


def _reduce_argv(case: Case, same: Callable[[Case], bool]) -> Case:
    argv = list(case.argv)
    i = 1  # the subcommand stays
    while i < len(argv):
        takes_value = argv[i].startswith("--") and "=" not in argv[i] and i + 1 < len(argv)
        for width in (2, 1) if takes_value else (1,):
            candidate = dataclasses.replace(case, argv=argv[:i] + argv[i + width :])
            if same(candidate):
                case, argv = candidate, list(candidate.argv)
                break
        else:
            i += 1
    return case


def _reduce_lines(case: Case, same: Callable[[Case], bool], deadline: float) -> Case:
    """ddmin over the lines of the main file."""
    name = case.main_file
    assert name is not None
    data = case.files[name]
    assert isinstance(data, bytes)
    lines = data.split(b"\n")

    def with_lines(keep: list[bytes]) -> Case:
        files = dict(case.files)
        files[name] = b"\n".join(keep)
        return dataclasses.replace(case, files=files)

    n = 2
    while len(lines) >= 2 and time.monotonic() < deadline:
        chunk = max(1, len(lines) // n)
        reduced = False
        for start in range(0, len(lines), chunk):
            trial = lines[:start] + lines[start + chunk :]
            if trial and same(with_lines(trial)):
                lines = trial
                n = max(n - 1, 2)
                reduced = True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(lines), n * 2)
    return with_lines(lines)
