"""Physical slices and the named logical mesh laid on them.

A Topology is a list of physical dims, outermost first, each with a link kind:
- TPU: the ICI torus dims of a slice ("4x4x4", "16x20x28"), wrapping according to the
  generation's rule, optionally preceded by a "dcn" dim for several slices ("2*16x16").
- GPU: ("fabric" dim of N/D nodes, "nvlink" dim of D GPUs), e.g. "16x8" or "4x72".

A Mesh maps named axes (outermost first, e.g. data=8,model=8) onto those dims in order;
an axis may span several consecutive dims (X=16 over a 4x4 plane) or part of one (its
inner factor), so on GPUs the innermost axes land in the NVLink domain and on several
TPU slices the outer axis crosses DCN.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property

from rooftop.errors import InvalidConfigError, ShardingError, shown
from rooftop.hardware.chip import MAX_CHIPS, Chip
from rooftop.reasons import Option, OptionError
from rooftop.units import divisors, parse_int, plural

#: most named axes of a mesh (real meshes have 1 to 6) and the longest axis name
MAX_MESH_AXES = 64
MAX_AXIS_NAME = 100


@dataclass(frozen=True)
class PhysDim:
    """One physical dim: ``size`` chips connected by ``link`` ("ici", "nvlink", "fabric", "dcn")."""

    size: int
    link: str
    wrap: bool = False


@dataclass(frozen=True)
class Topology:
    chip: Chip
    dims: tuple[PhysDim, ...]
    spec: str

    @property
    def num_chips(self) -> int:
        return math.prod(d.size for d in self.dims)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)

    def describe(self) -> str:
        parts = [f"{d.size}{'(wrap)' if d.wrap else ''} {d.link}" for d in self.dims]
        return f"{self.chip.name} {self.spec}: " + " x ".join(parts)


_SHAPE = re.compile(r"\s*[0-9]+(\s*x\s*[0-9]+)*\s*", re.ASCII)


def _split_shape(text: str, what: str) -> tuple[int, ...]:
    """ "4x4x4" -> (4, 4, 4): sizes in ASCII digits, each and their product at most MAX_CHIPS."""
    if not _SHAPE.fullmatch(text):
        raise InvalidConfigError(f"cannot read {what} {shown(text)}: expected sizes joined by 'x', e.g. 4x4x4")
    dims = tuple(parse_int(p, f"{what} size", 1, MAX_CHIPS) for p in text.split("x"))
    _check_chips(dims, text, what)
    return dims


def _check_chips(dims: tuple[int, ...], text: str, what: str) -> None:
    total = math.prod(dims)
    if total > MAX_CHIPS:
        raise InvalidConfigError(f"{what} {shown(text)} has {shown(total)} chips; at most {MAX_CHIPS:,} are supported")


def _torus_wraps(chip: Chip, dims: tuple[int, ...]) -> tuple[bool, ...]:
    """Wraparound per dim under the chip's rule (How to Scale Your Model, Part 2):
    "full-axis" (v5e, v6e): a dim wraps only at the pod's full length (16);
    "whole-cubes" (v4, v5p): every dim wraps iff the slice is made of whole 4x4x4 cubes."""
    spec = chip.topology
    if spec.wraparound == "full-axis":
        return tuple(d == spec.wrap_length and d > 2 for d in dims)
    if spec.wraparound == "whole-cubes":
        cube = spec.cube or (4,) * len(dims)
        padded = dims + (1,) * (len(cube) - len(dims))
        whole = len(dims) == len(cube) and all(d % c == 0 for d, c in zip(padded, cube, strict=True))
        return tuple(whole and d > 2 for d in dims)
    return (False,) * len(dims)


def _check_torus(chip: Chip, dims: tuple[int, ...], text: str) -> None:
    spec = chip.topology
    pod = "x".join(map(str, spec.max_dims))
    limit = f"the {chip.name} pod is at most {pod} ({spec.max_chips or math.prod(spec.max_dims)} chips)"
    if len(dims) > len(spec.max_dims):
        raise InvalidConfigError(f"{chip.name} slice {shown(text)} has {len(dims)} dims; {limit}")
    chips = math.prod(dims)
    # the slice must fit in the pod in some orientation: compare dims sorted largest first
    if any(a > b for a, b in zip(sorted(dims, reverse=True), sorted(spec.max_dims, reverse=True), strict=False)):
        raise InvalidConfigError(f"{chip.name} slice {text!r} is larger than the pod: {limit}")
    if spec.max_chips and chips > spec.max_chips:
        raise InvalidConfigError(f"{chip.name} slice {text!r} has {chips} chips; {limit}")
    if spec.wraparound == "whole-cubes":
        for d in dims:
            if d not in (1, 2, 4) and d % 4:
                raise InvalidConfigError(
                    f"{chip.name} slice {text!r}: dim {d} is not a whole number of 4-chip cube edges "
                    f"(slices larger than a cube are built of 4x4x4 cubes; use 1, 2, 4 or a multiple of 4)"
                )
    elif spec.wraparound == "full-axis":
        for d in dims:
            if d & (d - 1):
                raise InvalidConfigError(
                    f"{chip.name} slice {text!r}: dim {d} is not a power of two (valid: 1, 2, 4, 8, 16)"
                )


def parse_topology(chip: Chip, text: str) -> Topology:
    """ "4x4x4", "16x20x28", "2*16x16" (2 slices over DCN) for TPUs; "16x8" (16 NVLink
    domains of 8 GPUs) or "8" for GPUs. Shapes the chip cannot have raise with the maximum."""
    text = text.strip()
    slices = 1
    if "*" in text:
        left, text = text.split("*", 1)
        slices = parse_int(left, "slice count before '*' in the topology", 1, MAX_CHIPS)
    dims = _split_shape(text, "topology")
    _check_chips((slices, *dims), f"{slices}*{text}", "topology")
    if chip.topology.kind == "switched":
        return _switched(chip, dims, slices, text)
    _check_torus(chip, dims, text)
    wraps = _torus_wraps(chip, dims)
    phys = tuple(PhysDim(d, "ici", w) for d, w in zip(dims, wraps, strict=True))
    if slices > 1:
        phys = (PhysDim(slices, "dcn"),) + phys
    spec = f"{slices}*{text}" if slices > 1 else text
    return Topology(chip, phys, spec)


def _switched(chip: Chip, dims: tuple[int, ...], slices: int, text: str) -> Topology:
    if slices != 1:
        raise InvalidConfigError(f"'{slices}*' slices are a TPU notion; for {chip.name} write NODESxGPUS, e.g. 16x8")
    if len(dims) == 1:
        n = dims[0]
        domain = min(chip.topology.domain_sizes[0], n)
        if n % domain:
            raise InvalidConfigError(f"{n} {chip.name} GPUs do not fill whole NVLink domains of {domain}")
        dims = (n // domain, domain)
    if len(dims) != 2:
        raise InvalidConfigError(f"{chip.name} topology {shown(text)}: write NODESxGPUS_PER_NVLINK_DOMAIN, e.g. 16x8")
    nodes, domain = dims
    valid = chip.topology.domain_sizes
    if domain > max(valid) or (nodes > 1 and domain not in valid):
        raise InvalidConfigError(
            f"{chip.name} NVLink domain of {domain} GPUs is not available (valid: {', '.join(map(str, valid))})"
        )
    if chip.topology.max_chips and nodes * domain > chip.topology.max_chips:
        raise InvalidConfigError(f"{nodes * domain} {chip.name} GPUs exceed the maximum {chip.topology.max_chips}")
    return Topology(chip, (PhysDim(nodes, "fabric"), PhysDim(domain, "nvlink")), f"{nodes}x{domain}")


def topology_for_chips(chip: Chip, n: int) -> Topology:
    """A default topology of ``n`` chips: GPUs in full NVLink domains; TPUs as the most
    cubic slice the generation allows."""
    if not 1 <= n <= MAX_CHIPS:
        raise InvalidConfigError(f"chip count must be in [1, {MAX_CHIPS:,}], got {n:,}")
    if chip.topology.kind == "switched":
        return parse_topology(chip, str(n))
    limit = chip.topology.max_chips or math.prod(chip.topology.max_dims)
    if n > limit:
        raise OptionError(
            f"{n} {chip.name} chips exceed one pod (max {limit}); for several slices over DCN give ",
            Option("topology"),
            f", e.g. 2*{'x'.join(map(str, chip.topology.max_dims))}",
        )
    ndim = len(chip.topology.max_dims)
    for shape in _factorizations(n, ndim):
        try:
            return parse_topology(chip, "x".join(map(str, shape)))
        except InvalidConfigError:
            continue
    raise InvalidConfigError(f"{n} {chip.name} chips do not form a valid slice (max {chip.topology.max_chips} chips)")


def _factorizations(n: int, ndim: int) -> list[tuple[int, ...]]:
    """Shapes of ``ndim`` dims with product n (each listed once, sizes ascending), most cubic
    first. Built from n's divisors, smallest size first: the work grows with the shapes there
    are, not with n."""
    divs = divisors(n)
    out: list[tuple[int, ...]] = []

    def rec(rem: int, k: int, lo: int, acc: tuple[int, ...]) -> None:
        if k == 1:
            if rem >= lo:
                out.append((*acc, rem))
            return
        for d in divs:
            if d < lo or rem % d:
                continue
            if d**k > rem:
                break
            rec(rem // d, k - 1, d, (*acc, d))

    rec(n, max(ndim, 1), 1, ())
    return sorted(out, key=lambda s: (max(s) / min(s), s))


#: links of the scale-out network: the GPU fabric between NVLink domains, the DCN between TPU slices
SCALE_OUT_LINKS = ("fabric", "dcn")


def domains_spanned(axis: MeshAxis) -> int:
    """How many fast domains (NVLink domains, TPU slices) a mesh axis spans: the product of its segments
    over the scale-out network (1 when it stays inside one)."""
    return math.prod(s.size for s in axis.segments if s.link in SCALE_OUT_LINKS)


@dataclass(frozen=True)
class Segment:
    """Part of a physical dim used by a mesh axis: ``size`` chips ``stride`` apart on ``dim``."""

    dim: int
    size: int
    stride: int
    link: str
    wrap: bool


@dataclass(frozen=True)
class MeshAxis:
    name: str
    size: int
    segments: tuple[Segment, ...]

    @property
    def links(self) -> tuple[str, ...]:
        return tuple(s.link for s in self.segments)


@dataclass(frozen=True)
class Mesh:
    topology: Topology
    axes: tuple[MeshAxis, ...]

    @property
    def shape(self) -> dict[str, int]:
        return {a.name: a.size for a in self.axes}

    @cached_property
    def _by_name(self) -> dict[str, MeshAxis]:
        return {a.name: a for a in self.axes}

    def axis(self, name: str) -> MeshAxis:
        found = self._by_name.get(name)
        if found is not None:
            return found
        raise ShardingError(f"unknown mesh axis {shown(name)} (mesh axes: {', '.join(a.name for a in self.axes)})")

    def size(self, names: tuple[str, ...] | list[str]) -> int:
        return math.prod(self.axis(n).size for n in names)

    def spec(self) -> str:
        return ",".join(f"{a.name}={a.size}" for a in self.axes)


_MESH_AXIS = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([0-9]+)", re.ASCII)


def parse_mesh_spec(text: str) -> dict[str, int]:
    """ "X=4,Y=4,Z=4" -> {"X": 4, "Y": 4, "Z": 4} (order kept: outermost first); names are ASCII
    identifiers, sizes ASCII digits in [1, MAX_CHIPS], their product at most MAX_CHIPS."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = _MESH_AXIS.fullmatch(part)
        if not m:
            raise InvalidConfigError(f"cannot read mesh axis {shown(part)}: expected NAME=SIZE, e.g. data=8")
        name, size = m.group(1), parse_int(m.group(2), f"mesh axis {shown(m.group(1))} size", 1, MAX_CHIPS)
        if name in out:
            raise InvalidConfigError(f"mesh axis {shown(name)} appears twice in {shown(text)}")
        if len(name) > MAX_AXIS_NAME:
            raise InvalidConfigError(f"mesh axis name {shown(name)} is longer than {MAX_AXIS_NAME} characters")
        out[name] = size
        if len(out) > MAX_MESH_AXES:
            raise InvalidConfigError(f"mesh {shown(text)} has more than {MAX_MESH_AXES} axes")
    if not out:
        raise InvalidConfigError(f"empty mesh {shown(text)}: expected NAME=SIZE,..., e.g. data=8,model=4")
    total = math.prod(out.values())
    if total > MAX_CHIPS:
        raise InvalidConfigError(f"mesh {shown(text)} has {shown(total)} devices; at most {MAX_CHIPS:,} are supported")
    return out


def make_mesh(topology: Topology, axes: dict[str, int] | str | None = None) -> Mesh:
    """Lay named axes on the topology's dims in order (outermost first). With no axes,
    each physical dim becomes an axis (X, Y, Z; or dcn, fabric, nvlink)."""
    if axes is None:
        axes = _default_axes(topology)
    if isinstance(axes, str):
        axes = parse_mesh_spec(axes)
    if len(axes) > MAX_MESH_AXES:
        raise ShardingError(f"a mesh of {len(axes):,} axes: at most {MAX_MESH_AXES} are supported")
    total = math.prod(axes.values())
    if total != topology.num_chips:
        raise ShardingError(
            f"mesh {','.join(f'{k}={v}' for k, v in axes.items())} has {plural(total, 'device')} but topology "
            f"{topology.spec} has {plural(topology.num_chips, 'chip')}; e.g. {_suggest(topology)}"
        )
    remaining = [d.size for d in topology.dims]  # chips of each dim not yet taken (its inner factor)
    placed = []
    for name, size in axes.items():
        segs, need = [], size
        dim = next((i for i, r in enumerate(remaining) if r > 1), len(remaining))
        while need > 1:
            while dim < len(remaining) and remaining[dim] == 1:
                dim += 1
            if dim >= len(remaining):
                raise ShardingError(f"mesh axis {name}={size} does not fit on topology {topology.spec}")
            avail = remaining[dim]
            take = math.gcd(need, avail)
            if take == 1:
                raise ShardingError(
                    f"mesh axis {name}={size} cannot be laid on topology {topology.spec}: {need} shares no factor "
                    f"with the {avail} chips left on dim {dim}; axes take factors of the dims in order "
                    f"(e.g. {_suggest(topology)})"
                )
            pd = topology.dims[dim]
            stride = avail // take  # the axis takes the outer factor of what is left of the dim
            wrap = pd.wrap and take * stride == pd.size
            segs.append(Segment(dim, take, stride, pd.link, wrap))
            remaining[dim] //= take
            need //= take
            dim += 1
        placed.append(MeshAxis(name, size, tuple(segs)))
    return Mesh(topology, tuple(placed))


def _default_axes(topology: Topology) -> dict[str, int]:
    names = iter("XYZWVU")
    out: dict[str, int] = {}
    for d in topology.dims:
        name = d.link if d.link in ("dcn", "fabric", "nvlink") else next(names)
        out[name] = d.size
    return out


def _suggest(topology: Topology) -> str:
    return ",".join(f"{k}={v}" for k, v in _default_axes(topology).items())
