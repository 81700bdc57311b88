"""Disaggregated serving: prefill and decode on separate pools of chips, versus both on the same
chips, for a traffic mix of ``requests_per_s`` requests of ``prompt_len`` + ``gen_len`` tokens
(Splitwise, Patel et al. 2024; DistServe, Zhong et al. 2024).

- Prefill pool: replicas of one layout each prefill one prompt at a time (``ttft_s`` of the
  plan's points); replicas = ceil(R x prefill time). The layout with the fewest chips whose
  TTFT (prefill + KV transfer) meets ``max_ttft`` wins.
- Decode pool: the fitting (layout, batch) with step <= ``max_step_latency`` needing the fewest
  chips for R x gen_len tokens/s: replicas = ceil(R x gen_len x step / batch).
- KV transfer: the prompt's cache, kv_cache_bytes(P), leaves the prefill replica's chips in
  parallel over their data-center links (chip.dcn_bytes_per_s each: InfiniBand NIC per GPU, DCN
  per TPU chip): each chip sends its 1 / chips of it to its peer in a decode replica, a permute
  over the scale-out axis between the two pools, timed by cost/collectives.py like every other
  collective: max(bytes / (chips x dcn x network efficiency), one scale-out latency).
- Colocated: the same chips prefill and decode, so every request's prefill interrupts the running
  decodes; its time per output token is (gen_len x step + prefill of b prompts) / gen_len, and
  replicas = ceil(R x gen_len / tokens_per_s per replica).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from rooftop.cost.cost import Comm
from rooftop.cost.roofline import collective_term
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, make_mesh, parse_topology, topology_for_chips
from rooftop.model.memory import kv_cache_bytes
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason
from rooftop.units import usd_per_million_tokens

if TYPE_CHECKING:
    from rooftop.plan.serve.sweep import ServingPlan, ServingPoint


@dataclass(frozen=True)
class Pool:
    point: int  # index into plan.points
    replicas: int
    chips: int
    ttft_s: float
    time_per_output_token_s: float
    utilization: float


@dataclass(frozen=True)
class Disaggregation:
    requests_per_s: float
    prefill: Pool | None
    decode: Pool | None
    colocated: Pool | None
    kv_transfer_bytes: float
    kv_transfer_s: float | None
    kv_transfer_bytes_per_s: float
    recommendation: str
    reason: Note
    cost: dict[str, Any]


def _ceil(x: float) -> int:
    return max(1, math.ceil(x - 1e-9))


def _ok(v: float, limit: float | None) -> bool:
    return limit is None or v <= limit


@lru_cache(maxsize=64)
def _pool_pair(chip: Chip, chips: int) -> Mesh:
    """Two replicas of ``chips`` chips joined by the scale-out network (GPU fabric, TPU DCN), the
    ``pool`` axis between them outermost (a replica smaller than an NVLink domain sits in a whole
    node, the rest of which is idle)."""
    one = topology_for_chips(chip, chips)
    if one.dims[0].link != "fabric":
        return make_mesh(parse_topology(chip, f"2*{one.spec}"), {"pool": 2, "replica": chips})
    nodes, gpus = one.dims[0].size, one.dims[1].size
    domain = gpus if nodes > 1 else min(d for d in chip.topology.domain_sizes if d >= gpus)
    axes = {"pool": 2, "replica": chips, "idle": nodes * domain // chips}
    return make_mesh(parse_topology(chip, f"{2 * nodes}x{domain}"), axes)


def _transfer_s(plan: ServingPlan, p: ServingPoint, nbytes: float) -> float | None:
    chip, eff = plan.request.chip, plan.request.eff
    if chip.dcn_bytes_per_s <= 0:
        return None
    chips = p.layout.chips_per_replica
    return collective_term(Comm("permute", ("pool",), nbytes / chips), _pool_pair(chip, chips), chip, eff).seconds


def _prefill_pool(plan: ServingPlan, rate: float, nbytes: float) -> Pool | None:
    req = plan.request
    best: tuple[tuple[int, float], Pool] | None = None
    seen = set()
    for i, p in enumerate(plan.points):
        if not p.fits or p.layout in seen:
            continue
        seen.add(p.layout)
        transfer = _transfer_s(plan, p, nbytes) or 0.0
        ttft = p.ttft_s + transfer
        if not _ok(ttft, req.max_ttft_s):
            continue
        replicas = _ceil(rate * p.ttft_s)
        chips = replicas * p.layout.chips_per_replica
        pool = Pool(i, replicas, chips, ttft, 0.0, rate * p.ttft_s / replicas)
        if best is None or (chips, ttft) < best[0]:
            best = ((chips, ttft), pool)
    return best[1] if best else None


def _decode_pool(plan: ServingPlan, rate: float, colocated: bool) -> Pool | None:
    req = plan.request
    best: tuple[tuple[int, float], Pool] | None = None
    for i, p in enumerate(plan.points):
        if not p.fits:
            continue
        tpot = (req.gen_len * p.step_time_s + p.prefill_batch_s) / req.gen_len if colocated else p.step_time_s
        if not _ok(tpot, req.max_step_latency_s) or (colocated and not _ok(p.ttft_s, req.max_ttft_s)):
            continue
        per_replica = p.tokens_per_s / p.layout.replicas if colocated else p.batch / p.step_time_s
        replicas = _ceil(rate * req.gen_len / per_replica)
        chips = replicas * p.layout.chips_per_replica
        pool = Pool(i, replicas, chips, p.ttft_s, tpot, rate * req.gen_len / (replicas * per_replica))
        if best is None or (chips, tpot) < best[0]:
            best = ((chips, tpot), pool)
    return best[1] if best else None


def _pool_costs(
    input_price: float, input_chips: float, output_price: float, output_chips: float, rate: float, prompt: int, gen: int
) -> dict[str, float]:
    """$ per million input and output tokens: the chips (or chip-shares) serving each kind at its price per
    chip-hour, over the tokens of ``rate`` requests a second."""
    return {
        "input": usd_per_million_tokens(input_price * input_chips, rate * prompt),
        "output": usd_per_million_tokens(output_price * output_chips, rate * gen),
    }


def _costs(plan: ServingPlan, rate: float, pre: Pool | None, dec: Pool | None, col: Pool | None) -> dict[str, Any]:
    req = plan.request
    price = req.price
    if price is None:
        return {"disaggregated": None, "colocated": None}
    out: dict[str, Any] = {"disaggregated": None, "colocated": None}
    if pre and dec:
        out["disaggregated"] = _pool_costs(price, pre.chips, price, dec.chips, rate, req.prompt_len, req.gen_len)
    if col:
        p = plan.points[col.point]
        share = p.prefill_batch_s / (req.gen_len * p.step_time_s + p.prefill_batch_s)
        out["colocated"] = _pool_costs(price, col.chips * share, price, col.chips * (1 - share), rate,
                                       req.prompt_len, req.gen_len)  # fmt: skip
    return out


def disaggregate(plan: ServingPlan, requests_per_s: float) -> Disaggregation:
    """Chips for prefill and for decode at ``requests_per_s``, the KV transfer between them, and
    the colocated alternative (module docstring)."""
    req = plan.request
    nbytes = kv_cache_bytes(req.cfg, 1, req.prompt_len, req.dtypes.kv_cache)
    pre = _prefill_pool(plan, requests_per_s, nbytes)
    dec = _decode_pool(plan, requests_per_s, colocated=False)
    col = _decode_pool(plan, requests_per_s, colocated=True)
    transfer = _transfer_s(plan, plan.points[pre.point], nbytes) if pre else None
    disagg_chips = pre.chips + dec.chips if pre and dec else None
    why: Note
    if disagg_chips is None and col is None:
        rec, why = "none", Reason.of(ReasonCode.DISAGG_NONE)
    elif disagg_chips is None:
        rec, why = "colocated", Reason.of(ReasonCode.DISAGG_NO_SPLIT)
    elif col is None:
        rec, why = "disaggregated", Reason.of(ReasonCode.COLOCATED_MISSES)
    elif pre is None or dec is None:  # disagg_chips is set only when both pools are
        raise AssertionError("unreachable")
    else:
        rec = "disaggregated" if disagg_chips < col.chips else "colocated"
        code = ReasonCode.DISAGG_FEWER_CHIPS if rec == "disaggregated" else ReasonCode.COLOCATED_FEWER_CHIPS
        why = Reason.of(code, prefill=pre.chips, decode=dec.chips, colocated=col.chips)
    if transfer is not None:
        why = Reason.of(ReasonCode.KV_TRANSFER, reason=why, bytes=nbytes, seconds=transfer, chip=req.chip.name)
    return Disaggregation(
        requests_per_s,
        pre,
        dec,
        col,
        nbytes,
        transfer,
        requests_per_s * nbytes,
        rec,
        why,
        _costs(plan, requests_per_s, pre, dec, col),
    )


def split_chips(plan: ServingPlan, decode_plan: ServingPlan, requests_per_s: float) -> Disaggregation:
    """Prefill on ``plan``'s chip and decode on ``decode_plan``'s (the same model, lengths, types and
    targets on another chip, ``--decode-chip``): the prefill pool from ``plan``, the decode pool from
    ``decode_plan``, each as ``disaggregate`` picks them; the KV transfer leaves the prefill replica
    over its chips' links and enters the decode replica over theirs, so it takes the slower of the
    two permutes; dollars per million tokens at each pool's own price. The colocated alternative is
    ``plan``'s chip alone; the recommendation compares dollars per hour when both chips have a price,
    else chips."""
    req = plan.request
    nbytes = kv_cache_bytes(req.cfg, 1, req.prompt_len, req.dtypes.kv_cache)
    pre = _prefill_pool(plan, requests_per_s, nbytes)
    dec = _decode_pool(decode_plan, requests_per_s, colocated=False)
    col = _decode_pool(plan, requests_per_s, colocated=True)
    sides = [_transfer_s(plan, plan.points[pre.point], nbytes) if pre else None]
    sides.append(_transfer_s(decode_plan, decode_plan.points[dec.point], nbytes) if dec else None)
    transfer = max((s for s in sides if s is not None), default=None)
    p_pre, p_dec = req.price, decode_plan.request.price
    cost: dict[str, Any] = {
        "disaggregated": None,
        "colocated": _costs(plan, requests_per_s, None, None, col)["colocated"],
    }
    if pre and dec and p_pre is not None and p_dec is not None:
        cost["disaggregated"] = _pool_costs(p_pre, pre.chips, p_dec, dec.chips, requests_per_s, req.prompt_len,
                                            req.gen_len)  # fmt: skip
    names = {"prefill_chip": req.chip.name, "decode_chip": decode_plan.request.chip.name}
    why: Note
    if not (pre and dec):
        rec, why = ("colocated" if col else "none"), Reason.of(ReasonCode.SPLIT_NONE, **names)
    elif col is None:
        rec, why = "disaggregated", Reason.of(ReasonCode.SPLIT_COLOCATED_MISSES, **names)
    else:
        pools = {"prefill": pre.chips, "decode": dec.chips, "colocated": col.chips, **names}
        if p_pre is not None and p_dec is not None:
            split, alone = pre.chips * p_pre + dec.chips * p_dec, col.chips * p_pre
            rec = "disaggregated" if split < alone else "colocated"
            why = Reason.of(ReasonCode.SPLIT_DOLLARS, usd_per_hour=split, colocated_usd_per_hour=alone, **pools)
        else:
            rec = "disaggregated" if pre.chips + dec.chips < col.chips else "colocated"
            why = Reason.of(ReasonCode.SPLIT_CHIPS, **pools)
    if transfer is not None:  # chip None: the slower of the two sides
        why = Reason.of(ReasonCode.KV_TRANSFER, reason=why, bytes=nbytes, seconds=transfer, chip=None)
    return Disaggregation(requests_per_s, pre, dec, col, nbytes, transfer, requests_per_s * nbytes, rec, why, cost)
