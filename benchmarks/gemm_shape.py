"""The GEMM shape model (cost/gemm.py) against the bf16 GEMMs measured on one H100.

    python benchmarks/gemm_shape.py [CSV]

CSV: benchmarks/results/h100-2026-11-26/gemm_vs_roofline.csv (m, k, n, measured_s, roofline_s, bound),
measured by benchmarks/gpu_check.py. For each compute-bound shape the measured efficiency is
roofline_s / measured_s (roofline on the datasheet peak). Two predictions, each anchored on ONE
measured shape (8192^3, the matmul calibrate uses), nothing fitted:

- flat: every shape at the 8192^3 efficiency (one matrix efficiency for every GEMM);
- shape: the 8192^3 efficiency x shape_efficiency(shape) / shape_efficiency(8192^3).

Prints the per-shape table with --all, and the median and largest relative errors of both.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

from rooftop.cost.gemm import Gemm, shape_efficiency
from rooftop.hardware.catalog import get_chip

DEFAULT = Path(__file__).parent / "results" / "h100-2026-11-26" / "gemm_vs_roofline.csv"
ANCHOR = (8192, 8192, 8192)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("csv", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--all", action="store_true", help="print every shape")
    args = parser.parse_args()
    chip = get_chip("h100")
    rows = list(csv.DictReader(args.csv.open(encoding="utf-8")))
    measured = {(int(r["m"]), int(r["k"]), int(r["n"])): float(r["roofline_s"]) / float(r["measured_s"]) for r in rows}
    anchor = measured[ANCHOR]
    se_anchor = shape_efficiency(chip, Gemm(*ANCHOR)) or 1.0
    flat, shaped = [], []
    if args.all:
        print(f"{'m':>6} {'k':>6} {'n':>6} {'measured':>9} {'flat':>6} {'shape':>6}")
    for r in rows:
        if r["bound"] != "compute":
            continue
        m, k, n = int(r["m"]), int(r["k"]), int(r["n"])
        meas = measured[(m, k, n)]
        pred = anchor * (shape_efficiency(chip, Gemm(m, n, k)) or 1.0) / se_anchor
        flat.append(abs(anchor - meas) / meas)
        shaped.append(abs(pred - meas) / meas)
        if args.all:
            print(f"{m:>6} {k:>6} {n:>6} {meas:>9.3f} {anchor:>6.3f} {pred:>6.3f}")
    for name, errs in (("flat (one efficiency)", flat), ("shape model", shaped)):
        median, worst = statistics.median(errs), max(errs)
        print(f"{name:<22} median |error| {median:6.1%}   max {worst:6.1%}   over {len(errs)} shapes")


if __name__ == "__main__":
    main()
