"""``rooftop calibrate [--out mychip.toml]``: measure this JAX device, write a chip file."""

from __future__ import annotations

import argparse
import sys

from rooftop.cli.common import Output, add_common


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
    from rooftop.report import calibrate as report

    stderr = Console(stderr=True)
    progress = (lambda msg: stderr.print(f"[dim]measuring {msg}...[/dim]")) if sys.stderr.isatty() else None
    cal = calibrate(quick=args.quick, repeats=max(1, args.repeats), progress=progress)
    text = chip_toml(cal, args.name)
    if args.out:
        write_chip_file(text, args.out)
    return Output(
        report.calibrate_payload(cal, text, args.out), lambda console: report.render_calibrate(console, cal, args.out)
    )
