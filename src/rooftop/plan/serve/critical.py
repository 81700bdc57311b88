"""Where a decode step turns compute-bound: the critical batch of a chip and dtype (the weight matmuls'
FLOPs time against their weight-read time) and the batch at which a layout's priced decode step crosses
it."""

from __future__ import annotations

from dataclasses import dataclass

from rooftop.cost.efficiency import Efficiency
from rooftop.cost.roofline import flop_rate, roofline
from rooftop.dtypes import compute_dtype, dtype_bytes
from rooftop.hardware.chip import Chip
from rooftop.model.config import TransformerConfig
from rooftop.model.workload import Dtypes, Workload
from rooftop.plan.serve.layout import ServingLayout
from rooftop.plan.serve.per_chip import chip_cost


@dataclass(frozen=True)
class CriticalBatch:
    """Batch at which a weight matmul's FLOPs time equals its weight-read time: 2 b N / F = N beta_w
    / BW, so b* = F x beta_w / (2 BW) = critical intensity x beta_w / 2 (``ideal``); with the
    efficiencies, F x matrix x beta_w / (2 BW x hbm) (``with_efficiency``). Activations and
    attention push the real crossover a little higher (``compute_bound_batch``)."""

    chip: str
    compute_dtype: str
    peak_flops_per_s: float
    bytes_per_weight: float
    hbm_bytes_per_s: float
    matrix_efficiency: float
    hbm_efficiency: float

    @property
    def ideal(self) -> float:
        return self.peak_flops_per_s * self.bytes_per_weight / (2 * self.hbm_bytes_per_s)

    @property
    def with_efficiency(self) -> float:
        return self.ideal * self.matrix_efficiency / self.hbm_efficiency


def critical_batch(chip: Chip, dtypes: Dtypes, eff: Efficiency) -> CriticalBatch:
    """The CriticalBatch of ``chip`` for weights in ``dtypes.weights`` (peak from cost/roofline.flop_rate)."""
    used, peak, rate = flop_rate(chip, "matrix", compute_dtype(dtypes.activations, dtypes.weights), eff)
    # rate / peak: the share of the datasheet peak reached (matrix x the chip's achievable fraction)
    return CriticalBatch(chip.name, used, peak, dtype_bytes(dtypes.weights), chip.hbm_bytes_per_s, rate / peak, eff.hbm)


def compute_bound_batch(
    cfg: TransformerConfig,
    chip: Chip,
    layout: ServingLayout,
    context_len: int,
    dtypes: Dtypes,
    eff: Efficiency,
    limit: int = 1 << 16,
) -> int | None:
    """Smallest batch per replica at which the weight matmuls of a decode step are compute-bound on
    a chip (bisection over the priced ops; None if not below ``limit``)."""

    def compute_bound(b: int) -> bool:
        g = chip_cost(cfg, Workload("decode", b, 1, context_len), dtypes, layout).groups["matmul"]
        est = roofline(g, chip, efficiency=eff)
        return est.compute_s >= est.memory_s

    if not compute_bound(limit):
        return None
    lo, hi = 1, limit
    if compute_bound(lo):
        return layout.pp
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if compute_bound(mid) else (mid, hi)
    return hi * layout.pp
