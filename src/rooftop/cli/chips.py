"""``rooftop chips [NAME]``: list the catalog or show one chip with its sources."""

from __future__ import annotations

import argparse

from rich.console import Console

from rooftop.cli.common import Output, add_common
from rooftop.errors import InvalidConfigError
from rooftop.hardware.catalog import get_chip, load_chips
from rooftop.report.serialize import chip_dict
from rooftop.report.table import table
from rooftop.units import format_bytes, format_rate


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("chips", help="list the chip catalog or show one chip with the source of every figure")
    p.add_argument("name", nargs="?", help="chip name or alias (e.g. tpu-v5e, 'H100 SXM')")
    add_common(p, chip=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> Output:
    if args.name is not None and not args.name.strip():
        raise InvalidConfigError("chip name is empty (run `rooftop chips` for the list)")
    if args.name:
        chip = get_chip(args.name, args.catalog)
        d = chip_dict(chip)

        def render(console: Console) -> None:
            console.print(f"[bold]{chip.name}[/bold] ({chip.vendor}) {chip.description}")
            rows = [
                (k, f"{f.value:.4g}", f.source + (f" [{f.note}]" if f.note else "")) for k, f in chip.sources.items()
            ]
            rows.append(("topology", chip.topology.kind, chip.topology.source))
            console.print(table(f"{chip.name}: figures and sources", ["figure", "value (SI)", "source"], rows))

        return Output({"chip": d}, render)
    chips = load_chips(args.catalog)

    def render_all(console: Console) -> None:
        rows = []
        for c in chips:
            bf16 = c.flops_per_s("bf16")
            price = f"${c.price_usd_per_hour:.2f}" if c.price_usd_per_hour is not None else "-"
            rows.append(
                (
                    c.name,
                    c.vendor,
                    format_rate(bf16, "FLOP/s"),
                    format_bytes(c.hbm_bytes),
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

    return Output({"chips": [chip_dict(c) for c in chips]}, render_all)
