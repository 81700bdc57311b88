"""``rooftop profile PATH [--chip C] [--hlo FILE] [--plot FILE.png]``: every op of a profile next to its roofline.
Without --chip the chip is the catalog's match for the device the profile recorded (analysis/device.py)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rooftop.cli.common import Output, add_common, chip_from_args, int_type
from rooftop.units import format_bytes


class _Paths(argparse.Action):
    """The extra paths as a tuple (every list value is taken for an option given no value)."""

    def __call__(
        self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        if any("\x00" in v for v in values):
            parser.error("a path contains a NUL character: no file name holds one")
        setattr(ns, self.dest, tuple(values))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("profile", help="measured vs roofline, op by op, for a JAX (XPlane/JSON) or PyTorch trace")
    p.add_argument("path", help="profile directory (plugins/profile/...), .xplane.pb, .trace.json.gz or Kineto JSON")
    p.add_argument(
        "more", nargs="*", action=_Paths, default=(), metavar="PATH",
        help="more hosts: profile directories, .xplane.pb files or glob patterns",
    )  # fmt: skip
    add_common(p, chip_required=False)
    p.add_argument("--hlo", metavar="FILE", help="HLO text of the program (default: the HLO embedded in the XPlane)")
    p.add_argument("--mesh", help="name the mesh axes, e.g. data=4,model=2 (default: inferred from replica groups)")
    p.add_argument("--topology", help="physical slice to time collectives on (default: one for the device count)")
    p.add_argument(
        "--top", type=int_type(0, 10**6), default=15, help="ops to show, ranked by time lost vs roofline (default 15)"
    )
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        help="write the ops on the chip's roofline (FLOP/s reached, area by time) and the time lost per op "
        "(the --top ops, at most 20) as .png, .svg or .pdf",
    )
    p.add_argument(
        "--timeline",
        metavar="FILE.json",
        help="write the measured ops with each op's roofline time beside them as a Chrome trace (Perfetto)",
    )
    p.add_argument(
        "--capture",
        metavar="PATH",
        help="PyTorch traces: the trace of the engine's CUDA/HIP-graph capture (a file, or a folder of them), to "
        "give graph-replayed kernels their ops (default: a capture_traces/ folder or *capture* trace beside PATH)",
    )
    p.add_argument("--html", metavar="FILE.html", help="write a self-contained HTML report (chart, op table, steps)")
    p.add_argument(
        "--memory",
        action="store_true",
        help="list the buffers live at the memory peak of the busiest module (from its HLO schedule) beside the "
        "profile's measured peak",
    )
    p.add_argument(
        "--idle",
        action="store_true",
        help="device idle per step by cause (host, launch, collective, other stream), launch delays, the critical "
        "path, and serving phases (prefill/decode) from the engine's step annotations",
    )
    p.add_argument(
        "--what-if",
        metavar="CHIP",
        help="project each op's time onto this chip (its efficiency on --chip carried over to its bound here) "
        "and the step's total, beside the measured ones",
    )
    p.add_argument(
        "--export-hlo",
        metavar="DIR",
        help="write each HLO module the profile carries (JAX XPlane) as a text file into DIR (made if missing)",
    )
    p.add_argument(
        "--workers",
        type=int_type(1, 4096),
        help="many hosts: local processes that each reduce one host at a time (default: one per CPU)",
    )
    p.add_argument(
        "--cluster",
        metavar="tcp://HOST:PORT",
        help="many hosts: reduce them on the Dask distributed cluster at this scheduler address (the dask extra)",
    )
    p.set_defaults(func=run)


def _progress() -> Any:
    from rich.console import Console

    if not sys.stderr.isatty():
        return None
    console = Console(stderr=True)

    def show(events: int, nbytes: int) -> None:
        console.print(f"[dim]loaded {events:,} events, {format_bytes(nbytes)}[/dim]", end="\r")

    return show


def _check_files(args: argparse.Namespace) -> None:
    """--timeline and --html name files that can be written, checked before the trace is read."""
    if args.timeline is not None:
        from rooftop.report.timeline import check_timeline_path

        check_timeline_path(args.timeline)
    if args.html is not None:
        from rooftop.report.html import check_html_path

        check_html_path(args.html)
    if args.export_hlo is not None:
        from rooftop.report.hloexport import check_export_dir

        check_export_dir(args.export_hlo)


def _export_hlo(args: argparse.Namespace) -> None:
    """--export-hlo: every module of every host file, printed before any file is written."""
    from rooftop.analysis.trace.hlo_modules import hlo_protos, module_texts
    from rooftop.report.hloexport import write_modules

    protos: dict[str, bytes] = {}
    for path in (args.path, *args.more):
        for key, proto in hlo_protos(path).items():
            protos.setdefault(key, proto)
    if not protos:
        from rooftop.errors import InvalidConfigError

        raise InvalidConfigError(f"{args.path}: the profile carries no HLO modules (only JAX XPlane profiles do)")
    write_modules(args.export_hlo, module_texts(protos))


def _trace(args: argparse.Namespace) -> Any:
    from rooftop.analysis.trace.load import load_trace

    return load_trace(args.path, _progress())


def _write_files(args: argparse.Namespace, prof: Any, chip: Any, trace: Any) -> None:
    if trace is not None:
        from rooftop.report.timeline import profile_events, write_timeline

        write_timeline(args.timeline, *profile_events(trace, prof, chip))
    if args.html is not None:
        from rooftop.report.html import profile_html, write_html

        write_html(args.html, profile_html(prof, chip, args.top))


def _host_progress() -> Any:
    from rich.console import Console

    if not sys.stderr.isatty():
        return None
    console = Console(stderr=True)

    def show(done: int, hosts: int, host: str, events: int) -> None:
        console.print(f"[dim]hosts: {done}/{hosts} reduced ({host}: {events:,} events)[/dim]", end="\r")

    return show


def run_hosts(args: argparse.Namespace) -> Output:
    """Several hosts: each reduced in a worker, the aggregates merged (analysis/hosts.py)."""
    from rooftop.analysis.hosts import many_host_report
    from rooftop.report import hosts as report
    from rooftop.report.profile import plot_profile

    if args.chip is None:
        from rooftop.errors import InvalidConfigError

        raise InvalidConfigError("several hosts: give --chip (the device is read from a single profile)")
    chip = chip_from_args(args)
    paths = [args.path, *args.more]
    if args.timeline is not None:
        from rooftop.errors import InvalidConfigError

        raise InvalidConfigError("--timeline draws one trace; on several hosts give one host's .xplane.pb")
    merge = many_host_report(paths, chip, args.hlo, args.mesh, args.topology, workers=args.workers,
                             cluster=args.cluster, progress=_host_progress(), source=", ".join(paths))  # fmt: skip
    if args.html is not None:
        from rooftop.report.html import write_html

        write_html(args.html, report.hosts_html(merge, chip, args.top))
    return Output(
        report.hosts_payload(merge, chip),
        lambda console: report.render_hosts(console, merge, chip, args.top),
        [lambda path: plot_profile(merge.report, chip, path, args.top)],
    )


def _idle(trace: Any) -> tuple[Any, Any]:
    from rooftop.analysis.idle import idle_report
    from rooftop.analysis.phases import phase_report

    return idle_report(trace), phase_report(trace)


def run_what_if(args: argparse.Namespace, chip: Any, trace: Any) -> Output:
    """--what-if: the report on --chip and its projection onto the other chip (analysis/whatif.py)."""
    from rooftop.analysis.whatif import what_if
    from rooftop.hardware.catalog import get_chip
    from rooftop.report import profile as report
    from rooftop.report.whatif import render_whatif, whatif_payload

    chip_y = get_chip(args.what_if, args.catalog)
    prof, projected = what_if(trace, chip, chip_y, args.hlo, args.mesh, args.topology)
    _write_files(args, prof, chip, trace if args.timeline is not None else None)

    def render(console: Any) -> None:
        report.render_profile(console, prof, chip, args.top)
        render_whatif(console, projected, args.top)

    return Output(
        report.profile_payload(prof, chip) | {"what_if": whatif_payload(projected)},
        render,
        [lambda path: report.plot_profile(prof, chip, path, args.top)],
    )


def _chip_and_trace(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """(chip, loaded trace, DeviceChoice): without --chip the trace is loaded first and the
    chip is the catalog's match for its recorded device; with --chip the recorded device is compared to it."""
    from rooftop.analysis.device import choose_chip
    from rooftop.hardware.catalog import load_chips

    given = chip_from_args(args) if args.chip is not None else None
    trace = _trace(args)  # loaded once, here: its device is read before it is priced
    device = choose_chip(trace, load_chips(getattr(args, "catalog", None)), given)
    if device.chip is None:
        from rooftop.errors import InvalidConfigError

        seen = (
            f"records {device.recorded.describe()!r}, which no catalog chip matches"
            if device.recorded
            else "records no device"
        )
        raise InvalidConfigError(f"give --chip: the profile {seen} (see `rooftop chips`, or a chip file)")
    return device.chip, trace, device


def _capture(args: argparse.Namespace, trace: Any) -> Any:
    """The capture trace of a PyTorch trace's CUDA graphs: --capture, else one found beside the profile."""
    from pathlib import Path

    from rooftop.analysis.torch.capture import capture_files, read_capture, traces_in

    if trace.format != "kineto":
        if args.capture is not None:
            from rooftop.errors import InvalidConfigError

            raise InvalidConfigError("--capture is for PyTorch (Kineto) traces; this profile is not one")
        return None
    files = capture_files(args.path) if args.capture is None else None
    if args.capture is not None:
        given = Path(args.capture)
        files = traces_in(given) if given.is_dir() else [given]
        if not files:
            from rooftop.errors import InvalidConfigError

            raise InvalidConfigError(f"--capture {args.capture}: no capture trace (.json or .json.gz) there")
    return read_capture(files[0]) if files else None


def run(args: argparse.Namespace) -> Output:
    from rooftop.analysis.hosts import many_hosts
    from rooftop.analysis.profile import profile_report
    from rooftop.report import profile as report

    _check_files(args)
    if args.export_hlo is not None:
        _export_hlo(args)
    if many_hosts([args.path, *args.more]) or args.workers or args.cluster:
        if args.what_if is not None or args.idle or args.memory:
            from rooftop.errors import InvalidConfigError

            raise InvalidConfigError(
                "--what-if, --idle and --memory read one trace; on several hosts give one host's .xplane.pb"
            )
        return run_hosts(args)
    chip, trace, _ = _chip_and_trace(args)
    if args.what_if is not None:
        return run_what_if(args, chip, trace)
    capture = _capture(args, trace)
    prof = profile_report(trace, chip, args.hlo, args.mesh, args.topology, _progress(), capture)
    _write_files(args, prof, chip, trace if args.timeline is not None else None)
    payload = report.profile_payload(prof, chip)
    peak, measured = None, None
    if args.memory:
        from rooftop.analysis.peakmemory import profile_peak
        from rooftop.report.memorypeak import peak_payload

        peak = profile_peak(trace, args.hlo)
        measured = float(prof.memory["peak_bytes"]) if prof.memory.get("available") else None  # type: ignore[arg-type]
        payload["memory_peak"] = peak_payload(peak, measured)

    idle = _idle(trace) if args.idle else None
    if idle is not None:
        from rooftop.report.idle import idle_payload

        payload["idle"] = idle_payload(*idle)

    def render(console: Any) -> None:
        report.render_profile(console, prof, chip, args.top)
        if idle is not None:
            from rooftop.report.idle import render_idle

            render_idle(console, *idle)
        if peak is not None:
            from rooftop.report.memorypeak import render_peak

            render_peak(console, peak, args.top, measured)

    return Output(
        payload,
        render,
        [lambda path: report.plot_profile(prof, chip, path, args.top)],
    )
