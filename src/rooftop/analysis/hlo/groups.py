"""Device lists of XLA HLO text: ``replica_groups``, ``source_target_pairs``, iota tile assignments
(``[2,4]<=[8]``, ``[4,2]<=[2,4]T(1,0)``) and mesh axes (``mesh['x'=2,'y'=4] {'x'}``, XLA's
MeshAxesReplicaGroupList), expanded to explicit lists of device ids.

Device ids are ASCII integers below ``MAX_DEVICES`` (2**17 = 131072, above the 100,000 GPUs of the largest
machine the catalog models); a device belongs to at most one replica group
(XLA's HloVerifier: "replica is repeated"); iota and mesh sizes are at least 1."""

from __future__ import annotations

import math
import re

from rooftop.analysis.hlo.shapes import int_list, parse_int
from rooftop.errors import ParseError, shown

#: the most devices a module may name (device ids are below it).
MAX_DEVICES = 1 << 17
_GROUP_RE = re.compile(r"\{([^{}]*)\}")
_IOTA_RE = re.compile(r"\[([0-9,\s]*)\]\s*<=\s*\[([0-9,\s]*)\](?:\s*T\(([0-9,\s]*)\))?")
_MESH_RE = re.compile(r"mesh\[([^\]]*)\](?:\s*,\s*device_ids=\((.*)\))?\s*\{([^{}]*)\}")
_MAXIMAL_MESH_RE = re.compile(r"maximal_mesh\[device_id=([0-9]+)\]\s*\{\s*\}")
_AXIS_REF_RE = re.compile(r"\s*'?([^':=(),\s]+)'?\s*(?::\(([0-9]+)\)([0-9]+))?\s*")


def transpose_flat(values: list[int], dims: tuple[int, ...], perm: tuple[int, ...]) -> list[int]:
    """Row-major ``values`` of an array with ``dims``, transposed by ``perm``, flattened row-major."""
    if sorted(perm) != list(range(len(dims))):
        raise ParseError(f"transpose permutation {shown(perm)} does not match dims {shown(dims)}")
    if math.prod(dims) != len(values):
        raise ParseError(f"dims {shown(dims)} do not hold the {len(values)} device ids")
    strides = [math.prod(dims[i + 1 :]) for i in range(len(dims))]
    out_dims = [dims[p] for p in perm]
    out_strides = [strides[p] for p in perm]
    offsets = [0]
    for size, stride in zip(out_dims, out_strides, strict=True):  # build indices dim by dim (no recursion)
        offsets = [base + i * stride for base in offsets for i in range(size)]
    return [values[i] for i in offsets]


def expand_iota(reshape_dims: tuple[int, ...], perm: tuple[int, ...] | None = None) -> list[int]:
    """Device ids of an iota tile assignment ``<=[reshape_dims]T(perm)``: iota(prod), reshaped, transposed."""
    total = math.prod(reshape_dims)
    if total > MAX_DEVICES:
        raise ParseError(f"iota device list of {total} devices exceeds the limit of {MAX_DEVICES}")
    values = list(range(total))
    if perm is None or list(perm) == list(range(len(reshape_dims))):
        return values
    return transpose_flat(values, reshape_dims, perm)


def _to_groups(flat: list[int], group_size: int) -> list[list[int]]:
    if group_size <= 0 or len(flat) % group_size:
        raise ParseError(f"{len(flat)} devices do not split into groups of {group_size}")
    return [flat[i : i + group_size] for i in range(0, len(flat), group_size)]


def _iota_groups(match: re.Match[str]) -> list[list[int]]:
    dims = int_list(match.group(1), "iota dims", lo=1, hi=MAX_DEVICES)
    reshape = int_list(match.group(2), "iota reshape dims", lo=1, hi=MAX_DEVICES)
    perm = int_list(match.group(3), "iota transpose", hi=64) if match.group(3) is not None else None
    if not dims or math.prod(dims) != math.prod(reshape):
        raise ParseError(
            f"iota groups {shown(match.group(0))}: {shown(list(dims))} and {shown(list(reshape))} hold different counts"
        )
    return _to_groups(expand_iota(reshape, perm), dims[-1])


def _explicit_groups(text: str) -> list[list[int]]:
    body = text.strip()[1:-1]
    if _GROUP_RE.sub("", body).replace(",", "").strip():
        raise ParseError(f"expected groups like {{{{0,1}},{{2,3}}}}, got {shown(text)}")
    return [list(int_list(g, "device id", hi=MAX_DEVICES - 1)) for g in _GROUP_RE.findall(body)]


def _axis_dims(refs: list[tuple[int, int]], full: int) -> tuple[list[int], list[int]]:
    """XLA's reshape of one mesh axis for its referenced sub-axes ``(pre_size, size)``: reshape dims and,
    per ref in the given order, the index of its reshaped dim."""
    order = sorted(range(len(refs)), key=lambda i: refs[i][0])
    dims: list[int] = []
    where = [0] * len(refs)
    prefix = 1
    for i in order:
        pre, size = refs[i]
        if pre != prefix:
            if pre % prefix:
                raise ParseError(f"sub-axis pre-size {pre} is not a multiple of {prefix}")
            dims.append(pre // prefix)
            prefix = pre
        where[i] = len(dims)
        dims.append(size)
        prefix *= size
    if full % prefix:
        raise ParseError(f"sub-axes of total size {prefix} do not divide the mesh axis of size {full}")
    if prefix != full:
        dims.append(full // prefix)
    return dims, where


def _mesh_groups(match: re.Match[str]) -> list[list[int]]:
    """``mesh['x'=2,'y'=4] {'x'}``: groups of devices that differ only along the listed axes."""
    names, sizes = [], []
    for item in match.group(1).split(","):
        name, eq, size = item.partition("=")
        if not eq:
            raise ParseError(f"expected 'name=size' in mesh {shown(match.group(0))}, got {shown(item)}")
        names.append(name.strip().strip("'\""))
        sizes.append(parse_int(size, f"size of mesh axis {shown(names[-1])}", lo=1, hi=MAX_DEVICES))
    total = math.prod(sizes)
    flat = _device_ids(match.group(2), total)
    refs: dict[int, list[tuple[int, int]]] = {}
    axis_order: list[tuple[int, int]] = []
    for item in match.group(3).split(",") if match.group(3).strip() else []:
        ref = _AXIS_REF_RE.fullmatch(item)
        if ref is None or ref.group(1) not in names:
            raise ParseError(
                f"unknown mesh axis {shown(item.strip())} in {shown(match.group(0))}; axes: {shown(names)}"
            )
        axis = names.index(ref.group(1))
        sub = (
            (
                parse_int(ref.group(2), "sub-axis pre-size", 1, MAX_DEVICES),
                parse_int(ref.group(3), "sub-axis size", 1, MAX_DEVICES),
            )
            if ref.group(2)
            else (1, sizes[axis])
        )
        axis_order.append((axis, len(refs.setdefault(axis, []))))
        refs[axis].append(sub)
    dims: list[int] = []
    where: dict[int, list[int]] = {}
    for axis, size in enumerate(sizes):
        offset = len(dims)
        axis_dims, local = _axis_dims(refs[axis], size) if axis in refs else ([size], [])
        where[axis] = [offset + w for w in local]
        dims.extend(axis_dims)
    grouped = [where[axis][k] for axis, k in axis_order]
    perm = tuple([d for d in range(len(dims)) if d not in grouped] + grouped)
    group_size = math.prod(dims[d] for d in grouped)
    return _to_groups(transpose_flat(flat, tuple(dims), perm), group_size)


def _device_ids(text: str | None, total: int) -> list[int]:
    if total > MAX_DEVICES:
        raise ParseError(f"mesh of {total} devices exceeds the limit of {MAX_DEVICES}")
    if text is None:
        return list(range(total))
    iota = _IOTA_RE.fullmatch(text.strip())
    if iota is not None:
        reshape = int_list(iota.group(2), "iota reshape dims", lo=1, hi=MAX_DEVICES)
        perm = int_list(iota.group(3), "iota transpose", hi=64) if iota.group(3) is not None else None
        flat = expand_iota(reshape, perm)
    else:
        flat = list(int_list(text, "device id", hi=MAX_DEVICES - 1))
    if len(flat) != total:
        raise ParseError(f"mesh device_ids hold {len(flat)} ids for a mesh of {total} devices")
    return flat


def device_groups(text: str) -> list[list[int]]:
    """Expand any replica-group form to explicit lists of device ids.

    ``{{0,1},{2,3}}`` explicit; ``{}`` -> [] (one group of all devices); ``[2,4]<=[8]`` iota (reshape
    iota(8) to [8], no transpose, then to [2 groups, 4 per group]); ``[4,2]<=[2,4]T(1,0)`` iota with a
    transpose; ``mesh['x'=2,'y'=4] {'x'}`` mesh axes (XLA's MeshAxesReplicaGroupList)."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        return _explicit_groups(body)
    for regex, expand in ((_IOTA_RE, _iota_groups), (_MESH_RE, _mesh_groups)):
        match = regex.fullmatch(body)
        if match is not None:
            return expand(match)
    maximal = _MAXIMAL_MESH_RE.fullmatch(body)
    if maximal is not None:
        return [[parse_int(maximal.group(1), "device id", hi=MAX_DEVICES - 1)]]
    raise ParseError(f"expected replica groups like {{{{0,1}},{{2,3}}}} or [2,4]<=[8], got {shown(text)}")


def replica_groups(text: str) -> list[list[int]]:
    """``device_groups`` of a ``replica_groups`` value, each device in at most one group (XLA rejects a
    repeated replica: a collective cannot run twice on one device)."""
    groups = device_groups(text)
    seen: set[int] = set()
    for group in groups:
        for device in group:
            if device in seen:
                raise ParseError(
                    f"device {device} appears twice; each device belongs to at most one group, e.g. {{{{0,1}},{{2,3}}}}"
                )
            seen.add(device)
    return groups
