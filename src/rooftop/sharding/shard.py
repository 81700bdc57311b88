"""A tensor written in the sharding notation, laid on a mesh: which axes shard each dim,
the per-device (local) shape and bytes, and how many copies exist across the mesh.

    A[I_XY, J] on X=2,Y=8,Z=2:  local shape [I / (2 x 8), J], replicated over Z (2 copies)

(How to Scale Your Model, Part 3, "A unified notation for sharding": the local shape
divides each dim by the product of its axes; an axis not used by any dim replicates
the array; one mesh axis may shard at most one dim of a tensor.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rooftop.dtypes import canonical_dtype, dtype_bytes
from rooftop.errors import InvalidConfigError, ShardingError, shown
from rooftop.sharding.notation import Tensor, resolve_axes

Axes = tuple[str, ...]

#: most elements of one array (or one matmul's iteration space): 2**100, about 1.3e30, keeps
#: every byte and FLOP count a finite float however many dims multiply
MAX_ELEMENTS = 1 << 100


def check_elements(sizes: Sequence[int], what: str) -> None:
    """Raise when the sizes multiply past MAX_ELEMENTS (an array no machine holds)."""
    total = 1
    for s in sizes:
        total *= s
        if total > MAX_ELEMENTS:
            raise InvalidConfigError(
                f"{what} has more than 2**100 elements (sizes {shown(list(sizes))}); give smaller sizes"
            )


@dataclass(frozen=True)
class Sharding:
    """Named dims, the mesh axes sharding each (in order), and the unreduced axes."""

    name: str
    dims: tuple[str, ...]
    axes: tuple[Axes, ...]
    unreduced: Axes = ()

    def axes_of(self, dim: str) -> Axes:
        return self.axes[self.dims.index(dim)]

    @property
    def used(self) -> Axes:
        """Every mesh axis that shards a dim (not counting unreduced axes)."""
        return tuple(a for axes in self.axes for a in axes)

    def with_axes(self, dim: str, axes: Axes) -> Sharding:
        new = list(self.axes)
        new[self.dims.index(dim)] = tuple(axes)
        return Sharding(self.name, self.dims, tuple(new), self.unreduced)

    def notation(self) -> str:
        """ "A[I_X, J]{U_Y}": the sharding in the notation it was read from."""
        dims = ", ".join(f"{d}_{''.join(a)}" if a else d for d, a in zip(self.dims, self.axes, strict=True))
        u = f"{{U_{''.join(self.unreduced)}}}" if self.unreduced else ""
        return f"{self.name}[{dims}]{u}"

    def local_sizes(self, sizes: Mapping[str, int], mesh_shape: Mapping[str, int]) -> dict[str, int]:
        """Per-device size of each dim; a dim its axes do not divide is a ShardingError."""
        out = {}
        for d, axes in zip(self.dims, self.axes, strict=True):
            ways = math.prod(mesh_shape[a] for a in axes)
            if sizes[d] % ways:
                parts = " x ".join(f"{a}={mesh_shape[a]}" for a in axes)
                raise ShardingError(
                    f"dim {d}={sizes[d]} of {self.notation()} is not divisible by its mesh axes {parts} "
                    f"({ways} ways); use a size that is a multiple of {ways} or shard {d} over fewer axes"
                )
            out[d] = sizes[d] // ways
        return out

    def local_bytes(self, sizes: Mapping[str, int], mesh_shape: Mapping[str, int], dtype: str) -> float:
        return float(math.prod(self.local_sizes(sizes, mesh_shape).values())) * dtype_bytes(dtype)


def resolve_sharding(t: Tensor, mesh_shape: Mapping[str, int]) -> Sharding:
    """Resolve every subscript of ``t`` against the mesh; an axis used twice is an error."""
    names = list(mesh_shape)
    axes = tuple(resolve_axes(d.axes_text, names) for d in t.dims)
    unreduced = resolve_axes(t.unreduced_text, names)
    seen: dict[str, str] = {}
    for d, ax in zip(t.dims, axes, strict=True):
        for a in ax:
            if a in seen:
                first = next(str(x) for x in t.dims if x.name == seen[a])
                raise ShardingError(
                    f"{t} shards both {seen[a]} and {d.name} over mesh axis {a}: an axis can shard at most one "
                    f"dim of a tensor (e.g. {first} and {d.name} unsharded)"
                )
            seen[a] = d.name
    for a in unreduced:
        if a in seen:
            raise ShardingError(f"{t} is both sharded ({seen[a]}_{a}) and unreduced over mesh axis {a}")
    return Sharding(t.name, t.dim_names, axes, unreduced)


@dataclass(frozen=True)
class ShardReport:
    """One array on a mesh: local shape and bytes, total bytes across all devices."""

    sharding: Sharding
    dtype: str
    shape: tuple[int, ...]
    local_shape: tuple[int, ...]
    bytes_per_device: float
    array_bytes: float
    devices: int
    replicated_axes: Axes

    @property
    def copies(self) -> int:
        """Replication factor: devices holding the same shard (product of unused axes)."""
        return self.devices // max(1, math.prod(self.local_ways))

    @property
    def local_ways(self) -> tuple[int, ...]:
        return tuple(s // ls for s, ls in zip(self.shape, self.local_shape, strict=True))

    @property
    def total_bytes(self) -> float:
        """Bytes summed over every device (= array bytes x copies)."""
        return self.bytes_per_device * self.devices


def shard_array(t: Tensor, shape: Sequence[int], dtype: str, mesh_shape: Mapping[str, int]) -> ShardReport:
    """Lay ``t`` (dims named positionally by ``shape``) on a mesh of ``mesh_shape``."""
    if len(shape) != len(t.dims):
        raise InvalidConfigError(
            f"{shown(str(t))} has {len(t.dims)} dims but the shape {shown(list(shape))} has {len(shape)}; "
            "give one size per dim"
        )
    if any(not isinstance(s, int) or s < 1 for s in shape):
        raise InvalidConfigError(f"shape {shown(list(shape))}: every size must be an integer >= 1")
    check_elements(shape, f"array {t}")
    sh = resolve_sharding(t, mesh_shape)
    sizes = dict(zip(sh.dims, shape, strict=True))
    local = sh.local_sizes(sizes, mesh_shape)
    dtype = canonical_dtype(dtype)
    per_device = float(math.prod(local.values())) * dtype_bytes(dtype)
    replicated = tuple(a for a in mesh_shape if a not in sh.used)
    return ShardReport(
        sh,
        dtype,
        tuple(shape),
        tuple(local[d] for d in sh.dims),
        per_device,
        float(math.prod(shape)) * dtype_bytes(dtype),
        math.prod(mesh_shape.values()),
        replicated,
    )
