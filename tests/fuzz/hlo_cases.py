# ruff: noqa: E501  (HLO instruction templates are kept on one line each, as XLA prints them)
"""HLO modules for ``rooftop hlo``: the real dumps in ../shared mutated where XLA's text is read (numbers,
shapes, layouts, attributes such as window/dim_labels/replica_groups/backend_config, operand lists,
opcodes, the module header, whole lines), and small modules generated from instruction templates with
sizes from tiny to absurd."""

from __future__ import annotations

import random
import re

from tests.fuzz.cli_cases import THIRD_PARTY, VALID
from tests.fuzz.oracle import Case

HLO_NUMBERS = ("0", "-1", "1" * 5000, "9" * 20, "²", "٣", "1e170", "1" + "0" * 170, "18446744073709551616",
               "4294967297", "300000000", "99999999999", "3.5", "", "2147483648", "65536", "1000000007")  # fmt: skip
SHAPES = ("f32[1" + "0" * 170 + ",1" + "0" * 170 + "]", "f32[1e170,1e170]", "f32[]", "f32[0]", "f32[0,0]", "f32[-1]",
          "f32[?]", "f32[<=8]", "token[]", "f32[3,5]{1,0:T(0,0)}", "f32[3,5]{1,0:T(99999999999,1)}", "f32[3,5]{5,5}",
          "f32[3,5]{1,0:T(8,128)(2,1)S(9999999999)}", "f32[2,2,2,2,2,2,2,2,2,2,2,2]", "f32[4294967296,4294967296]",
          "(f32[2], (s32[], (pred[])))", "()", "f32[" + ",".join(["2"] * 200) + "]", "weird99[4]", "f1024[4]",
          "c128[8,8]", "s4[7]", "u4[3]", "f8e4m3fn[16,16]", "f8e5m2[16]", "pred[]", "s64[9223372036854775807]",
          "f32[²]", "f32[4]{0:T(²)}", "f32[4]{}", "f32[4]{0,1}", "bf16[8,128]{1,0:T(8,128)(2,1)S(-1)}")  # fmt: skip
ATTRS: dict[str, tuple[str, ...]] = {
    "window": ("{size=300000000}", "{size=3x3 stride=0x0}", "{size=0x0}", "{size=3x3 pad=-5_-5x-5_-5}",
               "{size=3 lhs_dilate=0}", "{size=3x3x3x3x3x3x3x3}", "{size=²}", "{}", "{size=1" + "0" * 400 + "}",
               "{size=3x3 rhs_dilate=999999999}", "{size=3x3 pad=0_999999999x0_0}", "{size=3x3 stride=2}",
               "{size=70000x70000 stride=1x1}", "{size=3x3 pad=1_1}"),
    "dim_labels": ("b01f_01io->b01f", "bf_io->bf", "b0f_0io->b0f", "??", "", "b01f_01io->b01f_x", "b01234567f_0io->bf",
                   "bf01_oi01->bf01", "f01b_io01->f01b", "b01f_01io", "->", "b00f_01io->b00f", "bf012_oi012->bf012"),
    "replica_groups": ("{{0,0}}", "{{0,1},{1,2}}", "{{}}", "{}", "[0,2]<=[0]", "[2,2]<=[3]",
                       "{{0," + "9" * 5000 + "}}", "{{0,1},{2}}", "[4,2]<=[2,4]T(1,1)", "[4,2]<=[2,4]T(0)",
                       "{{-1,0}}", "[1,0]<=[0]", "[999999999,999999999]<=[999999999999999999]",
                       "{{0,1,2,3,4,5,6,7}}", "[2,4]<=[8]", "[4,2]<=[2,4]T(1,0)", "{{²,1}}",
                       "mesh[x=2,y=4] {x}", "mesh[x=0] {x}", "[8]<=[8]", "{{0}}"),
    "dimensions": ("{5}", "{-1}", "{0,0}", "{}", "{99999999999999}", "{²}", "{0,1,2,3,4,5,6,7,8}"),
    "lhs_contracting_dims": ("{5}", "{-1}", "{0,0}", "{}", "{1,1}", "{99}", "{²}"),
    "rhs_contracting_dims": ("{5}", "{-1}", "{0,0}", "{}", "{1,1}", "{99}"),
    "lhs_batch_dims": ("{0}", "{5}", "{0,1,2}", "{-1}"),
    "rhs_batch_dims": ("{0}", "{5}", "{0,1,2}"),
    "feature_group_count": ("0", "-1", "3", "1" + "0" * 30, "²", "1000000"),
    "batch_group_count": ("0", "-1", "3", "1" + "0" * 30, "7"),
    "channel_id": ("-1", "²", "1" * 5000),
    "index": ("-1", "99", "²", "1" * 5000),
    "source_target_pairs": ("{{0,1},{1,0}}", "{{0,0}}", "{{0,99999999999999}}", "{}", "{{0}}", "{{-1,2}}", "{{²,1}}"),
    "slice": ("{[0:4]}", "{[4:0]}", "{[0:4:0]}", "{[0:99999999999]}", "{[-1:2]}"),
    "padding": ("0_0", "-5_-5", "0_999999999999", "1_1_1", "0_0x0_0"),
    "to_apply": ("%nonexistent", "%main", "e", ""),
    "calls": ("%nonexistent", "%main", "", "e"),
    "backend_config": ('{"known_trip_count":{"n":"1e30"}}', '{"known_trip_count":{"n":"-1"}}',
                       '{"known_trip_count":{"n":"99999999999999999999"}}', '{"known_trip_count":{"n":"²"}}',
                       '{"input_batch":"2x"}', "{attn_heads = 0 : i64, input_batch = 2x : i64}",
                       "{attn_heads = -1 : i64, q_max_seqlen = 99999999999999999 : i64}", '{"gemm_backend_config":5}',
                       '{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["99"]}}}',
                       '{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["x"]}}}',
                       '{"cudnn_conv_backend_config":{"conv_result_scale":"nan"}}', "{", '"x"', "[" * 3000 + "]" * 3000,
                       '{"fusion_backend_config":{"kind":"__triton_gemm","triton_gemm_config":{"block_m":"0"}}}'),
    "custom_call_target": ('"__cublas$gemm"', '"__cudnn$convForward"', '"te_fused_attn_forward_ffi"',
                           '"__cudnn$fmhaSoftmax"', '"[/bold]"', '""', '"' + "x" * 10000 + '"'),
    "kind": ("kLoop", "kOutput", "kCustom", "kInput", "kWeird", ""),
    "sharding": ("{devices=[8,1]<=[8]}", "{devices=[0]<=[0]}", "{devices=[2,2]<=[3]}", "{replicated}", "{maximal device=99}",
                 "{devices=[99999999999,1]<=[99999999999]}", "{{devices=[2]0,1}, {replicated}}"),
    "metadata": ('{op_name="[/bold]" source_file="[red on white blink]x[/]" source_line=-1}', "{op_name=}", "{",
                 '{op_name="' + "a" * 5000 + '"}', "{stack_frame_id=99999}"),
    "frontend_attributes": ('{_xla_stream_annotation="x"}', "{", '{k="[/bold]"}'),
    "api_version": ("API_VERSION_TYPED_FFI", "API_VERSION_BOGUS"),
    "operand_layout_constraints": ("{f32[4]{0}}", "{", "{f32[²]{0}}"),
}  # fmt: skip
OPCODES = ("dot", "convolution", "select-and-scatter", "reduce-window", "all-reduce", "all-gather", "reduce-scatter",
           "all-to-all", "collective-permute", "custom-call", "fusion", "while", "conditional", "scatter", "gather",
           "sort", "fft", "triangular-solve", "cholesky", "rng", "dynamic-slice", "dynamic-update-slice", "pad",
           "reduce", "map", "call", "send", "recv", "infeed", "outfeed", "copy-start", "copy-done",
           "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done", "async-start", "async-done",
           "collective-permute-start", "collective-permute-done", "add", "multiply", "exponential", "parameter",
           "constant", "tuple", "get-tuple-element", "bitcast", "broadcast", "transpose", "reshape", "iota",
           "ragged-all-to-all", "domain", "after-all", "partition-id", "replica-id", "bogus-op", "ROOT")  # fmt: skip
DTYPES = ("f32", "bf16", "f16", "f64", "s8", "u8", "s32", "pred", "c64", "token", "f8e4m3fn", "s4", "u4", "weird99",
          "f1024", "tuple")  # fmt: skip

_ATTR = re.compile(r"([a-z_]+)=")
_SHAPE = re.compile(r"\b[a-z][a-z0-9]*\[[^\]]*\](?:\{[^}]*\})?")
_DIGITS = re.compile(r"(?<![\w.%-])\d+")  # numbers, not the digits of a name
_OPERANDS = re.compile(r" ([a-z][a-z0-9-]*)\(([^()]*)\)")


def real_hlo_texts() -> list[tuple[str, str]]:
    """(name, text) of each HLO module in ../shared (not the list of instructions extracted from an XPlane:
    their operands are not in the file)."""
    folder = THIRD_PARTY / "hlo"
    out = []
    for path in sorted(folder.glob("*")) if folder.is_dir() else []:
        text = path.read_text()
        if text.lstrip().startswith(("HloModule", "//")):
            out.append((path.name.split(".")[0], text))
    return out


def _attr_value(line: str, start: int) -> int:
    """End of the attribute value starting at ``start`` (balanced brackets and quotes)."""
    depth, i, quote = 0, start, False
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif c in "{[(":
            depth += 1
        elif c in "}])":
            if depth == 0:
                return i
            depth -= 1
        elif c == "," and depth == 0:
            return i
        i += 1
    return i


def mutate_line(rng: random.Random, line: str) -> tuple[str, str]:
    """One mutation of one HLO line and what it was."""
    roll = rng.randrange(10)
    if roll in (0, 9) and _DIGITS.search(line):
        m = rng.choice(list(_DIGITS.finditer(line)))
        new = rng.choice(HLO_NUMBERS)
        return line[: m.start()] + new + line[m.end() :], f"number {m.group()!r} -> {new[:20]!r}"
    if roll == 1 and _SHAPE.search(line):
        m = rng.choice(list(_SHAPE.finditer(line)))
        new = rng.choice(SHAPES)
        return line[: m.start()] + new + line[m.end() :], f"shape {m.group()[:30]!r} -> {new[:30]!r}"
    if roll in (2, 3):
        attr = rng.choice(list(ATTRS))
        new = rng.choice(ATTRS[attr])
        m = re.search(rf"\b{attr}=", line)
        if m:
            end = _attr_value(line, m.end())
            return line[: m.end()] + new + line[end:], f"{attr}={new[:40]}"
        if "=" in line and "(" in line:
            return f"{line.rstrip()}, {attr}={new}", f"added {attr}={new[:40]}"
    if roll == 4 and _OPERANDS.search(line):
        m = rng.choice(list(_OPERANDS.finditer(line)))
        ops = [o for o in m.group(2).split(",") if o.strip()]
        choice = rng.randrange(5)
        if choice == 0 and ops:
            ops.pop(rng.randrange(len(ops)))
        elif choice == 1:
            ops = []
        elif choice == 2:
            ops = ops + ops
        elif choice == 3:
            ops = [*ops, " nonexistent.1"]
        else:
            ops = [" " + line.split("=")[0].strip().lstrip("%").removeprefix("ROOT ")]  # itself
        return line[: m.start(2)] + ",".join(ops) + line[m.end(2) :], f"operands of {m.group(1)} -> {len(ops)}"
    if roll == 5 and _OPERANDS.search(line):
        m = rng.choice(list(_OPERANDS.finditer(line)))
        new = rng.choice(OPCODES)
        return line[: m.start(1)] + new + line[m.end(1) :], f"opcode {m.group(1)} -> {new}"
    if roll == 6:
        for dt in rng.sample(DTYPES[:11], 3):
            if re.search(rf"\b{dt}\[", line):
                new = rng.choice(DTYPES)
                return re.sub(rf"\b{dt}\[", new + "[", line, count=1), f"dtype {dt} -> {new}"
    if roll == 8 and " = " in line and rng.random() < 0.5:  # a name the table must show as text
        name = line.split(" = ")[0]
        new = name + rng.choice(["[/x]", "[/bold]", "[red on white blink]ALERT[/]", "[bold]"])
        return line.replace(name, new, 1), f"renamed {name.strip()!r} -> {new.strip()!r}"
    if roll == 7 and line:
        at = rng.randrange(len(line) + 1)
        token = rng.choice(["{", "}", "(", ")", "[", "]", ",", "=", "%", '"', "/*", "*/", "<=", "T(", "S(", ":", "\\",
                            "\x00", "\u2028", "ü", "²", "[/bold]", "-", "ROOT ", "calls=", "{{0,1}"])  # fmt: skip
        return line[:at] + token + line[at:], f"inserted {token!r}"
    at = rng.randrange(len(line) + 1) if line else 0
    return line[:at] + line[at + rng.randint(1, 4) :], "deleted characters"


def mutate_module(rng: random.Random, text: str) -> tuple[str, list[str]]:
    """A few mutations of a module's lines (header, instruction lines, or whole lines)."""
    lines = text.split("\n")
    what: list[str] = []
    for _ in range(rng.choice([1, 1, 1, 1, 2, 3])):
        if not lines:
            break
        roll = rng.random()
        if roll < 0.75:
            candidates = [i for i, ln in enumerate(lines) if "=" in ln or ln.startswith("HloModule")]
            i = rng.choice(candidates) if candidates else rng.randrange(len(lines))
            if lines[i].startswith("HloModule") and rng.random() < 0.7:
                attr = rng.choice(["num_partitions", "replica_count"])
                lines[i] = re.sub(rf",? ?{attr}=[^,]*", "", lines[i]) + f", {attr}={rng.choice(HLO_NUMBERS)[:5000]}"
                what.append(f"line {i + 1}: header {lines[i][-40:]!r}")
                continue
            lines[i], said = mutate_line(rng, lines[i])
            what.append(f"line {i + 1}: {said}")
        elif roll < 0.85:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            if rng.random() < 0.5:
                lines.insert(j, lines[i])
                what.append(f"line {i + 1} repeated at {j + 1}")
            else:
                lines[i], lines[j] = lines[j], lines[i]
                what.append(f"lines {i + 1} and {j + 1} swapped")
        elif roll < 0.95:
            i = rng.randrange(len(lines))
            del lines[i]
            what.append(f"line {i + 1} deleted")
        else:
            cut = rng.randrange(len(lines))
            lines = lines[:cut]
            what.append(f"cut after line {cut}")
    return "\n".join(lines), what


# ----------------------------------------------------------------------------------------------------
# generated modules


def _dim(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.8:
        return str(rng.choice([1, 2, 3, 4, 8, 16, 64, 128, 1024]))
    if roll < 0.9:
        return rng.choice(["0", "4096", "65536", str(2**31), str(2**40)])
    return rng.choice(HLO_NUMBERS)


def _shape(rng: random.Random, rank: int | None = None, dtype: str | None = None) -> str:
    rank = rng.choice([0, 1, 2, 2, 3, 4]) if rank is None else rank
    dims = ",".join(_dim(rng) for _ in range(rank))
    return f"{dtype or rng.choice(DTYPES[:8])}[{dims}]"


def _groups(rng: random.Random) -> str:
    return rng.choice(["{{0,1,2,3},{4,5,6,7}}", "{{0,1},{2,3},{4,5},{6,7}}", "[2,4]<=[8]", "[4,2]<=[2,4]T(1,0)", "{}",
                       "[1,8]<=[8]", *ATTRS["replica_groups"]])  # fmt: skip


TEMPLATES = (
    "{s4} dot({a}, {b}), lhs_contracting_dims={{{c1}}}, rhs_contracting_dims={{{c0}}}",
    "{s4} dot({a}, {b}), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{1}}",
    "{s4} convolution({a}, {b}), window={{size={k}x{k} stride={st}x{st} pad={p}_{p}x{p}_{p}}}, dim_labels={labels}, feature_group_count={g}",
    "{s4} convolution({a}, {b}), window={{size={k}}}, dim_labels=b0f_0io->b0f",
    "{s} all-reduce({a}), channel_id=1, replica_groups={groups}, use_global_device_ids=true, to_apply=%sum",
    "{s} all-gather({a}), channel_id=2, replica_groups={groups}, dimensions={{0}}",
    "{s} reduce-scatter({a}), channel_id=3, replica_groups={groups}, dimensions={{0}}, to_apply=%sum",
    "{s} all-to-all({a}), channel_id=4, replica_groups={groups}, dimensions={{0}}",
    "{s} collective-permute({a}), channel_id=5, source_target_pairs={pairs}",
    "{s} reduce-window({a}, {z}), window={{size={k}x{k} stride={st}x{st}}}, to_apply=%sum",
    "{s} select-and-scatter({a}, {b}, {z}), window={{size={k}x{k} stride={st}x{st}}}, select=%ge, scatter=%sum",
    "{s} select-and-scatter({a})",
    "{s} reduce({a}, {z}), dimensions={{{c0}}}, to_apply=%sum",
    "{s} fusion({a}, {b}), kind={fkind}, calls=%fused",
    "{s} custom-call({a}, {b}), custom_call_target=\"__cublas$gemm\", backend_config={gemm}",
    "{s} custom-call({a}, {b}), custom_call_target=\"__cudnn$convForward\", window={{size={k}x{k}}}, dim_labels={labels}",
    "{s} custom-call({a}, {b}, {b}), custom_call_target=\"te_fused_attn_forward_ffi\", backend_config={{attn_heads = {g} : i64, input_batch = {ib} : i64, q_max_seqlen = {k} : i64, kv_max_seqlen = {k} : i64, qk_head_dim = {k} : i64, v_head_dim = {k} : i64, num_gqa_groups = {g} : i64}}",
    "{s} custom-call({a}), custom_call_target={target}",
    "{s} add({a}, {b})",
    "{s} exponential({a})",
    "{s} broadcast({a}), dimensions={{{c0}}}",
    "{s} transpose({a}), dimensions={{1,0}}",
    "{s} reshape({a})",
    "{s} slice({a}), slice={{[0:{k}]}}",
    "{s} dynamic-slice({a}, {z}, {z}), dynamic_slice_sizes={{{k},{k}}}",
    "{s} pad({a}, {z}), padding={p}_{p}x{p}_{p}",
    "{s} iota(), iota_dimension={c0}",
    "{s} constant({const})",
    "{s} copy({a})",
    "{s} get-tuple-element({a}), index={c0}",
    "{s} while({a}), condition=%cond, body=%body, backend_config={{\"known_trip_count\":{{\"n\":\"{trip}\"}}}}",
    "{s} sort({a}), dimensions={{0}}, to_apply=%ge",
    "{s} gather({a}, {b}), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,{k}}}",
    "{s} scatter({a}, {b}, {c}), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=%sum",
    "{s} rng-bit-generator({a}), algorithm=rng_default",
    "{s} send({a}, {z}), channel_id=9",
    "{s} {op}({a}, {b})",
)  # fmt: skip
GEMM_CONFIG = (
    '{"gemm_backend_config":{"dot_dimension_numbers":'
    '{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"]}}}'
)
HELPERS = """%sum (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %r = f32[] add(f32[] %x, f32[] %y)
}

%ge (x.1: f32[], y.1: f32[]) -> pred[] {
  %x.1 = f32[] parameter(0)
  %y.1 = f32[] parameter(1)
  ROOT %r.1 = pred[] compare(%x.1, %y.1), direction=GE
}

%fused (p.0: f32[64,64], p.1: f32[64,64]) -> f32[64,64] {
  %p.0 = f32[64,64]{1,0} parameter(0)
  %p.1 = f32[64,64]{1,0} parameter(1)
  ROOT %d.0 = f32[64,64]{1,0} dot(%p.0, %p.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%body (t: (s32[], f32[64,64])) -> (s32[], f32[64,64]) {
  %t = (s32[], f32[64,64]{1,0}) parameter(0)
  ROOT %t.2 = (s32[], f32[64,64]{1,0}) tuple(%t)
}

%cond (t.1: (s32[], f32[64,64])) -> pred[] {
  %t.1 = (s32[], f32[64,64]{1,0}) parameter(0)
  ROOT %c.1 = pred[] constant(false)
}
"""


BIG = ("1", "3", "8", "4096", "300000000", str(2**31), str(2**62), "1" + "0" * 170)


def snippet(rng: random.Random, n: int) -> list[str]:
    """A few consistent instructions (operands made by iota) with sizes from tiny to absurd: a 1-D
    convolution as wide as its kernel, a dot, a reduce-window, an elementwise op, collectives with odd
    groups, select-and-scatter, TransformerEngine attention and cuBLAS gemm custom-calls."""
    k = rng.choice(BIG)
    lo = (int(k) - 1) // 2
    hi = int(k) - 1 - lo
    m, c = rng.choice(BIG), rng.choice(("1", "64", "4096"))
    kind = rng.randrange(8)
    if kind == 0:
        return [
            f"%x{n} = f32[1,{c},4] iota(), iota_dimension=0",
            f"%w{n} = f32[{k},4,4] iota(), iota_dimension=0",
            f"%c{n} = f32[1,{c},4] convolution(%x{n}, %w{n}), window={{size={k} pad={lo}_{hi}}}, dim_labels=b0f_0io->b0f",
        ]
    if kind == 1:
        return [
            f"%a{n} = f32[{m},{k}] iota(), iota_dimension=0",
            f"%b{n} = f32[{k},{c}] iota(), iota_dimension=0",
            f"%d{n} = f32[{m},{c}] dot(%a{n}, %b{n}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
        ]
    if kind == 2:
        return [
            f"%x{n} = f32[{c}] iota(), iota_dimension=0",
            f"%z{n} = f32[] constant(0)",
            f"%r{n} = f32[{c}] reduce-window(%x{n}, %z{n}), window={{size={k} pad={lo}_{hi}}}, to_apply=%sum",
        ]
    if kind == 3:
        return [f"%x{n} = f32[{m},{m}] iota(), iota_dimension=0", f"%e{n} = f32[{m},{m}] exponential(%x{n})"]
    if kind == 4:
        op = rng.choice(["all-reduce", "all-gather", "reduce-scatter", "all-to-all"])
        extra = ", to_apply=%sum" if op in ("all-reduce", "reduce-scatter") else ", dimensions={0}"
        return [
            f"%x{n} = f32[64] iota(), iota_dimension=0",
            f"%g{n} = f32[64] {op}(%x{n}), channel_id={n + 1}, replica_groups={_groups(rng)}{extra}",
        ]
    if kind == 5:
        return [
            f"%x{n} = f32[8,8] iota(), iota_dimension=0",
            f"%s{n} = f32[4,4] iota(), iota_dimension=0",
            f"%z{n} = f32[] constant(0)",
            f"%ss{n} = f32[8,8] select-and-scatter(%x{n}, %s{n}, %z{n}), window={{size=2x2 stride=2x2}}, select=%ge, scatter=%sum",
        ]
    if kind == 6:
        batch = rng.choice(["2", "2x", "0", "-1", "99999999999999999999", "²", '"2"'])
        return [
            f"%q{n} = bf16[2,128,3,4,64] iota(), iota_dimension=0",
            f'%t{n} = (bf16[2,128,4,64], f32[2,4,128,1]) custom-call(%q{n}), custom_call_target="te_fused_attn_forward_ffi", '
            f"backend_config={{attn_heads = 4 : i64, input_batch = {batch} : i64, q_max_seqlen = {k} : i64, kv_max_seqlen = 128 : i64, "
            "qk_head_dim = 64 : i64, v_head_dim = 64 : i64, num_gqa_groups = 4 : i64}",
        ]
    return [f"%a{n} = f32[{m},{k}] iota(), iota_dimension=0", f"%b{n} = f32[{k},{c}] iota(), iota_dimension=0",
            f"%g{n} = (f32[{m},{c}], s8[0]) custom-call(%a{n}, %b{n}), custom_call_target=\"__cublas$gemm\", backend_config={rng.choice((GEMM_CONFIG, *ATTRS['backend_config'][7:10]))}"]  # fmt: skip


def generate_module(rng: random.Random) -> str:
    """A small module: parameters of random shapes, then instructions from :data:`TEMPLATES`."""
    header = f"HloModule gen, num_partitions={rng.choice(['8', '8', '1', '4', '16', *HLO_NUMBERS[:8]])}"
    params = []
    for i in range(3):
        rank = rng.choice([0, 1, 2, 2, 3, 4])
        layout = ",".join(str(d) for d in reversed(range(rank)))
        params.append(f"%p{i} = {_shape(rng, rank)}{{{layout}}} parameter({i})")
    body, names = list(params), [f"%p{i}" for i in range(3)]
    for n in range(rng.randint(1, 10)):
        if rng.random() < 0.4:
            lines = snippet(rng, n)
            body += lines
            names.append(lines[-1].split(" = ")[0])
            continue
        template = rng.choice(TEMPLATES)
        k = rng.choice(["1", "3", "3", "5", "300000000", "0", "2"])
        fields = {
            "s": _shape(rng),
            "s4": _shape(rng, rng.choice([2, 3, 4])),
            "a": rng.choice(names),
            "b": rng.choice(names),
            "c": rng.choice(names),
            "z": rng.choice(names),
            "c0": rng.choice(["0", "0", "1", "5", "-1"]),
            "c1": rng.choice(["1", "1", "0", "3"]),
            "k": k,
            "st": rng.choice(["1", "2", "0"]),
            "p": rng.choice(["0", "1", "-3"]),
            "g": rng.choice(["1", "1", "2", "32", "0", "-1"]),
            "labels": rng.choice(ATTRS["dim_labels"]),
            "groups": _groups(rng),
            "pairs": rng.choice(ATTRS["source_target_pairs"]),
            "fkind": rng.choice(ATTRS["kind"]),
            "gemm": rng.choice((*ATTRS["backend_config"][7:10], GEMM_CONFIG)),
            "ib": rng.choice(["2", "2x", "0", "-1", "99999999999999999999"]),
            "target": rng.choice(ATTRS["custom_call_target"]),
            "const": rng.choice(["0", "1e400", "nan", "{1,2}", "{ { 1, 2 }, { 3, 4 } }", "false"]),
            "trip": rng.choice(["8", "0", "-1", "1e30", "99999999999999999999", "²"]),
            "op": rng.choice(OPCODES),
        }
        name = f"%i{n}"
        body.append(f"{name} = " + template.format(**fields))
        names.append(name)
    root = rng.choice(names[3:] or names)
    body = [ln if not ln.startswith(root + " ") else "ROOT " + ln for ln in body]
    if not any(ln.startswith("ROOT ") for ln in body):
        body[-1] = "ROOT " + body[-1]
    return f"{header}\n\n{HELPERS}\nENTRY %main {{\n" + "\n".join("  " + ln for ln in body) + "\n}\n"


def hlo_case(rng: random.Random, texts: list[tuple[str, str]] | None = None) -> Case:
    """A mutated real module (when ../shared is present) or a generated one, run through ``rooftop hlo``."""
    texts = real_hlo_texts() if texts is None else texts
    if texts and rng.random() < 0.6:
        name, text = rng.choice(texts)
        text, what = mutate_module(rng, text)
        label = f"{name}: " + "; ".join(what)
    else:
        text = generate_module(rng)
        if rng.random() < 0.3:
            text, what = mutate_module(rng, text)
            label = "generated, then " + "; ".join(what)
        else:
            label = "generated"
    argv = ["hlo", "{W}/module.hlo", "--chip", rng.choice(VALID["chip"])]
    if rng.random() < 0.3:
        argv += ["--mesh", rng.choice(VALID["logical_mesh"] + ("data=3", "x=1", "data=²"))]
    if rng.random() < 0.2:
        argv += ["--topology", rng.choice(VALID["topology"])]
    if rng.random() < 0.2:
        argv += ["--top", rng.choice(["0", "1", "1000000"])]
    if rng.random() < 0.5:
        argv.append("--json")
    data = text.encode("utf-8", "surrogatepass")
    return Case("hlo", argv, {"module.hlo": data}, label=label, main_file="module.hlo", lines=text.count("\n") + 1)
