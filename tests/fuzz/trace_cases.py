# ruff: noqa: E501  (trace events are kept on one line each, as the traces hold them)
"""Profiles for ``rooftop profile``: the real Kineto JSON traces in ../shared (a window of their events) and
small JAX-layout and Kineto traces written here, mutated field by field (values of the wrong type,
huge, negative, NaN, unicode digits, markup, B/E pairs out of order, broken structure), and the real
XPlane protobufs mutated through their schema (stat values of every type, names, times, HloProto bytes)
or byte by byte."""

from __future__ import annotations

import gzip
import json
import random
from functools import cache
from typing import Any

from tests.fuzz import hostile
from tests.fuzz.cli_cases import SMALL_HLO, THIRD_PARTY, VALID
from tests.fuzz.oracle import MARKUP, Case


class Raw:
    """A JSON value written as raw text (numbers json.dumps cannot write: 5,000 digits, 1e400)."""

    def __init__(self, text: str) -> None:
        self.text = text


INF = float("inf")
JSON_VALUES: tuple[Any, ...] = (
    None, True, False, "", "²", "1²", "٣", "[/bold]", "[red on white blink]ALERT[/]", -1, 0, 1, 1e308, -1e308, INF,
    -INF, float("nan"), Raw("1" * 5000), Raw("1" + "0" * 400), Raw("-" + "9" * 5000), Raw("1e400"), Raw("-0"),
    Raw("[" * 5000 + "]" * 5000), [1], [], {}, {"a": 1}, [[[]]], 1.5, "2x", "-5", 2**63, -(2**63), 2**64,
    "ProfilerStep#" + "9" * 5000, "ProfilerStep#²", "x" * 100000, "\u0000", "\ud800", "é", 1e-320, "1e9", "nan",
)  # fmt: skip
EVENT_KEYS = ("ph", "ts", "dur", "name", "pid", "tid", "cat", "args", "id", "s")
ARG_KEYS = ("External id", "correlation", "device", "stream", "Input Dims", "Input type", "Concrete Inputs",
            "Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype", "Process Group Ranks",
            "hlo_op", "hlo_module", "program_id", "group_id", "step_num", "device_ordinal", "run_id",
            "correlation_id", "long_name", "kernel_details", "Total Allocated", "Device Id", "Device Type", "Bytes",
            "name", "memcpy_details", "device_duration_ps", "Input Strides")  # fmt: skip


def json_value(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.7:
        return rng.choice(JSON_VALUES)
    if roll < 0.85:
        return hostile.number(rng)
    return rng.choice([-1, 1]) * rng.randint(0, 10 ** rng.randint(1, 30))


# ----------------------------------------------------------------------------------------------------
# sources


@cache
def real_json_traces() -> tuple[tuple[str, dict[str, Any], tuple[dict[str, Any], ...]], ...]:
    """(name, top-level keys, events) of each JSON trace in ../shared."""
    folder = THIRD_PARTY / "chrome_trace"
    out = []
    for path in sorted(folder.glob("*.json.gz")) if folder.is_dir() else []:
        doc = json.loads(gzip.decompress(path.read_bytes()))
        events = doc.pop("traceEvents") if isinstance(doc, dict) else doc
        out.append((path.name.split(".")[0], doc if isinstance(doc, dict) else {}, tuple(events)))
    return tuple(out)


# fmt: off
def jax_trace() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A small JAX-layout Chrome trace: 2 GPUs with Steps, XLA Modules and stream lines, a TPU-style
    XLA Ops line, host CPU ops; the ops are those of :data:`SMALL_HLO` (module ``m``)."""
    events: list[dict[str, Any]] = []
    for d in range(2):
        events.append({"ph": "M", "pid": d, "name": "process_name", "args": {"name": f"/device:GPU:{d}"}})
        for tid, name in ((1, "Steps"), (2, "XLA Modules"), (3, "Stream #1(Kernel)"), (4, "XLA Ops")):
            events.append({"ph": "M", "pid": d, "tid": tid, "name": "thread_name", "args": {"name": name}})
    events.append({"ph": "M", "pid": 9, "name": "process_name", "args": {"name": "/host:CPU"}})
    for s in range(2):
        for d in range(2):
            t0 = 1000.0 * s + d
            events.append({"ph": "X", "pid": d, "tid": 1, "ts": t0, "dur": 900.0, "name": str(s)})
            events.append({"ph": "X", "pid": d, "tid": 2, "ts": t0, "dur": 800.0, "name": "m(7)", "args": {"program_id": 7}})
            for k, op in enumerate(("d", "ar")):
                args = {"hlo_op": op, "hlo_module": "m", "program_id": 7, "correlation_id": 100 * s + 10 * d + k}
                events.append({"ph": "X", "pid": d, "tid": 3, "ts": t0 + 10 + 300 * k, "dur": 250.0, "name": f"k_{op}", "args": args})
                events.append({"ph": "X", "pid": d, "tid": 4, "ts": t0 + 10 + 300 * k, "dur": 250.0, "name": op,
                               "args": {"long_name": f"%{op} = f32[64,64] ...", "program_id": 7}})
            events.append({"ph": "X", "pid": 9, "tid": 1, "ts": t0 + 5, "dur": 3.0, "name": "launch",
                           "args": {"hlo_op": "d", "hlo_module": "m", "correlation_id": 100 * s + 10 * d}})
    return {"displayTimeUnit": "ns"}, events


def kineto_trace() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A small Kineto trace: aten ops with shapes (matmul, conv, attention, norm, vector), their launches
    and kernels, NCCL kernels with args, ProfilerStep markers and memory samples."""
    top = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],
           "distributedInfo": {"rank": 0, "world_size": 8}}  # fmt: skip
    ops = [
        ("aten::mm", [[64, 128], [128, 256]], ["float", "float"]),
        ("aten::addmm", [[256], [64, 128], [128, 256]], ["float", "float", "float"]),
        ("aten::linear", [[8, 64], [32, 64], [32]], ["c10::BFloat16"] * 3),
        ("aten::conv1d", [[1, 4, 64], [8, 4, 3], [8], [], [], [], []], ["float"] * 3 + ["ScalarList"] * 3 + ["Int"]),
        ("aten::conv2d", [[2, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], []], ["float"] * 3 + ["ScalarList"] * 3 + ["Int"]),
        ("aten::_scaled_dot_product_flash_attention", [[2, 8, 128, 64]] * 3 + [[], [], []], ["c10::BFloat16"] * 6),
        ("aten::native_layer_norm", [[8, 64], [], [64], [64], []], ["float"] * 5),
        ("aten::add", [[8, 64], [8, 64], []], ["float", "float", "Scalar"]),
        ("aten::sum", [[8, 64], [], [], []], ["float"] * 4),
    ]
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "python"}},
        {"ph": "M", "pid": 2, "tid": 7, "name": "thread_name", "args": {"name": "stream 7"}},
    ]
    corr = 0
    for s in range(2):
        t0 = 10000.0 * s
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t0, "dur": 9000.0})
        for k, (name, dims, types) in enumerate(ops):
            corr += 1
            at = t0 + 10 + 500 * k
            args = {"Input Dims": dims, "Input type": types, "External id": corr}
            if "conv" in name:  # stride, padding, dilation, groups
                args["Concrete Inputs"] = ["", "", "", "[1]", "[1]", "[1]", "1"]
            events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": at, "dur": 50.0, "args": args})
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": at + 5, "dur": 4.0, "args": {"correlation": corr, "External id": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": f"kernel_{k}", "pid": 2, "tid": 7, "ts": at + 60,
                           "dur": 30.0, "args": {"device": 0, "stream": 7, "correlation": corr, "External id": corr}})
        corr += 1
        events.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 2, "tid": 7,
                       "ts": t0 + 6000, "dur": 400.0, "args": {"device": 0, "correlation": corr, "Collective name": "allreduce",
                       "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20, "dtype": "Float", "Group size": 8,
                       "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"}})
        events.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": t0 + 7000, "s": "t",
                       "args": {"Device Type": 1, "Device Id": 0, "Total Allocated": 1 << 30, "Bytes": 4096}})
    return top, events
# fmt: on


# ----------------------------------------------------------------------------------------------------
# mutations of a JSON trace


def _mutate_event(rng: random.Random, ev: dict[str, Any]) -> str:
    roll = rng.randrange(8)
    args = ev.get("args") if isinstance(ev.get("args"), dict) else None
    if roll <= 2 and args is not None:
        key = rng.choice(list(args) + list(ARG_KEYS)) if rng.random() < 0.7 or not args else rng.choice(list(args))
        args[key] = json_value(rng)
        return f"args[{key!r}] = {_said(args[key])}"
    if roll == 3 and args is not None and isinstance(args.get("Input Dims"), list) and args["Input Dims"]:
        dims = args["Input Dims"]
        i = rng.randrange(len(dims))
        if isinstance(dims[i], list) and dims[i]:
            j = rng.randrange(len(dims[i]))
            dims[i][j] = rng.choice([0, -1, 10**9, 10**30, 2**63, 1.5, None, "x", [1], Raw("1" * 5000), 300000000])
            return f"Input Dims[{i}][{j}] = {_said(dims[i][j])}"
        dims[i] = rng.choice([[], [0], [10**9] * 3, [1] * 200, "x", None, [[1]]])
        return f"Input Dims[{i}] = {_said(dims[i])}"
    if roll == 4:
        key = rng.choice(EVENT_KEYS)
        if rng.random() < 0.3:
            ev.pop(key, None)
            return f"deleted {key!r}"
        ev[key] = json_value(rng)
        return f"{key} = {_said(ev[key])}"
    if roll == 5:
        ev["name"] = rng.choice(
            ["ProfilerStep#" + hostile.number(rng), hostile.text(rng), "[/bold]", MARKUP, "aten::conv1d"]
        )
        return f"name = {_said(ev['name'])}"
    if roll == 6:
        for key in ("ts", "dur"):
            if key in ev:
                ev[key] = rng.choice([-1.0, -1e9, 0.0, 1e308, INF, float("nan"), Raw("1" + "0" * 400), 2**63])
                return f"{key} = {_said(ev[key])}"
    ev["ph"] = rng.choice(["B", "E", "i", "M", "Z", "", None, "X", "s", "f", "b", "e", "C"])
    return f"ph = {ev['ph']!r}"


def _said(value: Any) -> str:
    text = value.text if isinstance(value, Raw) else repr(value)
    return text if len(text) < 40 else f"{text[:20]}...({len(text)} chars)"


def mutate_trace(rng: random.Random, top: dict[str, Any], events: list[dict[str, Any]]) -> list[str]:
    """A few field-level mutations of ``events`` (and the top-level keys), in place; what was done."""
    what: list[str] = []
    for _ in range(rng.choice([1, 1, 2, 3, 4])):
        roll = rng.random()
        if roll < 0.6 and events:
            i = rng.randrange(len(events))
            if not isinstance(events[i], dict):
                events[i] = {}
            what.append(f"event {i}: {_mutate_event(rng, events[i])}")
        elif roll < 0.7 and events:  # a complete event as a B/E pair, possibly ending before it begins
            i = rng.randrange(len(events))
            ev = events[i]
            if isinstance(ev, dict) and ev.get("ph") == "X":
                begin = {**ev, "ph": "B"}
                begin.pop("dur", None)
                end_ts = rng.choice([-1.0, float("nan"), 0.0, INF, (ev.get("ts") or 0) + 1])
                end = {"ph": "E", "pid": ev.get("pid"), "tid": ev.get("tid"), "ts": end_ts}
                events[i : i + 1] = rng.choice([[begin, end], [end, begin], [begin], [end], [begin, begin, end]])
                what.append(f"event {i} as B/E with the end at {end_ts}")
        elif roll < 0.8:
            key = rng.choice(["deviceProperties", "distributedInfo", "schemaVersion", "traceName", "displayTimeUnit"])
            top[key] = rng.choice([json_value(rng), [json_value(rng)], [{"id": json_value(rng)}],
                                   {"world_size": json_value(rng), "rank": json_value(rng)}])  # fmt: skip
            what.append(f"top {key} = {_said(top[key])}")
        elif roll < 0.9 and events:
            i = rng.randrange(len(events))
            n = rng.choice([2, 10, 1000])
            events[i:i] = [events[i]] * n
            what.append(f"event {i} repeated {n} times")
        elif events:
            i = rng.randrange(len(events))
            ev = events[i]
            if isinstance(ev, dict) and ev.get("ph") == "M":
                ev.setdefault("args", {})
                name = rng.choice(["/device:GPU:²", "/device:GPU:" + "9" * 5000, "/device:TPU:0", "/host:metadata",
                                   "/device:CUSTOM:x", hostile.text(rng), "Steps", "XLA Ops", None, 5])  # fmt: skip
                if isinstance(ev["args"], dict):
                    ev["args"]["name"] = name
                what.append(f"event {i}: metadata name = {_said(name)}")
            else:
                del events[i]
                what.append(f"event {i} deleted")
    return what


def serialize(top: dict[str, Any], events: list[Any]) -> bytes:
    """One top-level key and one event per line (each line can be deleted and the rest stays JSON)."""
    raws: list[str] = []

    def encode(value: Any) -> str:
        def default(obj: Any) -> Any:
            if isinstance(obj, Raw):
                raws.append(obj.text)
                return f"\x00RAW{len(raws) - 1}\x00"
            raise TypeError(type(obj).__name__)

        text = json.dumps(value, default=default)
        for k, raw in enumerate(raws):
            text = text.replace(json.dumps(f"\x00RAW{k}\x00"), raw)
        raws.clear()
        return text

    lines = ["{"] + [f"{json.dumps(k)}: {encode(v)}," for k, v in top.items()] + ['"traceEvents": [']
    lines += [encode(ev) + "," for ev in events]
    lines.append("{}]}")
    return "\n".join(lines).encode("utf-8", "surrogatepass")


def json_trace_case(rng: random.Random) -> Case:
    """A window of a real (or small written) trace, mutated, as .json or .json.gz."""
    sources = [(name, top, list(events)) for name, top, events in real_json_traces()]
    sources += [("jax", *jax_trace()), ("kineto", *kineto_trace())]
    weights = [1.0] * (len(sources) - 2) + [1.5, 1.5]
    name, top, events = rng.choices(sources, weights)[0]
    top = json.loads(json.dumps(top))
    if len(events) > 400:
        meta = [e for e in events if isinstance(e, dict) and e.get("ph") == "M"]
        start = rng.randrange(len(events) - 300)
        events = meta + events[start : start + rng.choice([50, 150, 300])]
    events = json.loads(json.dumps(events))
    what = mutate_trace(rng, top, events) if rng.random() < 0.95 else ["unchanged"]
    data = serialize(top, events)
    fname = rng.choice(["trace.json", "trace.json.gz", "host.trace.json.gz", "x.pt.trace.json"])
    case = Case("trace", ["profile", "{W}/" + fname, "--chip", rng.choice(VALID["chip"])], label=f"{name}: ")
    compress = fname.endswith(".gz")
    if rng.random() < 0.08:  # broken below the JSON: cut, or corrupt compressed bytes
        if compress:
            broken = bytearray(gzip.compress(data, mtime=0))
            for _ in range(rng.randint(1, 4)):
                broken[rng.randrange(10, len(broken))] = rng.randrange(256)
            data, compress = bytes(broken), False
            what.append("gzip bytes corrupted")
        else:
            data = data[: rng.randrange(len(data))]
            what.append("cut")
    case.files[fname] = data
    case.compress = (fname,) if compress else ()
    case.main_file = fname
    case.label += "; ".join(what)
    if name == "jax" and rng.random() < 0.6:
        case.files["m.hlo"] = SMALL_HLO
        case.argv += ["--hlo", "{W}/m.hlo"]
    _options(rng, case)
    return case


def _options(rng: random.Random, case: Case) -> None:
    if rng.random() < 0.2:
        case.argv += ["--topology", rng.choice(VALID["topology"])]
    if rng.random() < 0.15:
        case.argv += ["--mesh", rng.choice(VALID["logical_mesh"])]
    if rng.random() < 0.15:
        case.argv += ["--top", rng.choice(["0", "1", "1000000"])]
    if rng.random() < 0.5:
        case.argv.append("--json")


# ----------------------------------------------------------------------------------------------------
# XPlane


def real_xplanes() -> list[tuple[str, bytes]]:
    folder = THIRD_PARTY / "xplane"
    return (
        [(p.name.split(".")[0], p.read_bytes()) for p in sorted(folder.glob("*.xplane.pb"))] if folder.is_dir() else []
    )


STAT_NAMES = ("hlo_op", "hlo_module", "program_id", "group_id", "step_num", "correlation_id", "device_duration_ps",
              "kernel_details", "long_name", "device_ordinal", "run_id", "memcpy_details", "Hlo Proto", "name",
              "tf_op", "flops", "bytes_accessed")  # fmt: skip


def _set_stat(rng: random.Random, stat: Any) -> str:
    roll = rng.randrange(7)
    if roll == 0:
        stat.double_value = rng.choice([INF, -INF, float("nan"), -1.0, 1e308, 0.5, 5e-324])
        return f"double {stat.double_value}"
    if roll == 1:
        stat.int64_value = rng.choice([-(2**63), 2**63 - 1, -1, 0])
        return f"int64 {stat.int64_value}"
    if roll == 2:
        stat.uint64_value = rng.choice([2**64 - 1, 0, 2**63])
        return f"uint64 {stat.uint64_value}"
    if roll == 3:
        stat.str_value = rng.choice(["²", "1" * 5000, "[/bold]", "[red on white blink]ALERT[/]", "", "jit_f(²)",
                                     "jit_f(" + "9" * 30 + ")", hostile.text(rng), "1²", "nan"])  # fmt: skip
        return f"str {_said(stat.str_value)}"
    if roll == 4:
        stat.bytes_value = rng.choice(
            [b"\xff\xfe\xfd", b"", b"\x00" * 10, bytes(rng.randrange(256) for _ in range(50))]
        )
        return f"bytes {_said(stat.bytes_value)}"
    if roll == 5:
        stat.ref_value = rng.choice([0, 2**64 - 1, 999999])
        return f"ref {stat.ref_value}"
    value = stat.metadata_id
    stat.Clear()  # a stat without a value
    stat.metadata_id = value
    return "no value"


def mutate_space(rng: random.Random, space: Any) -> list[str]:
    """A few schema-level mutations of an XSpace, in place; what was done."""
    what: list[str] = []
    planes = list(space.planes)
    for _ in range(rng.choice([1, 1, 2, 3])):
        plane = rng.choice(planes)
        lines = [ln for ln in plane.lines if ln.events]
        roll = rng.randrange(10)
        if roll <= 2 and lines:
            line = rng.choice(lines)
            event = rng.choice(line.events)
            stats = list(event.stats)
            stat = (
                rng.choice(stats)
                if stats and rng.random() < 0.8
                else event.stats.add(metadata_id=rng.choice(list(plane.stat_metadata) or [1]))
            )
            name = plane.stat_metadata[stat.metadata_id].name if stat.metadata_id in plane.stat_metadata else "?"
            what.append(f"{plane.name} {line.name}: stat {name} = {_set_stat(rng, stat)}")
        elif roll == 3 and plane.event_metadata:
            key = rng.choice(list(plane.event_metadata))
            meta = plane.event_metadata[key]
            if meta.stats and rng.random() < 0.5:
                what.append(f"{plane.name}: event metadata stat = {_set_stat(rng, rng.choice(list(meta.stats)))}")
            else:
                meta.name = rng.choice(["²", "[/bold]", MARKUP, "ProfilerStep#" + "9" * 5000, "jit_f(²)", "1" * 5000,
                                        "jit_f(99999999999999999999)", hostile.text(rng), "", "0", "ProfilerStep#1²"])  # fmt: skip
                what.append(f"{plane.name}: event name = {_said(meta.name)}")
        elif roll == 4 and plane.stat_metadata:
            key = rng.choice(list(plane.stat_metadata))
            plane.stat_metadata[key].name = rng.choice(STAT_NAMES)
            what.append(f"{plane.name}: stat metadata {key} renamed {plane.stat_metadata[key].name}")
        elif roll == 5 and lines:
            event = rng.choice(rng.choice(lines).events)
            field = rng.choice(["offset_ps", "duration_ps", "num_occurrences", "metadata_id"])
            setattr(event, field, rng.choice([-1, -(2**63), 2**63 - 1, 0, 10**15]))
            what.append(f"{plane.name}: event {field} = {getattr(event, field)}")
        elif roll == 6 and lines:
            line = rng.choice(lines)
            field = rng.choice(["timestamp_ns", "name", "display_name", "duration_ps"])
            value: Any = rng.choice([-1, 2**63 - 1, -(2**63)]) if field in ("timestamp_ns", "duration_ps") else \
                rng.choice(["XLA Ops", "Steps", "XLA Modules", "Stream #1", "[/bold]", "²", ""])  # fmt: skip
            setattr(line, field, value)
            what.append(f"{plane.name}: line {field} = {_said(value)}")
        elif roll == 7:
            plane.name = rng.choice(["/device:GPU:²", "/device:TPU:" + "9" * 5000, "/host:metadata", "/host:CPU", "",
                                     "[/bold]", "/device:GPU:-1", "/device:CUSTOM:0", "/device:TPU:0"])  # fmt: skip
            what.append(f"plane renamed {_said(plane.name)}")
        elif roll == 8 and lines:
            line = rng.choice(lines)
            n = rng.choice([2, 100])
            for event in list(line.events)[: rng.randint(1, 5)]:
                for _ in range(n):
                    line.events.add().CopyFrom(event)
            what.append(f"{plane.name} {line.name}: events repeated {n} times")
        else:
            victim = rng.randrange(len(space.planes))
            what.append(f"plane {space.planes[victim].name} deleted")
            del space.planes[victim]
            planes = list(space.planes)
            if not planes:
                break
    return what


def xplane_case(rng: random.Random) -> Case:
    """A real XPlane mutated through its schema (or byte by byte), as a file or in a profile directory."""
    from tests.fuzz.xspace import parse_space

    sources = real_xplanes()
    name, data = rng.choice(sources)
    if rng.random() < 0.8:
        space = parse_space(data)
        what = mutate_space(rng, space)
        data = space.SerializeToString()
    else:
        raw = bytearray(data)
        roll = rng.randrange(3)
        if roll == 0:
            for _ in range(rng.randint(1, 20)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            what = ["bytes flipped"]
        elif roll == 1:
            raw = raw[: rng.randrange(len(raw))]
            what = ["cut"]
        else:
            at = rng.randrange(len(raw))
            raw[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
            what = ["bytes inserted"]
        data = bytes(raw)
    if rng.random() < 0.3:
        fname, path = "log/plugins/profile/run/host.xplane.pb", "{W}/log"
    else:
        fname = "host.xplane.pb"
        path = "{W}/" + fname
    case = Case("trace", ["profile", path, "--chip", rng.choice(VALID["chip"])], {fname: data},
                label=f"{name}: " + "; ".join(what))  # fmt: skip
    if rng.random() < 0.15:
        case.files["m.hlo"] = SMALL_HLO
        case.argv += ["--hlo", "{W}/m.hlo"]
    _options(rng, case)
    return case


def trace_case(rng: random.Random) -> Case:
    """A JSON trace (60%) or an XPlane (40%) when ../shared holds them; otherwise a written JSON trace."""
    if real_xplanes() and rng.random() < 0.4:
        return xplane_case(rng)
    return json_trace_case(rng)
