"""``rooftop chips``: the catalog table, one chip with the source of every figure, and their JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rooftop.report.serialize import chip_dict
from rooftop.report.table import say, styled, table
from rooftop.units import format_bytes, format_duration, format_percent, format_plain, format_rate

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
    if field.endswith("_hz"):
        return f"{format_plain(value / 1e9, 4)} GHz"
    if field.endswith("bytes_per_s"):
        return format_rate(value, digits=4)
    if field.endswith(("bytes", "bytes_per_sm")) or field.startswith("on_chip_bytes"):
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
    derived = internals_rows(chip)
    if derived:
        console.print(table(f"{chip.name}: from its internals", ["figure", "value", "how"], derived))


def internals_rows(chip: Chip) -> list[tuple[str, str, str]]:
    """What the chip's internals add up to: its Tensor Cores, and its bf16 matrix peak set against the
    catalog's (the check that the internals agree with the datasheet)."""
    n, rows = chip.internals, []
    if n.tensor_cores is not None:
        rows.append(("Tensor Cores per chip", f"{n.tensor_cores:,}", f"{n.sms} SMs x {n.tensor_cores_per_sm} per SM"))
    peak = chip.matrix_peak_from_internals()
    if peak is not None and n.clock_hz is not None:
        if n.sms and n.matrix_flops_per_cycle_per_sm:
            how = f"{n.sms} SMs x {n.matrix_flops_per_cycle_per_sm:,.0f} FLOPs per cycle x {n.clock_hz / 1e9:g} GHz"
        else:
            how = (f"{chip.tensor_cores} TensorCores x {n.mxus_per_core} MXUs x 2 x {n.mxu_size}^2 x "
                   f"{n.clock_hz / 1e9:g} GHz")  # fmt: skip
        catalog = chip.matrix_flops_per_s.get("bf16")
        share = ""
        if catalog:
            share = f"; {format_percent(peak / catalog, 2)} of the catalog's {format_rate(catalog, 'FLOP/s', 4)}"
        rows.append(("bf16 matrix peak", format_rate(peak, "FLOP/s", 4), how + share))
    if n.vpu_sublanes and n.vpu_lanes:
        rows.append(("VPU shape", f"{n.vpu_sublanes} x {n.vpu_lanes}", "sublanes x lanes per TensorCore"))
    return rows


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
