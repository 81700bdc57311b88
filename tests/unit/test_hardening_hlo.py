"""Hardening of HLO parsing and analysis and of the op-cost loops (issue 15): every hostile input the fuzzing
found is a one-line ParseError naming the file and line (exit 2 at the CLI), or the correct count, fast."""

# ruff: noqa: E501  (HLO fixture lines are kept verbatim, as XLA prints them)

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from rooftop.analysis.hlo.analyze import analyze
from rooftop.analysis.hlo.count import count_module
from rooftop.analysis.hlo.groups import device_groups, replica_groups
from rooftop.analysis.hlo.mesh import infer_mesh
from rooftop.analysis.hlo.parse import parse_hlo, parse_instruction
from rooftop.analysis.hlo.shapes import parse_shape, parse_window
from rooftop.analysis.torch.op import TorchOp
from rooftop.analysis.torch.ops import nccl_comm, op_cost
from rooftop.cost.op import ConvDim, floor_sum
from rooftop.errors import ParseError
from rooftop.hardware.catalog import get_chip
from rooftop.report.reasons import note_text
from tests.conftest import run_cli

CHIP = get_chip("h100")
SUM = "%sum (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\n"
PARAMS = "  %p0 = f32[8,16]{1,0} parameter(0)\n  %p1 = f32[16,4]{1,0} parameter(1)\n"


def module(body: str, header: str = "HloModule m, num_partitions=8", extra: str = "") -> str:
    return f"{header}\n\n{SUM}\n{extra}\nENTRY %main {{\n{PARAMS}{body}\n}}\n"


def line_of(text: str, needle: str) -> int:
    """The 1-based number of the first line of ``text`` that holds ``needle``."""
    return next(i for i, line in enumerate(text.split("\n"), 1) if needle in line)


def error(text: str, *fragments: str, mesh: str | None = "data=4,model=2") -> ParseError:
    """The ParseError of parsing and analysing ``text``: it names the source and a line, is one short line
    and holds every fragment."""
    with pytest.raises(ParseError) as info:
        analyze(parse_hlo(text, "m.hlo"), CHIP, mesh)
    err = info.value
    message = str(err)
    assert err.source == "m.hlo" and err.line is not None, message
    assert "\n" not in message and len(message) < 600, message
    for fragment in fragments:
        assert fragment in message, message
    return err


def cli_error(tmp_path: Path, text: str, *fragments: str) -> str:
    """``rooftop hlo FILE --chip h100 --mesh data=4,model=2``: exit 2 and one line naming FILE:line."""
    path = tmp_path / "m.hlo"
    path.write_text(text)
    code, out, err = run_cli("hlo", str(path), "--chip", "h100", "--mesh", "data=4,model=2")
    assert code == 2, err
    assert out == "" and err.count("\n") == 1 and "internal error" not in err, err
    assert f"{path}:" in err, err
    for fragment in fragments:
        assert fragment in err, err
    return err


# --- the examples -------------------------------------------------------------------------------


def test_unicode_digit_in_num_partitions(tmp_path: Path) -> None:
    text = module(
        "  ROOT %d = f32[8,4]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        header="HloModule m, num_partitions=²",
    )
    err = cli_error(tmp_path, text, "m.hlo:1:", "num_partitions", "'²'")
    assert "ASCII digits" in err


@pytest.mark.parametrize("value", ["0", "-1", "2097152", "99999999999999999999999"])
def test_num_partitions_out_of_range(value: str) -> None:
    error(
        module("  ROOT %n = f32[8,16]{1,0} negate(%p0)", header=f"HloModule m, num_partitions={value}"),
        "num_partitions",
    )


def test_num_partitions_times_replica_count_is_bounded() -> None:
    error(
        module("  ROOT %n = f32[8,16]{1,0} negate(%p0)", header="HloModule m, num_partitions=1024, replica_count=1024"),
        "more than 131072",
    )


def test_5000_digit_device_id_in_replica_groups(tmp_path: Path) -> None:
    body = "  ROOT %a = f32[8,16]{1,0} all-reduce(%p0), replica_groups={{0," + "9" * 5000 + "}}, to_apply=%sum"
    err = cli_error(tmp_path, module(body), "m.hlo:13:", "device id", "characters")
    assert len(err) < 600


@pytest.mark.parametrize(
    ("dims", "says"),
    [
        ("1e170,1e170", "'1e170'"),
        ("99999999999999999999,2", "'99999999999999999999'"),
        ("4294967296,4294967296,4", "more than 2**63 - 1 elements"),
        ("²,2", "'²'"),
        ("9" * 5000, "characters"),
    ],
)
def test_shape_dims_beyond_int64(tmp_path: Path, dims: str, says: str) -> None:
    cli_error(tmp_path, module(f"  ROOT %n = f32[{dims}] negate(%p0)"), "m.hlo:13:", says)


def test_tile_padding_beyond_int64() -> None:
    with pytest.raises(ParseError, match="more than 2"):
        parse_shape("f32[2,2]{1,0:T(4294967296,4294967296)(4294967296,4294967296)}")
    with pytest.raises(ParseError, match="more than 2"):
        parse_shape("f32[]{:T(4294967296,4294967296,4294967296)}")


def test_dot_with_one_operand(tmp_path: Path) -> None:
    body = "  ROOT %d = f32[8,4]{1,0} dot(%p0), lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    cli_error(tmp_path, module(body), "m.hlo:13:", "dot 'd'", "takes 2 operands (lhs, rhs), got 1")


@pytest.mark.parametrize(
    ("opcode", "operands", "says"),
    [
        ("select-and-scatter", "%p0", "takes 3 operands (operand, source, init_value), got 1"),
        ("scatter", "%p0", "takes at least 3 operands"),
        ("reduce", "%p0", "takes at least 2 operands"),
        ("reduce-window", "%p0", "takes at least 2 operands"),
        ("convolution", "%p0", "takes 2 operands (input, kernel)"),
    ],
)
def test_ops_missing_operands(opcode: str, operands: str, says: str) -> None:
    body = f"  ROOT %x = f32[8,16]{{1,0}} {opcode}({operands}), window={{size=1x1}}, select=%sum, scatter=%sum, to_apply=%sum, dim_labels=bf_io->bf"
    error(module(body), says)


def test_fused_dynamic_update_slice_with_one_operand() -> None:
    fused = "%fused (q: f32[8,16]) -> f32[8,16] {\n  %q = f32[8,16]{1,0} parameter(0)\n  ROOT %u = f32[8,16]{1,0} dynamic-update-slice(%q)\n}\n"
    error(
        module("  ROOT %f = f32[8,16]{1,0} fusion(%p0), kind=kLoop, calls=%fused", extra=fused),
        "dynamic-update-slice",
        "at least 2 operands",
    )


@pytest.mark.parametrize(
    ("labels", "says"),
    [
        ("b0f_0io->bxyf", "'bxyf' may hold only 'b', 'f'"),
        ("bf0_oi0->bf", "different spatial dims"),
        ("bb0_oi0->bf0", "'bb0' must name 'b' once"),
        ("bf1_oi1->bf1", "0, 1, ..."),
        ("b²f_²io->b²f", "expected three label groups"),
        ("bf01_oi01->bf01", "dim_labels name 4 input dims"),
    ],
)
def test_dim_labels_inconsistent_with_themselves_or_the_shapes(labels: str, says: str) -> None:
    body = (
        "  %x = f32[1,1,10]{2,1,0} parameter(2)\n  %k = f32[1,1,3]{2,1,0} parameter(3)\n"
        f"  ROOT %c = f32[1,1,8]{{2,1,0}} convolution(%x, %k), window={{size=3}}, dim_labels={labels}"
    )
    error(module(body), says)


def test_convolution_window_rank_and_size_must_match_the_kernel() -> None:
    head = "  %x = f32[1,1,10]{2,1,0} parameter(2)\n  %k = f32[1,1,3]{2,1,0} parameter(3)\n"
    error(
        module(head + "  ROOT %c = f32[1,1,8]{2,1,0} convolution(%x, %k), window={size=3x3}, dim_labels=bf0_oi0->bf0"),
        "window has 2 dims",
    )
    error(
        module(
            head + "  ROOT %c = f32[1,1,8]{2,1,0} convolution(%x, %k), window={size=300000000}, dim_labels=bf0_oi0->bf0"
        ),
        "differs from the kernel",
    )
    error(
        module(
            head
            + "  ROOT %c = f32[1,1,8]{2,1,0} convolution(%x, %k), window={size=3 stride=0}, dim_labels=bf0_oi0->bf0"
        ),
        "window stride",
    )
    error(
        module(
            head
            + "  ROOT %c = f32[1,1,8]{2,1,0} convolution(%x, %k), window={size=3}, dim_labels=bf0_oi0->bf0, feature_group_count=3"
        ),
        "feature_group_count=3 must divide",
    )


@pytest.mark.parametrize("mesh", ["data=4,model=2", None])
def test_device_repeated_in_a_replica_group(tmp_path: Path, mesh: str | None) -> None:
    body = "  ROOT %a = f32[8,16]{1,0} all-reduce(%p0), replica_groups={{0,0,1,1},{2,3,4,5}}, to_apply=%sum"
    error(module(body), "device 0 appears twice", mesh=mesh)
    if mesh:
        cli_error(tmp_path, module(body), "m.hlo:13:", "appears twice")


def test_mesh_inference_ignores_repeated_devices() -> None:
    assert infer_mesh([[[0, 0, 1, 1], [2, 3, 4, 5]]], 8).num_devices == 8
    with pytest.raises(ParseError, match="appears twice"):
        replica_groups("{{0,1},{1,2}}")


@pytest.mark.parametrize("value", ['"2x"', "-1", "1e400", "true", "[2]", '"²"', '"99999999999999999999"'])
def test_transformer_engine_backend_config_not_a_count(tmp_path: Path, value: str) -> None:
    body = (
        "  %q = bf16[2,128,8,64]{3,2,1,0} parameter(2)\n"
        '  ROOT %c = bf16[2,128,8,64]{3,2,1,0} custom-call(%q, %q, %q), custom_call_target="te_fused_attn_forward", '
        f'backend_config={{"input_batch":{value},"attn_heads":8,"q_max_seqlen":128,"kv_max_seqlen":128,"qk_head_dim":64,"v_head_dim":64,"mask_type":2}}'
    )
    err = error(module(body), "input_batch=", "is not a count")
    assert err.line == line_of(module(body), "ROOT %c")
    if value == '"2x"':
        cli_error(tmp_path, module(body), f"m.hlo:{err.line}:", "input_batch='2x'")


def test_transformer_engine_mask_named_by_enum_and_cudnn_config_not_a_dict() -> None:
    te = (
        "  %q = bf16[2,128,8,64]{3,2,1,0} parameter(2)\n"
        '  ROOT %c = bf16[2,128,8,64]{3,2,1,0} custom-call(%q, %q, %q), custom_call_target="te_fused_attn_forward", '
        'backend_config={"input_batch":"2","attn_heads":8,"q_max_seqlen":128,"kv_max_seqlen":128,"qk_head_dim":64,"v_head_dim":64,"mask_type":"NVTE_CAUSAL_MASK"}'
    )
    (op,) = [o for o in count_module(parse_hlo(module(te))).ops if o.name == "c"]
    assert op.cost.flops == 2 * 2 * 8 * (128 * 129 / 2) * (64 + 64)
    fmha = (
        "  %q = bf16[2,128,8,64]{3,2,1,0} parameter(2)\n"
        '  ROOT %c = bf16[2,128,8,64]{3,2,1,0} custom-call(%q, %q, %q), custom_call_target="__cudnn$fmhaSoftmax", '
        'backend_config={"cudnn_fmha_backend_config":5}'
    )
    (op,) = [o for o in count_module(parse_hlo(module(fmha))).ops if o.name == "c"]
    assert op.cost.flops == 2 * 2 * 8 * 128 * 128 * (64 + 64)


def test_convolution_with_a_300M_tap_window_is_counted_in_closed_form() -> None:
    body = (
        "  %x = f32[1,1,1000000000]{2,1,0} parameter(2)\n  %k = f32[1,1,300000000]{2,1,0} parameter(3)\n"
        "  ROOT %c = f32[1,1,700000001]{2,1,0} convolution(%x, %k), window={size=300000000}, dim_labels=bf0_oi0->bf0"
    )
    start = time.perf_counter()
    (op,) = [o for o in count_module(parse_hlo(module(body))).ops if o.name == "c"]
    assert time.perf_counter() - start < 2.0
    assert op.cost.flops == 2 * 700000001 * 300000000  # every (output, tap) pair reads a real input element


def test_kineto_conv1d_with_a_1e9_weight_is_priced_in_closed_form() -> None:
    args = {
        "Input Dims": [[1, 1, 2000000000], [1, 1, 1e9], [], [], [], [], []],
        "Input type": ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Int"],
        "Concrete Inputs": ["", "", "", "[1]", "[0]", "[1]", "1"],
    }
    start = time.perf_counter()
    price = op_cost(TorchOp.from_args("aten::conv1d", args))
    assert time.perf_counter() - start < 2.0
    assert price.cost is not None and price.cost.flops == 2 * 1000000001 * 1000000000


# --- the closed form of valid taps ------------------------------------------------------------------------


def _enumerated_taps(c: ConvDim) -> int:
    return sum(
        1
        for k in range(c.kernel)
        for o in range(c.output)
        if (u := o * c.stride + k * c.rhs_dilation - c.pad_low) >= 0
        and u % c.lhs_dilation == 0
        and u // c.lhs_dilation < c.input
    )


def test_valid_taps_closed_form_matches_enumeration_with_dilations_and_negative_padding() -> None:
    rnd = random.Random(15)
    for _ in range(3000):
        c = ConvDim(
            rnd.randint(0, 12),
            rnd.randint(0, 7),
            rnd.randint(0, 14),
            rnd.randint(1, 5),
            rnd.randint(-10, 10),
            rnd.randint(1, 5),
            rnd.randint(1, 5),
        )
        assert c.valid_taps() == _enumerated_taps(c), c


def test_valid_taps_of_int64_sizes_is_instant() -> None:
    big = 2**63 - 1
    start = time.perf_counter()
    assert ConvDim(big, 1, big).valid_taps() == big
    assert ConvDim(10**18, 10**9, 10**18, 3, 7, 5, 11).valid_taps() > 0
    assert time.perf_counter() - start < 1.0


def test_floor_sum_matches_the_sum() -> None:
    rnd = random.Random(3)
    for _ in range(2000):
        n, m, a, b = rnd.randint(0, 20), rnd.randint(1, 9), rnd.randint(-30, 30), rnd.randint(-30, 30)
        assert floor_sum(n, m, a, b) == sum((a * i + b) // m for i in range(n))


def test_convdim_rejects_non_integers() -> None:
    from rooftop.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError, match="integers"):
        ConvDim(10, 3.0, 8)  # type: ignore[arg-type]


# --- the family: other integers, unicode digits, hangs, overflow ---------------------------------------


@pytest.mark.parametrize(
    ("attribute", "says"),
    [
        ("channel_id=²", "channel_id"),
        ("replica_groups=[2,4]<=[²]", "replica_groups"),
        ("replica_groups=[0,8]<=[0]", "iota dims"),
        ("replica_groups=maximal_mesh[device_id=²] {}", "replica_groups"),
        ("replica_groups=mesh['x'=2,'y'=²] {'x'}", "replica_groups"),
        ("replica_groups=mesh['x'=2,'y'=4] {'x':(1)" + "9" * 5000 + "}", "characters"),
        ("replica_groups={{0,2000000}}", "device id"),
    ],
)
def test_collective_attribute_integers(attribute: str, says: str) -> None:
    instr = parse_instruction(f"%a = f32[8,16]{{1,0}} all-reduce(%p0), {attribute}, to_apply=%sum", 3)
    with pytest.raises(ParseError) as info:
        _ = instr.channel_id, instr.replica_groups
    assert says in str(info.value) and info.value.line == 3 and len(str(info.value)) < 600


def test_negative_or_huge_parameter_number() -> None:
    for number in ("-1", "99999999999999999999"):
        with pytest.raises(ParseError, match="parameter number"):
            parse_hlo(f"HloModule m\n\nENTRY %e {{\n  ROOT %p = f32[2]{{0}} parameter({number})\n}}\n")


def test_unicode_digits_in_tables_and_metadata_are_not_numbers() -> None:
    text = 'HloModule m\n\nFileNames\n² "a.py"\n\nENTRY %e {\n  ROOT %p = f32[2]{0} parameter(0)\n}\n'
    with pytest.raises(ParseError) as info:
        parse_hlo(text)
    assert info.value.line == 4
    text = 'HloModule m\n\nENTRY %e {\n  ROOT %p = f32[2]{0} parameter(0), metadata={source_file="a.py" source_line=²}\n}\n'
    mod = parse_hlo(text)
    assert mod.source_location(mod.entry.root) is None


def test_mesh_hint_with_a_unicode_size_is_ignored() -> None:
    mesh = infer_mesh([[[0, 1], [2, 3]]], 4, ["mesh['x'=²,'y'=2] {'y'}"])
    assert mesh.num_devices == 4


def test_window_fields_are_bounded() -> None:
    for window in ("{size=0}", "{size=2 stride=0}", "{size=2 rhs_dilate=0}", "{size=" + "9" * 5000 + "}", "{size=²}"):
        with pytest.raises(ParseError) as info:
            parse_window(window)
        assert len(str(info.value)) < 300
    assert parse_window("{size=3 pad=-1_-2}")["pad_low"] == (-1,)


def test_long_metadata_and_unclosed_comments_parse_in_linear_time() -> None:
    start = time.perf_counter()
    instr = parse_instruction("%x = f32[4]{0} add(%a, %b), metadata=" + "9" * 200_000)
    assert instr.metadata == {}
    with pytest.raises(ParseError):
        parse_instruction("%x = f32[4]{0} add(%a, " + "/* %b, " * 100_000 + ")")
    with pytest.raises(ParseError):
        parse_shape("(f32[1], " + "/* f32[2], " * 100_000)
    assert time.perf_counter() - start < 5.0


def test_empty_instruction_line() -> None:
    with pytest.raises(ParseError, match="empty line"):
        parse_instruction("   ")


def test_trip_counts_that_overflow_the_execution_count() -> None:
    body = "%body (t: f32[8,16]) -> f32[8,16] {\n  %t = f32[8,16]{1,0} parameter(0)\n  ROOT %n = f32[8,16]{1,0} negate(%t)\n}\n"
    cond = (
        "%cond (t: f32[8,16]) -> pred[] {\n  %t = f32[8,16]{1,0} parameter(0)\n  ROOT %c = pred[] constant(true)\n}\n"
    )
    outer = (
        "%obody (t: f32[8,16]) -> f32[8,16] {\n  %t = f32[8,16]{1,0} parameter(0)\n"
        '  ROOT %w = f32[8,16]{1,0} while(%t), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"4611686018427387904"}}\n}\n'
    )
    entry = '  ROOT %w = f32[8,16]{1,0} while(%p0), condition=%cond, body=%obody, backend_config={"known_trip_count":{"n":"4611686018427387904"}}'
    text = module(entry, extra=body + cond + outer)
    err = error(text, "negate 'n' runs 2.13e+37 times", "more than 2**63 - 1", "trip counts")
    assert err.line == line_of(text, "ROOT %n = f32[8,16]{1,0} negate(%t)")


def _chain(depth: int, kind: str) -> str:
    """Computations c0..c{depth-1}, each calling the one below twice (two calls, or both branches)."""
    comps = ["%c0 (q: f32[2]) -> f32[2] {\n  %q = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(%q)\n}\n"]
    for i in range(1, depth):
        if kind == "call":
            body = (
                f"  %a = f32[2]{{0}} call(%q), to_apply=%c{i - 1}\n  ROOT %b = f32[2]{{0}} call(%a), to_apply=%c{i - 1}"
            )
        else:
            body = f"  %p = pred[] constant(true)\n  ROOT %b = f32[2]{{0}} conditional(%p, %q, %q), true_computation=%c{i - 1}, false_computation=%c{i - 1}"
        comps.append(f"%c{i} (q: f32[2]) -> f32[2] {{\n  %q = f32[2]{{0}} parameter(0)\n{body}\n}}\n")
    return module(f"  ROOT %r = f32[8,16]{{1,0}} call(%p0), to_apply=%c{depth - 1}", extra="".join(comps))


def test_call_graph_that_doubles_at_every_level_is_counted_without_expanding_it() -> None:
    start = time.perf_counter()
    (op,) = count_module(parse_hlo(_chain(60, "call"))).ops
    assert op.name == "n" and op.executions == 2.0**59
    (op,) = count_module(parse_hlo(_chain(60, "conditional"))).ops
    assert op.name == "n" and op.executions == 1.0
    assert time.perf_counter() - start < 5.0


def test_call_cycle_and_call_nesting_deeper_than_64() -> None:
    cycle = (
        "%c (q: f32[2]) -> f32[2] {\n  %q = f32[2]{0} parameter(0)\n  ROOT %b = f32[2]{0} call(%q), to_apply=%c\n}\n"
    )
    error(module("  ROOT %r = f32[2]{0} call(%p0), to_apply=%c", extra=cycle), "computation 'c' calls itself")
    error(_chain(80, "call"), "nested deeper than 64 calls")


def test_a_computation_called_twice_is_one_row_with_both_executions() -> None:
    callee = "%c (q: f32[8,16]) -> f32[8,16] {\n  %q = f32[8,16]{1,0} parameter(0)\n  ROOT %n = f32[8,16]{1,0} negate(%q)\n}\n"
    body = "  %a = f32[8,16]{1,0} call(%p0), to_apply=%c\n  ROOT %b = f32[8,16]{1,0} call(%a), to_apply=%c"
    (op,) = count_module(parse_hlo(module(body, extra=callee))).ops
    assert (op.name, op.executions) == ("n", 2.0)


def test_reduce_window_whose_flops_overflow_a_float() -> None:
    ones = ",".join(["1"] * 40)
    window = "x".join(["4611686018427387904"] * 40)
    body = f"  %x = f32[{ones}] parameter(2)\n  %z = f32[] constant(0)\n  ROOT %r = f32[{ones}] reduce-window(%x, %z), window={{size={window}}}, to_apply=%sum"
    error(module(body), "exceed 1.8e308")


def test_bitcast_cycle_in_a_fusion_does_not_hang() -> None:
    fused = (
        "%fused (q: f32[8,16], u: f32[2,16]) -> f32[8,16] {\n  %q = f32[8,16]{1,0} parameter(0)\n  %u = f32[2,16]{1,0} parameter(1)\n"
        "  %b1 = f32[8,16]{1,0} bitcast(%b2)\n  %b2 = f32[8,16]{1,0} bitcast(%b1)\n  %i = s32[] constant(0)\n"
        "  %s = f32[2,16]{1,0} slice(%b1), slice={[0:2], [0:16]}\n"
        "  ROOT %d = f32[8,16]{1,0} dynamic-update-slice(%b1, %u, %i, %i)\n}\n"
    )
    body = "  %u = f32[2,16]{1,0} parameter(2)\n  ROOT %f = f32[8,16]{1,0} fusion(%p0, %u), kind=kLoop, calls=%fused"
    (op,) = [o for o in count_module(parse_hlo(module(body, extra=fused))).ops if o.name == "f"]
    assert op.cost.traffic.logical_bytes == (2 * 16 + 8 * 16) * 4  # q has no user: not read (as XLA counts)


def test_async_update_cycle_does_not_hang() -> None:
    body = (
        "  %u1 = f32[8,16]{1,0} all-gather-update(%u2)\n  %u2 = f32[8,16]{1,0} all-gather-update(%u1)\n"
        "  ROOT %d = f32[8,16]{1,0} all-gather-done(%u1)"
    )
    mod = parse_hlo(module(body))
    assert mod.async_pairs() == []


def test_fusions_nested_deeper_than_64() -> None:
    comps = ["%f0 (q: f32[2]) -> f32[2] {\n  %q = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(%q)\n}\n"]
    for i in range(1, 400):
        comps.append(
            f"%f{i} (q: f32[2]) -> f32[2] {{\n  %q = f32[2]{{0}} parameter(0)\n  ROOT %n = f32[2]{{0}} fusion(%q), kind=kLoop, calls=%f{i - 1}\n}}\n"
        )
    body = "  %v = f32[2]{0} parameter(2)\n  ROOT %f = f32[2]{0} fusion(%v), kind=kLoop, calls=%f399"
    error(module(body, extra="".join(comps)), "nested deeper than 64")


def test_device_groups_forms_still_expand() -> None:
    assert device_groups("[4,2]<=[2,4]T(1,0)") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert device_groups("mesh[x=2,y=2], device_ids=(3,2,1,0) {y}") == [[3, 2], [1, 0]]
    assert device_groups("maximal_mesh[device_id=3] {}") == [[3]]


# --- PyTorch ops from hostile traces ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        {"Input Dims": 5, "Input type": ["float", "float"]},
        {"Input Dims": [[4, 8], [8, 2]], "Input type": 5, "Concrete Inputs": 5},
        {"Input Dims": [[4, float("nan")], [8, 2]], "Input type": ["float", "float"]},
        {"Input Dims": [[4, float("inf")], [8, 2]], "Input type": ["float", "float"]},
        {"Input Dims": [[4, 10**400], [8, 2]], "Input type": ["float", "float"]},
        {"Input Dims": [[4, -8], [-8, 2]], "Input type": ["float", "float"]},
        {"Input Dims": [[4, "²"], [8, 2]], "Input type": ["float", "float"]},
        {"Input Dims": [[4, [8]], [8, 2]], "Input type": ["float", "float"]},
        {"Input Dims": [[4, 8], [8, 2]], "Input type": ["TensorList", "float"]},
        {"Input Dims": [[2**40, 2**40], [2**40, 2]], "Input type": ["float", "float"]},
    ],
)
def test_torch_op_with_unreadable_input_dims_is_unpriced_with_a_reason(args: dict) -> None:
    op = TorchOp.from_args("aten::mm", args)
    price = op_cost(op)
    assert op.label(price.tag)
    if price.cost is None:
        assert note_text(price.what).startswith("aten::mm")
    else:
        assert price.cost.flops >= 0


@pytest.mark.parametrize(
    "concrete",
    [
        ["", "", "", "[0]", "[0]", "[1]", "1"],  # stride 0
        ["", "", "", "[1]", "[-1]", "[1]", "1"],  # negative padding
        ["", "", "", "[1]", "[0]", "[0]", "1"],  # dilation 0
        ["", "", "", "[1]", "[0]", "[1]", "0"],  # groups 0
        ["", "", "", "[1]", "[0]", "[1]", "3"],  # groups not dividing the channels
        ["", "", "", "[1, 1]", "[0]", "[1]", "1"],  # two strides for a 1-D conv
        ["", "", "", "[²]", "[0]", "[1]", "1"],
        ["", "", "", "[" + "9" * 5000 + "]", "[0]", "[1]", "1"],
        ["", "", "", "[1]", "[99999999999999999]", "[1]", "1"],
    ],
)
def test_torch_conv_with_bad_concrete_inputs_is_unpriced_with_a_reason(concrete: list[str]) -> None:
    args = {
        "Input Dims": [[1, 2, 100], [2, 2, 3], [], [], [], [], []],
        "Input type": ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Int"],
        "Concrete Inputs": concrete,
    }
    price = op_cost(TorchOp.from_args("aten::conv1d", args))
    assert price.cost is None or price.cost.flops >= 0
    if price.cost is None:
        assert "aten::conv1d" in note_text(price.what) and len(note_text(price.what)) < 600


@pytest.mark.parametrize("nelems", [10**400, float("inf"), float("nan"), True, -5, "12", None])
def test_nccl_message_size_that_is_not_a_count(nelems: object) -> None:
    args = {"Collective name": "allreduce", "In msg nelems": nelems, "dtype": "Float"}
    comm, why = nccl_comm(args, ("x",))
    assert comm is None and "In msg nelems" in note_text(why)


# --- files, pipes and dot dimension numbers ---------------------------------------------------------------


def test_hlo_file_read_once_so_a_pipe_works(tmp_path: Path) -> None:
    import os
    import threading

    from rooftop.analysis.hlo.parse import parse_hlo_file

    fifo = tmp_path / "m.fifo"
    os.mkfifo(fifo)
    text = module("  ROOT %n = f32[8,16]{1,0} negate(%p0)")
    writer = threading.Thread(target=lambda: fifo.write_text(text), daemon=True)
    writer.start()
    assert parse_hlo_file(fifo).entry.root.name == "n"
    writer.join(5)


def test_binary_and_endless_lines_are_refused(tmp_path: Path) -> None:
    import io

    from rooftop.analysis.hlo.parse import parse_hlo_file
    from rooftop.analysis.hlo.textfile import text_lines

    path = tmp_path / "zeros.hlo"
    path.write_bytes(b"\x00" * 10_000)
    with pytest.raises(ParseError, match="binary data"):
        parse_hlo_file(path)
    with pytest.raises(ParseError, match="line longer than 50 characters") as info:
        list(text_lines(io.StringIO("x\n" + "a" * 1000), "f.hlo", chunk_chars=7, max_line_chars=50))
    assert info.value.source == "f.hlo" and info.value.line == 2


@pytest.mark.parametrize(
    "numbers",
    ["lhs_contracting_dims={5}, rhs_contracting_dims={0}", "lhs_contracting_dims={1,1}, rhs_contracting_dims={0,0}",
     "lhs_batch_dims={1}, rhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_contracting_dims={0}"],
)  # fmt: skip
def test_dot_dimension_numbers_out_of_range_or_repeated(numbers: str) -> None:
    error(module(f"  ROOT %d = f32[8,4]{{1,0}} dot(%p0, %p1), {numbers}"), "dot 'd'", "must be distinct dims")


def test_torch_lists_of_shapes_only_where_a_list_is_expected() -> None:
    args = {"Input Dims": [[4, 8], [4, 8], [[1, 2], [3]]], "Input type": ["float", "float", "GenericList"]}
    price = op_cost(TorchOp.from_args("aten::add", args))
    assert price.cost is not None and price.cost.flops == 4 * 8  # the unread GenericList does not matter
    args = {"Input Dims": [[[4, 8]], [4, 8]], "Input type": ["float", "float"]}
    price = op_cost(TorchOp.from_args("aten::add", args))
    assert price.cost is None and "a list of shapes for a tensor" in note_text(price.what)


def test_a_named_pipe_no_process_writes_to_is_an_error_not_a_wait(tmp_path: Path) -> None:
    """Was: `rooftop hlo FIFO` waited forever for a writer; a pipe with a writer is still read."""
    import os
    import subprocess
    import sys

    fifo = tmp_path / "f.hlo"
    os.mkfifo(fifo)
    cmd = [sys.executable, "-m", "rooftop.cli.main", "hlo", str(fifo), "--chip", "h100"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "f.hlo" in done.stderr


def test_a_5000_character_path_is_cut_in_the_error() -> None:
    """Found by fuzzing: the name of a file that cannot be opened came back whole (2,000 characters)."""
    name = "é" * 5000
    code, out, err = run_cli("hlo", name, "--chip", "h100", "--json")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "cannot read HLO file" in err and "(5002 characters)" in err and len(err) < 400, err
    with pytest.raises(ParseError, match=r"\(5002 characters\): line 3 is odd$"):
        raise ParseError("line 3 is odd", source=name)
