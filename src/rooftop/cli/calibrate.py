"""``rooftop calibrate [--out mychip.toml]``: measure this JAX device, write a chip file."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rooftop.cli.common import Output, add_common
from rooftop.units import format_duration, format_rate

if TYPE_CHECKING:
    from rich.console import Console


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("calibrate", help="measure this JAX device's real ceilings and write a chip file")
    add_common(p, chip=False)
    p.add_argument("--out", metavar="FILE.toml", help="write the chip file here (usable with --chip FILE.toml)")
    p.add_argument("--name", default="calibrated", help="chip name in the file (default: calibrated)")
    p.add_argument("--quick", action="store_true", help="small sizes: seconds instead of a minute (less accurate)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per measurement; the best is kept")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> Output:
    from rich.console import Console

    from rooftop.jaxlink.calibrate import calibrate, chip_toml, write_chip_file
    from rooftop.report.table import table

    console = Console(stderr=True)
    progress = (lambda msg: console.print(f"[dim]measuring {msg}...[/dim]")) if sys.stderr.isatty() else None
    cal = calibrate(quick=args.quick, repeats=max(1, args.repeats), progress=progress)
    text = chip_toml(cal, args.name)
    if args.out:
        write_chip_file(text, args.out)
    rows = [(f"matrix {d}", format_rate(m.value, "FLOP/s"), m.method) for d, m in cal.matrix.items()]
    for label, m, unit in (
        ("vector fp32", cal.vector, "FLOP/s"),
        ("memory", cal.hbm, "B/s"),
        ("collective link", cal.link, "B/s"),
    ):
        if m is not None:
            rows.append((label, format_rate(m.value, unit), m.method))
    if cal.latency is not None:
        rows.append(("collective latency", format_duration(cal.latency.value), cal.latency.method))
    payload = {
        "device_kind": cal.device_kind,
        "platform": cal.platform,
        "devices": cal.devices,
        "jax_version": cal.jax_version,
        "date": cal.date,
        "matrix_flops_per_s": {d: m.value for d, m in cal.matrix.items()},
        "vector_flops_per_s": cal.vector.value if cal.vector else None,
        "hbm_bytes_per_s": cal.hbm.value if cal.hbm else None,
        "link_bytes_per_s": cal.link.value if cal.link else None,
        "collective_latency_s": cal.latency.value if cal.latency else None,
        "memory_bytes": cal.memory_bytes,
        "chip_file": args.out,
        "chip_toml": text,
    }

    def render(c: Console) -> None:
        c.print(
            table(
                f"{cal.device_kind} x {cal.devices} ({cal.platform}), jax {cal.jax_version}",
                ["ceiling", "measured", "how"],
                rows,
            )
        )
        c.print(f"chip file written to {args.out}" if args.out else "pass --out FILE.toml to write a chip file")

    return Output(payload, render)
