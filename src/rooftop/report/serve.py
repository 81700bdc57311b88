"""``rooftop serve``: a serving plan as JSON and tables (its frontier chart: report/serve_chart.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rooftop.dtypes import compute_dtype
from rooftop.plan.fix import pinned_text
from rooftop.report.formulas import term_dict
from rooftop.report.plan_reasons import memory_text
from rooftop.report.reasons import note_text, note_texts
from rooftop.report.serve_book import book_serving_dict
from rooftop.report.table import say, table, words
from rooftop.units import format_bytes, format_duration, format_plain, format_rate, plural

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from rooftop.plan.serve.batching import Batching, SteadyState
    from rooftop.plan.serve.candidates import MinSlice
    from rooftop.plan.serve.critical import CriticalBatch
    from rooftop.plan.serve.disagg import Disaggregation, Pool
    from rooftop.plan.serve.paging import KVPool
    from rooftop.plan.serve.phase import PhaseTime
    from rooftop.plan.serve.sweep import ServingPlan, ServingPoint
    from rooftop.plan.serve.ttft import Stage


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
        "collective_hidden_s": p.collective_hidden_s,
        "collective_exposed_s": p.collective_exposed_s,
        "collectives": p.collectives,
        "launch_s": p.launch_s,
        "scheduling_s": p.scheduling_s,
        "overhead_s": p.overhead_s,
        "time_s": p.time_s,
        "bound": p.bound,
    }
    if terms:
        out["terms"] = [term_dict(t) for t in p.terms]
    return out


def critical_batch_dict(cb: CriticalBatch) -> dict[str, Any]:
    return {
        "compute_dtype": cb.compute_dtype,
        "ideal": cb.ideal,
        "with_efficiency": cb.with_efficiency,
        "formula": f"{cb.chip} {cb.compute_dtype} peak {format_rate(cb.peak_flops_per_s, 'FLOP/s', 4)} x "
        f"{cb.bytes_per_weight:g} bytes per weight / (2 x {format_rate(cb.hbm_bytes_per_s, digits=4)}) = "
        f"{format_plain(cb.ideal, 4)}",
    }


def min_slice_reason(m: MinSlice) -> str:
    return f"{plural(m.chips, 'chip')}: {memory_text(m.memory)}"


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
        "reason": note_text(p.reason),
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
        "reason": note_text(summary.reason),
    }


def serve_payload(plan: ServingPlan) -> dict[str, Any]:
    """``rooftop serve --json``; with ``requests_per_s``, the disaggregation pools too."""
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
        "static_cache_len": req.static_cache_len,
        "kv_reads_per_query_head": req.kv_reads_per_query_head,
        "engine": req.engine_name,
        "algorithm": req.algorithm.name if req.algorithm is not None else "hierarchical",
        "dtypes": {
            "weights": dt.weights,
            "kv_cache": dt.kv_cache,
            "activations": dt.activations,
            "compute": compute_dtype(dt.weights, dt.activations),
        },
        "fix": req.pins,
        "price_usd_per_chip_hour": req.price,
        "efficiency": req.eff.as_dict(),
        "constraints": {"max_step_latency_s": req.max_step_latency_s, "max_ttft_s": req.max_ttft_s},
        "critical_batch": critical_batch_dict(plan.critical_batch),
        "points": [point_dict(p) for p in plan.points],
        "frontier": list(plan.frontier),
        "chosen": plan.chosen,
        "chosen_reason": note_text(plan.chosen_reason),
        "layouts": [
            {
                "parallelism": s.layout.as_dict(),
                "max_batch": s.max_batch,
                "compute_bound_batch": s.compute_bound_batch,
                "weights_per_chip_bytes": s.weights_per_chip_bytes,
                "limit": s.limit,
                "reason": note_text(s.reason),
                "scale_out_axes": list(s.scale_out_axes),
            }
            for s in plan.layouts
        ],
        "large_batch_end": _large_batch_end(plan),
        "min_slice": min_slice_dict(plan.min_slice),
        "notes": note_texts(plan.notes),
        **book_serving_dict(plan),
    }
    if req.requests_per_s:
        assert plan.disaggregation is not None  # plan_serving sets it with requests_per_s
        payload["disaggregation"] = disaggregation_dict(plan, plan.disaggregation)
    if plan.batching is not None:
        payload["continuous_batching"] = batching_dict(plan.batching, req.engine_name)
    return payload


#: how continuous batching's figures are obtained, as the JSON and the table say
BATCHING_METHOD = (
    "saturation from a fluid balance (Little's law, a formula); TPOT, TTFT and queueing from a seeded "
    "step-level simulation of the scheduler with Poisson arrivals (or closed-loop clients), every step "
    "priced by the mixed-step roofline"
)
LOAD_KEYS = ("tpot_s", "ttft_s", "queue_s", "prefill_tokens_per_step")


def steady_dict(layout_dict: dict[str, Any], chips: int, s: SteadyState) -> dict[str, Any]:
    return {
        "parallelism": layout_dict,
        "max_batch": s.max_batch,
        "saturated": s.saturated,
        "capacity_requests_per_s": s.capacity_requests_per_s,
        "tpot_s": s.tpot_s,
        "ttft_s": s.ttft_s,
        "ttft_idle_s": s.ttft_idle_s,
        "queue_s": s.queue_s,
        "prefill_tokens_per_step": s.prefill_tokens_per_step,
        "decode_batch": s.decode_batch,
        "requests_per_s": s.requests_per_s,
        "tokens_per_s": s.tokens_per_s,
        "tokens_per_s_per_chip": None if s.tokens_per_s is None else s.tokens_per_s / chips,
        "reason": note_text(s.reason),
        "ttft_stages": [stage_dict(x) for x in s.ttft_stages],
        "ttft_idle_stages": [stage_dict(x) for x in s.ttft_idle_stages],
        "kv_pool": kv_pool_dict(s.pool),
        "preemptions": s.preemptions,
        "kv_blocks_used": s.kv_blocks_used,
    }


def stage_dict(s: Stage) -> dict[str, Any]:
    """One stage of TTFT (plan/serve/ttft.py)."""
    return {"name": s.name, "time_s": s.seconds, "formula": s.formula, "source": s.source}


def kv_pool_dict(pool: KVPool | None) -> dict[str, Any] | None:
    """The engine's KV block pool per chip (plan/serve/paging.py); None for a slot per sequence."""
    if pool is None:
        return None
    e = pool.engine
    return {
        "engine": e.name,
        "block_tokens": e.block_tokens,
        "blocks": pool.blocks,
        "tokens": pool.tokens,
        "pool_bytes": pool.pool_bytes,
        "hbm_bytes": pool.hbm_bytes,
        "memory_fraction": e.memory_fraction,
        "memory_of": e.memory_of,
        "weights_bytes": pool.weights_bytes,
        "activations_bytes": pool.activations_bytes,
        "graph_bytes": e.graph_bytes,
        "runtime_bytes": e.runtime_bytes,
        "kv_bytes_per_token": pool.bytes_per_token,
        "reserve_fraction": e.reserve_fraction,
        "preemption": e.preemption,
    }


def batching_dict(b: Batching, engine: str = "generic") -> dict[str, Any]:
    """``continuous_batching``: the chosen layout's figures at the top (None when saturated), every
    layout's below."""
    t = b.traffic
    layouts = [steady_dict(layout.as_dict(), layout.chips, s) for layout, s in b.layouts]
    top: dict[str, Any] = dict.fromkeys(LOAD_KEYS)
    top["ttft_idle_s"] = None
    if b.chosen is not None:
        top = {k: layouts[b.chosen][k] for k in (*LOAD_KEYS, "ttft_idle_s")}
    top["ttft_stages"] = layouts[b.chosen]["ttft_stages"] if b.chosen is not None else []
    return {
        "method": "simulation",
        "method_note": BATCHING_METHOD,
        "scheduler": t.scheduler,
        "engine": engine,
        "token_budget": t.token_budget,
        "requests_per_s": t.requests_per_s,
        "concurrency": t.concurrency,
        "saturated": bool(b.layouts) and all(s.saturated for _, s in b.layouts),
        "chosen": b.chosen,
        "chosen_reason": note_text(b.reason),
        **top,
        "layouts": layouts,
    }


# ---------------------------------------------------------------- terminal


def _usd(v: float | None) -> str:
    return "-" if v is None else format_plain(v)


def _frontier_table(plan: ServingPlan) -> Table:
    req = plan.request
    chosen = {plan.chosen} if plan.chosen is not None else set()
    rows = []
    shown = sorted(set(plan.frontier) | chosen, key=lambda i: plan.points[i].step_time_s)
    for row, i in enumerate(shown, 1):  # numbered as shown; --json's "points" keep the sweep's indices
        p = plan.points[i]
        rows.append(
            (
                f"{'*' if i == plan.chosen else ''}{row}",
                p.layout.label(),
                p.batch,
                format_duration(p.step_time_s),
                format_duration(p.ttft_s),
                format_plain(p.tokens_per_s, 4),
                format_plain(p.tokens_per_s_per_chip, 4),
                format_bytes(p.memory.total_bytes),
                words(p.bound),
                _usd(p.cost_input_usd_per_m),
                _usd(p.cost_output_usd_per_m),
            )
        )
    pinned = f", --fix {pinned_text(req.pins)}" if req.pins else ""
    title = (
        f"{req.cfg.name} on {req.topology.spec} {req.chip.name}: prompt {req.prompt_len}, generate {req.gen_len} "
        f"(weights {req.dtypes.weights}, activations {req.dtypes.activations}, KV {req.dtypes.kv_cache}{pinned}); "
        "frontier, * = chosen"
    )
    columns = ["#", "layout", "batch", "step", "TTFT", "tok/s", "tok/s/chip", "mem/chip", "bound", "$/M in", "$/M out"]
    return table(title, columns, rows)


def _step_table(plan: ServingPlan, p: ServingPoint) -> Table:
    d = p.decode
    crossing = next((s.scale_out_axes for s in plan.layouts if s.layout == p.layout), ())
    over = f" ({' and '.join(crossing)} across the scale-out network too)" if crossing else ""
    hidden = ""
    if d.collective_hidden_s:
        shown_ = f"{format_duration(d.collective_hidden_s)} of {format_duration(d.collective_s)}"
        hidden = f", exposed: {shown_} run under the matmuls (tp_overlap)"
    parts = [
        ("bandwidth roofline (weights + KV) / HBM", d.bandwidth_roofline_s),
        *((f"{words(g)} ops ({words(d.group_bound[g])}-bound)", t) for g, t in d.group_s.items()),
        (f"collectives{over}{hidden}", d.collective_exposed_s),
        ("kernel launches", d.launch_s),
        ("scheduling", d.scheduling_s),
        ("step", d.time_s),
    ]
    return table(
        "decode step of the chosen point, per chip", ["term", "time"], [(n, format_duration(t)) for n, t in parts]
    )


def render_serve(console: Console, plan: ServingPlan, payload: dict[str, Any]) -> None:
    console.print(_frontier_table(plan))
    say(console, f"chosen: {note_text(plan.chosen_reason)}")
    if plan.chosen is not None:
        console.print(_step_table(plan, plan.points[plan.chosen]))
    rows = [
        (s.layout.label(), s.max_batch, s.compute_bound_batch or "-", words(s.limit), note_text(s.reason))
        for s in plan.layouts
    ]
    columns = ["layout", "max batch", "compute-bound at", "limit", "reason"]
    console.print(table("layouts: where the large-batch end stops", columns, rows))
    if plan.min_slice:
        say(console, f"smallest slice that holds the model and one sequence: {min_slice_reason(plan.min_slice)}")
    say(console, f"book ({payload['book_part']}): {payload['book_formula']}")
    if payload["book_why"]:
        say(console, f"book differs: {payload['book_why']}")
    disagg = payload.get("disaggregation")
    if disagg:
        say(
            console,
            f"disaggregation at {format_plain(disagg['requests_per_s'])} req/s: {disagg['recommendation']} "
            f"({disagg['reason']})",
        )
    if plan.batching is not None:
        console.print(_batching_table(plan.batching))
        say(console, f"continuous batching: {note_text(plan.batching.reason)} (how: {BATCHING_METHOD})")
        if plan.batching.chosen is not None and plan.batching.layouts[plan.batching.chosen][1].ttft_stages:
            console.print(_stages_table(plan.batching.layouts[plan.batching.chosen][1]))
    for note in note_texts(plan.notes):
        say(console, f"note: {note}")


def _stages_table(s: SteadyState) -> Table:
    """TTFT stage by stage, idle and under the load, of one layout (plan/serve/ttft.py)."""
    rows = [
        (a.name, format_duration(i.seconds), format_duration(a.seconds), a.formula)
        for a, i in zip(s.ttft_stages, s.ttft_idle_stages, strict=True)
    ]
    rows.append(("TTFT", format_duration(s.ttft_idle_s), _opt(s.ttft_s), "the sum"))
    return table("time to first token of the chosen layout, stage by stage", ["stage", "idle", "loaded", "how"], rows)


def _opt(v: float | None, fmt: Any = format_duration) -> str:
    return "-" if v is None else fmt(v)


def _batching_table(b: Batching) -> Table:
    t = b.traffic
    load = (
        f"{format_plain(t.requests_per_s)} requests/s" if t.requests_per_s else f"{t.concurrency} concurrent requests"
    )
    rows = []
    for i, (layout, s) in enumerate(b.layouts):
        mark = "*" if i == b.chosen else ""
        if s.saturated:
            rows.append(
                (
                    f"{mark}{layout.label()}",
                    format_plain(s.capacity_requests_per_s, 4),
                    "saturated: queue grows without bound",
                    "-",
                    format_duration(s.ttft_idle_s),
                    "-",
                    "-",
                    "-",
                    "-",
                )
            )
            continue
        rows.append(
            (
                f"{mark}{layout.label()}",
                format_plain(s.capacity_requests_per_s, 4),
                _opt(s.tpot_s),
                _opt(s.ttft_s),
                format_duration(s.ttft_idle_s),
                _opt(s.queue_s),
                _opt(s.prefill_tokens_per_step, lambda v: format_plain(v, 4)),
                _opt(s.decode_batch, lambda v: format_plain(v, 3)),
                _opt(s.tokens_per_s, lambda v: format_plain(v, 4)),
            )
        )
    title = f"continuous batching at {load} ({t.scheduler}, {t.token_budget} tokens per step); * = chosen"
    columns = ["layout", "max req/s", "TPOT", "TTFT", "TTFT idle", "queue", "prefill tok/step", "decode batch", "tok/s"]
    return table(title, columns, rows)


def _pool_dict(plan: ServingPlan, pool: Pool | None) -> dict[str, Any] | None:
    if pool is None:
        return None
    p = plan.points[pool.point]
    return {
        "point": pool.point,
        "parallelism": p.layout.as_dict() | {"replicas": pool.replicas},
        "batch": p.batch,
        "chips_per_replica": p.layout.chips_per_replica,
        "replicas": pool.replicas,
        "chips": pool.chips,
        "ttft_s": pool.ttft_s,
        "time_per_output_token_s": pool.time_per_output_token_s or None,
        "utilization": pool.utilization,
    }


def disaggregation_dict(plan: ServingPlan, d: Disaggregation) -> dict[str, Any]:
    pre, dec, col = (_pool_dict(plan, x) for x in (d.prefill, d.decode, d.colocated))
    if pre is not None:
        pre.pop("batch")
        pre.pop("time_per_output_token_s")
    return {
        "requests_per_s": d.requests_per_s,
        "prefill": pre,
        "decode": dec,
        "kv_transfer": {
            "bytes_per_request": d.kv_transfer_bytes,
            "time_s": d.kv_transfer_s,
            "bytes_per_s": d.kv_transfer_bytes_per_s,
            "link_bytes_per_s_per_chip": plan.request.chip.dcn_bytes_per_s,
        },
        "disaggregated_chips": (d.prefill.chips + d.decode.chips) if d.prefill and d.decode else None,
        "colocated": col,
        "colocated_chips": d.colocated.chips if d.colocated else None,
        "recommendation": d.recommendation,
        "reason": note_text(d.reason),
        "cost_per_million_tokens_usd": d.cost,
    }
