"""Published roofline figures.

- TPU v5e bf16 critical intensity ~240 FLOPs/byte: 1.97e14 / 8.2e11
  ('How to Scale Your Model', Part 1, "Rooflines").
- H100 SXM ~295 FLOPs/byte: 989.5e12 dense bf16 / 3.35e12 B/s (NVIDIA H100 datasheet;
  the scaling book's GPU chapter quotes ~ 295 as well).
- int8 weights with bf16 activations halve the critical batch: for B << D, F a
  matmul reads ~D*F weight bytes, so intensity ~ 2BDF / (bytes_w * D * F) = 2B / bytes_w
  (scaling book Part 1, the quantised-weights exercise).
"""

import pytest

from rooftop.cost.op import Operand, matmul
from rooftop.cost.roofline import roofline
from rooftop.hardware.catalog import get_chip


def test_v5e_critical_intensity() -> None:
    assert get_chip("tpu-v5e").critical_intensity("bf16") == pytest.approx(240, rel=0.02)


def test_h100_critical_intensity() -> None:
    assert get_chip("h100").critical_intensity("bf16") == pytest.approx(295, rel=0.02)


def _critical_batch(chip_name: str, weight_dtype: str) -> int:
    """Smallest batch B at which B x 8192 @ 8192 x 8192 turns compute-bound."""
    chip = get_chip(chip_name)
    lo, hi = 1, 1 << 16
    while lo < hi:
        b = (lo + hi) // 2
        sizes = {"B": b, "D": 8192, "F": 8192}
        cost = matmul(Operand(("B", "D")), Operand(("D", "F"), weight_dtype), Operand(("B", "F")), sizes, "bf16")
        if roofline(cost, chip).bound == "compute":
            hi = b
        else:
            lo = b + 1
    return lo


@pytest.mark.parametrize("chip", ["tpu-v5e", "h100"])
def test_int8_weights_halve_critical_batch(chip: str) -> None:
    bf16 = _critical_batch(chip, "bf16")
    int8 = _critical_batch(chip, "int8")
    assert int8 == pytest.approx(bf16 / 2, rel=0.1)
    # and the bf16 critical batch is ~ the critical intensity (2BDF / 2DF = B for B << D, F)
    assert bf16 == pytest.approx(get_chip(chip).critical_intensity("bf16"), rel=0.1)
