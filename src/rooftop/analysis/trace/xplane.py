"""XPlane (``.xplane.pb``, the XSpace protobuf written by ``jax.profiler``) -> rooftop event table.

Events are read with the protobuf runtime against a declared subset of ``xplane.proto``
(:mod:`rooftop.analysis.trace.xspace`: one line at a time, each kind of event classified once, jax not
imported), value for value as JAX's own reader ``ProfileData`` gives them (planes -> lines -> events with
``name``, ``start_ns``, ``duration_ns`` and ``stats``); that reader (``jaxlib._profile_data``, which
``jax.profiler`` re-exports) is the fallback where the protobuf package is absent. Each event is
classified by :mod:`rooftop.analysis.trace.classify` (which says how JAX/XLA names planes, lines and stats).
Measured in benchmarks/bench_xplane_load.py: 1M kernel events at 0.87x the CPU speed of a bare
``ProfileData`` pass over them, in 0.54x its memory.

- ``/host:metadata``: no events; its event metadata carry one ``Hlo Proto`` stat per HLO module, named
  ``jit_f(<program_id>)`` (``ProfileData`` does not expose event metadata: read with the protobuf runtime).

Stats whose names start with ``_`` (internal flow/context ids) are dropped; other stats become ``args``.
An op event with a ``device_duration_ps`` stat (TPU: the op's time on the chip's own clock, which xprof
reports) is timed by it; its host-aligned ``duration_ns`` differs by up to ~13% per op. An op event named
by its HLO text is renamed to its instruction, the text kept as its ``long_name`` arg.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rooftop.analysis.trace.classify import MODULE_NAME, classify, line_role
from rooftop.analysis.trace.events import COLUMNS, EventTable, MemorySample, ProgressFn, Trace, natural_key
from rooftop.analysis.trace.files import read_regular
from rooftop.analysis.trace.rows import RowBuilder
from rooftop.analysis.trace.xspace import SKIPPED, CorruptError, PlaneReader, messages, parse, stat_pair
from rooftop.errors import InvalidConfigError, ParseError, shown
from rooftop.units import NS_PER_S, PS_PER_S

JAX_EXTRA = "reading .xplane.pb needs the jax extra: pip install 'rooftop[jax]'"
_BFC_ALLOCATOR = re.compile(r"^(GPU|TPU)_([0-9]+)_bfc$")
_PROGRESS_EVERY = 1 << 16
_MAX_XPLANE_BYTES = 2**31 - 1  # protobuf refuses a larger message


def _profile_data() -> Any:
    """jaxlib's XSpace reader (the class ``jax.profiler.ProfileData`` re-exports), without importing jax."""
    try:
        from jaxlib._profile_data import ProfileData  # type: ignore[import-not-found]
    except ImportError:
        try:
            from jax.profiler import ProfileData
        except ImportError as exc:
            raise InvalidConfigError(JAX_EXTRA) from exc
    return ProfileData


def _protobuf() -> bool:
    """Whether the protobuf runtime is there to read XSpace (:mod:`rooftop.analysis.trace.xspace`)."""
    try:
        messages()
    except ImportError:
        return False
    return True


def _cut(exc: BaseException) -> str:
    """An exception's text on one line of at most ~300 characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else f"{text[:280]}... ({len(text)} characters)"


def _stats(owner: Any) -> dict[Any, Any]:
    """The (name, value) stats of an event or plane as a dict. jaxlib decodes a bytes stat as UTF-8 text
    and raises for one that is not: such a stat (a binary payload, which args leave out anyway) is
    skipped and the iteration goes on to the next one."""
    try:
        return dict(owner.stats)
    except UnicodeDecodeError:
        out: dict[Any, Any] = {}
        it = iter(owner.stats)  # a fresh iteration (the failed one is partly consumed)
        while True:
            try:
                key, value = next(it)
            except StopIteration:
                return out
            except UnicodeDecodeError:
                continue
            out[key] = value


def _stat_text(value: Any) -> str | None:
    if isinstance(value, int):
        return str(value)
    if isinstance(value, bytes):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return None if value is None else str(value)


def load_xplanes(
    paths: Sequence[Path], *, source: str, progress: ProgressFn | None = None, host: str | None = None
) -> Trace:
    """Load one ``.xplane.pb`` per host into one Trace (device names prefixed by the host when several, or
    by ``host`` when given: one host of many read alone, named as it is among them)."""
    direct = _protobuf()
    profile_data: Any = None if direct else _profile_data()
    tables: list[EventTable] = []
    memory: list[MemorySample] = []
    protos: dict[str, bytes] = {}
    devices: list[str] = []
    metadata: dict[str, Any] = {"hosts": [], "device_properties": {}}
    program_ids: dict[str, set[str]] | None = {} if direct else None
    loaded, bytes_read = 0, 0
    for path in paths:
        name = host or path.name.removesuffix(".xplane.pb").removesuffix(".pb")
        data = _read(path)
        bytes_read += len(data)
        prefix = name if len(paths) > 1 or host else ""

        def tick(n: int, base: int = loaded, total: int = bytes_read) -> None:
            if progress is not None:
                progress(base + n, total)

        if direct:
            space = _parse_space(data, str(path))
            del data  # the parsed space holds what is read
            module_protos = _hlo_protos(space, metadata)
            reader: _SpaceReader = _ProtoReader(prefix, _program_names(module_protos), metadata, memory, program_ids)
            tables.append(_read_space(reader, space, tick, str(path)))
        else:
            module_protos = metadata_hlo_protos(data, str(path), metadata)
            reader = _SpaceReader(prefix, _program_names(module_protos), metadata, memory)
            # jaxlib's C++ reader logs to fd 2 while parsing (invalid UTF-8) and while iterating (one line per
            # stat without a value): kept off the terminal for the whole read
            with _quiet_stderr():
                try:
                    space = profile_data.from_serialized_xspace(data)
                except Exception as exc:  # jaxlib raises RuntimeError("Failed to parse XSpace ...")
                    raise ParseError(f"truncated or corrupt XPlane protobuf ({_cut(exc)})", source=str(path)) from exc
                tables.append(_read_space(reader, space, tick, str(path)))
        del space
        for key, value in module_protos.items():
            protos.setdefault(key, value)
        loaded += len(tables[-1])
        devices.extend(reader.devices)
        metadata["hosts"].append(name)
    if progress is not None:
        progress(loaded, bytes_read)
    table = _split_programs(EventTable.concat(tables) if len(tables) > 1 else tables[0], program_ids)
    memory.sort()
    devs = tuple(sorted(set(devices), key=natural_key))
    return Trace(table, source, "xplane", dict(sorted(protos.items())), tuple(memory), devs, metadata)


def _read_space(reader: _SpaceReader, space: Any, tick: Callable[[int], None], source: str) -> EventTable:
    try:
        return reader.read(space, tick)
    except TypeError as exc:  # a stat of a type no profiler writes
        raise ParseError(f"XPlane event with a stat of the wrong type ({_cut(exc)})", source=source) from exc
    except (ValueError, OverflowError) as exc:  # a negative duration
        raise ParseError(_cut(exc), source=source) from exc
    except CorruptError as exc:  # a line that does not parse
        raise ParseError(f"truncated or corrupt XPlane protobuf ({_cut(exc)})", source=source) from exc


def _split_programs(table: EventTable, program_ids: dict[str, set[str]] | None = None) -> EventTable:
    """One module name compiled into several programs (``jit_dot`` for five shapes: program ids 21, 34, ...,
    each with its own HLO) would merge different ops under one name: the events of such a module are named
    ``jit_dot(21)``, as the profile's metadata names each program's HLO. A module of one program keeps its
    name. ``program_ids``: the program ids of each module's kernels and ops, when the reader collected them
    (the table is then read only when a module has several)."""
    if program_ids is not None and all(len(ids) < 2 for ids in program_ids.values()):
        return table
    module, args, kind = table.column("module"), table.column("args"), table.column("kind")
    programs: dict[str, set[str]] = {}
    for m, a, k in zip(module, args, kind, strict=True):
        if m is not None and a and k in ("kernel", "op"):
            pid = _stat_text(a.get("program_id"))
            if pid is not None and pid.isascii() and pid.isdigit():
                programs.setdefault(m, set()).add(pid)
    split = {m for m, ids in programs.items() if len(ids) > 1}
    if not split:
        return table
    renamed: dict[tuple[str, str], str] = {}
    new = list(module)
    for i, (m, a) in enumerate(zip(module, args, strict=True)):
        if m in split and a:
            pid = _stat_text(a.get("program_id"))
            if pid is not None and pid in programs[m]:
                key = (m, pid)
                new[i] = renamed.get(key) or renamed.setdefault(key, f"{m}({pid})")
    cols = {c: table.column(c) for c in COLUMNS}
    cols["module"] = tuple(new)
    return EventTable(cols)


def _read(path: Path) -> bytes:
    data = read_regular(path, _MAX_XPLANE_BYTES, "the 2 GiB a protobuf message can hold (not an XPlane)")
    if not data:
        raise ParseError("truncated or corrupt XPlane protobuf (empty file)", source=str(path))
    return data


def _program_names(protos: dict[str, bytes]) -> dict[str, str]:
    out = {}
    for key in protos:
        m = MODULE_NAME.match(key)
        if m:
            out[m.group("id")] = m.group("name")
    return out


class _SpaceReader:
    """Walks one XSpace: device planes first (so host events know whether ops ran on the host)."""

    def __init__(self, prefix: str, programs: dict[str, str], metadata: dict[str, Any], memory: list[Any]) -> None:
        self.prefix, self.programs, self.metadata, self.memory = prefix, programs, metadata, memory
        self.rows = RowBuilder()
        self.devices: list[str] = []
        self.device_events = 0

    def read(self, space: Any, tick: Callable[[int], None]) -> EventTable:
        planes = list(space.planes)
        planes.sort(key=lambda p: p.name.startswith("/host:"))
        for plane in planes:
            name = plane.name
            stats = {k: _stat_text(v) for k, v in self._plane_stats(plane).items() if k}
            if name == "Task Environment" or name == "/host:metadata":
                self.metadata.setdefault("environment", {}).update({k: v for k, v in stats.items() if v is not None})
                continue
            if name.startswith("/device:") and not name.startswith("/device:CUSTOM"):
                self.devices.append(self.prefix + name)
                if stats:
                    self.metadata["device_properties"][self.prefix + name] = stats
            self._plane(plane, name, tick)
        table = self.rows.build()
        self.devices.extend(d for d in set(table.column("device")) if "/device:" in d)
        return table

    def _plane_stats(self, plane: Any) -> dict[Any, Any]:
        return _stats(plane)

    def _plane(self, plane: Any, plane_name: str, tick: Callable[[int], None]) -> None:
        lines = sorted(plane.lines, key=lambda ln: ln.name != "XLA Modules")
        modules: list[tuple[float, float, str]] = []
        host = plane_name.startswith("/host:")
        rows, prefix = self.rows, self.prefix
        append, intern = rows.rows.append, rows.strings.setdefault  # RowBuilder.add, inlined: the hot loop
        count, device_events = len(rows), self.device_events
        for line in lines:
            line_name = line.name
            role = line_role(plane_name, line_name)
            for ev in line.events:
                try:
                    stats = dict(ev.stats)  # values as read; the OpEvent.args view turns them into text
                except UnicodeDecodeError:
                    stats = _stats(ev)
                name = ev.name
                kind, device, module, inst, step, corr = classify(
                    role, plane_name, name, stats, host_ops=device_events == 0
                )
                start_s, dur_s = ev.start_ns / NS_PER_S, ev.duration_ns / NS_PER_S
                if kind == "op" and inst is not None and name[:1] == "%":
                    stats.setdefault("long_name", name)  # the HLO text: replica groups the HloProto may lack
                    name = inst
                device_ps = stats.get("device_duration_ps") if kind == "op" else None
                if device_ps.__class__ in (int, float) and 0 <= device_ps < 2.0**63:  # the device's own clock
                    dur_s = device_ps / PS_PER_S
                if dur_s < 0:
                    raise ValueError(f"event {shown(name)} on line {shown(line_name)} has a negative duration "
                                     f"({ev.duration_ns:g} ns)")  # fmt: skip
                if start_s < 0:  # a line's timestamp counts from the Unix epoch (xplane.proto): a corrupt one
                    raise ValueError(f"event {shown(name)} on line {shown(line_name)} starts before the clock's "
                                     f"epoch ({ev.start_ns:g} ns)")  # fmt: skip
                if kind == "module":
                    modules.append((start_s, start_s + dur_s, module))
                elif module is None and kind == "op":
                    module = self.programs.get(str(stats.get("program_id"))) or _containing(modules, start_s)
                if prefix:
                    device = prefix + device
                if not host:
                    device_events += kind in ("kernel", "op", "memcpy")
                elif corr is not None and kind == "other":
                    rows.launch_s.setdefault(corr, start_s)
                if host and ("bytes_allocated" in stats or "bytes_in_use" in stats):
                    self._memory(start_s, stats, device)
                if module is not None:
                    module = intern(module, module)
                if inst is not None:
                    inst = intern(inst, inst)
                append((intern(device, device), line_name, intern(name, name), module, inst, start_s, dur_s, step,
                        kind, corr, rows.args(stats)))  # fmt: skip
                count += 1
                if count % _PROGRESS_EVERY == 0:
                    rows.flush()  # clears rows.rows in place: ``append`` stays bound to it
                    tick(count)
            self.device_events = device_events
            if not host and line_name == "XLA Modules":
                modules.sort()

    def _memory(self, time_s: float, stats: dict[str, Any], device: str) -> None:
        """A memory sample from an allocation event; one whose byte count is not a number >= 0 is skipped."""
        value = stats.get("bytes_in_use", stats.get("bytes_allocated"))
        allocator = str(stats.get("allocator_name", ""))
        m = _BFC_ALLOCATOR.match(allocator)
        index = stats.get("index_on_host")  # TPU runtimes: the chip's index on this host, no allocator name
        if m:
            where = f"{self.prefix}/device:{m.group(1)}:{m.group(2)}"
        elif not allocator and index.__class__ is int and 0 <= index < 2**20 and self.devices:
            kind = "TPU" if any("/device:TPU:" in d for d in self.devices) else "GPU"
            where = f"{self.prefix}/device:{kind}:{index}"
        else:
            where = allocator or device
        reserved = stats.get("bytes_reserved", 0)
        if reserved.__class__ not in (int, float) or not 0 <= reserved <= 2.0**64:
            reserved = 0
        if value is None or (value.__class__ in (int, float) and 0 <= value <= 2.0**64):
            self.memory.append(MemorySample(time_s, float(value or 0), where, float(reserved)))


class _ProtoReader(_SpaceReader):
    """The same walk over an XSpace parsed by the protobuf runtime, a plane's lines read by
    :class:`~rooftop.analysis.trace.xspace.PlaneReader` (the events of one kind classified once)."""

    def __init__(self, prefix: str, programs: dict[str, str], metadata: dict[str, Any], memory: list[Any],
                 program_ids: dict[str, set[str]] | None) -> None:  # fmt: skip
        super().__init__(prefix, programs, metadata, memory)
        self.program_ids = program_ids

    def _plane_stats(self, plane: Any) -> dict[Any, Any]:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        return dict(pair for pair in (stat_pair(st, names) for st in plane.stats) if pair is not SKIPPED)

    def _plane(self, plane: Any, plane_name: str, tick: Callable[[int], None]) -> None:
        reader = PlaneReader(plane, self, host_ops=self.device_events == 0)
        raws = list(plane.lines)
        names = [parse("XLineName", raw).name for raw in raws]
        modules: list[tuple[float, float, str]] = []
        device = not plane_name.startswith("/host:")
        for i in sorted(range(len(raws)), key=lambda i: names[i] != "XLA Modules"):
            events = reader.line(raws[i], modules, tick)
            if device:
                self.device_events += events
                if names[i] == "XLA Modules":
                    modules.sort()

    def seen_program(self, module: str | None, args: Any) -> None:
        """Note the program id of a kernel or op of ``module`` (for :func:`_split_programs`)."""
        pid = _stat_text(args.get("program_id"))
        if module is not None and pid is not None and pid.isascii() and pid.isdigit() and self.program_ids is not None:
            self.program_ids.setdefault(module, set()).add(pid)

    def containing(self, modules: list[tuple[float, float, str]], t: float) -> str | None:
        return _containing(modules, t)

    def memory_sample(self, time_s: float, stats: dict[str, Any], device: str) -> None:
        self._memory(time_s, stats, device)

    def negative(self, name: str, line_name: str, duration_ns: float) -> None:
        raise ValueError(f"event {shown(name)} on line {shown(line_name)} has a negative duration ({duration_ns:g} ns)")

    def before_epoch(self, name: str, line_name: str, start_ns: float) -> None:
        """A line's timestamp counts from the Unix epoch (xplane.proto): a time before it is a corrupt one."""
        raise ValueError(f"event {shown(name)} on line {shown(line_name)} starts before the clock's epoch "
                         f"({start_ns:g} ns)")  # fmt: skip


def _containing(modules: list[tuple[float, float, str]], t: float) -> str | None:
    j = bisect.bisect_right(modules, (t, float("inf"), "\uffff")) - 1
    return modules[j][2] if j >= 0 and t <= modules[j][1] else None


# ----------------------------------------------------------------------------------------------------
# /host:metadata: HLO protos, read with the protobuf runtime against a declared subset of xplane.proto


def _parse_space(data: bytes, source: str) -> Any:
    try:
        return parse("XSpace", data)
    except CorruptError as exc:
        raise ParseError(f"truncated or corrupt XPlane protobuf ({_cut(exc)})", source=source) from exc


def metadata_hlo_protos(data: bytes, source: str, metadata: dict[str, Any]) -> dict[str, bytes]:
    """``{"jit_f(12)": serialized HloProto}`` from the ``/host:metadata`` plane; {} if protobuf is absent."""
    try:
        messages()
    except ImportError:
        metadata["hlo_protos_unavailable"] = "the protobuf package is not installed"
        return {}
    return _hlo_protos(_parse_space(data, source), metadata)


def _hlo_protos(space: Any, metadata: dict[str, Any]) -> dict[str, bytes]:
    metadata.setdefault("hostnames", []).extend(space.hostnames)
    out: dict[str, bytes] = {}
    for plane in space.planes:
        if plane.name != "/host:metadata":
            continue
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for _key, event in sorted(plane.event_metadata.items()):
            for stat in event.stats:
                if names.get(stat.metadata_id) in ("Hlo Proto", "hlo_proto") and stat.bytes_value:
                    out[event.name] = bytes(stat.bytes_value)
    return out


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null for the duration: jaxlib's C++ logging writes there, bypassing
    sys.stderr. When sys.stderr is the stream on fd 2, it is pointed at a copy of the real fd 2 meanwhile,
    so Python's own output (progress, warnings) still reaches the terminal."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no fd 2 (closed), or no sys.stderr: nothing to quiet
        yield
        return
    python_stderr = sys.stderr
    on_fd2 = _fileno(python_stderr) == 2
    devnull = os.open(os.devnull, os.O_WRONLY)
    copy = None
    try:
        os.dup2(devnull, 2)
        if on_fd2:
            copy = os.fdopen(os.dup(saved), "w", encoding=python_stderr.encoding, errors="backslashreplace")
            sys.stderr = copy
        yield
    finally:
        if copy is not None:
            sys.stderr = python_stderr
            copy.close()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _fileno(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None


def hlo_proto_to_text(proto: bytes) -> str:
    """HLO text of a serialized ``HloProto``, printed by XLA's own HloModule printer (jaxlib's
    ``xla_client.hlo.HloModule.to_string``) with metadata, so each op keeps its source scope."""
    try:
        from jaxlib import xla_client
    except ImportError as exc:
        raise InvalidConfigError("printing HLO from a profile needs the jax extra: pip install 'rooftop[jax]'") from exc
    message = messages()["HloProto"]()
    try:
        message.ParseFromString(proto)
        with _quiet_stderr():  # XLA's C++ checks log to fd 2 before raising; the caller reports one line
            module = xla_client.hlo.HloModule.from_serialized_hlo_module_proto(message.hlo_module)  # type: ignore[attr-defined]
        text: str = module.to_string(xla_client.hlo.HloPrintOptions())  # type: ignore[attr-defined]
        return text  # the default options print metadata (op_name)
    except Exception as exc:
        raise ParseError(f"corrupt HloProto in the profile metadata ({exc})") from exc


def hlo_proto(trace: Trace, module: str, program_id: int | str | None = None) -> bytes | None:
    """The serialized HloProto of ``module`` ("jit_f(12)", or "jit_f" with/without ``program_id``)."""
    protos = trace.hlo_protos
    if module in protos:
        return protos[module]
    if program_id is not None and f"{module}({program_id})" in protos:
        return protos[f"{module}({program_id})"]
    matches = sorted(k for k in protos if k.rsplit("(", 1)[0] == module)
    return protos[matches[-1]] if len(matches) == 1 else None


def hlo_text(trace: Trace, module: str, program_id: int | str | None = None) -> str | None:
    """HLO text of a module in the trace's metadata plane, printed by XLA (needs jax); None if absent."""
    proto = hlo_proto(trace, module, program_id)
    return None if proto is None else hlo_proto_to_text(proto)
