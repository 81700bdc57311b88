"""``rooftop chips``: the catalog table, one chip with the source of every figure, and their JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rooftop.report.serialize import chip_dict
from rooftop.report.table import say, styled, table
from rooftop.units import format_bytes, format_duration, format_plain, format_rate

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.hardware.chip import Chip


def chip_payload(chip: Chip) -> dict[str, Any]:
    """``rooftop chips NAME --json``."""
    return {"chip": chip_dict(chip)}


def figure_text(key: str, value: float) -> str:
    """A chip file's figure with its unit, read from its key: "matrix_flops_per_s.bf16" 9.895e14 ->
    "989.5 TFLOP/s", "links.bytes_per_s" 2.5e10 -> "25 GB/s", "memory.hbm_bytes" -> "80 GiB"."""
    field = key.rsplit(".", 1)[0] if key.split(".", 1)[0].endswith("flops_per_s") else key
    if field.endswith("flops_per_s"):
        return format_rate(value, "FLOP/s", 4)
    if field.endswith("bytes_per_s"):
        return format_rate(value, digits=4)
    if field.endswith("bytes") or field.startswith("on_chip_bytes"):
        return format_bytes(value, 4)
    if field.endswith("_s"):
        return format_duration(value, 4)
    if "usd" in field:
        return f"${value:.2f}"
    return format_plain(value, 4)


def render_chip(console: Console, chip: Chip) -> None:
    say(console, styled(chip.name, "bold"), f" ({chip.vendor}) {chip.description}")
    rows = [
        (k, figure_text(k, f.value), f.source + (f" [{f.note}]" if f.note else "")) for k, f in chip.sources.items()
    ]
    rows.append(("topology", chip.topology.kind, chip.topology.source))
    console.print(table(f"{chip.name}: figures and sources", ["figure", "value", "source"], rows))


def catalog_payload(chips: Sequence[Chip]) -> dict[str, Any]:
    """``rooftop chips --json``."""
    return {"chips": [chip_dict(c) for c in chips]}


def render_catalog(console: Console, chips: Sequence[Chip]) -> None:
    rows = []
    for c in chips:
        bf16 = c.flops_per_s("bf16")
        price = f"${c.price_usd_per_hour:.2f}" if c.price_usd_per_hour is not None else "-"
        rows.append(
            (
                c.name,
                c.vendor,
                format_rate(bf16, "FLOP/s"),
                format_bytes(c.hbm_capacity_bytes),
                format_rate(c.hbm_bytes_per_s),
                f"{c.critical_intensity('bf16'):.0f}",
                f"{c.link_count} x {format_rate(c.link_bytes_per_s)}",
                price,
            )
        )
    console.print(
        table(
            "chip catalog (dense peaks; links per direction)",
            ["chip", "vendor", "bf16", "HBM", "HBM BW", "FLOP/B", "links", "$/chip-h"],
            rows,
        )
    )
