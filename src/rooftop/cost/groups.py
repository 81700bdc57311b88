"""The groups a collective over mesh axes runs on: the segments of those axes on the
physical dims (an axis may span several dims, e.g. X=16 over a 4x4 plane, or
fabric x nvlink on GPUs). Segments of one collective on the same physical dim are
merged (X=2,Y=2 on one ring of 4 is that ring). Each group is one of three shapes:

- ring   ICI dim with wraparound. Every chip has 2 inbound links of W bytes/s (each way).
- line   ICI dim without wraparound (v5e/v6e dims shorter than 16, sub-cube v4/v5p
         slices, or part of a dim). The end chip has 1 inbound link on the dim.
- switch NVLink through NVSwitch (per GPU B = link_count x link_bytes_per_s each way),
         the GPU scale-out fabric (a fat tree with full bisection, dcn_bytes_per_s per
         GPU NIC) or the data-center network between TPU slices (dcn_bytes_per_s per chip).

A segment taking the outer factor of a dim has neighbours ``stride`` chips apart: its
logical hop is ``stride`` physical hops and ``stride`` such sub-rings share every ICI
link, so it sees W / stride. Switched links have no such sharing.

cost/collectives.py times a collective on these groups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rooftop.errors import InvalidConfigError, ShardingError, shown
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh, Segment

_SWITCHED = ("nvlink", "fabric", "dcn")
#: why a group is a line, not a ring (report/formulas.py says it in words)
LINE_REASONS = ("partial-dim", "dim-of-2", "wrap-rule")


@dataclass(frozen=True)
class Group:
    """Chips talking over one kind of link in one collective (see the module docstring).

    ``reason`` says why it has its shape: "switch" for switched links, "wraparound" for a
    ring, and for a line one of LINE_REASONS ("partial-dim": it uses part of a wrapped dim;
    "dim-of-2": a single link; "wrap-rule": the chip's slices do not wrap there)."""

    axes: tuple[str, ...]
    dim: int
    size: int
    link: str
    shape: str  # "ring" | "line" | "switch"
    wrap: bool
    stride: int
    link_bytes_per_s: float  # one path to one peer, one way, as this group sees it
    inbound_bytes_per_s: float  # what the worst-placed chip receives per second from this group
    hop_latency_s: float
    reason: str
    label: str = ""
    dim_size: int = 0  # chips on the physical dim the group lies on

    @property
    def name(self) -> str:
        """The axes it carries; "X@dim1" when an axis spans several dims."""
        return self.label or "+".join(self.axes)

    @property
    def hops(self) -> int:
        """Sequential hops (ICI) or steps (switched) to reach every peer."""
        if self.shape == "ring":
            return (self.size // 2) * self.stride
        if self.shape == "line":
            return (self.size - 1) * self.stride
        return math.ceil(math.log2(self.size)) if self.size > 1 else 0

    @property
    def gather_units(self) -> float:
        """Shards per unit of inbound path bandwidth in a one-group all-gather: the n - 1
        shards every chip receives, over its 2 ring links, 1 line link or 1 switch port."""
        return (self.size - 1) / 2 if self.shape == "ring" else float(self.size - 1)

    @property
    def gather_bytes_per_s(self) -> float:
        return self.inbound_bytes_per_s if self.shape == "switch" else self.link_bytes_per_s

    def gather_s(self, shard_bytes: float) -> float:
        """One-group all-gather bandwidth term: (n-1) S / inbound = ring (n-1)/2 S / W,
        line (n-1) S / W, switch (n-1) S / B (module docstring; the book's Parts 3 and 12)."""
        return self.gather_units * shard_bytes / self.gather_bytes_per_s

    def all_to_all_units(self) -> float:
        """Chunks per unit of path bandwidth on the busiest link: floor(n^2/4)/2 on a ring
        (both directions), floor(n^2/4) on a line (the middle link), n - 1 on a switch port."""
        n = self.size
        if self.shape == "ring":
            return (n * n // 4) / 2
        if self.shape == "line":
            return float(n * n // 4)
        return float(n - 1)

    def all_to_all_s(self, chunk_bytes: float) -> float:
        """All-to-all with ``chunk_bytes`` per (source, destination) pair (module docstring)."""
        rate = self.inbound_bytes_per_s if self.shape == "switch" else self.link_bytes_per_s
        return self.all_to_all_units() * chunk_bytes / rate


def _make_group(mesh: Mesh, chip: Chip, axes: tuple[str, ...], segs: list[Segment], name: str) -> Group:
    dim = segs[0].dim
    pd = mesh.topology.dims[dim]
    size = math.prod(s.size for s in segs)
    stride = min(s.stride for s in segs)
    if pd.link in _SWITCHED:
        if pd.link == "nvlink":
            bw, lat = chip.link_count * chip.link_bytes_per_s, chip.link_latency_s
        else:  # fabric (GPU scale-out NIC) or dcn (between TPU slices): per chip
            bw, lat = chip.dcn_bytes_per_s, chip.scaleout_latency_s
        if bw <= 0:
            raise InvalidConfigError(
                f"chip {chip.name} gives no {pd.link} bandwidth (got {bw}); "
                f"add it to the chip file to time collectives over {name}"
            )
        return Group(axes, dim, size, pd.link, "switch", False, stride, bw, bw, lat, "switch", name, pd.size)
    if chip.link_bytes_per_s <= 0:
        raise InvalidConfigError(
            f"chip {chip.name} gives no link bandwidth (links.bytes_per_s = "
            f"{chip.link_bytes_per_s}); add it to time collectives over {name}"
        )
    wrap = pd.wrap and size * stride == pd.size
    w = chip.link_bytes_per_s / stride
    if wrap:
        return Group(
            axes, dim, size, pd.link, "ring", True, stride, w, 2 * w, chip.link_latency_s, "wraparound", name, pd.size
        )
    if pd.wrap and size * stride != pd.size:
        reason = "partial-dim"
    elif pd.size == 2:
        reason = "dim-of-2"
    else:
        reason = "wrap-rule"
    return Group(axes, dim, size, pd.link, "line", False, stride, w, w, chip.link_latency_s, reason, name, pd.size)


def mesh_groups(mesh: Mesh, axes: tuple[str, ...], chip: Chip | None = None) -> tuple[Group, ...]:
    """The groups a collective over ``axes`` runs on (segments merged per physical dim)."""
    chip = chip or mesh.topology.chip
    if not axes:
        raise ShardingError(f"a collective needs at least one mesh axis (mesh axes: {mesh.spec()})")
    if len(set(axes)) != len(axes):
        twice = next(a for a in axes if axes.count(a) > 1)
        raise ShardingError(f"collective axes {shown(','.join(axes))} name axis {shown(twice)} twice; name each once")
    by_dim: dict[int, tuple[list[str], list[Segment]]] = {}
    for name in axes:
        for seg in mesh.axis(name).segments:
            names, segs = by_dim.setdefault(seg.dim, ([], []))
            if name not in names:
                names.append(name)
            segs.append(seg)
    spans = {a: sum(a in names for names, _ in by_dim.values()) for a in axes}
    out = []
    for dim, (names, segs) in sorted(by_dim.items()):
        label = "+".join(names) + (f"@dim{dim}" if any(spans[a] > 1 for a in names) else "")
        out.append(_make_group(mesh, chip, tuple(names), segs, label))
    return tuple(out)
