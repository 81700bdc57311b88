"""The long fuzz run: hostile inputs for every part of rooftop a user can reach, counted per target.

Targets (cases are built by ``tests/fuzz``; case N of a target is the same on every run):

- ``cli``: command lines of every subcommand with hostile flag values and paths;
- ``hlo``: mutated real HLO dumps (../shared) and generated modules through ``rooftop hlo``;
- ``trace``: mutated Kineto/JAX JSON traces and XPlane protobufs through ``rooftop profile``;
- ``chip``: mutated catalog chip files passed as ``--chip FILE.toml`` / ``--catalog``;
- ``config``: mutated Hugging Face config.json through ``rooftop model/train/serve``;
- ``calibrate``: ``rooftop calibrate --quick`` with hostile arguments (each run measures the device);
- ``capture``: a graph-replayed PyTorch trace with its engine capture trace mutated (``profile --capture``);
- ``engine``: PyTorch traces of LLM-engine custom ops with their signatures (Input Dims, types, concrete
  inputs) spoiled;
- ``requests``: ``serve --percentiles --request-trace`` files with lines, keys and values spoiled;
- ``diff``: ``rooftop diff`` of two traces or two HLO modules, one side mutated or of the other kind.

Each case runs in a worker process (in-process there: ``rooftop.cli.main.main``), under a per-case time
limit (``--time-limit``, 10 s: a watchdog names the Python frame it interrupts) and an address-space cap;
a worker stuck in C code is killed and the case counted as a hang. The oracle is
:mod:`tests.fuzz.oracle`: exit 0, or exit 2 with one line on stderr; anything else is a finding.

Prints per target: inputs, passes, RooftopErrors (one-line exit 2), then each kind of finding; then the
findings grouped by kind and place (exception type + innermost rooftop frame), each with its count and
one reproducer, shrunk (``tests.fuzz.reduce``) and saved under ``--save`` (argv.txt and the files).

Usage: ``python benchmarks/fuzz.py [--cli 3000] [--hlo-lines 100000] [--traces 2000] [--chips 300]
[--configs 300] [--calibrate 10] [--captures 300] [--engine-ops 300] [--request-traces 300]
[--diffs 300] [--budget 7200] [--time-limit 10] [--save DIR] [--seed 0]``.
Done when: 0 internal errors, 0 hangs, 0 multi-line errors (the counts printed below).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "src") not in sys.path:
    sys.path.insert(1, str(ROOT / "src"))

KINDS = ("pass", "error", "internal", "hang", "multiline", "noise", "bad_output", "stray_file", "long_error")
#: a crash is a worker that died (a segfault in C code, say); a harness error is a case generator's bug
REDUCE_BUDGET_S = 45.0


# ----------------------------------------------------------------------------------------------------
# worker: runs cases on request, one JSON line in, one JSON line out


def worker() -> int:
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("MPLBACKEND", "Agg")
    from tests.fuzz.oracle import run_case, warm_up
    from tests.fuzz.reduce import reduce_case
    from tests.fuzz.targets import make_case

    warm_up()

    reduced: set[str] = set()
    out = os.fdopen(os.dup(1), "w", buffering=1)  # fd 1 itself is captured case by case
    for line in sys.stdin:
        req = json.loads(line)
        if "known" in req:
            reduced.update(req["known"])
            continue
        try:
            case = make_case(req["target"], req["seed"])
        except Exception as exc:  # a bug of the harness, not of rooftop
            out.write(json.dumps({"kind": "harness", "detail": f"case generator: {type(exc).__name__}: {exc}"}) + "\n")
            continue
        outcome = run_case(case, req["time_limit"])
        reply: dict[str, Any] = {"kind": outcome.kind, "detail": outcome.detail, "where": outcome.where,
                                 "seconds": outcome.seconds, "lines": case.lines, "key": outcome.key()}  # fmt: skip
        if outcome.failed or outcome.kind == "long_error":
            reply["size"], reply["describe"] = case.size(), case.describe(300)
            if outcome.failed and outcome.key() not in reduced and req.get("reduce", True):
                reduced.add(outcome.key())
                out.write(json.dumps({"reducing": outcome.key()}) + "\n")
                limit = req["time_limit"]
                small = reduce_case(case, outcome.key(), REDUCE_BUDGET_S, lambda c, t=limit: run_case(c, t))
                reply["reduced"] = small.describe(3000)
                reply["saved"] = _save(small, req.get("save"), outcome.key())
        out.write(json.dumps(reply) + "\n")
    return 0


def _save(case: Any, folder: str | None, key: str) -> str:
    if not folder:
        return ""
    import hashlib
    import re

    from tests.fuzz.oracle import Special

    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", key)[:80] + "-" + hashlib.sha1(key.encode()).hexdigest()[:8]
    where = Path(folder) / slug
    where.mkdir(parents=True, exist_ok=True)
    (where / "argv.json").write_text(json.dumps(case.argv))
    (where / "case.txt").write_text(case.describe(100000) + "\n", errors="backslashreplace")
    for name, value in case.files.items():
        path = where / "files" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, Special):
            (path.parent / (path.name + ".special.txt")).write_text(f"{value.kind} {value.arg}\n")
        else:
            path.write_bytes(value)
    return str(where)


# ----------------------------------------------------------------------------------------------------
# parent: schedules cases, kills a stuck worker, counts


class Worker:
    def __init__(self, known: set[str]) -> None:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                                     start_new_session=True)  # fmt: skip
        self.send({"known": sorted(known)})

    def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else {"kind": "crash", "detail": f"worker exited {self.proc.poll()}"}

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


class Tally:
    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = defaultdict(Counter)
        self.lines: Counter[str] = Counter()
        self.groups: dict[str, dict[str, Any]] = {}
        self.slow: list[tuple[float, str, int]] = []

    def add(self, target: str, seed: int, reply: dict[str, Any]) -> None:
        kind = reply["kind"]
        self.counts[target]["inputs"] += 1
        self.counts[target][kind] += 1
        self.lines[target] += reply.get("lines", 0)
        if reply.get("seconds", 0) > 5 and kind != "hang":
            self.slow.append((reply["seconds"], target, seed))
        if kind in ("pass", "error"):
            return
        key = reply.get("key") or f"{kind}: {reply.get('detail', '')[:100]}"
        group = self.groups.setdefault(key, {"count": 0, "targets": Counter(), "first": None})
        group["count"] += 1
        group["targets"][target] += 1
        size = reply.get("size", 1 << 60)
        if group["first"] is None or size < group["first"]["size"]:
            group["first"] = {"size": size, "target": target, "seed": seed, "detail": reply.get("detail", ""),
                              "describe": reply.get("describe", "")}  # fmt: skip
        if "reduced" in reply:
            group["reduced"], group["saved"] = reply["reduced"], reply.get("saved", "")

    def report(self, elapsed: float) -> None:
        cols = ("inputs", *KINDS, "crash", "harness")
        print(f"\n{'target':<10}" + "".join(f"{c:>11}" for c in cols) + "   extra")
        for target, c in self.counts.items():
            extra = f"{self.lines[target]:,} HLO lines" if self.lines[target] else ""
            print(f"{target:<10}" + "".join(f"{c[k]:>11,}" for k in cols) + f"   {extra}")
        total = Counter[str]()
        for c in self.counts.values():
            total.update(c)
        print(f"{'total':<10}" + "".join(f"{total[k]:>11,}" for k in cols) + f"   ({elapsed:.0f} s)")
        print(f"\ninternal errors: {total['internal']}, hangs over the limit: {total['hang']}, "
              f"multi-line errors: {total['multiline']}, crashes: {total['crash']}")  # fmt: skip
        print(f"\n{len(self.groups)} distinct findings (kind: exception @ innermost rooftop frame):")
        for key, g in sorted(self.groups.items(), key=lambda kv: (kv[0].split(":")[0], -kv[1]["count"])):
            targets = ", ".join(f"{t} {n}" for t, n in g["targets"].most_common())
            print(
                f"\n== {key}\n   {g['count']} cases ({targets}); e.g. {g['first']['target']} case {g['first']['seed']}"
            )
            print(f"   said: {g['first']['detail'][:300]}")
            shown = g.get("reduced") or g["first"]["describe"]
            print("   reproducer: " + shown.replace("\n", "\n   "))
            if g.get("saved"):
                print(f"   saved in {g['saved']}")
        if self.slow:
            print("\nslowest cases that finished (s, target, case): "
                  + ", ".join(f"{s:.1f} {t} {n}" for s, t, n in sorted(self.slow, reverse=True)[:10]))  # fmt: skip
        sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    goals = {"cli": args.cli, "hlo": args.hlo_lines, "trace": args.traces, "chip": args.chips,
             "config": args.configs, "calibrate": args.calibrate, "capture": args.captures, "engine": args.engine_ops,
             "requests": args.request_traces, "diff": args.diffs}  # fmt: skip
    goals = {t: n for t, n in goals.items() if n > 0 and (not args.only or t in args.only)}
    done = Counter[str]()
    next_seed = {t: args.seed for t in goals}
    tally = Tally()
    known: set[str] = set()
    work = Worker(known)
    start = time.monotonic()
    hard_limit = 3 * args.time_limit + 15

    def progress(t: str) -> float:
        return (tally.lines[t] if t == "hlo" else done[t]) / goals[t]

    try:
        while time.monotonic() - start < args.budget:
            open_targets = [t for t in goals if progress(t) < 1]
            if not open_targets:
                break
            target = min(open_targets, key=progress)
            seed = next_seed[target]
            next_seed[target] += 1
            work.send({"target": target, "seed": seed, "time_limit": args.time_limit, "save": args.save,
                       "reduce": not args.no_reduce})  # fmt: skip
            deadline = hard_limit
            while True:
                reply = work.receive(deadline)
                if reply is not None and "reducing" in reply:
                    known.add(reply["reducing"])
                    deadline = REDUCE_BUDGET_S + 4 * hard_limit
                    continue
                break
            if reply is not None and reply["kind"] == "harness":
                reply["key"] = f"harness: {reply['detail'][:120]}"  # the worker lives on
            elif reply is None or reply["kind"] == "crash":
                from tests.fuzz.targets import make_case

                case = make_case(target, seed)
                died = reply is None
                reply = {"kind": "hang" if died else "crash", "size": case.size(), "describe": case.describe(300),
                         "key": "hang: worker stuck in C code (killed)" if died else f"crash: {reply['detail']}",
                         "detail": f"no answer in {deadline:.0f} s" if died else reply["detail"],
                         "lines": case.lines}  # fmt: skip
                work.kill()
                work = Worker(known)
            tally.add(target, seed, reply)
            done[target] += 1
            if args.verbose and reply["kind"] not in ("pass", "error"):
                print(f"[{time.monotonic() - start:6.0f}s] {target} {seed}: {reply['key'][:150]}", flush=True)
            if sum(done.values()) % 500 == 0:
                print(f"[{time.monotonic() - start:6.0f}s] " + ", ".join(f"{t} {done[t]}" for t in goals), flush=True)
    finally:
        work.kill()
    tally.report(time.monotonic() - start)
    bad = sum(c[k] for c in tally.counts.values() for k in ("internal", "hang", "multiline", "crash", "harness"))
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", type=int, default=3000, help="CLI invocations (default 3000)")
    parser.add_argument("--hlo-lines", type=int, default=100_000, help="HLO lines over all modules (100000)")
    parser.add_argument("--traces", type=int, default=2000, help="traces: JSON and XPlane (default 2000)")
    parser.add_argument("--chips", type=int, default=300, help="chip files (default 300)")
    parser.add_argument("--configs", type=int, default=300, help="config.json files (default 300)")
    parser.add_argument("--calibrate", type=int, default=10, help="calibrate runs, seconds each (default 10)")
    parser.add_argument("--captures", type=int, default=300, help="capture traces (default 300)")
    parser.add_argument("--engine-ops", type=int, default=300, help="traces of engine ops (default 300)")
    parser.add_argument("--request-traces", type=int, default=300, help="request-trace files (default 300)")
    parser.add_argument("--diffs", type=int, default=300, help="diff pairs (default 300)")
    parser.add_argument("--only", nargs="*", help="run only these targets")
    parser.add_argument("--budget", type=float, default=7200, help="stop after this many seconds (default 7200)")
    parser.add_argument("--time-limit", type=float, default=10.0, help="per-case limit, seconds (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="first case number of every target (default 0)")
    parser.add_argument("--save", help="save each finding's shrunk reproducer in this folder")
    parser.add_argument("--no-reduce", action="store_true", help="do not shrink reproducers")
    parser.add_argument("--verbose", action="store_true", help="print each finding as it happens")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    if args.worker:
        return worker()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
