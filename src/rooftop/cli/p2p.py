"""``rooftop p2p --chip C --topology T --from 0,0 --to 3,3 (--bytes V | --array 'bf16[8,128,8192]')``:
one array sent from one chip of a slice to another (cost/p2p.py)."""

from __future__ import annotations

import argparse
import math

from rooftop.cli.common import Output, add_common, chip_from_args


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("p2p", help="time a point-to-point transfer between two chips of a slice, with its hops")
    add_common(p)
    p.add_argument("--topology", required=True, help="physical slice, e.g. 4x4 (TPU) or 16x8 (GPU)")
    p.add_argument("--from", dest="src", required=True, metavar="COORDS", help="source chip, e.g. 0,0")
    p.add_argument("--to", dest="dst", required=True, metavar="COORDS", help="destination chip, e.g. 3,3")
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--bytes", dest="nbytes", metavar="BYTES", help="bytes sent, e.g. 16MiB")
    size.add_argument("--array", help="the array sent, e.g. 'bf16[8,128,8192]'")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> Output:
    from rooftop.cli.collective import parse_array
    from rooftop.cost.p2p import p2p_transfer, parse_coords
    from rooftop.dtypes import dtype_bytes
    from rooftop.hardware.topology import parse_topology
    from rooftop.report import p2p as report
    from rooftop.units import parse_bytes

    chip = chip_from_args(args)
    topology = parse_topology(chip, args.topology)
    src = parse_coords(args.src, topology, "--from")
    dst = parse_coords(args.dst, topology, "--to")
    if args.array:
        dtype, shape = parse_array(args.array)
        nbytes = dtype_bytes(dtype) * float(math.prod(shape))
    else:
        nbytes = parse_bytes(args.nbytes)
    t = p2p_transfer(topology, src, dst, nbytes)
    return Output(report.p2p_payload(t, topology), lambda console: report.render_p2p(console, t, topology))
