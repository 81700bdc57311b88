"""The layouts a serving plan sweeps (``candidate_layouts``) and the smallest slice that holds the
model (``min_slice``): tp inside the fast domain (an NVLink domain on GPUs, the slice on TPUs) with
replicas for the rest; when nothing holds the weights that way, pipeline stages and tp across fast
domains too; each TP group also with its cache split over the batch (kv_batch) and, for MoE models with
ep = tp, attention data-parallel (attn_dp; layout.py). Pins (``ServingRequest.fix``) replace options.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rooftop.errors import InvalidConfigError
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Topology
from rooftop.model.config import TransformerConfig
from rooftop.plan.fix import FIX, pinned_text
from rooftop.plan.serve import layout as sl
from rooftop.plan.serve.layout import ServingLayout
from rooftop.reasons import OptionError
from rooftop.units import divisors, plural

if TYPE_CHECKING:
    from rooftop.plan.serve.sweep import ServingRequest


def valid_layout(cfg: TransformerConfig, layout: ServingLayout) -> bool:
    try:
        sl.validate_layout(cfg, layout)
    except InvalidConfigError:
        return False
    return True


def _tp_limit(chip: Chip, topology: Topology) -> int:
    """Tensor parallelism stays inside the fast domain: one NVLink domain on GPUs, the slice on TPUs."""
    return topology.dims[-1].size if chip.topology.kind == "switched" else topology.num_chips


def candidate_layouts(req: ServingRequest) -> list[ServingLayout]:
    """tp over divisors of the slice inside the fast domain, replicas for the rest; when no pp=1
    layout holds the weights, pipeline stages too, and tp across fast domains (over the scale-out
    network); ep in {1, tp} for MoE models. A pinned degree (``req.fix``) replaces its options: a
    pinned tp may span fast domains, a pinned pp is used whether or not pp=1 would hold the weights."""
    cfg, n, pins = req.cfg, req.topology.num_chips, req.pins
    limit = _tp_limit(req.chip, req.topology)
    tps = [pins["tp"]] if "tp" in pins else _tp_options(req, limit)
    if "pp" in pins:
        pairs = [(t, pins["pp"]) for t in tps if n % (t * pins["pp"]) == 0]
    else:
        pairs = [(t, 1) for t in tps]
        if not any(_weights_fit(req, ServingLayout(tp=t)) for t, _ in pairs if valid_layout(cfg, ServingLayout(tp=t))):
            pairs += [(t, p) for t in tps for p in divisors(n // t) if p > 1]
            if "tp" not in pins and "ep" not in pins:  # a replica over several fast domains
                pairs += [(t, 1) for t in divisors(n) if t > limit]
    out = []
    for t, p in pairs:
        eps = [pins["ep"]] if "ep" in pins else [1] + ([t] if cfg.moe and t > 1 and cfg.moe.n_experts % t == 0 else [])
        for e in eps:
            for split in _splits(req, t, e):
                if t % e or t % max(split.values(), default=1):
                    continue
                kv_batch, attn_dp = split.get("kv_batch", 1), split.get("attn_dp", 1)
                layout = ServingLayout(tp=t, ep=e, pp=p, replicas=n // (t * p), kv_batch=kv_batch, attn_dp=attn_dp)
                layout = req.engine(layout)
                if valid_layout(cfg, layout):
                    out.append(layout)
    if pins and not out:
        raise OptionError(
            FIX,
            f" {pinned_text(pins)}: no valid layout of {plural(n, 'chip')} for {cfg.name} honours it "
            "(tp must be a multiple of ep, attn_dp and kv_batch, and tp x pp must divide the chips)",
        )
    return out


def _splits(req: ServingRequest, tp: int, ep: int) -> list[dict[str, int]]:
    """The ways a TP group of ``tp`` chips splits its attention and cache (layout.py): pinned, or none,
    the cache over the batch where the KV heads leave chips holding copies (GQA with tp > K), and
    attention data parallelism over the whole group where the experts spread over it (MoE, ep = tp)."""
    pins = req.pins
    if "attn_dp" in pins or "kv_batch" in pins:
        return [{k: pins[k] for k in ("attn_dp", "kv_batch") if k in pins}]
    out: list[dict[str, int]] = [{}]
    if req.cfg.tp_kv_heads is not None and (z := tp // sl.kv_shards(req.cfg, tp)) > 1:
        out.append({"kv_batch": z})
    if req.cfg.moe is not None and tp > 1 and ep == tp:
        out.append({"attn_dp": tp})
    return out


def _tp_options(req: ServingRequest, limit: int) -> list[int]:
    """Unpinned tp: the divisors of the slice inside the fast domain; with a pinned ep, attn_dp or
    kv_batch, their multiples (beyond the fast domain when none inside is one)."""
    n, pins = req.topology.num_chips, req.pins
    step = math.lcm(*(pins.get(k, 1) for k in ("ep", "attn_dp", "kv_batch")))
    inside = [t for t in divisors(n) if t <= limit and t % step == 0]
    return inside or [t for t in divisors(n) if t % step == 0]


def _weights_fit(req: ServingRequest, layout: ServingLayout) -> bool:
    return (
        sl.weights_per_chip_bytes(req.cfg, layout, req.dtypes.weights)
        < req.chip.hbm_capacity_bytes * req.eff.usable_hbm_fraction
    )


@dataclass(frozen=True)
class MinSlice:
    """The fewest chips that hold the model and one sequence's cache, the layout, and its memory."""

    chips: int
    layout: ServingLayout
    memory: sl.ChipMemory


def min_slice(req: ServingRequest) -> MinSlice | None:
    """The fewest chips (powers of two) with a layout whose weights and one sequence's cache at
    the largest context fit: tp as large as the fast domain allows, then pipeline stages."""
    spec = req.chip.topology
    domain = spec.domain_sizes[0] if spec.kind == "switched" else 1 << 30
    for n in (1 << k for k in range(13)):
        if spec.max_chips and n > spec.max_chips:
            break
        for t in sorted((t for t in divisors(n) if t <= domain), reverse=True):
            layout = req.engine(ServingLayout(tp=t, pp=n // t))
            if not valid_layout(req.cfg, layout):
                continue
            mem = sl.chip_memory(req.cfg, req.chip, layout, layout.pp, req.max_context_len, req.dtypes, req.eff)
            if mem.fits:
                return MinSlice(n, layout, mem)
    return None
