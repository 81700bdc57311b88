"""Kernels that ran inside XLA:GPU command buffers (CUDA graphs), given back to their HLO instructions.

Recent XLA on NVIDIA GPUs records runs of thunks (fusions, cuBLAS calls, memsets) into command buffers and
replays them as CUDA graphs. The profiler then tags every kernel of a replay with the command buffer's
name (``hlo_op = "command_buffer_1"``), which is no instruction of the module, so no kernel can be priced.
What is left to tell them apart:

- the replay runs its kernels in the order of the thunk sequence, which is the schedule of the entry
  computation: a scheduled module (``is_scheduled=true``) prints its instructions in that order;
- a kernel that XLA generated for a fusion is named after it, with ``.`` and ``-`` written as ``_``
  (``loop_multiply_fusion_9`` for ``%loop_multiply_fusion.9``); XLA reuses one compiled kernel for
  fusions with identical bodies, so the name may be that of an identical earlier fusion;
- a library kernel (cuBLAS ``nvjet_*``, ``sm90_xmma_*``, cuDNN, CUTLASS) carries no instruction name and
  comes from a ``custom-call``.

So each replay (one correlation id: one graph launch) is aligned with the entry's instructions that launch
kernels, in order: a kernel named after an instruction ends at that instruction; a kernel named after
another fusion of the same kind (a reused kernel: ``fusion_486`` for ``%fusion.498``) takes the next
generated-code instruction; a library kernel takes the next ``custom-call``; a second kernel of the
instruction just matched (a split-K reduction, a two-pass reduction) stays with it. A kernel named like
the one before it is read both ways (a second kernel, or the next identical fusion reusing it: a gate and
an up projection of the same shape run one kernel twice), and the reading that lines the whole replay up
is kept. A replay that does not align (a loop or conditional inside the graph, kernels on several
streams) keeps the kernels named after an instruction and leaves the others on the command buffer, and a
note says how many and how to profile without command buffers.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict
from collections.abc import Mapping

import numpy as np

from rooftop.analysis.hlo.ir import HloModule, Instruction
from rooftop.analysis.trace.events import COLUMNS, EventTable, Trace
from rooftop.analysis.trace.ops import codes, groups_of
from rooftop.errors import ParseError
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

#: the instruction name the profiler gives kernels replayed from a command buffer
COMMAND_BUFFER = re.compile(r"^command_buffer(_[0-9]+)?$")
_NUMBER = re.compile(r"_[0-9]+$")
#: readings of a replay followed at once (:func:`align`): a handful in practice; the bound keeps a replay of
#: many same-named kernels linear in its length
_MAX_READINGS = 16
#: opcodes that launch nothing on the device (buffer bookkeeping, or run by the host)
NO_KERNEL = frozenset(
    (
        "parameter get-tuple-element bitcast tuple constant after-all add-dependency opt-barrier partition-id "
        "replica-id domain"
    ).split()
)
#: opcodes whose kernels run as control flow or on other streams: a schedule holding one does not align
UNALIGNABLE = frozenset({"while", "conditional", "call", "async-start", "async-done", "send", "recv"})


def kernel_name(instruction: str) -> str:
    """The name XLA gives a fusion's generated kernel: ``.`` and ``-`` as ``_``."""
    return instruction.replace(".", "_").replace("-", "_")


def _launching(module: HloModule, ran_outside: set[str]) -> list[Instruction] | None:
    """The entry's instructions that launch kernels inside a command buffer, in schedule order; None when
    the schedule holds control flow (its kernels cannot be lined up with a flat list)."""
    out = []
    for instr in module.entry.instructions:
        if instr.opcode in NO_KERNEL or instr.name in ran_outside:
            continue
        if instr.opcode in UNALIGNABLE or instr.async_kind is not None:
            return None
        out.append(instr)
    return out


def _stem(name: str) -> str:
    """A kernel name without its number: ``fusion_486`` and ``fusion_498`` are both ``fusion``."""
    return _NUMBER.sub("", name)


def is_library(instr: Instruction) -> bool:
    """Whether an instruction runs as a library kernel that carries no instruction name: a custom-call, or
    a fusion XLA hands to cuBLAS / cuDNN (``fusion_backend_config.kind`` ``__cublas...`` / ``__cudnn...``)."""
    if instr.opcode == "custom-call":
        return True
    if instr.opcode != "fusion" or "backend_config" not in instr.attributes:
        return False
    try:
        config = instr.backend_config or {}
    except ParseError:
        return False
    fusion = config.get("fusion_backend_config") if isinstance(config, dict) else None
    kind = fusion.get("kind", "") if isinstance(fusion, dict) else ""
    return isinstance(kind, str) and kind.startswith(("__cublas", "__cudnn"))


def align(kernels: list[str], schedule: list[Instruction]) -> list[str] | None:
    """The instruction of each kernel of one replay (names in time order) against the schedule; None when
    they do not line up (the rules are in the module docstring). A kernel named like the one just before
    can be a second kernel of the same instruction or the next identical fusion reusing it: every reading
    is followed (the positions reachable after each kernel, a handful; at most the 16 furthest), and the
    first that ends on the schedule's last instruction is taken, preferring at each kernel: its own
    instruction, a reused kernel, the next library call, staying with the last instruction."""
    index = {kernel_name(i.name): k for k, i in enumerate(schedule)}
    library = [is_library(i) for i in schedule]
    stems = [_stem(kernel_name(i.name)) for i in schedule]
    n = len(schedule)
    steps: list[dict[int, int]] = []  # after each kernel: reachable position -> the position before it
    here: dict[int, int] = {0: -1}
    for name in kernels:
        own, stem = index.get(name), _stem(name)
        nxt: dict[int, int] = {}
        for p in here:
            moves = []
            if own is None:  # a library kernel: the next library instruction, or a second kernel of the last
                moves = [p + 1] if p < n and library[p] else []
                moves += [p] if p > 0 and library[p - 1] else []
            else:
                if own == p or (own != p and p < n and not library[p] and stem == stems[p]):
                    moves.append(p + 1)  # its own kernel, or one reused from an identical fusion of the kind
                if own == p - 1:
                    moves.append(p)  # a second kernel of the instruction just matched
            for q in moves:
                nxt.setdefault(q, p)
        if not nxt:
            return None
        if len(nxt) > _MAX_READINGS:  # many kernels of one name over as many identical fusions: keep the furthest
            nxt = {q: nxt[q] for q in sorted(nxt)[-_MAX_READINGS:]}
        steps.append(nxt)
        here = nxt
    if n not in here:
        return None
    out, p = [], n
    for nxt in reversed(steps):
        out.append(schedule[p - 1].name)
        p = nxt[p]
    return out[::-1]


def _kernels_by_op(ev: EventTable) -> list[np.ndarray]:
    """The rows of the kernels of each distinct (module, instruction), in table order."""
    kind, kinds = codes(ev.column("kind"))
    if "kernel" not in kinds:
        return []
    rows = np.flatnonzero(kind == kinds.index("kernel"))
    del kind
    module, _ = codes(ev.column("module"))
    inst, insts = codes(ev.column("instruction"))
    key = module[rows].astype(np.int64) * len(insts) + inst[rows]
    return [rows[m] for m in groups_of(key)]


def attribute_command_buffers(trace: Trace, modules: Mapping[str, HloModule]) -> tuple[Trace, list[Note]]:
    """``trace`` with the kernels of command-buffer replays given their instructions (see the module
    docstring), kernels that carry their module but no ``hlo_op`` given the fusion their kernel name names,
    and notes saying what was done; the trace itself when there is nothing to attribute."""
    ev = trace.events
    inst, module_col = ev.column("instruction"), ev.column("module")
    device, corr, step = ev.column("device"), ev.column("correlation"), ev.column("step")
    replays: dict[tuple[str, str, str, object], list[int]] = defaultdict(list)
    orphans: dict[str, list[int]] = defaultdict(list)
    outside: dict[str, set[str]] = defaultdict(set)
    for members in _kernels_by_op(ev):  # each distinct (module, instruction) of the kernels, decided once
        i = int(members[0])
        name, base = inst[i], (module_col[i] or "").split("(")[0]
        if name is None and (base in modules or not module_col[i]):
            orphans[base].extend(members.tolist())  # "" when the kernel names no module either
        if base not in modules or name is None:
            continue
        elif COMMAND_BUFFER.match(name) and name not in modules[base].entry:
            for i in members.tolist():
                replays[(device[i], base, name, ("call", corr[i]) if corr[i] is not None else step[i])].append(i)
        else:
            outside[base].add(name)
    for orphan_rows in orphans.values():
        orphan_rows.sort()
    if not replays and not orphans:
        return trace, []
    start, kname = ev.column("start_s"), ev.column("name")
    new, new_module = list(inst), list(module_col)
    by_kernel = {base: {kernel_name(i.name): i.name for i in m.entry.instructions} for base, m in modules.items()}
    schedules = {base: _launching(modules[base], outside[base]) for base in {key[1] for key in replays}}
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # kernels, ok, not, unpriced
    for (_, base, buffer, _), rows in replays.items():
        rows.sort(key=start.__getitem__)
        schedule, count = schedules[base], counts[(base, buffer)]
        count[0] += len(rows)
        found = align([kname[i] for i in rows], schedule) if schedule is not None else None
        if found is not None:
            count[1] += 1
            for i, name in zip(rows, found, strict=True):
                new[i] = name
            continue
        count[2] += 1
        for i in rows:
            own = by_kernel[base].get(kname[i])
            if own is not None:
                new[i] = own
            else:
                count[3] += 1
    notes: list[Note] = []
    for (base, buffer), (kernels, ok, bad, unpriced) in sorted(counts.items()):
        notes.append(Reason.of(ReasonCode.COMMAND_BUFFER, module=base, kernels=kernels, buffer=buffer, aligned=ok,
                               replays=ok + bad, unpriced=unpriced if bad else None))  # fmt: skip
    for base, rows in sorted(orphans.items()):
        left = []
        for i in rows:
            key = kernel_name(kname[i].removesuffix(".kd"))  # ROCm code objects end in .kd
            homes = [b for b in ([base] if base else by_kernel) if key in by_kernel[b]]
            if len(homes) == 1:  # a kernel with no module either: only where one module has that name
                new[i] = by_kernel[homes[0]][key]
                if not base:
                    new_module[i] = homes[0]
            else:
                left.append(kname[i])
        if len(left) < len(rows):
            notes.append(Reason.of(ReasonCode.KERNELS_NAMED_FUSION, module=base, given=len(rows) - len(left),
                                   kernels=len(rows)))  # fmt: skip
        if left:
            example = Counter(left).most_common(1)[0][0]
            notes.append(Reason.of(ReasonCode.KERNELS_NO_INSTRUCTION, module=base, kernels=len(left), example=example))
    cols = {c: ev.column(c) for c in COLUMNS}
    cols["instruction"] = tuple(new)
    cols["module"] = tuple(new_module)
    return dataclasses.replace(trace, events=EventTable(cols)), notes
