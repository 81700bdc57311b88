"""Replicas that span fast domains: which of a serving layout's axes (tp, pp) reach over the
scale-out network (the GPU fabric between NVLink domains, the DCN between TPU slices), and the notes
that say how their communication is priced there (cost/collectives.py stages a group over several
link kinds, each stage at its own link's bandwidth and latency). A TP group split by attn_dp or
kv_batch lies on two mesh axes (plan/serve/layout.py) and is reported as "tp" all the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rooftop.hardware.topology import SCALE_OUT_LINKS, Mesh, make_mesh
from rooftop.plan.serve.layout import ServingLayout
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

if TYPE_CHECKING:
    from rooftop.plan.serve.sweep import LayoutSummary, ServingRequest


def scale_out_axes(mesh: Mesh) -> tuple[str, ...]:
    """The replica's axes (tp, pp) that reach over the scale-out network (SCALE_OUT_LINKS): their
    collectives are priced with its bandwidth and latency for the part of the group across it."""
    names = {"tp": "tp", "attn_dp": "tp", "kv_batch": "tp", "pp": "pp"}  # the TP group may lie on two axes
    crossing = [
        names[a.name] for a in mesh.axes if a.name in names and any(s.link in SCALE_OUT_LINKS for s in a.segments)
    ]
    return tuple(dict.fromkeys(crossing))


#: most layouts a note names one by one
MAX_NAMED_LAYOUTS = 6


def crossing_notes(req: ServingRequest, summaries: Sequence[LayoutSummary]) -> list[Note]:
    """One note per axis (tp, pp) that spans fast domains in some swept layout: which layouts, over
    how many domains, and how its communication is priced there (cost/collectives.py: a group over
    several link kinds is staged, each stage at its own link's bandwidth and latency)."""
    chip = req.chip
    links = {"switched": chip.topology.kind == "switched", "dcn_bytes_per_s": chip.dcn_bytes_per_s,
             "scaleout_latency_s": chip.scaleout_latency_s, "ici_bytes_per_s": chip.ici_bytes_per_s}  # fmt: skip
    out: list[Note] = []
    for name in ("tp", "pp"):
        crossing = [s.layout for s in summaries if name in s.scale_out_axes]
        if not crossing:
            continue
        where = tuple(_spread(req, layout, name) for layout in crossing[:MAX_NAMED_LAYOUTS])
        more = len(crossing) - len(where)
        if name == "tp":
            split = any(lay.attn_dp > 1 or lay.kv_batch > 1 for lay in crossing)
            out.append(Reason.of(ReasonCode.TP_CROSSES_DOMAINS, layouts=where, more=more, split=split,
                                 all_reduces=req.cfg.tp_regions_per_layer, **links))  # fmt: skip
        else:
            out.append(Reason.of(ReasonCode.PP_CROSSES_DOMAINS, layouts=where, more=more, **links))
    return out


def _spread(req: ServingRequest, layout: ServingLayout, name: str) -> tuple[str, int, int]:
    """How axis ``name`` of ``layout`` lies on the slice: (its label, the domains it spans, the chips
    (tp) or stages (pp) in each)."""
    mesh = make_mesh(req.topology, layout.mesh_axes())
    axes = [mesh.axis(a) for a in (layout.tp_axes if name == "tp" else (name,))]
    outer = math.prod(s.size for axis in axes for s in axis.segments if s.link in SCALE_OUT_LINKS)
    size = math.prod(axis.size for axis in axes)
    return layout.label(), outer, size // outer
