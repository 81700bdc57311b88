"""Speed of ``rooftop compare``: six slices side by side, and six chips each searched for the smallest slice
meeting a goal (plan/goal/), in CPU seconds of this process (``time.process_time``: the figure that does not
depend on what else shares the machine) and wall seconds, each the best of a few runs.

Run: ``python benchmarks/bench_compare.py``. Target: the six-slice comparison under 3 CPU seconds.
"""

from __future__ import annotations

import contextlib
import io
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


def main() -> int:
    print(f"{'case':40} {'CPU s':>7} {'wall s':>7}")
    for name, text in CASES:
        cpu, wall = timed(text.split())
        print(f"{name:40} {cpu:7.2f} {wall:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
