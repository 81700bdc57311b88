"""Terms into words: the formula behind every number, written from the figures a Term holds.

cost/ and the planners return numbers only (``Term``: seconds, the rule that gave them and
the figures they came from; ``CollectiveTime``: every group, level and candidate of the
bandwidth term). This module is the one place those numbers become text, so a formula is
written once whichever command prints it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rooftop.units import format_bytes, format_duration, format_number, format_plain, format_rate, plural

if TYPE_CHECKING:  # types only: a command that prints one roofline loads no collective model
    from rooftop.cost.collectives import BandwidthPart, CollectiveTime
    from rooftop.cost.groups import Group
    from rooftop.cost.roofline import Term
    from rooftop.hardware.chip import Chip


def _eff(factor: float) -> str:
    return f" x {factor:g}" if factor != 1 else ""


def _flops(t: Term) -> str:
    used, dtype = t.figure("used_dtype"), t.figure("dtype")
    note = f" ({dtype} runs at {used} peak)" if used != dtype else ""
    shape = t.figure("shape_efficiency") if t.figure("shape_applied", False) else None
    reach = t.figure("achievable_fraction", 1.0)
    if reach != 1:
        note += f"; x {reach:g}, the largest matmuls' measured share of {used} peak on {t.figure('chip')}"
    if shape is not None:
        note += f"; x {shape:.3g} for the shape {t.figure('gemm')} on the matrix unit (tiles, waves)"
    return (
        f"{format_number(t.figure('flops'), 'FLOP')} / ({t.figure('chip')} {t.figure('unit')} {used} "
        f"{format_rate(t.figure('peak_flops_per_s'), 'FLOP/s')}{_eff(t.figure('efficiency'))}{_eff(reach)}"
        f"{_eff(shape) if shape is not None else ''}){note}"
    )


def _shapes(factor: float | None) -> str:
    return f" x {factor:.3g} for the matmuls' shapes" if factor is not None and factor != 1 else ""


def _hbm(t: Term) -> str:
    return (
        f"{format_bytes(t.figure('bytes'))} / ({t.figure('chip')} HBM {format_rate(t.figure('hbm_bytes_per_s'))}"
        f"{_eff(t.figure('efficiency'))})"
    )


def _collective(t: Term) -> str:
    ct = t.collective
    assert ct is not None  # rule "collective" always holds it
    count = t.figure("count", 1.0)
    text = collective_formula(ct)
    return text if count == 1 else f"{format_plain(count)} x ({text})"


def _ops(t: Term) -> str:
    """Sum over ops of max(compute, memory), the ops split by which term is the larger."""
    n = t.figure("ops")
    if t.kind == "compute":
        return (
            f"{plural(n, 'compute-bound op')}: {format_number(t.figure('flops'), 'FLOP')} at "
            f"{format_rate(t.figure('flops_per_s'), 'FLOP/s')} ({t.figure('chip')} peak{_eff(t.figure('efficiency'))}"
            f"{_eff(t.figure('achievable_fraction', 1.0))}{_shapes(t.figure('shape_efficiency', None))}"
            f"{t.figure('per', '')})"
        )
    return (
        f"{plural(n, 'memory-bound op')}: {format_bytes(t.figure('bytes'))} / ({t.figure('chip')} HBM "
        f"{format_rate(t.figure('hbm_bytes_per_s'))}{_eff(t.figure('efficiency'))}){t.figure('per', '')}"
    )


def _hidden(t: Term) -> str:
    return (
        f"{format_duration(-t.seconds)} of the {format_duration(t.figure('communication_s'))} hidden behind "
        f"{t.figure('cover')} ({t.figure('rule', _LAYER_HIDING).format(overlap=t.figure('overlap'))})"
    )


#: how a training step hides communication (plan/train/comm.py); a term may name its own rule
_LAYER_HIDING = "per layer: min(communication, {overlap:g} x compute not yet covering other communication)"


def _bubble(t: Term) -> str:
    return (
        f"(p-1)/v x microbatch time = ({t.figure('pp'):g}-1)/{t.figure('virtual_stages'):g} x "
        f"{format_duration(t.figure('microbatch_s'))}"
    )


def _launch(t: Term) -> str:
    return (
        f"{plural(t.figure('layers'), 'layer')} x {plural(t.figure('kernels_per_layer'), 'kernel')} x "
        f"{format_duration(t.figure('kernel_s'))}"
    )


def _per_step(t: Term) -> str:
    text = f"{format_duration(t.figure('step_s'))} per step"
    if t.figure("step_per_seq_s", 0.0):
        text += f" + {plural(t.figure('sequences'), 'sequence')} x {format_duration(t.figure('step_per_seq_s'))}"
    return text + " (runtime, scheduling, sampling, host sync)"


def _per_seq(t: Term) -> str:
    return (
        f"{plural(t.figure('sequences'), 'sequence')} x {format_duration(t.figure('step_per_seq_s'))} "
        "(sampling, scheduling and attention metadata per running sequence)"
    )


def _eager(t: Term) -> str:
    return (
        f"{plural(t.figure('kernels'), 'kernel')} x {format_duration(t.figure('kernel_eager_s'))} issued by the host "
        f"(no CUDA graph above {t.figure('graph_max_batch'):g} tokens) beyond the device's time of the step"
    )


def _host(t: Term) -> str:
    return (
        f"{format_bytes(t.figure('bytes'))} over the host link / {format_rate(t.figure('host_bytes_per_s'))} "
        f"({t.figure('what', '')})"
    )


def _sync(t: Term) -> str:
    return (
        f"{t.figure('count'):g} sends/receives x {format_duration(t.figure('seconds_each'))} host synchronisation "
        f"each ({t.figure('framework')})"
    )


def _contention(t: Term) -> str:
    return (
        f"{format_duration(t.figure('hidden_s'))} of collectives hidden behind compute x {t.figure('overlap_cost'):g} "
        f"s of compute lost per hidden second ({t.figure('framework')}: its collectives run on the compute's SMs)"
    )


_RULES: dict[str, Callable[[Term], str]] = {
    "flops": _flops,
    "hbm": _hbm,
    "collective": _collective,
    "ops": _ops,
    "hidden": _hidden,
    "bubble": _bubble,
    "launch": _launch,
    "per_step": _per_step,
    "per_seq": _per_seq,
    "eager": _eager,
    "host": _host,
    "sync": _sync,
    "contention": _contention,
}


def term_formula(t: Term) -> str:
    """The formula of one Term, from its rule and figures."""
    rule = _RULES.get(t.rule)
    return rule(t) if rule else f"{format_duration(t.seconds)}"


def term_dict(t: Term) -> dict[str, object]:
    """A Term in the JSON contract: name, seconds, formula (and its bound kind)."""
    return {"name": t.name, "time_s": t.seconds, "kind": t.kind, "formula": term_formula(t)}


# ---------------------------------------------------------------- collectives


def _part(p: BandwidthPart) -> str:
    names = ",".join(p.names)
    scale = "2 x " if p.factor == 2 else ""
    if p.rule == "gather":
        units = f"({p.size}-1)/2" if p.shape == "ring" else f"({p.size}-1)"
        return (
            f"{scale}{names} {p.shape} of {p.size}: {units} x {format_bytes(p.chunk_bytes)} / "
            f"{format_rate(p.bytes_per_s)} = {format_duration(p.seconds)}"
        )
    if p.rule == "ingress":
        return (
            f"{scale}{names} together ({p.shape}, {plural(p.size, 'chip')}): ({p.size}-1) x "
            f"{format_bytes(p.chunk_bytes)} / {format_rate(p.bytes_per_s)} inbound = {format_duration(p.seconds)}"
        )
    if p.rule == "sharp":
        return (
            f"{names} in-network all-reduce: {p.size} x {format_bytes(p.chunk_bytes)} / "
            f"{format_rate(p.bytes_per_s)} = {format_duration(p.seconds)}"
        )
    if p.rule == "all-to-all":
        load = {"ring": f"floor({p.size}^2/4)/2", "line": f"floor({p.size}^2/4)", "switch": f"({p.size}-1)"}[p.shape]
        return (
            f"{names} {p.shape} of {p.size}: {load} x {format_bytes(p.chunk_bytes)} / "
            f"{format_rate(p.bytes_per_s)} = {format_duration(p.seconds)}"
        )
    if p.rule == "ring":
        return (
            f"{scale}one ring over {plural(p.size, 'chip')}, {names} entered at {format_rate(p.bytes_per_s)}: "
            f"({p.size}-1) x {format_bytes(p.chunk_bytes)} / {format_rate(p.bytes_per_s)} = "
            f"{format_duration(p.seconds)}"
        )
    if p.rule == "egress":
        return (
            f"egress ({p.size}-1) x {format_bytes(p.chunk_bytes)} / all links {format_rate(p.bytes_per_s)} = "
            f"{format_duration(p.seconds)}"
        )
    if p.rule != "permute":  # a registered algorithm's schedule (cost/algorithms.py)
        return (
            f"{scale}{p.rule} over {plural(p.size, 'chip')}, {names} ({p.shape}): {p.units:g} x "
            f"{format_bytes(p.chunk_bytes)} / {format_rate(p.bytes_per_s)} = {format_duration(p.seconds)}"
        )
    return f"{names}: {format_bytes(p.chunk_bytes)} / {format_rate(p.bytes_per_s)} = {format_duration(p.seconds)}"


def collective_formula(ct: CollectiveTime) -> str:
    """The bandwidth and latency terms of one collective, with every figure."""
    axes = ",".join(ct.axes)
    head = f"{ct.kind} of {format_bytes(ct.bytes_per_device)} per device over {axes} ({plural(ct.devices, 'device')})"
    if ct.devices == 1:
        return f"{head}: nothing moves"
    chosen = [_part(p) for p in ct.chosen]
    bw_raw = ct.bandwidth_time_s * ct.network_efficiency
    bw_txt = chosen[0] if len(chosen) == 1 else "max(" + "; ".join(chosen) + f") = {format_duration(bw_raw)}"
    if ct.network_efficiency != 1:
        bw_txt += f", / network efficiency {ct.network_efficiency:g} = {format_duration(ct.bandwidth_time_s)}"
    if ct.additive:  # a ring: its steps' latency adds to the bandwidth term (cost/collectives.py, "Algorithm")
        return (
            f"{head}: bandwidth {bw_txt}; latency of {ct.hops} {ct.algorithm} steps = "
            f"{format_duration(ct.latency_time_s)}; "
            f"bandwidth + latency = {format_duration(ct.time_s)}"
        )
    lat_txt = " + ".join(f"{g.hops} x {format_duration(g.group.hop_latency_s)}" for g in ct.groups if g.hops)
    hops = ct.hops
    return (
        f"{head}: bandwidth {bw_txt}; latency {hops} hop{'' if hops == 1 else 's'} ({lat_txt or '0'}) = "
        f"{format_duration(ct.latency_time_s)}; {ct.bound}-bound"
    )


def _wrap_rule(chip: Chip) -> str:
    spec = chip.topology
    if spec.wraparound == "full-axis":
        return f"{chip.name} dims wrap only at the full length {spec.wrap_length}"
    if spec.wraparound == "whole-cubes":
        cube = "x".join(map(str, spec.cube or (4, 4, 4)))
        return f"{chip.name} slices wrap only when built of whole {cube} cubes"
    return f"{chip.name} has no wraparound links"


def group_why(g: Group, chip: Chip) -> str:
    """Why a group has its shape and bandwidth, in words."""
    if g.shape == "switch":
        if g.link == "nvlink":
            return (
                f"{g.name}: {g.size} GPUs on the NVLink switch, {chip.link_count} links x "
                f"{format_rate(chip.link_bytes_per_s)} = {format_rate(g.inbound_bytes_per_s)} per GPU each way"
            )
        if g.link == "fabric":
            return (
                f"{g.name}: {g.size} nodes over the scale-out fabric (fat tree, full bisection), "
                f"one {format_rate(g.inbound_bytes_per_s)} NIC per GPU"
            )
        rate = format_rate(g.inbound_bytes_per_s)
        return f"{g.name}: {g.size} TPU slices over the data-center network, {rate} per chip"
    share = (
        f"; neighbours are {g.stride} chips apart, so {g.stride} such groups share each link "
        f"({format_rate(chip.link_bytes_per_s)} / {g.stride})"
        if g.stride > 1
        else ""
    )
    if g.shape == "ring":
        ring = f"ring of {plural(g.size, g.link.upper() + ' chip')} with wraparound (dim {g.dim})"
        return f"{g.name}: {ring}, shards flow both ways{share}"
    reason = {
        "partial-dim": f"it uses {g.size} of the {g.dim_size} chips of dim {g.dim}",
        "dim-of-2": "a dim of 2 has a single link between its chips",
    }.get(g.reason) or _wrap_rule(chip)
    return (
        f"no wraparound on {g.name}: line of {g.size} ({reason}), so edge shards travel {g.size - 1} "
        f"hop{'' if g.size == 2 else 's'} over one-way links{share}"
    )


def collective_why(ct: CollectiveTime, chip: Chip) -> str:
    """Why the collective takes what it takes: each group's links, SHARP, the hierarchy."""
    if ct.devices == 1:
        return f"axes {','.join(ct.axes)} have size 1: nothing moves"
    if not ct.groups and ct.chosen:  # a flat algorithm (cost/algorithms.py): one schedule over every group
        p = ct.chosen[0]
        why = f"{ct.algorithm}: one schedule over all {plural(ct.devices, 'chip')}, {','.join(p.names)} sets the pace"
        adds = "; its steps' latency adds to the bandwidth term (each step waits for its slowest hop)"
        return why + (adds if ct.additive else "")
    why = "; ".join(group_why(g.group, chip) for g in ct.groups)
    if ct.sharp and ct.kind != "all-reduce":
        why += "; in-network reduction (SHARP) changes only all-reduces"
    elif ct.sharp:
        why += "; in-network reduction (SHARP): the switch sums, so each GPU sends and receives V once"
    if ct.hierarchical:
        why += "; hierarchical: slowest links first with the smallest shards, stages pipelined (max of levels)"
    return why
