"""How a serving step's weight matmuls use the matrix unit (cost/gemm.py's shape model): each op's per-chip
matmul under a serving layout (``chip_gemm``), a mixed step's matmuls over decode and prompt-chunk rows
together (``mixed_gemms``), the matmul group's shape efficiency (``matmul_shape_factor``) and its estimate
with the matrix compute divided by it (``shaped_estimate``). plan/serve/phase.py prices the steps with them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rooftop.cost.cost import Cost, Gemm, OpTag
from rooftop.cost.efficiency import Efficiency
from rooftop.cost.figures import FlopsFigures
from rooftop.cost.gemm import TileModel, shape_efficiency_array, tile_model
from rooftop.cost.roofline import Estimate
from rooftop.hardware.chip import Chip
from rooftop.model.config import TransformerConfig
from rooftop.sharding import tensor


def chip_gemm(gemm: Gemm, tag: OpTag, s: tensor.Share, cfg: TransformerConfig) -> Gemm:
    """One chip's matmul of an op: the weight split (1 / ``s.weights`` ways) cuts the output features of a
    column-parallel matmul or the contraction of a row-parallel one, the rest of the FLOPs share the rows
    (attention data parallelism's requests); a routed expert's rows are its share of the assignments
    (m / T each for the T = E (1 - (1 - k/E)^tokens) experts uniform routing touches, over the T x
    ``s.weights`` experts and expert shards a chip holds)."""
    ways = 1.0 / s.weights if s.weights > 0 else 1.0
    rows = gemm.m * min(1.0, s.flops * ways)
    if tag.expert and cfg.moe is not None:  # the experts the tokens touch (uniform routing), each its rows
        touched = cfg.moe.touched(gemm.m / cfg.moe.top_k)
        return Gemm(rows / touched, gemm.n, gemm.k, max(1.0, touched / ways), gemm.out_bytes)
    if tag.row_parallel:
        return Gemm(rows, gemm.n, gemm.k / ways, gemm.batch, gemm.out_bytes)
    return Gemm(rows, gemm.n / ways, gemm.k, gemm.batch, gemm.out_bytes)


def mixed_gemms(
    dec: tuple[tuple[Gemm, float], ...], pre: tuple[tuple[Gemm, float], ...], share: float
) -> tuple[tuple[Gemm, float], ...]:
    """A mixed step's matmuls: each weight matmul runs once over the decode rows and the prompt chunk's rows
    together (the same op in both, in model order); ``share`` of one prompt's prefill matmuls."""
    scaled = tuple((replace(g, m=g.m * share), f * share) for g, f in pre if share > 0)
    if not dec:
        return scaled
    if len(dec) != len(scaled) or any((a.n, a.k) != (b.n, b.k) for (a, _), (b, _) in zip(dec, scaled, strict=True)):
        return dec + scaled  # not the same ops (MLA decodes with absorbed matmuls): each on its own
    return tuple((_together(a, b), fa + fb) for (a, fa), (b, fb) in zip(dec, scaled, strict=True))


def _together(a: Gemm, b: Gemm) -> Gemm:
    """One matmul over both parts' rows. Batched (routed experts: ``batch`` experts of ``m`` rows each),
    the rows spread over the experts the larger part touches (a lower bound of those both touch together)."""
    batch = max(a.batch, b.batch)
    return replace(a, m=(a.m * a.batch + b.m * b.batch) / batch, batch=batch)


def matmul_shape_factor(
    gemms: tuple[tuple[Gemm, float], ...], matmuls: Cost, chip: Chip, eff: Efficiency
) -> float | None:
    """The shape efficiency of a step's matmul group (``matmuls``, its weight matmuls ``gemms``), FLOP-weighted
    as the matmuls' times add; None when the model is off or the chip has none."""
    if not eff.matrix_shape or not gemms:
        return None
    model = tile_model(chip)
    if model is None:
        return None
    dtype = next((d for (u, d) in matmuls.flops_by if u == "matrix"), "bf16")
    peak = chip.flops_rate(dtype, "matrix")[1]
    matrix = sum(v for (u, _), v in matmuls.flops_by.items() if u == "matrix")
    shaped = sum(f for _, f in gemms)
    if matrix <= 0 or shaped <= 0:
        return None
    known = _efficiencies(model, [g for g, _ in gemms], peak, chip.hbm_bytes_per_s)
    slow = 0.0
    for g, f in gemms:
        slow += f / known[g]
    return matrix / (slow + max(0.0, matrix - shaped))


#: shape efficiencies found so far, by (tile model, matrix peak, HBM bytes/s), then by matmul: a serving plan
#: prices the same few matmul shapes at many steps (the fluid balance's and the request simulation's
#: batches), so each distinct shape is worked out once (exactly: a table, not buckets), at most _KNOWN_MAX
_KNOWN: dict[tuple[TileModel, float, float], dict[Gemm, float]] = {}
_KNOWN_MAX = 1 << 16


def _efficiencies(model: TileModel, gemms: list[Gemm], peak: float, hbm_bytes_per_s: float) -> dict[Gemm, float]:
    """The shape efficiency of each of ``gemms`` (cost/gemm.shape_efficiency_array), the ones not met before
    worked out together, one call per output element size."""
    known = _KNOWN.setdefault((model, peak, hbm_bytes_per_s), {})
    missing = [g for g in dict.fromkeys(gemms) if g not in known]
    if not missing:
        return known
    if len(known) + len(missing) > _KNOWN_MAX:
        known.clear()
        missing = list(dict.fromkeys(gemms))
    for out_bytes in dict.fromkeys(g.out_bytes for g in missing):
        group = [g for g in missing if g.out_bytes == out_bytes]
        m, n, k, batch = (np.array([getattr(g, a) for g in group], dtype=float) for a in ("m", "n", "k", "batch"))
        values = shape_efficiency_array(model, m, n, k, batch, out_bytes, peak, hbm_bytes_per_s)
        known.update(zip(group, map(float, values), strict=True))
    return known


def shaped_estimate(est: Estimate, shape: float) -> Estimate:
    """``est`` with its matrix compute terms divided by the matmuls' shape efficiency (figure kept)."""
    terms, compute = [], 0.0
    for t in est.terms:
        if isinstance(t.figures, FlopsFigures) and t.figures.unit == "matrix":
            figures = t.figures._replace(shape_efficiency=shape, gemm="the weight matmuls", shape_applied=True)
            t = replace(t, seconds=t.seconds / shape, figures=figures)
        compute += t.seconds if t.kind == "compute" else 0.0
        terms.append(t)
    return replace(est, compute_s=compute, terms=tuple(terms))
