"""``rooftop serve``: the book's max batch and step time beside rooftop's (the ``book_*`` keys).

The figures come from plan/book.py (Parts 7 and 8 of "How to Scale Your Model"); this module compares
them with the layout of rooftop's plan that holds the most sequences on the slice, and says which of
the book's assumptions that layout does not make.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rooftop.plan.book import BookServing, book_serving
from rooftop.report.book import BOOK, gb
from rooftop.units import format_duration, format_percent, format_rate

if TYPE_CHECKING:
    from rooftop.plan.serve.sweep import ServingPlan


def plan_book(plan: ServingPlan) -> BookServing:
    req = plan.request
    dt = req.dtypes
    return book_serving(
        req.cfg, req.chip, req.topology.num_chips, req.max_context_len, dt.weights, dt.kv_cache, dt.activations
    )


def _why(plan: ServingPlan, b: BookServing) -> str:
    """Which of the book's assumptions rooftop's largest layout does not make ("" when the batches agree)."""
    if not plan.layouts:
        return ""
    big = max(plan.layouts, key=lambda s: s.max_batch * s.layout.replicas)
    ours = big.max_batch * big.layout.replicas
    if ours == b.max_batch:
        return ""
    why = [f"rooftop's largest layout ({big.layout.label()}) holds {ours} sequences against the book's {b.max_batch}"]
    eff = plan.request.eff
    if eff.memory_reserve > 0:
        why.append(
            f"rooftop leaves {format_percent(eff.memory_reserve)} of HBM to the runtime (the book uses all of it)"
        )
    why.append(
        "it stores whole sequences per batch shard and copies what the layout replicates (KV heads fewer "
        "than the tensor-parallel degree, replicas' weights); the book shards weights and cache over every chip"
    )
    why.append(
        "its step adds collectives, activations, launches and the efficiency of HBM; the book's reads weights "
        "and cache at peak bandwidth"
    )
    return "; ".join(why)


def book_serving_dict(plan: ServingPlan) -> dict[str, Any]:
    """The ``book_*`` keys of ``rooftop serve --json``."""
    b = plan_book(plan)
    chip = plan.request.chip
    formula = (
        f"B = floor((chips x HBM - weights) / (KV per sequence)) = floor(({b.chips} x {gb(chip.hbm_capacity_bytes)} - "
        f"{gb(b.weights_bytes)}) / {gb(b.kv_bytes_per_sequence)}) = {b.max_batch} at {b.context_len} tokens; "
        f"T_step = B x KV per sequence / (chips x HBM bytes/s) + max(2 B P / (chips x C), weights / (chips x HBM "
        f"bytes/s)) = {b.max_batch} x {gb(b.kv_bytes_per_sequence)} / ({b.chips} x {format_rate(chip.hbm_bytes_per_s)})"
        f" + max({format_duration(b.compute_s)}, {format_duration(b.weights_bytes / b.hbm_bytes_per_s)}) = "
        f"{format_duration(b.step_time_s)}"
    )
    if b.max_batch == 0:
        formula = (
            f"chips x HBM - weights = {b.chips} x {gb(chip.hbm_capacity_bytes)} - {gb(b.weights_bytes)}: no room for "
            f"one sequence of {b.context_len} tokens ({gb(b.kv_bytes_per_sequence)})"
        )
    batches = sorted({p.batch * p.layout.replicas for p in plan.points})
    return {
        "book_max_batch": b.max_batch,
        "book_step_time_s": b.step_time_s if b.max_batch else None,
        "book_steps": [{"batch": n, "step_time_s": b.step_time_at(n)} for n in batches if n <= b.max_batch],
        "book_formula": formula,
        "book_part": f"{BOOK}, Part 7 'Sharding the KV cache' and Part 8 'Serving LLaMA 3-70B on TPUs'",
        "book_why": _why(plan, b),
    }
