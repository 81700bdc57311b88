"""``rooftop serve MODEL --chip C (--chips N | --topology T) --prompt-len P --gen-len G``: serving
layouts and batch sizes on the latency/throughput frontier, the choice under latency targets,
the cost of tokens and (with ``--requests-per-s``) disaggregated prefill/decode pools."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rooftop.cli.common import Output, add_common, chip_from_args
from rooftop.dtypes import compute_dtype
from rooftop.errors import InvalidConfigError
from rooftop.units import format_bytes, format_duration, parse_duration, parse_number

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.plan.serve.phase import CriticalBatch, PhaseTime
    from rooftop.plan.serve.sweep import MinSlice, ServingPlan, ServingPoint, ServingRequest

WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")
KV_DTYPES = ("bf16", "fp16", "fp8", "int8")
ACT_DTYPES = ("bf16", "fp16", "fp8", "int8")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("serve", help="serving frontier: layouts x batch sizes, latency targets, cost, disaggregation")
    p.add_argument("model", metavar="MODEL", help="catalog model, a catalog-schema .toml or a Hugging Face config.json")
    add_common(p)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--chips", metavar="N", help="number of chips (default slice shape for the chip)")
    where.add_argument("--topology", metavar="T", help="slice shape, e.g. 4x4 (TPU) or 2x8 (GPU nodes x GPUs)")
    p.add_argument("--prompt-len", required=True, metavar="P", help="prompt tokens per request, e.g. 2048 or 2k")
    p.add_argument("--gen-len", required=True, metavar="G", help="generated tokens per request")
    p.add_argument("--batch", metavar="B", help="evaluate only this batch per replica (default: sweep 1, 2, 4, ...)")
    p.add_argument("--max-step-latency", metavar="X", help="target time per output token, e.g. 50ms")
    p.add_argument("--max-ttft", metavar="X", help="target time to first token, e.g. 500ms")
    p.add_argument("--weight-dtype", default="bf16", choices=WEIGHT_DTYPES, help="weight element type (default bf16)")
    p.add_argument("--kv-dtype", default="bf16", choices=KV_DTYPES, help="KV cache element type (default bf16)")
    p.add_argument(
        "--activation-dtype",
        default="bf16",
        choices=ACT_DTYPES,
        help="activation type; matmuls compute in the wider of it and the weight type (W8A8: int8 and int8)",
    )
    p.add_argument("--requests-per-s", metavar="R", help="traffic for disaggregated vs colocated serving")
    p.add_argument("--price-per-chip-hour", metavar="USD", help="override the catalog price per chip-hour")
    p.add_argument("--efficiency", metavar="K=V,...", help="override factors, e.g. hbm=0.9,step_s=0.002")
    p.add_argument("--ideal", action="store_true", help="pure roofline: every efficiency 1, no fixed costs")
    p.add_argument("--plot", metavar="FILE.png", help="write the latency/throughput frontier chart")
    p.set_defaults(func=run)


def _count(text: str | None, flag: str) -> int | None:
    if text is None:
        return None
    value = parse_number(text)
    if value != int(value) or value < 1:
        raise InvalidConfigError(f"{flag} {text!r} must be a positive integer")
    return int(value)


def _positive(text: str | None, flag: str, parse: Any = parse_number) -> float | None:
    if text is None:
        return None
    value = parse(text)
    if not value > 0:
        raise InvalidConfigError(f"{flag} {text!r} must be > 0")
    return float(value)


def request_from_args(args: argparse.Namespace) -> ServingRequest:
    from rooftop.cost.efficiency import IDEAL, default_efficiency, parse_efficiency
    from rooftop.hardware.topology import parse_topology, topology_for_chips
    from rooftop.model.catalog import get_model
    from rooftop.model.config import Dtypes
    from rooftop.plan.serve.sweep import ServingRequest

    chip = chip_from_args(args)
    if args.topology:
        topology = parse_topology(chip, args.topology)
    else:
        topology = topology_for_chips(chip, _count(args.chips, "--chips") or 1)
    eff = IDEAL if args.ideal else default_efficiency("serving", chip.kind)
    if args.efficiency:
        eff = parse_efficiency(args.efficiency, eff)
    return ServingRequest(
        get_model(args.model),
        chip,
        topology,
        _count(args.prompt_len, "--prompt-len") or 1,
        _count(args.gen_len, "--gen-len") or 1,
        Dtypes(args.weight_dtype, args.activation_dtype, args.kv_dtype),
        batch=_count(args.batch, "--batch"),
        max_step_latency_s=_positive(args.max_step_latency, "--max-step-latency", parse_duration),
        max_ttft_s=_positive(args.max_ttft, "--max-ttft", parse_duration),
        requests_per_s=_positive(args.requests_per_s, "--requests-per-s"),
        price_usd_per_chip_hour=_positive(args.price_per_chip_hour, "--price-per-chip-hour"),
        efficiency=eff,
    )


# ---------------------------------------------------------------- JSON


def phase_dict(p: PhaseTime, terms: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "weights_bytes": p.weights_bytes,
        "kv_cache_bytes": p.kv_cache_bytes,
        "other_bytes": p.other_bytes,
        "flops": p.flops,
        "weights_s": p.weights_s,
        "kv_cache_s": p.kv_cache_s,
        "other_memory_s": p.other_memory_s,
        "compute_s": p.compute_s,
        **{f"{g}_s": t for g, t in p.group_s.items()},
        "group_bound": dict(p.group_bound),
        "roofline_s": p.roofline_s,
        "bandwidth_roofline_s": p.bandwidth_roofline_s,
        "collective_s": p.collective_s,
        "collective_latency_s": p.collective_latency_s,
        "collectives": p.collectives,
        "launch_s": p.launch_s,
        "scheduling_s": p.scheduling_s,
        "overhead_s": p.overhead_s,
        "time_s": p.time_s,
        "bound": p.bound,
    }
    if terms:
        from rooftop.report.formulas import term_dict

        out["terms"] = [term_dict(t) for t in p.terms]
    return out


def critical_batch_dict(cb: CriticalBatch) -> dict[str, Any]:
    return {
        "compute_dtype": cb.compute_dtype,
        "ideal": cb.ideal,
        "with_efficiency": cb.with_efficiency,
        "formula": f"{cb.chip} {cb.compute_dtype} peak {cb.peak_flops_per_s:.4g} FLOP/s x {cb.bytes_per_weight:g} "
        f"bytes per weight / (2 x {cb.hbm_bytes_per_s:.4g} B/s) = {cb.ideal:.4g}",
    }


def min_slice_reason(m: MinSlice) -> str:
    from rooftop.plan.serve.layout import describe_memory

    return f"{m.chips} chips: {describe_memory(m.memory)}"


def min_slice_dict(m: MinSlice | None) -> dict[str, Any] | None:
    if m is None:
        return None
    return {
        "chips": m.chips,
        "parallelism": m.layout.as_dict(),
        "memory_per_chip_bytes": m.memory.total_bytes,
        "reason": min_slice_reason(m),
    }


def point_dict(p: ServingPoint) -> dict[str, Any]:
    cost = None
    if p.cost_input_usd_per_m is not None:
        cost = {"input": p.cost_input_usd_per_m, "output": p.cost_output_usd_per_m}
    return {
        "batch": p.batch,
        "parallelism": p.layout.as_dict(),
        "ttft_s": p.ttft_s,
        "step_time_s": p.step_time_s,
        "tokens_per_s": p.tokens_per_s,
        "tokens_per_s_per_chip": p.tokens_per_s_per_chip,
        "decode_tokens_per_s": p.decode_tokens_per_s,
        "prefill_batch_s": p.prefill_batch_s,
        "kv_cache_bytes": p.kv_cache_bytes,
        "memory_per_chip_bytes": p.memory.total_bytes,
        "memory": {
            "weights_bytes": p.memory.weights_bytes,
            "kv_cache_bytes": p.memory.kv_cache_bytes,
            "usable_bytes": p.memory.usable_bytes,
            "capacity_bytes": p.memory.capacity_bytes,
        },
        "fits": p.fits,
        "bound": p.bound,
        "reason": p.reason,
        "cost_per_million_tokens_usd": cost,
        "breakdown": phase_dict(p.decode),
        "prefill_batch_breakdown": phase_dict(p.prefill, terms=False) | {"batch": p.prefill.batch},
    }


def _large_batch_end(plan: ServingPlan) -> dict[str, Any] | None:
    """The limit at the large-batch end of the chosen point's layout (else the best fitting one)."""
    layout = plan.points[plan.chosen].layout if plan.chosen is not None else None
    fitting = [s for s in plan.layouts if s.max_batch > 0]
    summary = next((s for s in plan.layouts if s.layout == layout), fitting[0] if fitting else None)
    if summary is None:
        return None
    return {
        "parallelism": summary.layout.as_dict(),
        "batch": summary.max_batch,
        "limit": summary.limit,
        "reason": summary.reason,
    }


def plan_payload(plan: ServingPlan) -> dict[str, Any]:
    from rooftop.plan.serve.disagg import disaggregate, disaggregation_dict

    req = plan.request
    dt = req.dtypes
    payload: dict[str, Any] = {
        "model": req.cfg.name,
        "chip": req.chip.name,
        "topology": req.topology.spec,
        "chips": req.topology.num_chips,
        "prompt_len": req.prompt_len,
        "gen_len": req.gen_len,
        "decode_context_len": req.decode_context_len,
        "max_context_len": req.max_context_len,
        "dtypes": {
            "weights": dt.weights,
            "kv_cache": dt.kv_cache,
            "activations": dt.activations,
            "compute": compute_dtype(dt.weights, dt.activations),
        },
        "price_usd_per_chip_hour": req.price,
        "efficiency": req.eff.as_dict(),
        "constraints": {"max_step_latency_s": req.max_step_latency_s, "max_ttft_s": req.max_ttft_s},
        "critical_batch": critical_batch_dict(plan.critical_batch),
        "points": [point_dict(p) for p in plan.points],
        "frontier": list(plan.frontier),
        "chosen": plan.chosen,
        "chosen_reason": plan.chosen_reason,
        "layouts": [
            {
                "parallelism": s.layout.as_dict(),
                "max_batch": s.max_batch,
                "compute_bound_batch": s.compute_bound_batch,
                "weights_per_chip_bytes": s.weights_per_chip_bytes,
                "limit": s.limit,
                "reason": s.reason,
            }
            for s in plan.layouts
        ],
        "large_batch_end": _large_batch_end(plan),
        "min_slice": min_slice_dict(plan.min_slice),
        "notes": list(plan.notes),
    }
    if req.requests_per_s:
        payload["disaggregation"] = disaggregation_dict(plan, disaggregate(plan, req.requests_per_s))
    return payload


# ---------------------------------------------------------------- terminal


def _usd(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _frontier_table(plan: ServingPlan) -> Any:
    from rooftop.report.table import table

    req = plan.request
    chosen = {plan.chosen} if plan.chosen is not None else set()
    rows = []
    for i in sorted(set(plan.frontier) | chosen, key=lambda i: plan.points[i].step_time_s):
        p = plan.points[i]
        rows.append(
            (
                f"{'*' if i == plan.chosen else ''}{i}",
                p.layout.label(),
                p.batch,
                format_duration(p.step_time_s),
                format_duration(p.ttft_s),
                f"{p.tokens_per_s:.4g}",
                f"{p.tokens_per_s_per_chip:.4g}",
                format_bytes(p.memory.total_bytes),
                p.bound,
                _usd(p.cost_input_usd_per_m),
                _usd(p.cost_output_usd_per_m),
            )
        )
    title = (
        f"{req.cfg.name} on {req.topology.spec} {req.chip.name}: prompt {req.prompt_len}, generate {req.gen_len} "
        f"(weights {req.dtypes.weights}, KV {req.dtypes.kv_cache}); frontier, * = chosen"
    )
    columns = ["#", "layout", "batch", "step", "TTFT", "tok/s", "tok/s/chip", "mem/chip", "bound", "$/M in", "$/M out"]
    return table(title, columns, rows)


def _step_table(p: ServingPoint) -> Any:
    from rooftop.report.table import table

    d = p.decode
    parts = [
        ("bandwidth roofline (weights + KV) / HBM", d.bandwidth_roofline_s),
        *((f"{g} ops ({d.group_bound[g]}-bound)", t) for g, t in d.group_s.items()),
        ("collectives", d.collective_s),
        ("kernel launches", d.launch_s),
        ("scheduling", d.scheduling_s),
        ("step", d.time_s),
    ]
    return table(
        "decode step of the chosen point, per chip", ["term", "time"], [(n, format_duration(t)) for n, t in parts]
    )


def _render(console: Console, plan: ServingPlan, payload: dict[str, Any]) -> None:
    from rooftop.report.table import table

    console.print(_frontier_table(plan))
    console.print(f"chosen: {plan.chosen_reason}")
    if plan.chosen is not None:
        console.print(_step_table(plan.points[plan.chosen]))
    console.print(
        table(
            "layouts: where the large-batch end stops",
            ["layout", "max batch", "compute-bound at", "limit", "reason"],
            [(s.layout.label(), s.max_batch, s.compute_bound_batch or "-", s.limit, s.reason) for s in plan.layouts],
        )
    )
    if plan.min_slice:
        console.print(f"smallest slice that holds the model and one sequence: {min_slice_reason(plan.min_slice)}")
    disagg = payload.get("disaggregation")
    if disagg:
        console.print(
            f"disaggregation at {disagg['requests_per_s']:g} req/s: {disagg['recommendation']} ({disagg['reason']})"
        )
    for note in plan.notes:
        console.print(f"note: {note}")


def run(args: argparse.Namespace) -> Output:
    from rooftop.plan.serve.sweep import plan_serving

    plan = plan_serving(request_from_args(args))
    payload = plan_payload(plan)

    def render(console: Console) -> None:
        _render(console, plan, payload)

    def plot(path: str) -> None:
        from rooftop.report.serve_plot import frontier_chart

        frontier_chart(plan, path)

    return Output(payload, render, [plot])
