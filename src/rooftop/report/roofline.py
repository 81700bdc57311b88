"""``rooftop roofline``: one op given by its FLOPs and bytes, as JSON, a table and a chart."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rooftop.report.serialize import estimate_dict
from rooftop.report.table import print_estimate

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.cost.cost import Cost
    from rooftop.cost.roofline import Estimate
    from rooftop.hardware.chip import Chip


def critical_intensity(chip: Chip, dtype: str, unit: str) -> float:
    """The ridge point of the unit the op runs on: that unit's peak for ``dtype`` / HBM bytes/s (on
    tpu-v5p 1.4e13 / 2.765e12 = 5.06 FLOP/B for the vector unit, 4.59e14 / 2.765e12 = 166 for the
    matrix unit)."""
    return chip.critical_intensity(dtype, "vector" if unit == "vector" else "matrix")


def op_payload(chip: Chip, cost: Cost, est: Estimate, dtype: str, unit: str) -> dict[str, Any]:
    """``rooftop roofline --json``: the op as given, then the roofline keys every command shares (the
    critical intensity of the op's unit)."""
    return {
        "op": {"flops": cost.flops, "bytes": cost.hbm_bytes, "dtype": dtype, "unit": unit},
        **estimate_dict(est),
        "critical_intensity": critical_intensity(chip, dtype, unit),
    }


def render_op(console: Console, chip: Chip, est: Estimate, dtype: str, unit: str) -> None:
    title = f"op on {chip.name} ({unit} unit, {dtype})"
    print_estimate(console, title, est, critical_intensity(chip, dtype, unit))


def plot_op(path: str, chip: Chip, est: Estimate, dtype: str, unit: str) -> None:
    from rooftop.report.plot import roofline_chart

    roofline_chart(chip, [("op", est, dtype, unit)], path)
