"""TTFT and TPOT under load: rooftop's continuous batching (plan/serve/batching.py, the engine's KV
pool, scheduler and TTFT stages) against published serving benchmarks with a Poisson load, per
engine and per source, with a leave-one-source-out median. ``benchmarks/accuracy_serving.py``
prints it; ``python benchmarks/serving_load.py --fit`` refits the engines' two per-step host
times on the visible rows (the values it prints go into catalog/efficiency/engines.toml).

Visible rows: ``SGL030`` (benchmarks/results/serving-sglang030-vllm060/: SGLang v0.3.0 and vLLM
v0.6.0, Llama 3.1 8B on an A100 and 70B on 4 H100, 4 and 8 requests/s, ShareGPT). Each row runs
its engine as the source ran it:

- SGLang v0.3.0: chunked prefill (8192 tokens a step, SGLang's chunked_prefill_size), no overlap
  scheduler (it came with v0.4, lmsys.org blog 2024-12-04), so a token is returned by its own step;
- vLLM v0.6.0 with ``--num-scheduler-steps 10`` (multi-step: a new request waits for the block of
  10 decode steps under way) and no chunked prefill (its default below 32K of context, so whole
  prompts first, max(max_model_len, 2048) = 4096 tokens a step).

Fitted parameters, two per engine, named: ``step_s`` and ``step_per_seq_s`` (the host's time per
step, fixed and per running sequence) of sglang and vllm, on these rows (grid search, the median
over the engine's rows of the mean of |TTFT error| and |TPOT error|); trtllm's ``request_s`` on
TRT091's first-token rows (accuracy_serving.py). With one visible source per engine, the
leave-one-source-out figures use the unfitted defaults (catalog/efficiency/serving.toml).
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rooftop.cost.efficiency import default_efficiency
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, topology_for_chips
from rooftop.model.catalog import get_model
from rooftop.model.config import Dtypes
from rooftop.plan.serve.batching import layout_step, steady_state
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.paging import Engine, get_engine, kv_pool
from rooftop.plan.serve.scheduler import Traffic

RESULTS = Path(__file__).resolve().parent / "results"
#: mean ShareGPT lengths (results/serving-sglang030-vllm060/README.md says where each comes from)
SHAREGPT_PROMPT, SHAREGPT_GEN = 219, 194
#: how each source ran its engines: (scheduler, token budget, engine changes)
SETTINGS = {
    ("SGL030", "sglang"): ("chunked", 8192, {"return_steps": 0}),
    ("SGL030", "vllm"): ("prefill-first", 4096, {"scheduler_steps": 10}),
}


@dataclass(frozen=True)
class LoadRow:
    source: str
    model: str
    chip: str
    chips: int
    tp: int
    engine: str
    requests_per_s: float
    ttft_s: float
    tpot_s: float


def load_rows() -> list[LoadRow]:
    rows = []
    with open(RESULTS / "serving-sglang030-vllm060" / "rows.csv", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            rows.append(
                LoadRow(
                    "SGL030",
                    r["model"],
                    r["chip"],
                    int(r["chips"]),
                    int(r["tp"]),
                    r["engine"],
                    float(r["requests_per_s"]),
                    float(r["median_ttft_ms"]) / 1e3,
                    float(r["median_tpot_ms"]) / 1e3,
                )
            )
    return rows


def engine_of(row: LoadRow, fitted: bool = True) -> Engine:
    """The row's engine as its source ran it; ``fitted=False``: without the fitted step times."""
    e = dataclasses.replace(get_engine(row.engine), **SETTINGS[(row.source, row.engine)][2])
    return e if fitted else dataclasses.replace(e, step_s=None, step_per_seq_s=None)


def predict(row: LoadRow, engine: Engine) -> tuple[float, float]:
    """(TTFT, TPOT) of ``row`` under its load, one replica of tp chips."""
    chip, cfg = get_chip(row.chip), get_model(row.model)
    eff = default_efficiency("serving", chip.kind)
    eff = eff.replace(**{k: v for k, v in (("step_s", engine.step_s), ("step_per_seq_s", engine.step_per_seq_s)) if v})
    scheduler, budget, _ = SETTINGS[(row.source, row.engine)]
    t = Traffic(SHAREGPT_PROMPT, SHAREGPT_GEN, requests_per_s=row.requests_per_s, scheduler=scheduler,
                token_budget=budget)  # fmt: skip
    layout = ServingLayout(tp=row.tp)
    mesh = make_mesh(topology_for_chips(chip, row.chips), layout.mesh_axes())
    pool = kv_pool(cfg, chip, layout, Dtypes(), max(budget, t.prompt_len), engine, eff.usable_hbm_fraction)
    step = layout_step(cfg, chip, mesh, layout, Dtypes(), eff, t, 1024)
    s = steady_state(step, t, 1024, 1, pool, chip.host_bytes_per_s, engine)
    assert s.ttft_s is not None and s.tpot_s is not None, s.reason
    return s.ttft_s, s.tpot_s


def errors(rows: list[LoadRow], fitted: bool = True) -> list[tuple[LoadRow, float, float, float, float]]:
    """(row, predicted TTFT, predicted TPOT, TTFT error, TPOT error) of each row."""
    out = []
    for r in rows:
        ttft, tpot = predict(r, engine_of(r, fitted))
        out.append((r, ttft, tpot, ttft / r.ttft_s - 1, tpot / r.tpot_s - 1))
    return out


def report() -> list[str]:
    """The table and the medians: per engine, per source, leave one source out."""
    rows = load_rows()
    scored = errors(rows)
    lines = [
        f"{'src':6} {'engine':6} {'model':13} {'chips':>9} {'req/s':>5} {'TTFT pred/meas':>17} {'TPOT pred/meas':>17}"
    ]
    for r, ttft, tpot, et, ep in scored:
        lines.append(
            f"{r.source:6} {r.engine:6} {r.model:13} {f'{r.chips} x {r.chip}':>9} {r.requests_per_s:5g} "
            f"{ttft * 1e3:6.1f}/{r.ttft_s * 1e3:5.1f} {et:+5.0%} {tpot * 1e3:6.2f}/{r.tpot_s * 1e3:5.2f} {ep:+5.0%}"
        )
    for key in ("engine", "source"):
        for value in sorted({getattr(r, key) for r in rows}):
            sel = [s for s in scored if getattr(s[0], key) == value]
            lines.append(
                f"median |error| under load, {key} {value} ({len(sel)} rows): TTFT "
                f"{statistics.median(abs(s[3]) for s in sel):.1%}, TPOT {statistics.median(abs(s[4]) for s in sel):.1%}"
            )
    loso = errors(rows, fitted=False)  # each engine's fit uses only this source: left out, the defaults
    lines.append(
        f"median |error| under load, leave one source out ({len(loso)} rows, unfitted defaults): TTFT "
        f"{statistics.median(abs(s[3]) for s in loso):.1%}, TPOT {statistics.median(abs(s[4]) for s in loso):.1%}"
    )
    return lines


def fit(engine: str) -> tuple[float, float, float]:
    """Grid search of (step_s, step_per_seq_s) for ``engine`` on its visible rows: the pair with the
    least median of (|TTFT error| + |TPOT error|) / 2, and that median."""
    rows = [r for r in load_rows() if r.engine == engine]
    best = (0.0, 0.0, float("inf"))
    for step_s, per_seq in itertools.product(
        (0.5e-3, 1e-3, 2e-3, 3e-3, 4e-3, 6e-3), (2e-6, 2e-5, 5e-5, 1e-4, 2e-4, 3e-4)
    ):
        errs = []
        for r in rows:
            e = dataclasses.replace(engine_of(r, False), step_s=step_s, step_per_seq_s=per_seq)
            ttft, tpot = predict(r, e)
            errs.append((abs(ttft / r.ttft_s - 1) + abs(tpot / r.tpot_s - 1)) / 2)
        score = statistics.median(errs)
        if score < best[2]:
            best = (step_s, per_seq, score)
    return best


def main() -> int:
    if "--fit" in sys.argv:
        for engine in ("sglang", "vllm"):
            step_s, per_seq, score = fit(engine)
            print(f"{engine}: step_s = {step_s:g}, step_per_seq_s = {per_seq:g} (median error {score:.1%})")
        return 0
    print("\n".join(report()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
