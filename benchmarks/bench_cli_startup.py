"""Start-up time of the ``rooftop`` command: whole processes, as a user runs them.

Times ``rooftop --help`` and two one-point commands (``rooftop chips h100 --json``,
``rooftop roofline --chip tpu-v5p --flops 1e12 --bytes 4GiB``), each run ``--runs`` times
as a fresh ``python -m rooftop.cli.main`` process, and prints min / median / max wall time
per command, with ``python -c pass`` for reference (the interpreter's own start-up).

The code timed is this checkout's ``src/`` (put first on PYTHONPATH), or ``--src DIR`` to
time another checkout, e.g. to compare before and after a change. Byte code is cached as
in an installed package, in a temporary PYTHONPYCACHEPREFIX (nothing is written beside the
sources, whatever PYTHONDONTWRITEBYTECODE says); ``--no-bytecode-cache`` times compiling
every module from source instead.

Run: ``python benchmarks/bench_cli_startup.py [--runs 15] [--src DIR]``.
Target: ``rooftop --help`` median under 0.15 s (cli/ imports nothing heavy until a command runs).
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
        "rooftop roofline --chip tpu-v5p --flops 1e12 --bytes 4GiB",
        ["-m", "rooftop.cli.main", "roofline", "--chip", "tpu-v5p", "--flops", "1e12", "--bytes", "4GiB"],
    ),
]


def time_process(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    """Wall seconds of ``runs`` fresh interpreter processes running ``argv`` (after one untimed warm-up)."""
    cmd = [sys.executable, *argv]
    subprocess.run(cmd, env=env, check=True, capture_output=True)  # warm the .pyc files and the page cache
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return times


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
        how = "compiled from source" if args.no_bytecode_cache else "byte code cached"
        print(f"rooftop from {args.src}, {args.runs} runs each ({how}), seconds of wall time")
        print(f"{'command':60} {'min':>7} {'median':>7} {'max':>7}")
        for label, argv in COMMANDS:
            times = time_process(argv, env, args.runs)
            print(f"{label:60} {min(times):7.3f} {statistics.median(times):7.3f} {max(times):7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
