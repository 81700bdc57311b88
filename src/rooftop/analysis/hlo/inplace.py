"""Whether a fusion that updates a buffer (a dynamic-update-slice or scatter built on a fused parameter) does
it in place, read from the compiled module.

XLA updates a buffer in place when buffer assignment gives the fusion's output the operand's buffer. The
printed module shows the outcome in three ways, and the rule reads them in this order:

1. ``output_to_operand_aliasing={{}: (0, {})}`` on the fusion ties the output to operand 0's buffer: in place,
   the update written (the tiles it touches) and the buffer not read.
2. The operand is a ``copy`` (copy insertion gave the update a fresh buffer): in place on the copy; the copy
   instruction pays for the whole buffer on its own line.
3. A loop-carried buffer: the fusion sits in a while body, its operand is element i of the body's parameter
   tuple and its output is element i of the body's root tuple. In a module that marks the outputs its
   fusions update in place by aliasing (some fusion of the module carries ``output_to_operand_aliasing``, as
   TPU modules do), such a fusion without the mark does not share the buffer: it reads the whole buffer and
   writes the whole output, a full copy per iteration. A module whose fusions mark nothing (CPU and GPU
   modules; their custom-calls' aliasing does not count) keeps XLA's own assumption: in place.

Anything else keeps XLA's assumption (in place), which is also what its HloCostAnalysis counts; the logical
bytes stay XLA's count in every case, and only the timed (tile-aware) bytes follow the rule.
"""

from __future__ import annotations

from rooftop.analysis.hlo.ir import Computation, HloModule, Instruction
from rooftop.analysis.hlo.rules import cut
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

_ALIASING = "output_to_operand_aliasing"


class InPlace:
    """The in-place decisions of one module; the while bodies and the module's aliasing marks are read once,
    when first needed."""

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self._bodies: set[str] | None = None
        self._marks: bool | None = None

    def bodies(self) -> set[str]:
        if self._bodies is None:
            self._bodies = {
                instr.attributes.get("body", "").strip().lstrip("%")
                for _, instr in self.module.instructions()
                if instr.opcode == "while"
            }
        return self._bodies

    def marks_aliasing(self) -> bool:
        """Whether the module marks the outputs its fusions update in place by aliasing (a custom-call's
        aliasing, which CPU and GPU modules print too, does not count)."""
        if self._marks is None:
            self._marks = any(
                instr.opcode == "fusion" and _ALIASING in instr.attributes for _, instr in self.module.instructions()
            )
        return self._marks

    def decide(self, instr: Instruction, comp: Computation, leaf: int, param: int) -> tuple[bool, Note]:
        """(in place, why) for output ``leaf`` of fusion ``instr`` built on its operand ``param``."""
        key = (leaf,) if instr.shape.is_tuple else ()
        if instr.output_operand_aliasing.get(key) == (param, ()):
            return True, Reason.of(ReasonCode.IN_PLACE_ALIASED, operand=param)
        if param >= len(instr.operands):
            return True, ""
        source = _through(comp, comp.by_name.get(instr.operands[param]), ("bitcast",))
        if source is not None and source.opcode == "copy":
            return True, Reason.of(ReasonCode.IN_PLACE_ON_COPY, copy=cut(source.name))
        index = self.carried(comp, instr, source)
        if index is None or not self.marks_aliasing():
            return True, ""
        return False, Reason.of(ReasonCode.NOT_IN_PLACE, element=index)

    def carried(self, comp: Computation, instr: Instruction, source: Instruction | None) -> int | None:
        """The tuple index when ``source`` is an element of a while body's parameter that ``instr``'s output
        returns at the same index of the body's root tuple; None otherwise."""
        if comp.name not in self.bodies() or source is None or source.opcode != "get-tuple-element":
            return None
        param = comp.by_name.get(source.operands[0]) if source.operands else None
        root = comp.root
        if param is None or param.opcode != "parameter" or root.opcode != "tuple":
            return None
        index = source.tuple_index
        if index is None or index >= len(root.operands):
            return None
        back = _through(comp, comp.by_name.get(root.operands[index]), ("bitcast",))
        return index if back is instr else None


def _through(comp: Computation, node: Instruction | None, ops: tuple[str, ...]) -> Instruction | None:
    for _ in range(len(comp.instructions)):
        if node is None or node.opcode not in ops or not node.operands:
            break
        node = comp.by_name.get(node.operands[0])
    return node
