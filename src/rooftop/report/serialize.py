"""Stable JSON: raw SI numbers, a schema_version, no infinities (they become null)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from json.encoder import encode_basestring_ascii
from typing import IO, TYPE_CHECKING, Any, overload

from rooftop.report.formulas import term_dict

if TYPE_CHECKING:
    from rooftop.cost.roofline import Estimate
    from rooftop.hardware.chip import Chip

#: bumped when a key is removed or changes meaning (adding keys does not bump it).
SCHEMA_VERSION = 1


class Rows(Sequence[dict[str, Any]]):
    """A list of JSON rows built when read: ``make(item)`` for each of ``items``, none kept. A payload holds
    one for a table of many rows (``rooftop hlo``'s instructions): :func:`write_json` writes the rows one at
    a time, so the whole list is never in memory, as dicts or as text."""

    __slots__ = ("items", "make")

    def __init__(self, items: Sequence[Any], make: Callable[[Any], dict[str, Any]]) -> None:
        self.items, self.make = items, make

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self.make(x) for x in self.items[index]]
        return self.make(self.items[index])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(self.make, self.items)


def _clean(obj: Any) -> Any:
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, int):  # beyond any float: null, as an infinity is (and no 4,300-digit str limit)
        return int(obj) if obj.bit_length() <= 1000 else _clean(float(obj) if obj.bit_length() < 1024 else math.inf)
    if isinstance(obj, Mapping):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, Rows)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((_clean(v) for v in obj), key=repr)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _clean({f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
    tolist = getattr(obj, "tolist", None)  # numpy scalars and arrays: Python numbers and lists
    if callable(tolist):
        return _clean(tolist())
    return obj


def to_json(payload: Mapping[str, Any]) -> str:
    """The payload as JSON: non-finite floats (numpy's too) become null, numpy values plain numbers,
    anything else JSON has no type for its ``str``."""
    body = {"schema_version": SCHEMA_VERSION, **payload}
    return json.dumps(_clean(body), indent=2, allow_nan=False, default=str)


def write_json(payload: Mapping[str, Any], out: IO[str]) -> None:
    """``to_json(payload)`` and a newline, written to ``out``: the same text, with the rows of a
    :class:`Rows` value built, encoded and written one at a time (each scalar by the json module's own
    encoders), never the whole document in memory."""
    body = {"schema_version": SCHEMA_VERSION, **payload}
    if not any(isinstance(v, Rows) for v in body.values()):
        out.write(to_json(payload) + "\n")
        return
    sep = "{"
    for key, value in body.items():
        out.write(f"{sep}\n  {encode_basestring_ascii(str(key))}: ")
        sep = ","
        if isinstance(value, Rows):
            _write_rows(value, out)
        else:
            out.write(_nested(value, "\n  "))
    out.write("\n}\n")


def _nested(value: Any, newline: str) -> str:
    """A value as ``json.dumps(..., indent=2)`` writes it at the depth whose line break is ``newline``."""
    return json.dumps(_clean(value), indent=2, allow_nan=False, default=str).replace("\n", newline)


def _value(v: Any, newline: str) -> str:
    """One value at the depth whose line break is ``newline``, as ``json.dumps(_clean(v), indent=2)`` writes
    it there: strings, None, finite floats, ints and lists of them by the json module's own scalar
    encoders (``float.__repr__``, ``int.__repr__``, its ASCII string escaper), anything else by
    :func:`_nested`."""
    cls = v.__class__
    if cls is str:
        return encode_basestring_ascii(v)
    if v is None:
        return "null"
    if cls is float and math.isfinite(v):
        return float.__repr__(v)
    if cls is int and v.bit_length() <= 1000:
        return int.__repr__(v)
    if (cls is list or cls is tuple) and v:
        inner = newline + "  "
        return f"[{inner}{(',' + inner).join([_value(x, inner) for x in v])}{newline}]"
    return _nested(v, newline)  # bools, non-finite floats, huge ints, empty lists, dicts, numpy values


#: the most float texts one table keeps for reuse
_FLOAT_TEXTS = 1 << 16


def _write_rows(rows: Rows, out: IO[str]) -> None:
    """A list of flat dicts at depth 1, as the indenting encoder writes it (each value by :func:`_value`,
    the common scalars inline; each key's text, comma and indent made once per run of rows with the same
    keys; the text of a float written before, as repeated layers repeat values, looked up instead of
    made again: float.__repr__ is the dearest step)."""
    float_repr, int_repr, escape = float.__repr__, int.__repr__, encode_basestring_ascii
    floats: dict[float, str] = {}  # the text of each nonzero float written, up to _FLOAT_TEXTS of them
    names: tuple[Any, ...] = ()
    prefixes: list[str] = []
    sep = "["
    for row in rows:
        if not row:
            out.write(f"{sep}\n    {{}}")
            sep = ","
            continue
        if tuple(row) != names:
            names = tuple(row)
            prefixes = [("" if i == 0 else ",") + f"\n      {escape(str(k))}: " for i, k in enumerate(names)]
        parts = []
        for prefix, v in zip(prefixes, row.values(), strict=True):
            parts.append(prefix)
            cls = v.__class__
            if cls is str:
                parts.append(escape(v))
            elif v is None:
                parts.append("null")
            elif cls is float and v - v == 0.0:  # finite
                text = floats.get(v) if v else None  # 0.0 == -0.0: zeros are never looked up
                if text is None:
                    text = float_repr(v)
                    if v and len(floats) < _FLOAT_TEXTS:
                        floats[v] = text
                parts.append(text)
            elif cls is int and v.bit_length() <= 1000:
                parts.append(int_repr(v))
            else:
                parts.append(_value(v, "\n      "))
        out.write(f"{sep}\n    {{{''.join(parts)}\n    }}")
        sep = ","
    out.write("[]" if sep == "[" else "\n  ]")


def payload_dict(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The payload as the JSON ``to_json`` writes reads back: the dict a notebook's ``to_dict()`` returns."""
    return dict(json.loads(to_json(payload)))


def estimate_dict(est: Estimate) -> dict[str, Any]:
    """The roofline keys every command shares."""
    return {
        "chip": est.chip,
        "flops": est.flops,
        "hbm_bytes": est.hbm_bytes,
        "arithmetic_intensity": est.arithmetic_intensity,
        "critical_intensity": est.critical_intensity,
        "compute_s": est.compute_s,
        "memory_s": est.memory_s,
        "network_s": est.network_s,
        "lower_bound_s": est.lower_bound_s,
        "upper_bound_s": est.upper_bound_s,
        "bound": est.bound,
        "terms": [term_dict(t) for t in est.terms],
    }


def chip_dict(chip: Chip) -> dict[str, Any]:
    topo = chip.topology
    return {
        "name": chip.name,
        "vendor": chip.vendor,
        "kind": chip.kind,
        "aliases": list(chip.aliases),
        "description": chip.description,
        "matrix_flops_per_s": dict(chip.matrix_flops_per_s),
        "vector_flops_per_s": dict(chip.vector_flops_per_s),
        "hbm_bytes": chip.hbm_capacity_bytes,
        "hbm_bytes_per_s": chip.hbm_bytes_per_s,
        "on_chip_bytes": dict(chip.on_chip_bytes),
        "links": {
            "kind": chip.link_kind,
            "count": chip.link_count,
            "bytes_per_s_per_link": chip.link_bytes_per_s,
            "hop_latency_s": chip.link_latency_s,
        },
        "host_bytes_per_s": chip.host_bytes_per_s,
        "dcn_bytes_per_s": chip.dcn_bytes_per_s,
        "price_usd_per_chip_hour": chip.price_usd_per_hour,
        "price_as_of": chip.price_as_of or None,
        "power_w": chip.power_w,
        "critical_intensity_bf16": chip.critical_intensity("bf16"),
        "topology": {
            "kind": topo.kind,
            "max_dims": list(topo.max_dims),
            "max_chips": topo.max_chips,
            "wraparound": topo.wraparound,
            "domain_sizes": list(topo.domain_sizes),
            "source": topo.source,
        },
        "internals": {
            **dataclasses.asdict(chip.internals),
            "tensor_cores": chip.internals.tensor_cores,
            "matrix_peak_from_internals_flops_per_s": chip.matrix_peak_from_internals(),
        },
        "fabric": dataclasses.asdict(chip.fabric),
        "sources": {k: {"value": f.value, "source": f.source, "note": f.note} for k, f in chip.sources.items()},
        "file": chip.path,
    }
