"""A point-to-point transfer between two chips of a slice (numbers only; report/p2p.py writes them).

"How to Scale Your Model", Part 2 Question 5 (a bf16[8, 128, 8192] array from TPU{0, 0} to TPU{3, 3}
of a v5e 4x4): the route takes the shortest way along each dim (the shorter of the two ways round on a
dim with wraparound, |a - b| on one without), so the hops are the sum over dims; the source sends over
one link per dim on which the chips differ (the array split across them, "half right and half down"),
so the bandwidth is that many links' one-way figure. The first byte arrives after hops x hop latency;
the whole array after that plus bytes / bandwidth (store and forward is pipelined: each hop adds its
latency, not the array's time).

Switched dims (NVLink, the scale-out fabric, the data-center network) take one step through the
switch, at the chip's bandwidth on that link kind: NVLink's link_count x link bandwidth, the NIC's on
a fabric or DCN dim. A transfer that crosses a switched dim and ICI dims is limited by the slower.
"""

from __future__ import annotations

from dataclasses import dataclass

from rooftop.errors import InvalidConfigError, shown
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Topology

_SWITCHED = ("nvlink", "fabric", "dcn")


@dataclass(frozen=True)
class DimRoute:
    """The route's leg along one physical dim."""

    dim: int
    link: str
    size: int
    wrap: bool
    offset: int  # coordinate of the destination minus the source's
    hops: int
    bytes_per_s: float  # what the source sends over this leg
    latency_s: float  # per hop


@dataclass(frozen=True)
class Transfer:
    src: tuple[int, ...]
    dst: tuple[int, ...]
    bytes: float
    legs: tuple[DimRoute, ...]  # the dims on which the chips differ

    @property
    def hops(self) -> int:
        return sum(leg.hops for leg in self.legs)

    @property
    def first_byte_s(self) -> float:
        return sum(leg.hops * leg.latency_s for leg in self.legs)

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """ICI legs add up (one link each, the array split over them); a switched leg caps the rate."""
        ici = sum(leg.bytes_per_s for leg in self.legs if leg.link not in _SWITCHED)
        switched = [leg.bytes_per_s for leg in self.legs if leg.link in _SWITCHED]
        rates = [r for r in (ici, *switched) if r > 0]
        return min(rates) if rates else 0.0

    @property
    def bandwidth_time_s(self) -> float:
        rate = self.bandwidth_bytes_per_s
        return self.bytes / rate if rate else 0.0

    @property
    def time_s(self) -> float:
        return self.first_byte_s + self.bandwidth_time_s


def _leg(chip: Chip, dim: int, size: int, link: str, wrap: bool, offset: int) -> DimRoute:
    if link in _SWITCHED:
        if link == "nvlink":
            rate, lat = chip.link_count * chip.link_bytes_per_s, chip.link_latency_s
        else:
            rate, lat = chip.dcn_bytes_per_s, chip.scaleout_latency_s
        return DimRoute(dim, link, size, False, offset, 1, rate, lat)
    d = abs(offset)
    hops = min(d, size - d) if wrap else d
    return DimRoute(dim, link, size, wrap, offset, hops, chip.link_bytes_per_s, chip.link_latency_s)


def parse_coords(text: str, topology: Topology, what: str) -> tuple[int, ...]:
    """ "3,3" -> (3, 3), one coordinate per physical dim of ``topology``, each in [0, size)."""
    parts = [p.strip() for p in text.split(",")]
    shape = topology.shape
    if len(parts) != len(shape) or not all(p.isdigit() for p in parts):
        example = ",".join("0" for _ in shape)
        raise InvalidConfigError(
            f"{what} {shown(text)}: give {len(shape)} whole coordinates for topology {topology.spec}, e.g. {example}"
        )
    coords = tuple(int(p) for p in parts)
    for i, (c, n) in enumerate(zip(coords, shape, strict=True)):
        if c >= n:
            raise InvalidConfigError(f"{what} {shown(text)}: coordinate {c} of dim {i} is outside 0..{n - 1}")
    return coords


def p2p_transfer(topology: Topology, src: tuple[int, ...], dst: tuple[int, ...], nbytes: float) -> Transfer:
    """Route ``nbytes`` from chip ``src`` to chip ``dst`` of ``topology`` (see the module docstring)."""
    chip = topology.chip
    if src == dst:
        raise InvalidConfigError(f"source and destination are the same chip {src}; give two different chips")
    legs = tuple(
        _leg(chip, i, pd.size, pd.link, pd.wrap, b - a)
        for i, (pd, a, b) in enumerate(zip(topology.dims, src, dst, strict=True))
        if a != b
    )
    return Transfer(src, dst, nbytes, legs)
