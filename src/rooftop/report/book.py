"""The book's figure beside rooftop's: the ``book_*`` keys and their words.

"How to Scale Your Model" (Austin et al., jax-ml/scaling-book) is cited by Part; its formulas are
written out with the figures they used, in the book's decimal units (GB, GB/s), and ``book_why``
says in one sentence which convention makes rooftop's own figure differ ("" when they agree).
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from rooftop.units import format_bytes, format_duration, format_rate

if TYPE_CHECKING:
    from rooftop.cost.book import BookCollective, BookLevel
    from rooftop.cost.collectives import CollectiveTime
    from rooftop.cost.roofline import Term
    from rooftop.sharding.matmul import TimedStrategy

BOOK = "How to Scale Your Model (Austin et al.)"
#: relative difference under which rooftop's figure and the book's are called the same
SAME = 1e-3


def gb(nbytes: float) -> str:
    """Bytes as the book writes them: decimal units."""
    return format_bytes(nbytes, binary=False)


def _level_text(lv: BookLevel) -> str:
    scale = {2.0: "2 x ", 0.25: "1/4 x "}.get(lv.factor, "")
    dur = format_duration(lv.seconds)
    if lv.rule == "same":
        return f"as rooftop prices it = {dur}"
    if lv.rule == "switch":
        n = _chips(lv)
        return (
            f"{scale}(N-1)/N x V / W = {scale}({n}-1)/{n} x {gb(lv.array_bytes)} / {format_rate(lv.bytes_per_s)} "
            f"({lv.link}) = {dur}"
        )
    rings = [g for g in lv.groups if g.shape == "ring"]
    if len(rings) == len(lv.groups):
        w = rings[0].link_bytes_per_s
        k = len(rings)
        if all(g.link_bytes_per_s == w for g in rings):
            axes = f" x {k} axes" if k > 1 else ""
            head = "V / (W_bidir x n_axes)" if k > 1 else "V / W_bidir"
            return f"{scale}{head} = {scale}{gb(lv.array_bytes)} / (2 x {format_rate(w)}{axes}) = {dur}"
    if len(lv.groups) == 1:
        g = lv.groups[0]
        shard = lv.array_bytes / g.size
        return (
            f"{scale}(N-1) x S / W (no wraparound) = {scale}{g.size - 1} x {gb(shard)} / "
            f"{format_rate(g.link_bytes_per_s)} = {dur}"
        )
    rate = format_rate(lv.bytes_per_s)
    return f"{scale}V / sum of W_book (2 W a ring, N W/(N-1) a line) = {scale}{gb(lv.array_bytes)} / {rate} = {dur}"


def _chips(lv: BookLevel) -> int:
    n = 1
    for g in lv.groups:
        n *= g.size
    return n


def book_collective_formula(bc: BookCollective) -> str:
    """The book's bandwidth term with its figures, then the latency and the time."""
    if not bc.levels:
        return "nothing moves"
    parts = [_level_text(lv) for lv in bc.levels]
    bw = parts[0] if len(parts) == 1 else "max(" + "; ".join(parts) + f") = {format_duration(bc.bandwidth_time_s)}"
    if bc.kind == "all-to-all" and bc.levels[0].rule == "ici":
        bw = f"AllGather of the global array / 4: {bw}"
    return f"{bw}; latency {format_duration(bc.latency_time_s)}; {bc.bound}-bound"


def _ring_factor(ct: CollectiveTime) -> str:
    rings = [t.group for t in ct.groups if t.group.shape == "ring"]
    if not rings:
        return ""
    n = 1
    for g in rings:
        n *= g.size
    f = Fraction(n - 1, n)
    return f"{f.numerator}/{f.denominator}"


def book_collective_why(ct: CollectiveTime, bc: BookCollective) -> str:
    """Why rooftop's time differs from the book's ("" when they agree within SAME)."""
    if bc.time_s == ct.time_s or abs(ct.time_s - bc.time_s) <= SAME * max(ct.time_s, bc.time_s):
        return ""
    why = []
    ratio = ct.time_s / bc.time_s if bc.time_s else float("inf")
    if ct.network_efficiency != 1:
        why.append(f"rooftop divides the bandwidth term by a network efficiency of {ct.network_efficiency:g}")
    if ct.kind == "all-to-all":
        why.append(
            "rooftop counts the chunks on the busiest link of each ring or line (floor(n^2/4)/2 on a ring) and "
            "takes the slowest group; the book's quarter of an all-gather spreads the array over every axis at once"
        )
    else:
        factor = _ring_factor(ct)
        if factor:
            why.append(
                f"the book's V / W_bidir drops the (N-1)/N = {factor} of a ring gather (each chip receives N-1 of "
                "the N shards), which rooftop keeps"
            )
        if len(ct.groups) > 1:
            why.append("rooftop also bounds each axis alone (the slab bound) and takes the larger")
    if ct.bound != bc.bound:
        why.append(f"rooftop's figure is {ct.bound}-bound, the book's {bc.bound}-bound")
    return f"rooftop's {format_duration(ct.time_s)} is {ratio:.3g} x the book's: " + "; ".join(why or ["rule"])


def book_collective_dict(ct: CollectiveTime, bc: BookCollective) -> dict[str, Any]:
    """The ``book_*`` keys of a collective."""
    return {
        "book_time_s": bc.time_s,
        "book_bandwidth_time_s": bc.bandwidth_time_s,
        "book_bound": bc.bound,
        "book_formula": book_collective_formula(bc),
        "book_part": f"{BOOK}, {bc.part}",
        "book_why": book_collective_why(ct, bc),
    }


def _step_book_s(terms: tuple[Term, ...]) -> float | None:
    """The book's time of one collective step (count x its book figure); None for the matmul."""
    from rooftop.cost.book import book_collective
    from rooftop.cost.figures import CollectiveFigures

    cts = [(t.figures, t.collective) for t in terms if t.collective is not None]
    if not cts:
        return None
    return sum(float(f.calls if isinstance(f, CollectiveFigures) else 1) * book_collective(ct).time_s for f, ct in cts)


def book_matmul_dict(t: TimedStrategy) -> dict[str, Any]:
    """The ``book_*`` keys of a sharded matmul's strategy: Part 3's T = max(T_math, T_comms), the
    per-device FLOPs over the peak against the collectives by the book's rules; no HBM term (the book
    takes a large matmul to be compute-bound on its own)."""
    est = t.estimate
    steps = [_step_book_s(terms) for terms in t.step_terms]
    comm = sum(s for s in steps if s is not None)
    time = max(est.compute_s, comm)
    parts = [format_duration(s) for s in steps if s is not None]
    comms = " + ".join(parts) + f" = {format_duration(comm)}" if len(parts) > 1 else format_duration(comm)
    formula = (
        f"max(T_math = per-device FLOPs / C = {format_duration(est.compute_s)}, T_comms = {comms}) = "
        f"{format_duration(time)}"
    )
    why = []
    if est.memory_s > max(est.compute_s, est.network_s):
        why.append(f"rooftop's local matmul is memory-bound ({format_duration(est.memory_s)} of HBM traffic)")
    if abs(est.network_s - comm) > SAME * max(est.network_s, comm):
        why.append(
            f"rooftop's collectives take {format_duration(est.network_s)} against the book's "
            f"{format_duration(comm)} (`rooftop collective` gives each one's book_why)"
        )
    return {
        "book_time_s": time,
        "book_comm_s": comm,
        "book_formula": formula,
        "book_part": f"{BOOK}, Part 3",
        "book_why": "; ".join(why),
        "book_step_times_s": steps,
    }
