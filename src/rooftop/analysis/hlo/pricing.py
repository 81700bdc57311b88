"""One HLO instruction's cost per execution, hardware-free: the counting rules.

``Pricer.price`` gives an instruction an ``InstructionCost``: FLOPs by the rules below, the bytes it moves
and the collectives it runs; :mod:`rooftop.analysis.hlo.count` walks the module and counts the executions.
FLOPs follow XLA's HloCostAnalysis, so totals match ``compiled.cost_analysis()["flops"]``
(tests/unit/test_hlo_vs_xla.py):

- dot, cuBLAS GEMM custom-calls: cost/op.py ``dot_general`` (2 x prod of all dims), matrix unit;
  convolution, cuDNN conv custom-calls: cost/op.py ``convolution`` (window taps on padding excluded).
- elementwise ops (add, compare, select, convert, ...): 1 FLOP per output element on the vector unit;
  transcendentals (exp, log, tanh, logistic, rsqrt, sqrt, power, sine, cosine, erf, ...): 1 per element,
  reported as ``transcendentals`` (not FLOPs) and timed as vector-unit work.
- reduce: (input - output elements) x FLOPs of the reducer; reduce-window: output x (window - 1) x
  reducer; map, scatter: elements x the applied computation; sort: n ceil(log2 n); all-reduce: 1/element.
- fusion: FLOPs = sum over the fused instructions (nested fusions and calls included); the start of an
  async fusion (``fusion-start``, XLA:GPU) is priced as the fusion.
- fused attention custom-calls (cuDNN fmha, TransformerEngine, Pallas splash / flash kernels): 2 B H pairs
  (D_qk + D_v) forward (as model/transformer.py), 2.5x that backward (5 matmuls instead of 2,
  FlashAttention-2's convention); pairs = Sq x Sk, or the causal count when the mask is causal. The
  custom-call targets and their rules are :mod:`rooftop.analysis.hlo.targets`: zero-work markers cost nothing; a
  target without a rule has FLOPs unknown, reported by name, never 0.
- collectives (sync, -start/-done and async-start/-done forms, counted once per pair): a Comm of the
  bytes cost/cost.py's Comm names, over the mesh axes :mod:`rooftop.analysis.hlo.mesh` reads from the replica groups.
  A TPU async collective chain (:mod:`rooftop.analysis.hlo.chains`) prices its collective once, on its start
  (whatever the text order); the chain's fusions are priced for their own work, a done fusion at zero.

Bytes (:mod:`rooftop.analysis.hlo.access`): operands read + results written at the instruction boundary, never a
fusion's inner temporaries; slices, in-place updates and aliased outputs count what they touch; logical
bytes follow XLA, padded (timed) bytes count the layout tiles touched. Parameter, constant,
get-tuple-element, tuple, bitcast and the *-done halves cost nothing.

An instruction named ``*in_megacore*`` runs on one TensorCore of a megacore chip (TPU v4, v5p):
``InstructionCost.one_core`` says so and :mod:`rooftop.analysis.hlo.analyze` times it on ``Chip.one_core()``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rooftop.analysis.hlo.access import Bytes, Traffic
from rooftop.analysis.hlo.chains import async_end
from rooftop.analysis.hlo.ir import Computation, HloModule, Instruction
from rooftop.analysis.hlo.mesh import COLLECTIVE_KIND, CollectiveUse, collective_use
from rooftop.analysis.hlo.rules import (
    APPLIED,
    CONV_TARGETS,
    ELEMENTWISE,
    ONE_CORE_MARK,
    TRANSCENDENTAL,
    ZERO_COST,
    FlopTally,
    attention_flops,
    check_arity,
    conv_flops,
    cut,
    dot_flops,
    lhs_rhs,
)
from rooftop.analysis.hlo.shapes import Shape
from rooftop.analysis.hlo.targets import pallas_flops, rule_of
from rooftop.cost.cost import Cost
from rooftop.errors import InvalidConfigError, ParseError, shown
from rooftop.reasons import Note

#: nesting of fused / applied computations inside one another (and of calls: count.py)
MAX_NESTING = 64
#: the attributes ``Instruction.dot_dims`` reads (with the opcode)
_DOT_DIM_KEYS = ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims", "backend_config")


@dataclass(frozen=True)
class InstructionCost:
    """One execution. ``cost``: FLOPs per (unit, dtype) with transcendentals on the vector unit, and the
    HBM bytes; ``flops`` leaves transcendentals out (XLA's convention); ``unknown`` names what is not
    counted (an unknown custom-call); ``one_core``: it runs on one TensorCore of a megacore chip."""

    cost: Cost
    flops: float
    transcendentals: float
    traffic: Traffic
    collectives: tuple[CollectiveUse, ...] = ()
    unknown: str = ""
    #: what the cost rule read (a kernel's phase and mask, an update in place or not), as data
    note: tuple[Note, ...] = ()
    one_core: bool = False


class Pricer:
    """Prices the instructions of one module; fused and applied computations are counted once each and cached."""

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.inner_cache: dict[str, FlopTally] = {}
        self.bytes = Bytes(module)
        self.dot_cache: dict[tuple[Any, ...], Cost] = {}
        self.dims_cache: dict[tuple[Any, ...], dict[str, tuple[int, ...]]] = {}
        self.nesting = 0
        self.masks: dict[str, Instruction] | None = None

    def callee(self, instr: Instruction, key: str) -> Computation:
        raw = instr.attributes.get(key)
        if raw is None:
            raise ParseError(f"{instr.opcode} {shown(instr.name)} has no {key}=", line=instr.line)
        name = raw.strip().strip("{}").split(",")[0].strip().lstrip("%")
        found = self.module.computations.get(name)
        if found is None:
            raise ParseError(
                f"{instr.opcode} {shown(instr.name)}: {key}={shown(raw)} names no computation of the module",
                line=instr.line,
            )
        return found

    def inner(self, comp: Computation) -> FlopTally:
        """FLOPs of every instruction of a fused / applied / wrapped computation."""
        found = self.inner_cache.get(comp.name)
        if found is None:
            if self.nesting >= MAX_NESTING:
                raise ParseError(
                    f"computation {shown(comp.name)}: fusions and calls nested deeper than {MAX_NESTING}",
                    line=comp.line,
                )
            found = self.inner_cache[comp.name] = FlopTally()
            self.nesting += 1
            try:
                for instr in comp.instructions:
                    op = instr.opcode
                    if (op in ZERO_COST and op != "call") or instr.async_kind in ("done", "update"):
                        check_arity(instr)  # all _flops does for these: their tally is empty
                        continue
                    found.merge(self.flops(instr))
            finally:
                self.nesting -= 1
        return found

    def flops(self, instr: Instruction) -> FlopTally:
        """FLOPs, collectives and notes of one execution; a rule's InvalidConfigError names the line."""
        try:
            return self._flops(instr)
        except InvalidConfigError as exc:
            raise ParseError(f"{instr.opcode} {shown(instr.name)}: {exc}", line=instr.line) from None

    def _flops(self, instr: Instruction) -> FlopTally:
        out, op, shape, kind = FlopTally(), instr.opcode, instr.shape, instr.async_kind
        check_arity(instr)
        first = instr.operand_shapes[0] if instr.operand_shapes and instr.operand_shapes[0] else shape
        if (op in ZERO_COST and op != "call") or kind in ("done", "update"):
            return out
        if op in ("fusion", "fusion-start", "call", "async-start"):
            out.merge(self.inner(self.callee(instr, "to_apply" if op == "call" else "calls")))
        elif op in ELEMENTWISE or op in TRANSCENDENTAL:
            out.add("vector", first.dtype, shape.num_elements)
            out.transcendentals += shape.num_elements if op in TRANSCENDENTAL else 0
        elif op == "dot":
            out.add_dot(self.dot(instr, *lhs_rhs(instr), shape))
        elif op == "convolution":
            out.by.update(conv_flops(instr, *lhs_rhs(instr), shape))
        elif op == "custom-call":
            self.custom_call(instr, out)
        base = self.module.base_opcode(instr) if kind == "start" else op
        if base in COLLECTIVE_KIND and op != "async-start":
            out.collectives.append(collective_use(instr, base))
        if op in APPLIED or (base == "all-reduce" and op != "async-start"):
            self.applied(instr, base, first, out)
        return out

    def constant(self, name: str) -> Instruction | None:
        """The 8-bit integer or pred constant called ``name`` (a kernel's block mask), else None."""
        if self.masks is None:
            self.masks = {i.name: i for _, i in self.module.instructions()
                          if i.opcode == "constant" and i.shape.dtype in ("s8", "u8", "pred")}  # fmt: skip
        return self.masks.get(name)

    def dot(self, instr: Instruction, lhs: Shape | None, rhs: Shape | None, out: Shape) -> Cost:
        """``dot_flops``, cached by shapes and dimension numbers (layers repeat the same dots)."""
        attrs = instr.attributes  # the dimension numbers depend on these texts alone: decoded once per text
        text_key = (instr.opcode, *(attrs.get(k) for k in _DOT_DIM_KEYS))
        dims = self.dims_cache.get(text_key)
        if dims is None:
            dims = self.dims_cache[text_key] = instr.dot_dims
        key = (id(lhs), id(rhs), out.dtype, *dims.values())
        found = self.dot_cache.get(key)
        if found is None:
            found = self.dot_cache[key] = dot_flops(instr, lhs, rhs, out, dims)
        return found

    def applied(self, instr: Instruction, base: str, first: Shape, out: FlopTally) -> None:
        """Ops applying a scalar computation per element, counted as XLA's HloCostAnalysis does."""
        op, leaves = instr.opcode, instr.shape.leaves()
        out_elements, window = float(leaves[0].num_elements if leaves else 1), instr.window or {"size": ()}
        taps = math.prod(float(s) for s in window["size"])
        if base == "all-reduce" or op == "sort":
            n = sum(s.num_elements for s in leaves) if base == "all-reduce" else first.num_elements
            out.add("vector", first.dtype, float(n * math.ceil(math.log2(n)) if op == "sort" and n > 1 else n))
            return
        key, count = "to_apply", out_elements  # map
        if op == "reduce":
            count = float(max(first.num_elements - out_elements, 0))
        elif op == "reduce-window":
            count = out_elements * (taps - 1.0)
        elif op == "scatter":
            count = float(_elements(instr.operand_shapes[-1]))  # the updates
        elif op == "select-and-scatter":
            source = float(_elements(instr.operand_shapes[1]))
            out.merge(self.inner(self.callee(instr, "select")), source * taps, False)
            key, count = "scatter", source
        out.merge(self.inner(self.callee(instr, key)), count, False)

    def custom_call(self, instr: Instruction, out: FlopTally) -> None:
        """FLOPs by the target's rule (:mod:`rooftop.analysis.hlo.targets`); a marker that calls computations
        carries their collectives (a chain's start)."""
        target = instr.custom_call_target or ""
        rule = rule_of(target)
        shapes = [s for s in instr.operand_shapes if s is not None]
        result = instr.shape.leaves()[0] if instr.shape.leaves() else instr.shape
        if rule == "gemm" and len(shapes) >= 2:
            out.add_dot(self.dot(instr, shapes[0], shapes[1], result))
        elif rule == "conv" and len(shapes) >= 2 and target in CONV_TARGETS:
            lhs, rhs, res = ([shapes[0], shapes[1], result][i] for i in CONV_TARGETS[target])
            out.by.update(conv_flops(instr, lhs, rhs, res))
        elif rule == "attention":
            flops, note = attention_flops(instr, target, shapes)
            out.add("matrix", shapes[0].dtype if shapes else "bf16", flops)
            out.notes.append(note)
        elif rule == "pallas" and (priced := pallas_flops(instr, shapes, self.constant)) is not None:
            by, transcendentals, note = priced
            out.transcendentals += transcendentals
            for key, value in by.items():
                out.by[key] = out.by.get(key, 0.0) + value
            out.notes.append(note)
        elif rule == "marker":
            for name in instr.called_computations:
                out.collectives += self.inner(self.module.computations[name]).collectives
        elif rule not in ("data", "gemm", "conv"):
            out.unknown.append(f"custom-call {cut(target or '?')} ({cut(instr.name)})")

    def price(self, instr: Instruction, done: Instruction | None, comp: Computation) -> InstructionCost:
        flops = self.flops(instr)
        result = done.shape if done is not None else instr.shape
        if instr.opcode == "copy-start" and instr.shape.tuple_shapes:
            result = instr.shape.tuple_shapes[0]  # (destination, source, context)
        elif done is None and instr.opcode == "fusion-start" and len(instr.shape.tuple_shapes or ()) > 1:
            result = (instr.shape.tuple_shapes or ())[1]  # ((operands), result, context)
        if instr.opcode == "async-start":  # the wrapped op's operands are the start's
            traffic = self.bytes.traffic([*((s, 1.0) for s in instr.operand_shapes), (result, 1.0)])
        else:
            fused = self.callee(instr, "calls") if instr.opcode in ("fusion", "fusion-start") else None
            traffic = self.bytes.boundary(instr, comp, result, fused)
            if fused is not None and async_end(self.module, instr) == "done":
                traffic = Traffic()  # a done fusion: the wait for a transfer priced on its start
        if not all(map(math.isfinite, (*flops.by.values(), flops.transcendentals, traffic.padded_bytes))):
            raise ParseError(
                f"{instr.opcode} {shown(instr.name)}: its FLOPs or bytes exceed 1.8e308, the range of a float "
                "(shapes, windows or trip counts too large to count)",
                line=instr.line,
            )
        cost = Cost(flops.by, traffic.hbm_bytes, gemm=flops.gemms[0] if len(flops.gemms) == 1 else None)
        return InstructionCost(
            cost, cost.flops - flops.transcendentals, flops.transcendentals, traffic, tuple(flops.collectives),
            "; ".join(flops.unknown), tuple(dict.fromkeys([*flops.notes, *traffic.why])),
            ONE_CORE_MARK in instr.name,
        )  # fmt: skip


def _elements(shape: Shape | None) -> int:
    return shape.num_elements if shape is not None else 0
