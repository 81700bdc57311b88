"""TPU async collective chains: one collective, priced once, on the start of its transfer.

TPU XLA splits an asynchronous collective into a chain of instructions tied by
``frontend_attributes={chain_id="4"}``: a start (``custom-call(...), custom_call_target="AsyncCollectiveStart"``,
or a fusion whose root is that custom-call), fusions that each hold a copy of the collective in their fused
computation (an all-gather inside each matmul fusion of a collective matmul), and a done
(``custom_call_target="AsyncCollectiveDone"``, or a fusion whose root is it). The chain id is on the top-level
instructions, on the collective or custom-call inside the fusion (found through the fusion's root), or both.
The data moves once.

The rule, per computation: a collective of a chain (the same kind, replica groups and bytes) is priced once,
on the chain's start, whatever the order of the text (a module printed without its schedule, or assembled
from a profile's per-op records, can list the start after its done's users): the start is where the
transfer is issued and where a TPU profile measures it. The chain's instructions that hold the same
collective keep their own FLOPs and bytes (the chain's compute) and drop it. A chain with no start in the
computation prices it on the first instruction of the chain in text order that holds it. The done is the
wait: a done marker, and a fusion whose root is a done, costs nothing (:func:`async_end`).

Outside chains, the ``-start`` / ``-done`` opcode pairs (``all-gather-start``, ``async-start``, ``copy-start``)
are priced once per pair, on the start (:mod:`rooftop.analysis.hlo.count` pairs them through operands, not
text order); a collective in no chain is priced where it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rooftop.analysis.hlo.ir import HloModule, Instruction
from rooftop.analysis.hlo.mesh import CollectiveUse
from rooftop.analysis.hlo.rules import cut
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

#: the custom-call targets that open and close a TPU async collective chain
ASYNC_TARGETS = {"AsyncCollectiveStart": "start", "AsyncCollectiveDone": "done"}
#: opcodes that start a transfer whose done is another instruction (besides the ``*-start`` opcodes)
_STARTS = frozenset(("send", "recv"))
_THROUGH = frozenset(("bitcast", "get-tuple-element", "copy"))


def chain_of(instr: Instruction) -> str:
    """The chain id an instruction carries in its frontend attributes, "" when none."""
    return instr.frontend_attributes.get("chain_id", "") if "frontend_attributes" in instr.attributes else ""


def _root(module: HloModule, instr: Instruction) -> Instruction:
    """The instruction a fusion's value comes from: its fused root, through bitcasts, tuple elements and
    nested fusions (at most 64 deep); the instruction itself when it is no fusion."""
    node = instr
    for _ in range(64):
        if node.opcode != "fusion" or not node.called_computations:
            return node
        comp = module.computations.get(node.called_computations[0])
        if comp is None:
            return node
        node = comp.root
        for _ in range(len(comp.instructions)):
            if node.opcode not in _THROUGH or not node.operands or node.operands[0] not in comp.by_name:
                break
            node = comp.by_name[node.operands[0]]
    return node


def async_end(module: HloModule, instr: Instruction) -> str:
    """ "start" or "done" when ``instr`` opens or closes an async transfer: a ``*-start`` / ``*-done`` opcode,
    ``send`` / ``recv``, the chain markers of ``ASYNC_TARGETS``, or a fusion whose root is one of them; else
    ""."""
    node = _root(module, instr)
    kind = node.async_kind
    if kind in ("start", "done"):
        return kind
    if node.opcode in _STARTS:
        return "start"
    if node.opcode == "custom-call":
        return ASYNC_TARGETS.get(node.custom_call_target or "", "")
    return ""


def chain_id(module: HloModule, instr: Instruction) -> str:
    """The chain an instruction belongs to: its own ``chain_id``, else its fused root's."""
    return chain_of(instr) or (chain_of(_root(module, instr)) if instr.opcode == "fusion" else "")


def priced_once(
    module: HloModule, items: Iterable[tuple[Instruction, tuple[CollectiveUse, ...]]]
) -> tuple[dict[int, tuple[CollectiveUse, ...]], list[Note]]:
    """For one computation's (instruction, collectives) in text order: the collectives each instruction
    keeps where the chain rule moves or drops some (by ``id(instruction)``), and a note per chain."""
    listed = list(items)
    starts: dict[str, Instruction] = {}
    for instr, _ in listed:
        chain = chain_id(module, instr)
        if chain and chain not in starts and async_end(module, instr) == "start":
            starts[chain] = instr
    where: dict[tuple[Any, ...], Instruction] = {}
    holders: dict[tuple[Any, ...], int] = {}
    added: dict[int, list[CollectiveUse]] = {}
    kept: dict[int, tuple[CollectiveUse, ...]] = {}
    for instr, uses in listed:
        own, keep = chain_id(module, instr), []
        for use in uses:
            chain = use.chain or own
            if not chain:
                keep.append(use)
                continue
            key = (chain, use.kind, use.opcode, use.bytes, use.groups, use.pairs)
            holders[key] = holders.get(key, 0) + 1
            if key in where:
                continue
            where[key] = starts.get(chain, instr)
            if where[key] is instr:
                keep.append(use)
            else:
                added.setdefault(id(where[key]), []).append(use)
        if len(keep) != len(uses):
            kept[id(instr)] = tuple(keep)
    for instr, uses in listed:
        if id(instr) in added:
            kept[id(instr)] = (*kept.get(id(instr), uses), *added[id(instr)])
    return kept, [_note(key, where[key], holders[key], key[0] in starts) for key in where if holders[key] > 1 or
                  key[0] in starts]  # fmt: skip


def _note(key: tuple[Any, ...], at: Instruction, holders: int, on_start: bool) -> Note:
    chain, _, opcode = key[:3]
    return Reason.of(ReasonCode.CHAIN_PRICED_ONCE, chain=cut(chain, 20), opcode=opcode, at=cut(at.name),
                     on_start=on_start, others=holders if on_start else holders - 1)  # fmt: skip
