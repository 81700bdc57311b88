"""TPU async collective chains: one collective, priced once, where the transfer happens.

TPU XLA splits an asynchronous collective into a chain of instructions tied by
``frontend_attributes={chain_id="4"}``: ``custom-call(...), custom_call_target="AsyncCollectiveStart"``, fusions
that each hold a copy of the collective in their fused computation (an all-gather inside each matmul fusion
of a collective matmul), and ``custom_call_target="AsyncCollectiveDone"``. The chain id is on the top-level
instructions, on the collective inside the fusion, or on both. The data moves once.

The rule, per computation: a collective of a chain (the same kind, replica groups and bytes) is priced
once, on the first instruction of the chain in schedule (text) order that holds it, where the transfer
starts, overlapped with that instruction's own work; the chain's later instructions that hold the same
collective keep their own FLOPs and bytes (the chain's compute) and drop it. The start and done
custom-calls are zero-work markers (:mod:`rooftop.analysis.hlo.targets`): the done is the wait for the
transfer, 0 in the estimate unless a profile measures it. Collectives outside any chain, and the
``-start`` / ``-done`` opcode pairs (``all-gather-start``, ``async-start``), are priced once per pair, at the start.
"""

from __future__ import annotations

from collections.abc import Iterable

from rooftop.analysis.hlo.ir import Instruction
from rooftop.analysis.hlo.mesh import CollectiveUse
from rooftop.analysis.hlo.rules import cut


def chain_of(instr: Instruction) -> str:
    """The chain id an instruction carries in its frontend attributes, "" when none."""
    return instr.frontend_attributes.get("chain_id", "") if "frontend_attributes" in instr.attributes else ""


def priced_once(
    items: Iterable[tuple[Instruction, tuple[CollectiveUse, ...]]],
) -> tuple[dict[int, tuple[CollectiveUse, ...]], list[str]]:
    """For one computation's (instruction, collectives) in text order: the collectives each instruction
    keeps where the chain rule drops some (by ``id(instruction)``), and a note per chain."""
    first: dict[tuple, str] = {}
    dropped: dict[tuple, int] = {}
    kept: dict[int, tuple[CollectiveUse, ...]] = {}
    for instr, uses in items:
        own = chain_of(instr)
        keep = []
        for use in uses:
            chain = use.chain or own
            if not chain:
                keep.append(use)
                continue
            key = (chain, use.kind, use.opcode, use.bytes, use.groups, use.pairs)
            if key not in first:
                first[key] = instr.name
                keep.append(use)
            else:
                dropped[key] = dropped.get(key, 0) + 1
        if len(keep) != len(uses):
            kept[id(instr)] = tuple(keep)
    notes = [
        f"async chain {cut(key[0], 20)}: {key[2]} priced once, at {cut(first[key])}; "
        + (f"{n} more instructions of the chain hold it and are" if n > 1 else "1 more instruction holds it and is")
        + " priced for their own work"
        for key, n in dropped.items()
    ]
    return kept, notes
