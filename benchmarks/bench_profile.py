"""`rooftop profile` speed on large traces: seconds per phase and peak memory.

Builds (in a temporary directory unless ``--keep DIR``) synthetic traces of about ``--events`` events:

- ``jax``: a Chrome trace-event JSON (gzip) in JAX's layout: 8 ``/device:GPU:N`` processes, each with a
  ``Steps`` line (one marker per step; left out with ``--no-markers``, so steps come from module
  executions), an ``XLA Modules`` line (one ``jit_step`` execution per step), a compute stream of
  ``dot.K`` kernels and a collective stream of ``all-reduce-start.J`` kernels that overlap the compute,
  and the HLO text of ``jit_step`` (given as ``--hlo``, so every op is joined and judged);
- ``kineto``: a PyTorch (Kineto) JSON trace: per rank (host thread) and step a ``ProfilerStep#N``
  annotation, ``aten::mm`` cpu_ops with ``Input Dims`` each launching (``cudaLaunchKernel``, same
  ``correlation``) one GEMM kernel on the rank's GPU, and NCCL all-reduce kernels with their args.

Phases, each timed once on the loaded trace: ``load`` (``load_trace``), ``group`` (``group_ops``),
``steps`` (``detect_steps``), ``compare`` (``profile_report`` on the loaded trace: executions, join,
verdicts, steps, overlap) and ``total`` (``profile_report`` on the path, what ``rooftop profile`` runs).
Peak RSS is the process's high-water mark (``resource.getrusage``) after the phases of one trace.

Usage: ``python benchmarks/bench_profile.py [--events 200000] [--trace jax|kineto|both] [--no-markers]
[--no-hlo] [--cprofile]``. Peak memory is per process: time one trace per run to read it.
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import json
import pstats
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import IO, Any

from rooftop.analysis.profile import profile_report
from rooftop.analysis.trace.load import load_trace
from rooftop.analysis.trace.ops import detect_steps, group_ops
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


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run(label: str, path: Path, hlo: Path | None, written: int, cprofile: bool) -> None:
    chip = get_chip("h100")
    load_s, trace = timed(lambda: load_trace(path))
    group_s, groups = timed(partial(group_ops, trace))
    steps_s, steps = timed(partial(detect_steps, trace))
    compare_s, report = timed(partial(profile_report, trace, chip, hlo))
    trace = report = None  # the total run loads its own
    if cprofile:
        prof = cProfile.Profile()
        prof.enable()
    total_s, report = timed(lambda: profile_report(path, chip, hlo))
    if cprofile:
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    size = path.stat().st_size / 2**20
    print(f"{label:<7} {written:>10,} {size:>7.1f} {load_s:>7.2f} {group_s:>7.2f} {steps_s:>7.2f} {compare_s:>8.2f} "
          f"{total_s:>7.2f} {peak_rss_mib():>9.0f}   ({len(groups)} ops, {len(steps)} steps, "
          f"{len(report.ops)} rows)")  # fmt: skip
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="events per trace (default 200000)")
    parser.add_argument("--trace", choices=("jax", "kineto", "tiny", "both"), default="both",
                        help="both = jax and kineto; tiny = kernels only, none launched by an op")  # fmt: skip
    parser.add_argument("--no-markers", action="store_true", help="jax: no Steps line (steps from module runs)")
    parser.add_argument("--no-hlo", action="store_true", help="jax: no HLO (ops measured only, as without --hlo)")
    parser.add_argument("--cprofile", action="store_true", help="print the top of a cProfile of the total run")
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(f"{'trace':<7} {'events':>10} {'MiB':>7} {'load':>7} {'group':>7} {'steps':>7} {'compare':>8} "
              f"{'total':>7} {'peak MiB':>9}   (seconds)")  # fmt: skip
        if args.trace in ("jax", "both"):
            path, hlo = work / "synthetic.trace.json.gz", work / "jit_step.hlo.txt"
            hlo.write_text(jax_hlo())
            written = jax_chrome(path, args.events, markers=not args.no_markers)
            run("jax", path, None if args.no_hlo else hlo, written, args.cprofile)
        if args.trace in ("kineto", "both"):
            path = work / "synthetic.pt.trace.json.gz"
            written = kineto_json(path, args.events)
            run("kineto", path, None, written, args.cprofile)
        if args.trace == "tiny":
            path = work / "tiny.pt.trace.json.gz"
            written = kineto_json(path, args.events, tiny=True)
            run("tiny", path, None, written, args.cprofile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
