"""Trace loading speed: rooftop's loaders vs the bare readers on the same large files.

Builds (in a temporary directory unless ``--keep DIR``):

- a synthetic XPlane with ``--events`` GPU-style kernel events over 8 ``/device:GPU:N`` planes (each with
  ``hlo_op``, ``hlo_module``, ``program_id``, ``correlation_id`` stats), written as an XSpace text proto
  and serialized by jaxlib (``ProfileData.text_proto_to_serialized_xspace``), or with ``--profile`` a
  real XLA:CPU profile of a loop of small jitted ops on 8 host devices;
- a gzip Chrome trace-event JSON with the same number of events.

CPU seconds of this process (``time.process_time``: what holds on a shared machine), the median of
``--repeat`` runs of each reader, the readers of one file interleaved (one run of each in turn):

- XPlane: ``rooftop.analysis.trace.load.load_trace`` vs ``jax.profiler.ProfileData.from_file`` plus one pass
  over every event's name, times and stats (the least any reader must do), and the xprof
  ``trace_viewer`` converter when the ``xprof`` package is installed;
- JSON: ``load_trace`` (streaming) vs ``json.load(gzip.open(...))`` (whole document in memory);
- ``group_ops`` on the loaded XPlane trace.

Usage: ``python benchmarks/bench_trace_load.py [--events 200000] [--repeat 3] [--profile]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from rooftop.analysis.gcpause import paused_gc
from rooftop.analysis.trace.load import load_trace
from rooftop.analysis.trace.ops import group_ops

GPUS = 8
INSTRUCTIONS = 50


def synthetic_xplane(path: Path, events: int) -> None:
    """GPU-style kernels: ``events / 8`` per device plane, 2 us apart, cycling over 50 fusions."""
    from jax.profiler import ProfileData

    stat_names = ("hlo_op", "hlo_module", "program_id", "correlation_id")
    stat_meta = " ".join(
        f'stat_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}' for i, n in enumerate(stat_names, 1)
    )
    event_meta = " ".join(
        f'event_metadata {{ key: {k + 1} value {{ id: {k + 1} name: "fusion_{k}" }} }}' for k in range(INSTRUCTIONS)
    )
    planes = []
    for device in range(GPUS):
        body = []
        for i in range(events // GPUS):
            k = i % INSTRUCTIONS
            body.append(
                f"events {{ metadata_id: {k + 1} offset_ps: {i * 2_000_000} duration_ps: 1500000 "
                f'stats {{ metadata_id: 1 str_value: "fusion.{k}" }} stats {{ metadata_id: 2 str_value: "jit_step" }} '
                f"stats {{ metadata_id: 3 int64_value: 7 }} stats {{ metadata_id: 4 int64_value: {i} }} }}"
            )
        lines = f'lines {{ id: 1 name: "Stream #1(Kernel)" timestamp_ns: 1000 {" ".join(body)} }}'
        planes.append(f'planes {{ id: {device + 1} name: "/device:GPU:{device}" {lines} {event_meta} {stat_meta} }}')
    path.write_bytes(ProfileData.text_proto_to_serialized_xspace("\n".join(planes)))


def profiled_xplane(directory: Path, events: int) -> Path:
    """A real XLA:CPU profile: a loop of a small jitted function sharded over 8 host devices."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:GPUS]), ("x",))

    @jax.jit
    def step(a: Any) -> Any:
        return jnp.sum(jnp.tanh(a) * 2.0 + 1.0)

    a = jax.device_put(jnp.ones((64, 32)), NamedSharding(mesh, P("x", None)))
    step(a).block_until_ready()
    with jax.profiler.trace(str(directory)):
        for _ in range(max(1, events // (GPUS * 12))):  # ~12 events per device per execution
            step(a).block_until_ready()
    return next(directory.glob("plugins/profile/*/*.xplane.pb"))


def chrome_json(path: Path, events: int) -> None:
    """Trace-event JSON in JAX's layout: process/thread names, then ``X`` events with XLA args."""
    with gzip.open(path, "wt", compresslevel=1) as fh:
        fh.write('{"displayTimeUnit": "ns", "traceEvents": [\n')
        for device in range(GPUS):
            fh.write(
                json.dumps(
                    {"ph": "M", "pid": device, "name": "process_name", "args": {"name": f"/device:GPU:{device}"}}
                )
            )
            fh.write(",\n")
        for i in range(events):
            k = i % INSTRUCTIONS
            args = {"hlo_op": f"fusion.{k}", "hlo_module": "jit_step", "program_id": "7", "correlation_id": str(i)}
            event = {
                "ph": "X",
                "pid": i % GPUS,
                "tid": 1,
                "ts": i * 2.0,
                "dur": 1.5,
                "name": f"fusion_{k}",
                "args": args,
            }
            fh.write(json.dumps(event) + (",\n" if i + 1 < events else "\n"))
        fh.write("]}\n")


def interleaved(repeat: int, fns: dict[str, Callable[[], Any]]) -> dict[str, tuple[float, Any]]:
    """The median CPU seconds and the last result of each function, run ``repeat`` times in turn."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    results: dict[str, Any] = {}
    for _ in range(repeat):
        for k, fn in fns.items():
            start = time.process_time()
            results[k] = fn()
            times[k].append(time.process_time() - start)
    return {k: (statistics.median(times[k]), results[k]) for k in fns}


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """The median CPU seconds of ``repeat`` runs of ``fn``, and its result."""
    return interleaved(repeat, {"": fn})[""]


def profile_data_pass(path: Path) -> int:
    from jax.profiler import ProfileData

    n = 0
    for plane in ProfileData.from_file(str(path)).planes:
        for line in plane.lines:
            for ev in line.events:
                ev.name, ev.start_ns, ev.duration_ns, list(ev.stats)
                n += 1
    return n


def xprof_trace_viewer(path: Path) -> Callable[[], Any] | None:
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:
        return None
    return lambda: raw_to_tool_data.xspace_to_tool_data([str(path)], "trace_viewer", {})


def row(name: str, events: int, seconds: float, reference: float) -> str:
    return f"{name:<44} {events:>10,} {seconds:>9.3f} {seconds / reference:>7.2f}x"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="events per file (default 200000)")
    parser.add_argument("--repeat", type=int, default=3, help="timings per reader; the median is shown")
    parser.add_argument(
        "--profile", action="store_true", help="profile real XLA:CPU work instead of a synthetic XSpace"
    )
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        xplane = profiled_xplane(work / "logdir", args.events) if args.profile else work / "synthetic.xplane.pb"
        if not args.profile:
            synthetic_xplane(xplane, args.events)
        trace_json = work / "synthetic.trace.json.gz"
        chrome_json(trace_json, args.events)

        runs = interleaved(args.repeat, {"base": lambda: profile_data_pass(xplane), "ours": lambda: load_trace(xplane)})
        (base_s, n_base), (ours_s, trace) = runs["base"], runs["ours"]
        with paused_gc():
            base_nogc_s, _ = best_of(args.repeat, lambda: profile_data_pass(xplane))
        group_s, groups = best_of(args.repeat, lambda: group_ops(trace))
        print(f"XPlane {xplane.name}: {xplane.stat().st_size / 2**20:.1f} MiB, {n_base:,} events")
        print(f"{'reader':<44} {'events':>10} {'CPU s':>9} {'ratio':>8}")
        print(row("jax.profiler.ProfileData (parse + one pass)", n_base, base_s, base_s))
        print(row("  the same with the cyclic GC paused", n_base, base_nogc_s, base_s))
        print(row("rooftop load_trace (xplane)", len(trace.events), ours_s, base_s))
        print(row(f"rooftop group_ops ({len(groups)} ops)", len(trace.events), group_s, base_s))
        xprof = xprof_trace_viewer(xplane)
        if xprof is None:
            print("xprof converter: not installed (pip install xprof) - skipped")
        else:
            xprof_s, _ = best_of(args.repeat, xprof)
            print(row("xprof xspace_to_tool_data trace_viewer", n_base, xprof_s, base_s))

        json_runs = interleaved(
            args.repeat,
            {
                "base": lambda: len(json.load(gzip.open(trace_json, "rt"))["traceEvents"]),
                "ours": lambda: load_trace(trace_json),
            },
        )
        json_base_s, json_s, jtrace = json_runs["base"][0], json_runs["ours"][0], json_runs["ours"][1]
        print(f"\nChrome JSON {trace_json.name}: {trace_json.stat().st_size / 2**20:.1f} MiB gzip")
        print(row("json.load(gzip.open(...)) (whole document)", args.events + GPUS, json_base_s, json_base_s))
        print(row("rooftop load_trace (streaming chrome-json)", len(jtrace.events), json_s, json_base_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
