# ruff: noqa: E501  (the table of causes keeps one reproducer per entry, long lines included)
"""Causes the fuzz run found that are still open: how to recognise each one's outcome, and a minimal
reproducer for each. The CI slice (test_fuzz_slice.py) xfails when only these fail, and runs each
reproducer as an xfail (not strict) test; delete a cause here once it is fixed.

Outcomes are matched on their kind and place (exception type, rooftop file and function: line numbers
move as code changes) or, for errors without a frame, on their text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fuzz.oracle import TIME_LIMIT_S, Case, Outcome, Special

INF, NAN = float("inf"), float("nan")

#: time limit for a hang's reproducer, and the first limit the slice gives a case (a case that runs past it
#: in the frame of a known hang is that hang; any other gets the oracle's full limit): a fixed cause
#: answers in well under a second, and each known hang costs this much
REPRODUCER_TIME_LIMIT_S = 2.0


@dataclass(frozen=True)
class Cause:
    """One open cause: ``name`` (an id), ``says`` (the cause and what would fix it), the outcome ``kind``
    and ``where`` (a regex on Outcome.where) or ``text`` (a regex on Outcome.detail), and a reproducer."""

    name: str
    says: str
    kind: str
    where: str = ""
    text: str = ""
    argv: tuple[str, ...] = ()
    files: dict[str, bytes | Special | Callable[[], bytes]] = field(default_factory=dict)
    process: bool = False
    needs_shared: bool = False
    outputs: tuple[str, ...] = ()
    refuse: str = ""

    def matches(self, outcome: Outcome) -> bool:
        if outcome.kind != self.kind:
            return False
        if self.where and not re.search(self.where, outcome.where):
            return False
        return not self.text or re.search(self.text, outcome.detail) is not None

    def reproducer(self) -> Case:
        files = {k: v() if callable(v) else v for k, v in self.files.items()}
        case = Case("known", list(self.argv), files, self.outputs, self.name, self.process, refuse=self.refuse)
        return case

    @property
    def time_limit(self) -> float:
        """Seconds a reproducer may run: :data:`REPRODUCER_TIME_LIMIT_S` for a hang, else the oracle's limit."""
        return REPRODUCER_TIME_LIMIT_S if self.kind == "hang" else TIME_LIMIT_S


def at(exc: str, path: str, func: str) -> str:
    """A regex for Outcome.where: ``exc`` raised with innermost rooftop frame in ``path``'s ``func``."""
    return rf"^{re.escape(exc)} @ rooftop/{re.escape(path)}:\d+ in {re.escape(func)}(?=\s|$)"


ROOT = Path(__file__).resolve().parents[2]
HF = ROOT / "tests" / "fixtures" / "hf_configs"
CHIPS = ROOT / "src" / "rooftop" / "catalog" / "chips"
XPLANE = ROOT.parent / "shared" / "data" / "third_party_profiles" / "xplane" / "tracelens_jax08_gemm_mi300x.xplane.pb"
BIG = "1" * 5000  # past Python's 4,300-digit int() limit
SUM = "%sum (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  ROOT %r = f32[] add(%a, %b)\n}\n"


def hlo(body: str, header: str = "HloModule m, num_partitions=8") -> bytes:
    """A module: ``header``, the ``%sum`` reducer, and an ENTRY computation of ``body`` lines."""
    return f"{header}\n\n{SUM}\nENTRY %e {{\n{body}\n}}\n".encode()


def kineto(*events: dict[str, Any], **top: Any) -> bytes:
    """A Kineto JSON trace of ``events`` (top-level keys ``top``, schemaVersion by default)."""
    return json.dumps({"schemaVersion": 1, **top, "traceEvents": list(events)}).encode()


def kernel(**args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": "k", "pid": 2, "tid": 7, "ts": 10.0, "dur": 5.0,
            "args": {"device": 0, "correlation": 1, **args}}  # fmt: skip


def jax_gpu(*events: dict[str, Any]) -> bytes:
    """A JAX-layout Chrome trace: one GPU plane with a stream line holding ``events``."""
    meta = [{"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "pid": 0, "tid": 1, "name": "thread_name", "args": {"name": "Stream #1"}}]  # fmt: skip
    return json.dumps({"traceEvents": meta + [{"ph": "X", "pid": 0, "tid": 1, **e} for e in events]}).encode()


def hf(name: str, **changes: Any) -> bytes:
    doc = json.loads((HF / name).read_text())
    (doc.get("text_config") or doc).update(changes)
    return json.dumps(doc).encode()


def chip(name: str, old: str, new: str) -> bytes:
    text = (CHIPS / f"{name}.toml").read_text()
    assert old in text
    return text.replace(old, new).replace(f'name = "{name}"', 'name = "fuzzchip"').encode()


def xplane(edit: Callable[[Any], None]) -> Callable[[], bytes]:
    """The jax08 gemm XPlane from ../shared with ``edit`` applied to the first GPU kernel event's stats."""

    def build() -> bytes:
        from tests.fuzz.xspace import parse_space

        space = parse_space(XPLANE.read_bytes())
        plane = next(p for p in space.planes if p.name.startswith("/device:GPU") and any(ln.events for ln in p.lines))
        event = next(ln for ln in plane.lines if ln.events).events[0]
        edit((plane, event))
        return bytes(space.SerializeToString())

    return build


def _bytes_stat(pe: Any) -> None:
    plane, event = pe
    ids = {v.name: k for k, v in plane.stat_metadata.items()}
    event.stats.add(metadata_id=ids["hlo_op"]).bytes_value = b"\xff\xfe"


def _empty_stat(pe: Any) -> None:
    plane, event = pe
    event.stats.add(metadata_id=next(iter(plane.stat_metadata)))


def xplane_bad_utf8() -> bytes:
    """A string field (an event name) holding bytes that are not UTF-8: jaxlib logs before failing."""
    data = XPLANE.read_bytes()
    name = b"__amd_rocclr_copyBuffer.kd"
    at = data.index(name)
    return data[:at] + b"\xff" + data[at + 1 :]


PROFILE = ("profile", "{W}/t.json", "--chip", "h100")
TRAIN = ("--chip", "h100", "--chips", "8", "--batch-tokens", "1M", "--seq-len", "2048")

# fmt: off
OPEN: tuple[Cause, ...] = (
    # -- numbers: unicode digits, Python's 4,300-digit int() limit, int/float overflow -----------------------
    Cause("topology-unicode-digit", "parse_topology tests the slice count with str.isdigit() and calls int(): "
          "'²' passes one and fails the other; read it with units.parse_int", "internal",
          at("ValueError", "hardware/topology.py", "parse_topology"),
          argv=("collective", "all-gather", "--chip", "tpu-v5e", "--topology", "²*4x4", "--axes", "X", "--bytes", "1MiB")),
    Cause("topology-huge-int", "_split_shape reads topology dims with int() after a \\d+ regex: 5,000 digits raise "
          "ValueError (and \\d accepts '٤'); use units.parse_int with bounds", "internal",
          at("ValueError", "hardware/topology.py", "<genexpr>"),
          argv=("collective", "all-gather", "--chip", "tpu-v5e", "--topology", BIG, "--axes", "X", "--bytes", "1MiB")),
    Cause("mesh-huge-int", "parse_mesh_spec: int() of a 5,000-digit axis size; use units.parse_int", "internal",
          at("ValueError", "hardware/topology.py", "parse_mesh_spec"),
          argv=("shard", "A[I_X,J]", "--shape", "16,16", "--mesh", "X=" + BIG)),
    Cause("fix-unicode-digit", "parse_fix checks str.isdigit() then int(): --fix tp=² fails int()", "internal",
          at("ValueError", "plan/train/search.py", "parse_fix"),
          argv=("train", "llama-3-8b", *TRAIN, "--fix", "tp=²")),
    Cause("hlo-partitions-unicode-digit", "count.num_devices: int(value) if value.isdigit(): num_partitions=² (or "
          "5,000 digits) fails int(); read header ints with shapes.parse_int and bounds", "internal",
          at("ValueError", "analysis/hlo/count.py", "num_devices"),
          argv=("hlo", "{W}/m.hlo", "--chip", "h100"),
          files={"m.hlo": hlo("  ROOT %p = f32[4] parameter(0)", "HloModule m, num_partitions=²")}),
    Cause("hlo-int-digits", "shapes.parse_int checks ASCII digits but not their count: replica_groups={{0,9...9}} "
          "(5,000 digits) raises ValueError from int(); bound the length (units.parse_int)", "internal",
          at("ValueError", "analysis/hlo/shapes.py", "parse_int"),
          argv=("hlo", "{W}/m.hlo", "--chip", "h100"),
          files={"m.hlo": hlo("  %p = f32[8] parameter(0)\n  ROOT %a = f32[8] all-reduce(%p), replica_groups={{0,"
                              + "9" * 5000 + "}}, to_apply=%sum")}),
    Cause("hlo-size-overflow", "a shape whose element count passes 1.8e308 (f32[1e170,1e170] written out) "
          "overflows int -> float in count/shapes/cost; bound dims and element counts when parsing", "internal",
          r"^OverflowError @ rooftop/(analysis/hlo/(count|shapes)\.py|cost/op\.py):",
          argv=("hlo", "{W}/m.hlo", "--chip", "h100"),
          files={"m.hlo": hlo("  %p = f32[1" + "0" * 170 + ",1" + "0" * 170 + "] parameter(0)\n"
                              "  ROOT %x = f32[1" + "0" * 170 + ",1" + "0" * 170 + "] exponential(%p)")}),
    Cause("json-int-digits", "JsonStream catches json.JSONDecodeError only: the decoder raises plain ValueError "
          "for a 5,000-digit integer (chrome_json.py value and _batch); catch ValueError (or parse_int=bounded)",
          "internal", r"^ValueError @ rooftop/analysis/trace/chrome_json\.py:\d+ in (value|_batch)\b",
          argv=PROFILE, files={"t.json": kineto(kernel()).replace(b'"dur": 5.0', b'"dur": ' + BIG.encode())}),
    Cause("natural-key-digits", "events.natural_key: int(p) if p.isdigit(): a device named '1²' (Kineto "
          "\"device\": \"1²\") or '/device:TPU:' + 5,000 digits fails int()", "internal",
          at("ValueError", "analysis/trace/events.py", "<genexpr>"),
          argv=PROFILE, files={"t.json": kineto(kernel(device="1²"))}),
    Cause("ts-overflow", "_Mapper.event: float() of an integer ts of 1e400 (\"ts\": 1 then 400 zeros) raises "
          "OverflowError; it is caught only as TypeError/ValueError/AttributeError", "internal",
          at("OverflowError", "analysis/trace/chrome_json.py", "event"),
          argv=PROFILE, files={"t.json": kineto(kernel()).replace(b'"ts": 10.0', b'"ts": 1' + b"0" * 400)}),
    Cause("group-id-infinite", "classify._int(Infinity) raises OverflowError (\"group_id\": Infinity)", "internal",
          at("OverflowError", "analysis/trace/classify.py", "_int"),
          argv=PROFILE, files={"t.json": jax_gpu({"ts": 0, "dur": 5, "name": "k",
                                                  "args": {"hlo_op": "d", "hlo_module": "m", "group_id": INF}})}),
    Cause("chip-domain-inf", "chip file domain_sizes = [inf]: int(inf) in hardware/catalog.py _topology", "internal",
          at("OverflowError", "hardware/catalog.py", "<genexpr>"),
          argv=("collective", "all-gather", "--chip", "{W}/c.toml", "--topology", "16x8", "--axes", "X", "--bytes", "1MiB"),
          files={"c.toml": chip("h100", "domain_sizes = [8]", "domain_sizes = [inf]")}),
    Cause("hf-value-overflow", "config.json values as floats up to 1e308 (head_dim, num_attention_heads) reach "
          "int/float arithmetic (model/memory.py params, cost/op.py elements): bound every field when read",
          "internal", r"^OverflowError @ rooftop/(model/memory\.py|cost/op\.py):",
          argv=("model", "{W}/config.json"), files={"config.json": hf("qwen2.5-72b.json", head_dim=1e308)}),
    # -- HLO structure assumed ------------------------------------------------------------------------------
    Cause("select-and-scatter-operands", "count.py applied: select-and-scatter(p0) has one operand; operands are "
          "indexed without a check", "internal", at("IndexError", "analysis/hlo/count.py", "applied"),
          argv=("hlo", "{W}/m.hlo", "--chip", "h100"),
          files={"m.hlo": hlo("  %p0 = f32[4,4] parameter(0)\n  ROOT %s = f32[4,4] select-and-scatter(%p0)")}),
    Cause("conv-dim-labels", "count._conv_flops: dim_labels that do not match the operand ranks index past the "
          "shapes (IndexError); check labels against the shapes and raise ParseError", "internal",
          r"^(IndexError|ValueError) @ rooftop/analysis/hlo/count\.py:\d+ in (<listcomp>|_conv_flops)",
          argv=("hlo", "{W}/m.hlo", "--chip", "h100"),
          files={"m.hlo": hlo("  %x = f32[8,4] parameter(0)\n  %k = f32[4,4] parameter(1)\n"
                              "  ROOT %c = f32[8,4] convolution(%x, %k), window={size=3}, dim_labels=b0f_0io->b0f")}),
    Cause("te-backend-config", "count.py: int() of TransformerEngine backend_config values (input_batch = 2x)",
          "internal", at("ValueError", "analysis/hlo/count.py", "<genexpr>"),
          argv=("hlo", "{W}/m.hlo", "--chip", "h100"),
          files={"m.hlo": hlo("  %q = bf16[2,128,3,4,64] parameter(0)\n  ROOT %a = (bf16[2,128,4,64], f32[2,4,128,1]) "
                              "custom-call(%q), custom_call_target=\"te_fused_attn_forward_ffi\", backend_config={"
                              "attn_heads = 4 : i64, input_batch = 2x : i64, q_max_seqlen = 128 : i64, kv_max_seqlen = 128 "
                              ": i64, qk_head_dim = 64 : i64, v_head_dim = 64 : i64, num_gqa_groups = 4 : i64}")}),
    Cause("conv-taps-loop", "cost/op.py ConvDim.valid_taps loops once per kernel tap: an HLO window of size "
          "300000000 (or a Kineto aten::conv1d weight [1,1,1e9]) runs for minutes; use the closed form", "hang",
          r"^Hang @ rooftop/cost/op\.py:\d+ in valid_taps",
          argv=("hlo", "{W}/m.hlo", "--chip", "h100"),
          files={"m.hlo": hlo("  %x = f32[1,64,4] parameter(0)\n  %w = f32[300000000,4,4] parameter(1)\n  ROOT %c = "
                              "f32[1,64,4] convolution(%x, %w), window={size=300000000 pad=149999999_150000000}, "
                              "dim_labels=b0f_0io->b0f")}),
    # -- trace field types ----------------------------------------------------------------------------------
    Cause("device-properties-type", "_Mapper.trace iterates deviceProperties: \"deviceProperties\": 5 raises TypeError "
          "after the events are read (outside the per-event handler)", "internal",
          at("TypeError", "analysis/trace/chrome_json.py", "trace"),
          argv=PROFILE, files={"t.json": kineto(kernel(), deviceProperties=5)}),
    Cause("external-id-unhashable", "kineto.launching_ops uses args['External id'] as a dict key: [1] or {} is "
          "unhashable", "internal", at("TypeError", "analysis/torch/kineto.py", "launching_ops"),
          argv=PROFILE, files={"t.json": kineto({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                                                  "ts": 0, "dur": 50, "args": {"Input Dims": [[4, 4], [4, 4]],
                                                                               "External id": [1]}},
                                                 kernel(**{"External id": [1]}))}),
    Cause("input-dims-type", "TorchOp.from_args maps over Input Dims / Input type / Concrete Inputs whatever their "
          "type: true or 1.5 is not iterable (and _shape calls int() on a nested list)", "internal",
          r"^TypeError @ rooftop/analysis/torch/ops\.py:\d+ in (from_args|_shape)",
          argv=PROFILE, files={"t.json": kineto(
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 50,
               "args": {"Input Dims": True, "External id": 1}},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5, "dur": 4,
               "args": {"correlation": 1}}, kernel())}),
    Cause("hlo-op-type", "compare.py: hlo_op that is a number (1.5) has no .startswith/.replace", "internal",
          r"^AttributeError @ rooftop/analysis/compare\.py:",
          argv=PROFILE, files={"t.json": jax_gpu({"ts": 0, "dur": 5, "name": "k",
                                                  "args": {"hlo_op": 1.5, "hlo_module": "m"}})}),
    Cause("hlo-module-type", "profile.modules_of: hlo_module that is a number (7) has no .split", "internal",
          at("AttributeError", "analysis/profile.py", "modules_of"),
          argv=PROFILE, files={"t.json": jax_gpu({"ts": 0, "dur": 5, "name": "k",
                                                  "args": {"hlo_op": "d", "hlo_module": 7}})}),
    Cause("xplane-bytes-stat", "xplane _SpaceReader._plane: dict(ev.stats) makes jaxlib decode a bytes stat that is "
          "not UTF-8 (UnicodeDecodeError)", "internal", at("UnicodeDecodeError", "analysis/trace/xplane.py", "_plane"),
          argv=("profile", "{W}/h.xplane.pb", "--chip", "h100"), files={"h.xplane.pb": xplane(_bytes_stat)},
          needs_shared=True),
    Cause("be-pair-negative", "B/E pairs are timed as end - begin with no check: an E before its B gives negative "
          "op times and steps", "bad_output", r"^negative .*\.(measured_s|total_s|duration_s|busy_s)$",
          argv=(*PROFILE, "--json"),
          files={"t.json": kineto({"ph": "B", "cat": "kernel", "name": "k", "pid": 2, "tid": 7, "ts": 100.0,
                                   "args": {"device": 0}}, {"ph": "E", "pid": 2, "tid": 7, "ts": 50.0})}),
    Cause("be-pair-nan", "an E event whose ts is NaN is accepted: the op's measured time is NaN (null in the JSON)",
          "bad_output", r"^null ",
          argv=(*PROFILE, "--json"),
          files={"t.json": kineto({"ph": "B", "cat": "kernel", "name": "k", "pid": 2, "tid": 7, "ts": 100.0,
                                   "args": {"device": 0}}, {"ph": "E", "pid": 2, "tid": 7, "ts": NAN})}),
    # -- names rendered as markup, files written -----------------------------------------------------------
    Cause("markup-crash", "names from inputs reach rich as markup: a kernel '[/bold]', an instruction 'mul[/x]', a "
          "chip named '[/bold]' raise MarkupError (report/profile.py, hlo.py, table.py); escape them", "internal",
          r"^MarkupError @ rooftop/report/",
          argv=PROFILE, files={"t.json": kineto({**kernel(), "name": "[/bold]"})}),
    Cause("markup-rendered", "a name '[red on white blink]ALERT[/]' from an input is rendered (blinking), not "
          "shown as text; escape names in tables", "bad_output", r"^markup rendered$",
          argv=PROFILE, files={"t.json": kineto({**kernel(), "name": "[red on white blink]ALERT[/]"})}),
    Cause("plot-mode-0600", "plots are written through a temporary file with mkstemp's mode 0600; give the "
          "file the mode the umask gives (0644)", "bad_output", r"^output mode 0600$",
          argv=("roofline", "--chip", "h100", "--flops", "1e12", "--bytes", "1GiB", "--plot", "{W}/r.png"),
          outputs=("{W}/r.png",)),
    Cause("plot-temp-left", "--plot .svg: the temporary file gets matplotlib's default suffix and stays "
          "(.rooftop-plot-XXXX.png) while the plot itself is 0 bytes; make the temp name with the target's suffix",
          "stray_file", r"^(file not asked for|empty output)$", r"\.rooftop-plot-|0 bytes",
          argv=("roofline", "--chip", "h100", "--flops", "1e12", "--bytes", "1GiB", "--plot", "{W}/.svg"),
          outputs=("{W}/.svg",)),
    Cause("calibrate-tmp-link", "calibrate --out writes {out}.tmp-{pid} with open('w'): a link planted at that "
          "name is followed (the chip file lands where the link points); make the temporary file with mkstemp "
          "in the target's directory", "stray_file", r"^file not asked for$", r"^left 'planted'",
          argv=("calibrate", "--quick", "--repeats", "1", "--out", "{W}/c.toml"),
          files={"c.toml.tmp-{PID}": Special("symlink", "{W}/planted")}, outputs=("{W}/c.toml",)),
    Cause("plot-empty-ignored", "--plot '' is ignored (exit 0, nothing written); reject an empty path",
          "bad_output", r"^output missing$",
          argv=("roofline", "--chip", "h100", "--flops", "1e12", "--bytes", "1GiB", "--plot", ""), outputs=("",)),
    Cause("profile-dir-symlink", "a profile directory is read through links to files outside it; read only "
          "regular files inside the directory", "bad_output", r"link to a file outside",
          argv=("profile", "{W}/prof", "--chip", "h100"),
          files={"prof/plugins/profile/run/host.xplane.pb": Special("symlink", str(XPLANE))}, needs_shared=True,
          refuse="the profile directory's only trace is a link to a file outside it"),
    Cause("path-unreadable-name", "OSError (file name too long) and ValueError (embedded NUL) from Path.exists/"
          "stat/open escape load_chips, load_trace._load and catalog/io.read_toml_file", "internal",
          r"^(OSError|ValueError) @ rooftop/(hardware/catalog|analysis/trace/load|catalog/io)\.py:",
          argv=("profile", "{W}/" + "x" * 300 + ".json", "--chip", "h100")),
    Cause("usage-error-newline", "OneLineParser.error prints argparse's message as it is: an unrecognized "
          "argument holding a newline makes the usage error two lines; join the message's whitespace",
          "multiline", text=r"unrecognized arguments",
          argv=("roofline", "--chip", "h100", "--flops", "1e12", "--bytes", "1GiB", "\n")),
    Cause("option-value-dashes", "argparse turns --chip=-- into a list: get_chip calls .endswith on it; check "
          "that string options are strings (or reject '--' as a value)", "internal",
          at("AttributeError", "hardware/catalog.py", "get_chip"),
          argv=("roofline", "--chip=--", "--flops", "1e12", "--bytes", "1GiB")),
    # -- reads that never end -------------------------------------------------------------------------------
    Cause("fifo-read", "a FIFO (or a link to /dev/zero) given as a trace, HLO, chip or config file is read until "
          "it ends: forever; read only regular files, with a size cap", "hang",
          r"^Hang @ rooftop/(analysis/trace/(xplane|chrome_json)|analysis/hlo/parse|catalog/io|model/catalog)\.py:.*\(process\)$",
          argv=("hlo", "{W}/f.hlo", "--chip", "h100"), files={"f.hlo": Special("fifo")}, process=True),
    # -- model configs --------------------------------------------------------------------------------------
    Cause("hf-layers-loop", "num_hidden_layers of 2**63 (or 1e308) is accepted: model/config.py layer_groups/"
          "layer_window/layer_attention loop once per layer; bound it", "hang",
          r"^Hang @ rooftop/model/config\.py:\d+ in layer_",
          argv=("model", "{W}/config.json"), files={"config.json": hf("llama-3-70b.json", num_hidden_layers=2**63)}),
    Cause("gemma3-pattern-memory", "Gemma-3 sliding_window_pattern 1e12 builds a list per pattern entry "
          "(MemoryError) in model/catalog.py _gemma3_pattern; bound it by num_hidden_layers", "internal",
          at("MemoryError", "model/catalog.py", "_gemma3_pattern"),
          argv=("model", "{W}/config.json"), files={"config.json": hf("gemma-3-like.json", sliding_window_pattern=10**12)}),
    # -- jaxlib's C++ logging ------------------------------------------------------------------------------
    Cause("jaxlib-log-noise", "an XPlane stat without a value makes jaxlib log 'Unsupported stat value type: 0' "
          "on fd 2 (once per stat); keep fd 2 quiet for the whole load", "noise",
          r"^stderr: profile_data_lib\.cc:N\] Unsupported stat value type",
          argv=("profile", "{W}/h.xplane.pb", "--chip", "h100"), files={"h.xplane.pb": xplane(_empty_stat)},
          needs_shared=True),
    Cause("jaxlib-log-multiline", "an XPlane string field that is not UTF-8 makes protobuf log on fd 2 before "
          "the parse error: two lines", "multiline", r"^C\+\+ log on fd 2: wire_format_lite",
          argv=("profile", "{W}/h.xplane.pb", "--chip", "h100"), files={"h.xplane.pb": xplane_bad_utf8},
          needs_shared=True),
    # -- numbers in reports ---------------------------------------------------------------------------------
    Cause("train-negative-residue", "valid input: a parallelism breakdown's time_s is a rounding residue below "
          "0 (-1.4e-17 s data_parallel, -8.9e-16 s context_parallel); clamp exposed communication at 0 where "
          "terms are combined (plan/train)", "bad_output",
          r"^negative .*breakdown\.(data_parallel|context_parallel)\.time_s$",
          argv=("train", "llama-3-70b", "--chip", "tpu-v5p", "--topology", "4x4x4", "--batch-tokens", "4M",
                "--seq-len", "4096", "--json")),
)
# fmt: on


def cause_of(outcome: Outcome) -> Cause | None:
    """The open cause an outcome is an instance of, or None (a new cause: the slice fails)."""
    return next((c for c in OPEN if c.matches(outcome)), None)
