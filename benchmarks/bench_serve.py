"""Speed of the serving planner: the default sweep of ``rooftop serve`` for a few scenarios, in
process (plan + JSON payload) and end to end (a fresh ``rooftop serve ... --json`` process).

Run: ``python benchmarks/bench_serve.py``. Target: < ~2 s per default sweep end to end.

Measured 2026-11-29 on a shared 2-core machine: the mixtral-8x7b rate scenario's plan (second plan in one
process, shape table and model leaves cleared; CPU s, medians of 3 alternating runs) 1.66 before -> 1.05
after each distinct matmul shape's efficiency was worked out once per plan (plan/serve/shapes.py, an exact
table by shape: the fluid balance and the request simulation priced the same 1,142 shapes 6,084 times). The
payloads of these scenarios and of benchmarks/accuracy_serving.py are unchanged.
"""

from __future__ import annotations

import json
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


def in_process(argv: list[str], repeats: int = 3) -> tuple[float, int, int]:
    args = build_parser().parse_args(["serve", *argv])
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        plan = plan_serving(request_from_args(args))
        payload = json.dumps(serve_payload(plan), default=str)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), len(plan.points), len(payload)


def end_to_end(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "rooftop.cli.main", "serve", *argv, "--json"], check=True, capture_output=True
    )
    return time.perf_counter() - t0


def main() -> int:
    print(f"{'scenario':104} {'points':>6} {'JSON KiB':>8} {'plan s':>7} {'CLI s':>6}")
    for text in SCENARIOS:
        argv = text.split()
        plan_s, points, size = in_process(argv)
        cli_s = end_to_end(argv)
        print(f"{text:104} {points:6d} {size / 1024:8.0f} {plan_s:7.3f} {cli_s:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
