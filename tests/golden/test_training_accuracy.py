"""The planner against published runs (benchmarks/accuracy_training.py; sources cited there):
Megatron-LM 2021 Table 1, PaLM 540B (46.2% MFU), Llama 3 405B (43/41/38% MFU), each with its
published layout. The bounds are issue #13's goal: median |MFU error| <= 10%, max <= 20%."""

import statistics

from benchmarks.accuracy_training import Run, predict
from benchmarks.accuracy_training import runs as all_runs
from rooftop.cost.efficiency import default_efficiency

#: the sources of issue #13's goal (the PyTorch FSDP sources added since are scored by --loso)
PAPERS = ("Narayanan 2021, Table 1", "Chowdhery 2022, section 4 and appendix B", "Dubey 2024, Table 4")


def runs() -> list[Run]:
    return [r for r in all_runs() if r.source in PAPERS]


def test_median_mfu_error_within_10_percent_and_every_run_within_20() -> None:
    eff = default_efficiency("training")
    errors = {r.name: abs(predict(r, eff)[0] - r.published) / r.published for r in runs()}
    assert statistics.median(errors.values()) <= 0.10
    assert max(errors.values()) <= 0.20, max(errors, key=lambda k: errors[k])


def test_each_source_within_15_percent_median() -> None:
    """No source is left behind by the others: the fit's objective (the largest per-source median)."""
    eff = default_efficiency("training")
    by_source: dict[str, list[float]] = {}
    for r in runs():
        by_source.setdefault(r.source, []).append(abs(predict(r, eff)[0] - r.published) / r.published)
    assert max(statistics.median(v) for v in by_source.values()) <= 0.15
