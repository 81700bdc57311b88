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


def op_payload(cost: Cost, est: Estimate, dtype: str, unit: str) -> dict[str, Any]:
    """``rooftop roofline --json``: the op as given, then the roofline keys every command shares."""
    return {
        "op": {"flops": cost.flops, "bytes": cost.hbm_bytes, "dtype": dtype, "unit": unit},
        **estimate_dict(est),
    }


def render_op(console: Console, chip: Chip, est: Estimate, dtype: str, unit: str) -> None:
    print_estimate(console, f"op on {chip.name} ({unit} unit, {dtype})", est)


def plot_op(path: str, chip: Chip, est: Estimate, dtype: str, unit: str) -> None:
    from rooftop.report.plot import roofline_chart

    roofline_chart(chip, [("op", est, dtype, unit)], path)
