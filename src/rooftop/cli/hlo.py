"""``rooftop hlo FILE --chip C [--mesh data=4,model=2] [--topology T] [--top N] [--json] [--plot FILE.png]``.

Counts every executed instruction of an XLA HLO text module (``compiled.as_text()`` or an XLA dump),
times it on the chip with the roofline, and names the mesh axes each collective runs over.
"""

from __future__ import annotations

import argparse
from typing import Any

from rooftop.cli.common import Output, add_common, chip_from_args, int_type
from rooftop.errors import InvalidConfigError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("hlo", help="FLOPs, bytes, collectives and roofline time of each instruction of an HLO module")
    p.add_argument(
        "file",
        help="HLO text (compiled.as_text() or an XLA dump *.after_optimizations.txt), or a JAX profile "
        "(.xplane.pb or its directory) whose module --module names",
    )
    add_common(p)
    p.add_argument("--mesh", help="logical mesh, devices numbered row-major, e.g. data=4,model=2 (default: inferred)")
    p.add_argument(
        "--topology", help="physical slice, e.g. 2x4 (TPU), 8 or 2x8 (GPU) (default: one of the device count)"
    )
    p.add_argument(
        "--top", type=int_type(0, 10**6), default=10, metavar="N", help="instructions to list, by predicted time (10)"
    )
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        help="write the instructions on the chip's roofline (area by predicted time) and the predicted time per "
        "instruction (the --top ones, at most 20) as .png, .svg or .pdf",
    )
    p.add_argument(
        "--timeline",
        metavar="FILE.json",
        help="write a predicted schedule of the module (instructions in order, each at its roofline time) as a "
        "Chrome trace (Perfetto, chrome://tracing)",
    )
    p.add_argument(
        "--memory",
        action="store_true",
        help="list the buffers live at the module's memory peak (size, shape, defining instruction, source line, "
        "kind) from its schedule",
    )
    p.add_argument(
        "--module",
        metavar="NAME",
        help="the module of a profile to read: jit_f, or jit_f(ID) when several programs share the name "
        "(default: the profile's only module)",
    )
    p.set_defaults(func=run)


def _module(args: argparse.Namespace) -> tuple[Any, str]:
    """The HLO module of ``args.file`` (text, or the --module of a profile) and the name it is read as."""
    from rooftop.analysis.hlo.parse import parse_hlo, parse_hlo_file
    from rooftop.analysis.trace.hlo_modules import is_profile_path, module_text

    if is_profile_path(args.file):
        key, text = module_text(args.file, args.module)
        source = f"{args.file}:{key}"
        return parse_hlo(text, source), source
    if args.module is not None:
        raise InvalidConfigError(
            f"--module picks a module of a JAX profile (.xplane.pb or its directory); {args.file} is not one"
        )
    return parse_hlo_file(args.file), args.file


def run(args: argparse.Namespace) -> Output:
    from rooftop.analysis.hlo.analyze import analyze
    from rooftop.report import hlo as report

    if args.top < 0:
        raise InvalidConfigError(f"--top {args.top} must be >= 0")
    if args.timeline is not None:
        from rooftop.report.timeline import check_timeline_path

        check_timeline_path(args.timeline)
    chip = chip_from_args(args)
    module, source = _module(args)
    analysis = analyze(module, chip, args.mesh, args.topology)
    if args.timeline is not None:
        from rooftop.report.timeline import hlo_events, write_timeline

        write_timeline(args.timeline, *hlo_events(analysis))
    data = report.hlo_payload(analysis, args.top)
    peak = None
    if args.memory:
        from rooftop.analysis.hlo.liveness import memory_peak
        from rooftop.report.memorypeak import peak_payload, render_peak

        peak = memory_peak(module)
        data["memory_peak"] = peak_payload(peak)

    def render(console: Any) -> None:
        report.render_hlo(console, analysis, data, args.top)
        if peak is not None:
            render_peak(console, peak, args.top)

    return Output(
        data,
        render,
        [lambda path: report.plot_hlo(analysis, path, args.top, source, report.op_names(module))],
    )
