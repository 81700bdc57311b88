"""Many-host profiles (analysis/hosts.py): wall time and peak memory per worker with 1 and 2 local workers.

Builds (in a temporary directory unless ``--keep DIR``) ``--hosts`` synthetic hosts of about ``--events``
events each from a real profile: three JAX processes on the CPU profiled together, process 2 slowed
(tests/fixtures/many_hosts/make_profiles.py). Host ``h`` is process ``h % 3``'s XSpace with its events
repeated, each copy later by the span of the longest process's profile and its step numbers moved on,
until it holds the events asked for, and every time moved by ``h`` x 10 us (the hosts' clocks apart).
The XSpace is read and written with the protobuf runtime against the fuzz suite's declared subset of
``xplane.proto`` (tests/fuzz/xspace.py): fields not declared are carried through untouched.

Each run is a fresh process (``many_host_report``, as ``rooftop profile LOGDIR --workers N`` runs it):
``wall`` its time, ``cpu`` the CPU seconds of it and its workers, ``coordinator MiB`` its own peak resident
memory, ``worker MiB`` the largest peak of its worker processes (with 1 worker the hosts are reduced in the
coordinator, so the two are one), ``load`` the machine's load average around it. The scaling is wall(1) /
wall(2); the extrapolation to 1,000 hosts spreads the per-host time of one worker (its wall over the hosts,
the merge included) over a cluster's workers, each holding one host at a time.

Usage: ``python benchmarks/bench_many_hosts.py [--hosts 64] [--events 200000] [--workers 1,2] [--keep DIR
[--reuse]]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHIFT_NS = 10_000  # host h's clock is h x this later
SEED_STEPS = 4


def _messages() -> dict[str, Any]:
    """XSpace and its parts as message classes, from the fuzz suite's declared subset of xplane.proto (the
    fields it does not declare are kept as unknown fields and written back untouched)."""
    sys.path.insert(0, str(REPO))  # the repository, for its test helpers
    from tests.fuzz.xspace import messages

    return messages()


def span_ps(seed: bytes) -> int:
    """From the first line's start to the last event's start, in picoseconds."""
    space = _messages()["XSpace"]()
    space.ParseFromString(seed)
    lines = [ln for p in space.planes for ln in p.lines if len(ln.events)]
    last = max((ln.timestamp_ns * 1000 + e.offset_ps for ln in lines for e in ln.events), default=0)
    return last - min((ln.timestamp_ns * 1000 for ln in lines), default=0)


def amplified(seed: bytes, events: int, host: int, every_ps: int) -> bytes:
    """``seed`` with its events repeated to about ``events``, copy ``c`` later by ``c`` x ``every_ps`` (the
    same for every host, so that the k-th run of a collective is the k-th everywhere) and its step numbers
    on by ``c`` x the seed's steps, every time moved by ``host`` x SHIFT_NS."""
    space = _messages()["XSpace"]()
    space.ParseFromString(seed)
    have = sum(len(ln.events) for p in space.planes for ln in p.lines)
    copies = max(1, -(-events // max(have, 1)))
    for plane in space.planes:
        step_ids = {k for k, m in plane.stat_metadata.items() if m.name == "step_num"}
        for line in plane.lines:
            originals = list(line.events)
            for c in range(1, copies):
                for ev in originals:
                    new = line.events.add()
                    new.CopyFrom(ev)
                    new.offset_ps = ev.offset_ps + c * every_ps
                    for st in new.stats:
                        if st.metadata_id in step_ids:
                            st.int64_value += c * SEED_STEPS
            if line.duration_ps:
                line.duration_ps += (copies - 1) * every_ps
            line.timestamp_ns += host * SHIFT_NS
    return space.SerializeToString()


def build(work: Path, hosts: int, events: int) -> Path:
    sys.path.insert(0, str(REPO))  # the repository, for its test fixtures
    from tests.fixtures.many_hosts.make_profiles import make

    seed_run = make(work / "seed", processes=3, slow=2, steps=SEED_STEPS)
    seeds = [(seed_run / f"host{i}.xplane.pb").read_bytes() for i in range(3)]
    every_ps = max(map(span_ps, seeds)) + 1_000_000  # the longest seed, and 1 us
    run = work / "logdir" / "plugins" / "profile" / "run"
    run.mkdir(parents=True, exist_ok=True)
    for h in range(hosts):
        (run / f"host{h:04d}.xplane.pb").write_bytes(amplified(seeds[h % 3], events, h, every_ps))
    return run


def child(run: Path, workers: int) -> None:
    from rooftop.analysis.hosts import many_host_report
    from rooftop.hardware.catalog import get_chip

    t = time.perf_counter()
    merge = many_host_report([run], get_chip("h100"), workers=workers)
    wall = time.perf_counter() - t
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    own, kid = me.ru_maxrss / 1024, kids.ru_maxrss / 1024
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    top = merge.views.stragglers[0].host if merge.views.stragglers else "-"
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "coordinator_mib": own, "worker_mib": kid if workers > 1 else own,
                      "ops": len(merge.report.ops), "steps": len(merge.report.steps), "straggler": top}))  # fmt: skip


def measure(run: Path, workers: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", str(run), "--workers", str(workers)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--reuse", action="store_true", help="with --keep: time the hosts already built there")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, int(args.workers))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        t = time.perf_counter()
        run = work / "logdir" / "plugins" / "profile" / "run"
        if not (args.reuse and run.is_dir()):
            run = build(work, args.hosts, args.events)
        size = sum(f.stat().st_size for f in run.iterdir()) / 2**20
        print(f"{args.hosts} hosts of ~{args.events:,} events ({size:.0f} MiB of xplane) built in "
              f"{time.perf_counter() - t:.0f} s")  # fmt: skip
        rows = {}
        for w in args.workers.split(","):
            load = os.getloadavg()[0]
            rows[int(w)] = {**measure(run, int(w)), "load": (load + os.getloadavg()[0]) / 2}
    print(
        f"{'workers':>7} {'wall s':>8} {'s/host':>7} {'worker MiB':>10} {'coord. MiB':>10} {'speed-up':>8}  straggler"
    )
    base = rows[min(rows)]["wall_s"]
    for w, r in rows.items():
        cells = f"{w:>7} {r['wall_s']:>8.1f} {r['cpu_s']:>7.1f} {r['wall_s'] / args.hosts:>7.2f}"
        cells += f" {r['worker_mib']:>10.0f} {r['coordinator_mib']:>10.0f} {base / r['wall_s']:>8.2f} {r['load']:>5.1f}"
        print(f"{cells}  {r['straggler']}")
    print("load: the machine's 1-minute load average around the run (2 workers need 2 idle cores to halve the wall)")
    per_host = base / args.hosts * min(rows)
    for cluster in (2, 16, 64):
        print(f"1,000 hosts on {cluster} workers: ~{1000 * per_host / cluster / 60:.1f} min "
              f"(at {per_host:.2f} s of one worker per host)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
