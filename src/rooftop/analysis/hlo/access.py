"""Bytes an HLO instruction moves through memory: what it reads and writes at its boundary, and the
tiles those reads and writes touch.

Logical bytes (elements x element size) follow XLA's HloCostAnalysis, so CPU and GPU modules match
``compiled.cost_analysis()["bytes accessed"]`` (tests/unit/test_hlo_vs_xla.py):

- an instruction reads its operands and writes its result, once each; a fusion's inner temporaries
  never touch memory.
- a fused parameter is read as its users read it: a slice or dynamic-slice reads the slice; the buffer
  operand of a dynamic-update-slice is not read (it is updated in place); a nested fusion reads what
  the users of its own parameter read, at any depth; any other user reads it whole, once. Several
  slices add up, to at most the whole parameter.
- a fusion output built in place (a dynamic-update-slice or scatter on a fused parameter, through
  bitcasts and nested fusions, as the root or an element of a root tuple) writes only the updates;
  a scatter built in place also reads the region it updates (XLA's HandleScatter: 3 x the updates
  plus the indices, where XLA's fused count would read and write the whole operand).
- an output that ``output_to_operand_aliasing`` ties to an operand and that the fusion passes through
  unchanged is neither written nor read for it (an unaliased pass-through is a copy: read and written).
- an output built in place that the module shows is not (:mod:`rooftop.analysis.hlo.inplace`: a
  loop-carried buffer without the aliasing mark) reads the whole buffer and writes the whole output in the
  timed bytes; the logical bytes keep XLA's count.
- top level: a slice or dynamic-slice reads its slice, a dynamic-update-slice reads and writes its
  update, a scatter its updates x 3 and its indices; a custom-call's trailing scratch workspace and the
  zero-work custom-call targets (:mod:`rooftop.analysis.hlo.targets`) move nothing.

Tiles (the bytes timed). A TPU array whose layout has tiles, ``{2,0,1:T(8,128)}``, is stored as whole
tiles of its first tile shape over its minor-most dims in layout order (the XLA documentation, "Tiled
layout"): here dim 2 in runs of 128 and dim 0 in runs of 8, so one tile holds 8 x 128 elements. Memory
moves whole tiles, so a read or write of a window of the array moves ``tiles touched x tile bytes``: a
write that fills only part of a tile still reads, modifies and writes the whole tile. Per dim of the
tile, a window of w elements starting at s touches ``(s + w - 1) // t - s // t + 1`` runs of t, or
``ceil(w / t)`` when s is unknown (a dynamic index: taken aligned, the fewest tiles; a start that is not a
multiple of t touches one more); untiled dims count their w elements. A whole array is its padded size.
Worked example (a layer written into a stacked f32[16,7168,512]{2,0,1:T(8,128)} by a
dynamic-update-slice of [1,7168,512]): 4 runs of 128 x 1 run of 8 x 7168 = 28,672 tiles of 4 KiB,
117.4 MB moved for 14.7 MB of data (8x). Padded bytes are these tile-aware bytes; HBM bytes the padded
bytes in memory space 0 (on TPU S(1) is VMEM, S(5) host memory).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from rooftop.analysis.hlo.inplace import InPlace
from rooftop.analysis.hlo.ir import Computation, HloModule, Instruction, one_int
from rooftop.analysis.hlo.rules import drop_workspace
from rooftop.analysis.hlo.shapes import Shape, int_list
from rooftop.analysis.hlo.targets import moves_nothing
from rooftop.errors import ParseError, shown
from rooftop.reasons import Note


@dataclass(frozen=True)
class Traffic:
    """Bytes an instruction moves: logical, tile-aware (padded), and tile-aware bytes per memory space."""

    logical_bytes: float = 0.0
    padded_bytes: float = 0.0
    by_space: tuple[tuple[int, float], ...] = ()
    why: tuple[Note, ...] = ()  # whether an update was done in place, when the module says (:mod:`.inplace`)

    @property
    def hbm_bytes(self) -> float:
        return sum(b for space, b in self.by_space if space == 0)


class Piece(NamedTuple):
    """``windows`` windows of ``sizes`` (in the array's own dims; None when a bitcast changed them) at
    ``starts`` (None where unknown), ``logical`` bytes in all."""

    logical: float
    sizes: tuple[int, ...] | None = None
    starts: tuple[int | None, ...] | None = None
    windows: float = 1.0


@dataclass
class FusionAccess:
    """What a fused computation touches. ``reads``: the pieces of each parameter not read whole (an empty
    tuple: not read); ``writes``: the pieces written into each output leaf built in place on a parameter;
    ``passthrough``: output leaf -> the parameter it returns unchanged (not counted as a read)."""

    reads: dict[int, tuple[Piece, ...]] = field(default_factory=dict)
    writes: dict[int, tuple[Piece, ...]] = field(default_factory=dict)
    passthrough: dict[int, int] = field(default_factory=dict)
    in_place: dict[int, int] = field(default_factory=dict)


def tiles_bytes(shape: Shape, sizes: Sequence[int], starts: Sequence[int | None] | None = None) -> float:
    """Tile-aware bytes of a window of an array (module docstring): tiles touched x tile bytes; an untiled
    layout moves exactly the window."""
    layout, rank = shape.layout, shape.rank
    if len(sizes) != rank:
        return math.prod(float(max(s, 0)) for s in sizes) * shape.element_bytes
    if layout is None or not layout.tiles:
        return math.prod(float(max(s, 0)) for s in sizes) * shape.element_bytes
    order = layout.minor_to_major or tuple(range(rank - 1, -1, -1))
    tile = layout.tiles[0]
    tiled = {order[k - 1]: max(tile[-k], 1) for k in range(1, min(len(tile), rank) + 1)}
    count = 1.0
    for dim, size in enumerate(sizes):
        size = max(size, 0)
        run = tiled.get(dim)
        if run is None:
            count *= size
            continue
        start = starts[dim] if starts is not None and dim < len(starts) else None
        count *= ((start + size - 1) // run - start // run + 1) if start is not None and size else -(-size // run)
    elements = math.prod(float(t) for t in tiled.values()) * math.prod(
        float(max(t, 1)) for t in tile[: max(len(tile) - rank, 0)]
    )
    return count * elements * shape.element_bytes


def _clamped(starts: Sequence[int | None], dims: Sequence[int], sizes: Sequence[int]) -> tuple[int | None, ...]:
    """Start indices as XLA clamps them into [0, dim - size]."""
    return tuple(
        None if s is None else min(max(s, 0), max(d - w, 0)) for s, d, w in zip(starts, dims, sizes, strict=False)
    )


def _const_int(instr: Instruction | None) -> int | None:
    """The value of a scalar integer constant, else None."""
    if instr is None or instr.opcode != "constant" or instr.shape.rank or instr.shape.dtype[:1] not in "su":
        return None
    try:
        return one_int(instr.attributes.get("literal", "").strip("{} "))
    except ParseError:
        return None


def _slice_starts(instr: Instruction) -> tuple[int | None, ...] | None:
    """Starts of ``slice={[0:2], [0:64:1], ...}``; None when unreadable (then the window counts aligned)."""
    raw = instr.attributes.get("slice", "")
    starts: list[int | None] = []
    for part in raw.strip().strip("{}").split(","):
        head = part.strip().strip("[]").split(":")[0].strip()
        if not head.isdigit() or len(head) > 18:
            return None
        starts.append(int(head))
    return tuple(starts) if len(starts) == instr.shape.rank else None


def scatter_piece(instr: Instruction, which: int = 0) -> Piece | None:
    """The region of operand ``which`` a scatter updates: one window per scatter index, its sizes from the
    update window dims (1 on inserted and batching dims); None when the dimension numbers do not fit."""
    n = (len(instr.operands) - 1) // 2
    shapes = instr.operand_shapes
    if n < 1 or len(shapes) != 2 * n + 1:
        return None
    operand, updates = shapes[which], shapes[n + 1 + which]
    if operand is None or updates is None:
        return None
    try:
        window_dims = int_list(instr.attributes.get("update_window_dims", "{}"))
        ones = set(int_list(instr.attributes.get("inserted_window_dims", "{}")))
        ones |= set(int_list(instr.attributes.get("input_batching_dims", "{}")))
    except ParseError:
        return None
    if (
        any(d >= updates.rank for d in window_dims)
        or any(d >= operand.rank for d in ones)
        or len(window_dims) + len(ones) != operand.rank
    ):
        return None
    sizes, it = [], iter(window_dims)
    for dim in range(operand.rank):
        sizes.append(1 if dim in ones else updates.dims[next(it)])
    windows = math.prod(float(max(d, 0)) for i, d in enumerate(updates.dims) if i not in window_dims)
    return Piece(updates.logical_bytes, tuple(sizes), None, windows)


class Bytes:
    """Tile-aware traffic of instructions, the access of each fused computation analysed once."""

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.leaf_cache: dict[int, tuple[float, float, int]] = {}
        self.fusion_cache: dict[str, FusionAccess] = {}
        self.nesting = 0
        self.in_place = InPlace(module)

    # --- sums ----------------------------------------------------------------------------------------

    def leaf(self, leaf: Shape) -> tuple[float, float, int]:
        found = self.leaf_cache.get(id(leaf))
        if found is None:
            space = leaf.layout.memory_space if leaf.layout is not None else 0
            found = self.leaf_cache[id(leaf)] = (leaf.logical_bytes, leaf.padded_bytes, space)
        return found

    def traffic(self, items: Iterable[tuple[Shape | None, float | tuple[Piece, ...]]]) -> Traffic:
        """Sum over (shape, what is touched): a fraction of every leaf, or pieces of an array."""
        logical = padded = 0.0
        spaces: dict[int, float] = {}
        for shape, touched in items:
            if shape is None:
                continue
            if isinstance(touched, tuple):
                if not touched:
                    continue
                full_logical, full_padded, space = self.leaf(shape)
                lbytes = sum(p.logical for p in touched)
                pbytes = sum(
                    p.windows * tiles_bytes(shape, p.sizes, p.starts)
                    if p.sizes is not None
                    else (p.logical / full_logical * full_padded if full_logical else 0.0)
                    for p in touched
                )
                parts = [(lbytes, min(pbytes, full_padded) if shape.layout is not None else pbytes, space)]
            elif touched:
                parts = [(lb * touched, pb * touched, sp) for lb, pb, sp in map(self.leaf, shape.leaves())]
            else:
                continue
            for lbytes, pbytes, space in parts:
                logical += lbytes
                padded += pbytes
                spaces[space] = spaces.get(space, 0.0) + pbytes
        return Traffic(logical, padded, tuple(sorted(spaces.items())))

    # --- one instruction -----------------------------------------------------------------------------

    def boundary(self, instr: Instruction, comp: Computation, result: Shape, fused: Computation | None) -> Traffic:
        """Operands read + result written, by the rules of the module docstring. ``fused``: the fused
        computation of a fusion."""
        op, shapes = instr.opcode, instr.operand_shapes
        reads: list[float | tuple[Piece, ...]] = [1.0] * len(shapes)
        write: float | tuple[Piece, ...] = 1.0
        if op in ("fusion", "fusion-start") and fused is not None:
            return self.fusion(instr, fused, result, comp)
        if op in ("slice", "dynamic-slice") and shapes and shapes[0] is not None:
            starts = _slice_starts(instr) if op == "slice" else self.starts(comp, instr, 1)
            sizes = result.dims
            starts = None if starts is None else _clamped(starts, shapes[0].dims, sizes)
            reads[0] = (Piece(result.logical_bytes, sizes, starts),)
        elif op == "dynamic-update-slice" and len(shapes) > 1 and shapes[1] is not None:
            update = shapes[1]
            starts = self.starts(comp, instr, 2)
            starts = None if starts is None else _clamped(starts, result.dims, update.dims)
            reads[0], write = (), (Piece(update.logical_bytes, update.dims, starts),)
        elif op == "scatter" and (piece := scatter_piece(instr)) is not None and not result.is_tuple:
            reads[0], write = (piece,), (piece,)
        elif op == "custom-call":
            if moves_nothing(instr.custom_call_target or ""):
                return Traffic()
            if result.is_tuple:
                result = drop_workspace(result)
        return self.traffic([*zip(shapes, reads, strict=True), (result, write)])

    def fusion(self, instr: Instruction, fused: Computation, result: Shape, comp: Computation) -> Traffic:
        access = self.access(fused)
        aliased = instr.output_operand_aliasing
        reads: dict[int, float | tuple[Piece, ...]] = dict(access.reads)
        writes: dict[int, tuple[Shape | None, float | tuple[Piece, ...]]] = {}
        if result.is_tuple and not all(not s.is_tuple for s in result.tuple_shapes or ()):
            writes[-1] = (result, 1.0)  # nested tuples: every leaf written
            reads.update(dict.fromkeys(access.passthrough.values(), 1.0))
        leaves = result.leaves() if not writes else ()
        for k, leaf in enumerate(leaves):
            param = access.passthrough.get(k)
            if param is not None:
                if aliased.get((k,) if result.is_tuple else ()) == (param, ()):
                    continue  # returned unchanged in its own buffer
                reads[param] = 1.0  # an unaliased pass-through is a copy
            writes[k] = (leaf, access.writes.get(k, 1.0))
        shapes = instr.operand_shapes
        traffic = self.traffic([*((s, reads.get(i, 1.0)) for i, s in enumerate(shapes)), *writes.values()])
        whys: list[Note] = []
        copied = False
        for k, param in access.in_place.items() if leaves else ():
            in_place, why = self.in_place.decide(instr, comp, k, param)
            whys.append(why)
            if not in_place:  # the whole buffer read and the whole output written (timed bytes only)
                reads[param], writes[k], copied = 1.0, (leaves[k], 1.0), True
        said = tuple(dict.fromkeys(w for w in whys if w))
        if not copied:
            return dataclasses.replace(traffic, why=said) if said else traffic
        copy = self.traffic([*((s, reads.get(i, 1.0)) for i, s in enumerate(shapes)), *writes.values()])
        return Traffic(traffic.logical_bytes, copy.padded_bytes, copy.by_space, said)

    def starts(self, comp: Computation, instr: Instruction, first: int) -> tuple[int | None, ...] | None:
        """Constant start indices of a dynamic-slice / -update-slice (operands from ``first``), None each
        where not a constant; None when no index is constant."""
        found = tuple(_const_int(comp.by_name.get(o)) for o in instr.operands[first:])
        return found if any(s is not None for s in found) else None

    # --- fused computations --------------------------------------------------------------------------

    def access(self, comp: Computation) -> FusionAccess:
        """The parameters a fused computation reads and the outputs it writes in place (module docstring)."""
        found = self.fusion_cache.get(comp.name)
        if found is not None:
            return found
        if self.nesting >= 64:
            raise ParseError(f"computation {shown(comp.name)}: fusions nested deeper than 64", line=comp.line)
        self.nesting += 1
        try:
            found = self.fusion_cache[comp.name] = self._access(comp)
        finally:
            self.nesting -= 1
        return found

    def _access(self, comp: Computation) -> FusionAccess:
        out = FusionAccess()
        root = comp.root
        outputs = list(root.operands) if root.opcode == "tuple" else [root.name]
        chained: set[str] = set()
        for k, name in enumerate(outputs):
            node = _through_bitcast(comp, comp.by_name.get(name))
            if node is not None and node.opcode == "parameter":
                out.passthrough[k] = node.parameter_number or 0
                continue
            built = self.built_in_place(comp, comp.by_name.get(name), chained)
            if built is not None:
                out.in_place[k], out.writes[k] = built
        users: dict[str, list[Instruction]] = {}
        for instr in comp.instructions:
            for operand in dict.fromkeys(instr.operands):
                users.setdefault(operand, []).append(instr)
        for param in comp.params:
            pieces = self.param_reads(comp, param, users, chained)
            if pieces is not None:
                out.reads[param.parameter_number or 0] = pieces
        return out

    def built_in_place(
        self, comp: Computation, node: Instruction | None, chained: set[str]
    ) -> tuple[int, tuple[Piece, ...]] | None:
        """(parameter, pieces written) when ``node`` is built in place on a fused parameter by
        dynamic-update-slices, scatters and nested fusions (through bitcasts); else None. The names on
        the chain go into ``chained``."""
        pieces: list[Piece] = []
        coords, names = True, list[str]()
        for _ in range(len(comp.instructions) + 1):
            if node is None:
                return None
            op, shapes = node.opcode, node.operand_shapes
            if op == "parameter":
                chained.update(names)
                return node.parameter_number or 0, tuple(pieces)
            names.append(node.name)
            if op == "bitcast" and node.operands:
                coords = False
            elif op == "dynamic-update-slice" and len(shapes) > 1 and shapes[1] is not None:
                update, starts = shapes[1], self.starts(comp, node, 2)
                starts = None if starts is None or not coords else _clamped(starts, node.shape.dims, update.dims)
                pieces.append(Piece(update.logical_bytes, update.dims if coords else None, starts))
            elif op == "scatter" and len(node.operands) == 3 and (piece := scatter_piece(node)) is not None:
                pieces.append(piece if coords else Piece(piece.logical, None, None))
            elif op == "fusion" and not node.shape.is_tuple and node.called_computations:
                nested = self.access(self.module.computation(node.called_computations[0]))
                if 0 not in nested.in_place or nested.in_place[0] >= len(node.operands):
                    return None
                pieces += [p if coords else Piece(p.logical, None, None) for p in nested.writes[0]]
                node = comp.by_name.get(node.operands[nested.in_place[0]])
                continue
            else:
                return None
            node = comp.by_name.get(node.operands[0])
        return None

    def param_reads(
        self, comp: Computation, param: Instruction, users: dict[str, list[Instruction]], chained: set[str]
    ) -> tuple[Piece, ...] | None:
        """The pieces of a fused parameter its users read, or None when it is read whole."""
        full = param.shape.logical_bytes
        pieces: list[Piece] = []
        stack, seen = [(param.name, True)], {param.name}
        while stack:
            name, coords = stack.pop()
            for user in users.get(name, ()):
                op, first = user.opcode, user.operands[0] == name
                if op == "bitcast":
                    if user.name not in seen:
                        seen.add(user.name)
                        stack.append((user.name, False))
                elif op in ("slice", "dynamic-slice") and first:
                    starts = _slice_starts(user) if op == "slice" else self.starts(comp, user, 1)
                    sizes = user.shape.dims if coords else None
                    starts = (
                        None if starts is None or not coords else _clamped(starts, param.shape.dims, user.shape.dims)
                    )
                    pieces.append(Piece(user.shape.logical_bytes, sizes, starts))
                elif op == "dynamic-update-slice" and first and name not in user.operands[1:]:
                    pass  # the buffer updated in place: not read (XLA's rule)
                elif op == "scatter" and first and user.name in chained and (p := scatter_piece(user)) is not None:
                    pieces.append(p if coords else Piece(p.logical, None, None))  # the region it updates
                elif op == "fusion" and user.called_computations:
                    nested = self.access(self.module.computation(user.called_computations[0]))
                    for j, operand in enumerate(user.operands):
                        if operand != name:
                            continue
                        sub = nested.reads.get(j)
                        if sub is None or j in nested.passthrough.values():
                            return None  # read whole, or returned whole to this computation
                        pieces += [p if coords else Piece(p.logical, None, None) for p in sub]
                elif op == "tuple" and user is comp.root:
                    pass  # returned as it is: FusionAccess.passthrough
                else:
                    return None
        return None if full and sum(p.logical for p in pieces) >= full else tuple(pieces)


def _through_bitcast(comp: Computation, node: Instruction | None) -> Instruction | None:
    for _ in range(len(comp.instructions)):
        if node is None or node.opcode != "bitcast" or not node.operands:
            break
        node = comp.by_name.get(node.operands[0])
    return node
