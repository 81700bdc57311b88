"""`rooftop profile` on large traces: wall time and peak memory, against the goals of issue #15.

Builds (in a temporary directory unless ``--keep DIR``) synthetic traces of about ``--events`` events:

- ``jax``: a Chrome trace-event JSON (gzip) in JAX's layout: 8 ``/device:GPU:N`` processes, each with a
  ``Steps`` line (one marker per step; left out with ``--no-markers``, so steps come from module
  executions), an ``XLA Modules`` line (one ``jit_step`` execution per step), a compute stream of
  ``dot.K`` kernels and a collective stream of ``all-reduce-start.J`` kernels that overlap the compute,
  and the HLO text of ``jit_step`` (given as ``--hlo``, so every op is joined and judged);
- ``kineto``: a PyTorch (Kineto) JSON trace: per rank (host thread) and step a ``ProfilerStep#N``
  annotation, ``aten::mm`` cpu_ops with ``Input Dims`` each launching (``cudaLaunchKernel``, same
  ``correlation``) one GEMM kernel on the rank's GPU, and NCCL all-reduce kernels with their args;
- ``tiny``: a Kineto trace of 2 us kernels of 16 names and nothing else (recorded without CPU
  activities): no op explains them, and they must be grouped by kernel name (16 rows).

Each trace is measured in fresh processes (peak memory is per process), ``--runs`` times: ``total`` is the
wall time of ``profile_report`` on the path (what ``rooftop profile`` runs: load, join, verdicts, steps),
``cpu`` the CPU time it took (user and system: on a shared machine, less noisy than the wall time) and
``peak MiB`` the process's high-water mark of resident memory after it (``resource.getrusage``). With
``--runs`` above 1 the medians are printed under the runs. The first run also times the phases on a
loaded trace, after the total (their memory is not in the peak): ``load`` (``load_trace``), ``group``
(``group_ops``), ``steps`` (``detect_steps``) and ``compare`` (``profile_report`` on the loaded trace).
The goals: a 1.2M-event trace in under 400 MiB and 10 s on 2 cores.

The JSON is decoded with orjson where it is installed (the ``fast`` extra), else with the json module;
``--json stdlib`` measures the json module where orjson is installed. Run against an older checkout
(``PYTHONPATH=<checkout>/src``), the script measures that code: a before/after on one machine.

Measured on a shared 2-core machine, 1.2M events, medians of 3 runs (total s / peak MiB), before orjson,
then with orjson 3.13.0 and with the json module: jax 11.8 / 258, 10.1 / 262, 10.8 / 260; kineto
15.9 / 352, 13.3 / 354, 15.8 / 352; tiny 11.9 / 355, 8.6 / 357, 11.7 / 356. With orjson, decoding
(gzip included) takes about 4-5 s of the Kineto load's 10 s, mapping the events to rows most of the rest.

Then the events mapped a batch at a time (analysis/trace/chrome_batch.py), 64 Ki characters decoded at a
time, each column's codes worked out once: before and after side by side (``PYTHONPATH=<checkout>/src``,
orjson, runs taken in turns on the same machine; total s / cpu s / peak MiB, medians of 3). A busy hour
(another process on the other core), the final code: kineto 16.7 / 16.7 / 354 -> 12.6 / 12.6 / 360, jax
12.0 / 11.9 / 269 -> 10.0 / 10.0 / 269, tiny 11.8 / 11.8 / 354 -> 9.0 / 9.0 / 365. A quieter hour, an
earlier step (the batched loop and the cached codes only): kineto 12.5 -> 10.2, jax 9.0 -> 8.1, tiny 8.2
-> 7.3 s. So on a quiet machine the Kineto trace takes about 10 s: decoding (orjson making the objects,
then freeing them) and mapping the events take about 3.5 s each of its load, the report about 1.5 s.

Then the loaded table left out of the collector's young scans (analysis/gcpause.py: 0.5 s of the Kineto
trace), the events appended straight to the columns (no row tuples to transpose) with each category's
rules looked up once, the JSON buffer refilled before a batch (one failed decode per chunk: 0.2 s), and the
Kineto report's join of kernels and ops done with object arrays and a binary search for the innermost op
(analysis/torch/launches.py), steps and module runs found by the kind codes. Before and after in turns,
as above (total s / cpu s / peak MiB, medians of 3), a busy hour (the host loaded: the code before took
10.4 and 10.9 s in single runs half an hour earlier, the code after 9.2 and 9.3 s): kineto 14.30 / 14.24 /
358 -> 12.20 / 12.14 / 364 and 14.76 / 14.71 / 359 -> 12.38 / 12.33 / 363; tiny (another process on the
other core) 9.55 / 9.51 / 365 -> 8.77 / 8.68 / 365 and 10.06 / 9.95 / 365 -> 8.73 / 8.66 / 365; jax 11.20 /
11.07 / 270 -> 12.04 / 11.96 / 270 and 10.12 / 10.09 / 270 -> 8.42 / 8.41 / 270, no change beyond the noise
(seven runs of both at once, so under the same load: the CPU time after minus before from -1.06 to +0.42 s,
median +0.01 s). Kineto, both at once: 1.5 to 2.4 s less CPU time (of 15 to 16 s). So on a quiet machine
the Kineto trace takes about 9.3 s. With the collector's threshold then lowered (the young collection after
a JAX load, 0.1 s, and after the tiny trace's report, 0.17 s, left out too), single runs in turns: jax 9.27,
9.79, 11.35 -> 9.05, 8.83, 11.59 s; tiny 11.49, 8.96 -> 7.81, 9.55 s.

Then (2026-11-27) the check for runs of 19 digits before orjson decodes a batch done with numpy
(``jsonstream.long_digits``): timed inside the Kineto load, 0.34-0.40 -> 0.17 s of its 3.2-3.7 s of reading
and decoding. Single runs in turns, before and after (total s / cpu s / peak MiB, medians; the host busy,
single runs of the same code from 9.8 to 15.8 s, so the change is below the noise): kineto (9 pairs) 11.73 /
11.71 / 364 -> 11.81 / 11.78 / 364; tiny (7 pairs) 9.63 / 9.61 / 365 -> 9.17 / 9.01 / 365; jax (7 pairs)
10.84 / 10.73 / 270 -> 11.14 / 11.09 / 270 (its decoding alone, 4 runs of each in turns: 1.72-1.96 s both).
Tried and left out: mapping a run of Kineto events a field at a time (a C-level pass over the run per field)
was 6-12% slower than the loop over the events (each pass reads every event's dict again). What is left on
a quiet machine is mostly the making and freeing of the decoded objects (orjson 1.5-1.9 s, freeing about
1 s) and the loop over them (about 3 us an event: 4 s, of which the args kept, 1.3 us, and the field checks,
0.65 us); a decoder that skips the keys a report never reads (msgspec with typed structs, not a dependency)
decoded and freed every batch of the Kineto trace in 1.7-1.9 s where orjson took 2.5 s. After the change,
the same day with nothing else running (load average 0.3), ``--trace kineto --runs 3``: 11.57 s median
(10.80-13.15), 364 MiB: the 10 s goal is not met on this host. What would meet it is a different design
(the events mapped by two processes, one per core, each on its half of the batches, their columns merged),
not a faster loop.

Then (2026-11-27, later) that design (analysis/trace/chrome_parts.py): on 2 cores the Kineto and JAX traces'
events are mapped by two processes, the second reading the text to its offset undecoded and sending its rows a
chunk at a time, the caller taking them in between its own batches; and correlation ids kept as ints
(``events.correlation_key``). ``cpu`` now counts the part's process too, ``all MiB`` is the largest sum of the
proportional set sizes of the process and its part's process (sampled every 50 ms). Medians of 3 (total s / cpu
s / peak MiB / all MiB) on a slow hour of the host, the new code with two processes, then with one
(``ROOFTOP_TRACE_PROCESSES=1``) right after: jax 7.63 / 11.29 / 270 / 263 and 13.19 / 12.46 / 269 / 262;
kineto 8.48 / 13.22 / 379 / 372 and 12.30 / 11.92 / 336 / 329; tiny 5.68 / 8.94 / 334 / 327 and 10.52 / 10.18 /
327 / 321. An earlier, quieter run of the two processes: jax 8.01, kineto 6.25 (381 MiB), tiny 5.53 s. The
whole ``rooftop profile --json`` of the Kineto trace, two processes against one in turns (5 pairs): 9.21 against
13.50 s, ratio 0.77 (0.61-0.91). The part's process peaks at 37 MiB (its rows leave as they are made); the
caller's peak is 40-45 MiB above one process's, heap the merge leaves free (the Python objects are the same:
tracemalloc 209 against 207 MiB after the load).
`benchmarks/profile_equivalence.py` checks that the output did not change.

Then (2026-11-29) 8 processes (``ROOFTOP_TRACE_PROCESSES=8``, an 8-core machine's default, run on the 2 cores),
the Kineto trace, ``rooftop profile --json`` with every process's memory sampled every 20 ms from
``/proc/PID/smaps_rollup``: before, the caller's resident peak 416 MiB, the processes' PSS summed 402 MiB and
their RSS summed 505 MiB (the parts' processes hold 12 MiB of their own each; the rest of their RSS is pages
shared with the caller); joining the parts one after another grew the caller by 100 MiB, 86 of it free but
held by the C heap. After (the parts' chunks joined into each column at once, the heap's free memory given
back, ``gcpause.release_free_heap``): the join grows it by 28 MiB, the load's peak 377 -> 332 MiB; the whole
command 412 / 400 / 484 MiB: its peak is now the report's (136 MiB over the loaded table here, 97 MiB over
the same table read by one process, which peaks at 352 MiB), so the 400 MiB goal is met by the load, not yet
by the command.

Usage: ``python benchmarks/bench_profile.py [--events 200000] [--trace jax|kineto|tiny|both|all]
[--runs 1] [--json auto|stdlib] [--no-markers] [--no-hlo] [--cprofile] [--keep DIR [--reuse]]``.
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import json
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import IO, Any

from rooftop.analysis.profile import profile_report
from rooftop.analysis.trace import jsonstream
from rooftop.analysis.trace.load import load_trace
from rooftop.analysis.trace.ops import group_ops
from rooftop.analysis.trace.steps import detect_steps
from rooftop.hardware.catalog import get_chip

GPUS = 8
COMPUTE = 40  # compute kernels per device per step
COMM = 8  # collective kernels per device per step
SHAPE = "f32[512,512]{1,0}"


def _write(fh: IO[str], events: list[dict[str, Any]], first: list[bool]) -> None:
    for ev in events:
        fh.write(("" if first[0] else ",\n") + json.dumps(ev, separators=(",", ":")))
        first[0] = False


def jax_hlo() -> str:
    """HLO of ``jit_step``: COMPUTE 512^3 dots and COMM async all-reduces over the 8 devices."""
    lines = [f"  %p{i} = {SHAPE} parameter({i})" for i in range(2)]
    lines += [f"  %dot.{k} = {SHAPE} dot(%p0, %p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"
              for k in range(COMPUTE)]  # fmt: skip
    group = "{{" + ",".join(map(str, range(GPUS))) + "}}"
    for j in range(COMM):
        lines.append(f"  %all-reduce-start.{j} = {SHAPE} all-reduce-start(%dot.{j}), replica_groups={group}, "
                     "to_apply=%sum")  # fmt: skip
        lines.append(f"  %all-reduce-done.{j} = {SHAPE} all-reduce-done(%all-reduce-start.{j})")
    lines.append(f"  ROOT %t = ({SHAPE}, {SHAPE}) tuple(%dot.{COMPUTE - 1}, %all-reduce-done.{COMM - 1})")
    add = "%sum {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  ROOT %r = f32[] add(%a, %b)\n}\n"
    return "HloModule jit_step\n\n" + add + "\nENTRY %main {\n" + "\n".join(lines) + "\n}\n"


def jax_chrome(path: Path, events: int, markers: bool = True) -> int:
    """JAX-layout Chrome trace of about ``events`` events; returns the number written."""
    per_step = GPUS * (COMPUTE + COMM + 1 + markers)
    steps = max(1, events // per_step)
    period_us, written, first = (COMPUTE + 5) * 10.0, 0, [True]
    with gzip.open(path, "wt", compresslevel=1) as fh:
        fh.write('{"displayTimeUnit":"ns","traceEvents":[\n')
        meta = []
        for d in range(GPUS):
            meta.append({"ph": "M", "pid": d, "name": "process_name", "args": {"name": f"/device:GPU:{d}"}})
            for tid, name in ((1, "Steps"), (2, "XLA Modules"), (3, "Stream #1(Kernel)"), (4, "Stream #2(Comm)")):
                meta.append({"ph": "M", "pid": d, "tid": tid, "name": "thread_name", "args": {"name": name}})
        _write(fh, meta, first)
        for s in range(steps):
            batch = []
            for d in range(GPUS):
                t0 = s * period_us + d * 0.37
                if markers:
                    batch.append({"ph": "X", "pid": d, "tid": 1, "ts": t0, "dur": period_us - 2, "name": str(s)})
                batch.append({"ph": "X", "pid": d, "tid": 2, "ts": t0, "dur": period_us - 3, "name": "jit_step(7)",
                              "args": {"program_id": 7}})  # fmt: skip
                for k in range(COMPUTE):
                    args = {"hlo_op": f"dot.{k}", "hlo_module": "jit_step", "program_id": 7}
                    batch.append({"ph": "X", "pid": d, "tid": 3, "ts": t0 + 1 + 10 * k, "dur": 8.5 + (k % 3),
                                  "name": f"gemm_{k}", "args": args})  # fmt: skip
                for j in range(COMM):
                    args = {"hlo_op": f"all-reduce-start.{j}", "hlo_module": "jit_step", "program_id": 7}
                    batch.append({"ph": "X", "pid": d, "tid": 4, "ts": t0 + 35 + 50 * j, "dur": 30.0 + j,
                                  "name": "ncclDevKernel_AllReduce", "args": args})  # fmt: skip
            _write(fh, batch, first)
            written += len(batch)
        fh.write("\n]}\n")
    return written


#: the args a real Kineto trace (PyTorch 2.x, record_shapes=True) puts on its events, so that the synthetic
#: events weigh what real ones do (about 1 KB each as JSON)
KERNEL_ARGS = {"queued": 0, "context": 1, "registers per thread": 168, "shared memory": 232448,
               "blocks per SM": 1.02, "warps per SM": 12.2, "grid": [132, 1, 1], "block": [384, 1, 1],
               "est. achieved occupancy %": 19}  # fmt: skip
CPU_OP_ARGS = {"Record function id": 0, "Ev Idx": 0, "Input Strides": [[512, 1], [512, 1]],
               "Concrete Inputs": ["", ""], "Sequence number": 0, "Fwd thread id": 0}  # fmt: skip
RUNTIME_ARGS = {"cbid": 211}


def kineto_json(path: Path, events: int, tiny: bool = False) -> int:
    """PyTorch (Kineto) trace of about ``events`` events over GPUS ranks; returns the number written.
    ``tiny``: only short kernels of a few names, with no launch events or ops (the case of a trace
    recorded without CPU activities), which must be grouped by kernel name."""
    if tiny:
        return kineto_tiny(path, events)
    per_step = GPUS * (1 + 3 * COMPUTE + 2 * COMM)
    steps = max(1, events // per_step)
    period_us, written, first, corr = (COMPUTE + 5) * 20.0, 0, [True], 0
    dims = {"Input Dims": [[512, 512], [512, 512]], "Input type": ["float", "float"], **CPU_OP_ARGS}
    nccl = {"Collective name": "allreduce", "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20, "dtype": "Float",
            "Group size": GPUS}  # fmt: skip
    with gzip.open(path, "wt", compresslevel=1) as fh:
        props = [{"id": d, "name": "NVIDIA H100"} for d in range(GPUS)]
        fh.write('{"schemaVersion":1,"deviceProperties":' + json.dumps(props) + ',"traceEvents":[\n')
        for s in range(steps):
            batch = []
            for r in range(GPUS):
                t0 = s * period_us + r * 0.41
                batch.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": r,
                              "ts": t0, "dur": period_us - 1})  # fmt: skip
                for k in range(COMPUTE):
                    corr += 1
                    at = t0 + 1 + 15 * k
                    batch.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": r, "ts": at,
                                  "dur": 10, "args": {**dims, "External id": corr}})  # fmt: skip
                    batch.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": r,
                                  "ts": at + 2, "dur": 3,
                                  "args": {"External id": corr, "correlation": corr, **RUNTIME_ARGS}})  # fmt: skip
                    batch.append({"ph": "X", "cat": "kernel", "name": f"sm90_gemm_{k % 4}", "pid": 2 + r, "tid": 7,
                                  "ts": at + 20, "dur": 12.0 + k % 5,
                                  "args": {"External id": corr, "device": r, "stream": 7, "correlation": corr,
                                           **KERNEL_ARGS}})  # fmt: skip
                for j in range(COMM):
                    corr += 1
                    at = t0 + 5 + 70 * j
                    batch.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": r,
                                  "ts": at, "dur": 3, "args": {"correlation": corr}})  # fmt: skip
                    batch.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                                  "pid": 2 + r, "tid": 20, "ts": at + 30, "dur": 40.0 + j,
                                  "args": {"device": r, "stream": 20, "correlation": corr, **nccl}})  # fmt: skip
            _write(fh, batch, first)
            written += len(batch)
        fh.write('\n],"traceName":"synthetic"}\n')
    return written


def kineto_tiny(path: Path, events: int) -> int:
    """``events`` 2 us kernels of 16 names on GPUS devices, no launches, no ops: nothing explains them."""
    written, first = 0, [True]
    with gzip.open(path, "wt", compresslevel=1) as fh:
        fh.write('{"schemaVersion":1,"traceEvents":[\n')
        batch = []
        for i in range(events):
            r = i % GPUS
            batch.append({"ph": "X", "cat": "kernel", "name": f"elementwise_kernel_{i % 16}", "pid": 2 + r, "tid": 7,
                          "ts": (i // GPUS) * 3.0, "dur": 2.0,
                          "args": {"device": r, "stream": 7, "correlation": i + 1, **KERNEL_ARGS}})  # fmt: skip
            if len(batch) >= 4096:
                _write(fh, batch, first)
                written, batch = written + len(batch), []
        _write(fh, batch, first)
        written += len(batch)
        fh.write("\n]}\n")
    return written


GOAL_S, GOAL_MIB = 10.0, 400.0  # issue #15: a 1.2M-event trace in under 400 MiB and 10 s on 2 cores


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def cpu_s() -> float:
    """CPU seconds this process and the processes it waited for (the trace's part readers) have used (user
    and system): on a shared machine, less noisy than wall time."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    parts = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + parts.ru_utime + parts.ru_stime


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def parts_peak_rss_mib() -> float:
    """The largest high-water mark of a process this one waited for (a part reader), 0 if none."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def tree_pss_mib(pid: int) -> float:
    """The proportional set size (shared pages split between the processes sharing them) of process ``pid``
    and its children, summed: the memory they hold together, from /proc (0 where it cannot be read)."""
    total_kib = 0
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    for each in [str(pid), *children]:
        try:
            for line in Path(f"/proc/{each}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total_kib += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return total_kib / 1024


def measure(path: Path, hlo: Path | None, phases: bool, cprofile: bool, stdlib: bool = False) -> dict[str, Any]:
    """One run, in this (fresh) process: the total first (its peak is the process's so far), then the phases.
    ``stdlib``: decode the JSON with the json module only, as where orjson is not installed."""
    if stdlib:
        jsonstream.fast_json = None
    chip = get_chip("h100")
    prof = cProfile.Profile() if cprofile else None
    if prof is not None:
        prof.enable()
    cpu_before = cpu_s()
    total_s, report = timed(lambda: profile_report(path, chip, hlo))
    total_cpu_s = cpu_s() - cpu_before
    if prof is not None:
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(25)
    out = {"total_s": total_s, "cpu_s": total_cpu_s, "peak_mib": peak_rss_mib(), "parts_mib": parts_peak_rss_mib(),
           "rows": len(report.ops), "steps": len(report.steps)}  # fmt: skip
    print("TOTAL-DONE", file=sys.stderr, flush=True)  # (the sampler of the processes' memory stops here)
    report = None
    if phases:
        load_s, trace = timed(lambda: load_trace(path))
        group_s, groups = timed(partial(group_ops, trace))
        steps_s, _ = timed(partial(detect_steps, trace))
        compare_s, _ = timed(partial(profile_report, trace, chip, hlo))
        out.update(load_s=load_s, group_s=group_s, steps_s=steps_s, compare_s=compare_s, ops=len(groups),
                   events=trace.metadata.get("trace_event_count"))  # fmt: skip
    return out


def run_child(path: Path, hlo: Path | None, phases: bool, cprofile: bool, stdlib: bool) -> dict[str, Any]:
    """:func:`measure` in a fresh interpreter (this script with ``--measure``)."""
    argv = [sys.executable, __file__, "--measure", str(path)] + (["--hlo", str(hlo)] if hlo else [])
    argv += (["--phases"] if phases else []) + (["--cprofile"] if cprofile else []) + (["--json", "stdlib"] * stdlib)
    with (
        tempfile.TemporaryFile("w+") as err,
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True) as child,
    ):
        tree = 0.0  # the memory of the process and its part readers together, sampled until the total is done
        while child.poll() is None:
            tree = max(tree, tree_pss_mib(child.pid))
            err.seek(0)
            if "TOTAL-DONE" in err.read():
                break
            time.sleep(0.05)
        stdout, _ = child.communicate()
        err.seek(0)
        sys.stderr.write(err.read().replace("TOTAL-DONE\n", ""))
    if child.returncode:
        raise SystemExit(f"measuring {path} failed (exit {child.returncode})")
    out: dict[str, Any] = json.loads(stdout.splitlines()[-1])
    out["tree_mib"] = tree
    return out


def json_mib(path: Path) -> float:
    """The size of the trace's JSON text, uncompressed."""
    size = 0
    with gzip.open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            size += len(chunk)
    return size / 2**20


def report_trace(label: str, path: Path, hlo: Path | None, runs: int, cprofile: bool, stdlib: bool) -> None:
    results = [run_child(path, hlo, phases=k == 0, cprofile=cprofile and k == 0, stdlib=stdlib) for k in range(runs)]
    first = results[0]
    events = first.get("events") or 0
    head = f"{label:<7} {events:>10,} {json_mib(path):>8.1f}"
    for k, r in enumerate(results):
        times = (f"{r['load_s']:>7.2f} {r['group_s']:>7.2f} {r['steps_s']:>7.2f} {r['compare_s']:>8.2f}" if k == 0
                 else " " * 32)  # fmt: skip
        measured = f"{r['total_s']:>7.2f} {r['cpu_s']:>7.2f} {r['peak_mib']:>9.0f} {r['tree_mib']:>9.0f}"
        print(f"{head if k == 0 else ' ' * len(head)} {times} {measured}"
              + (f"   ({first['ops']} ops, {r['steps']} steps, {r['rows']} rows)" if k == 0 else ""))  # fmt: skip
    if runs > 1:
        total = statistics.median(r["total_s"] for r in results)
        cpu = statistics.median(r["cpu_s"] for r in results)
        peak = statistics.median(r["peak_mib"] for r in results)
        tree = statistics.median(r["tree_mib"] for r in results)
        met = "within the goals" if total < GOAL_S and max(peak, tree) < GOAL_MIB else "NOT within the goals"
        print(f"{'':<{len(head)}} {'median of ' + str(runs):>32} {total:>7.2f} {cpu:>7.2f} {peak:>9.0f} {tree:>9.0f}"
              f"   ({met}: {GOAL_S:g} s, {GOAL_MIB:g} MiB)")  # fmt: skip
    sys.stdout.flush()


def build(kind: str, work: Path, events: int, markers: bool, reuse: bool) -> tuple[Path, Path | None]:
    """The trace file of ``kind`` (and the HLO of the jax one), written unless ``reuse`` finds it."""
    tag = f"{events}" + ("" if markers or kind != "jax" else "-nomarkers")
    path = work / {"jax": f"synthetic-{tag}.trace.json.gz", "kineto": f"synthetic-{tag}.pt.trace.json.gz",
                   "tiny": f"tiny-{tag}.pt.trace.json.gz"}[kind]  # fmt: skip
    hlo = work / "jit_step.hlo.txt" if kind == "jax" else None
    if hlo is not None:
        hlo.write_text(jax_hlo())
    if not (reuse and path.is_file()):
        writers: dict[str, Callable[[Path, int], int]] = {"jax": partial(jax_chrome, markers=markers),
                                                          "kineto": kineto_json, "tiny": kineto_tiny}  # fmt: skip
        writers[kind](path, events)
    return path, hlo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="events per trace (default 200000)")
    parser.add_argument("--trace", choices=("jax", "kineto", "tiny", "both", "all"), default="both",
                        help="both = jax and kineto; all = jax, kineto and tiny; tiny = kernels only, none "
                             "launched by an op")  # fmt: skip
    parser.add_argument("--runs", type=int, default=1, help="fresh processes per trace; medians printed (default 1)")
    parser.add_argument("--no-markers", action="store_true", help="jax: no Steps line (steps from module runs)")
    parser.add_argument("--no-hlo", action="store_true", help="jax: no HLO (ops measured only, as without --hlo)")
    parser.add_argument("--cprofile", action="store_true", help="print (to stderr) a cProfile of the first total run")
    parser.add_argument("--json", choices=("auto", "stdlib"), default="auto",
                        help="auto: orjson decodes where installed; stdlib: the json module only")  # fmt: skip
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    parser.add_argument("--reuse", action="store_true", help="with --keep: read the traces already there")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # one run, in a child process
    parser.add_argument("--hlo", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--phases", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure is not None:
        print(json.dumps(measure(args.measure, args.hlo, args.phases, args.cprofile, args.json == "stdlib")))
        return 0
    kinds = {"both": ("jax", "kineto"), "all": ("jax", "kineto", "tiny")}.get(args.trace, (args.trace,))
    stdlib = args.json == "stdlib" or getattr(jsonstream, "fast_json", None) is None  # None: older rooftop
    print(f"JSON decoded with {'the json module' if stdlib else 'orjson'}")
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(f"{'trace':<7} {'events':>10} {'MiB json':>8} {'load':>7} {'group':>7} {'steps':>7} {'compare':>8} "
              f"{'total':>7} {'cpu':>7} {'peak MiB':>9} {'all MiB':>9}   (seconds; total, cpu, peak, all: rooftop "
              "profile in a fresh process)")  # fmt: skip
        for kind in kinds:
            path, hlo = build(kind, work, args.events, not args.no_markers, args.reuse and args.keep is not None)
            report_trace(kind, path, None if args.no_hlo else hlo, max(1, args.runs), args.cprofile, stdlib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
