"""The rules that map one Chrome / Perfetto (JAX) or PyTorch profiler (Kineto) trace event to a row of the
event table (:class:`EventMapper`), as :func:`rooftop.analysis.trace.chrome_json.load_json_trace` streams
them; :mod:`rooftop.analysis.trace.chrome_batch` applies the same rules to a batch of events at a time.

Mapping (trace event format: ``ph`` ``X`` complete events, ``B``/``E`` pairs, ``M`` metadata naming
processes and threads, ``ts``/``dur`` in microseconds):

- JAX JSON: a process is an XPlane plane (``process_name`` ``/host:CPU``, ``/device:GPU:0``), a thread is
  a line, ``args`` are the XPlane stats; events are classified exactly as XPlane events
  (:func:`rooftop.analysis.trace.classify.classify`). JAX writes the ``M`` events first.
- Kineto (detected by ``schemaVersion`` / ``deviceProperties`` / ``distributedInfo`` or Kineto
  categories): ``cat`` ``kernel`` -> ``"kernel"`` on ``/device:GPU:<args.device>``, ``gpu_memcpy`` /
  ``gpu_memset`` -> ``"memcpy"``, ``user_annotation`` ``ProfilerStep#N`` -> ``"step"`` N; ``cpu_op``,
  ``cuda_runtime``, ``user_annotation``, ``gpu_user_annotation``, ``python_function`` -> ``"other"`` (the
  category is kept in ``args["cat"]``). ``correlation`` links a kernel to its runtime launch;
  ``[memory]`` instant events (``Total Allocated``) become memory samples.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from rooftop.analysis.trace.classify import PROFILER_STEP, classify, line_role, step_number
from rooftop.analysis.trace.events import EventArgs, MemorySample, Trace, correlation_key, natural_key
from rooftop.analysis.trace.jsonstream import value_key
from rooftop.analysis.trace.rows import FLUSH_ROWS, RowBuilder
from rooftop.errors import shown

_US_PER_S = 1e6  # trace-event timestamps are microseconds
_MAX_US = 1e18  # |ts| and dur bound (31,700 years): sums of two stay finite; NaN fails the comparison
_NUMBERS: frozenset[Any] = frozenset({int, float})  # classes, tested with "in" (bool is not int here)
_IDS: frozenset[Any] = frozenset({int, str, float, type(None)})  # what a pid or tid may be (they key dicts)
_INT64_MAX = 2**63 - 1
_KINETO_KEYS = frozenset({"schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds"})
_KINETO_CATS = frozenset(
    {
        "kernel",
        "cpu_op",
        "gpu_memcpy",
        "gpu_memset",
        "cuda_runtime",
        "cuda_driver",
        "user_annotation",
        "gpu_user_annotation",
        "python_function",
        "ac2g",
    }
)
#: the args of a Kineto event that a report reads, by category: a launching op's shapes and its link to
#: kernels, a kernel's link to its op and an NCCL kernel's call; every other category keeps only its
#: ``cat`` (one shared dict per category). The rest (occupancy, grid, strides, sequence numbers: most of
#: an event's kilobyte in memory) is dropped as the event is read, so memory grows with what is reported.
_NCCL_ARGS = (
    "Collective name",
    "In msg nelems",
    "Out msg nelems",
    "dtype",
    "Group size",
    "Process Group Name",
    "Process Group Ranks",
)
_SHAPE_ARGS = ("Input Dims", "Input type", "Concrete Inputs", "External id")
KINETO_ARGS: dict[str, tuple[str, ...]] = {
    # an op's shapes, and the collective call of a ``record_param_comms`` op (older NCCL and RCCL kernels
    # carry none: the call is on the op that launched them)
    "cpu_op": (*_SHAPE_ARGS, *_NCCL_ARGS),
    "kernel": ("External id", *_NCCL_ARGS),
    "gpu_memcpy": ("bytes", "External id"),  # a copy's size and its link to its op
    "gpu_memset": ("bytes", "External id"),
}
_KEPT = {cat: frozenset(keys) for cat, keys in KINETO_ARGS.items()}
_EXTERNAL_ID = frozenset({"External id"})
_OP_ARGS = frozenset(_SHAPE_ARGS)
_NO_ARGS: dict[str, Any] = {}
_MAX_OP_ARGS = 1 << 16  # distinct op shapes kept as one dict each (past it, each event keeps its own)
#: Kineto categories of device activity, and the kind of row each is
_DEVICE_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memcpy", "gpu_user_annotation": "other"}
#: args whose text repeats across events (module, instruction, kernel and source names): stored once.
_SHARED_ARGS = ("hlo_module", "hlo_op", "long_name", "tf_op", "source", "kernel_details")


class EventMapper:
    """Maps trace events to rows; process/thread names are resolved at the end (Kineto writes them last)."""

    def __init__(self) -> None:
        self.top: dict[str, Any] = {}
        self.rows = RowBuilder()
        self.processes: dict[Any, str] = {}
        self.threads: dict[tuple[Any, Any], str] = {}
        self.open: dict[tuple[Any, Any], list[tuple[float, dict[str, Any]]]] = {}  # B events: (ts, event)
        self.memory: list[MemorySample] = []
        self.kineto_events = 0
        self.count = 0
        self.seen = 0
        self.host_ops = True  # whether host events with hlo_op are the ops (no device plane named yet)
        self.device_planes = 0  # processes named /device:... (not CUSTOM)
        self.line_keys: dict[tuple[Any, Any], str] = {}
        self.lines: dict[tuple[Any, Any], tuple[str, str]] = {}  # (pid, tid) -> (plane, role), as named so far
        self.cat_args: dict[str, Mapping[str, Any]] = {}  # the one read-only {"cat": cat} of each category
        self.cat_plans: dict[str, tuple[Any, ...]] = {}  # how each category's events map (chrome_batch._plan)
        self.op_args: dict[tuple[str, str | bytes], dict[str, Any]] = {}  # (cat, key of an op's shapes) -> dict
        self.gpus: dict[tuple[int, int], str] = {}  # (pid, args.device) -> device name

    def event(self, ev: Any) -> None:
        self.seen += 1
        if not isinstance(ev, dict):
            return
        ph = ev.get("ph")
        pid, tid = ev.get("pid"), ev.get("tid")
        if pid.__class__ not in _IDS or tid.__class__ not in _IDS or pid != pid or tid != tid:  # they key dicts
            bad = ("pid", pid) if pid.__class__ not in _IDS or pid != pid else ("tid", tid)
            raise TypeError(f"{bad[0]} {shown(bad[1])} is not a process or thread id (a number or a string)")
        if ph == "X":
            ts: Any = ev.get("ts", 0.0)
            dur: Any = ev.get("dur", 0.0)
            if ts.__class__ not in _NUMBERS or not -_MAX_US <= ts <= _MAX_US:  # the common case inlined
                ts = _time_us(ts, "ts")
            if dur.__class__ not in _NUMBERS or not 0 <= dur <= _MAX_US:
                dur = _time_us(dur, "dur", f"{shown(ev.get('name', '?'))} has a negative duration")
            self._timed(ev, ts, dur, pid, tid)
        elif ph == "B":
            self.open.setdefault((pid, tid), []).append((_time_us(ev.get("ts", 0.0), "ts"), ev))
        elif ph == "E":
            stack = self.open.get((pid, tid))
            if stack:
                start, begin = stack.pop()
                end = _time_us(ev.get("ts", start), "ts")
                if end < start:
                    raise ValueError(
                        f"{shown(begin.get('name', '?'))} ends (E at ts {end:g} us) before it begins (B at ts "
                        f"{start:g} us); a B/E pair must not end before it begins"
                    )
                args = begin.get("args")
                end_args = ev.get("args")
                if isinstance(end_args, dict) and end_args:
                    begin["args"] = {**args, **end_args} if isinstance(args, dict) else end_args
                self._timed(begin, start, end - start, pid, tid)
        elif ph == "M":
            self._meta(ev)
        elif ph in ("i", "I") and ev.get("name") == "[memory]":
            self._memory_sample(ev)

    def _memory_sample(self, ev: dict[str, Any]) -> None:
        args = ev.get("args")
        if not isinstance(args, dict):
            args = {}
        on_host = args.get("Device Type", 1) == 0
        device = "/host:CPU" if on_host else f"/device:GPU:{_device_id(args.get('Device Id'), 'Device Id')}"
        total: Any = args.get("Total Allocated", args.get("Bytes", 0))
        if total.__class__ not in _NUMBERS:
            raise TypeError(f"[memory] Total Allocated {shown(total)} is not a number of bytes")
        if not 0 <= total <= 2.0**64:
            raise ValueError(f"[memory] Total Allocated {shown(total)} is not a byte count in [0, 2**64]")
        self.memory.append(MemorySample(_time_us(ev.get("ts", 0.0), "ts") / _US_PER_S, float(total), device))

    def _meta(self, ev: dict[str, Any]) -> None:
        args = ev.get("args")
        name = args.get("name") if isinstance(args, dict) else None
        self.lines.clear()  # names change what a line is
        if ev.get("name") == "process_name" and name is not None:
            pid, text = ev.get("pid"), str(name)
            old = self.processes.get(pid)
            self.device_planes += _is_device(text) - (old is not None and _is_device(old))  # O(1) per event
            self.processes[pid] = text
            self.host_ops = self.device_planes == 0
        elif ev.get("name") == "thread_name" and name is not None:
            self.threads[(ev.get("pid"), ev.get("tid"))] = str(name).strip()

    def _timed(self, ev: dict[str, Any], ts_us: float, dur_us: float, pid: Any, tid: Any) -> None:
        self.count += 1
        args = ev.get("args")  # kept as read; the OpEvent.args view turns values into text
        if args.__class__ is not dict:
            args = {}
        name, cat = ev.get("name", ""), ev.get("cat")
        if name.__class__ is not str:
            name = str(name)
        line = self.line_keys.get((pid, tid))
        if line is None:
            line = self.line_keys.setdefault((pid, tid), f"\0{pid}\0{tid}")
        start_s, dur_s = ts_us / _US_PER_S, dur_us / _US_PER_S
        intern = self.rows.strings.setdefault
        if cat is not None:  # Kineto: kernels and copies on their GPU, ProfilerStep#N steps, the rest host activity
            if cat.__class__ is not str:
                raise TypeError(f"cat {shown(cat)} is not a category name (a string)")
            name, cat = intern(name, name), intern(cat, cat)
            self.kineto_events += cat in _KINETO_CATS
            corr: Any = args.get("correlation")
            if corr is not None:
                corr = correlation_key(corr)
            step = None
            kind = _DEVICE_KINDS.get(cat)
            if kind is not None:
                device = self._gpu(pid, args.get("device"))
                if kind == "other" and corr is not None:  # a GPU annotation: a launch, for the steps
                    self.rows.launch_s.setdefault(corr, start_s)
            else:
                device = "/host:CPU"
                marker = PROFILER_STEP.match(name) if cat == "user_annotation" else None
                if marker:
                    kind, corr, step = "step", None, step_number(marker.group(1))
                    if step is None:
                        raise ValueError(f"step marker {shown(name)} has a step number past int64 (at most "
                                         f"{_INT64_MAX})")  # fmt: skip
                else:
                    kind = "other"
                    if corr is not None:
                        self.rows.launch_s.setdefault(corr, start_s)
            keys = _KEPT.get(cat)
            kept = self._kept(cat, args, keys) if keys is not None else self.cat_args.get(cat) or self._cat(cat)
            rows = self.rows.rows
            rows.append((device, line, name, None, None, start_s, dur_s, step, kind, corr, kept))
            if len(rows) >= FLUSH_ROWS:
                self.rows.flush()
            return
        known = self.lines.get((pid, tid))
        if known is None:
            plane = self.processes.get(pid, f"pid {pid}")
            known = self.lines[(pid, tid)] = (plane, line_role(plane, self.threads.get((pid, tid), str(tid))))
        plane, role = known
        kind, device, module, inst, step, corr = classify(role, plane, name, args, host_ops=self.host_ops)
        if corr is not None and kind == "other" and plane.startswith("/host:"):
            self.rows.launch_s.setdefault(corr, start_s)
        stored = self.rows.args(args)
        if stored is args or (stored.__class__ is EventArgs and stored.shared is args):  # args not seen before
            for key in _SHARED_ARGS:  # the same text on many events: one string for all
                value = args.get(key)
                if value.__class__ is str:
                    args[key] = intern(value, value)
        if module is not None:
            module = intern(module, module)
        if inst is not None:
            inst = intern(inst, inst)
        rows = self.rows.rows
        rows.append((intern(device, device), line, intern(name, name), module, inst, start_s, dur_s, step, kind, corr,
                     stored))  # fmt: skip
        if len(rows) >= FLUSH_ROWS:
            self.rows.flush()

    def _gpu(self, pid: Any, number: Any) -> str:
        """The device of a Kineto GPU event: its ``device`` arg, or its pid (Kineto numbers GPU processes)."""
        plain = pid.__class__ is int and number.__class__ is int
        device = self.gpus.get((pid, number)) if plain else None
        if device is None:
            text = f"/device:GPU:{pid if number is None else _device_id(number, 'device')}"
            device = self.rows.strings.setdefault(text, text)
            if plain:
                self.gpus[(pid, number)] = device
        return device

    def _cat(self, cat: str) -> Mapping[str, Any]:
        """The args kept of an event of ``cat`` that carries none a report reads: one ``{"cat": cat}``."""
        return self.cat_args.setdefault(cat, MappingProxyType({"cat": cat}))

    def _kept(self, cat: str, args: dict[str, Any], keys: frozenset[str]) -> Mapping[str, Any]:
        """The args of a Kineto event a report reads (``keys``, of :data:`KINETO_ARGS`, with ``cat``), stored
        as :meth:`RowBuilder.args` stores them (an op's shapes and types: one dict per distinct text)."""
        present = args.keys() & keys  # (a look-up per key of keys: an event has more)
        if not present:
            return self.cat_args.get(cat) or self._cat(cat)
        if present == _EXTERNAL_ID:  # a kernel's link to its op, nothing else
            return EventArgs(self.cat_args.get(cat) or self._cat(cat), "External id", args["External id"])
        if present == _OP_ARGS:  # an op's shapes: the same text, one dict
            dims, types, concrete = args["Input Dims"], args["Input type"], args["Concrete Inputs"]
            text = value_key((dims, types, concrete))
            shared = self.op_args.get((cat, text)) if text is not None else None
            if shared is None:
                shared = {"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete, "cat": cat}
                if text is not None and len(self.op_args) < _MAX_OP_ARGS:
                    self.op_args[(cat, text)] = shared
            return EventArgs(shared, "External id", args["External id"])
        kept = {k: args[k] for k in KINETO_ARGS[cat] if k in present}
        kept["cat"] = cat
        return self.rows.args(kept)

    def trace(self, source: str) -> Trace:
        lines = {key: self.threads.get(pid_tid, f"thread {pid_tid[1]}") for pid_tid, key in self.line_keys.items()}
        table = self.rows.build(lines)
        kineto = self.kineto_events > 0 or bool(_KINETO_KEYS & self.top.keys())
        metadata = {k: v for k, v in self.top.items() if k != "traceEvents"}
        metadata["trace_event_count"] = self.seen
        devices = {d for d in set(table.column("device")) if d.startswith("/device:")}
        if kineto:  # the devices deviceProperties lists (entries that are not {"id": <number>, ...} say nothing)
            props = metadata.get("deviceProperties")
            for p in props if isinstance(props, list) else ():
                number = step_number(p.get("id")) if isinstance(p, dict) else None
                if number is not None and number >= 0:
                    devices.add(f"/device:GPU:{number}")
        else:
            devices |= {p for p in self.processes.values() if isinstance(p, str) and p.startswith("/device:")}
        self.memory.sort()
        fmt = "kineto" if kineto else "chrome-json"
        return Trace(table, source, fmt, {}, tuple(self.memory), tuple(sorted(devices, key=natural_key)), metadata)


def _time_us(value: Any, what: str, negative: str = "") -> float:
    """An event time or duration in microseconds: a number (or a numeric string, as some writers quote
    them) within +-1e18 us, and not negative when ``negative`` says what that would mean; else a
    ValueError naming the value (reported with the file, the line and the event)."""
    number: Any = value
    if value.__class__ is str and value.isascii() and len(value) <= 64:
        try:
            number = float(value)
        except ValueError:
            number = None
    if number.__class__ not in _NUMBERS:
        raise TypeError(f"{what} {shown(value)} is not a number of microseconds")
    if not -_MAX_US <= number <= _MAX_US:  # NaN fails too; a 400-digit int is compared, not converted
        raise ValueError(f"{what} {shown(value)} is not a finite time within +-1e18 us")
    if negative and number < 0:
        raise ValueError(f"{negative} ({what} {shown(value)})")
    return float(number)


def _is_device(process: str) -> bool:
    return process.startswith("/device:") and not process.startswith("/device:CUSTOM")


def _device_id(value: Any, what: str) -> str:
    """A GPU number from a Kineto arg (an int, or ASCII digits): its text; a ValueError otherwise."""
    number = step_number(value) if value.__class__ is not float else None
    if number is None or number < 0:
        raise ValueError(f"{what} {shown(value)} is not a device number (an integer >= 0)")
    return str(number)
