"""XLA HLO module -> per-instruction Costs, hardware-free: the computation walk.

``count_module``: every instruction the program executes at its top level (the entry computation, while
bodies and conditions, called computations) becomes an ``HloOp``: a Cost per execution (the counting rules:
:mod:`rooftop.analysis.hlo.pricing`) and a count (a while body runs ``known_trip_count`` times; once, noted,
when XLA recorded none). The call graph is read once, never expanded: a computation runs the sum over its call
sites of the caller's runs (so one called from two places is one HloOp per instruction with both executions),
and a call cycle, calls nested deeper than 64 or more than 2**63 - 1 executions are ParseErrors.
A TPU async collective chain (:mod:`rooftop.analysis.hlo.chains`) prices its collective once, on its start
(whatever the text order).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from rooftop.analysis.gcpause import paused_gc
from rooftop.analysis.hlo.chains import async_end, chain_id, priced_once
from rooftop.analysis.hlo.groups import MAX_DEVICES
from rooftop.analysis.hlo.ir import Computation, HloModule, Instruction
from rooftop.analysis.hlo.mesh import CollectiveUse
from rooftop.analysis.hlo.pricing import MAX_NESTING, InstructionCost, Pricer
from rooftop.analysis.hlo.rules import COUNT_RE, ZERO_COST, cut
from rooftop.analysis.hlo.shapes import MAX_INT, Shape
from rooftop.errors import ParseError, shown
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

#: executions of one instruction
_MAX_EXECUTIONS = float(MAX_INT)


@dataclass(frozen=True)
class HloOp:
    """An executed top-level instruction (base opcode for async halves) and its executions."""

    name: str
    opcode: str
    computation: str
    shape: Shape
    executions: float
    cost: InstructionCost
    line: int = 0

    @property
    def dtype(self) -> str:
        leaves = self.shape.leaves()
        return leaves[0].dtype if leaves else "tuple"

    @property
    def memory_space(self) -> int:
        """Memory space of the (first) result: 0 HBM; on TPU 1 VMEM, 5 host."""
        leaves = self.shape.leaves()
        return leaves[0].layout.memory_space if leaves and leaves[0].layout is not None else 0


@dataclass(frozen=True)
class HloCounts:
    module: str
    ops: tuple[HloOp, ...]
    num_devices: int | None
    notes: tuple[Note, ...] = ()


class _Counter:
    """One pass over a module: the call graph (which computations run, how often: linear in the module, no
    expansion), each instruction priced once by the module's Pricer and cached."""

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.pricer = Pricer(module)
        self.chain_cache: dict[str, dict[int, tuple[CollectiveUse, ...]]] = {}
        self.notes: list[Note] = []
        self.edges_cache: dict[str, list[tuple[Instruction, Computation, float]]] = {}
        self.weight_cache: dict[str, tuple[float, float]] = {}
        self.cost_cache: dict[int, InstructionCost] = {}
        self.active: set[str] = set()

    def edges(self, comp: Computation, depth: int = 0) -> list[tuple[Instruction, Computation, float]]:
        """(calling instruction, callee, executions per execution of ``comp``) in text order: a while's
        condition runs trips + 1 times and its body trips times, a call once, a conditional's costliest
        branch once. Cached per computation; a call cycle or nesting deeper than 64 is a ParseError."""
        found = self.edges_cache.get(comp.name)
        if found is not None:
            return found
        if depth > MAX_NESTING or comp.name in self.active:
            what = "calls itself" if comp.name in self.active else f"is nested deeper than {MAX_NESTING} calls"
            raise ParseError(f"computation {shown(comp.name)} {what} (XLA call graphs are acyclic)", line=comp.line)
        self.active.add(comp.name)
        out: list[tuple[Instruction, Computation, float]] = []
        for instr in comp.instructions:
            op = instr.opcode
            if op == "while":
                trips = instr.trip_count
                if trips is None:
                    self.notes.append(Reason.of(ReasonCode.WHILE_TRIPS_UNKNOWN, instruction=cut(instr.name)))
                n = float(1 if trips is None else trips)
                out.append((instr, self.pricer.callee(instr, "condition"), 1.0 if trips is None else n + 1))
                out.append((instr, self.pricer.callee(instr, "body"), n))
            elif op == "call":
                out.append((instr, self.pricer.callee(instr, "to_apply"), 1.0))
            elif op == "conditional":
                out.append((instr, self.branch(instr, depth), 1.0))
        for _, callee, _ in out:
            self.edges(callee, depth + 1)
        self.active.discard(comp.name)
        self.edges_cache[comp.name] = out
        return out

    def branch(self, instr: Instruction, depth: int) -> Computation:
        """A conditional's costliest branch (by FLOPs, then bytes, of all it executes), noted: which one runs
        is not in the text."""
        keys = ("branch_computations",) if "branch_computations" in instr.attributes else ("true_computation",
                "false_computation")  # fmt: skip
        names = [n for k in keys for n in instr.attributes.get(k, "").strip("{} ").split(",") if n.strip()]
        comps = []
        for name in names:
            comp = self.module.computations.get(name.strip().lstrip("%"))
            if comp is None:
                raise ParseError(
                    f"conditional {shown(instr.name)}: branch {shown(name)} names no computation", line=instr.line
                )
            self.edges(comp, depth + 1)
            comps.append(comp)
        if not comps:
            raise ParseError(f"conditional {shown(instr.name)} names no branch computations", line=instr.line)
        if len(comps) > 1:
            self.notes.append(Reason.of(ReasonCode.CONDITIONAL_COSTLIEST, instruction=cut(instr.name),
                                        branches=len(comps)))  # fmt: skip
        return max(comps, key=self.weight)

    def weight(self, comp: Computation) -> tuple[float, float]:
        """(FLOPs, padded bytes) of one execution of ``comp`` and all it calls (edges already built)."""
        found = self.weight_cache.get(comp.name)
        if found is None:
            flops = padded = 0.0
            for instr, done in self.priced(comp):
                cost = self.cost_of(instr, done, comp)
                flops, padded = flops + cost.flops, padded + cost.traffic.padded_bytes
            for _, callee, times in self.edges_cache[comp.name]:
                sub = self.weight(callee)
                flops, padded = flops + times * sub[0], padded + times * sub[1]
            found = self.weight_cache[comp.name] = (flops, padded)
        return found

    def priced(self, comp: Computation) -> list[tuple[Instruction, Instruction | None]]:
        """The instructions of ``comp`` that cost something, with the -done half of each async start."""
        done_of = {start.name: done for start, done in self.module.async_pairs(comp)}
        return [
            (instr, done_of.get(instr.name))
            for instr in comp.instructions
            if instr.opcode not in ZERO_COST and instr.async_kind not in ("done", "update")
        ]

    def cost_of(self, instr: Instruction, done: Instruction | None, comp: Computation) -> InstructionCost:
        """The cost of one execution, a chain's repeated collectives dropped (:mod:`rooftop.analysis.hlo.chains`)."""
        found = self.cost_cache.get(id(instr))
        if found is None:
            found = self.cost_cache[id(instr)] = self.pricer.price(instr, done, comp)
        kept = self.chained(comp).get(id(instr))
        return found if kept is None else dataclasses.replace(found, collectives=kept)

    def chained(self, comp: Computation) -> dict[int, tuple[CollectiveUse, ...]]:
        """The collectives each instruction of ``comp`` keeps under the chain rule, where it drops some."""
        found = self.chain_cache.get(comp.name)
        if found is None:
            self.chain_cache[comp.name] = {}  # priced below without the rule
            items, chained = [], False
            for instr, done in self.priced(comp):
                cost = self.cost_cache.get(id(instr))
                if cost is None:
                    cost = self.cost_cache[id(instr)] = self.pricer.price(instr, done, comp)
                starts = async_end(self.module, instr) == "start" and bool(chain_id(self.module, instr))
                if cost.collectives or starts:
                    items.append((instr, cost.collectives))
                    chained = chained or starts or any(u.chain for u in cost.collectives)
            found, notes = priced_once(self.module, items) if chained else ({}, [])
            self.chain_cache[comp.name] = found
            self.notes += notes
        return found

    def walk(self, entry: Computation) -> Iterator[HloOp]:
        """Every executed instruction once, in text order through the calls, with its executions: each
        computation runs the sum over its call sites of caller executions x edge count (a computation
        called from two places is listed once, its executions summed)."""
        self.edges(entry)
        order: list[Computation] = []  # callers before callees (reverse post-order of the call graph)
        seen: set[str] = set()
        stack: list[tuple[Computation, int]] = [(entry, 0)]
        while stack:
            comp, i = stack.pop()
            if i == 0:
                if comp.name in seen:
                    continue
                seen.add(comp.name)
            edges = self.edges_cache[comp.name]
            if i < len(edges):
                stack += [(comp, i + 1), (edges[i][1], 0)]
            else:
                order.append(comp)
        runs: dict[str, float] = {entry.name: 1.0}
        for comp in reversed(order):
            for _, callee, times in self.edges_cache[comp.name]:
                runs[callee.name] = runs.get(callee.name, 0.0) + runs[comp.name] * times
        yield from self.emit(entry, runs)

    def emit(self, entry: Computation, runs: dict[str, float]) -> Iterator[HloOp]:
        """Depth first in text order, each computation once (first visit), each priced instruction once."""
        stack: list[Iterator[Instruction]] = [iter(entry.instructions)]
        comps = [entry]
        seen = {entry.name}
        calls: dict[int, list[Computation]] = {}
        for edges in self.edges_cache.values():
            for caller, callee, _ in edges:
                calls.setdefault(id(caller), []).append(callee)
        done_of = {entry.name: {s.name: d for s, d in self.module.async_pairs(entry)}}
        while stack:
            instr = next(stack[-1], None)
            if instr is None:
                stack.pop()
                comps.pop()
                continue
            comp = comps[-1]
            callees = [c for c in calls.get(id(instr), ()) if c.name not in seen]
            for callee in reversed(callees):  # the first callee (a while's condition) is listed first
                seen.add(callee.name)
                done_of[callee.name] = {s.name: d for s, d in self.module.async_pairs(callee)}
                stack.append(iter(callee.instructions))
                comps.append(callee)
            if callees or instr.opcode in ZERO_COST or instr.async_kind in ("done", "update"):
                continue
            count = runs.get(comp.name, 0.0)
            if not count <= _MAX_EXECUTIONS:
                raise ParseError(
                    f"{instr.opcode} {shown(instr.name)} runs {count:.3g} times, more than 2**63 - 1: the trip counts "
                    "of the whiles around it multiply past int64",
                    line=instr.line,
                )
            cost = self.cost_of(instr, done_of[comp.name].get(instr.name), comp)
            yield HloOp(instr.name, self.module.base_opcode(instr), comp.name, instr.shape, count, cost, instr.line)


def num_devices(module: HloModule, ops: Iterable[HloOp] = ()) -> int | None:
    """num_partitions x replica_count from the module header, or one more than the largest device id in
    a collective; None when the text says neither (a single-device program, or a dump without a header)."""
    n = 1
    for key in ("num_partitions", "replica_count"):
        value = module.attributes.get(key, "1").strip()
        n *= int(value) if COUNT_RE.fullmatch(value) else 1
    if n > MAX_DEVICES:
        raise ParseError(f"num_partitions x replica_count = {n} devices, more than {MAX_DEVICES}", source=module.source)
    ids = [d for op in ops for use in op.cost.collectives for g in (use.groups or use.pairs or ()) for d in g]
    return max(n, max(ids) + 1) if ids else (n if n > 1 else None)


def count_module(module: HloModule) -> HloCounts:
    """Every executed top-level instruction with its Cost per execution (hardware-free)."""
    counter = _Counter(module)
    try:
        with paused_gc():
            ops = tuple(counter.walk(module.entry))
    except ParseError as exc:  # name the file as the parser does
        if exc.source is not None:
            raise
        message = str(exc).removeprefix(f"line {exc.line}: ")
        raise ParseError(message, source=module.source, line=exc.line) from None
    notes: list[Note] = [*counter.notes, *(f"FLOPs unknown: {op.cost.unknown}" for op in ops if op.cost.unknown)]
    return HloCounts(module.name, ops, num_devices(module, ops), tuple(dict.fromkeys(notes)))
