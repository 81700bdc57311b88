# ruff: noqa: E501  (trace events are kept on one line each, as the traces hold them)
"""The input surfaces added since the first fuzz targets, each written here small and mutated:

- ``capture``: a PyTorch trace of CUDA-graph replays and the engine's capture trace (``profile --capture``),
  either mutated field by field (the capture's cpu_ops, launches and their ``kernel`` names);
- ``engine``: a Kineto trace of LLM-engine custom ops (vLLM ``_C::``, ``vllm::``, SGLang ``sgl_kernel::``,
  FlashInfer, flash-attn: analysis/torch/engine_ops.py), their ``Input Dims``, ``Input type`` and
  ``Concrete Inputs`` spoiled (wrong arity, types, sizes), priced by their registered signatures;
- ``requests``: a ``serve --percentiles --request-trace FILE.jsonl`` file with lines, keys and values spoiled;
- ``diff``: ``rooftop diff A B`` with one side a mutated trace or HLO module (or a side of another kind).

Every malformed input must end in one line and exit 2 (the oracle, tests/fuzz/oracle.py)."""

from __future__ import annotations

import json
import random
from typing import Any

from tests.fuzz import hostile
from tests.fuzz.cli_cases import SMALL_HLO
from tests.fuzz.hlo_cases import generate_module
from tests.fuzz.oracle import Case
from tests.fuzz.trace_cases import Raw, jax_trace, json_value, kineto_trace, mutate_trace, serialize

BF16 = "c10::BFloat16"
T, H = 8, 512
#: engine ops as a vLLM / SGLang trace records them (name, Input Dims, Input type, Concrete Inputs)
ENGINE_OPS: tuple[tuple[str, list[Any], list[str], list[str]], ...] = (
    ("_C::rms_norm", [[T, H], [T, H], [H], []], [BF16, BF16, BF16, "double"], ["", "", "", "1e-06"]),
    ("_C::fused_add_rms_norm", [[T, H], [T, H], [H], []], [BF16, BF16, BF16, "double"], ["", "", "", "1e-06"]),
    ("_C::silu_and_mul", [[T, H], [T, 2 * H]], [BF16, BF16], ["", ""]),
    (
        "_C::rotary_embedding",
        [[T], [T, H], [T, H], [], [4096, 64], []],
        ["long int", BF16, BF16, "long int", BF16, "bool"],
        ["", "", "", "64", "", "True"],
    ),
    (
        "_C_cache_ops::reshape_and_cache_flash",
        [[T, 8, 64], [T, 8, 64], [100, 16, 8, 64], [100, 16, 8, 64], [T], [], [], []],
        [BF16] * 4 + ["long int", "", "Float", "Float"],
        [""] * 5 + ["auto", "", ""],
    ),
    (
        "vllm::unified_attention",
        [[T, 8, 64], [T, 8, 64], [T, 8, 64], [T, 8, 64], []],
        [BF16] * 4 + [""],
        ["", "", "", "", "model.layers.0.self_attn.attn"],
    ),
    ("sgl_kernel::silu_and_mul", [[T, 2 * H], [T, H]], [BF16, BF16], ["", ""]),
    ("flashinfer::rmsnorm", [[T, H], [H], [T, H], []], [BF16, BF16, BF16, "double"], ["", "", "", "1e-06"]),
    (
        "flash_attn::_flash_attn_forward",
        [[1, T, 8, 64], [1, T, 8, 64], [1, T, 8, 64], [], [], []],
        [BF16] * 3 + ["double", "double", "bool"],
        ["", "", "", "0.0", "0.125", "True"],
    ),
    ("_moe_C::topk_softmax", [[T, 8], [T, 2], [T, 2], [T, 8]], ["float", "int", "int", "float"], ["", "", "", ""]),
)
SPOILED_DIMS: tuple[Any, ...] = (
    [],
    [[]],
    [[0]],
    [[-1, 4]],
    [[10**12, 10**12]],
    [[2**63]],
    [["x"]],
    [[1.5]],
    [None],
    "x",
    None,
    [[1]] * 300,
    [[Raw("1" * 5000)]],
)
SPOILED_TYPES: tuple[Any, ...] = (
    [],
    ["x"],
    [None],
    [BF16],
    "c10::BFloat16",
    [5],
    ["Float8_e4m3fn"] * 9,
    ["[/bold]"],
    None,
)
SPOILED_CONCRETE: tuple[Any, ...] = (
    [],
    [""],
    ["nan"] * 6,
    ["1e400"] * 6,
    ["-1"] * 6,
    ["[1, 2"] * 6,
    [None] * 6,
    "x",
    ["inf"] * 6,
)


def _cpu_op(name: str, ts: float, dims: Any, types: Any, concrete: Any, corr: int) -> dict[str, Any]:
    args = {"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete, "External id": corr}
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 40.0, "args": args}


def _launch(ts: float, corr: int, kernel: str = "", name: str = "cudaLaunchKernel") -> dict[str, Any]:
    args = {"correlation": corr, "kernel": kernel} if kernel else {"correlation": corr}
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 2.0, "args": args}


def _kernel(name: str, ts: float, corr: int) -> dict[str, Any]:
    args = {"device": 0, "stream": 7, "correlation": corr}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 2, "tid": 7, "ts": ts, "dur": 20.0, "args": args}


def engine_trace(
    ops: tuple[tuple[str, list[Any], list[str], list[str]], ...] = ENGINE_OPS,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Kineto trace of two steps of engine ops, each launching one kernel."""
    top = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}]}
    events: list[dict[str, Any]] = []
    corr = 0
    for s in range(2):
        t0 = 5000.0 * s
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{s}",
                "pid": 1,
                "tid": 1,
                "ts": t0,
                "dur": 4500.0,
            }
        )
        for k, (name, dims, types, concrete) in enumerate(ops):
            corr += 1
            at = t0 + 10 + 400 * k
            events += [_cpu_op(name, at, json.loads(json.dumps(dims)), list(types), list(concrete), corr),
                       _launch(at + 5, corr), _kernel(f"engine_kernel_{k}", at + 60, corr)]  # fmt: skip
    return top, events


def _spoil_engine_op(rng: random.Random, ev: dict[str, Any]) -> str:
    """One of an engine op's signature fields spoiled: its dims (a tensor's, or the whole list), types or
    concrete inputs, or a field dropped."""
    args = ev["args"]
    roll = rng.randrange(5)
    if roll == 0 and args["Input Dims"]:
        i = rng.randrange(len(args["Input Dims"]))
        args["Input Dims"][i] = rng.choice(
            [[0], [-1], [10**12, 10**12], [2**63], [1.5], ["x"], None, [], [1] * 40, [Raw("9" * 5000)]]
        )
        return f"{ev['name']} Input Dims[{i}] = {args['Input Dims'][i]!r:.40}"
    key, values = rng.choice(
        [("Input Dims", SPOILED_DIMS), ("Input type", SPOILED_TYPES), ("Concrete Inputs", SPOILED_CONCRETE)]
    )
    if roll == 4:
        args.pop(key, None)
        return f"{ev['name']}: {key} dropped"
    args[key] = rng.choice(values)
    return f"{ev['name']} {key} = {args[key]!r:.40}"


def engine_case(rng: random.Random) -> Case:
    """A trace of engine custom ops with some signatures spoiled (or a name moved to another family)."""
    ops = tuple(rng.sample(ENGINE_OPS, rng.randint(1, len(ENGINE_OPS))))
    top, events = engine_trace(ops)
    what = []
    cpu = [e for e in events if e.get("cat") == "cpu_op"]
    for _ in range(rng.choice([1, 1, 2, 3])):
        ev = rng.choice(cpu)
        if rng.random() < 0.15:  # an unknown op of a known family word, or a name of another op's signature
            ev["name"] = rng.choice(["myengine::fused_add_rms_norm", "x::silu_and_mul", "vllm::unified_attention",
                                     "sgl_kernel::" + hostile.text(rng), "_C::rms_norm", "::", "_C::"])  # fmt: skip
            what.append(f"renamed {ev['name']!r:.40}")
        else:
            what.append(_spoil_engine_op(rng, ev))
    if rng.random() < 0.2:
        what += mutate_trace(rng, top, events)
    case = Case("engine", ["profile", "{W}/engine.json", "--chip", rng.choice(["h100", "mi300x", "a100"])],
                {"engine.json": serialize(top, events)}, label="; ".join(what), main_file="engine.json")  # fmt: skip
    if rng.random() < 0.5:
        case.argv.append("--json")
    return case


# ----------------------------------------------------------------------------------------------------
# capture traces


def capture_pair() -> tuple[tuple[dict[str, Any], list[dict[str, Any]]], tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(profile, capture): two graph launches replaying two kernels, and the capture that launched them
    (one kernel name launched by two ops, as the engines' graphs do)."""
    norm, act = ENGINE_OPS[0], ENGINE_OPS[2]
    capture = [
        _cpu_op(norm[0], 10.0, norm[1], norm[2], norm[3], 1), _launch(15.0, 1, "generic_kernel"),
        _cpu_op(act[0], 60.0, act[1], act[2], act[3], 2), _launch(65.0, 2, "generic_kernel"),
        _cpu_op("aten::fill_", 110.0, [[4], []], ["int", "Scalar"], ["", "0"], 3), _launch(111.0, 3, "fill_kernel"),
    ]  # fmt: skip
    replay: list[dict[str, Any]] = []
    for n in range(2):
        t0 = 1000.0 * n
        replay += [_launch(t0, 100 + n, name="cudaGraphLaunch"), _kernel("generic_kernel", t0 + 10, 100 + n),
                   _kernel("generic_kernel", t0 + 40, 100 + n), _kernel("fill_kernel", t0 + 70, 100 + n)]  # fmt: skip
    return ({"schemaVersion": 1}, replay), ({"schemaVersion": 1}, capture)


def capture_case(rng: random.Random) -> Case:
    """``profile --capture`` with the capture trace (mostly) or the replayed profile mutated, the capture given
    as a file, a folder of them, or left beside the profile for rooftop to find."""
    (ptop, profile), (ctop, capture) = json.loads(json.dumps(capture_pair()))
    what = []
    if rng.random() < 0.8:
        for _ in range(rng.choice([1, 1, 2])):
            ev = rng.choice(capture)
            if ev.get("cat") == "cpu_op" and rng.random() < 0.5:
                what.append("capture " + _spoil_engine_op(rng, ev))
            elif ev.get("cat") == "cuda_runtime" and isinstance(ev.get("args"), dict) and rng.random() < 0.6:
                ev["args"]["kernel"] = rng.choice([json_value(rng), "fill_kernel", "generic_kernel", ""])
                what.append(f"capture launch kernel = {ev['args']['kernel']!r:.40}")
            else:
                what += ["capture " + w for w in mutate_trace(rng, ctop, capture)]
    else:
        what += ["profile " + w for w in mutate_trace(rng, ptop, profile)]
    files = {"profile.json": serialize(ptop, profile)}
    data = (
        serialize(ctop, capture)
        if rng.random() < 0.9
        else rng.choice([b"", b"{", b"[]", b'{"traceEvents": 5}', b"\xff\xfe"])
    )
    roll = rng.random()
    argv = ["profile", "{W}/profile.json", "--chip", "h100"]
    if roll < 0.5:
        files["capture.json"] = data
        argv += ["--capture", "{W}/capture.json"]
    elif roll < 0.75:
        files["caps/graph_capture_rank_0.json"] = data
        argv += ["--capture", "{W}/caps"]
    else:  # found beside the profile
        files["capture_traces/graph_capture_rank_0.json"] = data
    if rng.random() < 0.5:
        argv.append("--json")
    return Case("capture", argv, files, label="; ".join(what), main_file="profile.json")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------------
# request traces

REQUEST_VALUES: tuple[Any, ...] = (0, -1, 1.5, 10**9, 2**63, "128", None, True, [], {}, float("nan"), "", "²", 1e308)


def request_case(rng: random.Random) -> Case:
    """``serve --percentiles --request-trace`` with a JSONL file of requests, some lines or values spoiled."""
    rows: list[Any] = [
        {"input_len": rng.randint(16, 2048), "output_len": rng.randint(1, 512)} for _ in range(rng.randint(1, 30))
    ]
    what = []
    lines: list[str] = []
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        i = rng.randrange(len(rows))
        roll = rng.randrange(5) if isinstance(rows[i], dict) else 4
        if roll == 0:
            rows[i][rng.choice(["input_len", "output_len"])] = rng.choice(REQUEST_VALUES)
        elif roll == 1:
            rows[i].pop(rng.choice(["input_len", "output_len"]), None)
        elif roll == 2:
            rows[i] = rng.choice([[1, 2], 5, "x", None, {"prompt": "hi"}])
        elif roll == 3:
            rows[i][hostile.text(rng)[:20]] = json_value(rng)
        else:
            rows[i] = Raw(
                rng.choice(
                    [
                        "{",
                        "{'input_len': 1}",
                        '{"input_len": 1e400, "output_len": 1}',
                        "\x00",
                        '{"input_len": ' + "9" * 5000 + ', "output_len": 1}',
                        "[/bold]",
                    ]
                )
            )
        what.append(f"line {i + 1}: {rows[i].text if isinstance(rows[i], Raw) else rows[i]!r:.40}")
    for row in rows:
        lines.append(row.text if isinstance(row, Raw) else json.dumps(row, default=lambda v: None))
    if rng.random() < 0.1:
        lines = rng.choice([[], [""], ["   "]])
        what.append("no requests")
    text = "\n".join(lines).encode("utf-8", "surrogatepass")
    if rng.random() < 0.05:
        text = b"\xff\xfe" + text
        what.append("not UTF-8")
    argv = ["serve", "llama-3-8b", "--chip", "h100", "--chips", rng.choice(["1", "8"]), "--requests-per-s", rng.choice(["2", "20"]),
            "--percentiles", "--requests", rng.choice(["100", "100", "1000"]), "--request-trace", "{W}/requests.jsonl"]  # fmt: skip
    if rng.random() < 0.5:
        argv += ["--prompt-len", "512", "--gen-len", "128"]
    if rng.random() < 0.5:
        argv.append("--json")
    return Case(
        "requests", argv, {"requests.jsonl": text}, label="; ".join(what) or "valid", main_file="requests.jsonl"
    )


# ----------------------------------------------------------------------------------------------------
# rooftop diff


def _diff_side(rng: random.Random, kind: str) -> tuple[str, bytes, list[str]]:
    """(file name, bytes, what was done) of one side of a diff of ``kind`` (trace or hlo)."""
    if kind == "hlo":
        if rng.random() < 0.5:
            return "m.hlo", SMALL_HLO, []
        return "m.hlo", generate_module(rng).encode("utf-8", "surrogatepass"), ["generated module"]
    top, events = rng.choice([jax_trace, kineto_trace])()
    return "t.json", serialize(top, events), []


def diff_case(rng: random.Random) -> Case:
    """``rooftop diff A B``: two traces or two HLO modules, one side mutated (or of the other kind, missing,
    empty)."""
    kind = rng.choice(["trace", "hlo"])
    name, a, _ = _diff_side(rng, kind)
    _, b, what = _diff_side(rng, kind)
    roll = rng.random()
    if roll < 0.55 and kind == "trace":
        doc = json.loads(b)
        events = doc.pop("traceEvents")
        what += mutate_trace(rng, doc, events)
        b = serialize(doc, events)
    elif roll < 0.55:
        lines = b.decode("utf-8", "surrogatepass").split("\n")
        i = rng.randrange(len(lines))
        lines[i] = rng.choice(["", lines[i][: len(lines[i]) // 2], lines[i] + " " + hostile.text(rng), "}"])
        what.append(f"line {i + 1} spoiled")
        b = "\n".join(lines).encode("utf-8", "surrogatepass")
    elif roll < 0.7:
        other = "hlo" if kind == "trace" else "trace"
        _, b, _ = _diff_side(rng, other)
        what.append(f"B is a {other}")
    elif roll < 0.8:
        b = rng.choice([b"", b"\x00" * 10, b"\xff\xfe", b"{}", b"[]", b"HloModule"])
        what.append(f"B = {b!r:.30}")
    ext = name.rsplit(".", 1)[1]
    files = {f"a.{ext}": a, f"b.{ext}": b}
    argv = ["diff", f"{{W}}/a.{ext}", f"{{W}}/b.{ext}", "--chip", "h100"]
    if rng.random() < 0.1:
        argv[2] = "{W}/missing." + ext
        what.append("B missing")
    if rng.random() < 0.5:
        argv.append("--json")
    return Case("diff", argv, files, label=f"{kind}: " + "; ".join(what), main_file=f"b.{ext}")  # type: ignore[arg-type]
