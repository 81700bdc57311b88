"""``rooftop profile PATH --chip C [--hlo FILE]``: every op of a profile next to its roofline."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING, Any

from rooftop.cli.common import Output, add_common, chip_from_args
from rooftop.units import format_bytes, format_duration

if TYPE_CHECKING:
    from rich.console import Console


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("profile", help="measured vs roofline, op by op, for a JAX (XPlane/JSON) or PyTorch trace")
    p.add_argument("path", help="profile directory (plugins/profile/...), .xplane.pb, .trace.json.gz or Kineto JSON")
    add_common(p)
    p.add_argument("--hlo", metavar="FILE", help="HLO text of the program (default: the HLO embedded in the XPlane)")
    p.add_argument("--mesh", help="name the mesh axes, e.g. data=4,model=2 (default: inferred from replica groups)")
    p.add_argument("--topology", help="physical slice to time collectives on (default: one for the device count)")
    p.add_argument("--top", type=int, default=15, help="ops to show, ranked by time lost vs roofline (default 15)")
    p.set_defaults(func=run)


def _progress() -> Any:
    from rich.console import Console

    if not sys.stderr.isatty():
        return None
    console = Console(stderr=True)

    def show(events: int, nbytes: int) -> None:
        console.print(f"[dim]loaded {events:,} events, {format_bytes(nbytes)}[/dim]", end="\r")

    return show


def run(args: argparse.Namespace) -> Output:
    from rooftop.analysis.profile import profile_report
    from rooftop.report.table import table

    chip = chip_from_args(args)
    report = profile_report(args.path, chip, args.hlo, args.mesh, args.topology, _progress())
    payload = {
        "source": report.source,
        "chip": chip.name,
        "ops": [dataclasses.asdict(o) for o in report.ops],
        "steps": [dataclasses.asdict(s) for s in report.steps],
        "overlap": report.overlap(),
        "categories": {k: dict(v) for k, v in report.categories.items()},
        "sharding": list(report.sharding),
        "memory": dict(report.memory),
        "notes": list(report.notes),
    }

    def render(console: Console) -> None:
        rows = []
        for o in report.ops[: max(args.top, 1)]:
            eff = f"{o.efficiency:.0%}" if o.efficiency is not None else "-"
            lb = format_duration(o.lower_bound_s) if o.lower_bound_s is not None else "?"
            rows.append(
                (
                    o.name,
                    o.count,
                    format_duration(o.measured_s),
                    lb,
                    eff,
                    o.bound or "-",
                    o.verdict,
                    format_duration(o.lost_s),
                    o.collective or "",
                )
            )
        console.print(
            table(
                f"ops of {report.source} on {chip.name}, ranked by time lost vs roofline",
                ["op", "runs", "measured", "roofline", "eff.", "bound", "verdict", "lost", "mesh axes"],
                rows,
            )
        )
        if report.steps:
            console.print(
                table(
                    "steps (means over devices)",
                    ["step", "duration", "busy", "comm", "overlapped", "idle"],
                    [
                        (
                            s.index,
                            *(format_duration(v) for v in (s.duration_s, s.busy_s, s.comm_s, s.overlap_s, s.idle_s)),
                        )
                        for s in report.steps
                    ],
                )
            )
        console.print(
            table(
                "where the time goes (per device)",
                ["part", "measured", "roofline"],
                [
                    (k, format_duration(v["measured_s"]), format_duration(v["lower_bound_s"]))
                    for k, v in report.categories.items()
                ],
            )
        )
        ov = report.overlap()
        console.print(
            f"communication {format_duration(ov['comm_s'])}, {ov['overlap_fraction']:.0%} overlapped by compute"
        )
        if report.memory.get("available"):
            console.print(f"peak memory {format_bytes(float(report.memory['peak_bytes']))}")  # type: ignore[arg-type]
        for line in report.sharding:
            console.print(f"sharding: {line}")
        for note in report.notes:
            console.print(f"[dim]note: {note}[/dim]")

    return Output(payload, render)
