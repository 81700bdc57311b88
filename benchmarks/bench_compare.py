"""Speed of ``rooftop compare``: six slices side by side, and six chips each searched for the smallest slice
(training) or the fewest chips (serving) meeting a goal (plan/goal/), in CPU seconds (``time.process_time``:
the figure that depends least on what else shares the machine) and wall seconds, each the best of a few runs:
in this process after a first run (``warm``: catalogs loaded, modules imported), and as a new process
(``cold``: what ``rooftop compare ...`` costs from the shell, start-up included; CPU from ``getrusage``).

Run: ``python benchmarks/bench_compare.py`` (``--cold-only`` / ``--warm-only``). Target: each comparison
under 3 CPU seconds, cold.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rooftop.cli.main import main as rooftop

TRAIN = "--batch-tokens 4M --seq-len 4096 --tokens 15T"
CASES = [
    (
        "six slices, training",
        "compare llama-3-70b --chips-list h100:8192,b200:8192,h200:4096,tpu-v5p:16x16x16,tpu-v6e:2*16x16,"
        f"tpu-7x:16x16x16 {TRAIN} --json",
    ),
    (
        "six slices, serving",
        "compare llama-3-70b --chips-list h100:8,b200:8,h200:8,tpu-v5p:2x2x2,tpu-v6e:4x4,tpu-7x:2x2x2 "
        "--prompt-len 2048 --gen-len 256 --json",
    ),
    (
        "six chips, training goal (30 days)",
        f"compare llama-3-70b --chips-list h100,b200,h200,tpu-v5p,tpu-v6e,tpu-7x {TRAIN} --max-days 30 --json",
    ),
    (
        "six chips, serving goal (50 requests/s)",
        "compare llama-3-70b --chips-list h100,b200,h200,tpu-v5p,tpu-v6e,tpu-7x --prompt-len 2048 --gen-len 256 "
        "--requests-per-s 50 --max-ttft 2s --max-step-latency 30ms --json",
    ),
    (
        "one chip, training goal (30 days)",
        f"train llama-3-70b --chip tpu-v5p {TRAIN} --max-days 30 --json",
    ),
    (
        "one chip, serving goal",
        "serve llama-3-70b --chip h100 --prompt-len 2048 --gen-len 256 --requests-per-s 50 --max-ttft 2s "
        "--max-step-latency 30ms --json",
    ),
]


def timed(argv: list[str], repeats: int = 3) -> tuple[float, float]:
    """(best CPU seconds, best wall seconds) of ``repeats`` in-process runs (after one warm-up)."""
    cpu, wall = [], []
    for i in range(repeats + 1):
        c0, w0 = time.process_time(), time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            code = rooftop(argv)
        if code != 0:
            raise SystemExit(f"rooftop {' '.join(argv)} exited {code}")
        if i:  # the first run loads the catalogs and imports: not what a second comparison pays
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
    return min(cpu), min(wall)


def cold(argv: list[str], repeats: int = 3) -> tuple[float, float]:
    """(best CPU seconds, best wall seconds) of ``repeats`` runs of the command in a new Python process."""
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    code = "import sys; from rooftop.cli.main import main; sys.exit(main(sys.argv[1:]))"
    cpu, wall = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        w0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, *argv], env=env, check=True, stdout=subprocess.DEVNULL)
        wall.append(time.perf_counter() - w0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(cpu), min(wall)


def main() -> int:
    warm, cold_ = "--cold-only" not in sys.argv, "--warm-only" not in sys.argv
    print(f"{'case':42} {'warm CPU s':>10} {'wall s':>7} {'cold CPU s':>10} {'wall s':>7}")
    for name, text in CASES:
        w = timed(text.split()) if warm else (math.nan, math.nan)
        c = cold(text.split()) if cold_ else (math.nan, math.nan)
        print(f"{name:42} {w[0]:10.2f} {w[1]:7.2f} {c[0]:10.2f} {c[1]:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
