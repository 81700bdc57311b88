"""Serving accuracy: rooftop's predictions against published serving measurements.

Run: ``python benchmarks/accuracy_serving.py`` (prints a table, the median relative error and the
same for the pure roofline with every efficiency 1 and no fixed costs).

Efficiency factors: the ONE default set of ``catalog/efficiency/serving.toml`` (matrix 0.60, hbm
0.85, network 0.80, vector 0.50; 10 kernels per layer at 3 us on GPUs and 1 us on TPUs; 1 ms per
step plus 2 us per sequence of the step; above 512 tokens a GPU step runs without a CUDA graph, its
kernels issued by the host at 25 us each, which counts when that outlasts the device's time). None
was fitted to these rows (the values come from the sources given in the TOML, and are the same for
every row). One parameter is fitted, named: TensorRT-LLM's ``request_s`` (catalog/efficiency/
engines.toml), the fixed time of a request's call beyond its steps, 1 ms, on the 16 first-token
rows (a grid of 0-5 ms: 25.4% median error without it, 13.1% with it); it is the first stage of
TTFT (plan/serve/ttft.py). TTFT and TPOT under load, per engine and per source, come from
benchmarks/serving_load.py (printed at the end; its own two fitted parameters per engine).

Published measurements (quoted exactly; lengths in tokens):

- TRT091: NVIDIA/TensorRT-LLM ``docs/source/performance.md`` as published for release v0.9.0
  (April 2024; "All data was generated using version 0.9.0"). Throughput rows: section "Peak
  Throughput", tables "H100 GPUs (FP8)" and "H200 GPUs (FP8)", column "Throughput (out tok/s/GPU)";
  measured with ``gptSessionBenchmark``: a static batch of ``Batch Size`` prompts of ``Input Length``,
  each generating exactly ``Output Length`` tokens, FP8 weights and activations, FP8 KV cache
  (``quant_algo = FP8``, ``kv_cache_quant_algo = FP8``). Latency rows: section "Low Latency",
  same tables, column "1st Token Latency (ms)", batch 1. "LLaMA 7B" / "LLaMA 70B" are Llama 2
  (the doc's build configs: 32 KV heads and a 32000 vocabulary for 7B).
- JSP: AI-Hypercomputer/jetstream-pytorch ``benchmarks/summary.md`` (commit f636ff7), tables
  "Llama 2 - 7B" and "Llama 2 - 13B", rows dated 2024-03-28, TPU v5e-8, cache length 2048,
  column "throughput (token/s)" (read as output tokens/s of the whole v5e-8), JetStream's
  ``benchmark_serving.py`` over ShareGPT; int8 rows quantize weights and KV cache
  (``--quantize_weights --quantize_kv_cache``). The request mix is ShareGPT's as JetStream's
  benchmark filters it: 218,743 input and 291,740 output tokens over 1000 requests, i.e. 219 and
  292 per request (AI-Hypercomputer/JetStream ``experimental/jax/README.md``, commit 770bdd7,
  "Offline Benchmarking result"); the model shards over the 8 chips (``--platform=tpu=8``).

How each row is predicted (plan/serve/phase.py, plan/serve/sweep.py, plan/serve/batching.py): one
replica of tp chips at the row's batch. TensorRT-LLM's rows are static batches (gptSessionBenchmark):
throughput = batch x gen / (prefill of the batch + gen x decode step at the mean context prompt +
gen / 2), per chip, the point the serving planner evaluates; TTFT = prefill of one prompt on an
idle replica. JetStream's rows are continuous batching (``rooftop serve --concurrency``): its
offline benchmark sends every request at once, so the decode slots (the row's batch) stay full; it
prefills one prompt per step (batch-1 prefill, inserted into a free slot) between decode steps of
every running sequence, i.e. the prefill-first scheduler with a token budget of one prompt. The
steady state of that scheduler with the slots as closed-loop clients gives the throughput.

How each engine keeps and reads the KV cache in decode (``ServingLayout`` fields, set per row from
the engine's own documentation and code, not fitted):

- JSP rows, ``static_cache_len`` = 2048 (the row's "cache length"): jetstream-pytorch as of these
  rows (commits b7ebb23, 2024-03-22, and 04f1401, 2024-04-02, either side of the 2024-03-28 runs;
  ``jetstream_pt/layers.py`` ``Attention.forward`` and the cache managers) keeps each layer's cache as one array
  cache_k[batch, heads, max_cache_length, head_dim] and runs decode attention as one einsum over the
  whole of it with an additive mask, so every decode step reads all 2048 positions of all 96 (48)
  slots whatever each request's length; and the slots are allocated at that length (96 x 2048 of
  Llama 2 7B in bf16 is 12.9 GB of the 16 GiB per chip, which is why the row stops at 96).
  Before: the model read each request's own ~511-token context, 4x too little for these rows.
- TRT091 rows of Mistral 7B and Mixtral 8x7B, ``kv_reads_per_query_head``: v0.9.0's performance.md
  says the GQA generation kernels (XQA) are "experimental and not enabled by default" and enables
  them (``export TRTLLM_ENABLE_XQA=1``) only in its Llama 2 70B and Falcon 180B recipes "where our
  tests displayed performance benefits"; the default generation kernel is the masked multi-head
  attention kernel, "the 'vanilla' implementation that uses a single CUDA thread-block per head"
  (docs/source/gpt_attention.md, "Generation Phase"), i.e. one block per query head, each reading
  its KV head's cache itself (the launch grid is {num_heads, batch_size}, query heads:
  ``mmha_launch_kernel_ex`` in cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/
  decoderMaskedMultiheadAttentionLaunch.h); XQA is what removes that ("reducing data loading", TensorRT-LLM blog
  "New XQA-kernel provides 2.4x more Llama-70B throughput", 2024-01). So Mistral / Mixtral (32 query
  heads over 8 KV heads) read their cache 4 times per step; Llama 2 7B is MHA (no change) and Llama
  2 70B runs XQA. Before: every row read each KV head once.

Where the error is left (what the rows show; nothing below is modelled, for want of a source):

- Mixtral 8x7B on TensorRT-LLM v0.9.0 is over-predicted where its MoE GEMMs run many rows (the
  2048-token TTFT 3x too fast; the throughput rows with a large prefill share or batch, +77% to
  +152%), and close where the step reads weights (128/2048, 2048/2048: -22% to +39%): the grouped
  expert GEMMs reached about a third of the dense GEMMs' efficiency. Its precision is not settled
  either: FP8 for Mixtral is listed as new in the v0.10.0 release notes ("Added FP8 quantization
  support for Mixtral"; NVIDIA/TensorRT-LLM issue #1229: not exportable with v0.9.0's quantize.py),
  yet bf16 weights cannot be read in the H100 row's 13.4 ms at 128 tokens (46.7 GB per GPU at
  tp 2 take 13.9 ms at the peak 3.35 TB/s), so the rows stay FP8 as the table says.
- Short-prompt TTFT (128 tokens) is 20-43% under: gptSessionBenchmark times a whole
  ``GptSession::generate`` call, and the excess is a constant per call (it does not scale with
  HBM bandwidth: the H100 - H200 gaps, 0.6 ms for Llama 2 7B and 1.8 ms for 70B at tp 4, equal
  the weight-read gaps), larger with tp (about 2 ms at tp 1, 8 ms at tp 4). The benchmark runs
  without ``--enable_cuda_graph`` (off unless given), but an eager host-bound step would make the
  H100 and H200 times equal, which they are not.

TPOT: none of the visible rows publishes a time per output token, so none is scored (the
throughput rows contain it, with the prefill).

Not included: small-batch time-per-output-token tables. NVIDIA NeMo's Llama 2 inference table
(H100, input 128 / output 20) gives Llama-2-13B at TP1 batch 1 a total of 86.4 ms, faster than
its 7B row (153.8 ms) and faster than reading bf16 13B weights 19 times allows (19 x 26 GB / 3.35
TB/s = 147 ms), so its precision is not what it states; no other clean published TPOT table was
found. The decode overhead terms are therefore tested by tests/unit/test_inference.py (70B at
TP 8 is 2-4x the bandwidth roofline) rather than here.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import serving_load  # beside this file

from rooftop.cost.efficiency import IDEAL, Efficiency, default_efficiency
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.model.catalog import get_model
from rooftop.model.workload import Dtypes
from rooftop.plan.serve import layout as sl
from rooftop.plan.serve import phase as inf
from rooftop.plan.serve.batching import layout_step, steady_state
from rooftop.plan.serve.paging import get_engine
from rooftop.plan.serve.sweep import ServingRequest, evaluate_point
from rooftop.plan.serve.traffic import Traffic

#: the engine of the TRT091 rows: its first-token rows add its fitted request_s (catalog/efficiency/engines.toml);
#: gptSessionBenchmark times the generate call, token ids in and out: no tokenization, detokenization or
#: streaming, and v0.9.0 has no overlap scheduler (return_steps 0)
TRT091_ENGINE = "trtllm"
#: jetstream-pytorch's cache length of the JSP rows ("cache length" column): a fixed-shape cache
JSP_CACHE_LEN = 2048
#: the TRT091 models whose recipe in performance.md enables the XQA GQA kernel (Falcon 180B too, not scored)
TRT091_XQA_MODELS = ("llama-2-70b",)
FP8 = Dtypes("fp8", "fp8", "fp8")
BF16 = Dtypes()
INT8_WEIGHTS_KV = Dtypes("int8", "bf16", "int8")


@dataclass(frozen=True)
class Row:
    source: str
    row: str
    model: str
    chip: str
    topology: str
    tp: int
    batch: int
    prompt_len: int
    gen_len: int
    dtypes: Dtypes
    metric: str  # "tokens_per_s_per_chip" or "ttft_s"
    measured: float
    continuous: bool = False  # continuous batching (JetStream), else a static batch (TensorRT-LLM)
    static_cache_len: int = 0  # decode attends over a fixed-shape cache of this length (jetstream-pytorch)
    kv_reads_per_query_head: bool = False  # decode attention without a GQA kernel (TensorRT-LLM without XQA)


def _trt(chip: str, model: str, label: str, b: int, tp: int, p: int, g: int, tput: float) -> Row:
    table = f"Peak Throughput / {chip.upper()} GPUs (FP8)"
    return Row(
        "TRT091",
        f"{table}: {label} | {b} | {tp} | {p} | {g} | {tput:,.0f}",
        model,
        chip,
        str(tp),
        tp,
        b,
        p,
        g,
        FP8,
        "tokens_per_s_per_chip",
        tput,
        kv_reads_per_query_head=model not in TRT091_XQA_MODELS,
    )


def _ttft(chip: str, model: str, label: str, tp: int, p: int, ms: float) -> Row:
    table = f"Low Latency / {chip.upper()} GPUs (FP8)"
    return Row(
        "TRT091",
        f"{table}: {label} | 1 | {tp} | {p} | {ms}",
        model,
        chip,
        str(tp),
        tp,
        1,
        p,
        1,
        FP8,
        "ttft_s",
        ms / 1e3,
    )


def _jsp(model: str, label: str, dtype: str, b: int, tput: float) -> Row:
    dt = BF16 if dtype == "bfloat16" else INT8_WEIGHTS_KV
    return Row(
        "JSP",
        f"{label}: 2024-03-28 | TPU v5e-8 | {dtype} | {b} | 2048 | 1024 | 1024 | {tput}",
        model,
        "tpu-v5e",
        "2x4",
        8,
        b,
        219,
        292,
        dt,
        "tokens_per_s_per_chip",
        tput / 8,
        continuous=True,
        static_cache_len=JSP_CACHE_LEN,
    )


ROWS: tuple[Row, ...] = (
    # H100 FP8, peak throughput (TRT-LLM v0.9.0)
    _trt("h100", "mistral-7b", "Mistral 7B", 896, 1, 128, 128, 20404),
    _trt("h100", "mistral-7b", "Mistral 7B", 120, 1, 128, 2048, 8623),
    _trt("h100", "mistral-7b", "Mistral 7B", 84, 1, 2048, 128, 2405),
    _trt("h100", "mistral-7b", "Mistral 7B", 56, 1, 2048, 2048, 3731),
    _trt("h100", "mixtral-8x7b", "Mixtral 8x7B", 512, 2, 128, 128, 5255),
    _trt("h100", "mixtral-8x7b", "Mixtral 8x7B", 128, 2, 128, 2048, 3408),
    _trt("h100", "mixtral-8x7b", "Mixtral 8x7B", 64, 2, 2048, 128, 588),
    _trt("h100", "mixtral-8x7b", "Mixtral 8x7B", 32, 2, 2048, 2048, 1317),
    _trt("h100", "llama-2-7b", "LLaMA 7B", 896, 1, 128, 128, 19854),
    _trt("h100", "llama-2-7b", "LLaMA 7B", 120, 1, 128, 2048, 6944),
    _trt("h100", "llama-2-7b", "LLaMA 7B", 84, 1, 2048, 128, 2163),
    _trt("h100", "llama-2-7b", "LLaMA 7B", 56, 1, 2048, 2048, 2826),
    _trt("h100", "llama-2-70b", "LLaMA 70B", 1024, 2, 128, 128, 3214),
    _trt("h100", "llama-2-70b", "LLaMA 70B", 512, 4, 128, 2048, 2725),
    _trt("h100", "llama-2-70b", "LLaMA 70B", 96, 2, 2048, 128, 346),
    _trt("h100", "llama-2-70b", "LLaMA 70B", 64, 2, 2048, 2048, 1011),
    # H200 FP8, peak throughput (TRT-LLM v0.9.0)
    _trt("h200", "mistral-7b", "Mistral 7B", 896, 1, 128, 128, 20460),
    _trt("h200", "mistral-7b", "Mistral 7B", 120, 1, 128, 2048, 8950),
    _trt("h200", "mistral-7b", "Mistral 7B", 64, 1, 2048, 128, 2423),
    _trt("h200", "mistral-7b", "Mistral 7B", 56, 1, 2048, 2048, 3867),
    _trt("h200", "mixtral-8x7b", "Mixtral 8x7B", 1024, 2, 128, 128, 5444),
    _trt("h200", "mixtral-8x7b", "Mixtral 8x7B", 256, 2, 128, 2048, 4973),
    _trt("h200", "mixtral-8x7b", "Mixtral 8x7B", 64, 2, 2048, 128, 605),
    _trt("h200", "mixtral-8x7b", "Mixtral 8x7B", 64, 2, 2048, 2048, 1821),
    _trt("h200", "llama-2-7b", "LLaMA 7B", 896, 1, 128, 128, 20618),
    _trt("h200", "llama-2-7b", "LLaMA 7B", 120, 1, 128, 2048, 8348),
    _trt("h200", "llama-2-7b", "LLaMA 7B", 64, 1, 2048, 128, 2391),
    _trt("h200", "llama-2-7b", "LLaMA 7B", 56, 1, 2048, 2048, 3522),
    _trt("h200", "llama-2-70b", "LLaMA 70B", 1024, 1, 128, 128, 3989),
    _trt("h200", "llama-2-70b", "LLaMA 70B", 512, 2, 128, 2048, 3963),
    _trt("h200", "llama-2-70b", "LLaMA 70B", 64, 1, 2048, 128, 418),
    _trt("h200", "llama-2-70b", "LLaMA 70B", 64, 1, 2048, 2048, 1458),
    # first-token latency, batch 1 (TRT-LLM v0.9.0)
    _ttft("h100", "mistral-7b", "Mistral 7B", 1, 128, 6.5),
    _ttft("h100", "mistral-7b", "Mistral 7B", 1, 2048, 32.4),
    _ttft("h100", "mixtral-8x7b", "Mixtral 8x7B", 2, 128, 13.4),
    _ttft("h100", "mixtral-8x7b", "Mixtral 8x7B", 2, 2048, 89.5),
    _ttft("h100", "llama-2-7b", "LLaMA 7B", 1, 128, 6.3),
    _ttft("h100", "llama-2-7b", "LLaMA 7B", 1, 2048, 30.8),
    _ttft("h100", "llama-2-70b", "LLaMA 70B", 4, 128, 19.6),
    _ttft("h100", "llama-2-70b", "LLaMA 70B", 8, 2048, 85.1),
    _ttft("h200", "mistral-7b", "Mistral 7B", 1, 128, 5.9),
    _ttft("h200", "mistral-7b", "Mistral 7B", 1, 2048, 31.7),
    _ttft("h200", "mixtral-8x7b", "Mixtral 8x7B", 2, 128, 12.1),
    _ttft("h200", "mixtral-8x7b", "Mixtral 8x7B", 2, 2048, 87.7),
    _ttft("h200", "llama-2-7b", "LLaMA 7B", 1, 128, 5.7),
    _ttft("h200", "llama-2-7b", "LLaMA 7B", 1, 2048, 30.2),
    _ttft("h200", "llama-2-70b", "LLaMA 70B", 4, 128, 17.8),
    _ttft("h200", "llama-2-70b", "LLaMA 70B", 4, 2048, 103.0),
    # TPU v5e-8, JetStream (PyTorch engine), ShareGPT mix
    _jsp("llama-2-7b", "Llama 2 - 7B", "bfloat16", 96, 3663),
    _jsp("llama-2-7b", "Llama 2 - 7B", "int8", 96, 4783),
    _jsp("llama-2-13b", "Llama 2 - 13B", "bfloat16", 48, 2056),
    _jsp("llama-2-13b", "Llama 2 - 13B", "int8", 96, 3458),
)


def predict(row: Row, eff: Efficiency | None = None) -> tuple[float, bool]:
    """(predicted value of ``row.metric``, whether the batch fits in memory)."""
    chip = get_chip(row.chip)
    topology = parse_topology(chip, row.topology)
    req = ServingRequest(
        get_model(row.model), chip, topology, row.prompt_len, row.gen_len, row.dtypes, batch=row.batch, efficiency=eff
    )
    layout = sl.ServingLayout(
        tp=row.tp, static_cache_len=row.static_cache_len, kv_reads_per_query_head=row.kv_reads_per_query_head
    )
    mesh = make_mesh(topology, layout.mesh_axes())
    if row.continuous:
        t = Traffic(
            row.prompt_len, row.gen_len, concurrency=row.batch, scheduler="prefill-first", token_budget=row.prompt_len
        )
        fit = sl.max_batch(req.cfg, chip, layout, req.max_context_len, row.dtypes, req.eff)
        state = steady_state(layout_step(req.cfg, chip, mesh, layout, row.dtypes, req.eff, t, row.batch), t, row.batch)
        assert state.tokens_per_s is not None  # a closed loop is never saturated
        return state.tokens_per_s / layout.chips, fit >= row.batch
    ttft = inf.prefill(req.cfg, chip, mesh, layout, 1, row.prompt_len, row.dtypes, req.eff)
    point = evaluate_point(req, layout, mesh, row.batch, ttft)
    if row.metric == "ttft_s" and eff is not IDEAL:  # the call's stage before its steps (plan/serve/ttft.py)
        return point.ttft_s + get_engine(TRT091_ENGINE).request_s, point.fits
    return float(getattr(point, row.metric)), point.fits


def step_bound(row: Row) -> str:
    """What dominates the priced step of ``row`` (PhaseTime.bound): the prompt's prefill for a
    first-token row; else the decode step at the row's batch and mean context, with the prefill's
    share of the static batch's time (JetStream: one prompt per slot refill)."""
    chip = get_chip(row.chip)
    topology = parse_topology(chip, row.topology)
    eff = default_efficiency("serving", chip.kind)
    cfg = get_model(row.model)
    layout = sl.ServingLayout(
        tp=row.tp, static_cache_len=row.static_cache_len, kv_reads_per_query_head=row.kv_reads_per_query_head
    )
    mesh = make_mesh(topology, layout.mesh_axes())
    prompts = 1 if row.continuous or row.metric == "ttft_s" else row.batch
    pre = inf.prefill(cfg, chip, mesh, layout, prompts, row.prompt_len, row.dtypes, eff)
    if row.metric == "ttft_s":
        return f"prefill {pre.bound}"
    context = row.prompt_len + (row.gen_len + 1) // 2
    dec = inf.decode_step(cfg, chip, mesh, layout, row.batch, context, row.dtypes, eff)
    pre_s = pre.time_s * (row.batch if row.continuous else 1)
    return f"decode {dec.bound}, prefill {pre_s / (pre_s + row.gen_len * dec.time_s):.0%}"


def _fmt(metric: str, v: float) -> str:
    return f"{v * 1e3:.1f} ms" if metric == "ttft_s" else f"{v:,.0f} tok/s/chip"


def _groups(by_group: dict[tuple[str, str, str], list[float]]) -> dict[tuple[str, str, str], list[float]]:
    """|errors| by source and metric (model ""), and of Llama-2-70B alone (the issue's table)."""
    out: dict[tuple[str, str, str], list[float]] = {}
    for (source, metric, model), errs in by_group.items():
        out.setdefault((source, metric, ""), []).extend(errs)
        if model == "llama-2-70b":
            out[(source, metric, model)] = errs
    return out


def main() -> int:
    header = (
        f"{'#':>2} {'src':6} {'model':13} {'chip':7} {'tp':>2} {'batch':>5} {'P/G':>10} {'dtype':5} "
        f"{'predicted':>17} {'measured':>17} {'error':>7} {'ideal err':>9}  step: bound, prefill share"
    )
    print(header)
    print("-" * len(header))
    errors: dict[str, list[float]] = {"tokens_per_s_per_chip": [], "ttft_s": []}
    ideal_errors: list[float] = []
    by_group: dict[tuple[str, str, str], list[float]] = {}
    for i, row in enumerate(ROWS):
        pred, fits = predict(row)
        ideal, _ = predict(row, IDEAL)
        err = pred / row.measured - 1
        ierr = ideal / row.measured - 1
        errors[row.metric].append(abs(err))
        by_group.setdefault((row.source, row.metric, row.model), []).append(abs(err))
        ideal_errors.append(abs(ierr))
        flag = "" if fits else " (does not fit)"
        print(
            f"{i:2d} {row.source:6} {row.model:13} {row.chip:7} {row.tp:2d} {row.batch:5d} "
            f"{f'{row.prompt_len}/{row.gen_len}':>10} {row.dtypes.weights:5} {_fmt(row.metric, pred):>17} "
            f"{_fmt(row.metric, row.measured):>17} {err:+7.1%} {ierr:+9.1%}  {step_bound(row)}{flag}"
        )
    every = errors["tokens_per_s_per_chip"] + errors["ttft_s"]
    print()
    print("sources:")
    for row in ROWS:
        print(f"  {row.source}: {row.row}")
    print()
    print(f"median |error|, all {len(every)} rows:          {statistics.median(every):.1%}")
    print(
        f"median |error|, throughput ({len(errors['tokens_per_s_per_chip'])} rows):   "
        f"{statistics.median(errors['tokens_per_s_per_chip']):.1%}"
    )
    print(f"median |error|, first-token latency ({len(errors['ttft_s'])}): {statistics.median(errors['ttft_s']):.1%}")
    for (source, metric, model), errs in sorted(_groups(by_group).items()):
        print(f"  {source} {metric} {model or 'all models'} ({len(errs)} rows): {statistics.median(errs):.1%}")
    print(
        f"median |error| of the pure roofline (every efficiency 1, no fixed costs): "
        f"{statistics.median(ideal_errors):.1%}"
    )
    print(
        "parameters fitted: trtllm request_s on the TRT091 first-token rows; the rest of "
        "catalog/efficiency/serving.toml is one unfitted set for every row"
    )
    print()
    print("under load (benchmarks/serving_load.py: TTFT and TPOT per engine and per source):")
    for line in serving_load.report():
        print(f"  {line}")
    print(
        "  parameters fitted: sglang and vllm step_s and step_per_seq_s (catalog/efficiency/engines.toml); "
        "none on NIM18 (trtllm's step times unfitted)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
