"""``rooftop collective KIND --chip C --topology T --axes X (--bytes V | --array ... --sharding ...)``.

The array's per-device size V is the one Comm's docstring defines: for an all-gather the
per-device bytes *after* gathering (full bytes / product of the other sharded axes), for
the others the per-device bytes going in (full bytes / product of every sharded axis).
``--sharding`` names the array's dims positionally and describes the array going in.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import TYPE_CHECKING, Any

from rooftop.cli.common import ALGORITHMS_HELP, MAX_DIM, Output, add_common, chip_from_args, count
from rooftop.cost.cost import COLLECTIVE_KINDS
from rooftop.errors import InvalidConfigError, ParseError, shown

if TYPE_CHECKING:
    from rooftop.hardware.topology import Mesh

_ARRAY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*\[([^\]]*)\]\s*$")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("collective", help="time a collective (all-gather, all-reduce, ...) over mesh axes")
    p.add_argument("kind", choices=COLLECTIVE_KINDS, help="the collective")
    add_common(p)
    p.add_argument("--topology", required=True, help="physical slice, e.g. 4x4x4 (TPU), 2*16x16, 16x8 (GPU)")
    p.add_argument("--mesh", help="named mesh axes on the topology, e.g. X=4,Y=4,Z=4 (default: one per dim)")
    p.add_argument("--axes", required=True, help="mesh axes the collective runs over, e.g. X or X,Y")
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument(
        "--bytes", dest="nbytes", metavar="BYTES", help="per-device bytes of the collective's array, e.g. 2MiB"
    )
    size.add_argument("--array", help="the global array, e.g. 'bf16[1024,4096]'")
    p.add_argument("--sharding", help="its sharding going in, dims named positionally, e.g. '[B_X, D_Y]'")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--sharp", action="store_true", help="in-network reduction (NVLink/InfiniBand SHARP)")
    how.add_argument(
        "--algorithm",
        metavar="NAME",
        help=f"how the library runs all-gather / reduce-scatter / all-reduce: {ALGORITHMS_HELP} (default: "
        "hierarchical; in-network is --sharp)",
    )
    p.set_defaults(func=run)


def parse_array(text: str) -> tuple[str, tuple[int, ...]]:
    """ "bf16[1024,4096]" -> ("bf16", (1024, 4096))."""
    from rooftop.dtypes import canonical_dtype

    m = _ARRAY.match(text)
    if not m:
        raise ParseError(f"cannot read array {shown(text)}: expected DTYPE[SIZE, ...], e.g. bf16[1024,4096]")
    shape = [count(part, "--array size", MAX_DIM) for part in filter(None, (p.strip() for p in m.group(2).split(",")))]
    if not shape:
        raise ParseError(f"array {shown(text)} has no dims; e.g. bf16[1024,4096]")
    return canonical_dtype(m.group(1)), tuple(shape)


def _array_bytes(args: argparse.Namespace, mesh: Mesh, axes: tuple[str, ...]) -> tuple[float, dict[str, Any]]:
    """V for ``--array``/``--sharding`` (see the module docstring) and the payload's ``array`` key."""
    from rooftop.report.collective import array_dict
    from rooftop.sharding.notation import parse_tensor
    from rooftop.sharding.shard import shard_array

    dtype, shape = parse_array(args.array)
    text = args.sharding or "[" + ", ".join(f"D{i}" for i in range(len(shape))) + "]"
    rep = shard_array(parse_tensor(text, "A"), shape, dtype, mesh.shape)
    used = rep.sharding.used
    if args.kind == "all-gather":
        nbytes = rep.array_bytes / math.prod(mesh.shape[a] for a in used if a not in axes)
    else:
        nbytes = rep.bytes_per_device
    unsharded = [a for a in axes if a not in used] if args.kind in ("all-gather", "all-to-all") else []
    return nbytes, array_dict(rep, unsharded)


def run(args: argparse.Namespace) -> Output:
    from rooftop.cost.collectives import collective_time
    from rooftop.cost.cost import Comm
    from rooftop.hardware.topology import make_mesh, parse_topology
    from rooftop.plan.train.framework import catalog_algorithm
    from rooftop.report import collective as report
    from rooftop.units import parse_bytes

    chip = chip_from_args(args)
    mesh = make_mesh(parse_topology(chip, args.topology), args.mesh)
    axes = tuple(a.strip() for a in args.axes.split(",") if a.strip())
    for a in axes:
        mesh.axis(a)
    if args.sharding and not args.array:
        raise InvalidConfigError("--sharding describes --array; give --array too, e.g. --array 'bf16[1024,4096]'")
    array: dict[str, Any] | None = None
    if args.array:
        nbytes, array = _array_bytes(args, mesh, axes)
    else:
        nbytes = parse_bytes(args.nbytes)
    algorithm = catalog_algorithm(args.algorithm) if args.algorithm else None
    ct = collective_time(Comm(args.kind, axes, nbytes), mesh, chip, sharp=args.sharp, algorithm=algorithm)
    return Output(
        report.collective_payload(ct, chip, mesh, array, algorithm),
        lambda console: report.render_collective(console, ct, chip, mesh, array),
    )
