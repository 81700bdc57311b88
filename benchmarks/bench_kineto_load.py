"""Reading a PyTorch (Kineto) trace against HolisticTraceAnalysis: whole processes, CPU seconds.

A trace of some 40k events is where per-file fixed costs (imports, column set-up) show. The peer is
HolisticTraceAnalysis (``pip install HolisticTraceAnalysis``; not a rooftop dependency: without it only
rooftop's side is timed) parsing the same file into its DataFrame (``hta.common.trace.Trace`` with one
rank, ``parse_traces`` without multiprocessing). rooftop's side is ``rooftop.analysis.trace.load.load_trace``.
Each is a fresh ``python`` process (start-up and imports included), run ``--runs`` times interleaved; the
table gives the median CPU seconds (user + system) and peak memory, and the peer's CPU over rooftop's
(goal: >= 4x on a 40k-event trace).

The file is ``--file``, else ``../shared/data/third_party_profiles/chrome_trace/hta_nccl_a100_2rank.json.gz``
(a real 40,573-event trace of HolisticTraceAnalysis's tests) when present, else a synthetic trace of
``--events`` events (``bench_profile.kineto_json``).

Run: ``python benchmarks/bench_kineto_load.py [--runs 5] [--file T.json.gz] [--events 40000]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "third_party_profiles" / "chrome_trace" / "hta_nccl_a100_2rank.json.gz"

PEER = """
import sys
from hta.common.trace import Trace
trace = Trace(trace_files={0: sys.argv[1]}, trace_dir="/")
trace.parse_traces(use_multiprocessing=False, use_memory_profiling=False)
print(len(trace.get_trace(0)))
"""
ROOFTOP = """
import sys
from rooftop.analysis.trace.load import load_trace
print(len(load_trace(sys.argv[1]).events))
"""


def run(code: str, path: Path, env: dict[str, str]) -> tuple[float, float]:
    """(CPU s: user + system, peak RSS MiB) of one fresh process."""
    quiet = subprocess.DEVNULL  # HolisticTraceAnalysis logs its progress to stderr
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], env=env, stdout=quiet, stderr=quiet)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("a benchmark process failed")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="interleaved runs of each reader (default 5)")
    parser.add_argument("--file", type=Path, help="a Kineto trace (.json or .json.gz)")
    parser.add_argument("--events", type=int, default=40_000, help="events of the synthetic trace (default 40000)")
    parser.add_argument("--src", type=Path, help="the src/ folder whose rooftop is timed (default: this checkout's)")
    args = parser.parse_args()
    src = args.src or ROOT / "src"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))}
    peer = importlib.util.find_spec("hta") is not None
    with tempfile.TemporaryDirectory() as tmp:
        path = args.file or (SHARED if SHARED.is_file() else None)
        if path is None:
            from bench_profile import kineto_json

            path = Path(tmp) / "synthetic.pt.trace.json.gz"
            kineto_json(path, args.events)
        cases = {"HolisticTraceAnalysis Trace.parse_traces": PEER} if peer else {}
        cases["rooftop load_trace"] = ROOFTOP
        results: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        for _ in range(args.runs):
            for label, code in cases.items():
                results[label].append(run(code, path, env))
    med = {k: (statistics.median(c for c, _ in v), statistics.median(m for _, m in v)) for k, v in results.items()}
    print(f"{path.name}, median of {args.runs} interleaved runs" + ("" if peer else " (HolisticTraceAnalysis absent)"))
    print(f"{'reader':<42} {'CPU s':>7} {'MiB':>7} {'peer CPU / this':>16}")
    first = next(iter(med.values()))[0]
    for label, (cpu, mib) in med.items():
        print(f"{label:<42} {cpu:7.3f} {mib:7.0f} {first / cpu:15.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
