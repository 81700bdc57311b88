"""Speed of the training-layout search: layouts evaluated and seconds.

    python benchmarks/bench_train_search.py

The issue's bar: a full search for llama-3.1-405b on 16384 h100 and on tpu-v5p 16x20x28
finishes in under 2 s on 2 cores; every case here now runs in under 1.5 s (deepseek-v3 on
256x8 h100, the largest, about 1.1 s against 4.5 s before the search derived each layout's
memory variants arithmetically and shared op sums, collective rates and interleaved siblings).
"""

from __future__ import annotations

import time

from rooftop.cost.efficiency import default_efficiency
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import parse_topology
from rooftop.model.catalog import get_model
from rooftop.plan.train.search import search
from rooftop.plan.train.step import TrainingSetup, model_profile

CASES = [
    ("llama-3.1-405b", "h100", "2048x8", 16 * 2**20, 8192),
    ("llama-3.1-405b", "tpu-v5p", "16x20x28", 16 * 2**20, 8192),
    ("llama-3-70b", "tpu-v5p", "16x20x28", 4 * 2**20, 4096),
    ("deepseek-v3", "h100", "256x8", 16 * 2**20, 4096),
    ("mixtral-8x7b", "tpu-v5e", "16x16", 2**20, 4096),
]


def main() -> None:
    print(f"{'model':<16} {'chip':<8} {'topology':<10} {'evaluated':>9} {'timed':>6} {'cold s':>7} {'warm s':>7}  best")
    for model, chip_name, topo, batch_tokens, seq in CASES:
        chip = get_chip(chip_name)
        setup = TrainingSetup(
            get_model(model), chip, parse_topology(chip, topo), batch_tokens // seq, seq, default_efficiency("training")
        )
        model_profile.cache_clear()
        t0 = time.perf_counter()
        result = search(setup)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        search(setup)
        warm = time.perf_counter() - t0
        best = result.ranked[0] if result.ranked else None
        label = f"{best.parallelism.label()} MFU {best.mfu:.1%}" if best else "nothing fits"
        print(
            f"{model:<16} {chip_name:<8} {topo:<10} {result.evaluated:>9} {result.timed:>6} {cold:>7.2f} {warm:>7.2f}  "
            f"{label}"
        )


if __name__ == "__main__":
    main()
