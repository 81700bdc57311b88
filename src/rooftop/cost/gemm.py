"""How a matmul's shape uses the chip's matrix unit: the fraction of the matrix unit's time that does
useful work (``shape_efficiency``), which divides the roofline's compute term of that matmul.

GPUs (NVIDIA, "Matrix Multiplication Background User's Guide": tile and wave quantization). The
M x N output of each of ``batch`` matmuls is cut into tm x tn tiles, one per thread block; the tiles
run in waves of one per SM; with too few tiles to fill the SMs the K walk may be split over more
tiles (split-K, each slice >= MIN_SPLIT_K deep, its partial tile written and read back), and a
matmul of fewer rows than a tile runs a skinnier one (the next power of two, >= MIN_ROW_TILE). Per tile
the mainloop walks K in k-steps after a prologue of ``k_fill_steps``, then writes the tile (the
epilogue) at the SM's share of HBM bandwidth:

    tiles = batch x ceil(M / tm) x ceil(N / tn);  waves = ceil(tiles / SMs)
    K'    = ceil(K / k_step) x k_step + k_fill_steps x k_step
    math  = 2 tm tn K' / (peak / SMs);  write = (M N / tiles per matmul) out_bytes / (HBM bytes/s / SMs)
    efficiency = batch M N K / (waves x SMs x tm tn K') x math / (math + write)

taking the tile of the catalog's list (catalog/efficiency/gemm.toml) that wastes least, as the
libraries' heuristics pick one; the SMs are the chip file's ``[internals] sms``. TPUs (Cloud TPU
performance guide, "Tiling and padding"): the MXU is mxu x mxu (``[internals] mxu_size``), so the
contracting dim and one free dim pad to multiples of mxu and the other (the streamed rows) to 8
sublanes, the free dims placed the way that wastes least:

    efficiency = M N K / (pad(K, mxu) x min(pad(N, mxu) pad(M, 8), pad(M, mxu) pad(N, 8)))

Efficiency is in (0, 1] and is NOT monotone in a dim: one row past a tile (or a tile past a wave)
costs a whole tile (or wave); the measured H100 sweep shows the same sawtooth. A chip whose file gives
no internals gets no shape model (``tile_model`` returns None): its matmuls are priced as before.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from rooftop.catalog.io import builtin_toml
from rooftop.cost.cost import Gemm
from rooftop.errors import InvalidConfigError
from rooftop.hardware.chip import Chip

WHERE = "catalog/efficiency/gemm.toml"
#: split-K factors a library may use when a GEMM has too few output tiles to fill the SMs (cuBLAS and
#: CUTLASS split-K / stream-K), each slice keeping at least MIN_SPLIT_K of the contraction
SPLITS = (1, 2, 4, 8, 16, 32, 64)
MIN_SPLIT_K = 256
#: the fewest rows a tensor-core tile has (PTX ISA, warp-level mma.m16n8k16): a matmul of fewer rows than
#: a tile's (a decode step's few sequences) runs a tile of the next power of two rows, at least this
MIN_ROW_TILE = 16


@dataclass(frozen=True)
class TileModel:
    """One chip's figures of the shape model (module docstring); ``kind`` "gpu" or "tpu"."""

    chip: str
    kind: str
    units: int = 0  # GPU: SMs
    tiles: tuple[tuple[int, int], ...] = ()
    k_step: int = 1
    k_fill_steps: float = 0.0
    epilogue: bool = False
    mxu: int = 0  # TPU: the MXU's side
    row_multiple: int = 1
    sources: tuple[str, ...] = ()


def _value(table: dict[str, Any], key: str) -> Any:
    node = table.get(key)
    if not isinstance(node, dict) or "value" not in node or not node.get("source"):
        raise InvalidConfigError(f'{WHERE}: {key} must be a table {{value = ..., source = "..."}}')
    return node["value"]


@lru_cache(maxsize=1)
def _figures() -> dict[str, Any]:
    return builtin_toml("efficiency", "gemm.toml")


def tile_model(chip: Chip) -> TileModel | None:
    """The shape model's figures for ``chip``: its SMs (GPU) or MXU size (TPU) from the chip file's
    ``[internals]``, the tiles and pipeline figures from catalog/efficiency/gemm.toml; None when the chip
    file does not give them (a calibrated or hand-written chip without internals)."""
    inner = chip.internals
    data = _figures()
    if chip.kind == "gpu" and inner is not None and inner.sms:
        g = data["gpu"]
        tiles = tuple((int(a), int(b)) for a, b in _value(g, "tiles"))
        src = (f"{chip.name} [internals] sms", g["tiles"]["source"], g["k_fill_steps"]["source"])
        return TileModel(chip.name, "gpu", int(inner.sms), tiles, int(_value(g, "k_step")),
                         float(_value(g, "k_fill_steps")), bool(_value(g, "epilogue")), sources=src)  # fmt: skip
    if chip.kind == "tpu" and inner is not None and inner.mxu_size:
        t = data["tpu"]
        tsrc = (f"{chip.name} [internals] mxu_size", t["row_multiple"]["source"])
        return TileModel(chip.name, "tpu", mxu=int(inner.mxu_size), row_multiple=int(_value(t, "row_multiple")),
                         sources=tsrc)  # fmt: skip
    return None


def _pad(x: np.ndarray | float, multiple: int) -> np.ndarray:
    return np.ceil(x / multiple) * multiple


def shape_efficiency_array(
    model: TileModel,
    m: np.ndarray | float,
    n: np.ndarray | float,
    k: np.ndarray | float,
    batch: np.ndarray | float = 1.0,
    out_bytes: float = 2.0,
    peak_flops_per_s: float = 0.0,
    hbm_bytes_per_s: float = 0.0,
) -> np.ndarray:
    """``shape_efficiency`` over arrays of shapes (broadcast); 1 where a shape has no work. The
    epilogue needs the matrix unit's peak for the dtype and the HBM bandwidth (0: not counted)."""
    ma, na, ka, ba = (np.maximum(np.asarray(x, dtype=float), 0.0) for x in (m, n, k, batch))
    return _efficiency(model, ma, na, ka, ba, out_bytes, peak_flops_per_s, hbm_bytes_per_s)


def _efficiency(
    model: TileModel,
    m: np.ndarray,
    n: np.ndarray,
    k: np.ndarray,
    batch: np.ndarray,
    out_bytes: float,
    peak_flops_per_s: float,
    hbm_bytes_per_s: float,
) -> np.ndarray:
    eff: np.ndarray
    useful = m * n * k * batch
    with np.errstate(divide="ignore", invalid="ignore"):
        if model.kind == "tpu":
            kp = _pad(k, model.mxu)
            wide = np.maximum(_pad(n, model.mxu) * _pad(m, model.row_multiple), 1.0)
            tall = np.maximum(_pad(m, model.mxu) * _pad(n, model.row_multiple), 1.0)
            eff = useful / (kp * batch * np.minimum(wide, tall))
        else:
            eff = _gpu_efficiency(model, m, n, k, batch, useful, out_bytes, peak_flops_per_s, hbm_bytes_per_s)
        return np.where(useful > 0, np.clip(np.nan_to_num(eff, nan=1.0), 1e-9, 1.0), 1.0)


def _gpu_efficiency(
    model: TileModel,
    m: np.ndarray,
    n: np.ndarray,
    k: np.ndarray,
    batch: np.ndarray,
    useful: np.ndarray,
    out_bytes: float,
    peak_flops_per_s: float,
    hbm_bytes_per_s: float,
) -> np.ndarray:
    """The GPU model (module docstring) for every (tile, split-K) choice at once, a leading axis of choices
    against the shapes' axes, and the best choice for each shape."""
    shape = np.broadcast(m, n, k, batch).shape
    m, n, k, batch, useful = (np.broadcast_to(x, shape)[None] for x in (m, n, k, batch, useful))
    choices = list(itertools.product(model.tiles, SPLITS))
    lead = (len(choices),) + (1,) * len(shape)
    tile_m = np.array([t[0] for t, _ in choices], dtype=float).reshape(lead)
    tn = np.array([t[1] for t, _ in choices], dtype=float).reshape(lead)
    split = np.array([sp for _, sp in choices], dtype=float).reshape(lead)
    skinny = np.maximum(MIN_ROW_TILE, 2.0 ** np.ceil(np.log2(np.maximum(m, 1.0))))
    tm = np.where(m < tile_m, np.minimum(skinny, tile_m), tile_m)  # fewer rows than a tile: a skinnier one
    # split-K: the K walk cut into ``split`` slices, each a tile of its own (its partial tile written and
    # read back: one more write of the tile's part of the output)
    kp = _pad(np.maximum(k / split, 1.0), model.k_step) + model.k_fill_steps * model.k_step
    per_matmul = np.ceil(m / tm) * np.ceil(n / tn)
    waves = np.ceil(batch * per_matmul * split / model.units)
    q = useful / (waves * model.units * tm * tn * kp)
    if model.epilogue and peak_flops_per_s > 0 and hbm_bytes_per_s > 0:
        math_s = 2.0 * tm * tn * kp / (peak_flops_per_s / model.units)
        valid = m * n / per_matmul  # a tile writes its part of the output
        write_s = valid * out_bytes * np.where(split > 1, 2.0, 1.0) / (hbm_bytes_per_s / model.units)
        q = q * math_s / (math_s + write_s)
    usable = (k / split >= MIN_SPLIT_K) | (split == 1)
    best: np.ndarray = np.max(np.where(usable, q, 0.0), axis=0)
    return best


def shape_efficiency(chip: Chip, gemm: Gemm, dtype: str = "bf16") -> float | None:
    """Fraction of the matrix unit's time ``gemm`` uses on ``chip`` (module docstring); None when
    the chip has no shape model."""
    model = tile_model(chip)
    if model is None:
        return None
    peak = chip.flops_rate(dtype, "matrix")[1]
    value = shape_efficiency_array(
        model, gemm.m, gemm.n, gemm.k, gemm.batch, gemm.out_bytes, peak, chip.hbm_bytes_per_s
    )
    out = float(value)
    return out if math.isfinite(out) else 1.0
