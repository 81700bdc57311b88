"""Terms into words: the formula behind every number, written from the figures a Term holds.

cost/ and the planners return numbers only (``Term``: seconds, the rule that gave them and
the figures they came from; ``CollectiveTime``: every group, level and candidate of the
bandwidth term). This module is the one place those numbers become text, so a formula is
written once whichever command prints it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

from rooftop.cost.figures import (
    BubbleFigures,
    CollectiveFigures,
    ContentionFigures,
    EagerFigures,
    FlopsFigures,
    HbmFigures,
    HiddenFigures,
    HostFigures,
    LaunchFigures,
    OpsComputeFigures,
    OpsMemoryFigures,
    PerSeqFigures,
    PerStepFigures,
    SyncFigures,
)
from rooftop.units import format_bytes, format_duration, format_number, format_plain, format_rate, plural

if TYPE_CHECKING:  # types only: a command that prints one roofline loads no collective model
    from rooftop.cost.collectives import BandwidthPart, CollectiveTime
    from rooftop.cost.groups import Group
    from rooftop.cost.roofline import Term
    from rooftop.hardware.chip import Chip


def _eff(factor: float) -> str:
    return f" x {factor:g}" if factor != 1 else ""


def _flops(f: FlopsFigures) -> str:
    used, dtype = f.used_dtype, f.dtype
    note = f" ({dtype} runs at {used} peak)" if used != dtype else ""
    shape = f.shape_efficiency if f.shape_applied else None
    reach = f.achievable_fraction if f.achievable_fraction is not None else 1.0
    if reach != 1:
        note += f"; x {reach:g}, the largest matmuls' measured share of {used} peak on {f.chip}"
    if shape is not None:
        note += f"; x {shape:.3g} for the shape {f.gemm} on the matrix unit (tiles, waves)"
    return (
        f"{format_number(f.flops, 'FLOP')} / ({f.chip} {f.unit} {used} "
        f"{format_rate(f.peak_flops_per_s, 'FLOP/s')}{_eff(f.efficiency)}{_eff(reach)}"
        f"{_eff(shape) if shape is not None else ''}){note}"
    )


def _shapes(factor: float | None) -> str:
    return f" x {factor:.3g} for the matmuls' shapes" if factor is not None and factor != 1 else ""


def _hbm(f: HbmFigures) -> str:
    return f"{format_bytes(f.bytes)} / ({f.chip} HBM {format_rate(f.hbm_bytes_per_s)}{_eff(f.efficiency)})"


def _collective(t: Term, f: CollectiveFigures) -> str:
    ct = t.collective
    assert ct is not None  # rule "collective" always holds it
    text = collective_formula(ct)
    return text if f.calls == 1 else f"{format_plain(f.calls)} x ({text})"


def _per(microbatches: int | None) -> str:
    return "" if microbatches is None else f", over {plural(microbatches, 'microbatch', 'microbatches')}"


def _ops_compute(f: OpsComputeFigures) -> str:
    """Sum over the compute-bound ops of their FLOPs at the rate they reach."""
    return (
        f"{plural(f.ops, 'compute-bound op')}: {format_number(f.flops, 'FLOP')} at "
        f"{format_rate(f.flops_per_s, 'FLOP/s')} ({f.chip} peak{_eff(f.efficiency)}"
        f"{_eff(f.achievable_fraction)}{_shapes(f.shape_efficiency)}{_per(f.microbatches)})"
    )


def _ops_memory(f: OpsMemoryFigures) -> str:
    """Sum over the memory-bound ops of their bytes at the HBM rate."""
    return (
        f"{plural(f.ops, 'memory-bound op')}: {format_bytes(f.bytes)} / ({f.chip} HBM "
        f"{format_rate(f.hbm_bytes_per_s)}{_eff(f.efficiency)}){_per(f.microbatches)}"
    )


def _hidden(t: Term, f: HiddenFigures) -> str:
    return (
        f"{format_duration(-t.seconds)} of the {format_duration(f.communication_s)} hidden behind "
        f"{f.cover} ({(f.rule or _LAYER_HIDING).format(overlap=f.overlap)})"
    )


#: how a training step hides communication (plan/train/comm.py); a term may name its own rule
_LAYER_HIDING = "per layer: min(communication, {overlap:g} x compute not yet covering other communication)"


def _bubble(f: BubbleFigures) -> str:
    return f"(p-1)/v x microbatch time = ({f.pp:g}-1)/{f.virtual_stages:g} x {format_duration(f.microbatch_s)}"


def _launch(f: LaunchFigures) -> str:
    return f"{plural(f.layers, 'layer')} x {plural(f.kernels_per_layer, 'kernel')} x {format_duration(f.kernel_s)}"


def _per_step(f: PerStepFigures) -> str:
    return f"{format_duration(f.step_s)} per step (runtime, scheduling, sampling, host sync)"


def _per_seq(f: PerSeqFigures) -> str:
    return (
        f"{plural(f.sequences, 'sequence')} x {format_duration(f.step_per_seq_s)} "
        "(sampling, scheduling and attention metadata per running sequence)"
    )


def _eager(f: EagerFigures) -> str:
    return (
        f"{plural(f.kernels, 'kernel')} x {format_duration(f.kernel_eager_s)} issued by the host "
        f"(no CUDA graph above {f.graph_max_batch:g} tokens) beyond the device's time of the step"
    )


def _host(f: HostFigures) -> str:
    return f"{format_bytes(f.bytes)} over the host link / {format_rate(f.host_bytes_per_s)} ({f.what})"


def _sync(f: SyncFigures) -> str:
    return f"{f.calls:g} sends/receives x {format_duration(f.seconds_each)} host synchronisation each ({f.framework})"


def _contention(f: ContentionFigures) -> str:
    return (
        f"{format_duration(f.hidden_s)} of collectives hidden behind compute x {f.overlap_cost:g} "
        f"s of compute lost per hidden second ({f.framework}: its collectives run on the compute's SMs)"
    )


def term_formula(t: Term) -> str:
    """The formula of one Term, from its figures (their type is its rule: cost/figures.py). A figures
    type without a case here fails the type check (``assert_never``)."""
    match t.figures:
        case FlopsFigures() as f:
            return _flops(f)
        case HbmFigures() as f:
            return _hbm(f)
        case CollectiveFigures() as f:
            return _collective(t, f)
        case OpsComputeFigures() as f:
            return _ops_compute(f)
        case OpsMemoryFigures() as f:
            return _ops_memory(f)
        case HiddenFigures() as f:
            return _hidden(t, f)
        case BubbleFigures() as f:
            return _bubble(f)
        case LaunchFigures() as f:
            return _launch(f)
        case PerStepFigures() as f:
            return _per_step(f)
        case PerSeqFigures() as f:
            return _per_seq(f)
        case EagerFigures() as f:
            return _eager(f)
        case HostFigures() as f:
            return _host(f)
        case SyncFigures() as f:
            return _sync(f)
        case ContentionFigures() as f:
            return _contention(f)
        case _ as f:
            assert_never(f)


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
