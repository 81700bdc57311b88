"""``rooftop calibrate [--out mychip.toml]``: measure this JAX device, write a chip file."""

from __future__ import annotations

import argparse
import sys

from rooftop.cli.common import Output, add_common


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("calibrate", help="measure this JAX device's real ceilings and write a chip file")
    add_common(p, chip=False)
    p.add_argument("--out", metavar="FILE.toml", help="write the chip file here (usable with --chip FILE.toml)")
    p.add_argument("--name", default="calibrated", help="chip name in the file (default: calibrated)")
    p.add_argument("--quick", action="store_true", help="small sizes: seconds instead of a minute (less accurate)")
    p.add_argument("--repeats", default="5", help="timed runs per measurement; the best is kept")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> Output:
    from rich.console import Console

    from rooftop.jaxlink.calibrate import MAX_REPEATS, calibrate, check_chip_name, chip_toml
    from rooftop.report import calibrate as report
    from rooftop.units import parse_int

    # every argument is checked before a minute of measuring
    check_chip_name(args.name)
    if args.out is not None:
        report.check_chip_path(args.out)
    repeats = parse_int(args.repeats, "--repeats", lo=1, hi=MAX_REPEATS)
    stderr = Console(stderr=True)
    say = (lambda msg: stderr.print(f"measuring {msg}...", style="dim", markup=False)) if sys.stderr.isatty() else None
    cal = calibrate(quick=args.quick, repeats=repeats, progress=say)
    text = chip_toml(cal, args.name)
    if args.out is not None:
        report.write_chip_file(text, args.out)
    return Output(
        report.calibrate_payload(cal, text, args.out), lambda console: report.render_calibrate(console, cal, args.out)
    )
