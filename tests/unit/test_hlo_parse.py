"""HLO text parser: hand-written snippets per feature, real compiled HLO from JAX, third-party dumps."""

# ruff: noqa: E501  (HLO fixture lines are kept verbatim, as XLA prints them)

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

from pathlib import Path

import pytest

from rooftop.analysis.hlo.groups import device_groups
from rooftop.analysis.hlo.ir import HloModule, Instruction, decode_config
from rooftop.analysis.hlo.parse import parse_hlo, parse_hlo_file, parse_instruction
from rooftop.analysis.hlo.shapes import ELEMENT_BYTES, Layout, Shape, parse_shape
from rooftop.errors import ParseError, UnknownNameError

HLO_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "third_party_profiles" / "hlo"


def module(body: str, header: str = "HloModule m") -> HloModule:
    return parse_hlo(header + "\n\n" + body)


def entry(lines: str, extra: str = "") -> HloModule:
    """A module whose ENTRY computation holds ``lines`` (and ``extra`` computations before it)."""
    return module(extra + "\nENTRY %main {\n" + lines + "\n}\n")


# --- the two literature examples ----------------------------------------------------------------------


def test_tiled_fusion_with_memory_space() -> None:
    instr = parse_instruction(
        "%fusion.3 = bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)} fusion(bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)}"
        " %fusion.32), kind=kCustom, calls=%all-reduce-scatter.3"
    )
    assert (instr.name, instr.opcode, instr.fusion_kind) == ("fusion.3", "fusion", "kCustom")
    assert instr.shape.dtype == "bf16" and instr.shape.dims == (32, 32, 4096)
    assert instr.shape.layout == Layout((2, 1, 0), ((8, 128), (2, 1)), 1)
    assert instr.shape.layout.memory_space == 1
    assert instr.operands == ("fusion.32",)
    assert instr.operand_shapes[0] is not None and instr.operand_shapes[0].dims == (32, 32, 8192)
    assert instr.called_computations == ("all-reduce-scatter.3",)
    assert instr.shape.logical_bytes == 32 * 32 * 4096 * 2
    assert instr.shape.padded_bytes == instr.shape.logical_bytes  # 32 % 8 == 0 and 4096 % 128 == 0


def test_tile_padding_f32_3x5_by_2x2() -> None:
    shape = parse_shape("f32[3,5]{1,0:T(2,2)}")
    assert shape.padded_dims == (4, 6)
    assert shape.logical_bytes == 3 * 5 * 4
    assert shape.padded_bytes == 4 * 6 * 4
    assert shape.padded_bytes / shape.logical_bytes == pytest.approx(1.6)


# --- shapes and layouts ---------------------------------------------------------------------------------


def test_element_bytes() -> None:
    expected = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "bf16": 2,
                "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4, "f64": 8, "s64": 8, "u64": 8,
                "c64": 8, "c128": 16, "token": 0, "opaque": 0}  # fmt: skip
    for dtype, size in expected.items():
        assert ELEMENT_BYTES[dtype] == size
        assert parse_shape(f"{dtype}[]").element_bytes == size
    assert parse_shape("s4[10]{0}").logical_bytes == 10 * 0.5


def test_tuple_shape_with_index_comments_and_nesting() -> None:
    shape = parse_shape("(f32[2]{0}, s32[], /*index=2*/(pred[3]{0}, token[]), u32[]{:S(2)})")
    assert shape.is_tuple and len(shape.tuple_shapes or ()) == 4
    assert [leaf.dtype for leaf in shape.leaves()] == ["f32", "s32", "pred", "token", "u32"]
    assert shape.logical_bytes == 2 * 4 + 4 + 3 * 1 + 0 + 4
    assert shape.num_elements == 2 + 1 + 3 + 1 + 1
    assert shape.leaves()[-1].layout == Layout((), (), 2)
    assert parse_shape("()").tuple_shapes == ()


def test_dynamic_dims_and_scalar_tile() -> None:
    shape = parse_shape("f32[<=8,3]{1,0}")
    assert shape.dims == (8, 3) and shape.dynamic_dims == (0,)
    assert str(shape) == "f32[<=8,3]{1,0}"
    scalar = parse_shape("f32[]{:T(128)S(6)}")
    assert scalar.layout == Layout((), ((128,),), 6)
    assert scalar.padded_bytes == 128 * 4  # a rank-1 tile on a scalar pads the missing dim of size 1 to 128


def test_tiles_follow_minor_to_major() -> None:
    shape = parse_shape("f32[5,3]{0,1:T(2,4)}")  # dim 0 is minor-most: tile 4 applies to it, 2 to dim 1
    assert shape.padded_dims == (8, 4)
    assert parse_shape("bf16[32,32,4096]{2,1,0:T(8,128)(2,1)}").padded_dims == (32, 32, 4096)
    assert parse_shape("f32[1,100]{1,0:T(8,128)}").padded_bytes == 8 * 128 * 4


def test_opaque_and_layout_round_trip() -> None:
    assert parse_shape("opaque[]").element_bytes == 0
    text = "bf16[8,256]{1,0:T(8,128)(2,1)S(1)}"
    assert str(parse_shape(text)) == text


@pytest.mark.parametrize(
    "text", ["f99[2]", "f32[2", "f32[a]", "f32[2]{5}", "(f32[2], s32[]", "(f32[2] s32[])", "f32[2]{0:T(x)}"]
)
def test_bad_shapes(text: str) -> None:
    with pytest.raises(ParseError):
        parse_shape(text)


# --- replica groups and device lists -----------------------------------------------------------------------


def test_iota_replica_groups() -> None:
    assert device_groups("[2,4]<=[8]") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert device_groups("[4,2]<=[2,4]T(1,0)") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert device_groups("[1,8]<=[8]") == [list(range(8))]
    # [2,2,2] iota, transposed (2,1,0): element (i,j,k) -> 4k + 2j + i
    assert device_groups("[2,4]<=[2,2,2]T(2,1,0)") == [[0, 4, 2, 6], [1, 5, 3, 7]]


def test_explicit_and_mesh_replica_groups() -> None:
    assert device_groups("{{0,1},{2,3}}") == [[0, 1], [2, 3]]
    assert device_groups("{}") == []
    mesh = "mesh['axis_0'=2,'axis_1'=1,'axis_2'=4] {'axis_0'}"  # as jax 0.10 prints it
    assert device_groups(mesh) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert device_groups("mesh[x=2,y=4] {y}") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert device_groups("mesh[x=8] {x:(1)2}") == [[0, 4], [1, 5], [2, 6], [3, 7]]  # [8] -> [1,2,4]
    assert device_groups("mesh[x=8] {x:(2)2}") == [[0, 2], [1, 3], [4, 6], [5, 7]]  # [8] -> [2,2,2]
    assert device_groups("mesh[x=2,y=2], device_ids=(3,2,1,0) {y}") == [[3, 2], [1, 0]]


@pytest.mark.parametrize(
    "text", ["[2,4]<=[6]", "[2,4]<=[8]T(1)", "{{0,1},x}", "mesh[x=2] {z}", "banana", "[3]<=[3]T(1,0)"]
)
def test_bad_replica_groups(text: str) -> None:
    with pytest.raises(ParseError):
        device_groups(text)


def test_collective_attributes() -> None:
    mod = entry(
        "  %p = f32[8]{0} parameter(0)\n"
        "  %ar = f32[8]{0} all-reduce(f32[8]{0} %p), channel_id=5, replica_groups={{0,1},{2,3}}, to_apply=%add\n"
        "  ROOT %cp = f32[8]{0} collective-permute(f32[8]{0} %ar), channel_id=6, source_target_pairs={{0,1},{1,0}}",
        extra="%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
        "  ROOT %s = f32[] add(f32[] %a, f32[] %b)\n}\n",
    )
    ar, cp = mod.entry.instruction("ar"), mod.entry.instruction("cp")
    assert ar.replica_groups == [[0, 1], [2, 3]] and ar.channel_id == 5
    assert ar.called_computations == ("add",)
    assert cp.source_target_pairs == [(0, 1), (1, 0)] and cp.replica_groups is None


# --- module structure ----------------------------------------------------------------------------------


COMPILED = """HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[16,16]{1,0})->f32[16,16]{1,0}}, num_partitions=1

FileNames
1 "/tmp/model.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=7 end_line=7 column=5 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


%fused_computation (param_0: f32[16,16]) -> f32[16,16] {
  %param_0 = f32[16,16]{1,0} parameter(0)
  ROOT %dot.2 = f32[16,16]{1,0} dot(%param_0, %param_0), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general" stack_frame_id=1}
}

ENTRY %main.4 (x.1: f32[16,16]) -> f32[16,16] {
  %x.1 = f32[16,16]{1,0} parameter(0), metadata={op_name="x"}
  ROOT %f = f32[16,16]{1,0} fusion(%x.1), kind=kCustom, calls=%fused_computation, metadata={op_name="jit(f)/dot_general" stack_frame_id=1}, backend_config={"fusion_config":{"kind":"__ynn_fusion"}}
}
"""


def test_module_header_tables_and_computations() -> None:
    mod = parse_hlo(COMPILED, source="compiled.txt")
    assert mod.name == "jit_f" and mod.source == "compiled.txt"
    assert mod.attributes["is_scheduled"] == "true"
    assert mod.attributes["entry_computation_layout"] == "{(f32[16,16]{1,0})->f32[16,16]{1,0}}"
    assert mod.attributes["num_partitions"] == "1"
    assert list(mod.computations) == ["fused_computation", "main.4"]
    assert mod.entry.name == "main.4" and mod.entry.is_entry
    assert not mod.computation("fused_computation").is_entry
    assert mod.tables["FileNames"] == {1: '"/tmp/model.py"'}
    assert mod.tables["StackFrames"][1] == "{file_location_id=1 parent_frame_id=1}"
    dot = mod.computation("fused_computation").root
    assert dot.metadata == {"op_name": "jit(f)/dot_general", "stack_frame_id": "1"}
    assert mod.source_location(dot) == ("/tmp/model.py", 7)
    assert mod.num_instructions() == 4


def test_short_form_operand_shapes_resolved_from_definitions() -> None:
    mod = module("ENTRY e {\n  a = f32[4]{0} parameter(0)\n  add.1 = f32[4]{0} add(a, b)\n  b = f32[4]{0} parameter(1)\n"
                 "  ROOT t = (f32[4]{0}) tuple(add.1)\n}")  # fmt: skip
    add = mod.entry.instruction("add.1")
    assert add.operands == ("a", "b")
    assert add.operand_shapes == (parse_shape("f32[4]{0}"), parse_shape("f32[4]{0}"))
    assert mod.entry.root.name == "t" and mod.entry.root.is_root
    assert [p.name for p in mod.entry.params] == ["a", "b"]
    assert parse_instruction("add.1 = f32[4]{0} add(a, b)").operand_shapes == (None, None)


def test_long_form_operand_shapes_and_index_comments() -> None:
    instr = parse_instruction(
        "%t = (f32[], f32[], f32[], f32[], f32[], f32[]) tuple(f32[] %a, f32[] %b, f32[] %c, f32[] %d, f32[] %e, "
        "/*index=5*/f32[] %f)"
    )
    assert instr.operands == ("a", "b", "c", "d", "e", "f")
    assert all(s == parse_shape("f32[]") for s in instr.operand_shapes)
    tuple_operand = parse_instruction(
        '%d = f32[8]{0} copy-done((f32[8]{0}, f32[8]{0:S(1)}, u32[]{:S(2)}) %s), metadata={op_name="c"}'
    )
    assert tuple_operand.operand_shapes[0] is not None and len(tuple_operand.operand_shapes[0].leaves()) == 3


def test_params_are_ordered_and_root_defaults_to_last() -> None:
    mod = module("c {\n  y = f32[] parameter(1)\n  x = f32[] parameter(0)\n  z = f32[] add(x, y)\n}\n\n"
                 "ENTRY e {\n  a = f32[] parameter(0)\n  ROOT b = f32[] call(a, a), to_apply=c\n}")  # fmt: skip
    comp = mod.computation("c")
    assert [p.name for p in comp.params] == ["x", "y"] and comp.root.name == "z"
    assert "z" in comp and "%z" in comp and len(comp) == 3
    assert mod.entry.root.called_computations == ("c",)
    assert mod.callees(mod.entry.root) == (comp,)
    with pytest.raises(UnknownNameError):
        comp.instruction("zz")


def test_missing_entry_keyword_takes_the_last_computation() -> None:
    mod = module("a {\n  ROOT p = f32[] parameter(0)\n}\n\nb {\n  ROOT q = f32[] parameter(0)\n}")
    assert mod.entry.name == "b"


def test_execution_thread_and_comment_lines() -> None:
    mod = module("// RUN: hlo-opt %s\n%t (p: f32[]) -> f32[] {\n  ROOT %p = f32[] parameter(0)\n}, "
                 'execution_thread="parallel_thread"\n\nENTRY e {\n  // CHECK: nothing\n  ROOT a = f32[] parameter(0)\n}')  # fmt: skip
    assert set(mod.computations) == {"t", "e"}


# --- control flow ----------------------------------------------------------------------------------------

LOOP = """%body (t: (s32[], f32[4])) -> (s32[], f32[4]) {
  %t = (s32[], f32[4]{0}) parameter(0)
  ROOT %r = (s32[], f32[4]{0}) copy(%t)
}

%cond (t.1: (s32[], f32[4])) -> pred[] {
  %t.1 = (s32[], f32[4]{0}) parameter(0)
  ROOT %c = pred[] constant(true)
}
"""


def test_while_trip_count_known_and_unknown() -> None:
    mod = entry(
        "  %init = (s32[], f32[4]{0}) parameter(0)\n"
        "  %w = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body, "
        'backend_config={"known_trip_count":{"n":"8"},"known_init_step":{"init":"0","step":"1"}}\n'
        "  ROOT %w2 = (s32[], f32[4]{0}) while(%w), condition=%cond, body=%body",
        extra=LOOP,
    )
    w, w2 = mod.entry.instruction("w"), mod.entry.root
    assert w.trip_count == 8 and w.called_computations == ("cond", "body")
    assert w2.trip_count is None
    assert mod.entry.instruction("init").trip_count is None


def test_conditional_branches() -> None:
    branches = "%b0 (p: f32[]) -> f32[] {\n  ROOT %p = f32[] parameter(0)\n}\n\n%b1 (q: f32[]) -> f32[] {\n" \
               "  %q = f32[] parameter(0)\n  ROOT %n = f32[] negate(%q)\n}\n"  # fmt: skip
    mod = entry(
        "  %i = s32[] parameter(0)\n  %x = f32[] parameter(1)\n  %pred = pred[] parameter(2)\n"
        "  %c = f32[] conditional(%i, %x, %x), branch_computations={%b0, %b1}\n"
        "  ROOT %d = f32[] conditional(%pred, %x, %x), true_computation=%b0, false_computation=%b1",
        extra=branches,
    )
    assert mod.entry.instruction("c").called_computations == ("b0", "b1")
    assert mod.entry.root.called_computations == ("b0", "b1")


ASYNC = """%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%rs_comp (p: f32[8]) -> f32[4] {
  %p = f32[8]{0} parameter(0)
  ROOT %rs = f32[4]{0} reduce-scatter(f32[8]{0} %p), channel_id=3, replica_groups={{0,1}}, dimensions={0}, to_apply=%add
}

ENTRY %main (x: f32[8]) -> (f32[16], f32[8], f32[4], f32[8]) {
  %x = f32[8]{0} parameter(0)
  %ags = (f32[8]{0}, f32[16]{0}) all-gather-start(f32[8]{0} %x), channel_id=1, replica_groups=[1,2]<=[2], dimensions={0}
  %agd = f32[16]{0} all-gather-done((f32[8]{0}, f32[16]{0}) %ags)
  %ars = f32[8]{0} all-reduce-start(f32[8]{0} %x), channel_id=2, replica_groups={{0,1}}, to_apply=%add
  %ard = f32[8]{0} all-reduce-done(f32[8]{0} %ars)
  %rss = ((f32[8]{0}), f32[4]{0}) async-start(f32[8]{0} %x), calls=%rs_comp
  %rsu = ((f32[8]{0}), f32[4]{0}) async-update(((f32[8]{0}), f32[4]{0}) %rss), calls=%rs_comp
  %rsd = f32[4]{0} async-done(((f32[8]{0}), f32[4]{0}) %rsu), calls=%rs_comp
  %cps = (f32[8]{0}, f32[8]{0}, u32[], u32[]) collective-permute-start(f32[8]{0} %x), channel_id=4, source_target_pairs={{0,1},{1,0}}
  %cpd = f32[8]{0} collective-permute-done((f32[8]{0}, f32[8]{0}, u32[], u32[]) %cps)
  ROOT %out = (f32[16]{0}, f32[8]{0}, f32[4]{0}, f32[8]{0}) tuple(%agd, %ard, %rsd, %cpd)
}
"""


def test_async_pairs_and_wrapped_opcodes() -> None:
    mod = parse_hlo("HloModule m\n\n" + ASYNC)
    pairs = [(s.name, d.name, mod.base_opcode(s)) for s, d in mod.async_pairs()]
    assert pairs == [
        ("ags", "agd", "all-gather"),
        ("ars", "ard", "all-reduce"),
        ("rss", "rsd", "reduce-scatter"),
        ("cps", "cpd", "collective-permute"),
    ]
    rss = mod.entry.instruction("rss")
    assert rss.async_kind == "start" and rss.called_computations == ("rs_comp",)
    assert mod.entry.instruction("rsu").async_kind == "update"
    assert mod.entry.instruction("ags").replica_groups == [[0, 1]]
    assert mod.computation("rs_comp").root.replica_groups == [[0, 1]]
    assert mod.base_opcode(mod.entry.root) == "tuple"


# --- per-op attributes -------------------------------------------------------------------------------------


def test_dot_dimension_numbers() -> None:
    instr = parse_instruction(
        "ROOT dot.16 = f32[2,4096,6144]{2,1,0} dot(a, b), lhs_batch_dims={1}, lhs_contracting_dims={2}, "
        "rhs_batch_dims={0}, rhs_contracting_dims={1}"
    )
    assert instr.is_root
    assert instr.dot_dims == {
        "lhs_batch_dims": (1,),
        "lhs_contracting_dims": (2,),
        "rhs_batch_dims": (0,),
        "rhs_contracting_dims": (1,),
    }
    plain = parse_instruction("%d = f32[4,4]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert plain.dot_dims["lhs_batch_dims"] == () and plain.dot_dims["rhs_contracting_dims"] == (0,)


def test_convolution_window_dim_labels_and_groups() -> None:
    instr = parse_instruction(
        "%conv = f32[8,32,32,64]{3,2,1,0} convolution(f32[8,32,32,64]{3,2,1,0} %x, f32[3,3,1,64]{3,2,1,0} %k), "
        "window={size=3x3 stride=2x2 pad=0_1x1_1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f, feature_group_count=64"
    )
    assert instr.window == {
        "size": (3, 3),
        "stride": (2, 2),
        "lhs_dilate": (1, 1),
        "rhs_dilate": (1, 2),
        "pad_low": (0, 1),
        "pad_high": (1, 1),
    }
    assert instr.dim_labels == ("b01f", "01io", "b01f")
    assert instr.feature_group_count == 64 and instr.batch_group_count == 1
    simple = parse_instruction(
        "c = f32[1,4,4,2] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"
    )
    assert simple.window is not None and simple.window["stride"] == (1, 1) and simple.window["pad_low"] == (1, 1)


def test_custom_calls_and_backend_config() -> None:
    gemm = parse_instruction(
        '%cc = (bf16[4096,2048]{1,0}, s8[67108864]{0}) custom-call(%a, %b), custom_call_target="__cublas$gemm", '
        'backend_config={"operation_queue_id":"0","gemm_backend_config":{"alpha_real":1,"dot_dimension_numbers":'
        '{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["1"],"lhs_batch_dimensions":[],'
        '"rhs_batch_dimensions":[]}}}'
    )
    assert gemm.custom_call_target == "__cublas$gemm"
    assert gemm.backend_config is not None and gemm.backend_config["operation_queue_id"] == "0"
    assert gemm.attributes["backend_config"].startswith('{"operation_queue_id"')
    assert gemm.dot_dims["lhs_contracting_dims"] == (1,) and gemm.dot_dims["rhs_contracting_dims"] == (1,)
    conv = parse_instruction(
        "c = (f32[1,4]{1,0}, u8[0]{0}) custom-call(x, y), window={size=1x2}, dim_labels=bf0_oi0->bf0, "
        'custom_call_target="__cudnn$convForward", backend_config={"cudnn_conv_backend_config":{"activation_mode":"kNone"}}'
    )
    assert conv.custom_call_target == "__cudnn$convForward" and conv.dim_labels == ("bf0", "oi0", "bf0")
    fmha = parse_instruction(
        'f = (bf16[2,16,128,64]{3,2,1,0}, u8[0]{0}) custom-call(q, k, v), custom_call_target="__cudnn$fmhaSoftmax", '
        "backend_config={attn_heads = 16 : i64, is_training = true, scaling_factor = 1.250000e-01 : f64}"
    )
    assert fmha.custom_call_target == "__cudnn$fmhaSoftmax"
    assert fmha.backend_config == {"attn_heads": 16, "is_training": True, "scaling_factor": 0.125}
    assert decode_config('"{\\"known_trip_count\\":{\\"n\\":\\"3\\"}}"') == {"known_trip_count": {"n": "3"}}
    assert decode_config("not json") is None


def test_metadata_frontend_attributes_sharding_and_unknown_attributes() -> None:
    instr = parse_instruction(
        "%p = f32[8]{0} parameter(3), sharding={devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}, "
        'frontend_attributes={_xla_stream_annotation="1",xla.sdy.sharding="#sdy.sharding<@mesh, [{\\"x\\"}]>"}, '
        'metadata={op_name="jit(f)/dot_general" source_file="/a/b.py" source_line=12 stack_frame_id=3}, '
        'some_future_attribute={a=[1,2], b=(3)}, origin={{"x"}}'
    )
    assert instr.parameter_number == 3
    assert instr.attributes["sharding"] == "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
    assert instr.frontend_attributes == {
        "_xla_stream_annotation": "1",
        "xla.sdy.sharding": '#sdy.sharding<@mesh, [{"x"}]>',
    }
    assert instr.metadata == {"op_name": "jit(f)/dot_general", "source_file": "/a/b.py", "source_line": "12",
                              "stack_frame_id": "3"}  # fmt: skip
    assert instr.op_name == "jit(f)/dot_general"
    assert instr.attributes["some_future_attribute"] == "{a=[1,2], b=(3)}"
    assert instr.attributes["origin"] == '{{"x"}}'
    assert "metadata" not in instr.attributes


def test_operand_list_then_dimensions_and_index() -> None:
    gte = parse_instruction("%g = f32[16,16]{1,0} get-tuple-element(%w), index=1")
    assert gte.tuple_index == 1 and gte.operands == ("w",)
    bcast = parse_instruction("%b = f32[4,3]{1,0} broadcast(%c), dimensions={1}")
    assert bcast.dimensions == (1,)
    assert parse_instruction("%b = f32[4,3]{1,0} broadcast(%c), dimensions={}").dimensions == ()


# --- constants ---------------------------------------------------------------------------------------------


def test_constants_are_skipped_robustly() -> None:
    mod = entry(
        "  %s = f32[] constant(0.5)\n"
        "  %n = f32[] constant(nan)\n"
        "  %z = bf16[0]{0} constant({})\n"
        "  %elided = f32[3,3]{1,0} constant({...})\n"
        '  %nested = f32[2,2,2]{2,1,0} constant({ { { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 7, 8 } } }), metadata={op_name="c"}\n'
        "  %multi = f32[2,3]{1,0} constant({\n    { 1, 2, 3 },\n    { 4, 5, 6 }\n  })\n"
        "  %tup = (f32[], s32[]) constant((1, 2))\n"
        "  ROOT %r = f32[] add(%s, %n)"
    )
    comp = mod.entry
    assert comp.instruction("s").attributes["literal"] == "0.5"
    assert comp.instruction("z").attributes["literal"] == "{}"
    assert comp.instruction("nested").metadata == {"op_name": "c"}
    assert comp.instruction("nested").operands == ()
    multi = comp.instruction("multi")
    assert multi.attributes["literal"].split() == ["{", "{", "1,", "2,", "3", "},", "{", "4,", "5,", "6", "}", "}"]
    assert comp.instruction("r").line == multi.line + 5  # the 4 continuation lines were consumed
    assert comp.instruction("tup").attributes["literal"] == "(1, 2)"
    big = ", ".join(["1"] * 2000)
    huge = parse_instruction(f"%b = f32[2000]{{0}} constant({{{big}}})")
    assert "literal" not in huge.attributes and int(huge.attributes["literal_chars"]) == len(big) + 2


def test_attributes_wrapped_over_lines() -> None:
    mod = entry(
        "  %p = f32[2] parameter(0)\n  rs_0 = ((f32[2]), f32[1]) reduce-scatter-start(p), to_apply=%r,\n"
        "      dimensions={0}\n  ROOT rs_1 = f32[1] reduce-scatter-done(rs_0)",
        extra="%r (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
        "  ROOT %s = f32[] add(%a, %b)\n}\n",
    )
    assert mod.entry.instruction("rs_0").dimensions == (0,)
    assert mod.base_opcode(mod.entry.root) == "reduce-scatter"


# --- errors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty input"),
        ("\n  \n// only a comment\n", "empty input"),
        ("ENTRY e {\n}", "expected 'HloModule"),
        ("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n", "not closed"),
        ("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  b f32[] negate(a)\n}", "expected '=' after instruction name"),
        ("HloModule m\nENTRY e {\n  ROOT b = f32[] negate(x)\n}", "operand 'x'"),
        ("HloModule m\nENTRY e {\n  b = f32[] fusion(), kind=kLoop, calls=nowhere\n}", "'nowhere'"),
        ("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  a = f32[] parameter(1)\n}", "defined twice"),
        ("HloModule m\nENTRY e {\n  ROOT a = f32[] parameter(0)\n  ROOT b = f32[] parameter(1)\n}", "more than one ROOT"),
        ("HloModule m\nENTRY e {\n  a = f32[] parameter(0\n}", "not terminated"),
        ("HloModule m\nENTRY e {\n  a = q32[] parameter(0)\n}", "unknown element type"),
        ("HloModule m\nENTRY e {\n  a = f32[] parameter(0) trailing\n}", "expected ', key=value'"),
        ("HloModule m\nENTRY e {\n}", "no instructions"),
        ("HloModule m\n\n@@@ garbage\n", "expected a computation"),
        ("HloModule m\nA {\n  ROOT a = f32[] parameter(0)\n}\nA {\n  ROOT a = f32[] parameter(0)\n}", "defined twice"),
        ("HloModule m\nENTRY a {\n  ROOT a = f32[] parameter(0)\n}\nENTRY b {\n  ROOT b = f32[] parameter(0)\n}", "more than one ENTRY"),
    ],
)  # fmt: skip
def test_malformed_text_raises_parse_error_with_line(text: str, fragment: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_hlo(text, source="bad.hlo")
    assert fragment in str(info.value)
    assert str(info.value).startswith("bad.hlo")


def test_byte_order_mark_and_trailing_comments() -> None:
    mod = parse_hlo(
        "\ufeffHloModule m\nENTRY e {\n  a = f32[] parameter(0) // the input\n  ROOT b = f32[] negate(a)  // negated\n}"
    )
    assert mod.entry.root.operands == ("a",) and mod.entry.root.attributes == {}


def test_non_text_input() -> None:
    with pytest.raises(ParseError):
        parse_hlo(b"HloModule m")  # type: ignore[arg-type]


def test_error_names_the_line() -> None:
    with pytest.raises(ParseError) as info:
        parse_hlo("HloModule m\n\nENTRY e {\n  a = f32[] parameter(0)\n  b f32[] negate(a)\n}")
    assert info.value.line == 5
    assert "line" not in str(info.value) or "5" in str(info.value)


def test_bad_attribute_values_raise_parse_error_on_access() -> None:
    instr = parse_instruction(
        "%a = f32[] all-reduce(%x), replica_groups=[3,3]<=[8], channel_id=x, window={size=3x3 pad=1}"
    )
    for prop in ("replica_groups", "channel_id", "window"):
        with pytest.raises(ParseError):
            getattr(instr, prop)


def test_files_that_are_not_hlo_text(tmp_path: Path) -> None:
    binary = tmp_path / "profile.xplane.pb"
    binary.write_bytes(b"\x0a\x07\x00\x01HloModule\xff\xfe")
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"HloModule m\n\xe9\xff\n")
    for path, fragment in ((binary, "binary"), (latin, "UTF-8"), (tmp_path / "missing.txt", "cannot read")):
        with pytest.raises(ParseError) as info:
            parse_hlo_file(path)
        assert fragment in str(info.value)
    good = tmp_path / "m.after_optimizations.txt"
    good.write_text(COMPILED.replace("\n", "\r\n"))
    assert parse_hlo_file(good).entry.root.name == "f"


# --- real compiled HLO from JAX -------------------------------------------------------------------------------


def _compiled(fn, *args) -> HloModule:
    jax = pytest.importorskip("jax")
    return parse_hlo(jax.jit(fn).lower(*args).compile().as_text(), source=getattr(fn, "__name__", "fn"))


def _find(mod: HloModule, opcode: str) -> list[Instruction]:
    return [instr for _, instr in mod.instructions() if instr.opcode == opcode]


def test_jax_matmul() -> None:
    jnp = pytest.importorskip("jax.numpy")
    mod = _compiled(lambda a, b: a @ b, jnp.ones((64, 128), jnp.float32), jnp.ones((128, 32), jnp.float32))
    dots = _find(mod, "dot")
    assert len(dots) == 1
    dot = dots[0]
    assert dot.shape.dims == (64, 32) and dot.dot_dims["lhs_contracting_dims"] == (1,)
    assert [s.dims for s in dot.operand_shapes if s is not None] == [(64, 128), (128, 32)]
    assert [p.shape.dims for p in mod.entry.params] == [(64, 128), (128, 32)]
    assert mod.tables.keys() >= {"FileNames", "StackFrames"}


def test_jax_mlp() -> None:
    jnp = pytest.importorskip("jax.numpy")

    def mlp(x, w1, w2):
        return jnp.maximum(x @ w1, 0) @ w2

    mod = _compiled(mlp, jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32, 4)))
    dots = sorted(_find(mod, "dot"), key=lambda d: d.shape.dims)
    assert [d.shape.dims for d in dots] == [(8, 4), (8, 32)]
    flops = sum(2 * d.shape.num_elements * d.operand_shapes[0].dims[1] for d in dots)
    assert flops == 2 * 8 * 16 * 32 + 2 * 8 * 32 * 4
    assert mod.entry.root.shape.dims == (8, 4)
    assert all(f.fusion_kind in {"kLoop", "kInput", "kOutput", "kCustom"} for f in _find(mod, "fusion"))


def test_jax_fori_loop_trip_count() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    def loop(x):
        return jax.lax.fori_loop(0, 8, lambda i, c: jnp.tanh(c @ c), x)

    mod = _compiled(loop, jnp.ones((16, 16)))
    (whl,) = _find(mod, "while")
    assert whl.trip_count == 8
    cond, body = (mod.computation(n) for n in whl.called_computations)
    assert cond.root.shape.dtype == "pred" and body.root.shape.is_tuple
    located = [mod.source_location(i) for _, i in mod.instructions() if "stack_frame_id" in i.metadata]
    assert located and all(loc is not None and loc[0].endswith("test_hlo_parse.py") for loc in located)


def test_jax_lowered_short_form() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    text = jax.jit(lambda a: jnp.sum(a * 2.0)).lower(jnp.ones((4, 8))).as_text(dialect="hlo")
    mod = parse_hlo(text)
    reduce = _find(mod, "reduce")[0]
    assert reduce.dimensions == (0, 1) and reduce.operand_shapes[0] == parse_shape("f32[4,8]{1,0}")


def test_jax_sharded_collectives_on_8_devices() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 devices (XLA_FLAGS=--xla_force_host_platform_device_count=8 before jax is imported)")
    import numpy as np
    from jax.sharding import Mesh, PartitionSpec

    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))

    def step(a):
        return (
            jax.lax.psum(a, "x"),
            jax.lax.all_gather(a, "y", tiled=True),
            jax.lax.psum_scatter(a, "y", tiled=True),
            jax.lax.ppermute(a, "y", [(i, (i + 1) % 4) for i in range(4)]),
        )

    specs = (PartitionSpec("x", "y"), PartitionSpec("x", None), PartitionSpec("x", "y"), PartitionSpec("x", "y"))
    fn = jax.shard_map(step, mesh=mesh, in_specs=PartitionSpec("x", "y"), out_specs=specs, check_vma=False)
    mod = _compiled(fn, jnp.ones((16, 32)))
    over_x, over_y = [[0, 4], [1, 5], [2, 6], [3, 7]], [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [i.replica_groups for i in _find(mod, "all-reduce")] == [over_x]
    assert [i.replica_groups for i in _find(mod, "all-gather")] == [over_y]
    assert [i.replica_groups for i in _find(mod, "reduce-scatter")] == [over_y]
    (perm,) = _find(mod, "collective-permute")
    assert sorted(perm.source_target_pairs or []) == sorted(
        [(g * 4 + i, g * 4 + (i + 1) % 4) for g in range(2) for i in range(4)]
    )
    assert all(i.channel_id is not None for i in _find(mod, "all-reduce"))
    assert mod.attributes["num_partitions"] == "8"


def test_jax_sharded_matmul_reductions() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 devices")
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))
    a = jax.device_put(jnp.ones((64, 128)), NamedSharding(mesh, PartitionSpec("x", "y")))
    b = jax.device_put(jnp.ones((128, 32)), NamedSharding(mesh, PartitionSpec("y", None)))
    mod = _compiled(lambda u, v: jnp.sum(u @ v), a, b)
    groups = [i.replica_groups for i in _find(mod, "all-reduce")]
    assert groups and [[0, 1, 2, 3], [4, 5, 6, 7]] in groups  # the contraction over y
    for group_list in groups:  # every form expands to a partition of the 8 devices
        assert group_list is not None and sorted(d for g in group_list for d in g) == list(range(8))


# --- third-party dumps (never copied into the repo) ----------------------------------------------------------


def _third_party(name: str) -> Path:
    path = HLO_DIR / name
    if not path.is_file():
        pytest.skip(f"{path} is not present")
    return path


def test_every_third_party_module_parses() -> None:
    if not HLO_DIR.is_dir():
        pytest.skip("third-party HLO folder is not present")
    for path in sorted(HLO_DIR.iterdir()):
        if "extracted_instructions" in path.name:
            continue
        mod = parse_hlo_file(path)
        assert mod.entry.root is not None and mod.num_instructions() > 0
        for _, instr in mod.instructions():
            assert None not in instr.operand_shapes


def test_third_party_efficientnet_convolutions() -> None:
    mod = parse_hlo_file(_third_party("hloenv_efficientnet_jit_lambda.before_optimizations.hlo.txt"))
    convs = _find(mod, "convolution")
    assert len(convs) == 73
    assert any(c.feature_group_count == 32 for c in convs)
    strided = [c.window for c in convs if c.window is not None and c.window["stride"] == (2, 2)]
    assert {"size": (3, 3), "stride": (2, 2), "lhs_dilate": (1, 1), "rhs_dilate": (1, 1), "pad_low": (0, 0),
            "pad_high": (1, 1)} in strided  # fmt: skip


def test_third_party_conv3d_cudnn() -> None:
    mod = parse_hlo_file(_third_party("derived_tracelens_conv3d.jit_forward_3d_conv.after_optimizations.hlo.txt"))
    conv = mod.entry.instruction("cudnn-conv.1")
    assert conv.custom_call_target == "__cudnn$convForward"
    assert conv.window is not None and conv.window["size"] == (1, 2, 2) and conv.window["stride"] == (1, 2, 2)
    assert conv.window["pad_low"] == (1, 1, 1) and conv.window["pad_high"] == (1, 1, 1)
    assert conv.dim_labels == ("bf012", "oi012", "bf012")
    lhs, rhs = conv.operand_shapes
    assert lhs is not None and rhs is not None
    assert lhs.dims == (1, 16, 32, 60, 104) and rhs.dims == (5120, 16, 1, 2, 2)
    # README: XLA counts 32,715,571,200 flops = 2 * out_features * in_features * input spatial positions
    # (stride == kernel, so each input position meets each kernel tap once; padding adds none)
    assert 2 * rhs.dims[0] * rhs.dims[1] * 32 * 60 * 104 == 32_715_571_200
    assert mod.entry.instruction("param").attributes["sharding"] == "{devices=[8,1,1,1,1]<=[8]}"
    assert conv.backend_config is not None and "cudnn_conv_backend_config" in conv.backend_config


def test_third_party_te_fused_attention() -> None:
    mod = parse_hlo_file(_third_party("derived_tracelens_te_fused_attn.jit_loss_fn.after_optimizations.hlo.txt"))
    targets = {i.custom_call_target for i in _find(mod, "custom-call")}
    assert {"__cublas$gemm", "te_fused_attn_forward_ffi", "te_fused_attn_backward_ffi"} <= targets
    gemm = next(i for i in _find(mod, "custom-call") if i.custom_call_target == "__cublas$gemm")
    assert gemm.dot_dims["lhs_contracting_dims"] == (1,) and gemm.dot_dims["rhs_contracting_dims"] == (1,)
    attn = next(i for i in _find(mod, "custom-call") if i.custom_call_target == "te_fused_attn_forward_ffi")
    assert attn.backend_config is not None and attn.backend_config["attn_heads"] == 16
    dot = mod.computation("gemm_fusion_dot_computation").root
    lhs, _ = dot.operand_shapes
    assert lhs is not None
    contracted = lhs.dims[dot.dot_dims["lhs_contracting_dims"][0]]
    assert 2 * dot.shape.num_elements * contracted == 103_079_215_104  # README: gemm_fusion_dot flops
    assert any(f.fusion_kind == "kCustom" and f.name.startswith("gemm_fusion_dot") for f in _find(mod, "fusion"))


def test_third_party_collective_cse_short_form() -> None:
    mod = parse_hlo_file(_third_party("openxla_xla_gpu_hlo_collective_cse.hlo"))
    gathers = _find(mod, "all-gather")
    assert [g.channel_id for g in gathers] == [1, 2, 3]
    assert all(g.replica_groups == [list(range(8))] for g in gathers)
    assert gathers[0].operand_shapes == (parse_shape("s32[4]"),)
    assert mod.entry.root.shape.is_tuple and mod.entry.name == "e"


def test_third_party_tpu_instructions_one_per_line() -> None:
    path = _third_party("xprof_tpu_inference_2.extracted_instructions.hlo.txt")
    instrs = [parse_instruction(line, n) for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]
    assert len(instrs) == 17
    starts = [i for i in instrs if i.opcode == "copy-start"]
    dones = [i for i in instrs if i.opcode == "copy-done"]
    assert len(starts) == len(dones) == 6
    assert sorted(d.operands[0] for d in dones) == sorted(s.name for s in starts)
    assert sum(i.fusion_kind == "kLoop" for i in instrs) == 3
    (reduce,) = [i for i in instrs if i.opcode == "all-reduce"]
    assert reduce.replica_groups == [[0, 4], [1, 5], [2, 6], [3, 7]]
    start = next(i for i in starts if i.name == "copy-start.1")
    destination, source, context = start.shape.leaves()
    assert destination.layout is not None and destination.layout.memory_space == 5
    assert source.layout is not None and source.layout.memory_space == 0
    assert context.layout == Layout((), (), 2)
    (bcast,) = [i for i in instrs if i.opcode == "broadcast"]
    assert bcast.operand_shapes[0] == Shape("f32", (), Layout((), ((128,),), 6))
    assert destination.padded_bytes == destination.logical_bytes == 5 * 1024 * 1024 * 256 * 4
