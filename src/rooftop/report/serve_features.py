"""``rooftop serve``'s options beyond the frontier: latency percentiles of the simulated requests
(``--percentiles``, plan/serve/percentiles.py), the prefill a prefix cache saves (``--prefix-len``,
plan/serve/prefix.py), speculative decoding and MTP (``--draft``, ``--mtp``,
plan/serve/speculative.py) and decode on another chip (``--decode-chip``, plan/serve/disagg.py):
the JSON objects and the terminal's lines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rooftop.plan.serve.disagg import Disaggregation
from rooftop.plan.serve.percentiles import QUANTILES, TARGET_HALF_WIDTH, Percentiles
from rooftop.plan.serve.prefix import PrefixCache
from rooftop.plan.serve.speculative import Speculation
from rooftop.report.reasons import note_text
from rooftop.report.serve import disaggregation_dict
from rooftop.report.table import say
from rooftop.units import format_duration, format_percent

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.plan.serve.sweep import ServingPlan

KEYS = tuple(f"p{round(q * 100)}" for q in QUANTILES)


def percentiles_dict(p: Percentiles) -> dict[str, Any]:
    return {
        "requests": p.requests,
        "measured": p.measured,
        "seed": p.seed,
        "ttft_s": dict(zip(KEYS, p.ttft_s, strict=True)),
        "tpot_s": dict(zip(KEYS, p.tpot_s, strict=True)),
        "e2e_s": dict(zip(KEYS, p.e2e_s, strict=True)),
        "half_width": {
            name: dict(zip(KEYS, w, strict=True))
            for name, w in zip(("ttft_s", "tpot_s", "e2e_s"), p.half_widths, strict=True)
        },
        "target_half_width": TARGET_HALF_WIDTH,
    }


def render_percentiles(console: Console, p: Percentiles) -> None:
    say(
        console,
        f"latency percentiles ({p.measured} simulated requests measured, {p.requests} asked for, the first arrivals "
        f"left out as warm-up; Poisson arrivals, seed {p.seed}; without the engine's fixed TTFT stages; 95% "
        f"confidence within ±{format_percent(max((max(w) for w in p.half_widths), default=0.0), 1)}):",
    )
    for name, values in (("TTFT", p.ttft_s), ("TPOT", p.tpot_s), ("end-to-end", p.e2e_s)):
        say(console, f"  {name}: " + ", ".join(f"{k} {format_duration(v)}" for k, v in zip(KEYS, values, strict=True)))


def prefix_dict(p: PrefixCache) -> dict[str, Any]:
    return {
        "prefix_len": p.prefix_len,
        "hit_rate": p.hit_rate,
        "miss_prefill_s": p.miss.time_s,
        "hit_prefill_s": p.hit.time_s,
        "expected_prefill_s": p.expected_prefill_s,
        "miss_flops": p.miss.flops,
        "hit_flops": p.hit.flops,
        "expected_flops": p.expected_flops,
        "saved_fraction": p.saved_fraction,
    }


def render_prefix(console: Console, p: PrefixCache) -> None:
    say(
        console,
        f"prefix cache ({p.prefix_len} prompt tokens cached, {format_percent(p.hit_rate)} of requests hit): "
        "one prompt's prefill "
        f"{format_duration(p.miss.time_s)} on a miss, {format_duration(p.hit.time_s)} on a hit (the other tokens "
        f"only, attending to the whole prompt), {format_duration(p.expected_prefill_s)} expected: "
        f"{format_percent(p.saved_fraction)} saved; the cached KV still holds its blocks",
    )


def speculation_dict(s: Speculation) -> dict[str, Any]:
    return {
        "kind": s.kind,
        "drafted_tokens": s.k,
        "accept_rate": s.accept_rate,
        "tokens_per_step": s.tokens_per_step,
        "verify_s": s.verify.time_s,
        "draft_step_s": s.draft_step.time_s,
        "step_s": s.step_s,
        "tpot_s": s.tpot_s,
        "plain_step_s": s.plain.time_s,
        "speedup": s.speedup,
    }


def render_speculation(console: Console, s: Speculation) -> None:
    what = "draft model" if s.kind == "draft" else "MTP modules"
    say(
        console,
        f"speculative decoding ({what}, {s.k} drafted tokens, {s.accept_rate:g} accepted each): "
        f"1 + a + ... + a^{s.k} = {s.tokens_per_step:.3g} tokens per step (Leviathan et al. 2023) of "
        f"{format_duration(s.step_s)} (verify {s.k + 1} tokens {format_duration(s.verify.time_s)} + {s.k} x "
        f"{format_duration(s.draft_step.time_s)} drafting): {format_duration(s.tpot_s)} per token, "
        f"{s.speedup:.2f}x the plain step's {format_duration(s.plain.time_s)}",
    )


def split_dict(plan: ServingPlan, decode_plan: ServingPlan, d: Disaggregation) -> dict[str, Any]:
    out = disaggregation_dict(plan, d)
    out["decode"] = disaggregation_dict(decode_plan, d)["decode"]
    out["prefill_chip"], out["decode_chip"] = plan.request.chip.name, decode_plan.request.chip.name
    out["kv_transfer"]["link_bytes_per_s_per_chip"] = None
    out["kv_transfer"]["prefill_link_bytes_per_s_per_chip"] = plan.request.chip.dcn_bytes_per_s
    out["kv_transfer"]["decode_link_bytes_per_s_per_chip"] = decode_plan.request.chip.dcn_bytes_per_s
    return out


def render_split(console: Console, d: Disaggregation) -> None:
    say(
        console,
        f"disaggregation with a decode chip at {d.requests_per_s:g} req/s: {d.recommendation} ({note_text(d.reason)})",
    )
