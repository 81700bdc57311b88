"""Speed of the HLO analysis (count every instruction, infer the mesh, roofline each one) on the synthetic
module of ``bench_hlo_parse.py`` (fusions with tiled layouts, async all-reduces with iota replica groups,
cuBLAS custom-calls), at two sizes to show that the time grows linearly with the module (CPU seconds;
against XLA's own parse and cost analysis: ``bench_hlo_cli.py``).

    PYTHONPATH=src python3 benchmarks/bench_hlo_analyze.py --mb 50
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hlo_parse import generate

from rooftop.analysis.hlo.analyze import analyze
from rooftop.analysis.hlo.count import count_module
from rooftop.analysis.hlo.parse import parse_hlo
from rooftop.hardware.catalog import get_chip


def run(megabytes: float, chip: str) -> tuple[float, int, float, float, float]:
    """(MB, instructions, parse s, count s, analyze s) for a module of about ``megabytes``: CPU seconds
    of this process (``time.process_time``)."""
    text, _ = generate(int(megabytes * 1e6))
    start = time.process_time()
    module = parse_hlo(text, source="synthetic")
    parse_s = time.process_time() - start
    start = time.process_time()
    count_module(module)
    count_s = time.process_time() - start
    start = time.process_time()
    analysis = analyze(module, get_chip(chip), "data=4,model=2")
    analyze_s = time.process_time() - start
    return len(text.encode()) / 1e6, len(analysis.ops), parse_s, count_s, analyze_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0, help="size of the larger module in MB (1e6 bytes)")
    parser.add_argument("--chip", default="h100", help="chip to time on (default h100)")
    args = parser.parse_args()
    print(f"{'MB':>8} {'priced ops':>11} {'parse CPU s':>11} {'count CPU s':>11} {'analyze CPU s':>13} {'ops/s':>10}")
    for megabytes in (args.mb / 4, args.mb):
        size, ops, parse_s, count_s, analyze_s = run(megabytes, args.chip)
        print(f"{size:8.1f} {ops:11,d} {parse_s:11.2f} {count_s:11.2f} {analyze_s:13.2f} {ops / analyze_s:10,.0f}")


if __name__ == "__main__":
    main()
