"""Stable JSON: raw SI numbers, a schema_version, no infinities (they become null)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

from rooftop.cost.roofline import Estimate
from rooftop.hardware.chip import Chip
from rooftop.report.formulas import term_dict

#: bumped when a key is removed or changes meaning (adding keys does not bump it).
SCHEMA_VERSION = 1


def _clean(obj: Any) -> Any:
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, int):  # beyond any float: null, as an infinity is (and no 4,300-digit str limit)
        return int(obj) if obj.bit_length() <= 1000 else _clean(float(obj) if obj.bit_length() < 1024 else math.inf)
    if isinstance(obj, Mapping):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
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
