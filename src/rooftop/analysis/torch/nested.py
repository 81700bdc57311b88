"""What an op that records only part of its arguments used, read from the ops nested in its span: a
fused MoE that records its activations and router logits but not its experts (vLLM's ``moe_forward`` wraps
a whole MoE layer; the ops inside it view the expert weights and the routed ids). Used for the ops of a
capture trace (:mod:`rooftop.analysis.torch.capture`) and of a profile (:class:`NestedOps`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rooftop.analysis.torch.engine_ops import ENGINE_OPS, family_of
from rooftop.analysis.trace.events import EventTable
from rooftop.analysis.trace.ops import column_codes, floats
from rooftop.dtypes import TORCH_DTYPES


def spans_inside(spans: Sequence[tuple[float, float, str, Mapping[str, Any]]], ends: np.ndarray, f: int) -> list[Any]:
    """The args of the shaped ops nested in span ``f`` (spans sorted by start, longest first)."""
    out = []
    for j in range(f + 1, len(spans)):
        if spans[j][0] > ends[f]:
            break
        if ends[j] <= ends[f]:
            out.append(spans[j][3])
    return out


def with_expert_tensors(
    name: str, args: Mapping[str, Any], nested: Callable[[], Sequence[Mapping[str, Any]]]
) -> Mapping[str, Any]:
    """The args of a fused-MoE op that records only its activations and router logits (vLLM's
    ``moe_forward`` wraps the whole layer), with the expert tensors the ops nested in it used: 3-D tensors
    ``[E, a, b]`` whose leading dim is the expert count E (the last dim of a 2-D argument: the router
    logits [T, E]) and an integer [T, k] tensor (the routed ids) appended as arguments. Other ops, and MoE
    ops that pass their expert weights, are returned as they are; ``nested`` (the args of the nested ops) is
    called only for an MoE op that lacks its weights."""
    entry = ENGINE_OPS.get(name)
    if (entry.family if entry is not None else family_of(name)) != "moe":
        return args
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list) or len(dims) != len(types):
        return args
    shaped = [d for d in dims if isinstance(d, list) and all(x.__class__ is int for x in d)]
    if any(len(d) == 3 for d in shaped) or not shaped:
        return args
    tokens, experts = shaped[0][0] if shaped[0] else None, {d[-1] for d in shaped if len(d) == 2}
    if not experts:  # no router logits [T, E]: nothing says which tensors are the experts'
        return args
    extra: list[tuple[list[int], str]] = []
    for a in nested():
        for d, t in zip(a.get("Input Dims") or (), a.get("Input type") or (), strict=False):
            if not (isinstance(d, list) and all(x.__class__ is int for x in d)) or (d, t) in extra:
                continue
            expert_weight = len(d) == 3 and d[0] in experts and sum(len(e) == 3 for e, _ in extra) < 2
            routed = len(d) == 2 and d[0] == tokens and TORCH_DTYPES.get(str(t), "").startswith("int")
            if expert_weight or (routed and not any(len(e) == 2 for e, _ in extra) and d[1] < max(experts)):
                extra.append((d, t))
    if not any(len(d) == 3 for d, _ in extra):
        return args
    extra.sort(key=lambda e: -len(e[0]))  # the weights first, then the routed ids
    concrete = args.get("Concrete Inputs")
    concrete = list(concrete) if isinstance(concrete, list) and len(concrete) == len(dims) else [""] * len(dims)
    return {**args, "Input Dims": [*dims, *(d for d, _ in extra)], "Input type": [*types, *(t for _, t in extra)],
            "Concrete Inputs": concrete + [""] * len(extra)}  # fmt: skip


class NestedOps:
    """The args of the shaped ``cpu_op`` events nested in an op's span on its thread, in a profile's event
    table; the index (per thread, by start) is built when first asked, so a profile without such an op
    pays nothing."""

    def __init__(self, ev: EventTable) -> None:
        self.ev = ev
        self.rows: np.ndarray | None = None

    def _build(self) -> None:
        ev = self.ev
        kind, kinds = column_codes(ev, "kind")
        args = ev.column("args")
        other = np.flatnonzero(kind == kinds.index("other")) if "other" in kinds else np.zeros(0, np.int64)
        shaped = np.array([r for r in other.tolist() if args[r].get("cat") == "cpu_op" and "Input Dims" in args[r]],
                          np.int64)  # fmt: skip
        device, _ = column_codes(ev, "device")
        line, lines = column_codes(ev, "line")
        self.thread = device.astype(np.int64) * len(lines) + line
        self.start = floats(ev.column("start_s"))
        self.end = self.start + floats(ev.column("duration_s"))
        order = np.lexsort((self.start[shaped], self.thread[shaped])) if len(shaped) else np.zeros(0, np.int64)
        self.rows = shaped[order]

    def __call__(self, row: int) -> list[Mapping[str, Any]]:
        if self.rows is None:
            self._build()
        assert self.rows is not None
        rows, thread, start, end = self.rows, self.thread, self.start, self.end
        mine = rows[thread[rows] == thread[row]]
        lo = int(np.searchsorted(start[mine], start[row], "left"))
        hi = int(np.searchsorted(start[mine], end[row], "right"))
        args = self.ev.column("args")
        return [args[r] for r in mine[lo:hi].tolist() if r != row and end[r] <= end[row]]
