"""How much of real profiles `rooftop profile` explains: per trace, the share of the measured op time that has a
roofline (priced_fraction), the share replayed from CUDA/HIP graphs and the share of the steps' time the devices
sat idle; then the median and the least priced_fraction over the traces.

    python3 benchmarks/profile_coverage.py TRACE [TRACE ...] [--chip NAME] [--json]

Each trace is priced on the chip its profile records (the catalog's match), else on --chip (default h100, said
in the table). A capture trace beside a PyTorch trace (a capture_traces/ folder, or a file naming itself
"capture") is used for its graph replays, as `rooftop profile` does. The list of traces this was run on, with
their sources, is in benchmarks/results/profile-coverage-*/README.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's rooftop

from rooftop.analysis.coverage import coverage
from rooftop.analysis.device import choose_chip
from rooftop.analysis.profile import profile_report
from rooftop.analysis.torch.capture import capture_files, read_capture
from rooftop.analysis.trace.load import load_trace
from rooftop.analysis.trace.ops import column_codes
from rooftop.hardware.catalog import get_chip, load_chips


def engine_of(report: Any, trace: Any) -> str:
    """The engine whose ops, annotations or Python frames the profile names (SGLang first: on ROCm it runs
    some of vLLM's ops), else the framework."""
    names = " ".join([*(o.opcode or o.name for o in report.ops), *column_codes(trace.events, "name")[1]])
    for engine, words in (("SGLang", ("sgl_kernel::", "sglang::", "sglang_profiler::", "sglang/srt/")),
                          ("vLLM", ("vllm::", "_C::", "_C_cache_ops::", "_moe_C::")), ("TensorRT-LLM", ("trtllm::",)),
                          ("TransformerEngine", ("te_fused",)), ("xDiT/diffusers", ("xfuser",))):  # fmt: skip
        if any(w in names for w in words):
            return engine
    return "JAX/XLA" if report.ops and report.ops[0].module else "PyTorch"


def measure(path: str, fallback: str) -> dict[str, Any]:
    started = time.perf_counter()
    trace = load_trace(path)
    choice = choose_chip(trace, load_chips(), None)
    chip = choice.chip or get_chip(fallback)
    files = capture_files(path) if trace.format == "kineto" else []
    capture = read_capture(files[0]) if files else None
    report = profile_report(trace, chip, capture=capture)
    cov = coverage(report)
    return {
        "trace": Path(path).name, "engine": engine_of(report, trace), "chip": chip.name,
        "device": choice.recorded.describe() if choice.recorded else None, "chip_from_profile": choice.chip is not None,
        "capture": Path(files[0]).name if files else None, **cov.payload(),
        "op_time_s": sum(o.total_s for o in report.ops), "seconds": time.perf_counter() - started,
    }  # fmt: skip


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:6.1%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--chip", default="h100", help="chip for traces whose device matches no catalog chip")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = [measure(p, args.chip) for p in args.traces]
    priced = [r["priced_fraction"] for r in rows if r["priced_fraction"] is not None]
    summary = {"traces": len(rows), "median_priced_fraction": statistics.median(priced) if priced else None,
               "min_priced_fraction": min(priced) if priced else None}  # fmt: skip
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary}, indent=1))
        return 0
    print(f"{'trace':58} {'engine':13} {'chip':8} {'priced':>7} {'graph':>7} {'idle':>7}  capture")
    for r in rows:
        chip = r["chip"] + ("" if r["chip_from_profile"] else "*")
        shares = " ".join(f"{_pct(r[k]):>7}" for k in ("priced_fraction", "graph_replayed_fraction", "idle_fraction"))
        print(f"{r['trace'][:58]:58} {r['engine']:13} {chip:8} {shares}  {r['capture'] or '-'}")
    print(
        f"median priced_fraction {_pct(summary['median_priced_fraction'])}, least "
        f"{_pct(summary['min_priced_fraction'])} over {len(rows)} traces (* --chip: the device matched no chip)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
