"""XPlane loading against the bare reader, whole processes, CPU seconds and peak memory.

The peer is the least any reader of an ``.xplane.pb`` must do: jaxlib's ``ProfileData.from_file`` and one
pass touching every event's name, start, duration and stats (``jaxlib._profile_data``, the class that
``jax.profiler.ProfileData`` re-exports, imported without jax). rooftop's side is
``rooftop.analysis.trace.load.load_trace`` on the same file. Each is a fresh ``python`` process, run
``--runs`` times interleaved (peer, rooftop, peer, ...); the table gives the median CPU seconds (user +
system, whole process: start-up and imports included), the median CPU seconds of the read alone (as the
process measures it around the call), the peak resident memory, and each as a ratio to the peer's
(speed = peer CPU / rooftop CPU: >= 0.8 is the goal; memory = rooftop / peer: <= 1.2).

The file is a synthetic XSpace of ``--events`` GPU kernels over 8 ``/device:GPU:N`` planes (see
``bench_trace_load.py``: ``hlo_op``, ``hlo_module``, ``program_id``, ``correlation_id`` stats), or ``--file``.

Run: ``python benchmarks/bench_xplane_load.py [--events 1000000] [--runs 3] [--file F.xplane.pb]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
SRC = Path(__file__).resolve().parents[1] / "src"

PEER = """
import sys, time
t = time.process_time()
from jaxlib._profile_data import ProfileData
n = 0
for plane in ProfileData.from_file(sys.argv[1]).planes:
    for line in plane.lines:
        for ev in line.events:
            ev.name, ev.start_ns, ev.duration_ns, list(ev.stats)
            n += 1
print(n, time.process_time() - t)
"""

ROOFTOP = """
import sys, time
t = time.process_time()
from pathlib import Path
from rooftop.analysis.trace.load import load_trace
n = len(load_trace(Path(sys.argv[1])).events)
print(n, time.process_time() - t)
"""


def run(code: str, path: Path, env: dict[str, str]) -> tuple[float, float, float, int]:
    """(whole-process CPU s, CPU s of the read as the process counts it, peak RSS MiB, events)."""
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], env=env, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"a benchmark process failed ({proc.returncode})")
    events, read_s = out.split()
    return usage.ru_utime + usage.ru_stime, float(read_s), usage.ru_maxrss / 1024, int(events)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events of the synthetic file (default 1M)")
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs of each reader (default 3)")
    parser.add_argument("--file", type=Path, help="an .xplane.pb to read instead of a synthetic one")
    parser.add_argument("--src", type=Path, help="the src/ folder whose rooftop is timed (default: this checkout's)")
    args = parser.parse_args()
    src = args.src or SRC
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory() as tmp:
        path = args.file
        if path is None:
            path = Path(tmp) / "synthetic.xplane.pb"
            make = "import sys; from pathlib import Path; from bench_trace_load import synthetic_xplane as f; "
            make += "f(Path(sys.argv[1]), int(sys.argv[2]))"
            # made in a child: a process started from this one reports this one's peak memory if it is higher
            bench_env = {
                **env,
                "PYTHONPATH": os.pathsep.join([str(BENCH), env["PYTHONPATH"]]),
            }
            subprocess.run([sys.executable, "-c", make, str(path), str(args.events)], env=bench_env, check=True)
        results: dict[str, list[tuple[float, float, float, int]]] = {"peer": [], "rooftop": []}
        for _ in range(args.runs):
            results["peer"].append(run(PEER, path, env))
            results["rooftop"].append(run(ROOFTOP, path, env))
        size_mib = path.stat().st_size / 2**20  # read before the temporary file is removed
    med = {k: [statistics.median(r[i] for r in v) for i in range(3)] for k, v in results.items()}
    events = results["peer"][0][3]
    print(f"{path.name}: {size_mib:.1f} MiB, {events:,} events, median of {args.runs} interleaved runs")
    print(f"{'reader':<44} {'CPU s':>7} {'read s':>7} {'MiB':>7} {'speed':>7} {'memory':>7}")
    for label, key in (("jaxlib ProfileData.from_file + one pass", "peer"), ("rooftop load_trace", "rooftop")):
        cpu, read, mib = med[key]
        speed, memory = med["peer"][0] / cpu, mib / med["peer"][2]
        print(f"{label:<44} {cpu:7.2f} {read:7.2f} {mib:7.0f} {speed:6.2f}x {memory:6.2f}x")
    floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"(this process's own peak, a floor under each figure above: {floor:.0f} MiB)")
    for key, runs in results.items():
        print(f"{key} runs (CPU s, MiB): " + ", ".join(f"{r[0]:.2f} {r[2]:.0f}" for r in runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
