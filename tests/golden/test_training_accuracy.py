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


def test_the_published_runs_are_transcribed_consistently() -> None:
    """Every llm-foundry row: global batch = micro batch x accumulation x GPUs (its table's own identity); every
    NeMo row: GBS divides over DP x MBS with DP = GPUs / (TP x PP x CP); at least 5 sources and 40 runs."""
    from benchmarks.training_runs_fsdp import LLM_FOUNDRY, NEMO, TORCHTITAN

    for r in LLM_FOUNDRY:
        assert r.global_batch == r.micro_batch * r.grad_accum * r.gpus, r
    for n in NEMO:
        dp, rest = divmod(n.gpus, n.tp * n.pp * n.cp)
        assert rest == 0 and n.global_batch % (dp * n.micro_batch) == 0, n
    for t in TORCHTITAN:
        assert t.gpus == t.fsdp * t.tp, t
    every = all_runs()
    assert len(every) >= 40 and len({r.source for r in every}) >= 5


def test_the_new_sources_at_the_default_efficiency() -> None:
    """The PyTorch FSDP and NeMo sources, scored with the one fitted factor (docs: --loso leaves each out):
    llm-foundry's 30 MPT runs and NeMo's 7 FP8 runs within 11% median, bias within 10%."""
    eff = default_efficiency("training")
    by_source: dict[str, list[float]] = {}
    for r in all_runs():
        if r.source not in PAPERS and "torchtitan" not in r.source:
            by_source.setdefault(r.source, []).append((predict(r, eff)[0] - r.published) / r.published)
    assert len(by_source) == 2
    for errs in by_source.values():
        assert statistics.median(abs(e) for e in errs) <= 0.11
        assert abs(statistics.median(errs)) <= 0.10


def test_torchtitan_at_the_default_efficiency() -> None:
    """torchtitan's 6 bf16 runs (FSDP2, TP; H100 at 500 W) with their stack's terms (fp32 gradient reduction,
    the copy out of FSDP2's gather buffer, the K,V copies to every query head, the fp32 loss, the TP all-gathers
    its per-op recompute reruns): median error within 10% and signed bias within 10%."""
    eff = default_efficiency("training")
    errs = [(predict(r, eff)[0] - r.published) / r.published for r in all_runs() if "torchtitan" in r.source]
    assert len(errs) == 6
    assert statistics.median(abs(e) for e in errs) <= 0.10
    assert abs(statistics.median(errs)) <= 0.10
