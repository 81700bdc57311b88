"""Speed of the HLO text parser on a synthetic module of realistic instruction lines.

Generates a module of about ``--mb`` megabytes (fused computations with tiled layouts and metadata, an
entry computation calling them, collectives with iota replica groups, cuBLAS custom-calls with JSON
backend_config, while loops), then times ``parse_hlo`` (from a string) and ``parse_hlo_file``.

    PYTHONPATH=src python3 benchmarks/bench_hlo_parse.py --mb 50
"""

# ruff: noqa: E501  (HLO fixture lines are kept verbatim, as XLA prints them)

from __future__ import annotations

import argparse
import os
import tempfile
import time

from rooftop.analysis.hlo.parse import parse_hlo, parse_hlo_file

_META = 'metadata={{op_name="jit(train_step)/jvp(transformer)/layer_{i}/{op}" source_file="/src/model/layers.py" source_line={line} stack_frame_id={frame}}}'
_T = "{2,1,0:T(8,128)(2,1)}"

_FUSED = """%fused_computation.{i} (param_0.{i}: bf16[32,32,4096], param_1.{i}: bf16[4096]) -> bf16[32,32,4096] {{
  %param_0.{i} = bf16[32,32,4096]{T} parameter(0)
  %param_1.{i} = bf16[4096]{{0:T(1024)(128)(2,1)}} parameter(1)
  %broadcast.{i} = bf16[32,32,4096]{T} broadcast(bf16[4096]{{0:T(1024)(128)(2,1)}} %param_1.{i}), dimensions={{2}}, {m1}
  %multiply.{i} = bf16[32,32,4096]{T} multiply(bf16[32,32,4096]{T} %param_0.{i}, bf16[32,32,4096]{T} %broadcast.{i}), {m2}
  %constant.{i} = bf16[] constant(0.5)
  %broadcast.c{i} = bf16[32,32,4096]{T} broadcast(bf16[] %constant.{i}), dimensions={{}}
  ROOT %add.{i} = bf16[32,32,4096]{T} add(bf16[32,32,4096]{T} %multiply.{i}, bf16[32,32,4096]{T} %broadcast.c{i}), {m3}
}}

"""

_ENTRY = """  %p.{i} = bf16[4096]{{0:T(1024)(128)(2,1)}} parameter({i})
  %fusion.{i} = bf16[32,32,4096]{T} fusion(bf16[32,32,4096]{T} %x.{j}, bf16[4096]{{0:T(1024)(128)(2,1)}} %p.{i}), kind=kLoop, calls=%fused_computation.{i}, {m1}
  %all-reduce-start.{i} = bf16[32,32,4096]{T} all-reduce-start(bf16[32,32,4096]{T} %fusion.{i}), channel_id={i}, replica_groups=[4,2]<=[2,4]T(1,0), use_global_device_ids=true, to_apply=%sum, {m2}, backend_config={{"collective_backend_config":{{"is_sync":false}}}}
  %all-reduce-done.{i} = bf16[32,32,4096]{T} all-reduce-done(bf16[32,32,4096]{T} %all-reduce-start.{i}), {m2}
  %bitcast.{i} = bf16[1024,4096]{{1,0:T(8,128)(2,1)}} bitcast(bf16[32,32,4096]{T} %all-reduce-done.{i})
  %custom-call.{i} = (bf16[1024,4096]{{1,0}}, s8[33554432]{{0}}) custom-call(bf16[1024,4096]{{1,0:T(8,128)(2,1)}} %bitcast.{i}, bf16[4096,4096]{{1,0}} %w), custom_call_target="__cublas$gemm", {m3}, backend_config={{"operation_queue_id":"0","gemm_backend_config":{{"alpha_real":1,"beta":0,"dot_dimension_numbers":{{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}},"epilogue":"DEFAULT"}}}}
  %get-tuple-element.{i} = bf16[1024,4096]{{1,0}} get-tuple-element((bf16[1024,4096]{{1,0}}, s8[33554432]{{0}}) %custom-call.{i}), index=0
  %x.{i} = bf16[32,32,4096]{T} bitcast(bf16[1024,4096]{{1,0}} %get-tuple-element.{i})
"""


def _meta(i: int, op: str, k: int) -> str:
    return _META.format(i=i, op=op, line=100 + i % 900, frame=1 + (i + k) % 50).replace("{{", "{").replace("}}", "}")


def generate(target_bytes: int) -> tuple[str, int]:
    """A module of about ``target_bytes`` characters and the number of blocks in it."""
    header = (
        "HloModule jit_train_step, is_scheduled=true, entry_computation_layout={(bf16[32,32,4096]{2,1,0})"
        "->bf16[32,32,4096]{2,1,0}}, num_partitions=8\n\n"
        "%sum (a: bf16[], b: bf16[]) -> bf16[] {\n  %a = bf16[] parameter(0)\n  %b = bf16[] parameter(1)\n"
        "  ROOT %s = bf16[] add(bf16[] %a, bf16[] %b)\n}\n\n"
    )
    fused, entry = [], []
    size, i = len(header), 0
    while size < target_bytes:
        i += 1
        m = {f"m{k}": _meta(i, op, k) for k, op in ((1, "mul"), (2, "psum"), (3, "dot_general"))}
        fused.append(_FUSED.format(i=i, T=_T, **m))
        entry.append(_ENTRY.format(i=i, j=i - 1, T=_T, **m))
        size += len(fused[-1]) + len(entry[-1])
    entry_head = (
        "ENTRY %main (x.0: bf16[32,32,4096]) -> bf16[32,32,4096] {\n"
        f"  %x.0 = bf16[32,32,4096]{_T} parameter(0)\n  %w = bf16[4096,4096]{{1,0}} parameter({i + 1})\n"
    )
    tail = f"  ROOT %out = bf16[32,32,4096]{_T} copy(bf16[32,32,4096]{_T} %x.{i})\n}}\n"
    return header + "".join(fused) + entry_head + "".join(entry) + tail, i


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0, help="size of the synthetic module in MB (1e6 bytes)")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs; the best is reported")
    args = parser.parse_args()
    text, _ = generate(int(args.mb * 1e6))
    megabytes = len(text.encode()) / 1e6
    best_s = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        module = parse_hlo(text, source="synthetic")
        best_s = min(best_s, time.perf_counter() - start)
    count = module.num_instructions()
    del module  # time the file on its own heap
    with tempfile.NamedTemporaryFile("w", suffix=".after_optimizations.txt", delete=False) as handle:
        handle.write(text)
    try:
        start = time.perf_counter()
        parse_hlo_file(handle.name)
        file_s = time.perf_counter() - start
    finally:
        os.unlink(handle.name)
    print(f"{'source':<10} {'MB':>8} {'instructions':>13} {'seconds':>8} {'MB/s':>7}")
    print(f"{'string':<10} {megabytes:8.1f} {count:13,d} {best_s:8.2f} {megabytes / best_s:7.1f}")
    print(f"{'file':<10} {megabytes:8.1f} {count:13,d} {file_s:8.2f} {megabytes / file_s:7.1f}")


if __name__ == "__main__":
    main()
