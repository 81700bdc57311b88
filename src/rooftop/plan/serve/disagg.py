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
from rooftop.units import SECONDS_PER_HOUR, format_bytes, format_duration, plural

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
    reason: str
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


def _costs(plan: ServingPlan, rate: float, pre: Pool | None, dec: Pool | None, col: Pool | None) -> dict[str, Any]:
    req = plan.request
    price = req.price
    if price is None:
        return {"disaggregated": None, "colocated": None}
    usd_per_chip_s = price / SECONDS_PER_HOUR
    out: dict[str, Any] = {"disaggregated": None, "colocated": None}
    if pre and dec:
        out["disaggregated"] = {
            "input": 1e6 * usd_per_chip_s * pre.chips / (rate * req.prompt_len),
            "output": 1e6 * usd_per_chip_s * dec.chips / (rate * req.gen_len),
        }
    if col:
        p = plan.points[col.point]
        share = p.prefill_batch_s / (req.gen_len * p.step_time_s + p.prefill_batch_s)
        total = usd_per_chip_s * col.chips
        out["colocated"] = {
            "input": 1e6 * total * share / (rate * req.prompt_len),
            "output": 1e6 * total * (1 - share) / (rate * req.gen_len),
        }
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
    if disagg_chips is None and col is None:
        rec, why = "none", "no layout meets the latency targets either way"
    elif disagg_chips is None:
        rec, why = "colocated", "no prefill/decode split meets the targets"
    elif col is None:
        rec, why = (
            "disaggregated",
            (
                "colocated serving cannot meet the targets: prefills interrupting the decodes push the time per "
                "output token or TTFT over them"
            ),
        )
    elif pre is None or dec is None:  # disagg_chips is set only when both pools are
        raise AssertionError("unreachable")
    elif disagg_chips < col.chips:
        pools = f"({pre.chips} prefill + {dec.chips} decode)"
        rec, why = "disaggregated", f"{plural(disagg_chips, 'chip')} {pools} vs {col.chips}"
    else:
        pools = f"({pre.chips} prefill + {dec.chips} decode)"
        rec, why = "colocated", f"{plural(col.chips, 'chip')} vs {disagg_chips} {pools}"
    if transfer is not None:
        why += (
            f"; KV transfer {format_bytes(nbytes)} per request in {format_duration(transfer)} "
            f"over {req.chip.name}'s data-center links"
        )
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
