"""Speed of the serving planner: the default sweep of ``rooftop serve`` for a few scenarios, in
process (plan + JSON payload) and end to end (a fresh ``rooftop serve ... --json`` process).

Run: ``python benchmarks/bench_serve.py [--repeat N] [--scenario K ...]``. Target: < ~2 s per default sweep end
to end. Each figure is given in CPU seconds (the process's own, or the child's for the end-to-end run) next to
wall seconds: on a shared machine the CPU figure is the one to compare.

Measured 2026-11-29 on a shared 2-core machine: the mixtral-8x7b rate scenario's plan (second plan in one
process, shape table and model leaves cleared; CPU s, medians of 3 alternating runs) 1.66 before -> 1.05
after each distinct matmul shape's efficiency was worked out once per plan (plan/serve/shapes.py, an exact
table by shape: the fluid balance and the request simulation priced the same 1,142 shapes 6,084 times). The
payloads of these scenarios and of benchmarks/accuracy_serving.py are unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rooftop.cli.main import build_parser
from rooftop.cli.serve import request_from_args
from rooftop.plan.serve.sweep import plan_serving
from rooftop.report.serve import serve_payload

SCENARIOS = [
    "llama-3-70b --chip tpu-v5e --topology 4x4 --prompt-len 2048 --gen-len 512",
    "llama-3-70b --chip h100 --chips 16 --prompt-len 2048 --gen-len 512 --weight-dtype fp8 --kv-dtype fp8",
    "mixtral-8x7b --chip h100 --chips 8 --prompt-len 1024 --gen-len 256 --requests-per-s 20",
    "deepseek-v3 --chip h200 --chips 16 --prompt-len 4096 --gen-len 1024 --weight-dtype fp8",
    "llama-3.1-405b --chip tpu-v5e --topology 16x16 --prompt-len 8192 --gen-len 1024 --weight-dtype int8",
]


def in_process(argv: list[str], repeats: int = 3) -> tuple[float, float, int, int]:
    """Median CPU and wall seconds of plan + JSON payload in this process, the points and the payload's size."""
    args = build_parser().parse_args(["serve", *argv])
    cpu, wall = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        plan = plan_serving(request_from_args(args))
        payload = json.dumps(serve_payload(plan), default=str)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
    return statistics.median(cpu), statistics.median(wall), len(plan.points), len(payload)


def end_to_end(argv: list[str]) -> tuple[float, float]:
    """CPU (the child's user + system) and wall seconds of a fresh ``rooftop serve ... --json`` process."""
    before, t0 = os.times(), time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "rooftop.cli.main", "serve", *argv, "--json"], check=True, capture_output=True
    )
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return cpu, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--repeat", type=int, default=3, help="in-process plans per scenario (median; default 3)")
    ap.add_argument("--scenario", type=int, action="append", help="index into SCENARIOS (repeatable; default all)")
    opts = ap.parse_args(argv)
    picked = [SCENARIOS[i] for i in opts.scenario] if opts.scenario else SCENARIOS
    print(f"{'scenario':104} {'points':>6} {'JSON KiB':>8} {'plan CPU':>8} {'plan s':>7} {'CLI CPU':>7} {'CLI s':>6}")
    for text in picked:
        words = text.split()
        plan_cpu, plan_s, points, size = in_process(words, opts.repeat)
        cli_cpu, cli_s = end_to_end(words)
        print(f"{text:104} {points:6d} {size / 1024:8.0f} {plan_cpu:8.3f} {plan_s:7.3f} {cli_cpu:7.2f} {cli_s:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
