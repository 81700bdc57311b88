"""Collective times on a mesh: one rule set shared by every collective and every fabric.

A collective over mesh axes runs over *groups* (cost/groups.py: ring, line or switch, and the
bandwidth each chip sees on them).

Bandwidth term of an all-gather whose gathered per-device size is V over N chips
(shard S = V / N) on ONE group of n = N chips (How to Scale Your Model, Part 3,
"How is an AllGather actually performed?"): every chip must receive n - 1 shards
through the links it has on the group. ONE convention for one group and for several:
the n - 1 shards over the chip's inbound bandwidth, i.e. (n-1)/n x V / inbound.
  ring   (n-1)/2 x S / W   = (n-1)/n x V / (2W): shards flow both ways over 2 links
                           (the book's asymptotic V / (2W) for large n; a ring of
                           discrete steps takes ceil((n-1)/2) x S / W, at most S / (2W) more)
  line   (n-1) x S / W     = (n-1)/n x V / W: the end chip receives all n-1 shards over one link
  switch (n-1) x S / B     = (n-1)/n x V / B (Part 12, "Intra-node collectives")

Several groups of the same link kind (several axes at once, or one axis over several
dims) work together. Two lower bounds hold and the larger is taken:
  ingress: the worst-placed chip receives N - 1 shards through all its links,
           (N-1) x S / sum(inbound), inbound = 2W (ring), W (line), B (switch);
  slab:    for each group, the chips sharing one coordinate of it need the N(n-1)/n
           shards of the other coordinates through that group's links alone, which
           is the single-group time above with the same S.
On a torus of k equal rings the ingress bound is (N-1)/N x V / (2W k): Part 3's
multi-axis rule "bytes / (bidirectional bandwidth x num_axes)" with the same (N-1)/N
factor as one ring, so the one-axis and several-axis answers agree where they meet.

Groups of different link kinds are *levels* of a hierarchy (dcn x ici on TPU, fabric
x nvlink on GPU). The collective is staged (Part 12, "Cross-node collectives"): an
all-gather gathers over the slowest level first, with shard S, then the next level
with the shards it just gathered (S x n_level), ...; a reduce-scatter runs the same
stages in reverse (same bytes per level); an all-reduce is the hierarchical
reduce-scatter (in-node over NVLink, then cross-node) followed by the all-gather, i.e.
in-node RS, cross-node AR, in-node AG. Stages are pipelined over disjoint links, so
the bandwidth time is the max over levels (Part 12: "a ring reduction at each layer in
the network, which we can mostly overlap"), while latencies add.

reduce-scatter = all-gather with V the input size (Part 3: same cost); all-reduce =
reduce-scatter + all-gather, 2x the bandwidth term and 2x the hops. With in-network
reduction (``sharp``: NVLink SHARP / InfiniBand SHARP) each switched level's all-reduce
moves n x S once instead of 2(n-1) x S: V / B for one level (Part 12, "In network
reductions"), and takes 2 steps (up to the switch, multicast down).

all-to-all of a per-device buffer V (each chip sends a chunk c = V / N to every other
chip) from link loads, routes dimension by dimension (a group of n carries N / n chunks
per destination-in-group): on a ring of n, each directed link carries
floor(n^2/4) / 2 chunks, time floor(n^2/4) x c / (2W); on a line the middle link carries
floor(n^2/4) chunks one way, twice the ring; on a switch (n-1) x c / B. Reconciling with
Part 3 ("an AllToAll is 1/4 of an AllGather on a bidirectional ring"): the book compares
arrays of the same *global* size G; all-gather of a gathered G costs G/(2W) and
all-to-all of G (V = G/N per device, even n) costs n x V / (8W) = G/(8W), a quarter.
Across levels all-to-all is not hierarchical: the max over groups (Part 12:
B (M-1) / (M^2 W_node) across M nodes).

permute (a shift by one along the axis, as in a collective matmul) sends V over one
link: V / W (ring, line: W / stride), V / B (switch); 1 hop, except a line whose
wrap-around message walks n - 1 hops (on links the shift leaves idle).

Latency term: sequential hops x hop latency (~1 us per ICI hop, Part 3 "A note on ICI
latency"): ring floor(n/2) x stride hops, line (n-1) x stride, switched ceil(log2 n)
steps (recursive doubling/halving or Bruck's all-to-all; Thakur, Rabenseifner & Gropp
2005) of link_latency_s (NVLink) or scaleout_latency_s (fabric, dcn). Groups' hops add
(the longest path, Part 3: sum_i |X_i| / 2). time_s = max(bandwidth, latency) and
``bound`` names the larger: small arrays are latency-bound.

Algorithm. The rules above are the *hierarchical* algorithm (``algorithm=None``): staged over the
levels, time = max(bandwidth, latency). A library may run the gather family differently; the
``Algorithm`` value passed to ``collective_time`` says how, and names a rule registered in
cost/algorithms.py (``in-network``: the staged rules with ``sharp``; ``ring``, below; any rule added
there reaches every caller). Every rule is affine in V, and ``collective_rate`` returns that closed
form (seconds per byte, latency, how they combine) for callers that price many sizes; no caller
extrapolates from a probe.
- ``ring`` (NCCL's ring, the only algorithm NCCL has for all-gather and reduce-scatter): ONE ring
  over all N chips of every level. Bandwidth: every chip receives N - 1 shards; a level crossed by
  the ring is entered through the links of the chips below it (one ring channel per NIC on a
  rail-optimised GPU node, so a node's m GPUs bring m x B), so the term is the max over levels of
  (N - 1) x S / (inbound of the level x chips of the faster levels below it), which for a switched
  fabric under NVLink is within (N-1)/N of the staged figure. Latency: NCCL's own model
  (src/graph/tuning.cc): base + (N - 1 - X) x intra-domain step + X x inter-node step, X = the ring's
  steps that cross the scale-out fabric (chips of the outer levels - 1), all-reduce twice; and, as
  NCCL's tuner prices it, time = latency + bandwidth (alpha-beta), not the max: each of the ring's
  N - 1 steps waits for its slowest hop before the next one starts. The ring runs one way: a chip
  receives from its predecessor only, over one link of a wrapped ICI dim (W, not the 2W of both
  neighbours) or its switch port.
- ``bidirectional-ring``: V in two halves sent round the ring in opposite directions; a wrapped ICI
  dim's chips receive over both links (2W), switch ports and lines as the ring (their links already
  carry a one-way ring both ways); the ring's steps and latency.
- ``tree`` (all-reduce only; NCCL's double binary tree, Sanders, Speck & Traeff 2009): a reduce up
  and a broadcast down, 2 V through the slowest level's entry, latency base + 2 x ((chips per node - 1)
  x intra-domain step + floor(log2 nodes) x inter-node step) (NCCL src/graph/tuning.cc), added.
all-to-all and permute are priced as above whatever the algorithm.

Network efficiency (the fraction of link bandwidth real collectives reach) divides the
bandwidth term only, here and nowhere else: time_s = max(bandwidth / efficiency, latency).
Every caller (roofline, the planners, HLO and profile analysis) passes it to
``collective_time``. This module returns numbers only; report/formulas.py writes them out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rooftop.cost.algorithms import Algorithm, Schedule, levels
from rooftop.cost.cost import Comm
from rooftop.cost.groups import Group, mesh_groups
from rooftop.errors import InvalidConfigError
from rooftop.hardware.chip import Chip
from rooftop.hardware.topology import Mesh
from rooftop.reasons import Option, OptionError

SHARP_LINKS = ("nvlink", "fabric")


@dataclass(frozen=True)
class GroupTerm:
    """One group's share of a collective: its own bandwidth term and its hops."""

    group: Group
    bandwidth_time_s: float
    hops: int
    latency_time_s: float


@dataclass(frozen=True)
class BandwidthPart:
    """One candidate of the bandwidth term: ``units`` x ``chunk_bytes`` / ``bytes_per_s`` x
    ``factor`` = ``seconds`` (before network efficiency).

    ``rule``: "gather" (one group's own all-gather term), "ingress" (a level's groups
    together), "sharp" (in-network all-reduce), "all-to-all", "egress", "permute".
    ``names`` are the groups it covers, ``shape`` and ``size`` the group's (or the
    level's link kind and chips)."""

    rule: str
    names: tuple[str, ...]
    shape: str
    size: int
    units: float
    chunk_bytes: float
    bytes_per_s: float
    factor: float
    seconds: float


@dataclass(frozen=True)
class CollectiveTime:
    """The time of one collective and every figure it came from (numbers only).

    ``bandwidth_time_s`` already includes the network efficiency; ``parts`` are the
    bandwidth candidates (``chosen`` the ones that set the term, one per level for the
    gather family, the largest for all-to-all and permute)."""

    kind: str
    axes: tuple[str, ...]
    bytes_per_device: float
    devices: int
    bandwidth_time_s: float
    latency_time_s: float
    hops: int
    groups: tuple[GroupTerm, ...] = ()
    sharp: bool = False
    parts: tuple[BandwidthPart, ...] = ()
    chosen: tuple[BandwidthPart, ...] = ()
    network_efficiency: float = 1.0
    algorithm: str = "hierarchical"
    #: latency and bandwidth add (a ring's steps, NCCL's alpha-beta model) rather than overlap
    additive: bool = False

    @property
    def time_s(self) -> float:
        if self.additive:
            return self.bandwidth_time_s + self.latency_time_s
        return max(self.bandwidth_time_s, self.latency_time_s)

    @property
    def bound(self) -> str:
        """ "bandwidth" or "latency": the larger term (ties go to bandwidth)."""
        return "bandwidth" if self.bandwidth_time_s >= self.latency_time_s else "latency"

    @property
    def hierarchical(self) -> bool:
        """Staged over levels of different link kinds (gather family only)."""
        return len({g.group.link for g in self.groups}) > 1 and self.kind not in ("all-to-all", "permute")


def _gather_part(g: Group, shard: float, factor: float) -> BandwidthPart:
    return BandwidthPart(
        "gather",
        (g.name,),
        g.shape,
        g.size,
        g.gather_units,
        shard,
        g.gather_bytes_per_s,
        factor,
        factor * g.gather_s(shard),
    )


def _level_gather(level: list[Group], shard: float, factor: float) -> tuple[BandwidthPart, list[BandwidthPart]]:
    """(chosen, candidates): max(ingress bound, each group's own time) for one level with shard ``shard``."""
    n = math.prod(g.size for g in level)
    inbound = sum(g.inbound_bytes_per_s for g in level)
    own = [_gather_part(g, shard, factor) for g in level]
    names = tuple(g.name for g in level)
    ingress = BandwidthPart(
        "ingress", names, level[0].link, n, float(n - 1), shard, inbound, factor, factor * (n - 1) * shard / inbound
    )
    worst = max(own, key=lambda p: p.seconds)
    chosen = worst if worst.seconds >= ingress.seconds else ingress
    return chosen, [*own, ingress] if len(level) > 1 else own


def _gather_family(
    comm: Comm, groups: tuple[Group, ...], sharp: bool
) -> tuple[list[BandwidthPart], list[BandwidthPart], dict[Group, float]]:
    n_total = math.prod(g.size for g in groups)
    shard = comm.bytes / n_total
    factor = 2.0 if comm.kind == "all-reduce" else 1.0
    chosen, parts, per_group = [], [], {}
    for level in levels(groups):
        n = math.prod(g.size for g in level)
        if comm.kind == "all-reduce" and sharp:
            inbound = sum(g.inbound_bytes_per_s for g in level)
            part = BandwidthPart(
                "sharp",
                tuple(g.name for g in level),
                level[0].link,
                n,
                float(n),
                shard,
                inbound,
                1.0,
                n * shard / inbound,
            )
            chosen.append(part)
            parts.append(part)
            per_group.update({g: g.size * shard / g.inbound_bytes_per_s for g in level})
        else:
            best, cands = _level_gather(level, shard, factor)
            chosen.append(best)
            parts += cands
            per_group.update({g: factor * g.gather_s(shard) for g in level})
        shard *= n
    return chosen, parts, per_group


def _all_to_all(
    comm: Comm, groups: tuple[Group, ...]
) -> tuple[list[BandwidthPart], list[BandwidthPart], dict[Group, float]]:
    n_total = math.prod(g.size for g in groups)
    chunk = comm.bytes / n_total
    parts, per_group = [], {}
    for g in groups:
        c = chunk * n_total / g.size  # a group of n carries N / n chunks per destination-in-group
        rate = g.inbound_bytes_per_s if g.shape == "switch" else g.link_bytes_per_s
        t = g.all_to_all_s(c)
        per_group[g] = t
        parts.append(BandwidthPart("all-to-all", (g.name,), g.shape, g.size, g.all_to_all_units(), c, rate, 1.0, t))
    inbound = sum(g.inbound_bytes_per_s for g in groups)
    names = tuple(g.name for g in groups)
    egress = BandwidthPart(
        "egress", names, "all", n_total, float(n_total - 1), chunk, inbound, 1.0, (n_total - 1) * chunk / inbound
    )
    parts.append(egress)
    return [max(parts, key=lambda p: p.seconds)], parts, per_group


def _permute(
    comm: Comm, groups: tuple[Group, ...]
) -> tuple[list[BandwidthPart], list[BandwidthPart], dict[Group, float]]:
    parts = [
        BandwidthPart(
            "permute",
            (g.name,),
            g.shape,
            g.size,
            1.0,
            comm.bytes,
            g.link_bytes_per_s,
            1.0,
            comm.bytes / g.link_bytes_per_s,
        )
        for g in groups
    ]
    per_group = {g: p.seconds for g, p in zip(groups, parts, strict=True)}
    return [max(parts, key=lambda p: p.seconds)], parts, per_group


def _latency_hops(kind: str, g: Group, sharp: bool) -> int:
    if kind == "permute":
        return (g.size - 1) * g.stride if g.shape == "line" else (g.stride if g.shape == "ring" else 1)
    if kind == "all-reduce":
        return 2 if (sharp and g.shape == "switch") else 2 * g.hops
    return g.hops


def collective_time(
    comm: Comm,
    mesh: Mesh,
    chip: Chip | None = None,
    *,
    sharp: bool = False,
    network_efficiency: float = 1.0,
    algorithm: Algorithm | None = None,
) -> CollectiveTime:
    """Time one ``comm`` (count 1) on ``mesh``; figures from ``chip`` (default: the mesh's).

    See the module docstring for every rule and its derivation. ``sharp`` enables
    in-network reduction for all-reduces over NVLink / fabric axes; ``network_efficiency``
    (in (0, 1]) divides the bandwidth term, never the latency; ``algorithm`` (default hierarchical)
    says how the gather family runs."""
    chip = chip or mesh.topology.chip
    if not 0 < network_efficiency <= 1:
        raise InvalidConfigError(f"network efficiency {network_efficiency} must be in (0, 1]")
    groups = mesh_groups(mesh, tuple(comm.axes), chip)
    rule = algorithm.rule if algorithm is not None and algorithm.rule.runs(comm.kind) else None
    sharp = sharp or (rule is not None and rule.in_network)
    if sharp:
        bad = [g for g in groups if g.link not in SHARP_LINKS]
        if bad:
            raise OptionError(
                "in-network reduction (",
                Option("sharp"),
                ", or ",
                Option("algorithm"),
                f" in-network) needs switched NVLink or fabric axes; {bad[0].name} runs over {bad[0].link} on "
                f"{chip.name} (choose another algorithm, or a GPU topology such as 16x8)",
            )
    devices = math.prod(g.size for g in groups)
    if devices == 1:
        return CollectiveTime(
            comm.kind, tuple(comm.axes), comm.bytes, 1, 0.0, 0.0, 0, (), sharp, (), (), network_efficiency
        )
    if algorithm is not None and rule is not None and rule.schedule is not None and not sharp:
        schedule = rule.schedule(comm.kind, groups, algorithm)
        return _scheduled(comm, devices, schedule, network_efficiency, algorithm.name)
    gather = comm.kind in ("all-gather", "reduce-scatter", "all-reduce")
    if gather:
        chosen, parts, per_group = _gather_family(comm, groups, sharp)
    elif comm.kind == "all-to-all":
        chosen, parts, per_group = _all_to_all(comm, groups)
    else:
        chosen, parts, per_group = _permute(comm, groups)
    bw = max(p.seconds for p in chosen) / network_efficiency
    terms = []
    for g in groups:
        hops = _latency_hops(comm.kind, g, sharp)
        terms.append(GroupTerm(g, per_group[g] / network_efficiency, hops, hops * g.hop_latency_s))
    if comm.kind == "permute":
        worst = max(terms, key=lambda t: t.latency_time_s)
        hops, lat = worst.hops, worst.latency_time_s
    else:
        hops, lat = sum(t.hops for t in terms), sum(t.latency_time_s for t in terms)
    return CollectiveTime(
        comm.kind,
        tuple(comm.axes),
        comm.bytes,
        devices,
        bw,
        lat,
        hops,
        tuple(terms),
        sharp,
        tuple(parts),
        tuple(chosen),
        network_efficiency,
        rule.name if rule is not None else "hierarchical",
    )


def _scheduled(comm: Comm, devices: int, s: Schedule, network_efficiency: float, name: str) -> CollectiveTime:
    """The CollectiveTime of a registered algorithm's ``Schedule`` for ``comm`` (cost/algorithms.py)."""
    shard = comm.bytes * s.share
    seconds = s.factor * s.units * shard / s.bytes_per_s
    part = BandwidthPart(s.rule, s.names, s.shape, s.size, s.units, shard, s.bytes_per_s, s.factor, seconds)
    return CollectiveTime(
        comm.kind, tuple(comm.axes), comm.bytes, devices, seconds / network_efficiency, s.latency_s, s.steps, (),
        False, (part,), (part,), network_efficiency, name, s.additive,
    )  # fmt: skip


@dataclass(frozen=True)
class Rate:
    """The closed form of one collective kind over some axes under one algorithm: time(V) =
    V x ``per_byte_s`` + ``latency_s`` when ``additive``, else max of the two (module docstring:
    every rule's bandwidth term is linear in V, its latency does not depend on V)."""

    per_byte_s: float
    latency_s: float
    additive: bool = False

    def time_s(self, nbytes: float) -> float:
        if nbytes <= 0 or (not self.per_byte_s and not self.latency_s):
            return 0.0
        bw = nbytes * self.per_byte_s
        return bw + self.latency_s if self.additive else max(bw, self.latency_s)


def collective_rate(
    kind: str,
    axes: tuple[str, ...],
    mesh: Mesh,
    chip: Chip | None = None,
    *,
    network_efficiency: float = 1.0,
    algorithm: Algorithm | None = None,
) -> Rate:
    """``collective_time`` of ``kind`` over ``axes`` as its closed form in the bytes V, for callers that
    price many sizes (a training search): ``Rate.time_s(V)`` equals ``collective_time(...).time_s`` for
    every V > 0 (0 when nothing moves).
    Each bandwidth part is units x (V x share) / rate x factor, so the parts at V = 1 byte are the
    seconds per byte, and the latency does not depend on V; a registered algorithm gives its
    ``Schedule`` directly."""
    chip = chip or mesh.topology.chip
    rule = algorithm.rule if algorithm is not None and algorithm.rule.runs(kind) else None
    if algorithm is not None and rule is not None and rule.schedule is not None:
        groups = mesh_groups(mesh, axes, chip)
        if math.prod(g.size for g in groups) == 1:
            return Rate(0.0, 0.0)
        if not 0 < network_efficiency <= 1:
            raise InvalidConfigError(f"network efficiency {network_efficiency} must be in (0, 1]")
        s = rule.schedule(kind, groups, algorithm)
        return Rate(s.per_byte_s / network_efficiency, s.latency_s, s.additive)
    ct = collective_time(Comm(kind, axes, 1.0), mesh, chip, network_efficiency=network_efficiency, algorithm=algorithm)
    return Rate(ct.bandwidth_time_s, ct.latency_time_s, ct.additive)
