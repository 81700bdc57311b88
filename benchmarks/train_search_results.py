"""What the training search returns on the cases of bench_train_search.py and a few pinned searches, one JSON line
each: the top-5 layouts with their exact step times (repr), the fastest unfit layout, and the counts (evaluated,
unlayable, timed, pruned). A change meant to speed the search up must leave the layouts and step times alone;
the counts say how much work it skipped. Run it under two trees and compare:

    PYTHONPATH=../old/src python benchmarks/train_search_results.py > old.jsonl
    PYTHONPATH=src python benchmarks/train_search_results.py > new.jsonl
    PYTHONPATH=src python benchmarks/train_search_results.py --compare old.jsonl new.jsonl

CPU seconds per search go to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_train_search import CASES

#: (case, --fix) searches beside the plain cases: pinned degrees, remat, ZeRO, FSDP resharding, balance
PINNED = [
    (0, "tp=8"),
    (3, "ep=8"),
    (3, "pp=16,remat=full"),
    (5, "fsdp_reshard=0"),
    (7, "cp=2"),
    (4, "sp=0"),
    (10, "pipeline_balance=1"),
    (3, "zero=2"),
    (1, "pp=1"),
]


def _result(index: int, fix: str | None) -> dict[str, object]:
    from rooftop.cost.efficiency import default_efficiency
    from rooftop.hardware.catalog import get_chip
    from rooftop.hardware.topology import parse_topology
    from rooftop.model.catalog import get_model
    from rooftop.plan.train.search import parse_fix, search
    from rooftop.plan.train.step import TrainingSetup

    model, chip_name, topo, tokens, seq = CASES[index]
    chip = get_chip(chip_name)
    eff = default_efficiency("training")
    setup = TrainingSetup(get_model(model), chip, parse_topology(chip, topo), tokens // seq, seq, eff)
    t0 = time.process_time()
    r = search(setup, parse_fix(fix))
    print(f"case {index} {fix or ''}: {time.process_time() - t0:.2f} CPU-s", file=sys.stderr)
    return {
        "case": index,
        "fix": fix,
        "top": [(s.parallelism.label(), repr(s.step_time_s)) for s in r.ranked],
        "unfit": r.best_unfit.parallelism.label() if r.best_unfit else None,
        "counts": [r.evaluated, r.unlayable, r.timed, r.pruned],
    }


def _compare(old_path: str, new_path: str) -> int:
    with open(old_path) as f:
        old = [json.loads(line) for line in f]
    with open(new_path) as f:
        new = [json.loads(line) for line in f]
    differ = 0
    for a, b in zip(old, new, strict=True):
        same = a["top"] == b["top"] and a["unfit"] == b["unfit"]
        differ += not same
        verdict = "same" if same else "DIFFERENT"
        print(f"{a['case']:>2} {a['fix'] or '-':<20} {verdict}  counts {a['counts']} -> {b['counts']}")
    print("same layouts and step times" if not differ else f"{differ} searches differ")
    return 1 if differ else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"), help="compare two outputs of this script")
    args = ap.parse_args()
    if args.compare:
        sys.exit(_compare(*args.compare))
    for index, fix in [(i, None) for i in range(len(CASES))] + PINNED:
        print(json.dumps(_result(index, fix)))


if __name__ == "__main__":
    main()
