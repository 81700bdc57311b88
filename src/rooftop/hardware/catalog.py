"""Load, validate and look up chips from TOML files (package data or the user's own).

Lookup is case-insensitive over canonical names and aliases; an unknown name raises
UnknownNameError with close matches. A file path (``mychip.toml``) or a directory
given with ``--catalog`` adds chips of the same schema.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rooftop.catalog.io import builtin_tomls, read_toml_file
from rooftop.errors import InvalidConfigError, UnknownNameError, path_text, shown
from rooftop.hardware.chip import MAX_CHIPS, MAX_TORUS_DIMS, Chip, Fabric, Figure, Internals, TopologySpec
from rooftop.units import MAX_QUANTITY, parse_number

_REQUIRED = (
    "name",
    "vendor",
    "kind",
    "matrix_flops_per_s",
    "memory.hbm_bytes",
    "memory.hbm_bytes_per_s",
    "links.count",
    "links.bytes_per_s",
    "topology.kind",
)
_KINDS = ("tpu", "gpu", "cpu", "custom")
_POSITIVE_TABLES = {"matrix_flops_per_s", "vector_flops_per_s"}
_POSITIVE_FIELDS = {"memory.hbm_bytes_per_s", "links.bytes_per_s", "links.count"}
#: smallest nonzero rate (FLOPs/s, bytes/s): a time divided by less could overflow to infinity
MIN_RATE = 1.0
#: longest chip name, vendor or alias, and most aliases (every lookup compares them all)
MAX_NAME = 200
MAX_ALIASES = 64
#: most links per chip (real chips have 4 to 18)
MAX_LINKS = 1 << 16
#: most TensorCores per chip a chip file may declare (TPUs have 1 or 2)
MAX_CORES = 64


_DATE = re.compile(r"[0-9]{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12][0-9]|3[01]))?")


class _Reader:
    """Reads fields of one parsed TOML file, naming the file and field on error."""

    def __init__(self, data: Mapping[str, Any], path: str) -> None:
        self.data = data
        self.path = path
        self.sources: dict[str, Figure] = {}

    def fail(self, field: str, why: str) -> InvalidConfigError:
        where = path_text(self.path)
        return InvalidConfigError(f"chip file {where}: field {shown(field)} {why}")

    def raw(self, dotted: str) -> Any:
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node

    def figure(self, dotted: str, required: bool = True, default: float | None = None) -> float | None:
        node = self.raw(dotted)
        if node is None:
            if required:
                raise self.fail(dotted, "is missing")
            return default
        if not isinstance(node, Mapping) or "value" not in node:
            raise self.fail(dotted, 'must be a table {value = ..., source = "..."}')
        source = node.get("source")
        if not isinstance(source, str) or not source.strip():
            raise self.fail(dotted, "has no source (every figure needs one)")
        raw = node["value"]
        if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
            raise self.fail(dotted, f"has an unreadable value {shown(raw)} (expected a number or a string with a unit)")
        if isinstance(raw, str) and "/s" in raw and not dotted.endswith("_per_s"):
            raise self.fail(dotted, f"is an amount, not a rate: {shown(raw)}")
        try:
            value = parse_number(raw) if isinstance(raw, (int, float)) else _parse(raw)
        except InvalidConfigError as exc:
            raise self.fail(dotted, f"has an unreadable value ({exc})") from None
        if not math.isfinite(value) or not 0 <= value <= MAX_QUANTITY:
            raise self.fail(dotted, f"must be a finite number in [0, 1e30], got {shown(raw)}")
        if value == 0 and (dotted.split(".")[0] in _POSITIVE_TABLES or dotted in _POSITIVE_FIELDS):
            raise self.fail(dotted, "must be > 0 (a rate of 0 would make every time infinite)")
        if 0 < value < MIN_RATE and (dotted.split(".")[0] in _POSITIVE_TABLES or dotted.endswith("_per_s")):
            raise self.fail(dotted, f"is {shown(raw)}; a rate must be 0 (none) or at least 1 per second")
        if dotted == "links.count" and (value != int(value) or value > MAX_LINKS):
            raise self.fail(dotted, f"must be a whole number of links in [1, {MAX_LINKS}], got {shown(raw)}")
        if dotted.startswith("cores.") and (value != int(value) or not 1 <= value <= MAX_CORES):
            raise self.fail(dotted, f"must be a whole number of TensorCores in [1, {MAX_CORES}], got {shown(raw)}")
        self.sources[dotted] = Figure(value, source, str(node.get("note", "")))
        return value

    def table(self, dotted: str, required: bool = True) -> dict[str, float]:
        node = self.raw(dotted)
        if node is None:
            if required:
                raise self.fail(dotted, "is missing")
            return {}
        if not isinstance(node, Mapping):
            raise self.fail(dotted, "must be a table")
        return {key: float(self.figure(f"{dotted}.{key}")) for key in node}  # type: ignore[arg-type]


def _parse(value: Any) -> float:
    from rooftop.units import parse_bytes, parse_rate

    text = str(value)
    if "/s" in text:
        return parse_rate(text)
    if text.rstrip().endswith("B"):
        return parse_bytes(text)
    return parse_number(text)


def _fractions(r: _Reader, dotted: str, matrix: Mapping[str, float]) -> dict[str, float]:
    """An optional table of fractions in (0, 1], one per dtype of the matrix unit."""
    out = r.table(dotted, required=False)
    for key, value in out.items():
        if key not in matrix:
            raise r.fail(f"{dotted}.{key}", f"names a dtype the matrix unit lacks (has: {', '.join(matrix)})")
        if not 0 < value <= 1:
            raise r.fail(f"{dotted}.{key}", f"must be a fraction in (0, 1], got {shown(value)}")
    return out


def _whole(r: _Reader, field: str, value: Any, lo: int, hi: int) -> int:
    """A TOML integer (or integral float) in [lo, hi]; strings, booleans, inf and nan are not sizes."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        ok, value = True, int(value)
    if not ok or not lo <= value <= hi:
        raise r.fail(field, f"has {shown(value)}; expected a whole number in [{lo}, {hi:,}]")
    return int(value)


def _sizes(r: _Reader, t: Mapping[str, Any], key: str, most: int) -> tuple[int, ...]:
    values = t.get(key, [])
    if not isinstance(values, list) or len(values) > most:
        raise r.fail(f"topology.{key}", f"must be a list of at most {most} whole numbers, got {shown(values)}")
    return tuple(_whole(r, f"topology.{key}", v, 1, MAX_CHIPS) for v in values)


def _topology(r: _Reader) -> TopologySpec:
    t = r.raw("topology")
    if not isinstance(t, Mapping):
        raise r.fail("topology", "is missing")
    kind = t.get("kind")
    if kind not in ("torus", "switched"):
        raise r.fail("topology.kind", f"must be 'torus' or 'switched', got {shown(kind)}")
    for key in ("wraparound", "source", "note"):
        if not isinstance(t.get(key, ""), str):
            raise r.fail(f"topology.{key}", f"must be a string, got {shown(t.get(key))}")
    spec = TopologySpec(
        kind=kind,
        max_dims=_sizes(r, t, "max_dims", MAX_TORUS_DIMS),
        max_chips=_whole(r, "topology.max_chips", t.get("max_chips", 0), 0, MAX_CHIPS),
        wraparound=t.get("wraparound", "none"),
        wrap_length=_whole(r, "topology.wrap_length", t.get("wrap_length", 0), 0, MAX_CHIPS),
        cube=_sizes(r, t, "cube", MAX_TORUS_DIMS),
        domain_sizes=_sizes(r, t, "domain_sizes", 64),
        source=t.get("source", ""),
        note=t.get("note", ""),
    )
    if spec.wraparound not in ("none", "full-axis", "whole-cubes"):
        raise r.fail("topology.wraparound", f"must be none, full-axis or whole-cubes, got {shown(spec.wraparound)}")
    if kind == "switched" and not spec.domain_sizes:
        raise r.fail("topology.domain_sizes", "is required for a switched (GPU) topology")
    if kind == "torus" and not spec.max_dims:
        raise r.fail("topology.max_dims", "is required for a torus (TPU) topology")
    if kind == "torus" and math.prod(spec.max_dims) > MAX_CHIPS:
        raise r.fail("topology.max_dims", f"make a pod of {math.prod(spec.max_dims):,} chips (at most {MAX_CHIPS:,})")
    if not spec.source.strip():
        raise r.fail("topology.source", "is missing (every figure needs a source)")
    return spec


def _cores(r: _Reader) -> tuple[int, int]:
    """(TensorCores per chip, TensorCores XLA drives as one device): ``[cores]`` ``tensor_cores`` and
    ``per_device``, each 1 when absent; the cores of a device divide the chip's."""
    cores = int(r.figure("cores.tensor_cores", required=False, default=1) or 1)
    per_device = int(r.figure("cores.per_device", required=False, default=1) or 1)
    if cores % per_device:
        raise r.fail("cores.per_device", f"is {per_device}, which does not divide cores.tensor_cores = {cores}")
    return cores, per_device


#: largest count of an internal part (SMs, MXUs, lanes, switch ports, GPUs under a switch tier)
MAX_PARTS = 1 << 24


def _parts(r: _Reader, table: str, cls: type[Internals] | type[Fabric]) -> Any:
    """``[internals]`` or ``[fabric]``: each key a field of ``cls`` with a sourced figure; counts (int fields)
    whole numbers >= 1. An unknown key is an error that lists the known ones."""
    node = r.raw(table)
    if node is None:
        return cls()
    if not isinstance(node, Mapping):
        raise r.fail(table, "must be a table")
    fields = {f.name: f.type for f in dataclasses.fields(cls)}
    values: dict[str, float | int] = {}
    for key in node:
        if key not in fields:
            raise r.fail(f"{table}.{key}", f"is not a known figure (known: {', '.join(fields)})")
        value = float(r.figure(f"{table}.{key}"))  # type: ignore[arg-type]  # required: never None
        if "int" in str(fields[key]):
            if value != int(value) or not 1 <= value <= MAX_PARTS:
                raise r.fail(f"{table}.{key}", f"must be a whole number in [1, {MAX_PARTS:,}], got {shown(value)}")
            values[key] = int(value)
        else:
            values[key] = value
    return cls(**values)  # type: ignore[arg-type]


def chip_from_dict(data: Mapping[str, Any], path: str = "<chip>") -> Chip:
    """Build and validate a Chip from parsed TOML; errors name the file and field."""
    r = _Reader(data, path)
    if data.get("schema_version", 1) != 1:
        raise r.fail(
            "schema_version", f"is {shown(data.get('schema_version'))}; this rooftop reads chip files of version 1"
        )
    for key in ("name", "vendor", "kind"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise r.fail(key, "is missing or not a string")
        if len(data[key]) > MAX_NAME:
            raise r.fail(key, f"is longer than {MAX_NAME} characters")
    if data["kind"] not in _KINDS:
        raise r.fail("kind", f"must be one of {', '.join(_KINDS)}, got {shown(data['kind'])}")
    matrix = r.table("matrix_flops_per_s")
    if not matrix:
        raise r.fail("matrix_flops_per_s", "needs at least one dtype")
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and len(a) <= MAX_NAME for a in aliases):
        raise r.fail("aliases", f"must be a list of strings of at most {MAX_NAME} characters")
    if len(aliases) > MAX_ALIASES:
        raise r.fail("aliases", f"has {len(aliases):,} names; at most {MAX_ALIASES}")
    kwargs = dict(
        name=data["name"],
        vendor=data["vendor"],
        kind=data["kind"],
        matrix_flops_per_s=MappingProxyType(matrix),
        vector_flops_per_s=MappingProxyType(r.table("vector_flops_per_s", required=False)),
        hbm_capacity_bytes=r.figure("memory.hbm_bytes"),
        hbm_bytes_per_s=r.figure("memory.hbm_bytes_per_s"),
        on_chip_bytes=MappingProxyType(r.table("on_chip_bytes", required=False)),
        link_count=int(r.figure("links.count") or 0),
        link_bytes_per_s=r.figure("links.bytes_per_s"),
        link_latency_s=r.figure("links.hop_latency_s", required=False, default=1e-6),
        link_kind=str(r.raw("links.kind") or "ici"),
        host_bytes_per_s=r.figure("host.bytes_per_s", required=False, default=0.0),
        dcn_bytes_per_s=r.figure("dcn.bytes_per_s", required=False, default=0.0),
        scaleout_latency_s=r.figure("dcn.latency_s", required=False, default=5e-6),
        price_usd_per_hour=r.figure("price.usd_per_chip_hour", required=False),
        price_as_of=_as_of(r),
        power_w=r.figure("power.watts", required=False),
        topology=_topology(r),
        aliases=tuple(aliases),
        description=str(data.get("description", "")),
        path=path,
    )
    kwargs["matrix_achievable"] = MappingProxyType(_fractions(r, "matrix_achievable", matrix))
    kwargs["tensor_cores"], kwargs["cores_per_device"] = _cores(r)
    kwargs["internals"], kwargs["fabric"] = _parts(r, "internals", Internals), _parts(r, "fabric", Fabric)
    if kwargs["hbm_bytes_per_s"] == 0:
        raise r.fail("memory.hbm_bytes_per_s", "must be > 0")
    return Chip(**kwargs, sources=MappingProxyType(r.sources))


def _as_of(r: _Reader) -> str:
    """``[price] as_of``: the date the price's source was read, ISO "YYYY-MM" or "YYYY-MM-DD" ("" when absent)."""
    raw = r.raw("price.as_of")
    if raw is None:
        return ""
    if not isinstance(raw, str) or not _DATE.fullmatch(raw):
        raise r.fail("price.as_of", f'must be a date "YYYY-MM" or "YYYY-MM-DD", got {shown(raw)}')
    return raw


def load_chip_file(path: str | Path) -> Chip:
    return chip_from_dict(read_toml_file(path, "chip"), str(path))


@lru_cache(maxsize=1)
def _builtin() -> tuple[Chip, ...]:
    return tuple(chip_from_dict(data, where) for where, data in builtin_tomls("chips"))


def load_chips(extra: str | Path | None = None) -> tuple[Chip, ...]:
    """Built-in chips plus those in ``extra`` (a .toml file or a directory of them);
    a user chip with a built-in's name replaces it."""
    chips = {c.name: c for c in _builtin()}
    if extra is not None:
        p = Path(extra)
        try:
            is_dir = p.is_dir()
            files = sorted(p.glob("*.toml")) if is_dir else [p]
        except (OSError, ValueError):  # a name too long, a NUL byte: the reader says which
            is_dir, files = False, [p]
        if is_dir and not files:
            raise InvalidConfigError(f"catalog directory {path_text(p)} has no .toml chip files")
        for f in files:
            c = load_chip_file(f)
            chips[c.name] = c
    return tuple(chips.values())


@lru_cache(maxsize=16)
def _builtin_file_chip(key: str) -> Chip | None:
    """The built-in chip whose file is named by ``key`` (its canonical name, normalised) when that file's
    chip has that name: one file parsed instead of the whole catalog (a one-point command starts faster);
    None otherwise (an alias, a name of another spelling: the whole catalog is searched)."""
    for where, data in builtin_tomls("chips", lambda stem: _norm(stem) == key):
        chip = chip_from_dict(data, where)
        if _norm(chip.name) == key:
            return chip
    return None


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def get_chip(name: str, catalog: str | Path | None = None) -> Chip:
    """Look up a chip by canonical name or alias (case, spaces and dashes ignored), or
    load it from a path ending in .toml (e.g. a file written by ``rooftop calibrate``)."""
    if name.endswith(".toml"):
        return load_chip_file(name)
    if name.lower().endswith(BOOK_SUFFIX):
        return book_chip(get_chip(name[: -len(BOOK_SUFFIX)], catalog).name)
    key = _norm(name)
    if catalog is None:
        named = _builtin_file_chip(key)  # "h100": catalog/chips/h100.toml alone, not the 9 files
        if named is not None:
            return named
    chips = load_chips(catalog)
    for chip in chips:
        if key == _norm(chip.name) or any(key == _norm(a) for a in chip.aliases):
            return chip
    raise UnknownNameError("chip", name, [c.name for c in chips])


#: ``--chip NAME@book``: the catalog chip with the figures "How to Scale Your Model" rounds to
BOOK_SUFFIX = "@book"


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with the figure tables of ``over`` put in place (sections merged key by key)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and "value" not in value and isinstance(base.get(key), Mapping):
            out[key] = _merged(base[key], value)
        else:
            out[key] = value
    return out


@lru_cache(maxsize=16)
def book_chip(name: str) -> Chip:
    """The built-in chip ``name`` with the book's rounded figures (catalog/book/chips.toml, each
    cited to its Part) in place of its own; named ``NAME@book``. A chip the book gives no figures
    for is an error listing those it does."""
    from rooftop.catalog.io import builtin_toml

    book = builtin_toml("book", "chips.toml")
    if name not in book:
        raise UnknownNameError("book chip", name + BOOK_SUFFIX, [k + BOOK_SUFFIX for k in book])
    where, data = next((w, d) for w, d in builtin_tomls("chips") if d.get("name") == name)
    merged = _merged(data, book[name])
    merged["name"] = name + BOOK_SUFFIX
    merged["aliases"] = []
    merged["description"] = (
        f"{data.get('description', '')} With the figures of 'How to Scale Your Model' (catalog/book/chips.toml) in "
        "place of the vendor's where the book gives them."
    ).strip()
    return chip_from_dict(merged, f"{where} with catalog/book/chips.toml")
