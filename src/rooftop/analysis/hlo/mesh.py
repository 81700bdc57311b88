"""Replica groups -> mesh axes: which named axes of a logical device mesh each collective runs over.

Devices are numbered row-major over the mesh, outermost axis first, as
``jax.sharding.Mesh(np.array(jax.devices()).reshape(sizes), names)`` numbers a fresh mesh: on a mesh
``data=4,model=2`` device d has coordinates (d // 2, d % 2), so ``model`` groups are {0,1},{2,3},... (size 2,
stride 1) and ``data`` groups are {0,2,4,6},{1,3,5,7} (size 4, stride 2).

A collective's groups run over the axes A when every group is exactly the set of devices that share
their coordinates on the other axes: every member of a group differs from the first only along A, and
the group holds prod(size of A) devices. ``{}`` (one group of every device) is all axes. A
collective-permute's pairs run over the axes along which sources and targets differ.

With no mesh given, ``infer_mesh`` reads the groups as products of strided runs (``{0,1,4,5}`` is a run of
2 at stride 1 times a run of 2 at stride 4), collects the strides where runs start and end as cut points
of the device index, and keeps the coarsest chain of cuts (each dividing the next) that explains them:
the axes are the ratios between consecutive cuts. An ``mesh['x'=4,'y'=2] {...}`` group list in the text
(XLA's mesh-axes form) gives the mesh outright when it explains every collective.

``collective_use`` reads a collective instruction's groups and the bytes its Comm is named after;
``place`` turns it into a Comm over the axes it runs on (None for irregular groups, which are not timed).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rooftop.analysis.hlo.groups import MAX_DEVICES, replica_groups
from rooftop.analysis.hlo.ir import Instruction
from rooftop.cost.cost import Comm
from rooftop.errors import ParseError, ShardingError, shown
from rooftop.hardware.topology import parse_mesh_spec
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

#: HLO collective opcode -> the Comm kind (cost/cost.py) that prices it.
COLLECTIVE_KIND = {
    "all-gather": "all-gather",
    "all-reduce": "all-reduce",
    "reduce-scatter": "reduce-scatter",
    "all-to-all": "all-to-all",
    "ragged-all-to-all": "all-to-all",
    "collective-permute": "permute",
    "collective-broadcast": "all-gather",
}

_MESH_FORM_RE = re.compile(r"mesh\[([^\]]*)\]")
_SIZE_RE = re.compile(r"[0-9]{1,7}")


@dataclass(frozen=True)
class LogicalMesh:
    """Named axes, outermost first, devices numbered row-major; ``how`` says where the mesh came from
    ("given", or a Reason)."""

    axes: tuple[tuple[str, int], ...]
    inferred: bool = False
    how: Note = "given"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.axes)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(s for _, s in self.axes)

    @property
    def num_devices(self) -> int:
        return math.prod(self.sizes)

    @property
    def strides(self) -> tuple[int, ...]:
        """Device-id distance between neighbours along each axis (row-major)."""
        sizes = self.sizes
        return tuple(math.prod(sizes[i + 1 :]) for i in range(len(sizes)))

    def spec(self) -> str:
        return ",".join(f"{n}={s}" for n, s in self.axes)

    def shape(self) -> dict[str, int]:
        """Axes of size > 1 (what a hardware mesh is built from)."""
        return {n: s for n, s in self.axes if s > 1}

    def coords(self, device: int) -> tuple[int, ...]:
        return tuple((device // st) % sz for st, sz in zip(self.strides, self.sizes, strict=True))


@dataclass(frozen=True)
class GroupMatch:
    """How one collective's device groups sit on the mesh. ``axes`` is None for irregular groups."""

    axes: tuple[str, ...] | None
    group_size: int
    num_groups: int
    strides: tuple[int, ...] = ()
    groups: tuple[tuple[int, ...], ...] = ()
    pairs: bool = False

    @property
    def regular(self) -> bool:
        return self.axes is not None

    def reason(self, kind: str, code: ReasonCode = ReasonCode.COLLECTIVE_GROUPS) -> Reason:
        """The match of a ``kind`` collective as a Reason (report/reasons.py writes "all-reduce over model
        (groups of 2, stride 1)" or "all-gather: irregular groups {0,3},{1,2}"): its figures are what the
        words show (the first 8 irregular groups and their count), so equal words are equal Reasons."""
        return Reason(code, (("axes", self.axes), ("count", len(self.groups)), ("group_size", self.group_size),
                             ("groups", self.groups[:8]), ("kind", kind), ("num_groups", self.num_groups),
                             ("pairs", self.pairs), ("strides", self.strides)))  # fmt: skip


def _irregular(groups: Sequence[Sequence[int]]) -> GroupMatch:
    size = len(groups[0]) if groups else 0
    return GroupMatch(None, size, len(groups), (), tuple(tuple(g) for g in groups))


def match_groups(groups: Sequence[Sequence[int]], mesh: LogicalMesh) -> GroupMatch:
    """The axes whose fibres are exactly ``groups`` (module docstring); irregular when none are.
    ``[]`` (XLA's ``{}``) is one group of every device: all axes of size > 1."""
    n = mesh.num_devices
    if not groups:
        axes = tuple(name for name, size in mesh.axes if size > 1)
        return GroupMatch(axes, n, 1, tuple(st for st, (_, sz) in zip(mesh.strides, mesh.axes, strict=True) if sz > 1))
    if any(d < 0 or d >= n for g in groups for d in g) or sum(len(g) for g in groups) != n:
        return _irregular(groups)
    varying: set[int] | None = None
    seen: set[int] = set()
    for group in groups:
        first = mesh.coords(group[0])
        differ = {i for d in group[1:] for i, (a, b) in enumerate(zip(first, mesh.coords(d), strict=True)) if a != b}
        if varying is None:
            varying = differ
        if differ != varying or len(set(group)) != len(group) or not seen.isdisjoint(group):
            return _irregular(groups)
        seen.update(group)
    chosen = sorted(varying or ())
    size = len(groups[0])
    if any(len(g) != size for g in groups) or size != math.prod(mesh.sizes[i] for i in chosen):
        return _irregular(groups)
    names = tuple(mesh.names[i] for i in chosen)
    return GroupMatch(names, size, len(groups), tuple(mesh.strides[i] for i in chosen))


def match_pairs(pairs: Sequence[tuple[int, int]], mesh: LogicalMesh) -> GroupMatch:
    """A collective-permute's (source, target) pairs: the axes along which any pair differs."""
    n = mesh.num_devices
    if not pairs or any(not (0 <= d < n) for p in pairs for d in p):
        return GroupMatch(None, 2, len(pairs), (), tuple(tuple(p) for p in pairs), pairs=True)
    varying = sorted(
        {i for s, t in pairs for i, (a, b) in enumerate(zip(mesh.coords(s), mesh.coords(t), strict=True)) if a != b}
    )
    names = tuple(mesh.names[i] for i in varying)
    size = math.prod(mesh.sizes[i] for i in varying) if varying else 1
    return GroupMatch(names, size, len(pairs), tuple(mesh.strides[i] for i in varying), pairs=True)


def given_mesh(spec: str | dict[str, int], num_devices: int | None = None) -> LogicalMesh:
    """``"data=4,model=2"`` as a LogicalMesh; its device count must match the module's when known."""
    axes = parse_mesh_spec(spec) if isinstance(spec, str) else dict(spec)
    for name, size in axes.items():
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_DEVICES:
            raise ShardingError(f"mesh axis {shown(name)}={shown(size)}: sizes are integers in [1, {MAX_DEVICES}]")
    mesh = LogicalMesh(tuple(axes.items()), False, "given")
    if num_devices is not None and mesh.num_devices != num_devices:
        raise ShardingError(
            f"mesh {mesh.spec()} has {mesh.num_devices} devices but the module runs on {num_devices} "
            f"(num_partitions x replica_count); give axes whose sizes multiply to {num_devices}"
        )
    return mesh


def _runs(group: Sequence[int]) -> list[tuple[int, int]] | None:
    """A sorted group as a product of strided runs, innermost first: [(stride, length), ...]; None when
    it is not one (then it says nothing about the mesh)."""
    members = sorted(group)
    if any(a == b for a, b in itertools.pairwise(members)):
        return None  # a repeated device: no strided run
    offsets = [m - members[0] for m in members]
    runs: list[tuple[int, int]] = []
    block = 1
    while block < len(offsets):
        stride = offsets[block]
        if runs and stride % (runs[-1][0] * runs[-1][1]):
            return None
        length = 1
        while (length + 1) * block <= len(offsets) and all(
            offsets[length * block + j] == length * stride + offsets[j] for j in range(block)
        ):
            length += 1
        if length == 1:
            return None
        runs.append((stride, length))
        block *= length
    return runs if block == len(offsets) else None


def _hint(texts: Iterable[str], num_devices: int) -> LogicalMesh | None:
    """The mesh of XLA's ``mesh['a'=4,'b'=2] {...}`` group form, when all such forms agree."""
    found: set[tuple[tuple[str, int], ...]] = set()
    for text in texts:
        match = _MESH_FORM_RE.search(text)
        if match is None:
            continue
        named: list[tuple[str, int]] = []
        for item in match.group(1).split(","):
            name, _, size = item.partition("=")
            if _SIZE_RE.fullmatch(size.strip()) is None:
                return None
            named.append((name.strip().strip("'\""), int(size)))
        found.add(tuple(named))
    if len(found) != 1:
        return None
    axes = tuple(a for a in found.pop() if a[1] > 1)
    mesh = LogicalMesh(axes, True, Reason(ReasonCode.MESH_FROM_TEXT))
    return mesh if mesh.num_devices == num_devices else None


def infer_mesh(
    group_sets: Sequence[Sequence[Sequence[int]]], num_devices: int, texts: Iterable[str] = ()
) -> LogicalMesh:
    """The coarsest row-major mesh of ``num_devices`` whose axes explain the collectives' groups
    (module docstring); axes are named axis_0, axis_1, ... outermost first."""
    patterns = list(dict.fromkeys(tuple(tuple(g) for g in groups) for groups in group_sets))
    hint = _hint(set(texts), num_devices)
    if hint is not None and all(match_groups(g, hint).regular for g in patterns):
        return hint
    cuts = {1, num_devices}
    for groups in patterns:
        runs = _runs(groups[0]) if groups and len(groups[0]) > 1 else None
        for stride, length in runs or ():
            cuts.update((stride, stride * length))
    chain = [1]
    for cut in sorted(cuts):
        if cut > chain[-1] and cut % chain[-1] == 0 and num_devices % cut == 0:
            chain.append(cut)
    sizes = [b // a for a, b in itertools.pairwise(chain)][::-1]  # outermost first
    axes = tuple((f"axis_{i}", s) for i, s in enumerate(sizes))
    how = Reason.of(ReasonCode.MESH_FROM_GROUPS, collectives=len(group_sets),
                    distinct=len(patterns) if len(patterns) > 1 else None)  # fmt: skip
    return LogicalMesh(axes or (("axis_0", num_devices),), True, how)


@dataclass(frozen=True)
class CollectiveUse:
    """A collective before it is placed on a mesh: its Comm kind, the bytes its Comm is named after, and
    its replica groups (``()`` = every device) or, for a collective-permute, its (source, target) pairs;
    ``chain``: the TPU async collective chain it belongs to (``frontend_attributes={chain_id="4"}``)."""

    kind: str
    opcode: str
    bytes: float
    groups: tuple[tuple[int, ...], ...] | None
    pairs: tuple[tuple[int, int], ...] | None = None
    raw: str = ""
    chain: str = ""


def collective_use(instr: Instruction, base: str) -> CollectiveUse:
    """Per-device bytes as cost/cost.py's Comm defines them: the gathered output of an all-gather (the
    output half of an all-gather-start tuple), the input of the others (operand 0 of a permute)."""
    kind = COLLECTIVE_KIND[base]
    operands = [s for s in instr.operand_shapes if s is not None]
    if kind == "all-gather":
        shape = instr.shape
        if instr.async_kind == "start" and shape.tuple_shapes:
            shape = shape.tuple_shapes[-1]
        nbytes = shape.logical_bytes
    elif kind == "permute":
        nbytes = operands[0].logical_bytes if operands else 0.0
    else:
        nbytes = sum(s.logical_bytes for s in operands)
    chain = instr.frontend_attributes.get("chain_id", "") if "frontend_attributes" in instr.attributes else ""
    if kind == "permute":
        pairs = tuple(instr.source_target_pairs or ())
        return CollectiveUse(kind, base, nbytes, None, pairs, instr.attributes.get("source_target_pairs", ""), chain)
    raw = instr.attributes.get("replica_groups")
    groups: tuple[tuple[int, ...], ...] = ()
    if raw is not None:
        try:
            groups = _groups(raw)
        except ParseError as exc:
            raise ParseError(f"{shown(instr.name)}: bad replica_groups={shown(raw)}: {exc}", line=instr.line) from None
    return CollectiveUse(kind, base, nbytes, groups, None, raw or "", chain)


@functools.lru_cache(maxsize=128)
def _groups(raw: str) -> tuple[tuple[int, ...], ...]:
    """Expanded replica groups, cached by their text (a module repeats a few forms many times)."""
    return tuple(tuple(g) for g in replica_groups(raw))


def place(use: CollectiveUse, mesh: LogicalMesh, count: float = 1.0) -> tuple[Comm | None, GroupMatch]:
    """The Comm of ``use`` over the mesh axes its groups run on; None when irregular or nothing moves."""
    match = match_pairs(use.pairs, mesh) if use.pairs is not None else match_groups(use.groups or (), mesh)
    if not match.axes:
        return None, match
    return Comm(use.kind, match.axes, use.bytes, count, use.opcode), match
