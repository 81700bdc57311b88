"""``rooftop p2p``: a point-to-point transfer (cost/p2p.py) as JSON and a table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rooftop.report.book import BOOK, gb
from rooftop.report.table import say, styled, table
from rooftop.units import format_bytes, format_duration, format_rate

if TYPE_CHECKING:
    from rich.console import Console

    from rooftop.cost.p2p import Transfer
    from rooftop.hardware.topology import Topology


def _formula(t: Transfer) -> str:
    hops = " + ".join(f"{leg.hops} x {format_duration(leg.latency_s)}" for leg in t.legs)
    links = " + ".join(f"{format_rate(leg.bytes_per_s)} ({leg.link})" for leg in t.legs)
    return (
        f"first byte = hops x hop latency = {hops} = {format_duration(t.first_byte_s)}; whole array = first byte + "
        f"V / bandwidth = {format_duration(t.first_byte_s)} + {gb(t.bytes)} / {format_rate(t.bandwidth_bytes_per_s)} "
        f"= {format_duration(t.time_s)} (links out: {links}; ICI links add up, a switched one caps the rate)"
    )


def p2p_payload(t: Transfer, topology: Topology) -> dict[str, Any]:
    """``rooftop p2p --json``."""
    return {
        "chip": topology.chip.name,
        "topology": topology.spec,
        "from": list(t.src),
        "to": list(t.dst),
        "bytes": t.bytes,
        "hops": t.hops,
        "links": len(t.legs),
        "bandwidth_bytes_per_s": t.bandwidth_bytes_per_s,
        "first_byte_s": t.first_byte_s,
        "bandwidth_time_s": t.bandwidth_time_s,
        "time_s": t.time_s,
        "legs": [
            {
                "dim": leg.dim,
                "link": leg.link,
                "size": leg.size,
                "wrap": leg.wrap,
                "offset": leg.offset,
                "hops": leg.hops,
                "bytes_per_s": leg.bytes_per_s,
                "hop_latency_s": leg.latency_s,
            }
            for leg in t.legs
        ],
        "formula": _formula(t),
        "book_part": f"{BOOK}, Part 2 Question 5 (ICI bandwidth)",
    }


def render_p2p(console: Console, t: Transfer, topology: Topology) -> None:
    rows = [
        ("bytes", format_bytes(t.bytes)),
        ("hops", str(t.hops)),
        ("links out of the source", str(len(t.legs))),
        ("bandwidth", format_rate(t.bandwidth_bytes_per_s)),
        ("first byte", format_duration(t.first_byte_s)),
        ("whole array", styled(format_duration(t.time_s), "bold")),
    ]
    src, dst = ",".join(map(str, t.src)), ",".join(map(str, t.dst))
    console.print(table(f"{topology.chip.name} {topology.spec}: chip {src} -> chip {dst}", ["quantity", "value"], rows))
    legs = [
        (leg.dim, leg.link, f"{leg.offset:+d} of {leg.size}", "yes" if leg.wrap else "no", leg.hops) for leg in t.legs
    ]
    console.print(table("route, dim by dim", ["dim", "link", "offset", "wraps", "hops"], legs))
    say(console, f"formula: {_formula(t)}")
