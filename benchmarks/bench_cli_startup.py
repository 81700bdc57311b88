"""Start-up time of the ``rooftop`` command: whole processes, as a user runs them.

Times ``rooftop --help`` and one-point commands (``rooftop chips h100 --json``,
``rooftop roofline --chip h100 --flops 1e12 --bytes 1GiB --json``, the same as a table), each run
``--runs`` times as a fresh ``python -m rooftop.cli.main`` process, the commands interleaved (one run of
each in turn), and prints per command the median CPU seconds (user + system, from the process's own
rusage: the measure that holds on a shared machine), min / median wall time, and the median CPU as a
ratio to ``python -c pass`` (the interpreter's own start-up, the peer).

The code timed is this checkout's ``src/`` (put first on PYTHONPATH), or ``--src DIR`` to
time another checkout, e.g. to compare before and after a change. Byte code is cached as
in an installed package, in a temporary PYTHONPYCACHEPREFIX (nothing is written beside the
sources, whatever PYTHONDONTWRITEBYTECODE says); ``--no-bytecode-cache`` times compiling
every module from source instead.

Run: ``python benchmarks/bench_cli_startup.py [--runs 15] [--src DIR]``.
Targets: ``rooftop --help`` median under 0.15 s (cli/ imports nothing heavy until a command runs);
``rooftop roofline ... --json`` at most 8x the CPU of ``python -c pass`` (a one-point command imports only
what it prints: no rich for --json, no other command's modules).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

COMMANDS: list[tuple[str, list[str]]] = [
    ("python -c pass", ["-c", "pass"]),
    ("rooftop --help", ["-m", "rooftop.cli.main", "--help"]),
    ("rooftop chips h100 --json", ["-m", "rooftop.cli.main", "chips", "h100", "--json"]),
    (
        "rooftop roofline --chip h100 --flops 1e12 --bytes 1GiB --json",
        ["-m", "rooftop.cli.main", "roofline", "--chip", "h100", "--flops", "1e12", "--bytes", "1GiB", "--json"],
    ),
    (
        "rooftop roofline --chip tpu-v5p --flops 1e12 --bytes 4GiB",
        ["-m", "rooftop.cli.main", "roofline", "--chip", "tpu-v5p", "--flops", "1e12", "--bytes", "4GiB"],
    ),
]


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s: user + system) of one fresh interpreter process running ``argv``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per command (default 15)")
    parser.add_argument("--src", type=Path, default=SRC, help="the src/ folder whose rooftop is timed")
    parser.add_argument("--no-bytecode-cache", action="store_true", help="compile every module from source each run")
    args = parser.parse_args()
    path = os.pathsep.join(filter(None, [str(args.src.resolve()), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "100"}
    with tempfile.TemporaryDirectory(prefix="rooftop-pycache-") as cache:
        if args.no_bytecode_cache:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = cache
        for _, argv in COMMANDS:  # warm the .pyc files and the page cache
            run_once(argv, env)
        times: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in COMMANDS}
        for _ in range(args.runs):
            for label, argv in COMMANDS:
                times[label].append(run_once(argv, env))
    how = "compiled from source" if args.no_bytecode_cache else "byte code cached"
    print(f"rooftop from {args.src}, {args.runs} interleaved runs each ({how})")
    print(f"{'command':62} {'CPU s':>7} {'wall min':>8} {'median':>7} {'CPU ratio':>9}")
    peer = statistics.median(c for _, c in times[COMMANDS[0][0]])
    for label, _ in COMMANDS:
        walls, cpus = [w for w, _ in times[label]], [c for _, c in times[label]]
        cpu = statistics.median(cpus)
        print(f"{label:62} {cpu:7.3f} {min(walls):8.3f} {statistics.median(walls):7.3f} {cpu / peer:8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
