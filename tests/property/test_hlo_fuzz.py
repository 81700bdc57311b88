"""Mutated real HLO text: the parser either succeeds or raises ParseError, never anything else.

Mutations: truncation at a random offset, garbage tokens inserted, characters deleted, lines swapped,
lines duplicated. After a successful parse every decoding property is read too, so lazy decoders are
held to the same rule.
"""

# ruff: noqa: E501  (HLO fixture lines are kept verbatim, as XLA prints them)

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooftop.analysis.hlo.groups import device_groups
from rooftop.analysis.hlo.ir import Instruction, decode_config
from rooftop.analysis.hlo.parse import parse_hlo, parse_instruction
from rooftop.analysis.hlo.shapes import parse_shape, parse_window
from rooftop.errors import ParseError

# Compiled-text style (long form, %-names, tables, tiled layouts, collectives, while, custom-call).
LONG_FORM = """HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[16,16]{1,0}, /*index=1*/bf16[8,128]{1,0})->(f32[16,16]{1,0}, bf16[8,128]{1,0})}, num_partitions=8

FileNames
1 "/tmp/model.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=7 end_line=7 column=5 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

%fused_computation (param_0: f32[16,16]) -> f32[16,16] {
  %param_0 = f32[16,16]{1,0} parameter(0)
  ROOT %dot.2 = f32[16,16]{1,0} dot(%param_0, %param_0), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general" stack_frame_id=1}
}

%body (t: (s32[], f32[16,16])) -> (s32[], f32[16,16]) {
  %t = (s32[], f32[16,16]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %x = f32[16,16]{1,0} get-tuple-element(%t), index=1
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  %f = f32[16,16]{1,0} fusion(%x), kind=kOutput, calls=%fused_computation, backend_config={"fusion_config":{"kind":"__x"}}
  ROOT %r = (s32[], f32[16,16]{1,0}) tuple(%i2, %f)
}

%cond (t.1: (s32[], f32[16,16])) -> pred[] {
  %t.1 = (s32[], f32[16,16]{1,0}) parameter(0)
  %i.1 = s32[] get-tuple-element(%t.1), index=0
  %n = s32[] constant(8)
  ROOT %lt = pred[] compare(%i.1, %n), direction=LT
}

ENTRY %main (x.1: f32[16,16], y.1: bf16[8,128]) -> (f32[16,16], bf16[8,128]) {
  %x.1 = f32[16,16]{1,0} parameter(0), sharding={devices=[2,4]<=[8]}, metadata={op_name="x"}
  %y.1 = bf16[8,128]{1,0:T(8,128)(2,1)S(1)} parameter(1)
  %c = f32[2,2]{1,0} constant({ { 1, 2 }, { 3, 4 } })
  %zero = s32[] constant(0)
  %tup = (s32[], f32[16,16]{1,0}) tuple(%zero, %x.1)
  %w = (s32[], f32[16,16]{1,0}) while(%tup), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"8"}}
  %g = f32[16,16]{1,0} get-tuple-element(%w), index=1
  %ar = f32[16,16]{1,0} all-reduce(f32[16,16]{1,0} %g), channel_id=1, replica_groups=[4,2]<=[2,4]T(1,0), to_apply=%add
  %ags = (f32[16,16]{1,0}, f32[32,16]{1,0}) all-gather-start(%ar), channel_id=2, replica_groups={{0,1},{2,3},{4,5},{6,7}}, dimensions={0}
  %agd = f32[32,16]{1,0} all-gather-done(%ags)
  %cc = (bf16[8,128]{1,0}, s8[1024]{0}) custom-call(bf16[8,128]{1,0:T(8,128)(2,1)S(1)} %y.1, bf16[8,128]{1,0:T(8,128)(2,1)S(1)} %y.1), custom_call_target="__cublas$gemm", backend_config={"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["1"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}}}
  %gc = bf16[8,128]{1,0} get-tuple-element(%cc), index=0
  ROOT %out = (f32[16,16]{1,0}, bf16[8,128]{1,0}) tuple(%ar, %gc)
}
"""

# Short form (no %, no operand shapes), as in hlo-opt tests and lowered text.
SHORT_FORM = """HloModule m, entry_computation_layout={(s32[4]{0})->(s32[32]{0})}

// a comment
region {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] add(a, b)
}

ENTRY e {
  param0 = s32[4] parameter(0)
  all-gather.1 = s32[32] all-gather(param0), dimensions={0}, replica_groups=[1,8]<=[8], channel_id=1
  conv = f32[1,8,8,4]{3,2,1,0} convolution(f32[1,8,8,4]{3,2,1,0} x, f32[3,3,4,4]{3,2,1,0} k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=1
  x = f32[1,8,8,4]{3,2,1,0} parameter(1)
  k = f32[3,3,4,4]{3,2,1,0} parameter(2)
  r = s32[] reduce(param0, zero), dimensions={0}, to_apply=region
  zero = s32[] constant(0)
  custom-call.1 = s32[32] custom-call(all-gather.1), custom_call_target="my_custom_call1", frontend_attributes={k="v"}
  ROOT tuple = (s32[32]) tuple(custom-call.1)
}
"""

_GARBAGE = st.sampled_from(
    ["{", "}", "(", ")", "[", "]", ",", "=", "%", '"', "ROOT", "ENTRY", "HloModule x", "/*", "*/", "\n", "<=",
     "f32[", "T(", "S(", ":", "\\", "\x00", "\u2028", "99999999999999999999", "-", "calls=", "{{0,1}", "ü"]
)  # fmt: skip


def _touch(instr: Instruction) -> None:
    """Read every lazily decoded property (each may raise ParseError only)."""
    for prop in (
        "fusion_kind", "replica_groups", "source_target_pairs", "dot_dims", "dimensions", "channel_id",
        "tuple_index", "parameter_number", "feature_group_count", "batch_group_count", "window", "dim_labels",
        "custom_call_target", "frontend_attributes", "backend_config", "trip_count", "async_kind", "op_name",
    ):  # fmt: skip
        try:
            getattr(instr, prop)
        except ParseError:
            pass
    for shape in (instr.shape, *[s for s in instr.operand_shapes if s is not None]):
        _ = shape.logical_bytes, shape.padded_bytes, shape.num_elements, str(shape)


def _check(text: str) -> None:
    try:
        module = parse_hlo(text)
    except ParseError:
        return
    for comp, instr in module.instructions():
        _touch(instr)
        module.source_location(instr)
        module.base_opcode(instr)
        assert instr.name in comp
    module.async_pairs()


@st.composite
def _mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from([LONG_FORM, SHORT_FORM]))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "insert", "delete", "swap", "duplicate"]))
        if kind == "truncate":
            text = text[: draw(st.integers(0, len(text)))]
        elif kind == "insert":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(_GARBAGE) + text[at:]
        elif kind == "delete":
            at = draw(st.integers(0, max(len(text) - 1, 0)))
            text = text[:at] + text[at + draw(st.integers(1, 3)) :]
        else:
            lines = text.split("\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if kind == "swap":
                lines[i], lines[j] = lines[j], lines[i]
            else:
                lines.insert(j, lines[i])
            text = "\n".join(lines)
    return text


def test_unmutated_texts_parse() -> None:
    assert parse_hlo(LONG_FORM).entry.name == "main"
    assert parse_hlo(SHORT_FORM).entry.name == "e"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_mutations_raise_only_parse_error(text: str) -> None:
    _check(text)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_raises_only_parse_error(text: str) -> None:
    _check("HloModule m\n" + text)
    _check(text)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, LONG_FORM.count("\n")), st.integers(0, 200), _GARBAGE)
def test_single_instruction_lines(line_index: int, offset: int, garbage: str) -> None:
    line = LONG_FORM.split("\n")[line_index]
    mutated = line[:offset] + garbage + line[offset:]
    for text in (line, mutated, line[:offset]):
        try:
            _touch(parse_instruction(text))
        except ParseError:
            pass


_VALUE_SEEDS = ["[2,4]<=[8]", "[4,2]<=[2,4]T(1,0)", "mesh[x=2,y=4] {x}", "mesh[x=8] {x:(2)2}", "{{0,1},{2,3}}",
                "{size=3x3 stride=2x2 pad=0_1x0_1}", "f32[3,5]{1,0:T(2,2)}", "(f32[2]{0}, s32[])", '{"a":{"n":"8"}}']  # fmt: skip
_VALUE_TOKENS = st.sampled_from(["[", "]", "<=", "T(", ")", "(", ",", "0", "1", "8", "mesh[", "x=", "'x'", "{", "}",
                                 ":(", "device_ids=(", "-1", "?", "size=", "x", "pad=", "_", '"', "=", ":", "S("])  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(_VALUE_SEEDS), st.lists(st.tuples(st.integers(0, 60), _VALUE_TOKENS, st.booleans()), max_size=4))
def test_value_decoders_raise_only_parse_error(seed: str, edits: list[tuple[int, str, bool]]) -> None:
    text = seed
    for at, token, insert in edits:
        text = text[:at] + token + text[at:] if insert else text[:at] + text[at + len(token) :]
    for decode in (device_groups, parse_window, parse_shape, decode_config):
        try:
            value = decode(text)
        except ParseError:
            continue
        if decode is parse_shape:
            _ = value.padded_bytes, value.logical_bytes, str(value)  # type: ignore[union-attr]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["n", "known_trip_count", "gemm_backend_config", "dot_dimension_numbers", "lhs_contracting_dimensions"]
            ),
            inner,
            max_size=3,
        )
    ),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(_JSON, st.sampled_from(["while", "custom-call"]))
def test_any_backend_config_json_decodes_or_raises_parse_error(config: object, opcode: str) -> None:
    import json

    text = f"%w = f32[] {opcode}(%x), condition=%c, body=%b, backend_config={json.dumps(config)}"
    try:
        _touch(parse_instruction(text))
    except ParseError:
        pass
