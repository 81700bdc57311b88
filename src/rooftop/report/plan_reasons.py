"""The words of plan/'s reasons (``rooftop.reasons``): a goal's answer, why a serving point takes its
time and what limits each layout, which point is chosen (also under a load), continuous batching's
steady states, disaggregation against colocated serving, and the axes that cross the scale-out network.
``report.reasons`` registers them (:func:`plan_sentences`), so a code's sentence is written once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason
from rooftop.units import format_bytes, format_duration, format_percent, format_rate, plural

#: how a note quoted in a reason is said (report.reasons.note_text)
Say = Callable[[Note], str]


def _where(t: Any) -> str:
    """A goal's Trial as a slice: "16x20x28 (8,960 chips)", or "64 chips" where the topology is the count (GPUs)."""
    chips = f"{t.chips:,} chip{'s' if t.chips > 1 else ''}"
    return chips if t.topology == str(t.chips) else f"{t.topology} ({chips})"


def _goal_met(r: Reason, say: Say) -> str:
    found: Any = r.figure("found")
    smaller: Any = r.figure("smaller")
    why = f"{_where(found)} is the smallest valid slice that meets the goal"
    if smaller is not None:
        missed = f"{smaller.days:.3g} days" if smaller.days is not None else say(smaller.note)
        why += f"; the next smaller, {_where(smaller)}, misses it ({missed})"
    return why


def _goal_unmet(r: Reason, say: Say) -> str:
    fastest: Any = r.figure("fastest")
    last: Any = r.figure("last")
    best = f"; the fastest tried, {_where(fastest)}, takes {fastest.days:.3g} days" if fastest is not None else ""
    if fastest is None and last is not None:
        best = f"; {_where(last)}: {say(last.note)}"
    return f"no {r.figure('chip')} slice up to {r.figure('most'):,} chips meets the goal{best}"


def _goal_over_budget(r: Reason) -> str:
    days: Any = r.figure("max_days")
    found: Any = r.figure("found")
    what = f"the smallest slice meeting {days:g} days" if days is not None else "the cheapest slice"
    return f"{what}, {_where(found)}, costs ${found.cost_usd:,.0f} > ${r.figure('max_cost_usd'):,.0f}"


def memory_text(mem: Any) -> str:
    """A serving ChipMemory (plan/serve/layout.py) as its sum: weights + KV cache against the usable bytes."""
    return (
        f"weights {format_bytes(mem.weights_bytes)} + KV cache {format_bytes(mem.kv_cache_bytes)} = "
        f"{format_bytes(mem.total_bytes)} of {format_bytes(mem.usable_bytes)} usable per chip"
    )


def _fills(r: Reason) -> str:
    """The KV cache of a layout's largest batch filling HBM."""
    return f"KV cache of {plural(_f(r, 'fit'), 'sequence')} at {r.figure('context')} tokens fills HBM " \
        f"({memory_text(r.figure('memory'))})"  # fmt: skip


def _wanted(r: Reason) -> str:
    step, ttft = _f(r, "max_step_s"), _f(r, "max_ttft_s")
    targets = [f"step <= {format_duration(step)}" if step else "", f"TTFT <= {format_duration(ttft)}" if ttft else ""]
    return " and ".join(t for t in targets if t) or "no latency target"


def _f(r: Reason, name: str) -> Any:
    """A figure as its formatter takes it (figures are typed per code, in rooftop.reasons)."""
    return r.figure(name)


def _d(r: Reason, name: str) -> str:
    return format_duration(_f(r, name))


def _b(r: Reason, name: str) -> str:
    return format_bytes(_f(r, name))


def _n(r: Reason, name: str, say: Say) -> str:
    """A figure that is itself a note (a reason quoted in a reason), as its words."""
    return say(_f(r, name))


def _under_load(r: Reason, say: Say) -> str:
    rate = _f(r, "requests_per_s")
    load = f"{rate:g} requests/s" if rate is not None else f"{r.figure('concurrency')} concurrent requests"
    running = _f(r, "running")
    return (
        f"under {load}: {_n(r, 'reason', say)}; TPOT {_d(r, 'tpot_s')}, TTFT {_d(r, 'ttft_s')} with "
        f"{running:.3g} sequences running per replica (shown at batch {r.figure('batch')})"
    )


def _steady(r: Reason) -> str:
    figures = dict(r.figures)
    if "clients" in figures:
        load = f"{figures['clients']} clients per replica, {_f(r, 'served'):.4g} requests/s"
    else:
        rate, share, sustained = _f(r, "requests_per_s"), _f(r, "share"), _f(r, "sustained")
        load = f"{rate:.4g} requests/s, {format_percent(share)} of the {sustained:.4g} sustained"
    pool = ""
    if figures["blocks"] is not None:
        used = f"{format_percent(_f(r, 'blocks_used'))} of the {r.figure('blocks')} KV blocks in use"
        pool = f", {used}, {r.figure('preemptions')} preemptions"
    return (
        f"{load}: {_f(r, 'decode_batch'):.3g} sequences decode per step on average, "
        f"{_f(r, 'prefill_tokens'):.4g} prompt tokens prefilled per step{pool}"
    )


def _compute_bound_from(r: Reason) -> str:
    cb = r.figure("compute_bound_batch")
    return f"compute-bound only from batch ~{cb}" if cb else "not compute-bound at any batch"


def _crosses(r: Reason) -> str:
    """An axis (tp, pp) of some layouts over the scale-out network, and how its communication is priced."""
    tp = r.code is ReasonCode.TP_CROSSES_DOMAINS
    switched = r.figure("switched")
    domains, net = ("NVLink domains", "scale-out fabric") if switched else ("slices", "data-center network")
    fast = "NVLink" if switched else "ICI"
    rates = (
        f"{format_rate(_f(r, 'dcn_bytes_per_s'))} per chip and {_d(r, 'scaleout_latency_s')} a hop, "
        f"against {format_rate(_f(r, 'ici_bytes_per_s'))} per chip over {fast}"
    )
    if tp:
        how = (
            f"its {plural(_f(r, 'all_reduces'), 'all-reduce')} per layer are priced hierarchically: reduce-scatter "
            f"and all-gather over {fast} inside each, the all-reduce between them over the {net} ({rates})"
        )
        if r.figure("split"):
            how += (
                "; under attn_dp the all-gather before and the reduce-scatter after each MLP, and under kv_batch "
                "the all-to-alls of attention, are staged over the same links"
            )
    else:
        how = f"the activations sent between its stages cross the {net} ({rates})"
    unit = "chip" if tp else "stage"
    where = [f"{name} (over {n} domains, {plural(k, unit)} in each)" for name, n, k in _f(r, "layouts")]
    more = _f(r, "more")
    listed = ", ".join(where) + (f" and {plural(more, 'more layout')}" if more else "")
    return f"{'tp' if tp else 'pp'} crosses {domains} in {listed}: {how}"


def _pools(r: Reason) -> str:
    return f"({r.figure('prefill')} prefill + {r.figure('decode')} decode)"


def _names(r: Reason) -> str:
    return f"{r.figure('prefill_chip')} prefill, {r.figure('decode_chip')} decode"


def _kv_transfer(r: Reason, say: Say) -> str:
    chip = r.figure("chip")
    over = "(the slower side)" if chip is None else f"over {chip}'s data-center links"
    return f"{_n(r, 'reason', say)}; KV transfer {_b(r, 'bytes')} per request in {_d(r, 'seconds')} {over}"


def _split_dollars(r: Reason) -> str:
    pc, dc = r.figure("prefill_chip"), r.figure("decode_chip")
    return (
        f"${_f(r, 'usd_per_hour'):.4g}/h ({r.figure('prefill')} {pc} + {r.figure('decode')} {dc}) vs "
        f"${_f(r, 'colocated_usd_per_hour'):.4g}/h ({r.figure('colocated')} {pc} colocated)"
    )


#: the words of each code from its figures alone
_WORDS: dict[ReasonCode, Callable[[Reason], str]] = {
    ReasonCode.GOAL_OVER_BUDGET: _goal_over_budget,
    ReasonCode.NO_LAYOUT_FITS: lambda r: "no layout fits in memory",
    ReasonCode.NO_VALID_LAYOUT: lambda r: "no valid layout on so many chips",
    ReasonCode.SERVE_GOAL_UNMET: lambda r: f"no layout of {r.figure('chip')} meets the targets at any replica count",
    ReasonCode.NO_PRICE: lambda r: f"chip {r.figure('chip')} has no catalog price: cost is null "
    "(pass --price-per-chip-hour)",
    ReasonCode.CONTEXT_OVER_MAX: lambda r: f"prompt + generation = {r.figure('tokens')} tokens exceeds "
    f"{r.figure('model')}'s max_seq_len {r.figure('max_seq_len')}; priced anyway",
    ReasonCode.LAYOUT_SKIPPED: lambda r: f"layout {r.figure('layout')} skipped: {r.figure('error')}",
    ReasonCode.TP_CROSSES_DOMAINS: _crosses,
    ReasonCode.PP_CROSSES_DOMAINS: _crosses,
    ReasonCode.DISAGG_NONE: lambda r: "no layout meets the latency targets either way",
    ReasonCode.DISAGG_NO_SPLIT: lambda r: "no prefill/decode split meets the targets",
    ReasonCode.COLOCATED_MISSES: lambda r: "colocated serving cannot meet the targets: prefills interrupting the "
    "decodes push the time per output token or TTFT over them",
    ReasonCode.DISAGG_FEWER_CHIPS: lambda r: f"{plural(_f(r, 'prefill') + _f(r, 'decode'), 'chip')} {_pools(r)} vs "
    f"{r.figure('colocated')}",
    ReasonCode.COLOCATED_FEWER_CHIPS: lambda r: f"{plural(_f(r, 'colocated'), 'chip')} vs "
    f"{_f(r, 'prefill') + _f(r, 'decode')} {_pools(r)}",
    ReasonCode.SPLIT_NONE: lambda r: f"no {_names(r)} split meets the targets",
    ReasonCode.SPLIT_COLOCATED_MISSES: lambda r: f"{_names(r)}: colocated serving on {r.figure('prefill_chip')} "
    "cannot meet the targets",
    ReasonCode.SPLIT_DOLLARS: _split_dollars,
    ReasonCode.SPLIT_CHIPS: lambda r: f"{r.figure('prefill')} + {r.figure('decode')} chips ({_names(r)}) vs "
    f"{r.figure('colocated')} colocated (no price to compare dollars)",
    ReasonCode.NO_MATRIX_PEAK: lambda r: f"{r.figure('chip')} has no {r.figure('wanted')} matrix peak: the "
    f"{r.figure('wanted')} matmuls (weights {r.figure('weights')}, activations {r.figure('activations')}) are priced "
    f"at its {r.figure('used')} peak, {format_rate(_f(r, 'peak'), 'FLOP/s')}; the bytes stored and read "
    "stay those of each dtype",
    ReasonCode.POINT_NO_FIT: lambda r: f"does not fit: {memory_text(r.figure('memory'))}",
    ReasonCode.MEMORY_BOUND: lambda r: f"memory-bound: weights {_b(r, 'weights_bytes')} ({_d(r, 'weights_s')}) + KV "
    f"cache {_b(r, 'kv_cache_bytes')} ({_d(r, 'kv_cache_s')}) read per chip each step",
    ReasonCode.COMPUTE_BOUND: lambda r: f"compute-bound: {r.figure('flops'):.3g} FLOPs per chip per step "
    f"({_d(r, 'compute_s')})",
    ReasonCode.COLLECTIVE_BOUND: lambda r: f"collective-latency-bound: {r.figure('collectives'):g} collectives per "
    f"step take {_d(r, 'collective_s')}",
    ReasonCode.FIXED_COSTS: lambda r: f"fixed costs dominate: kernel launches {_d(r, 'launch_s')} + scheduling "
    f"{_d(r, 'scheduling_s')}",
    ReasonCode.LAYOUT_NO_FIT: lambda r: "does not fit even one sequence per replica: "
    f"{memory_text(r.figure('memory'))}",
    ReasonCode.LAYOUT_COMPUTE_BOUND: lambda r: f"compute-bound from batch ~{r.figure('batch')}: the weight matmuls' "
    "FLOPs outlast their weight reads, so tokens/s per chip stops growing with batch (memory would allow "
    f"{r.figure('fit')}: {_fills(r)})",
    ReasonCode.LAYOUT_BATCH_CAP: lambda r: f"batch capped at {r.figure('cap')} per replica (memory allows "
    f"{r.figure('fit')}); still memory-bound there",
    ReasonCode.LAYOUT_MEMORY_CAPACITY: lambda r: f"memory capacity: {_fills(r)}; {_compute_bound_from(r)}",
    ReasonCode.NO_POINT_FITS: lambda r: "no layout and batch fit in memory",
    ReasonCode.NO_POINT_MEETS: lambda r: f"no point meets {_wanted(r)}: the fastest step is {_d(r, 'step_s')} "
    f"({r.figure('layout')}, batch {r.figure('batch')}), the fastest TTFT {_d(r, 'ttft_s')}",
    ReasonCode.CHOSEN: lambda r: f"highest tokens/s per chip with {_wanted(r)}: {r.figure('layout')}, batch "
    f"{r.figure('batch')} per replica, {r.figure('tokens_per_s_per_chip'):.4g} tokens/s per chip at "
    f"{_d(r, 'step_s')} per step",
    ReasonCode.SATURATED: lambda r: f"saturated: {_f(r, 'requests_per_s'):.4g} requests/s exceed the "
    f"{_f(r, 'sustained'):.4g} this layout sustains ({r.figure('replicas')} x {_f(r, 'per_replica'):.4g}); the queue "
    "grows without bound, so no TTFT",
    ReasonCode.KV_POOL_TOO_SMALL: lambda r: "the KV pool cannot hold one request to its last token",
    ReasonCode.UNDER_LOAD_STEADY: _steady,
    ReasonCode.NO_LAYOUT_HOLDS: lambda r: "no layout holds the model and one sequence",
    ReasonCode.ALL_SATURATED: lambda r: "every layout is saturated: the queue grows without bound; the most any "
    f"sustains is {_f(r, 'most'):.4g} requests/s ({r.figure('layout')})",
    ReasonCode.NONE_MEETS_UNDER_LOAD: lambda r: "no unsaturated layout meets the latency targets under this load",
    ReasonCode.LOWEST_LATENCY: lambda r: "lowest mean request latency (TTFT + (G - 1) x TPOT) under the targets: "
    f"{r.figure('layout')}",
    ReasonCode.MOST_TOKENS: lambda r: f"most output tokens/s under the targets: {r.figure('layout')}",
}  # fmt: skip


#: the words of the codes that quote another note (a trial's refusal, a point's bound), said by ``say``
_QUOTING: dict[ReasonCode, Callable[[Reason, Say], str]] = {
    ReasonCode.GOAL_MET: _goal_met,
    ReasonCode.GOAL_UNMET: _goal_unmet,
    ReasonCode.LARGEST_SWEPT: lambda r, say: f"{_n(r, 'point', say)}; largest batch swept: {_n(r, 'layout', say)}",
    ReasonCode.STATIC_CHOICE: lambda r, say: ("without the load, the static sweep would choose: "
                                              if r.figure("chosen") else "without the load: ") + _n(r, "reason", say),
    ReasonCode.UNDER_LOAD: lambda r, say: f"under the load: {_n(r, 'reason', say)}",
    ReasonCode.UNDER_LOAD_CHOSEN: _under_load,
    ReasonCode.KV_TRANSFER: _kv_transfer,
}  # fmt: skip


def plan_sentences(say: Say) -> dict[ReasonCode, Callable[[Reason], str]]:
    """Each plan/ code's sentence, a note it quotes said by ``say`` (report.reasons.note_text)."""
    return {**_WORDS, **{code: _saying(words, say) for code, words in _QUOTING.items()}}


def _saying(words: Callable[[Reason, Say], str], say: Say) -> Callable[[Reason], str]:
    return lambda r: words(r, say)
