"""The book's own rules for a collective, beside rooftop's (numbers only; report/book.py writes them).

"How to Scale Your Model" (Austin et al., jax-ml/scaling-book) prices collectives with simpler
rules than cost/collectives.py. rooftop keeps the exact (N-1)/N of every gather; the book drops
it where it works on TPU tori and keeps it on GPUs:

- Part 3, "How long does this take?" (TPU ICI): an all-gather of an array of V bytes (the size
  each chip holds after gathering) over one wrapped axis takes V / W_bidir, W_bidir = 2 W the
  bidirectional bandwidth of one link pair; over several axes V / (W_bidir x n_axes) (the summary
  table's "bytes / (bidirectional ICI bandwidth x num_axes)"). Without wraparound (Pop Quiz 2,
  v5e 8x4) the edge shard walks N - 1 hops over one-way links: (N-1) x S / W, S = V / N. One rule
  covers both: V / sum of the groups' book bandwidth, 2 W for a ring and N W / (N-1) for a line.
  A reduce-scatter costs the same with V the size going in; an all-reduce twice (Part 3: "2x the
  above cost"); an all-to-all a quarter of the all-gather of the same global array on a
  bidirectional ring (G = N x V for a per-device buffer V: N V / (4 sum W_book)).
- Part 12, "How to Think About GPUs" (NVLink switch, scale-out fabric): the book keeps the
  (N-1)/N factor, V (N-1) / (N W) per level, so its figure is rooftop's (the same rule), and so
  for the data-center network between TPU slices and for a permute (one link, V / W).
- Latency (Part 3, "A note on ICI latency"): about 1 us per hop over the longest path,
  sum |X_i| / 2; rooftop's hop count and hop latency are used unchanged, and the time is the
  larger of the two terms, as in the book.

Network efficiency is rooftop's, not the book's: the book's figures are at peak link bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rooftop.cost.collectives import CollectiveTime
from rooftop.cost.groups import Group

#: link kinds priced by Part 12's switched rule (Part 3's ICI rules cover ring and line groups)
_SWITCHED = ("nvlink", "fabric", "dcn")


@dataclass(frozen=True)
class BookLevel:
    """One level (link kind) of the book's rule: ``factor`` x ``array_bytes`` / ``bytes_per_s`` =
    ``seconds``. ``rule`` is "ici" (Part 3: V / sum W_book), "switch" (Part 12, the same rule as
    rooftop's) or "same" (a collective the book prices as rooftop does: permute, SHARP)."""

    link: str
    rule: str
    groups: tuple[Group, ...]
    array_bytes: float
    bytes_per_s: float
    factor: float
    seconds: float


@dataclass(frozen=True)
class BookCollective:
    """The book's time for a collective: bandwidth (max over levels) and rooftop's latency."""

    kind: str
    bandwidth_time_s: float
    latency_time_s: float
    levels: tuple[BookLevel, ...]
    part: str

    @property
    def time_s(self) -> float:
        return max(self.bandwidth_time_s, self.latency_time_s)

    @property
    def bound(self) -> str:
        return "bandwidth" if self.bandwidth_time_s >= self.latency_time_s else "latency"


def book_bytes_per_s(g: Group) -> float:
    """The book's bandwidth of one ICI group for a gather: 2 W on a ring (W_bidir), N W / (N-1)
    on a line (so that V over it is the Pop Quiz's (N-1) S / W)."""
    if g.shape == "ring":
        return 2 * g.link_bytes_per_s
    return g.size * g.link_bytes_per_s / (g.size - 1)


def _levels(ct: CollectiveTime) -> list[list[Group]]:
    """The collective's groups by link kind, slowest first (cost/collectives.py's order)."""
    kinds: dict[str, list[Group]] = {}
    for t in ct.groups:
        kinds.setdefault(t.group.link, []).append(t.group)
    return sorted(kinds.values(), key=lambda gs: sum(g.inbound_bytes_per_s for g in gs))


def _gather_levels(ct: CollectiveTime) -> list[BookLevel]:
    factor = 2.0 if ct.kind == "all-reduce" else 1.0
    shard = ct.bytes_per_device / ct.devices
    out = []
    for level in _levels(ct):
        n = math.prod(g.size for g in level)
        if level[0].link in _SWITCHED:
            rate = sum(g.inbound_bytes_per_s for g in level)
            array = shard * n
            out.append(
                BookLevel(level[0].link, "switch", tuple(level), array, rate, factor, factor * (n - 1) * shard / rate)
            )
        else:
            rate = sum(book_bytes_per_s(g) for g in level)
            array = shard * n
            out.append(BookLevel(level[0].link, "ici", tuple(level), array, rate, factor, factor * array / rate))
        shard *= n
    return out


def book_collective(ct: CollectiveTime) -> BookCollective:
    """The book's figure for ``ct`` (see the module docstring for every rule)."""
    links = {t.group.link for t in ct.groups}
    part = "Part 12" if links & {"nvlink", "fabric"} else "Part 3"
    raw_bw = ct.bandwidth_time_s * ct.network_efficiency
    if ct.devices == 1:
        return BookCollective(ct.kind, 0.0, 0.0, (), part)
    groups = tuple(t.group for t in ct.groups)
    if ct.kind in ("all-gather", "reduce-scatter", "all-reduce") and not ct.sharp:
        levels = _gather_levels(ct)
    elif ct.kind == "all-to-all" and not links & set(_SWITCHED):
        rate = sum(book_bytes_per_s(g) for g in groups)
        array = ct.devices * ct.bytes_per_device
        levels = [BookLevel("ici", "ici", groups, array, rate, 0.25, 0.25 * array / rate)]
    else:
        levels = [BookLevel("+".join(sorted(links)), "same", groups, ct.bytes_per_device, 0.0, 1.0, raw_bw)]
    bw = max(lv.seconds for lv in levels)
    return BookCollective(ct.kind, bw, ct.latency_time_s, tuple(levels), part)
