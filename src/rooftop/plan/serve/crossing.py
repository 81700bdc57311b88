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
from rooftop.units import format_duration, format_rate, plural

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


def crossing_notes(req: ServingRequest, summaries: Sequence[LayoutSummary]) -> list[str]:
    """One note per axis (tp, pp) that spans fast domains in some swept layout: which layouts, over
    how many domains, and how its communication is priced there (cost/collectives.py: a group over
    several link kinds is staged, each stage at its own link's bandwidth and latency)."""
    chip = req.chip
    switched = chip.topology.kind == "switched"
    domains, net = ("NVLink domains", "scale-out fabric") if switched else ("slices", "data-center network")
    fast = "NVLink" if switched else "ICI"
    rates = (
        f"{format_rate(chip.dcn_bytes_per_s)} per chip and {format_duration(chip.scaleout_latency_s)} a hop, "
        f"against {format_rate(chip.ici_bytes_per_s)} per chip over {fast}"
    )
    out = []
    for name in ("tp", "pp"):
        crossing = [s.layout for s in summaries if name in s.scale_out_axes]
        if not crossing:
            continue
        where = [_spread(req, layout, name) for layout in crossing[:MAX_NAMED_LAYOUTS]]
        more = len(crossing) - len(where)
        if name == "tp":
            per_layer = req.cfg.tp_regions_per_layer
            how = (
                f"its {plural(per_layer, 'all-reduce')} per layer are priced hierarchically: reduce-scatter and "
                f"all-gather over {fast} inside each, the all-reduce between them over the {net} ({rates})"
            )
            if any(lay.attn_dp > 1 or lay.kv_batch > 1 for lay in crossing):
                how += (
                    "; under attn_dp the all-gather before and the reduce-scatter after each MLP, and under kv_batch "
                    "the all-to-alls of attention, are staged over the same links"
                )
        else:
            how = f"the activations sent between its stages cross the {net} ({rates})"
        listed = ", ".join(where) + (f" and {plural(more, 'more layout')}" if more else "")
        out.append(f"{name} crosses {domains} in {listed}: {how}")
    return out


def _spread(req: ServingRequest, layout: ServingLayout, name: str) -> str:
    """ "tp=16 x1 (over 2 domains, 8 chips in each)": how axis ``name`` of ``layout`` lies on the slice."""
    mesh = make_mesh(req.topology, layout.mesh_axes())
    axes = [mesh.axis(a) for a in (layout.tp_axes if name == "tp" else (name,))]
    outer = math.prod(s.size for axis in axes for s in axis.segments if s.link in SCALE_OUT_LINKS)
    size = math.prod(axis.size for axis in axes)
    inner = plural(size // outer, "chip" if name == "tp" else "stage")
    return f"{layout.label()} (over {outer} domains, {inner} in each)"
