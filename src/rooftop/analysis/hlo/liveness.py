"""Memory at the peak: the buffers of a scheduled HLO module live when the most bytes are.

The entry computation of a compiled module (``compiled.as_text()``, ``is_scheduled=true``) lists its
instructions in the order they run. Each instruction that makes a new array defines a buffer of its
result's bytes (a tuple result: the sum of its leaves); ``get-tuple-element``, ``bitcast`` and ``tuple``
make none, they name buffers of their operands. A buffer is live from the position of the instruction
that defines it to its last use (through those aliases), both included: an instruction's operands and its
result exist together while it runs. Parameters are live over the whole program, as are the buffers the
module returns (they reach the ROOT). The peak is the position with the most live bytes; the buffers live
there are listed, with the defining instruction, its shape, JAX's op_name and source line.

Each buffer has a kind: ``weights`` (a parameter the step returns updated: a module output of its shape
and type), ``optimizer`` (a parameter whose argument path names optimizer state: ``opt_state``, ``mu``,
``nu``, ``momentum``, ``exp_avg``...), ``inputs`` (the other parameters: the batch), ``outputs`` (made here
and returned), ``activations`` (made by the forward pass of a training step, ``jvp(`` without ``transpose(``
in its op_name, and live at the peak: saved for the backward pass), ``constants`` and ``temporaries``.

What it does not count: temporaries inside called computations (a while loop's body, a fusion's
internals); buffer sharing XLA does for in-place updates (a dynamic-update-slice writing into its
operand's buffer: counted as two buffers where their ranges overlap) and the packing of small buffers into
one allocation. ``compiled.memory_analysis()`` is XLA's own account of the same module: its arguments,
outputs and temporaries (``argument_size_in_bytes + output_size_in_bytes + temp_size_in_bytes -
alias_size_in_bytes``) sum within 0.01% of this peak on the worked example (tests). Its
``peak_memory_in_bytes`` (XLA's HloLiveRange) ends a value where its last use starts, so an instruction's
operands and result do not overlap there, and it can be lower (4.23 against 6.32 MB on the worked example,
at the gradient all-reduce whose four 512 KiB operands and outputs coexist in the buffer assignment).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from rooftop.analysis.hlo.ir import HloModule, Instruction
from rooftop.display import Displayed
from rooftop.errors import ParseError
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

#: instructions that make no buffer of their own: their result is (part of) an operand's
ALIASES = frozenset({"get-tuple-element", "bitcast", "tuple"})
#: argument-path words that name optimizer state (optax: mu, nu; PyTorch: exp_avg, momentum_buffer)
OPTIMIZER_WORDS = frozenset({"opt", "opt_state", "optimizer", "optim", "adam", "adamw", "mu", "nu", "momentum",
                             "momentum_buffer", "exp_avg", "exp_avg_sq", "velocity", "accumulator"})  # fmt: skip
KINDS = ("weights", "optimizer", "inputs", "activations", "temporaries", "outputs", "constants")


@dataclass(frozen=True)
class Buffer:
    """A buffer an instruction defines: its bytes, live range (schedule positions, inclusive) and kind."""

    name: str
    opcode: str
    shape: str
    bytes: float
    start: int
    end: int
    kind: str
    op_name: str = ""
    source: str = ""


@dataclass(frozen=True, repr=False)  # the short repr of Displayed
class MemoryPeak(Displayed):
    """The module's peak: its bytes, its position in the schedule and the instruction running there, the
    buffers live at it (largest first), their bytes by kind, and notes on what is not counted."""

    module: str
    peak_bytes: float
    peak_position: int
    peak_instruction: str
    buffers: tuple[Buffer, ...]
    by_kind: dict[str, float]
    scheduled: bool
    notes: tuple[Note, ...] = field(default=())


def _leaf_key(instr: Instruction) -> list[tuple[str, tuple[int, ...]]]:
    return [(leaf.dtype, leaf.dims) for leaf in instr.shape.leaves()]


def _parameter_kind(instr: Instruction, outputs: set[tuple[str, tuple[int, ...]]]) -> str:
    words = {w.lower() for w in re.split(r"[^A-Za-z0-9_]+", instr.metadata.get("op_name", "")) if w}
    if words & OPTIMIZER_WORDS:
        return "optimizer"
    return "weights" if any(k in outputs for k in _leaf_key(instr)) else "inputs"


def _kind(instr: Instruction, returned: bool, outputs: set[tuple[str, tuple[int, ...]]]) -> str:
    if instr.opcode == "parameter":
        return _parameter_kind(instr, outputs)
    if returned:
        return "outputs"
    if instr.opcode == "constant":
        return "constants"
    op_name = instr.metadata.get("op_name", "")
    return "activations" if "jvp(" in op_name and "transpose(" not in op_name else "temporaries"


def _owners(instrs: tuple[Instruction, ...]) -> dict[str, tuple[str, ...]]:
    """instruction -> the defining instructions of the buffers its result is (itself, or its operands' for
    an alias; a get-tuple-element of a tuple instruction: that operand's)."""
    owners: dict[str, tuple[str, ...]] = {}
    by_name = {i.name: i for i in instrs}
    for instr in instrs:
        if instr.opcode not in ALIASES:
            owners[instr.name] = (instr.name,)
            continue
        ops = [o for o in instr.operands if o in owners]
        if instr.opcode == "get-tuple-element" and ops and by_name[ops[0]].opcode == "tuple":
            index = int(instr.attributes.get("index", "0") or 0)
            inner = by_name[ops[0]].operands
            ops = [inner[index]] if 0 <= index < len(inner) and inner[index] in owners else ops
        owners[instr.name] = tuple(dict.fromkeys(b for o in ops for b in owners[o]))
    return owners


def _source(module: HloModule, instr: Instruction) -> str:
    try:
        where = module.source_location(instr)
    except (ParseError, ValueError):
        return ""
    return f"{where[0]}:{where[1]}" if where else ""


def buffers(module: HloModule) -> list[Buffer]:
    """Every buffer of the entry computation with its live range and kind (module docstring)."""
    instrs = module.entry.instructions
    last = len(instrs) - 1
    owners = _owners(instrs)
    position = {i.name: n for n, i in enumerate(instrs)}
    end = dict(position)
    for n, instr in enumerate(instrs):
        for operand in instr.operands:
            for owner in owners.get(operand, ()):
                end[owner] = max(end[owner], n)
    returned = set(owners.get(module.entry.root.name, ()))
    outputs = {k for name in returned for k in _leaf_key(module.entry.by_name[name]) if name in module.entry.by_name}
    out = []
    for instr in instrs:
        if instr.opcode in ALIASES:
            continue
        whole = instr.opcode == "parameter" or instr.name in returned
        size = float(instr.shape.logical_bytes)
        out.append(Buffer(instr.name, instr.opcode, str(instr.shape), size, 0 if instr.opcode == "parameter"
                          else position[instr.name], last if whole else end[instr.name],
                          _kind(instr, instr.name in returned, outputs), instr.metadata.get("op_name", ""),
                          _source(module, instr)))  # fmt: skip
    return out


def memory_peak(module: HloModule) -> MemoryPeak:
    """The peak of ``module``'s entry computation and the buffers live at it (module docstring)."""
    bufs = buffers(module)
    instrs = module.entry.instructions
    delta = [0.0] * (len(instrs) + 1)
    for b in bufs:
        delta[b.start] += b.bytes
        delta[b.end + 1] -= b.bytes
    live, peak, at = 0.0, -1.0, 0
    for n in range(len(instrs)):
        live += delta[n]
        if live > peak:
            peak, at = live, n
    at_peak = sorted((b for b in bufs if b.start <= at <= b.end), key=lambda b: (-b.bytes, b.name))
    by_kind: dict[str, float] = defaultdict(float)
    for b in at_peak:
        by_kind[b.kind] += b.bytes
    scheduled = module.attributes.get("is_scheduled", "").strip() == "true"
    notes: list[Note] = [] if scheduled else [Reason.of(ReasonCode.MEMORY_NOT_SCHEDULED)]
    called = sum(1 for i in instrs if i.opcode in ("while", "conditional", "call"))
    if called:
        notes.append(Reason.of(ReasonCode.MEMORY_BODIES_NOT_COUNTED, calls=called))
    return MemoryPeak(module.name, max(peak, 0.0), at, instrs[at].name if instrs else "", tuple(at_peak),
                      {k: by_kind[k] for k in KINDS if k in by_kind}, scheduled, tuple(notes))  # fmt: skip
