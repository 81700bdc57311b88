"""Speed of the training-layout search: CPU seconds per case, and ratios against another version of the code.

    PYTHONPATH=src python benchmarks/bench_train_search.py                       # this code, once per case
    PYTHONPATH=src python benchmarks/bench_train_search.py --against ../old/src  # interleaved with another tree

Each case runs in a fresh process (``--child``) and times one cold search (model profiles not cached) in CPU
seconds (user + sys of the process, ``time.process_time``), so that a machine shared with other work
measures the work itself. With ``--against``, the two versions run alternately, ``--repeat`` times each,
and the table gives medians and the ratio new / old; a version that refuses a case (too many layouts)
says so. The last rows give the growth of the search time from 512 to 65,536 chips for a dense model.

Measured 2026-11-29 on a shared 2-core machine against the code of 2026-11-22 (821131a), medians of 3 runs
(5 for cases 2 and 6), CPU seconds new / old: 0) 0.09 / 0.14; 1) 0.11 / 0.13; 2) 0.07 / 0.06 (1.03x);
3) 1.42 / 1.72; 4) 0.20 / 0.31; 5) 0.08 / 0.18; 6) 0.03 / 0.03 (1.08x); 7) 0.70 / 1.02; 8) 0.52 / 0.77;
9) 2.86 / 3.55 (the code of 2026-11-28 refused it: over 50,000 layouts); 10) 0.05 / 0.16; 11) 0.07 / 0.47.
Growth from 512 to 65,536 H100 for llama-3-70b: 0.48x at the same batch, 1.46x at one sequence per chip.
The best layouts differ from the old code's because the step model changed since (plan/train/step.py).

Measured again the same day under heavier load (medians of 3; cases 2, 3 and 6 rerun as single cases
against the old code swing by 10-20% from run to run at this load): 0) 0.08 / 0.12; 1) 0.08 / 0.12;
2) 0.08 / 0.10 (0.86x; 0.90x and 0.92x in two other runs); 3) 1.54 / 1.28 (run alone, alternating, 1.35-1.56
against 1.30-1.89: the same within the noise); 4) 0.18 / 0.30; 5) 0.07 / 0.15; 6) 0.03 / 0.03 (1.04x; 0.99x
and 1.02x in two other runs); 7) 0.67 / 0.91; 8) 0.45 / 0.72; 9) 2.92 / 4.10; 10) 0.05 / 0.12;
11) 0.06 / 0.32. Growth from 512 to 65,536 H100: 0.50x at the same batch, 1.30x at one sequence per chip
(1.51x and 1.54x in the other two runs: 0.05 against 0.07 CPU-s). The same layouts, counts and step times as
before these changes on every case (distinct keys by np.lexsort, the schedule choices per (replica batch,
pp), the activation figures per remat policy in the first fit, the rows read as one flat run).

After the hidden collectives' compute (``overlap_cost``) raised the best steps and the search added a floor per
mesh (plan/train/search._comm_floor: FSDP traffic and the data-parallel reduction, rows dropped in arrays),
measured 2026-11-29 under heavy load, medians of 3, new / old: 0) 0.06 / 0.10; 1) 0.08 / 0.11; 2) 0.05 / 0.06;
3) 1.13 / 1.05 (1.08x; 1.03x and 1.10x in two other runs); 4) 0.17 / 0.27; 5) 0.08 / 0.12; 6) 0.03 / 0.03
(1.03x); 7) 0.40 / 0.76; 8) 0.32 / 0.61; 9) 2.53 / 2.99; 10) 0.07 / 0.11; 11) 0.12 / 0.32. Growth from 512
to 65,536 H100: 0.35x at the same batch, 1.78x at one sequence per chip (1.44x and 1.80x in two other runs).
The same layouts, step times and counts as without the floor on every case.

After the expert all-to-alls and ring attention's shifts joined the bounds once a layout's mesh is known
(plan/train/bound.py: ep_bound_s, cp_bound_s) and every row's communication is bounded before any mesh is built
(plan/train/netbound.py: each collective at least the bytes a chip must receive over its whole ingress, and over
its NIC across the scale-out domains its axes span, whatever the algorithm), measured 2026-11-29 under heavy
load (load average 6-7 on 2 cores), medians of 3, new / old: 0) 0.04 / 0.12; 1) 0.08 / 0.12; 2) 0.05 / 0.07
(0.78x in a second run of 5); 3) 0.87 / 1.24; 4) 0.18 / 0.33; 5) 0.08 / 0.14; 6) 0.03 / 0.03 (0.94x; 0.93x
in a second run of 5); 7) 0.21 / 0.92; 8) 0.24 / 0.72; 9) 0.49 / 3.28; 10) 0.07 / 0.12; 11) 0.08 / 0.34.
Growth from 512 to 65,536 H100: 0.37x at the same batch, 1.28x at one sequence per chip (1.23x, 1.22x and
1.19x in three other runs). The same top-5 layouts and step times as before on every case and on nine pinned
searches; fewer layouts priced (case 3: 1,015 timed against 5,155; case 9: 135 against 9,267).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

#: (model, chip, topology, tokens per step, sequence length)
CASES = [
    ("llama-3.1-405b", "h100", "2048x8", 16 * 2**20, 8192),
    ("llama-3.1-405b", "tpu-v5p", "16x20x28", 16 * 2**20, 8192),
    ("llama-3-70b", "tpu-v5p", "16x20x28", 4 * 2**20, 4096),
    ("deepseek-v3", "h100", "256x8", 16 * 2**20, 4096),
    ("mixtral-8x7b", "tpu-v5e", "16x16", 2**20, 4096),
    ("llama-3-70b", "h100", "64x8", 4 * 2**20, 4096),
    ("llama-3-70b", "h100", "8192x8", 4 * 2**20, 4096),
    ("deepseek-v3", "h100", "4096x8", 16 * 2**20, 4096),
    ("deepseek-v3", "h100", "8192x8", 16 * 2**20, 4096),
    ("deepseek-v3", "h100", "8192x8", 64 * 2**20, 16384),  # 53,401 candidates: over the former cap of 50,000
    ("llama-3-70b", "h100", "64x8", 2 * 2**20, 4096),  # one sequence per chip
    ("llama-3-70b", "h100", "8192x8", 256 * 2**20, 4096),
]
#: a dense model's growth from 512 to 65,536 chips (indices into CASES): the same batch, and one sequence per chip
GROWTH = ((5, 6), (10, 11))


def _child(index: int) -> None:
    """One cold search of CASES[index] in this process; prints its CPU seconds and result as JSON."""
    try:
        from rooftop.cost.efficiency import default_efficiency
        from rooftop.plan.train.search import search
        from rooftop.plan.train.step import TrainingSetup

        eff = default_efficiency("training")
    except ImportError:  # the module layout of November 2026
        from rooftop.plan.efficiency import default_training_efficiency  # type: ignore[import-not-found]
        from rooftop.plan.search import search  # type: ignore[import-not-found,no-redef]
        from rooftop.plan.training import TrainingSetup  # type: ignore[import-not-found,no-redef]

        eff = default_training_efficiency()
    from rooftop.errors import RooftopError
    from rooftop.hardware.catalog import get_chip
    from rooftop.hardware.topology import parse_topology
    from rooftop.model.catalog import get_model

    model, chip_name, topo, batch_tokens, seq = CASES[index]
    chip = get_chip(chip_name)
    setup = TrainingSetup(get_model(model), chip, parse_topology(chip, topo), batch_tokens // seq, seq, eff)
    t0 = time.process_time()
    try:
        result = search(setup)
    except RooftopError as e:
        print(json.dumps({"cpu_s": time.process_time() - t0, "refused": str(e)}))
        return
    cpu = time.process_time() - t0
    best = result.ranked[0] if result.ranked else None
    print(
        json.dumps(
            {
                "cpu_s": cpu,
                "evaluated": result.evaluated,
                "best": best.parallelism.label() if best else "nothing fits",
                "step_s": best.step_time_s if best else None,
            }
        )
    )


def _run(index: int, src: str | None) -> dict[str, object]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(index)], env=env, capture_output=True, text=True, check=True
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _cell(runs: list[dict[str, object]]) -> tuple[float, str]:
    cpu = statistics.median(float(r["cpu_s"]) for r in runs)  # type: ignore[arg-type]
    last = runs[-1]
    return cpu, ("refused" if "refused" in last else f"{last['best']} step {float(last['step_s']):.4f} s")  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", help="another tree's src/ to run interleaved with this one")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each version per case (median)")
    ap.add_argument("--cases", help="comma-separated case numbers (default: all)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        _child(args.child)
        return
    here = os.environ.get("PYTHONPATH")
    picks = [int(c) for c in args.cases.split(",")] if args.cases else list(range(len(CASES)))
    print(f"{'#':>2} {'model':<15} {'chip':<8} {'topology':<9} {'chips':>6} {'new CPU s':>9} {'old CPU s':>9} "
          f"{'new/old':>7}  best (new)")  # fmt: skip
    medians: dict[int, float] = {}
    for i in picks:
        new_runs: list[dict[str, object]] = []
        old_runs: list[dict[str, object]] = []
        for _ in range(args.repeat if args.against else 1):
            new_runs.append(_run(i, here))
            if args.against:
                old_runs.append(_run(i, args.against))
        new_cpu, new_best = _cell(new_runs)
        medians[i] = new_cpu
        old_text = ratio = "-"
        if old_runs:
            old_cpu, old_best = _cell(old_runs)
            old_text = "refused" if old_best == "refused" else f"{old_cpu:.2f}"
            ratio = "-" if old_best == "refused" else f"{new_cpu / old_cpu:.2f}"
            if old_best not in ("refused", new_best):
                new_best += f"  (old: {old_best})"
        model, chip, topo, _, _ = CASES[i]
        chips = math.prod(int(d) for d in topo.split("x"))
        print(f"{i:>2} {model:<15} {chip:<8} {topo:<9} {chips:>6} {new_cpu:>9.2f} {old_text:>9} {ratio:>7}  {new_best}")
    for a, b in GROWTH:
        if a in medians and b in medians:
            print(f"growth {CASES[a][0]} from case {a} to case {b}: {medians[b] / medians[a]:.2f}x")


if __name__ == "__main__":
    main()
