"""TTFT and TPOT under load: rooftop's continuous batching (plan/serve/batching.py, the engine's KV
pool, scheduler and TTFT stages) against published serving benchmarks under a Poisson load or a
closed loop of clients, per engine and per source, fitted and leave-one-source-out, each with its
median |error| and median signed error (bias). ``benchmarks/accuracy_serving.py`` prints it;
``python benchmarks/serving_load.py --fit`` refits the engines' two per-step host times on the
visible rows (the values it prints go into catalog/efficiency/engines.toml).

Visible sources (benchmarks/results/<dir>/README.md lists every stated setting and what is assumed):

- ``SGL030`` (serving-sglang030-vllm060/): SGLang v0.3.0 and vLLM v0.6.0, Llama 3.1 8B on an A100
  and 70B on 4 H100, 4 and 8 requests/s, ShareGPT, medians. SGLang v0.3.0: chunked prefill (8192
  tokens a step), no overlap scheduler (it came with v0.4, lmsys.org blog 2024-12-04), so a token is
  returned by its own step; vLLM v0.6.0 with ``--num-scheduler-steps 10`` (multi-step: a new
  request waits for the block of 10 decode steps under way) and no chunked prefill (its default
  below 32K of context: whole prompts first, max(max_model_len, 2048) = 4096 tokens a step).
- ``NIM18`` (serving-nim-llama33-70b/): NVIDIA NIM 1.8.0 (TensorRT-LLM engines), Llama 3.3 70B in
  fp8 on 2 H100 at tp 2, closed loops of 1 to 250 clients, 5000/500 and 500/2000 tokens, means.
- ``VLLMKV8`` (serving-vllm-fp8kv-h100/): vLLM v0.19.1, Llama 3.1 8B on one H100, 8 clients of
  ~20k/~2k tokens, BF16 and FP8 KV cache; median TTFT, and the mean TPOT the stated throughput
  implies.
- ``SGLH200`` (serving-sglang-h200-llama33-70b/): SGLang v0.4.1, Llama 3.3 70B in bf16 on 4 H200,
  1 to 8 requests/s of random (up to 1024/1024) and ShareGPT prompts; the runs' mean lengths,
  median TTFT and the mean TPOT their mean E2E implies; runs the server did not keep up with
  (completed below 90% of the offered rate) are left out.

Fitted parameters, two per engine at most, named: ``step_s`` and ``step_per_seq_s`` (the host's
time per step, fixed and per running sequence) of sglang and vllm (grid search, the least median
over the engine's rows of the mean of |TTFT error| and |TPOT error|); trtllm's ``request_s`` on
TRT091's first-token rows (accuracy_serving.py), none here: NIM18 is scored with trtllm's unfitted
step times. Leave one source out: each source's rows with each engine's pair fitted on the other
sources' rows, or the unfitted defaults (catalog/efficiency/serving.toml) where the engine has no
row elsewhere (trtllm).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
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
from rooftop.model.workload import Dtypes
from rooftop.plan.serve.batching import layout_step, steady_state
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.paging import Engine, get_engine, kv_pool
from rooftop.plan.serve.traffic import Traffic

RESULTS = Path(__file__).resolve().parent / "results"
#: mean ShareGPT lengths (results/serving-sglang030-vllm060/README.md says where each comes from)
SHAREGPT_PROMPT, SHAREGPT_GEN = 219, 194
#: bf16 weights, activations and KV cache (no quantization flag)
BF16 = Dtypes()
#: how each source ran its engines: (scheduler, token budget, engine changes)
SETTINGS = {
    ("SGL030", "sglang"): ("chunked", 8192, {"return_steps": 0}),
    ("SGL030", "vllm"): ("prefill-first", 4096, {"scheduler_steps": 10}),
    # TensorRT-LLM's in-flight batching puts context and generation requests in one step up to
    # max_num_tokens (8192 by default); the TensorRT engine's C++ executor has no overlap scheduler
    # (that is the PyTorch backend's), so a token is returned by its own step
    ("NIM18", "trtllm"): ("chunked", 8192, {"return_steps": 0}),
    # vLLM V1 (v0.19.1): chunked prefill, 8192 tokens a step on a GPU of at least 70 GiB
    ("VLLMKV8", "vllm"): ("chunked", 8192, {}),
    # SGLang v0.4.1: chunked prefill of 8192 tokens, the overlap scheduler on (the catalog's engine)
    ("SGLH200", "sglang"): ("chunked", 8192, {}),
}
#: a Poisson run is scored only where the server kept up with it: completed / duration at least
#: this fraction of the offered rate (else the queue grew all run long and the figures depend on
#: the run's length, not on the rate)
KEPT_UP = 0.9
#: a source's model name -> rooftop's, where the architecture is the same (README of the source)
MODEL_OF = {"llama-3.3-70b-instruct": "llama-3.1-70b"}
#: the fitted parameters of each engine (catalog/efficiency/engines.toml); trtllm's request_s is
#: fitted on TRT091's first-token rows (accuracy_serving.py), not here
FITTED = {"sglang": ("step_s", "step_per_seq_s"), "vllm": ("step_s", "step_per_seq_s"), "trtllm": ()}
#: the grid of fit(): step_s x step_per_seq_s
GRID = ((0.5e-3, 1e-3, 2e-3, 3e-3, 4e-3, 6e-3), (2e-6, 2e-5, 5e-5, 1e-4, 2e-4, 3e-4))


@dataclass(frozen=True)
class LoadRow:
    source: str
    model: str
    chip: str
    chips: int
    tp: int
    engine: str
    requests_per_s: float | None  # a Poisson load, or
    concurrency: int | None  # a closed loop of this many clients
    ttft_s: float
    tpot_s: float
    prompt_len: int = SHAREGPT_PROMPT
    gen_len: int = SHAREGPT_GEN
    dtypes: Dtypes = BF16
    statistic: str = "median"  # of the measured figures over the requests: "median" or "mean"

    @property
    def load(self) -> str:
        return f"{self.requests_per_s:g}/s" if self.requests_per_s else f"c={self.concurrency}"


def _sgl030() -> list[LoadRow]:
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
                    None,
                    float(r["median_ttft_ms"]) / 1e3,
                    float(r["median_tpot_ms"]) / 1e3,
                )
            )
    return rows


def _nim18() -> list[LoadRow]:
    """NIM 1.8.0's Llama 3.3 70B table (results/serving-nim-llama33-70b/README.md): "fp8" read as
    fp8 weights, activations and KV cache (the KV dtype is not stated); AIPerf's ITL is a request's
    (latency - TTFT) / (output tokens - 1), i.e. TPOT; both are means over the requests."""
    rows = []
    with open(RESULTS / "serving-nim-llama33-70b" / "rows.csv", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            dt = r["precision"]
            rows.append(
                LoadRow(
                    "NIM18",
                    MODEL_OF.get(r["model"], r["model"]),
                    r["chip"],
                    int(r["chips"]),
                    int(r["tp"]),
                    "trtllm",
                    None,
                    int(r["concurrency"]),
                    float(r["mean_ttft_ms"]) / 1e3,
                    float(r["mean_itl_ms"]) / 1e3,
                    int(r["prompt_len"]),
                    int(r["gen_len"]),
                    Dtypes(dt, dt, dt),
                    "mean",
                )
            )
    return rows


def _vllmkv8() -> list[LoadRow]:
    """The vLLM blog's FP8 KV cache rows (results/serving-vllm-fp8kv-h100/README.md): bf16 weights
    and activations, the KV cache as the row says; TPOT the mean that the stated throughput implies
    with 8 requests always in flight (Little's law), TTFT the stated median."""
    rows = []
    with open(RESULTS / "serving-vllm-fp8kv-h100" / "rows.csv", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            c, g, ttft = int(r["concurrency"]), int(r["gen_len"]), float(r["median_ttft_ms"]) / 1e3
            tpot = (c * g / float(r["output_tokens_per_s"]) - ttft) / (g - 1)
            rows.append(
                LoadRow(
                    "VLLMKV8",
                    r["model"],
                    r["chip"],
                    int(r["chips"]),
                    int(r["tp"]),
                    "vllm",
                    None,
                    c,
                    ttft,
                    tpot,
                    int(r["prompt_len"]),
                    g,
                    Dtypes("bf16", "bf16", r["kv_cache"]),
                    "median",
                )
            )
    return rows


def _sglh200() -> list[LoadRow]:
    """SGLang's bench_serving records of Llama 3.3 70B on 4 H200 (results/serving-sglang-h200-
    llama33-70b/README.md): the mean lengths of each run (total tokens / completed), the median
    TTFT, and the mean TPOT of the run, (mean E2E - median TTFT) / (mean output tokens - 1); the
    runs the server did not keep up with are left out (KEPT_UP)."""
    rows = []
    with open(RESULTS / "serving-sglang-h200-llama33-70b" / "rows.csv", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            n, rate = int(r["completed"]), float(r["request_rate"])
            if n / float(r["duration"]) < KEPT_UP * rate:
                continue
            prompt, gen = float(r["total_input_tokens"]) / n, float(r["total_output_tokens"]) / n
            ttft = float(r["median_ttft_ms"]) / 1e3
            tpot = (float(r["mean_e2e_latency_ms"]) / 1e3 - ttft) / (gen - 1)
            rows.append(
                LoadRow(
                    "SGLH200",
                    MODEL_OF.get(r["model"], r["model"]),
                    r["chip"],
                    int(r["chips"]),
                    int(r["tp"]),
                    "sglang",
                    rate,
                    None,
                    ttft,
                    tpot,
                    round(prompt),
                    round(gen),
                )
            )
    return rows


def load_rows() -> list[LoadRow]:
    return _sgl030() + _nim18() + _vllmkv8() + _sglh200()


def engine_of(row: LoadRow, params: dict[str, float] | None = None) -> Engine:
    """The row's engine as its source ran it, with ``params`` (fitted values by name) in place of
    the catalog's fitted ones; ``params={}``: without any fitted step times (the defaults of
    catalog/efficiency/serving.toml)."""
    e = dataclasses.replace(get_engine(row.engine), **SETTINGS[(row.source, row.engine)][2])
    if params is None:
        return e
    base = {name: None for name in FITTED[row.engine]}
    return dataclasses.replace(e, **{**base, **params})


@functools.lru_cache(maxsize=4096)
def predict(row: LoadRow, engine: Engine) -> tuple[float, float]:
    """(TTFT, TPOT) of ``row`` under its load, one replica of tp chips."""
    chip, cfg = get_chip(row.chip), get_model(row.model)
    eff = default_efficiency("serving", chip.kind)
    eff = eff.replace(**{k: v for k, v in (("step_s", engine.step_s), ("step_per_seq_s", engine.step_per_seq_s)) if v})
    scheduler, budget, _ = SETTINGS[(row.source, row.engine)]
    t = Traffic(row.prompt_len, row.gen_len, requests_per_s=row.requests_per_s, concurrency=row.concurrency,
                scheduler=scheduler, token_budget=budget)  # fmt: skip
    layout = ServingLayout(tp=row.tp)
    mesh = make_mesh(topology_for_chips(chip, row.chips), layout.mesh_axes())
    pool = kv_pool(cfg, chip, layout, row.dtypes, max(budget, t.prompt_len), engine, eff.usable_hbm_fraction)
    step = layout_step(cfg, chip, mesh, layout, row.dtypes, eff, t, 1024)
    s = steady_state(step, t, 1024, 1, pool, chip.host_bytes_per_s, engine)
    assert s.ttft_s is not None and s.tpot_s is not None, s.reason
    return s.ttft_s, s.tpot_s


Scored = tuple[LoadRow, float, float, float, float]


def errors(rows: list[LoadRow], params: dict[str, dict[str, float]] | None = None) -> list[Scored]:
    """(row, predicted TTFT, predicted TPOT, TTFT error, TPOT error) of each row; ``params``: the
    fitted values per engine to use instead of the catalog's (an engine left out: its defaults)."""
    out = []
    for r in rows:
        ttft, tpot = predict(r, engine_of(r, None if params is None else params.get(r.engine, {})))
        out.append((r, ttft, tpot, ttft / r.ttft_s - 1, tpot / r.tpot_s - 1))
    return out


def _summary(label: str, sel: list[Scored]) -> str:
    """Median |error| and median signed error (bias) of TTFT and TPOT over ``sel``."""
    med = statistics.median
    return (
        f"{label} ({len(sel)} rows): TTFT {med(abs(s[3]) for s in sel):.1%} (bias {med(s[3] for s in sel):+.1%}), "
        f"TPOT {med(abs(s[4]) for s in sel):.1%} (bias {med(s[4] for s in sel):+.1%})"
    )


def leave_one_source_out(rows: list[LoadRow]) -> list[Scored]:
    """Each source's rows predicted with each engine's parameters fitted on the OTHER sources' rows
    (an engine with no row elsewhere: its unfitted defaults)."""
    out: list[Scored] = []
    for source in sorted({r.source for r in rows}):
        rest = [r for r in rows if r.source != source]
        held = [r for r in rows if r.source == source]
        params = {}
        for engine in {r.engine for r in held}:
            train = [r for r in rest if r.engine == engine]
            if train and FITTED[engine]:
                step_s, per_seq, _ = fit(engine, train)
                params[engine] = {"step_s": step_s, "step_per_seq_s": per_seq}
        out.extend(errors(held, params))
    return out


def report() -> list[str]:
    """The table and the medians: per engine, per source, leave one source out."""
    rows = load_rows()
    scored = errors(rows)
    lines = [
        f"{'src':6} {'engine':6} {'model':13} {'chips':>9} {'load':>6} {'stat':6} {'TTFT pred/meas ms':>24} "
        f"{'TPOT pred/meas ms':>21}"
    ]
    for r, ttft, tpot, et, ep in scored:
        lines.append(
            f"{r.source:6} {r.engine:6} {r.model:13} {f'{r.chips} x {r.chip}':>9} {r.load:>6} {r.statistic:6} "
            f"{ttft * 1e3:8.1f}/{r.ttft_s * 1e3:8.1f} {et:+6.0%} {tpot * 1e3:6.2f}/{r.tpot_s * 1e3:6.2f} {ep:+6.0%}"
        )
    for key in ("engine", "source"):
        for value in sorted({getattr(r, key) for r in rows}):
            lines.append(_summary(f"fitted, {key} {value}", [s for s in scored if getattr(s[0], key) == value]))
    lines.append(_summary("fitted, all", scored))
    loso = leave_one_source_out(rows)
    for key in ("engine", "source"):
        for value in sorted({getattr(r, key) for r in rows}):
            sel = [s for s in loso if getattr(s[0], key) == value]
            lines.append(_summary(f"leave one source out, {key} {value}", sel))
    lines.append(_summary("leave one source out, all", loso))
    return lines


def fit(engine: str, rows: list[LoadRow] | None = None) -> tuple[float, float, float]:
    """Grid search of (step_s, step_per_seq_s) for ``engine`` on ``rows`` (default: its visible
    rows): the pair with the least median of (|TTFT error| + |TPOT error|) / 2, and that median."""
    best = (0.0, 0.0, float("inf"))
    for step_s, per_seq in itertools.product(*GRID):
        score = score_of(engine, step_s, per_seq, rows)
        if score < best[2]:
            best = (step_s, per_seq, score)
    return best


def score_of(engine: str, step_s: float, per_seq: float, rows: list[LoadRow] | None = None) -> float:
    """The fit's objective: the median over ``engine``'s rows of (|TTFT error| + |TPOT error|) / 2."""
    rows = [r for r in (rows if rows is not None else load_rows()) if r.engine == engine]
    errs = []
    for r in rows:
        ttft, tpot = predict(r, engine_of(r, {"step_s": step_s, "step_per_seq_s": per_seq}))
        errs.append((abs(ttft / r.ttft_s - 1) + abs(tpot / r.tpot_s - 1)) / 2)
    return statistics.median(errs)


def main() -> int:
    if "--fit" in sys.argv:
        for engine in ("sglang", "vllm"):
            step_s, per_seq, score = fit(engine)
            e = get_engine(engine)
            now = score_of(engine, e.step_s or 0.0, e.step_per_seq_s or 0.0)
            print(
                f"{engine}: step_s = {step_s:g}, step_per_seq_s = {per_seq:g} (median error {score:.1%}); "
                f"the catalog's {e.step_s:g}, {e.step_per_seq_s:g}: {now:.1%}"
            )
        return 0
    print("\n".join(report()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
