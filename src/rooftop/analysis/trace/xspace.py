"""The XSpace protobuf (``.xplane.pb``) read straight into event rows with the protobuf runtime, against a
declared subset of ``xplane.proto`` (field numbers from tsl/profiler/protobuf/xplane.proto): the protobuf
library parses, nothing is hand-decoded, and jax is not imported.

What is read is what ``jaxlib``'s own reader (``ProfileData``, xla/python/profiler/profile_data.cc) gives
for each event, value for value: its name (the event metadata's, "" when there is none), its start
``line.timestamp_ns + offset_ps / 1000`` and duration ``duration_ps / 1000`` (int64 divisions, truncated
toward zero, then doubles), and its stats as (name, value) pairs: a ``ref_value`` as the name of the stat
metadata it points to, a ``bytes_value`` as text (left out when it is not UTF-8), a stat without a value or
without metadata as (None, None).

It reads faster and in less memory than that reader because it is columnar where the profile is:

- a plane's lines are kept serialized until each is read, so one line's events are parsed at a time;
- an event's stats are kept serialized: a stat seen before (same bytes: same name, same value) is decoded
  once, and only the stats that differ on every event (:data:`~rooftop.analysis.trace.events.OWN_ARGS`:
  correlation ids, device times) are decoded per event;
- an event is classified once per (line, event metadata, stats other than its own ids): what
  :func:`~rooftop.analysis.trace.classify.classify` says, the args dict, the interned names, in a
  :class:`_Plan` that every event of that kind reuses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from rooftop.analysis.trace.classify import classify, line_role
from rooftop.analysis.trace.events import _EMPTY, OWN_ARGS, EventArgs, correlation_key
from rooftop.units import NS_PER_S, PS_PER_NS, PS_PER_S

_OWN = frozenset(OWN_ARGS)
_INT64 = 1 << 63
#: a line timestamp within this of the int64 range cannot overflow when an event's offset is added
_SAFE_TS = _INT64 - (_INT64 // PS_PER_NS) - 1
_MAX_CODES = 1 << 16  # distinct serialized stats decoded once and kept, per plane
_MAX_PLANS = 1 << 15  # distinct kinds of event kept, per line
SKIPPED = ("", None)  # a stat left out (bytes that are not UTF-8)

# (field, number, type): "*T" is repeated, "map:T" is map<int64, T>, "?T" a member of the oneof ``value``;
# field numbers of tsl/profiler/protobuf/xplane.proto and xla/service/hlo.proto. Serialized lines and
# event stats are declared ``bytes`` (the wire format of a message), read when they are needed.
SCHEMA = {
    "XStat": [("metadata_id", 1, "int64"), ("double_value", 2, "?double"), ("uint64_value", 3, "?uint64"),
              ("int64_value", 4, "?int64"), ("str_value", 5, "?string"), ("bytes_value", 6, "?bytes"),
              ("ref_value", 7, "?uint64")],
    "XEvent": [("metadata_id", 1, "int64"), ("offset_ps", 2, "int64"), ("duration_ps", 3, "int64"),
               ("stats", 4, "*bytes")],
    "XLine": [("name", 2, "string"), ("timestamp_ns", 3, "int64"), ("events", 4, "*XEvent")],
    "XLineName": [("name", 2, "string")],
    "XEventMetadata": [("id", 1, "int64"), ("name", 2, "string"), ("stats", 5, "*XStat")],
    "XStatMetadata": [("id", 1, "int64"), ("name", 2, "string")],
    "XPlane": [("id", 1, "int64"), ("name", 2, "string"), ("lines", 3, "*bytes"),
               ("event_metadata", 4, "map:XEventMetadata"), ("stat_metadata", 5, "map:XStatMetadata"),
               ("stats", 6, "*XStat")],
    "XSpace": [("planes", 1, "*XPlane"), ("hostnames", 4, "*string")],
    "HloProto": [("hlo_module", 1, "bytes")],
}  # fmt: skip


@cache
def messages() -> dict[str, Any]:
    """Message classes for :data:`SCHEMA` (only the fields read here), declared through descriptor_pb2;
    ImportError when the protobuf package is absent."""
    # protobuf ships no type information and its stubs (types-protobuf) are not a dependency
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="rooftop/xplane_subset.proto", package="rooftop.xp", syntax="proto3")

    def add_field(msg: Any, name: str, number: int, kind: str) -> None:
        label = fdp.LABEL_REPEATED if kind[0] == "*" or kind.startswith("map:") else fdp.LABEL_OPTIONAL
        oneof = kind[0] == "?"
        kind = kind.lstrip("*?")
        if kind.startswith("map:"):
            entry = msg.nested_type.add(name="".join(p.title() for p in name.split("_")) + "Entry")
            entry.options.map_entry = True
            add_field(entry, "key", 1, "int64")
            add_field(entry, "value", 2, kind[4:])
            kind = f"{msg.name}.{entry.name}"
        field = msg.field.add(name=name, number=number, label=label)
        if oneof:
            if not msg.oneof_decl:
                msg.oneof_decl.add(name="value")
            field.oneof_index = 0
        if hasattr(fdp, f"TYPE_{kind.upper()}"):
            field.type = getattr(fdp, f"TYPE_{kind.upper()}")
        else:
            field.type, field.type_name = fdp.TYPE_MESSAGE, f".rooftop.xp.{kind}"

    for name, fields in SCHEMA.items():
        msg = file.message_type.add(name=name)
        for field_name, number, kind in fields:
            add_field(msg, field_name, number, kind)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"rooftop.xp.{n}")) for n in SCHEMA}


class CorruptError(Exception):
    """A message that the protobuf runtime could not parse (its DecodeError, whose module is imported only
    with the runtime)."""


def parse(message: str, data: bytes) -> Any:
    """``data`` parsed as the :data:`SCHEMA` message ``message``; CorruptError when it is not one."""
    try:
        return messages()[message].FromString(data)
    except Exception as exc:  # google.protobuf.message.DecodeError
        raise CorruptError(str(exc)) from exc


def stat_pair(stat: Any, names: dict[int, str]) -> tuple[Any, Any]:
    """(name, value) of a parsed XStat as jaxlib's reader gives it (see the module docstring); :data:`SKIPPED`
    for a bytes value that is not UTF-8 (which that reader raises for, and rooftop leaves out)."""
    name = names.get(stat.metadata_id)
    which = stat.WhichOneof("value")
    if name is None or which is None:
        return None, None
    if which == "ref_value":
        return name, names.get(stat.ref_value, "")
    if which == "bytes_value":
        try:
            return name, stat.bytes_value.decode()
        except UnicodeDecodeError:
            return SKIPPED
    return name, getattr(stat, which)


def _ns(ps: int) -> int:
    """``ps / PS_PER_NS`` as C++ divides an int64: truncated toward zero (the per-event loop of PlaneReader.line
    writes this inline, as a call per event would cost)."""
    return ps // PS_PER_NS if ps >= 0 else -(-ps // PS_PER_NS)


def _wrap(ns: int) -> int:
    """An int64 sum as C++ computes it (two's complement wrap-around), for a corrupt line timestamp."""
    return (ns + _INT64) % (1 << 64) - _INT64


@dataclass(slots=True)
class _Plan:
    """What every event of one kind on a line shares: its classification, names and common args."""

    name: str
    device: str
    module: str | None
    inst: str | None
    step: int | None
    kind: str
    corr: bool  # the kind keeps its events' correlation ids
    shared: Mapping[str, Any]  # the args other than the event's own ids
    op_program: str | None  # an op without a module: its program's module ("": none, found by its start)
    memory: bool  # a host event with a memory sample
    special: bool  # an event that adds more than its row: see PlaneReader.special
    device_event: bool


class PlaneReader:
    """Reads the lines of one plane into the rows of ``reader`` (the XPlane loader, whose ``rows``,
    ``prefix`` and ``programs`` it uses, and which it asks for what needs the whole profile: the module
    running when an op started, memory samples, errors); :meth:`line` reads one serialized line."""

    def __init__(self, plane: Any, reader: Any, host_ops: bool) -> None:
        self.plane_name: str = plane.name
        self.reader = reader  # the xplane loader: prefix, programs, rows, memory, programs_seen
        self.host = self.plane_name.startswith("/host:")
        self.host_ops = host_ops
        self.stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
        self.event_names = {k: v.name for k, v in plane.event_metadata.items()}
        self.codes: dict[bytes, int] = {}
        self.pairs: list[tuple[Any, Any]] = []
        self.plans: dict[tuple[Any, ...], _Plan] = {}
        self.xstat = messages()["XStat"]

    def decode(self, raw: bytes) -> Any:
        """A serialized stat's code (an index into ``pairs``, kept for the next events), or its (name,
        value) pair when it is one of the event's own ids, or None when left out."""
        try:
            stat = self.xstat.FromString(raw)
        except Exception as exc:  # google.protobuf.message.DecodeError
            raise CorruptError(str(exc)) from exc
        pair = stat_pair(stat, self.stat_names)
        if pair is SKIPPED:
            return None
        if pair[0] in _OWN:
            return pair
        code = self.codes[raw] = len(self.pairs)
        self.pairs.append(pair)
        return code

    def plan(self, role: str, key: tuple[Any, ...]) -> _Plan:
        """Classify the events of one kind: event metadata ``key[0]`` with the stats coded ``key[1:]``; kept
        for the next events of the kind. Past :data:`_MAX_CODES` distinct stats or :data:`_MAX_PLANS` kinds
        (stats that differ on most events: memory samples' byte counts), what is kept is dropped and built
        again as events come (so that memory stays bounded)."""
        p = self._plan(role, key)
        if len(self.pairs) >= _MAX_CODES:
            self.codes.clear()
            self.pairs.clear()
            self.plans.clear()  # their keys name codes that are gone: ``key`` among them
        else:
            if len(self.plans) >= _MAX_PLANS:
                self.plans.clear()
            self.plans[key] = p
        return p

    def _plan(self, role: str, key: tuple[Any, ...]) -> _Plan:
        rows, pairs = self.reader.rows, self.pairs
        name = self.event_names.get(key[0], "")
        shared = dict([pairs[c] for c in key[1:]])
        probe = {**shared, "correlation_id": 0}  # does this kind keep a correlation id? (the id's value aside)
        kind, device, module, inst, step, corr = classify(role, self.plane_name, name, probe, host_ops=self.host_ops)
        if kind == "op" and inst is not None and name[:1] == "%":
            shared.setdefault("long_name", name)  # the HLO text: replica groups the HloProto may lack
            name = inst
        op_program = None
        if module is None and kind == "op":
            op_program = self.reader.programs.get(str(shared.get("program_id"))) or ""
        intern = rows.strings.setdefault
        device = self.reader.prefix + device
        if module is not None:
            module = intern(module, module)
            if kind in ("kernel", "op"):
                self.reader.seen_program(module, shared)
        memory = self.host and ("bytes_allocated" in shared or "bytes_in_use" in shared)
        special = self.host or kind == "module" or op_program is not None
        return _Plan(intern(name, name), intern(device, device), module, None if inst is None else intern(inst, inst),
                     step, kind, corr is not None, shared or _EMPTY, op_program, memory, special,
                     kind in ("kernel", "op", "memcpy"))  # fmt: skip

    def line(self, raw: bytes, modules: list[tuple[float, float, str]], tick: Callable[[int], None]) -> int:
        """Read one serialized XLine's events into the rows; the number of device events among them.
        Per event only what differs on every event is kept (times, own ids, the plan of its kind); the
        columns that follow from the plan are written at the end of the line."""
        line = parse("XLine", raw)
        line_name, ts = line.name, line.timestamp_ns
        role = line_role(self.plane_name, line_name)
        wrap = not -_SAFE_TS <= ts <= _SAFE_TS
        self.plans.clear()  # the same event metadata on another line can be another kind of event
        codes_get, decode, plans_get, plan = self.codes.get, self.decode, self.plans.get, self.plan
        kinds: list[_Plan] = []
        starts: list[float] = []
        durs: list[float] = []
        corrs: list[Any] = []
        argl: list[Any] = []
        moved: dict[int, str | None] = {}  # modules of ops found by their program or start
        add_kind, add_start, add_dur, add_corr, add_args = (
            kinds.append, starts.append, durs.append, corrs.append, argl.append)  # fmt: skip
        count = len(self.reader.rows)
        ns_per_s, ps_per_ns, ps_per_s = NS_PER_S, PS_PER_NS, PS_PER_S  # locals in the per-event loop
        for ev in line.events:
            st = ev.stats
            own: Any = None
            if st:
                key: Any = [ev.metadata_id]
                for raw_stat in st:
                    c = codes_get(raw_stat)
                    if c is None:
                        c = decode(raw_stat)
                        if c.__class__ is not int:
                            if c is not None:
                                own = c if own is None else [*own, c] if own.__class__ is list else [own, c]
                            continue
                    key.append(c)
                key = tuple(key)
            else:
                key = (ev.metadata_id,)
            p = plans_get(key) or plan(role, key)
            off, dur = ev.offset_ps, ev.duration_ps
            start_ns = ts + (off // ps_per_ns if off >= 0 else -(-off // ps_per_ns))
            if wrap:
                start_ns = _wrap(start_ns)
            start_s = start_ns / ns_per_s
            dur_ns = dur // ps_per_ns if dur >= 0 else -(-dur // ps_per_ns)
            dur_s = dur_ns / ns_per_s
            corr = None
            if own is None:
                args = p.shared
            elif own.__class__ is tuple:
                k, v = own
                args = EventArgs(p.shared, k, v)
                if k == "correlation_id":
                    if p.corr:
                        corr = v if v.__class__ is int and -_INT64 <= v < _INT64 else correlation_key(v)
                elif k == "device_duration_ps" and p.kind == "op" and v.__class__ in (int, float) and 0 <= v < 2.0**63:
                    dur_s = v / ps_per_s  # the device's own clock
            else:
                args, corr, dur_s = self.own(p, own, dur_s)
            if dur_s < 0:
                self.reader.negative(p.name, line_name, float(dur_ns))
            if start_s < 0:
                self.reader.before_epoch(p.name, line_name, float(start_ns))
            if p.special:
                self.special(p, start_s, dur_s, corr, args, modules, moved, len(kinds))
            add_kind(p)
            add_start(start_s)
            add_dur(dur_s)
            add_corr(corr)
            add_args(args)
            if (count + len(kinds)) & 0xFFFF == 0:
                tick(count + len(kinds))
        return self.store(line_name, kinds, starts, durs, corrs, argl, moved)

    def own(self, p: _Plan, own: list[tuple[str, Any]], dur_s: float) -> tuple[Any, Any, float]:
        """(args, correlation, duration) of an event with several own ids (as RowBuilder.args keeps them)."""
        values = dict(own)
        corr = values.get("correlation_id")
        corr = correlation_key(corr) if p.corr and corr is not None else None
        device_ps = values.get("device_duration_ps") if p.kind == "op" else None
        if device_ps.__class__ in (int, float) and 0 <= device_ps < 2.0**63:  # the device's own clock
            dur_s = device_ps / PS_PER_S
        if len(values) == 1:
            ((k, v),) = values.items()
            return EventArgs(p.shared, k, v), corr, dur_s
        names = tuple(k for k in OWN_ARGS if k in values)
        names = self.reader.rows.own_keys.setdefault(names, names)
        return EventArgs(p.shared, names, tuple([values[k] for k in names])), corr, dur_s

    def special(self, p: _Plan, start_s: float, dur_s: float, corr: Any, args: Any, modules: list[Any],
                moved: dict[int, str | None], i: int) -> None:  # fmt: skip
        """What an event of a module, an op without a module, or a host event adds beside its row."""
        if p.kind == "module":
            modules.append((start_s, start_s + dur_s, p.module))
        elif p.op_program is not None:
            module = p.op_program or self.reader.containing(modules, start_s)
            moved[i] = module
            self.reader.seen_program(module, p.shared)
        if self.host:
            if corr is not None and p.kind == "other":
                self.reader.rows.launch_s.setdefault(corr, start_s)
            if p.memory:
                self.reader.memory_sample(start_s, dict(args), p.device)

    def store(self, line_name: str, kinds: list[_Plan], starts: list[float], durs: list[float], corrs: list[Any],
              argl: list[Any], moved: dict[int, str | None]) -> int:  # fmt: skip
        """Add a line's rows to the builder's columns; the number of device events among them."""
        n = len(kinds)
        modules = [p.module for p in kinds]
        for i, module in moved.items():
            modules[i] = module
        self.reader.rows.extend(
            [p.device for p in kinds], [line_name] * n, [p.name for p in kinds], modules, [p.inst for p in kinds],
            starts, durs, [p.step for p in kinds], [p.kind for p in kinds], corrs, argl)  # fmt: skip
        return 0 if self.host else sum([p.device_event for p in kinds])
