"""The planner against published runs (benchmarks/accuracy_training.py; sources cited there):
Megatron-LM 2021 Table 1, PaLM 540B (46.2% MFU), Llama 3 405B (43/41/38% MFU)."""

import statistics

from benchmarks.accuracy_training import predict, runs
from rooftop.cost.efficiency import default_efficiency


def test_median_mfu_error_under_15_percent() -> None:
    eff = default_efficiency("training")
    errors = [abs(predict(r, eff)[0] - r.published) / r.published for r in runs()]
    assert statistics.median(errors) < 0.15
    assert max(errors) < 0.3


def test_palm_and_llama3_within_15_percent() -> None:
    eff = default_efficiency("training")
    for run in runs():
        if "Megatron" not in run.name:
            pred, _ = predict(run, eff)
            assert abs(pred - run.published) / run.published < 0.15, run.name
