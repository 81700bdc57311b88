"""CPU time of the test suite: the README's test command (``python3 -m pytest``), and its slowest tests.

Runs pytest in this process with a small plugin that reads ``resource.getrusage`` (this process and the
children it has waited for: the CLI runs in subprocesses, the trace readers' worker processes) around each
test's set-up, call and tear-down, then prints the whole run's CPU seconds (user + system), its wall time and
the 10 tests that took the most CPU. CPU seconds, not wall time: on a shared or loaded machine the wall time
measures the neighbours. The budget is 120 CPU-s on a 2-core machine for the default run (the long property
and fuzz runs, marked ``long``, run separately: ``--long`` times those instead).

Run: ``python benchmarks/bench_test_suite.py [--long] [--top 10] [PYTEST ARGS...]``.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Generator
from typing import Any

import pytest


def cpu_s() -> float:
    """User + system CPU seconds of this process and of its waited-for children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class CpuPerTest:
    """Adds each test's set-up, call and tear-down CPU seconds up under its node id."""

    def __init__(self) -> None:
        self.by_test: dict[str, float] = defaultdict(float)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Generator[None, None, None]:
        start = cpu_s()
        yield
        self.by_test[item.nodeid] += cpu_s() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--long", action="store_true", help="time the long property and fuzz runs (-m long)")
    ap.add_argument("--top", type=int, default=10, help="how many of the slowest tests to list (default 10)")
    args, rest = ap.parse_known_args()
    pytest_args = ["-p", "no:cacheprovider", *(["-m", "long"] if args.long else []), *rest]
    plugin = CpuPerTest()
    wall0, cpu0 = time.perf_counter(), cpu_s()
    code = pytest.main(pytest_args, plugins=[plugin])
    wall, cpu = time.perf_counter() - wall0, cpu_s() - cpu0
    print(f"\npython3 -m pytest {' '.join(pytest_args)}: exit {int(code)}")
    in_tests = sum(plugin.by_test.values())
    print(f"CPU {cpu:.1f} s (user + system, with waited-for children), wall {wall:.1f} s, {len(plugin.by_test)} tests")
    print(f"  in the tests {in_tests:.1f} s, outside them (start-up, collection) {cpu - in_tests:.1f} s")
    print(f"{args.top} tests taking the most CPU:")
    for nodeid, s in sorted(plugin.by_test.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {s:7.2f} s  {nodeid}")
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
