"""``rooftop serve MODEL --chip C (--chips N | --topology T) [--prompt-len P] [--gen-len G]``: serving
layouts and batch sizes on the latency/throughput frontier, the choice under latency targets,
the cost of tokens and (with ``--requests-per-s``) disaggregated prefill/decode pools."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rooftop.cli.common import (
    JOB_DEFAULT,
    MAX_TOKENS,
    Output,
    add_algorithm,
    add_common,
    add_price,
    algorithm_from,
    chip_from_args,
    count,
)
from rooftop.cli.emit import SERVE_KINDS, add_emit, serve_choice, serve_text, with_emit
from rooftop.errors import InvalidConfigError, shown
from rooftop.units import parse_duration, parse_number

if TYPE_CHECKING:
    from rooftop.plan.serve.sweep import ServingRequest

WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4", "fp4")
KV_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4", "fp4")
ACT_DTYPES = ("bf16", "fp16", "fp8", "int8", "fp4")
SCHEDULERS = ("chunked", "prefill-first")  # plan.serve.traffic.SCHEDULERS (a test checks)
DEFAULT_TOKEN_BUDGET = 8192  # plan.serve.traffic.DEFAULT_TOKEN_BUDGET (a test checks)
#: request lengths when --prompt-len / --gen-len are not given: the defaults of vLLM's serving benchmark
#: (``vllm bench serve --dataset-name random``: RandomDataset.DEFAULT_INPUT_LEN = 1024, DEFAULT_OUTPUT_LEN = 128)
DEFAULT_PROMPT_LEN, DEFAULT_GEN_LEN = 1024, 128
MAX_CHIPS = 1 << 24  # hardware.chip.MAX_CHIPS (a test checks); importing it would slow down --help


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="serving frontier: layouts x batch sizes, latency targets, cost, disaggregation")
    p.add_argument("model", metavar="MODEL", help="catalog model, a catalog-schema .toml or a Hugging Face config.json")
    add_common(p)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--chips", metavar="N", help="number of chips (default slice shape for the chip)")
    where.add_argument("--topology", metavar="T", help="slice shape, e.g. 4x4 (TPU) or 2x8 (GPU nodes x GPUs)")
    p.add_argument(
        "--prompt-len",
        metavar="P",
        help=f"prompt tokens per request, e.g. 2048 or 2Ki (k = 1000, Ki = 1024; default {DEFAULT_PROMPT_LEN}, as "
        "vLLM's serving benchmark)",
    )
    p.add_argument(
        "--gen-len",
        metavar="G",
        help=f"generated tokens per request (default {DEFAULT_GEN_LEN}, as vLLM's serving benchmark)",
    )
    p.add_argument("--batch", metavar="B", help="evaluate only this batch per replica (default: sweep 1, 2, 4, ...)")
    p.add_argument("--max-step-latency", metavar="X", help="target time per output token, e.g. 50ms")
    p.add_argument("--max-ttft", metavar="X", help="target time to first token, e.g. 500ms")
    p.add_argument(
        "--fix",
        metavar="K=V,...",
        help="pin the layout's degrees, e.g. tp=16, tp=8,pp=2 or attn_dp=8,ep=8 (tp, pp, ep, attn_dp, kv_batch); "
        "the replicas fill the slice, and a pinned tp or pp may span NVLink domains (priced on the scale-out fabric)",
    )
    p.add_argument(
        "--weight-dtype",
        default="bf16",
        choices=WEIGHT_DTYPES,
        help="weight element type (default bf16; int4 and fp4 (NVFP4/MXFP4) are 0.5 bytes, block scales not counted)",
    )
    p.add_argument("--kv-dtype", default="bf16", choices=KV_DTYPES, help="KV cache element type (default bf16)")
    p.add_argument(
        "--activation-dtype",
        default="bf16",
        choices=ACT_DTYPES,
        help="activation type; matmuls compute in the wider of it and the weight type (W8A8: int8 and int8; "
        "W4A4: fp4 and fp4); a chip without that rate runs the next wider one, with a note",
    )
    p.add_argument(
        "--requests-per-s",
        metavar="R",
        help="request rate over the slice (Poisson): continuous batching under load (TPOT, TTFT with queueing) "
        "and disaggregated vs colocated serving",
    )
    p.add_argument(
        "--concurrency",
        metavar="N",
        help="clients each keeping one request in flight: continuous batching at a fixed concurrency",
    )
    p.add_argument(
        "--percentiles",
        action="store_true",
        help="with --requests-per-s: p50/p90/p99 of TTFT, TPOT and end-to-end latency from the request-by-request "
        "simulation of the chosen layout (Poisson arrivals)",
    )
    p.add_argument("--requests", metavar="N", help="requests --percentiles simulates (default 10000)")
    p.add_argument("--seed", metavar="S", help="seed of --percentiles' arrivals (default: the simulation's own)")
    p.add_argument(
        "--request-trace",
        metavar="FILE.jsonl",
        help="with --percentiles: each request's lengths drawn from this file, one JSON object per line with "
        "input_len and output_len; --prompt-len and --gen-len default to their means (the steps are priced there)",
    )
    p.add_argument(
        "--random-range-ratio",
        metavar="R",
        help="with --percentiles: each request's prompt and output lengths drawn uniformly from [L (1 - R), L (1 + R)] "
        "around --prompt-len and --gen-len, as vLLM's serving benchmark (random dataset)",
    )
    p.add_argument(
        "--prefix-len",
        metavar="L",
        help="prefix caching: the first L prompt tokens (a shared system prompt) may hit the engine's prefix cache; "
        "a hit prefills only the other tokens (attending to all), its KV still held; under --requests-per-s or "
        "--concurrency the simulation's hits prefill only those tokens, the prefix's blocks held once",
    )
    p.add_argument("--prefix-hit-rate", metavar="H", help="share of requests whose prefix hits the cache (default 1)")
    p.add_argument("--draft", metavar="MODEL", help="speculative decoding with this draft model (with --draft-tokens)")
    p.add_argument("--draft-tokens", metavar="K", help="tokens the draft model proposes per target step")
    p.add_argument("--mtp", metavar="K", help="multi-token prediction: K MTP modules draft K tokens per step")
    p.add_argument(
        "--accept-rate",
        metavar="A",
        help="with --draft or --mtp: each drafted token's probability of acceptance; a step yields 1 + A + ... + A^K "
        "tokens",
    )
    p.add_argument(
        "--decode-chip",
        metavar="CHIP",
        help="with --requests-per-s: disaggregation with decode on this chip (as many chips as the slice) and "
        "prefill on --chip",
    )
    p.add_argument(
        "--scheduler",
        choices=SCHEDULERS,
        help="continuous batching policy: chunked (chunked prefill within --token-budget, default) or prefill-first",
    )
    p.add_argument(
        "--token-budget",
        metavar="T",
        help=f"tokens per step of continuous batching, decode and prefill together (default {DEFAULT_TOKEN_BUDGET})",
    )
    p.add_argument(
        "--static-cache-len",
        metavar="N",
        help="the engine keeps a fixed-shape KV cache of N positions per decode slot, stored and read whole by every "
        "decode step (an engine compiled for static shapes, e.g. jetstream-pytorch; default: each sequence's own "
        "context, as paged kernels read it)",
    )
    p.add_argument(
        "--engine",
        choices=("generic", "vllm", "sglang", "trtllm"),
        help="the serving engine continuous batching runs as: its KV block pool (block size, memory fraction), "
        "admission and preemption, and its per-step costs (default generic: vLLM's defaults)",
    )
    p.add_argument(
        "--kv-reads-per-query-head",
        action="store_true",
        help="the engine's decode attention has no GQA path: it reads each KV head once per query head "
        "(e.g. TensorRT-LLM's masked multi-head attention without XQA)",
    )
    add_algorithm(p, JOB_DEFAULT)
    p.add_argument("--price-per-chip-hour", metavar="USD", help="override the catalog price per chip-hour")
    add_price(p)
    add_emit(p, SERVE_KINDS)
    p.add_argument(
        "--efficiency",
        metavar="K=V,...",
        help="override factors, e.g. hbm=0.9,step_s=0.002; graph_max_batch=0 runs every step without CUDA "
        "graphs, step_per_seq_s=0,graph_max_batch=1e9 the flat 1 ms per step of before",
    )
    p.add_argument("--ideal", action="store_true", help="pure roofline: every efficiency 1, no fixed costs")
    p.add_argument("--plot", metavar="FILE.png", help="write the latency/throughput frontier chart")
    p.add_argument(
        "--timeline",
        metavar="FILE.json",
        help="write the chosen point's prefill and decode steps as a Chrome trace (Perfetto, chrome://tracing)",
    )
    p.set_defaults(func=run)


def _count(text: str | None, flag: str, hi: int = MAX_TOKENS) -> int | None:
    return None if text is None else count(text, flag, hi)


def _positive(text: str | None, flag: str, parse: Any = parse_number) -> float | None:
    if text is None:
        return None
    value = parse(text)
    if not value > 0:
        raise InvalidConfigError(f"{flag} {shown(text)} must be > 0")
    return float(value)


def request_from_args(args: argparse.Namespace) -> ServingRequest:
    from rooftop.cost.efficiency import IDEAL, default_efficiency, parse_efficiency
    from rooftop.hardware.slices import slice_for_chips, topology_or_nearest
    from rooftop.model.catalog import get_model
    from rooftop.model.workload import Dtypes
    from rooftop.plan.serve.layout import parse_fix
    from rooftop.plan.serve.sweep import ServingRequest

    fix = parse_fix(args.fix)
    rate = _positive(args.requests_per_s, "--requests-per-s")
    # continuous batching's flags (other commands building a serving request have none of them)
    concurrency = _count(getattr(args, "concurrency", None), "--concurrency", MAX_CHIPS)
    scheduler, budget = getattr(args, "scheduler", None), getattr(args, "token_budget", None)
    if rate is not None and concurrency is not None:
        raise InvalidConfigError("give --requests-per-s or --concurrency, not both")
    if (scheduler or budget) and rate is None and concurrency is None:
        raise InvalidConfigError("--scheduler and --token-budget need --requests-per-s or --concurrency")
    chip = chip_from_args(args)
    if args.topology:
        topology = topology_or_nearest(chip, args.topology)
    else:
        topology = slice_for_chips(chip, _count(args.chips, "--chips", MAX_CHIPS) or 1)
    eff = IDEAL if args.ideal else default_efficiency("serving", chip.kind)
    if not args.ideal:  # the engine's own per-step host times (fitted), before any --efficiency override
        from rooftop.plan.serve.paging import engine_efficiency, get_engine

        eff = engine_efficiency(eff, get_engine(getattr(args, "engine", None) or "generic"))
    if args.efficiency:
        eff = parse_efficiency(args.efficiency, eff)
    return ServingRequest(
        get_model(args.model),
        chip,
        topology,
        _count(args.prompt_len, "--prompt-len") or DEFAULT_PROMPT_LEN,
        _count(args.gen_len, "--gen-len") or DEFAULT_GEN_LEN,
        Dtypes(args.weight_dtype, args.activation_dtype, args.kv_dtype),
        batch=_count(args.batch, "--batch"),
        max_step_latency_s=_positive(args.max_step_latency, "--max-step-latency", parse_duration),
        max_ttft_s=_positive(args.max_ttft, "--max-ttft", parse_duration),
        requests_per_s=rate,
        price_usd_per_chip_hour=_positive(args.price_per_chip_hour, "--price-per-chip-hour"),
        efficiency=eff,
        fix=fix,
        concurrency=concurrency,
        scheduler=scheduler or "chunked",
        token_budget=_count(budget, "--token-budget") or DEFAULT_TOKEN_BUDGET,
        static_cache_len=_count(getattr(args, "static_cache_len", None), "--static-cache-len") or 0,
        kv_reads_per_query_head=bool(getattr(args, "kv_reads_per_query_head", False)),
        engine_name=getattr(args, "engine", None) or "generic",
        algorithm=algorithm_from(args),
        **_prefix_fields(args, _count(args.prompt_len, "--prompt-len") or DEFAULT_PROMPT_LEN),
    )


def _prefix_fields(args: argparse.Namespace, prompt_len: int) -> dict[str, Any]:
    """``--prefix-len`` and ``--prefix-hit-rate`` (default 1) as the request's fields: the simulation's hits."""
    length = getattr(args, "prefix_len", None)
    if length is None:
        return {}
    from rooftop.plan.serve.prefix import check_prefix

    rate = getattr(args, "prefix_hit_rate", None)
    n, hit = count(length, "--prefix-len", MAX_TOKENS), 1.0 if rate is None else float(parse_number(rate))
    check_prefix(prompt_len, n, hit)
    return {"prefix_len": n, "prefix_hit_rate": hit}


def _write_timeline(path: str, plan: Any) -> None:
    from rooftop.report.timeline import serve_events, serve_point, write_timeline

    index = serve_point(plan)
    if index is None:
        raise InvalidConfigError("the plan has no serving point: there is no step to write to --timeline")
    events, meta = serve_events(plan, index, plan.request.chip.kind)
    write_timeline(path, events, meta)


def _trace(args: argparse.Namespace) -> tuple[tuple[int, int], ...]:
    """``--request-trace``'s (prompt, output) lengths; the means stand for --prompt-len / --gen-len not given."""
    if args.request_trace is None:
        return ()
    from rooftop.plan.serve.percentiles import read_request_trace

    lengths = read_request_trace(args.request_trace, MAX_TOKENS)
    for i, name in enumerate(("prompt_len", "gen_len")):
        if getattr(args, name) is None:
            setattr(args, name, str(max(1, round(sum(x[i] for x in lengths) / len(lengths)))))
    return lengths


def _percentiles(args: argparse.Namespace, plan: Any, lengths: tuple[tuple[int, int], ...]) -> Any:
    """``--percentiles`` (with ``--requests``, ``--seed``, ``--request-trace``) on the chosen layout, or None."""
    requests, seed = getattr(args, "requests", None), getattr(args, "seed", None)
    if not getattr(args, "percentiles", False):
        if requests is not None or seed is not None or args.request_trace is not None or args.random_range_ratio:
            raise InvalidConfigError("--requests, --seed, --request-trace and --random-range-ratio need --percentiles")
        return None
    from rooftop.plan.serve.percentiles import MAX_REQUESTS, PERCENTILE_REQUESTS, latency_percentiles
    from rooftop.plan.serve.scheduler import SEED

    n = _count(requests, "--requests", MAX_REQUESTS) or PERCENTILE_REQUESTS
    try:
        s = SEED if seed is None else int(seed)
    except ValueError:
        raise InvalidConfigError(f"--seed {shown(seed)} must be an integer") from None
    ratio = 0.0 if args.random_range_ratio is None else float(parse_number(args.random_range_ratio))
    if ratio and lengths:
        raise InvalidConfigError("give --request-trace or --random-range-ratio, not both")
    return latency_percentiles(plan, n, s, lengths, ratio)


def _prefix(args: argparse.Namespace, plan: Any) -> Any:
    """``--prefix-len`` (with ``--prefix-hit-rate``) on the chosen layout, or None."""
    length, rate = getattr(args, "prefix_len", None), getattr(args, "prefix_hit_rate", None)
    if length is None:
        if rate is not None:
            raise InvalidConfigError("--prefix-hit-rate needs --prefix-len")
        return None
    from rooftop.plan.serve.prefix import prefix_cache
    from rooftop.report.reasons import note_text

    if plan.chosen is None:
        raise InvalidConfigError(f"--prefix-len: no chosen layout to price it on ({note_text(plan.chosen_reason)})")
    hit = 1.0 if rate is None else float(parse_number(rate))
    return prefix_cache(plan.request, plan.points[plan.chosen].layout, count(length, "--prefix-len", MAX_TOKENS), hit)


def _speculation(args: argparse.Namespace, plan: Any) -> Any:
    """``--draft MODEL --draft-tokens K`` or ``--mtp K``, with ``--accept-rate``, at the chosen point, or None."""
    draft, k_draft, mtp = getattr(args, "draft", None), getattr(args, "draft_tokens", None), getattr(args, "mtp", None)
    rate = getattr(args, "accept_rate", None)
    if draft is None and mtp is None:
        if k_draft is not None or rate is not None:
            raise InvalidConfigError("--draft-tokens and --accept-rate need --draft or --mtp")
        return None
    if draft is not None and mtp is not None:
        raise InvalidConfigError("give --draft or --mtp, not both")
    if draft is not None and k_draft is None:
        raise InvalidConfigError("--draft needs --draft-tokens K (tokens drafted per target step)")
    if rate is None:
        raise InvalidConfigError("--draft and --mtp need --accept-rate A (each drafted token's acceptance)")
    from rooftop.model.catalog import get_model
    from rooftop.plan.serve.speculative import MAX_DRAFT, speculation
    from rooftop.report.reasons import note_text

    if plan.chosen is None:
        raise InvalidConfigError(f"--draft/--mtp: no chosen point to price it at ({note_text(plan.chosen_reason)})")
    point = plan.points[plan.chosen]
    k = count(str(k_draft if draft is not None else mtp), "--draft-tokens" if draft is not None else "--mtp", MAX_DRAFT)
    model = get_model(draft) if draft is not None else None
    return speculation(plan.request, point.layout, point.batch, k, float(parse_number(rate)), model)


def _decode_chip(args: argparse.Namespace, plan: Any) -> Any:
    """``--decode-chip``: (the decode chip's plan, the split), or None."""
    name = getattr(args, "decode_chip", None)
    if name is None:
        return None
    if plan.request.requests_per_s is None:
        raise InvalidConfigError("--decode-chip needs --requests-per-s (the rate the two pools serve)")
    import dataclasses

    from rooftop.plan.serve.disagg import split_chips
    from rooftop.plan.serve.sweep import plan_serving

    other = argparse.Namespace(**vars(args))
    other.chip, other.chips, other.topology = name, str(plan.request.topology.num_chips), None
    other.requests_per_s = other.concurrency = other.scheduler = other.token_budget = other.price_per_chip_hour = None
    decode_plan = plan_serving(dataclasses.replace(request_from_args(other), requests_per_s=None))
    return decode_plan, split_chips(plan, decode_plan, plan.request.requests_per_s)


def run(args: argparse.Namespace) -> Output:
    from rooftop.plan.serve.sweep import plan_serving
    from rooftop.report import serve as report
    from rooftop.report.serve_chart import plot_serve

    if args.timeline is not None:
        from rooftop.report.timeline import check_timeline_path

        check_timeline_path(args.timeline)
    if args.chips is None and args.topology is None:  # a goal instead of a slice
        from rooftop.cli.goal import serve_goal_output

        if args.requests_per_s is None:
            raise InvalidConfigError("give --chips or --topology, or a goal: --requests-per-s with --max-ttft and/or "
                                     "--max-step-latency (the fewest chips that meet them)")  # fmt: skip
        given = [f for f in ("percentiles", "prefix_len", "draft", "mtp", "decode_chip") if getattr(args, f, None)]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise InvalidConfigError(f"{flag} needs --chips or --topology (a slice to price it on)")
        return serve_goal_output(request_from_args(args), args)
    trace = _trace(args)
    plan = plan_serving(request_from_args(args))
    req = plan.request
    lengths = (("--prompt-len", args.prompt_len, req.prompt_len), ("--gen-len", args.gen_len, req.gen_len))
    defaulted = [f"{flag} {value}" for flag, given, value in lengths if given is None]
    if defaulted:
        from dataclasses import replace

        note = f"{' and '.join(defaulted)}: not given, so the defaults of vLLM's serving benchmark (random dataset)"
        plan = replace(plan, notes=(note, *plan.notes))
    if args.timeline is not None:
        _write_timeline(args.timeline, plan)
    pct = _percentiles(args, plan, trace)
    prefix = _prefix(args, plan)
    spec = _speculation(args, plan)
    split = _decode_chip(args, plan)
    from rooftop.report.energy import render_energy, serve_energy, serve_json

    energy = serve_energy(plan)
    payload = serve_json(plan)
    if pct is not None:
        from rooftop.report.serve_features import percentiles_dict, render_percentiles

        payload["percentiles"] = percentiles_dict(pct)
    if prefix is not None:
        from rooftop.report.serve_features import prefix_dict

        payload["prefix_cache"] = prefix_dict(prefix)
    if split is not None:
        from rooftop.report.serve_features import split_dict

        payload["decode_chip_disaggregation"] = split_dict(plan, *split)
    if spec is not None:
        from rooftop.report.serve_features import speculation_dict

        payload["speculative"] = speculation_dict(spec)

    def render(console: Any) -> None:
        report.render_serve(console, plan, payload)
        if pct is not None:
            render_percentiles(console, pct)
        if prefix is not None:
            from rooftop.report.serve_features import render_prefix

            render_prefix(console, prefix)
        if split is not None:
            from rooftop.report.serve_features import render_split

            render_split(console, split[1])
        if spec is not None:
            from rooftop.report.serve_features import render_speculation

            render_speculation(console, spec)
        render_energy(console, energy, "output tokens")

    out = Output(
        payload,
        render,
        [lambda path: plot_serve(path, plan)],
    )
    if args.emit:
        layout, batch = serve_choice(plan)
        return with_emit(out, args.emit, serve_text(args.emit, args, plan.request, layout, batch))
    return out
