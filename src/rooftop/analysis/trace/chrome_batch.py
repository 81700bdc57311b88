"""Trace events mapped to rows a batch at a time by the rules of
:class:`~rooftop.analysis.trace.chrome_events.EventMapper` (the same rows, args and state, to the bit).

:func:`map_batch` takes the list of events the JSON reader decoded in one call and maps its runs of
complete (``X``) events whose fields have their usual types (ids ints or strings, times numbers within
+-1e18 us, names and categories strings, args a dict or none) in one loop per run: each event's fields read
once, the rules of :meth:`EventMapper.event` and :meth:`EventMapper._timed` written out inline, no call
per event. Every other event (metadata, B/E pairs, instants, flow events) goes to the per-event rules in
its place, and so does one whose values need them (a correlation id that cannot be written, a bad device
number, a step number past int64, a name that is not a string): the loop checks each event before it
changes any state, and the per-event rules then map it, or raise the error that names it. Each event is
touched once (a pass per field would read every event's dict from memory again), and about 2.5x faster
than an event at a time through method calls (benchmarks/bench_profile.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Any

from rooftop.analysis.trace import jsonstream
from rooftop.analysis.trace.chrome_events import (
    _DEVICE_KINDS,
    _KEPT,
    _KINETO_CATS,
    _MAX_US,
    _NUMBERS,
    _OP_ARGS,
    _SHARED_ARGS,
    _US_PER_S,
    EventMapper,
)
from rooftop.analysis.trace.classify import MEMCPY_NAMES, PROFILER_STEP, classify, line_role, step_number
from rooftop.analysis.trace.events import _EMPTY, _INT64, COLUMNS, EventArgs, correlation_key
from rooftop.analysis.trace.jsonstream import value_key
from rooftop.analysis.trace.rows import _MAX_SHARED, _OWN, _PLAIN, FLUSH_ROWS

_FAST_IDS: frozenset[Any] = frozenset({int, str})  # pids and tids mapped here (no NaN among them)
_HOST = "/host:CPU"
_NO_ARGS: dict[str, Any] = {}  # the args of an event without any (never written to)
_NCCL_KEYS = _KEPT["kernel"] - {"External id"}
_OP_KEYS = _OP_ARGS
_NO_HLO = (COLUMNS.index("module"), COLUMNS.index("instruction"))  # the columns a Kineto row leaves None
#: how the events of a category keep their args (:func:`_plan`): their category only; a kernel's link to its
#: op, or its NCCL call; an op's shapes and link; their category only, and ProfilerStep#N is a step marker;
#: a copy's or a fill's size
_PLAIN_CAT, _KERNEL, _OP, _ANNOTATION, _COPY = 0, 1, 2, 3, 4
_RULES = {"kernel": _KERNEL, "cpu_op": _OP, "user_annotation": _ANNOTATION, "gpu_memcpy": _COPY, "gpu_memset": _COPY}
#: the fields of an event, when it has them all (a KeyError otherwise: :func:`_fields`); a JAX event has no cat
_FIELDS = itemgetter("ph", "pid", "tid", "ts", "dur", "name", "cat", "args")
_JAX_FIELDS = itemgetter("ph", "pid", "tid", "ts", "dur", "name", "args")
#: what a value of the per-event rules' domain may raise where they would raise or treat it apart
_UNUSUAL = (TypeError, ValueError, AttributeError, OverflowError, RecursionError)


def map_batch(mapper: EventMapper, batch: list[Any], one: Callable[[int], None]) -> None:
    """Map the events of ``batch`` in order: runs in one loop each, and ``one(k)`` maps event ``k`` by the
    per-event rules (and reports its error)."""
    k, n = 0, len(batch)
    while k < n:
        ev = batch[k]
        if ev.__class__ is dict and ev.get("ph") != "X":  # no run starts here: the per-event rules, no set-up
            one(k)
            k += 1
            continue
        end = _kineto(mapper, batch, k)
        if end == k:
            end = _jax(mapper, batch, k)
        if end == k:
            one(k)
            end = k + 1
        k = end
    if len(mapper.rows.rows) >= FLUSH_ROWS:
        mapper.rows.flush()


def _kineto(m: EventMapper, batch: list[Any], first: int) -> int:
    """Map the Kineto complete events (with a ``cat``) from ``first`` on, as :meth:`EventMapper._timed`
    maps them, up to the first event that is not one or needs the per-event rules; return its index."""
    rows = m.rows
    intern, launch = rows.strings.setdefault, rows.launch_s.setdefault
    line_keys, gpus, gpu, plans, op_args = m.line_keys, m.gpus, m._gpu, m.cat_plans, m.op_args
    add_device, add_line, add_name, _, _, add_start, add_dur, add_step, add_kind, add_corr, add_args = rows.appenders()
    dumps = None if jsonstream.fast_json is None else jsonstream.fast_json.dumps
    kineto = 0
    k = first
    try:
        for k in range(first, len(batch)):
            ev = batch[k]
            try:
                ph, pid, tid, ts, dur, name, cat, args = _FIELDS(ev)  # (not a dict: a TypeError)
            except KeyError:
                ph, pid, tid, ts, dur, name, cat, args = _fields(ev)
            if (ph != "X" or pid.__class__ not in _FAST_IDS or tid.__class__ not in _FAST_IDS
                    or ts.__class__ not in _NUMBERS or dur.__class__ not in _NUMBERS or not -_MAX_US <= ts <= _MAX_US
                    or not 0 <= dur <= _MAX_US or name.__class__ is not str or cat.__class__ is not str):  # fmt: skip
                break
            if args is None:
                args = _NO_ARGS
            elif args.__class__ is not dict:
                break
            corr: Any = args.get("correlation")
            if corr is not None and (corr.__class__ is not int or not -_INT64 <= corr < _INT64):
                corr = correlation_key(corr)
            start_s = ts / _US_PER_S
            step = None
            plan = plans.get(cat)
            if plan is None:
                plan = _plan(m, cat)
            kind, rule, base, of_kineto = plan
            if kind is not None:  # device activity, on the GPU of its device arg (or pid)
                number = args.get("device")
                device = gpus.get((pid, number)) if pid.__class__ is int and number.__class__ is int else None
                if device is None:
                    device = gpu(pid, number)
                go = kind == "other" and corr is not None  # a GPU annotation: a launch, for the steps
            else:
                device = _HOST
                marker = PROFILER_STEP.match(name) if rule == _ANNOTATION else None
                if marker:
                    step = step_number(marker.group(1))
                    if step is None:
                        break  # a step number past int64: the per-event rules report it
                    kind, corr, go = "step", None, False
                else:
                    kind, go = "other", corr is not None
            # the event maps: from here on the state changes, as the per-event rules change it
            line = line_keys.get((pid, tid))
            if line is None:
                line = line_keys.setdefault((pid, tid), f"\0{pid}\0{tid}")
            name = intern(name, name)
            kineto += of_kineto
            if go:
                launch(corr, start_s)
            if rule == _PLAIN_CAT or rule == _ANNOTATION:  # a category whose args a report does not read
                kept: Any = base
            elif rule == _KERNEL and _NCCL_KEYS.isdisjoint(args):  # a kernel's link to its op, or nothing
                ext = args.get("External id", _NO_ARGS)
                kept = base if ext is _NO_ARGS else EventArgs(base, "External id", ext)
            elif rule == _OP and args.keys() >= _OP_KEYS and "Collective name" not in args:  # shapes: one dict
                shapes_of = (args["Input Dims"], args["Input type"], args["Concrete Inputs"])
                try:  # value_key inlined: orjson's text where it writes one without a null
                    text = dumps(shapes_of) if dumps is not None else None
                except TypeError:  # (orjson.JSONEncodeError)
                    text = None
                if text is None or b"null" in text:
                    text = value_key(shapes_of)
                shapes = op_args.get(("cpu_op", text)) if text is not None else None
                if shapes is None:
                    kept = m._kept(base["cat"], args, _KEPT[base["cat"]])
                else:
                    kept = EventArgs(shapes, "External id", args["External id"])
            else:
                kept = m._kept(base["cat"], args, _KEPT[base["cat"]])
            add_device(device)
            add_line(line)
            add_name(name)
            add_start(start_s)
            add_dur(dur / _US_PER_S)
            add_step(step)
            add_kind(kind)
            add_corr(corr)
            add_args(kept)
        else:
            k = len(batch)
    except _UNUSUAL:
        pass  # event k needs the per-event rules (nothing of it is stored)
    rows.appended(k - first, _NO_HLO)  # no module or instruction
    m.seen += k - first
    m.count += k - first
    m.kineto_events += kineto
    return k


def _plan(m: EventMapper, cat: str) -> tuple[str | None, int, Mapping[str, Any], bool]:
    """How the events of category ``cat`` map, worked out once per category: the kind of row of device
    activity (None for host activity), how they keep their args (:data:`_RULES`), the args of those that
    keep only their category (one read-only dict, its text interned) and whether it is a Kineto category."""
    cat = m.rows.strings.setdefault(cat, cat)
    plan = (_DEVICE_KINDS.get(cat), _RULES.get(cat, _PLAIN_CAT), m.cat_args.get(cat) or m._cat(cat),
            cat in _KINETO_CATS)  # fmt: skip
    m.cat_plans[cat] = plan
    return plan


def _fields(ev: dict[str, Any]) -> tuple[Any, ...]:
    """The fields of :data:`_FIELDS` of an event that lacks some, with the per-event rules' defaults."""
    get = ev.get
    return get("ph"), get("pid"), get("tid"), get("ts", 0.0), get("dur", 0.0), get("name", ""), get("cat"), get("args")


def _jax(m: EventMapper, batch: list[Any], first: int) -> int:
    """Map the JAX complete events (no ``cat``) from ``first`` on, as :meth:`EventMapper._timed` maps them
    (events on stream lines inline, the others by :func:`classify`), up to the first event that is not one
    or needs the per-event rules; return its index."""
    rows = m.rows
    intern, launch = rows.strings.setdefault, rows.launch_s.setdefault
    line_keys, lines, shared = m.line_keys, m.lines, rows.shared
    add_device, add_line, add_name, add_module, add_inst, add_start, add_dur, add_step, add_kind, add_corr, add_args = (
        rows.appenders()
    )
    host_ops = m.host_ops
    k = first
    try:
        for k in range(first, len(batch)):
            ev = batch[k]
            try:
                ph, pid, tid, ts, dur, name, args = _JAX_FIELDS(ev)  # (not a dict: a TypeError)
                cat = ev.get("cat")
            except KeyError:
                ph, pid, tid, ts, dur, name, cat, args = _fields(ev)
            if (ph != "X" or pid.__class__ not in _FAST_IDS or tid.__class__ not in _FAST_IDS
                    or ts.__class__ not in _NUMBERS or dur.__class__ not in _NUMBERS or not -_MAX_US <= ts <= _MAX_US
                    or not 0 <= dur <= _MAX_US or name.__class__ is not str or cat is not None):  # fmt: skip
                break
            if args is None:
                args = _NO_ARGS
            elif args.__class__ is not dict:
                break
            known = lines.get((pid, tid))
            if known is None:
                plane = m.processes.get(pid, f"pid {pid}")
                known = lines[(pid, tid)] = (plane, line_role(plane, m.threads.get((pid, tid), str(tid))))
            plane, role = known
            if role == "stream":  # classify's rule for a kernel or copy on a stream line, inline
                module, inst, corr = args.get("hlo_module"), args.get("hlo_op"), args.get("correlation_id")
                if (module is not None and module.__class__ is not str) or (inst is not None and inst.__class__
                                                                            is not str):  # fmt: skip
                    break  # a name given as a number: the per-event rules write it
                if corr is not None and (corr.__class__ is not int or not -_INT64 <= corr < _INT64):
                    corr = correlation_key(corr)
                step = args.get("step_num")
                if step is None:
                    step = args.get("group_id")
                if step is not None:
                    step = step_number(step)
                kind = "memcpy" if "memcpy_details" in args or name.startswith(MEMCPY_NAMES) else "kernel"
                device = plane
            else:
                kind, device, module, inst, step, corr = classify(role, plane, name, args, host_ops=host_ops)
            # the event maps: from here on the state changes, as the per-event rules change it
            start_s = ts / _US_PER_S
            line = line_keys.get((pid, tid))
            if line is None:
                line = line_keys.setdefault((pid, tid), f"\0{pid}\0{tid}")
            if corr is not None and kind == "other" and plane.startswith("/host:"):
                launch(corr, start_s)
            stored: Any
            if not args:
                stored = _EMPTY
            elif args.keys().isdisjoint(_OWN) and _PLAIN.issuperset(map(type, args.values())):
                key = tuple(args.items())  # RowBuilder._shared's key of args whose values are all plain
                stored = shared.get(key)
                if stored is not None:
                    rows.hits += 1
                else:
                    if len(shared) < _MAX_SHARED or rows.hits >= len(shared):
                        shared[key] = args
                    stored = args
                    _intern_shared(intern, args)
            else:
                stored = rows.args(args)
                if stored is args or (stored.__class__ is EventArgs and stored.shared is args):  # not seen before
                    _intern_shared(intern, args)
            if module is not None:
                module = intern(module, module)
            if inst is not None:
                inst = intern(inst, inst)
            device, name = intern(device, device), intern(name, name)
            add_device(device)  # (every value worked out: a row is added to all the columns or to none)
            add_line(line)
            add_name(name)
            add_module(module)
            add_inst(inst)
            add_start(start_s)
            add_dur(dur / _US_PER_S)
            add_step(step)
            add_kind(kind)
            add_corr(corr)
            add_args(stored)
        else:
            k = len(batch)
    except _UNUSUAL:
        pass  # event k needs the per-event rules (nothing of it is stored)
    rows.appended(k - first)
    m.seen += k - first
    m.count += k - first
    return k


def _intern_shared(intern: Callable[[str, str], str], args: Any) -> None:
    """Intern the values of ``args`` (an event's own dict) that repeat across events."""
    for key in _SHARED_ARGS:  # the same text on many events: one string for all
        value = args.get(key)
        if value.__class__ is str:
            args[key] = intern(value, value)
