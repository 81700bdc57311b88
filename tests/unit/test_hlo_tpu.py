"""HLO of real TPU programs (issue 18): async collective chains, zero-work custom-calls, nested slices,
aliased and in-place outputs, partial-tile writes, megacore and Pallas attention kernels. Instruction lines
of the TPU forms are as a v5p MaxText step prints them; each expectation is written as arithmetic."""

# ruff: noqa: E501  (HLO fixture lines are kept verbatim, as XLA prints them)

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.analysis.hlo.access import tiles_bytes
from rooftop.analysis.hlo.analyze import analyze
from rooftop.analysis.hlo.count import HloOp, count_module
from rooftop.analysis.hlo.parse import parse_hlo, parse_instruction
from rooftop.analysis.hlo.shapes import parse_shape
from rooftop.analysis.hlo.targets import rule_of
from rooftop.cost.op import fused_attention_flops
from rooftop.errors import ParseError
from rooftop.hardware.catalog import get_chip
from rooftop.report.reasons import note_texts, why_text
from tests.conftest import run_cli

BF16 = "{2,1,0:T(8,128)(2,1)}"


def ops(text: str) -> dict[str, HloOp]:
    return {op.name: op for op in count_module(parse_hlo(text)).ops}


# --- async collective chains ----------------------------------------------------------------------------


def _gather_matmul(n: int, inner_chain: bool) -> str:
    chain = ', frontend_attributes={chain_id="4"}' if inner_chain else ""
    return f"""%fused_matmul.{n} (param_0.1406: bf16[1,512,7168], param_1.{n}: bf16[7168,1024]) -> bf16[1,2048,1024] {{
  %param_0.1406 = bf16[1,512,7168]{BF16} parameter(0)
  %param_1.{n} = bf16[7168,1024]{{1,0:T(8,128)(2,1)}} parameter(1)
  %all-gather.{158 + n} = bf16[1,2048,7168]{BF16} all-gather(bf16[1,512,7168]{BF16} %param_0.1406), channel_id=95, replica_groups=[1,4]<=[4], dimensions={{1}}, use_global_device_ids=true{chain}
  ROOT %dot.{n} = bf16[1,2048,1024]{BF16} dot(bf16[1,2048,7168]{BF16} %all-gather.{158 + n}, bf16[7168,1024]{{1,0:T(8,128)(2,1)}} %param_1.{n}), lhs_contracting_dims={{2}}, rhs_contracting_dims={{0}}
}}
"""


def chain_module(outer_chain: bool = True, inner_chain: bool = True) -> str:
    """An all-gather chain: start, two matmul fusions that each hold the gather, done."""
    tag = ', frontend_attributes={chain_id="4"}' if outer_chain else ""
    return f"""HloModule chain, num_partitions=4

{_gather_matmul(0, inner_chain)}
{_gather_matmul(1, inner_chain)}
ENTRY %main (x: bf16[1,512,7168], w0: bf16[7168,1024], w1: bf16[7168,1024]) -> (bf16[1,2048,1024], bf16[1,2048,1024]) {{
  %x = bf16[1,512,7168]{BF16} parameter(0)
  %w0 = bf16[7168,1024]{{1,0:T(8,128)(2,1)}} parameter(1)
  %w1 = bf16[7168,1024]{{1,0:T(8,128)(2,1)}} parameter(2)
  %async-collective-start.4 = bf16[1,2048,7168]{BF16} custom-call(bf16[1,512,7168]{BF16} %x), custom_call_target="AsyncCollectiveStart"{tag}
  %fusion.10 = bf16[1,2048,1024]{BF16} fusion(bf16[1,512,7168]{BF16} %x, bf16[7168,1024]{{1,0:T(8,128)(2,1)}} %w0), kind=kOutput, calls=%fused_matmul.0{tag}
  %fusion.11 = bf16[1,2048,1024]{BF16} fusion(bf16[1,512,7168]{BF16} %x, bf16[7168,1024]{{1,0:T(8,128)(2,1)}} %w1), kind=kOutput, calls=%fused_matmul.1{tag}
  %async-collective-done.4 = bf16[1,2048,7168]{BF16} custom-call(bf16[1,2048,7168]{BF16} %async-collective-start.4), custom_call_target="AsyncCollectiveDone"{tag}
  ROOT %tuple = (bf16[1,2048,1024]{BF16}, bf16[1,2048,1024]{BF16}) tuple(%fusion.10, %fusion.11)
}}
"""


GATHERED = 1 * 2048 * 7168 * 2  # the all-gather's output bytes: what cost/cost.py's all-gather Comm is named after
MATMUL = 2 * 2048 * 7168 * 1024


@pytest.mark.parametrize(("outer", "inner"), [(True, True), (True, False), (False, True)])
def test_chain_prices_the_gather_once_and_the_fusions_as_compute(outer: bool, inner: bool) -> None:
    got = ops(chain_module(outer, inner))
    # the start carries the chain's id only when the top-level instructions do: then the gather is priced on
    # it; an untagged start cannot be tied to the chain, and the first fusion that holds the gather takes it
    holder = "async-collective-start.4" if outer else "fusion.10"
    counts = [len(got[n].cost.collectives) for n in ("async-collective-start.4", "fusion.10", "fusion.11")]
    assert counts == ([1, 0, 0] if outer else [0, 1, 0])
    (use,) = got[holder].cost.collectives
    assert (use.kind, use.bytes) == ("all-gather", GATHERED)
    assert got["fusion.10"].cost.flops == got["fusion.11"].cost.flops == MATMUL
    for marker in ("async-collective-start.4", "async-collective-done.4"):
        cost = got[marker].cost
        assert (cost.flops, cost.traffic.logical_bytes, cost.unknown) == (0, 0, "")
    assert got["async-collective-done.4"].cost.collectives == ()


def test_without_a_chain_each_fusion_keeps_its_collective() -> None:
    got = ops(chain_module(outer_chain=False, inner_chain=False))
    assert [len(got[n].cost.collectives) for n in ("fusion.10", "fusion.11")] == [1, 1]


def test_chain_timed_once_on_its_mesh_axis_and_noted() -> None:
    analysis = analyze(parse_hlo(chain_module()), get_chip("tpu-v5p"), "data=4", "4")
    by_axis = analysis.collectives_by_axis()
    assert by_axis == {"data": {"count": 1.0, "bytes": GATHERED, "comm_s": pytest.approx(by_axis["data"]["comm_s"])}}
    timed = {t.op.name: t for t in analysis.ops}
    assert timed["async-collective-start.4"].estimate.network_s > 0
    assert timed["fusion.10"].estimate.network_s == timed["fusion.11"].estimate.network_s == 0
    assert timed["async-collective-done.4"].estimate.lower_bound_s == 0
    assert any(
        "async chain 4: all-gather priced once, on its start async-collective-start.4; 2 instructions of the chain "
        "hold it and are priced for their own work" in n
        for n in note_texts(analysis.notes)
    )
    assert analysis.totals()["flops_unknown_instructions"] == 0


def test_rooftop_hlo_reports_the_chain_gather_once_with_its_axes(tmp_path: Path) -> None:
    path = tmp_path / "chain.hlo"
    path.write_text(chain_module())
    code, out, err = run_cli("hlo", str(path), "--chip", "tpu-v5p", "--mesh", "data=4", "--topology", "4", "--json")
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)["instructions"]}
    gathers = [r for r in rows.values() if r["collective"]]
    assert [(r["name"], r["mesh_axes"], r["comm_bytes"]) for r in gathers] == [
        ("async-collective-start.4", ["data"], GATHERED)
    ]
    assert rows["fusion.11"]["flops"] == MATMUL and rows["fusion.11"]["comm_s"] == 0
    assert rows["async-collective-done.4"]["lower_bound_s"] == 0
    code, out, err = run_cli("hlo", str(path), "--chip", "tpu-v5p", "--mesh", "data=4", "--topology", "4")
    assert code == 0 and "all-gather over data (groups of 4" in out and out.count("all-gather over") == 1, out


def split_chain_module() -> str:
    """A chain split over fusions and NOT in schedule order: the done fusion (its root the done custom-call,
    its output aliased to its operand) and the matmul that uses the gathered array come first, the two
    fusions holding the gather next, and the start last: a fusion whose root is the start custom-call,
    the chain id only on that root."""
    tag = ', frontend_attributes={chain_id="7"}'
    return f"""HloModule split_chain, num_partitions=4

{_gather_matmul(0, True).replace('chain_id="4"', 'chain_id="7"')}
{_gather_matmul(1, True).replace('chain_id="4"', 'chain_id="7"')}
%start_computation (p0: bf16[1,512,7168]) -> bf16[1,2048,7168] {{
  %p0 = bf16[1,512,7168]{BF16} parameter(0)
  ROOT %async-collective-start.7 = bf16[1,2048,7168]{BF16} custom-call(bf16[1,512,7168]{BF16} %p0), custom_call_target="AsyncCollectiveStart"{tag}
}}

%done_computation (d0: bf16[1,2048,7168]) -> bf16[1,2048,7168] {{
  %d0 = bf16[1,2048,7168]{BF16} parameter(0)
  ROOT %async-collective-done.7 = bf16[1,2048,7168]{BF16} custom-call(bf16[1,2048,7168]{BF16} %d0), custom_call_target="AsyncCollectiveDone"{tag}
}}

%use_computation (u0: bf16[1,2048,7168], u1: bf16[7168,1024]) -> bf16[1,2048,1024] {{
  %u0 = bf16[1,2048,7168]{BF16} parameter(0)
  %u1 = bf16[7168,1024]{{1,0:T(8,128)(2,1)}} parameter(1)
  ROOT %dot.9 = bf16[1,2048,1024]{BF16} dot(%u0, %u1), lhs_contracting_dims={{2}}, rhs_contracting_dims={{0}}
}}

ENTRY %main (x: bf16[1,512,7168], w0: bf16[7168,1024], w1: bf16[7168,1024]) -> (bf16[1,2048,1024], bf16[1,2048,1024], bf16[1,2048,1024]) {{
  %x = bf16[1,512,7168]{BF16} parameter(0)
  %w0 = bf16[7168,1024]{{1,0:T(8,128)(2,1)}} parameter(1)
  %w1 = bf16[7168,1024]{{1,0:T(8,128)(2,1)}} parameter(2)
  %fusion.12 = bf16[1,2048,7168]{BF16} fusion(bf16[1,2048,7168]{BF16} %fusion.9), kind=kLoop, calls=%done_computation, output_to_operand_aliasing={{{{}}: (0, {{}})}}
  %fusion.13 = bf16[1,2048,1024]{BF16} fusion(bf16[1,2048,7168]{BF16} %fusion.12, bf16[7168,1024]{{1,0:T(8,128)(2,1)}} %w0), kind=kOutput, calls=%use_computation
  %fusion.10 = bf16[1,2048,1024]{BF16} fusion(bf16[1,512,7168]{BF16} %x, bf16[7168,1024]{{1,0:T(8,128)(2,1)}} %w0), kind=kOutput, calls=%fused_matmul.0
  %fusion.11 = bf16[1,2048,1024]{BF16} fusion(bf16[1,512,7168]{BF16} %x, bf16[7168,1024]{{1,0:T(8,128)(2,1)}} %w1), kind=kOutput, calls=%fused_matmul.1
  %fusion.9 = bf16[1,2048,7168]{BF16} fusion(bf16[1,512,7168]{BF16} %x), kind=kLoop, calls=%start_computation
  ROOT %tuple = (bf16[1,2048,1024]{BF16}, bf16[1,2048,1024]{BF16}, bf16[1,2048,1024]{BF16}) tuple(%fusion.10, %fusion.11, %fusion.13)
}}
"""


def test_chain_out_of_schedule_order_is_priced_on_its_start_through_fusion_roots() -> None:
    got = ops(split_chain_module())
    assert [len(got[n].cost.collectives) for n in ("fusion.9", "fusion.10", "fusion.11", "fusion.12")] == [1, 0, 0, 0]
    (use,) = got["fusion.9"].cost.collectives
    assert (use.kind, use.bytes, use.chain) == ("all-gather", GATHERED, "7")
    assert got["fusion.10"].cost.flops == got["fusion.11"].cost.flops == got["fusion.13"].cost.flops == MATMUL
    done = got["fusion.12"].cost  # root: the done custom-call; it waits, it moves nothing
    assert (done.flops, done.traffic.logical_bytes, done.traffic.padded_bytes, done.collectives) == (0, 0, 0, ())
    analysis = analyze(parse_hlo(split_chain_module()), get_chip("tpu-v5p"), "data=4", "4")
    timed = {t.op.name: t.estimate for t in analysis.ops}
    assert timed["fusion.12"].lower_bound_s == 0 and timed["fusion.10"].network_s == 0
    assert timed["fusion.9"].network_s == pytest.approx(
        analyze(parse_hlo(chain_module()), get_chip("tpu-v5p"), "data=4", "4").collectives_by_axis()["data"]["comm_s"]
    )
    assert any("async chain 7: all-gather priced once, on its start fusion.9" in n for n in note_texts(analysis.notes))


# --- custom-call targets --------------------------------------------------------------------------------

MARKERS = """HloModule markers

ENTRY %main (i: s32[64], lo: u32[64], hi: u32[64]) -> (s32[64], u64[64], bf16[16,1,2048,2048]) {
  %i = s32[64]{0} parameter(0)
  %lo = u32[64]{0} parameter(1)
  %hi = u32[64]{0} parameter(2)
  %assume = s32[64]{0} custom-call(s32[64]{0} %i), custom_call_target="AssumeGatherIndicesInBound"
  %combine = u64[64]{0} custom-call(u32[64]{0} %lo, u32[64]{0} %hi), custom_call_target="X64Combine"
  %buffer = bf16[16,1,2048,2048]{3,2,1,0:T(8,128)(2,1)} custom-call(), custom_call_target="AllocateBuffer"
  ROOT %t = (s32[64]{0}, u64[64]{0}, bf16[16,1,2048,2048]{3,2,1,0:T(8,128)(2,1)}) tuple(%assume, %combine, %buffer)
}
"""


def test_zero_work_targets_cost_nothing_and_are_not_unknown() -> None:
    analysis = analyze(parse_hlo(MARKERS), get_chip("tpu-v5p"))
    for t in analysis.ops:
        assert (t.op.cost.flops, t.op.cost.traffic.padded_bytes, t.op.cost.unknown) == (0, 0, ""), t.op.name
        assert t.estimate.lower_bound_s == 0
    assert analysis.totals()["flops_unknown_instructions"] == 0


@pytest.mark.parametrize(
    ("target", "rule"),
    [("AllocateBuffer", "marker"), ("AsyncCollectiveDone", "marker"), ("__cublas$lt$matmul", "gemm"),
     ("__cudnn$fmhaSoftmaxBackward", "attention"), ("te_fused_attn_forward_ffi", "attention"),
     ("tpu_custom_call", "pallas"), ("Sharding", "data"), ("my_kernel", "unknown")],
)  # fmt: skip
def test_target_table(target: str, rule: str) -> None:
    assert rule_of(target) == rule


# --- bytes: nested slices, aliasing, in-place updates ----------------------------------------------------

CACHE = "bf16[16,1,2048,2048]{3,2,1,0:T(8,128)(2,1)}"
LAYER = "bf16[1,1,2048,2048]{3,2,1,0:T(8,128)(2,1)}"
ONE_LAYER = 1 * 1 * 2048 * 2048 * 2  # 8.4 MB, of a 134 MB cache


def test_operand_read_through_a_dynamic_slice_in_a_nested_fusion_reads_the_slice() -> None:
    text = f"""HloModule nested

%nested_slice (p0: bf16[16,1,2048,2048], p1: s32[]) -> bf16[1,1,2048,2048] {{
  %p0 = {CACHE} parameter(0)
  %p1 = s32[] parameter(1)
  %zero = s32[] constant(0)
  ROOT %dynamic-slice.3 = {LAYER} dynamic-slice({CACHE} %p0, s32[] %p1, s32[] %zero, s32[] %zero, s32[] %zero), dynamic_slice_sizes={{1,1,2048,2048}}
}}

%outer (q0: bf16[16,1,2048,2048], q1: s32[], q2: bf16[1,1,2048,2048]) -> bf16[1,1,2048,2048] {{
  %q0 = {CACHE} parameter(0)
  %q1 = s32[] parameter(1)
  %q2 = {LAYER} parameter(2)
  %fusion.7 = {LAYER} fusion({CACHE} %q0, s32[] %q1), kind=kLoop, calls=%nested_slice
  ROOT %add.2 = {LAYER} add({LAYER} %fusion.7, {LAYER} %q2)
}}

ENTRY %main (cache: bf16[16,1,2048,2048], i: s32[], x: bf16[1,1,2048,2048]) -> bf16[1,1,2048,2048] {{
  %cache = {CACHE} parameter(0)
  %i = s32[] parameter(1)
  %x = {LAYER} parameter(2)
  ROOT %fusion.8 = {LAYER} fusion({CACHE} %cache, s32[] %i, {LAYER} %x), kind=kLoop, calls=%outer
}}
"""
    traffic = ops(text)["fusion.8"].cost.traffic
    assert traffic.logical_bytes == ONE_LAYER + 4 + ONE_LAYER + ONE_LAYER  # slice + index + x + result
    assert traffic.padded_bytes == traffic.logical_bytes  # [2048,2048] fills its (8,128) tiles


UPDATE_FUSION = f"""%fused_update (p0: bf16[16,1,2048,2048], p1: bf16[1,1,2048,2048], p2: s32[], p3: f32[1024], p4: f32[1024]) -> (f32[1024], f32[1024], bf16[16,1,2048,2048]) {{
  %p0 = {CACHE} parameter(0)
  %p1 = {LAYER} parameter(1)
  %p2 = s32[] parameter(2)
  %p3 = f32[1024]{{0}} parameter(3)
  %p4 = f32[1024]{{0}} parameter(4)
  %zero = s32[] constant(0)
  %dynamic-update-slice.5 = {CACHE} dynamic-update-slice({CACHE} %p0, {LAYER} %p1, s32[] %p2, s32[] %zero, s32[] %zero, s32[] %zero)
  %exponential.3 = f32[1024]{{0}} exponential(f32[1024]{{0}} %p3)
  ROOT %tuple.9 = (f32[1024]{{0}}, f32[1024]{{0}}, {CACHE}) tuple(%exponential.3, %p4, %dynamic-update-slice.5)
}}
"""


@pytest.mark.parametrize("aliasing", ["{{2}: (0, {}), {1}: (4, {})}", ""])
def test_multi_output_fusion_writes_its_in_place_and_aliased_outputs_as_updated(aliasing: str) -> None:
    attr = f", output_to_operand_aliasing={aliasing}" if aliasing else ""
    text = f"""HloModule aliased

{UPDATE_FUSION}
ENTRY %main (cache: bf16[16,1,2048,2048], new: bf16[1,1,2048,2048], i: s32[], a: f32[1024], b: f32[1024]) -> (f32[1024], f32[1024], bf16[16,1,2048,2048]) {{
  %cache = {CACHE} parameter(0)
  %new = {LAYER} parameter(1)
  %i = s32[] parameter(2)
  %a = f32[1024]{{0}} parameter(3)
  %b = f32[1024]{{0}} parameter(4)
  ROOT %fusion.21 = (f32[1024]{{0}}, f32[1024]{{0}}, {CACHE}) fusion({CACHE} %cache, {LAYER} %new, s32[] %i, f32[1024]{{0}} %a, f32[1024]{{0}} %b), kind=kLoop, calls=%fused_update{attr}
}}
"""
    traffic = ops(text)["fusion.21"].cost.traffic
    in_place = ONE_LAYER + 4 + ONE_LAYER  # the layer read, the index, the layer written; the cache not read
    exp = 1024 * 4 * 2  # a read, exp(a) written
    passthrough = 0 if aliasing else 1024 * 4 * 2  # b returned in its own buffer, or copied to a fresh one
    assert traffic.logical_bytes == in_place + exp + passthrough


def test_top_level_dynamic_update_slice_moves_the_tiles_it_touches() -> None:
    # a layer written into f32[16,7168,512]{2,0,1:T(8,128)}: dim 2 in runs of 128 (4 runs), dim 0 in runs of 8
    # (the layer touches 1 of 8 rows of each tile), dim 1 untiled: 4 x 1 x 7168 = 28,672 tiles of 8 x 128 x 4 bytes
    text = """HloModule partial

ENTRY %main (buf: f32[16,7168,512], u: f32[1,7168,512], i: s32[]) -> f32[16,7168,512] {
  %buf = f32[16,7168,512]{2,0,1:T(8,128)} parameter(0)
  %u = f32[1,7168,512]{2,1,0:T(8,128)} parameter(1)
  %i = s32[] parameter(2)
  %zero = s32[] constant(0)
  ROOT %dynamic-update-slice.1 = f32[16,7168,512]{2,0,1:T(8,128)} dynamic-update-slice(f32[16,7168,512]{2,0,1:T(8,128)} %buf, f32[1,7168,512]{2,1,0:T(8,128)} %u, s32[] %i, s32[] %zero, s32[] %zero)
}
"""
    traffic = ops(text)["dynamic-update-slice.1"].cost.traffic
    update = 7168 * 512 * 4
    assert traffic.logical_bytes == update + 3 * 4 + update  # XLA: the update read and written, the indices
    assert traffic.padded_bytes == update + 3 * 4 + 28_672 * 8 * 128 * 4  # 8x the update for the write
    assert traffic.hbm_bytes == traffic.padded_bytes


def test_fused_dynamic_update_slice_writes_the_tiles_the_update_touches() -> None:
    text = """HloModule partial_fused

%fused_dus (p0: f32[16,7168,512], p1: f32[1,7168,512], p2: s32[]) -> f32[16,7168,512] {
  %p0 = f32[16,7168,512]{2,0,1:T(8,128)} parameter(0)
  %p1 = f32[1,7168,512]{2,1,0:T(8,128)} parameter(1)
  %p2 = s32[] parameter(2)
  %zero = s32[] constant(0)
  %convert = f32[1,7168,512]{2,1,0:T(8,128)} multiply(%p1, %p1)
  ROOT %dus = f32[16,7168,512]{2,0,1:T(8,128)} dynamic-update-slice(%p0, %convert, %p2, %zero, %zero)
}

ENTRY %main (buf: f32[16,7168,512], u: f32[1,7168,512], i: s32[]) -> f32[16,7168,512] {
  %buf = f32[16,7168,512]{2,0,1:T(8,128)} parameter(0)
  %u = f32[1,7168,512]{2,1,0:T(8,128)} parameter(1)
  %i = s32[] parameter(2)
  ROOT %fusion.4 = f32[16,7168,512]{2,0,1:T(8,128)} fusion(%buf, %u, %i), kind=kLoop, calls=%fused_dus
}
"""
    traffic = ops(text)["fusion.4"].cost.traffic
    update = 7168 * 512 * 4
    assert traffic.logical_bytes == update + 4 + update
    assert traffic.padded_bytes == update + 4 + 28_672 * 4096


def scan_module(big: str, small: str) -> str:
    """A scan writing layer i into a loop-carried f32[16,7168,512]{2,0,1:T(8,128)} buffer (fusion.4) and a row
    into a small carried f32[16,128] (fusion.5); ``big`` / ``small``: each fusion's aliasing attribute."""
    buf, upd, acc = "f32[16,7168,512]{2,0,1:T(8,128)}", "f32[1,7168,512]{2,1,0:T(8,128)}", "f32[16,128]{1,0:T(8,128)}"
    carry = f"(s32[], {buf}, {upd}, {acc})"
    return f"""HloModule scan

%fused_dus (p0: f32[16,7168,512], p1: f32[1,7168,512], p2: s32[]) -> f32[16,7168,512] {{
  %p0 = {buf} parameter(0)
  %p1 = {upd} parameter(1)
  %p2 = s32[] parameter(2)
  %zero = s32[] constant(0)
  ROOT %dus = {buf} dynamic-update-slice(%p0, %p1, %p2, %zero, %zero)
}}

%fused_row (r0: f32[16,128], r1: s32[]) -> f32[16,128] {{
  %r0 = {acc} parameter(0)
  %r1 = s32[] parameter(1)
  %zero.1 = s32[] constant(0)
  %c1 = f32[] constant(1)
  %row = f32[1,128]{{1,0:T(8,128)}} broadcast(%c1), dimensions={{}}
  ROOT %dus.1 = {acc} dynamic-update-slice(%r0, %row, %r1, %zero.1)
}}

%body (carry: (s32[], f32[16,7168,512], f32[1,7168,512], f32[16,128])) -> (s32[], f32[16,7168,512], f32[1,7168,512], f32[16,128]) {{
  %carry = {carry} parameter(0)
  %i = s32[] get-tuple-element(%carry), index=0
  %buf = {buf} get-tuple-element(%carry), index=1
  %u = {upd} get-tuple-element(%carry), index=2
  %acc = {acc} get-tuple-element(%carry), index=3
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %fusion.4 = {buf} fusion(%buf, %u, %i), kind=kLoop, calls=%fused_dus{big}
  %fusion.5 = {acc} fusion(%acc, %i), kind=kLoop, calls=%fused_row{small}
  ROOT %t = {carry} tuple(%next, %fusion.4, %u, %fusion.5)
}}

%cond (c: (s32[], f32[16,7168,512], f32[1,7168,512], f32[16,128])) -> pred[] {{
  %c = {carry} parameter(0)
  %n = s32[] get-tuple-element(%c), index=0
  %limit = s32[] constant(16)
  ROOT %lt = pred[] compare(%n, %limit), direction=LT
}}

ENTRY %main (b: f32[16,7168,512], x: f32[1,7168,512], a: f32[16,128]) -> f32[16,7168,512] {{
  %b = {buf} parameter(0)
  %x = {upd} parameter(1)
  %a = {acc} parameter(2)
  %start = s32[] constant(0)
  %init = {carry} tuple(%start, %b, %x, %a)
  %while = {carry} while(%init), condition=%cond, body=%body, backend_config={{"known_trip_count":{{"n":"16"}}}}
  ROOT %out = {buf} get-tuple-element(%while), index=1
}}
"""


ALIASED = ", output_to_operand_aliasing={{}: (0, {})}"


@pytest.mark.parametrize(
    ("big", "small", "in_place"),
    [(ALIASED, ALIASED, True), ("", ALIASED, False), ("", "", True)],
    ids=["aliased", "not-aliased", "module-marks-nothing"],
)
def test_dynamic_update_slice_into_a_loop_carried_buffer_in_place_or_copied(
    big: str, small: str, in_place: bool
) -> None:
    """Aliased: the update's tiles (28,672 tiles of 4 KiB, as above). Not aliased, in a module that marks its
    in-place outputs (fusion.5 is): the whole buffer read and written. A module that marks none keeps XLA's
    assumption. The logical bytes are XLA's count in every case."""
    op = ops(scan_module(big, small))["fusion.4"]
    update, buffer = 7168 * 512 * 4, 16 * 7168 * 512 * 4  # the buffer fills its tiles: padded = logical
    assert op.executions == 16
    assert op.cost.traffic.logical_bytes == update + 4 + update
    if in_place:
        assert op.cost.traffic.padded_bytes == update + 4 + 28_672 * 8 * 128 * 4
    else:
        assert op.cost.traffic.padded_bytes == buffer + update + 4 + buffer
    said = (
        "in place: the output is aliased to operand 0"
        if big
        else "not in place: the loop-carried buffer (while tuple element 1)"
    )
    assert (said in why_text(op.cost.note)) == bool(big or not in_place), why_text(op.cost.note)


def test_a_custom_calls_aliasing_does_not_mark_a_module_as_one_that_marks_its_in_place_fusions() -> None:
    """CPU and GPU modules print aliasing on custom-calls but never on their in-place fusions: unchanged."""
    text = scan_module("", "").replace(
        "  %start = s32[] constant(0)\n",
        '  %start = s32[] constant(0)\n  %cc = f32[16,128]{1,0:T(8,128)} custom-call(%a), custom_call_target="Sharding", output_to_operand_aliasing={{}: (0, {})}\n',
    )
    assert "custom_call_target" in text
    op = ops(text)["fusion.4"]
    assert op.cost.traffic.padded_bytes == 7168 * 512 * 4 + 4 + 28_672 * 8 * 128 * 4 and op.cost.note == ()


def test_dynamic_update_slice_on_a_copy_xla_inserted_is_in_place() -> None:
    text = scan_module("", ALIASED).replace(
        "  %fusion.4 = f32[16,7168,512]{2,0,1:T(8,128)} fusion(%buf,",
        "  %copy.3 = f32[16,7168,512]{2,0,1:T(8,128)} copy(%buf)\n  %fusion.4 = f32[16,7168,512]{2,0,1:T(8,128)} fusion(%copy.3,",
    )
    got = ops(text)
    assert got["fusion.4"].cost.traffic.padded_bytes == 7168 * 512 * 4 + 4 + 28_672 * 8 * 128 * 4
    assert "in place on copy.3, the copy XLA inserted" in why_text(got["fusion.4"].cost.note)
    assert got["copy.3"].cost.traffic.padded_bytes == 2 * 16 * 7168 * 512 * 4


@pytest.mark.parametrize("aliased", [True, False])
def test_scatter_into_a_loop_carried_buffer_in_place_or_copied(aliased: bool) -> None:
    """32 rows of 64 f32 scattered into a carried f32[1024,64]{1,0:T(8,128)} (each row one 4 KiB tile; the
    whole buffer 1024 x 128 lanes x 4 B); the module marks in-place outputs (the counter's fusion)."""
    mark = ", output_to_operand_aliasing={{}: (0, {})}"
    text = f"""HloModule scan_scatter

%set (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  ROOT %b = f32[] parameter(1)
}}

%fused_scatter (p0: f32[1024,64], p1: s32[32,1], p2: f32[32,1,64]) -> f32[1024,64] {{
  %p0 = f32[1024,64]{{1,0:T(8,128)}} parameter(0)
  %p1 = s32[32,1]{{1,0}} parameter(1)
  %p2 = f32[32,1,64]{{2,1,0}} parameter(2)
  ROOT %scatter.2 = f32[1024,64]{{1,0:T(8,128)}} scatter(%p0, %p1, %p2), update_window_dims={{1,2}}, inserted_window_dims={{}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=%set
}}

%fused_inc (q0: s32[]) -> s32[] {{
  %q0 = s32[] parameter(0)
  %one = s32[] constant(1)
  ROOT %inc = s32[] add(%q0, %one)
}}

%body (c: (s32[], f32[1024,64], s32[32,1], f32[32,1,64])) -> (s32[], f32[1024,64], s32[32,1], f32[32,1,64]) {{
  %c = (s32[], f32[1024,64]{{1,0:T(8,128)}}, s32[32,1]{{1,0}}, f32[32,1,64]{{2,1,0}}) parameter(0)
  %i = s32[] get-tuple-element(%c), index=0
  %x = f32[1024,64]{{1,0:T(8,128)}} get-tuple-element(%c), index=1
  %idx = s32[32,1]{{1,0}} get-tuple-element(%c), index=2
  %u = f32[32,1,64]{{2,1,0}} get-tuple-element(%c), index=3
  %fusion.6 = s32[] fusion(%i), kind=kLoop, calls=%fused_inc{mark}
  %fusion.7 = f32[1024,64]{{1,0:T(8,128)}} fusion(%x, %idx, %u), kind=kLoop, calls=%fused_scatter{mark if aliased else ""}
  ROOT %t = (s32[], f32[1024,64]{{1,0:T(8,128)}}, s32[32,1]{{1,0}}, f32[32,1,64]{{2,1,0}}) tuple(%fusion.6, %fusion.7, %idx, %u)
}}

%cond (d: (s32[], f32[1024,64], s32[32,1], f32[32,1,64])) -> pred[] {{
  %d = (s32[], f32[1024,64]{{1,0:T(8,128)}}, s32[32,1]{{1,0}}, f32[32,1,64]{{2,1,0}}) parameter(0)
  %n = s32[] get-tuple-element(%d), index=0
  %k = s32[] constant(8)
  ROOT %lt = pred[] compare(%n, %k), direction=LT
}}

ENTRY %main (x0: f32[1024,64], i0: s32[32,1], u0: f32[32,1,64]) -> f32[1024,64] {{
  %x0 = f32[1024,64]{{1,0:T(8,128)}} parameter(0)
  %i0 = s32[32,1]{{1,0}} parameter(1)
  %u0 = f32[32,1,64]{{2,1,0}} parameter(2)
  %z = s32[] constant(0)
  %init = (s32[], f32[1024,64]{{1,0:T(8,128)}}, s32[32,1]{{1,0}}, f32[32,1,64]{{2,1,0}}) tuple(%z, %x0, %i0, %u0)
  %w = (s32[], f32[1024,64]{{1,0:T(8,128)}}, s32[32,1]{{1,0}}, f32[32,1,64]{{2,1,0}}) while(%init), condition=%cond, body=%body
  ROOT %r = f32[1024,64]{{1,0:T(8,128)}} get-tuple-element(%w), index=1
}}
"""
    traffic = ops(text)["fusion.7"].cost.traffic
    updates, indices, buffer = 32 * 64 * 4, 32 * 4, 1024 * 128 * 4
    assert traffic.logical_bytes == 3 * updates + indices  # XLA's HandleScatter either way
    expected = 2 * 32 * 8 * 128 * 4 if aliased else 2 * buffer  # the rows' tiles, or the buffer read and written
    assert traffic.padded_bytes == updates + indices + expected


def test_scatter_reads_and_writes_the_rows_it_updates_in_whole_tiles() -> None:
    # 32 rows of 64 f32 into f32[1024,64]{1,0:T(8,128)}: each row touches one (8,128) tile of 4 KiB
    text = """HloModule scatter

%set (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  ROOT %b = f32[] parameter(1)
}

ENTRY %main (x: f32[1024,64], idx: s32[32,1], u: f32[32,1,64]) -> f32[1024,64] {
  %x = f32[1024,64]{1,0:T(8,128)} parameter(0)
  %idx = s32[32,1]{1,0} parameter(1)
  %u = f32[32,1,64]{2,1,0} parameter(2)
  ROOT %scatter.1 = f32[1024,64]{1,0:T(8,128)} scatter(%x, %idx, %u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%set
}
"""
    traffic = ops(text)["scatter.1"].cost.traffic
    updates = 32 * 64 * 4
    assert traffic.logical_bytes == 3 * updates + 32 * 4  # XLA's HandleScatter
    assert traffic.padded_bytes == updates + 32 * 4 + 2 * 32 * 8 * 128 * 4  # the rows' tiles read and written


def test_copy_between_layouts_moves_both_layouts_tiles() -> None:
    # f32[3,200]: {1,0:T(8,128)} pads to [8,256]; {0,1:T(8,128)} puts dim 0 minor: [3 -> 128] x [200 -> 200]
    text = "HloModule c\n\nENTRY %e (x: f32[3,200]) -> f32[3,200] {\n  %x = f32[3,200]{1,0:T(8,128)} parameter(0)\n  ROOT %copy.1 = f32[3,200]{0,1:T(8,128)} copy(%x)\n}\n"
    traffic = ops(text)["copy.1"].cost.traffic
    assert traffic.logical_bytes == 2 * 3 * 200 * 4
    assert traffic.padded_bytes == (8 * 256 + 128 * 200) * 4


@pytest.mark.parametrize(
    ("shape", "sizes", "starts", "tiles"),
    [
        ("f32[16,256]{1,0:T(8,128)}", (8, 16), (0, 120), 2),  # columns 120..135 straddle two runs of 128
        ("f32[16,256]{1,0:T(8,128)}", (8, 16), (0, 0), 1),
        ("f32[16,256]{1,0:T(8,128)}", (8, 16), None, 1),  # unknown start: taken aligned
        ("f32[16,256]{1,0:T(8,128)}", (16, 256), None, 4),  # the whole array
        ("f32[16,7168,512]{2,0,1:T(8,128)}", (1, 7168, 512), None, 28_672),
        ("f32[]{:T(128)}", (), None, 1),  # a scalar fills one tile of 128
    ],
)
def test_tiles_touched(shape: str, sizes: tuple[int, ...], starts: tuple[int, ...] | None, tiles: int) -> None:
    parsed = parse_shape(shape)
    tile = 128 if not parsed.rank else 8 * 128
    assert tiles_bytes(parsed, sizes, starts) == tiles * tile * 4
    if starts is None and sizes == tuple(parsed.dims):
        assert tiles_bytes(parsed, sizes) == parsed.padded_bytes


def test_top_level_slice_reads_the_tiles_of_its_window() -> None:
    text = "HloModule s\n\nENTRY %e (x: f32[16,256]) -> f32[8,16] {\n  %x = f32[16,256]{1,0:T(8,128)} parameter(0)\n  ROOT %slice.1 = f32[8,16]{1,0:T(8,128)} slice(%x), slice={[0:8], [120:136]}\n}\n"
    traffic = ops(text)["slice.1"].cost.traffic
    assert traffic.logical_bytes == 2 * 8 * 16 * 4
    assert traffic.padded_bytes == 2 * 8 * 128 * 4 + 8 * 128 * 4  # two tiles read, one written


# --- megacore --------------------------------------------------------------------------------------------


def _megacore_module(name: str) -> str:
    return f"""HloModule mc

%fused_computation.3 (p: bf16[4096,4096]) -> bf16[4096,4096] {{
  %p = bf16[4096,4096]{{1,0:T(8,128)(2,1)}} parameter(0)
  ROOT %m = bf16[4096,4096]{{1,0:T(8,128)(2,1)}} multiply(%p, %p)
}}

ENTRY %main (x: bf16[4096,4096]) -> bf16[4096,4096] {{
  %x = bf16[4096,4096]{{1,0:T(8,128)(2,1)}} parameter(0)
  ROOT %{name} = bf16[4096,4096]{{1,0:T(8,128)(2,1)}} fusion(%x), kind=kLoop, calls=%fused_computation.3
}}
"""


@pytest.mark.parametrize(("chip", "ratio"), [("tpu-v5p", 2.0), ("tpu-v4", 2.0), ("tpu-v5e", 1.0), ("tpu-v6e", 1.0)])
def test_an_op_in_megacore_fusion_runs_on_one_core(chip: str, ratio: float) -> None:
    both = analyze(parse_hlo(_megacore_module("fusion.3")), get_chip(chip))
    one = analyze(parse_hlo(_megacore_module("fusion.3.in_megacore_fusion.1")), get_chip(chip))
    assert one.ops[0].op.cost.one_core and not both.ops[0].op.cost.one_core
    assert one.ops[0].estimate.lower_bound_s == pytest.approx(ratio * both.ops[0].estimate.lower_bound_s)
    assert both.ops[0].estimate.memory_s == pytest.approx(2 * 4096 * 4096 * 2 / get_chip(chip).hbm_bytes_per_s)
    assert any("named *in_megacore* run on one of the" in n for n in note_texts(one.notes)) == (ratio == 2.0)


@pytest.mark.parametrize("name", ["fusion.10.in_megacore_fusion.2", "all-gather-matmul.in_megacore.1"])
def test_a_megacore_op_is_timed_on_its_core_for_compute_memory_and_network(name: str) -> None:
    """A matmul fusion holding an all-gather (no chain): on one core of a v5p its compute, memory and network
    terms are each twice the whole chip's: the core has half the peaks, HBM and link bandwidth."""
    base = chain_module(outer_chain=False, inner_chain=False)
    both = analyze(parse_hlo(base), get_chip("tpu-v5p"), "data=4", "4")
    renamed = base.replace("%fusion.10 ", f"%{name} ").replace("tuple(%fusion.10,", f"tuple(%{name},")
    one = analyze(parse_hlo(renamed), get_chip("tpu-v5p"), "data=4", "4")
    whole, core = ({t.op.name: t.estimate for t in a.ops} for a in (both, one))
    for term in ("compute_s", "memory_s", "network_s"):
        assert getattr(whole["fusion.10"], term) > 0
        assert getattr(core[name], term) == pytest.approx(2 * getattr(whole["fusion.10"], term)), term
    assert core["fusion.11"].lower_bound_s == whole["fusion.11"].lower_bound_s
    assert whole["fusion.10"].compute_s == pytest.approx(MATMUL / get_chip("tpu-v5p").flops_per_s("bf16"))


@pytest.mark.parametrize(
    ("chip", "cores", "per_device"),
    [("tpu-v4", 2, 2), ("tpu-v5p", 2, 2), ("tpu-v5e", 1, 1), ("tpu-v6e", 1, 1), ("tpu-7x", 2, 1), ("h100", 1, 1)],
)
def test_catalog_says_which_chips_are_megacore(chip: str, cores: int, per_device: int) -> None:
    got = get_chip(chip)
    assert (got.tensor_cores, got.cores_per_device, got.megacore) == (cores, per_device, per_device > 1)
    if got.kind == "tpu":
        assert "Google Cloud TPU" in got.sources["cores.tensor_cores"].source
    core = got.one_core()
    assert core.flops_per_s("bf16") == got.flops_per_s("bf16") / per_device
    assert core.hbm_bytes_per_s == got.hbm_bytes_per_s / per_device
    assert core.link_bytes_per_s == got.link_bytes_per_s / per_device


# --- MXU utilisation --------------------------------------------------------------------------------------

MXU_MODULE = """HloModule mxu

ENTRY %main (a: bf16[4096,4096], b: bf16[4096,4096]) -> bf16[4096,4096] {
  %a = bf16[4096,4096]{1,0:T(8,128)(2,1)} parameter(0)
  %b = bf16[4096,4096]{1,0:T(8,128)(2,1)} parameter(1)
  %dot.1 = bf16[4096,4096]{1,0:T(8,128)(2,1)} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %add.1 = bf16[4096,4096]{1,0:T(8,128)(2,1)} add(%dot.1, %a)
}
"""


def test_mxu_utilization_per_instruction_and_module(tmp_path: Path) -> None:
    """The dot is compute-bound: its matrix FLOPs fill its predicted time (100%); the add has no matrix FLOPs;
    the module's utilisation is the dot's matrix time over the sum of both predicted times."""
    chip = get_chip("tpu-v5p")
    dot_s = 2 * 4096**3 / chip.flops_per_s("bf16")
    add_s = 3 * 4096 * 4096 * 2 / chip.hbm_bytes_per_s  # two operands read, one result written
    analysis = analyze(parse_hlo(MXU_MODULE), chip)
    timed = {t.op.name: t for t in analysis.ops}
    assert timed["dot.1"].mxu_utilization == pytest.approx(1.0) and timed["add.1"].mxu_utilization is None
    assert analysis.totals()["mxu_utilization"] == pytest.approx(dot_s / (dot_s + add_s))
    path = tmp_path / "mxu.hlo"
    path.write_text(MXU_MODULE)
    code, out, err = run_cli("hlo", str(path), "--chip", "tpu-v5p", "--json")
    assert code == 0, err
    data = json.loads(out)
    rows = {r["name"]: r for r in data["instructions"]}
    assert rows["dot.1"]["mxu_utilization"] == pytest.approx(1.0) and rows["add.1"]["mxu_utilization"] is None
    assert data["totals"]["mxu_utilization"] == pytest.approx(dot_s / (dot_s + add_s))
    code, out, err = run_cli("hlo", str(path), "--chip", "tpu-v5p")
    assert code == 0 and "MXU" in out and f"{dot_s / (dot_s + add_s):.1%}" in out, out


def tpu_trace(path: Path, module: str, ops_us: list[tuple[str, float]], runs: int = 3) -> Path:
    """A JAX Chrome trace of one TPU: each op of ``ops_us`` (name, microseconds) run ``runs`` times in order."""
    meta = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:TPU:0"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "XLA Ops"}},
    ]
    events, ts = [], 0.0
    for _ in range(runs):
        for name, dur in ops_us:
            args = {"hlo_module": module, "hlo_op": name}
            events.append({"ph": "X", "name": name, "pid": 1, "tid": 2, "ts": ts, "dur": dur, "args": args})
            ts += dur + 1
    path.write_text(json.dumps({"traceEvents": meta + events}))
    return path


def test_profile_prints_the_mxu_utilization_of_each_op_and_of_the_ops(tmp_path: Path) -> None:
    chip = get_chip("tpu-v5p")
    dot_s = 2 * 4096**3 / chip.flops_per_s("bf16")
    hlo = tmp_path / "mxu.hlo"
    hlo.write_text(MXU_MODULE)
    trace = tpu_trace(tmp_path / "t.trace.json", "mxu", [("dot.1", 2 * dot_s * 1e6), ("add.1", 50.0)])
    code, out, err = run_cli("profile", str(trace), "--chip", "tpu-v5p", "--hlo", str(hlo), "--json")
    assert code == 0, err
    data = json.loads(out)
    ops_by = {o["name"]: o for o in data["ops"]}
    assert ops_by["dot.1"]["mxu_utilization"] == pytest.approx(0.5, rel=1e-3)  # measured in twice its MXU time
    assert ops_by["add.1"]["mxu_utilization"] is None
    assert data["mxu_utilization"]["op_time"] == pytest.approx(dot_s / (2 * dot_s + 50e-6), rel=1e-3)
    code, out, err = run_cli("profile", str(trace), "--chip", "tpu-v5p", "--hlo", str(hlo))
    assert code == 0 and "MXU utilisation" in out and "50%" in out, out


def test_profile_keeps_a_chain_collective_on_its_start_when_both_halves_are_timed(tmp_path: Path) -> None:
    """The v5p step measures the transfer on the start and a short wait on the done: the start is priced,
    the done is not (an async copy, whose start only queues the DMA, is priced on its done)."""
    hlo = tmp_path / "chain.hlo"
    hlo.write_text(chain_module())
    names = ["async-collective-start.4", "fusion.10", "fusion.11", "async-collective-done.4"]
    trace = tpu_trace(tmp_path / "t.trace.json", "chain", [(n, 100.0) for n in names])
    args = ("--chip", "tpu-v5p", "--hlo", str(hlo), "--mesh", "data=4", "--topology", "4", "--json")
    code, out, err = run_cli("profile", str(trace), *args)
    assert code == 0, err
    ops_by = {o["name"]: o for o in json.loads(out)["ops"]}
    start, done = ops_by["async-collective-start.4"], ops_by["async-collective-done.4"]
    assert start["lower_bound_s"] > 0 and start["mesh_axes"] == ["data"]
    assert (done["lower_bound_s"], done["verdict"]) == (0, "no modelled cost")


# --- Pallas kernels ---------------------------------------------------------------------------------------

#: the custom-call of a splash attention kernel as jax lowers make_splash_mha(CausalMask) for TPU, its
#: Mosaic body elided and the scope JAX names after the kernel in its metadata
SPLASH = """HloModule splash

ENTRY %main (m0: s8[1,4,4], m1: s8[1,4,4], q: bf16[4,512,128], k: bf16[4,512,128], v: bf16[4,512,128], r: s32[512,128]) -> bf16[4,512,128] {
  %m0 = s8[1,4,4]{2,1,0} parameter(0)
  %m1 = s8[1,4,4]{2,1,0} parameter(1)
  %q = bf16[4,512,128]{2,1,0} parameter(2)
  %k = bf16[4,512,128]{2,1,0} parameter(3)
  %v = bf16[4,512,128]{2,1,0} parameter(4)
  %r = s32[512,128]{1,0} parameter(5)
  %pallas_call.5 = (f32[128,128]{1,0}, f32[128,128]{1,0}, f32[128,128]{1,0}, bf16[4,512,128]{2,1,0}) custom-call(%m0, %m1, %q, %k, %v, %r), custom_call_target="tpu_custom_call", operand_layout_constraints={s8[1,4,4]{2,1,0}, s8[1,4,4]{2,1,0}, bf16[4,512,128]{2,1,0}, bf16[4,512,128]{2,1,0}, bf16[4,512,128]{2,1,0}, s32[512,128]{1,0}}, frontend_attributes={kernel_metadata={
"xprof_metadata":"{\\"block_q\\": 128, \\"block_kv\\": 128, \\"block_kv_compute\\": 128, \\"use_fused_bwd_kernel\\": false, \\"q_layout\\": 1, \\"k_layout\\": 1, \\"v_layout\\": 1}"
}}, backend_config={"custom_call_config": {"body": "TUxJUgA=", "serialization_format": 1, "needs_layout_passes": true}}, metadata={op_name="jit(step)/KERNEL/KERNEL/pallas_call"}
  ROOT %out = bf16[4,512,128]{2,1,0} get-tuple-element(%pallas_call.5), index=3
}
"""
FWD = fused_attention_flops(1, 4, 512, 512, 128, 128, False, False)  # = 4 x B H Sq Sk D


def splash(kernel: str, outputs: int = 0, mask: str = "parameter(0)") -> str:
    """SPLASH with ``outputs`` gradients shaped like q (0: the forward; a backward also takes dO and the
    log-sum-exp) and ``mask`` defining the block mask m0."""
    text = SPLASH.replace("KERNEL", kernel).replace(
        "%m0 = s8[1,4,4]{2,1,0} parameter(0)", f"%m0 = s8[1,4,4]{{2,1,0}} {mask}"
    )
    if not outputs:
        return text
    grads = ", ".join(["bf16[4,512,128]{2,1,0}"] * outputs)
    text = text.replace("r: s32[512,128])", "r: s32[512,128], do: bf16[4,512,128], lse: f32[4,512])")
    text = text.replace(
        "  %r = s32[512,128]{1,0} parameter(5)\n",
        "  %r = s32[512,128]{1,0} parameter(5)\n  %do = bf16[4,512,128]{2,1,0} parameter(6)\n  %lse = f32[4,512]{1,0} parameter(7)\n",
    )
    text = text.replace("custom-call(%m0, %m1, %q, %k, %v, %r)", "custom-call(%m0, %m1, %q, %k, %v, %r, %lse, %do)")
    return text.replace(
        "%pallas_call.5 = (f32[128,128]{1,0}, f32[128,128]{1,0}, f32[128,128]{1,0}, bf16[4,512,128]{2,1,0})",
        f"%pallas_call.5 = (f32[128,128]{{1,0}}, f32[128,128]{{1,0}}, f32[128,128]{{1,0}}, {grads})",
    )


@pytest.mark.parametrize(
    ("kernel", "outputs", "flops"),
    [("splash_mha_fwd_no_residuals", 0, FWD), ("splash_mha_dq_no_residuals", 1, 1.5 * FWD),
     ("splash_mha_dkv_no_residuals", 2, 2 * FWD), ("flash_attention_bwd", 3, 2.5 * FWD),
     # the phase comes from the operands and results, never from the words of the name
     ("splash_mha_dkv_no_residuals", 0, FWD), ("splash_mha_fwd", 2, 2 * FWD), ("flash_attention_dq", 3, 2.5 * FWD),
     ("causal_flash_attention", 0, fused_attention_flops(1, 4, 512, 512, 128, 128, True, False))],
)  # fmt: skip
def test_pallas_attention_priced_from_q_k_v(kernel: str, outputs: int, flops: float) -> None:
    got = ops(splash(kernel, outputs))["pallas_call.5"]
    assert got.cost.flops == flops and not got.cost.unknown
    assert dict(got.cost.cost.flops_by) == {("matrix", "bf16"): flops}
    assert f"Pallas kernel jit(step)/{kernel}" in why_text(got.cost.note)


#: the causal block mask of 4 x 4 blocks as XLA prints an s8 constant (2: full block, 1: partial, 0: masked)
CAUSAL_BLOCKS = "constant({ { {1, 0, 0, 0}, {2, 1, 0, 0}, {2, 2, 1, 0}, {2, 2, 2, 1} } })"


def test_splash_forward_with_dkv_block_sizes_in_its_name_is_a_forward_over_the_live_blocks() -> None:
    """The forward kernel's name carries the backward's block sizes; its block mask has 10 of 16 blocks live."""
    kernel = "splash_mha_fwd_no_residuals_block_q_128_block_kv_128_block_q_dkv_512_block_kv_dkv_512"
    got = ops(splash(kernel, 0, CAUSAL_BLOCKS))["pallas_call.5"]
    assert got.cost.flops == FWD * 10 / 16
    note = why_text(got.cost.note)
    assert "2 attention matmuls (forward" in note and "10 of 16 blocks live" in note
    dkv = ops(splash(kernel, 2, CAUSAL_BLOCKS))["pallas_call.5"]  # the same mask read by a dK/dV kernel
    assert dkv.cost.flops == 2 * FWD * 10 / 16


def test_pallas_attention_causal_from_its_config_and_mqa_keys() -> None:
    text = SPLASH.replace('\\"block_q\\": 128', '\\"causal\\": true, \\"block_q\\": 128').replace(
        "KERNEL", "splash_mqa_fwd"
    )
    text = text.replace("k: bf16[4,512,128]", "k: bf16[512,128]").replace(
        "%k = bf16[4,512,128]{2,1,0}", "%k = bf16[512,128]{1,0}"
    )
    got = ops(text)["pallas_call.5"]
    assert got.cost.flops == 2 * 4 * (512 * 513 // 2) * (128 + 128)  # 2 B H pairs (Dqk + Dv), causal pairs
    # 512 x 513 / 2 of 512 x 512 pairs
    assert f"causal pairs ({513 / 2 / 512:.1%} of Sq x Sk)" in why_text(got.cost.note)


def test_other_pallas_kernels_use_their_cost_estimate_or_are_unknown_by_name() -> None:
    estimate = '"cost_estimate": {\n"bytes_accessed":4194304,\n"flops":1080033280,\n"remote_bytes_transferred":0,\n"transcendentals":2097152\n}, '
    text = SPLASH.replace('"custom_call_config": {', '"custom_call_config": {' + estimate).replace(
        "KERNEL", "my_matmul"
    )
    text = text.replace(
        '"xprof_metadata":"{\\"block_q\\": 128, \\"block_kv\\": 128, \\"block_kv_compute\\": 128, \\"use_fused_bwd_kernel\\": false, \\"q_layout\\": 1, \\"k_layout\\": 1, \\"v_layout\\": 1}"',
        "",
    )
    got = ops(text)["pallas_call.5"]
    assert (got.cost.flops, got.cost.transcendentals) == (1080033280, 2097152)
    opaque = ops(SPLASH.replace("KERNEL", "my_matmul"))["pallas_call.5"]
    assert opaque.cost.unknown == "custom-call tpu_custom_call (pallas_call.5)"


# --- bad input and third-party TPU text -------------------------------------------------------------------


def test_bad_aliasing_is_one_line_naming_the_line() -> None:
    text = f"HloModule bad\n\n{UPDATE_FUSION}\nENTRY %main (c: bf16[16,1,2048,2048], n: bf16[1,1,2048,2048], i: s32[], a: f32[1024], b: f32[1024]) -> (f32[1024], f32[1024], bf16[16,1,2048,2048]) {{\n  %c = {CACHE} parameter(0)\n  %n = {LAYER} parameter(1)\n  %i = s32[] parameter(2)\n  %a = f32[1024]{{0}} parameter(3)\n  %b = f32[1024]{{0}} parameter(4)\n  ROOT %f = (f32[1024]{{0}}, f32[1024]{{0}}, {CACHE}) fusion(%c, %n, %i, %a, %b), kind=kLoop, calls=%fused_update, output_to_operand_aliasing={{{{2}}: (0 {{}})}}\n}}\n"
    with pytest.raises(
        ParseError, match=r"^bad\.hlo:21: 'f': bad output_to_operand_aliasing=.*expected an entry like"
    ) as info:
        count_module(parse_hlo(text, "bad.hlo"))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "scatter_dims",
    [
        "update_window_dims={1,2}, inserted_window_dims={7}",
        "update_window_dims={9}, inserted_window_dims={}",
        "update_window_dims={x}",
    ],
)
def test_scatter_with_odd_dimension_numbers_counts_its_operands_whole(scatter_dims: str) -> None:
    text = f"HloModule s\n\n%set (a: f32[], b: f32[]) -> f32[] {{\n  %a = f32[] parameter(0)\n  ROOT %b = f32[] parameter(1)\n}}\n\nENTRY %main (x: f32[1024,64], idx: s32[32,1], u: f32[32,1,64]) -> f32[1024,64] {{\n  %x = f32[1024,64]{{1,0}} parameter(0)\n  %idx = s32[32,1]{{1,0}} parameter(1)\n  %u = f32[32,1,64]{{2,1,0}} parameter(2)\n  ROOT %scatter.1 = f32[1024,64]{{1,0}} scatter(%x, %idx, %u), {scatter_dims}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=%set\n}}\n"
    traffic = ops(text)["scatter.1"].cost.traffic
    assert traffic.logical_bytes == (2 * 1024 * 64 + 32 + 32 * 64) * 4


def test_nested_fusion_that_returns_its_parameter_reads_it() -> None:
    text = """HloModule n

%identity (p: f32[64,64]) -> f32[64,64] {
  ROOT %p = f32[64,64]{1,0} parameter(0)
}

%outer (q: f32[64,64]) -> f32[64,64] {
  %q = f32[64,64]{1,0} parameter(0)
  %inner = f32[64,64]{1,0} fusion(%q), kind=kLoop, calls=%identity
  ROOT %neg = f32[64,64]{1,0} negate(%inner)
}

ENTRY %main (x: f32[64,64]) -> f32[64,64] {
  %x = f32[64,64]{1,0} parameter(0)
  ROOT %f = f32[64,64]{1,0} fusion(%x), kind=kLoop, calls=%outer
}
"""
    assert ops(text)["f"].cost.traffic.logical_bytes == 2 * 64 * 64 * 4


def test_xprof_tpu_rows_and_tiles(third_party: Path) -> None:
    """Third-party v6e instructions: a whole array's tile-aware bytes are its padded bytes, and one row of
    f32[5,1024,1024,256]{3,2,1,0:T(8,128)} (256 floats, 1 KiB) moves 2 tiles of 4 KiB."""
    lines = (third_party / "hlo" / "xprof_tpu_inference_2.extracted_instructions.hlo.txt").read_text().splitlines()
    for line in filter(str.strip, lines):
        instr = parse_instruction(line)
        for leaf in instr.shape.leaves():
            assert tiles_bytes(leaf, leaf.dims) == leaf.padded_bytes, line
    array = parse_instruction(lines[0]).shape.tuple_shapes[1]  # the HBM source of the host offload
    assert (str(array), tiles_bytes(array, (1, 1, 1, 256))) == (
        "f32[5,1024,1024,256]{3,2,1,0:T(8,128)}",
        2 * 8 * 128 * 4,
    )
