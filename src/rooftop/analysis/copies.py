"""Memory copies of a profile as ops: the device-to-device, host-to-device and device-to-host copies a
runtime makes outside the compiled program (an XPlane's ``Memcpy...`` lines, a PyTorch trace's
``gpu_memcpy`` / ``gpu_memset`` events) take device time that no HLO instruction or launched kernel accounts
for; each is an op of its own, priced from the bytes it moved: a copy within the device reads and writes
them on HBM (2 x bytes / HBM bandwidth), a fill (memset) writes them (bytes / HBM bandwidth), a copy to or
from the host crosses the host link (bytes / host bandwidth); a copy to another device is priced as one
within the device. Sizes are the XPlane's ``memcpy_details`` (``kind:... size:N dest:D``) or a Kineto
event's ``bytes`` (else the largest tensor of the op that launched it); without a size a copy is listed
with its measured time and "unknown cost" (a memset without one is left out)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from rooftop.analysis.compare import OpReport, Priced, ProfileReport, assemble_parts, judge
from rooftop.analysis.intervals import Merged, Runs, device_intervals
from rooftop.analysis.torch.launches import launching_ops
from rooftop.analysis.torch.op import TorchOp
from rooftop.analysis.trace.events import Trace
from rooftop.analysis.trace.ops import column_codes, executions
from rooftop.cost.op import explicit
from rooftop.cost.roofline import host_term, roofline
from rooftop.hardware.chip import Chip
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason

_SIZE = re.compile(r"\bsize:([0-9]{1,19})\b")
#: copy directions by words of the event's name
_TO_HOST, _FROM_HOST = ("devicetohost", "dtoh", "d2h"), ("hosttodevice", "htod", "h2d")


def _size(args: Mapping[str, Any] | None) -> int | None:
    """An XPlane copy's ``memcpy_details`` size, or a Kineto copy's or fill's ``bytes``."""
    nbytes = (args or {}).get("bytes")
    if nbytes.__class__ is int and 0 <= nbytes < 1 << 63:
        return int(nbytes)
    m = _SIZE.search(str((args or {}).get("memcpy_details", "")))
    return int(m.group(1)) if m else None


def _priced(name: str, size: int | None, chip: Chip) -> Priced:
    """A copy within the device: its bytes read and written on HBM; a fill (memset): its bytes written; to
    or from the host: its bytes over the host link (the chip file's host bandwidth; HBM prices them when
    the file gives none)."""
    if size is None:
        return Priced(None, unknown=Reason.of(ReasonCode.COPY_NO_SIZE, name=name))
    low = name.lower().replace(" ", "").replace("_", "")
    if "memset" in low:
        return Priced(roofline(explicit(0.0, float(size), "bf16", "vector"), chip), 0.0, float(size))
    if any(w in low for w in _TO_HOST + _FROM_HOST):
        est = roofline(explicit(0.0, float(size), "bf16", "vector"), chip)
        if chip.host_bytes_per_s > 0:
            term = host_term(float(size), chip, what="bytes copied between host and device")
            est = dataclasses.replace(est, memory_s=max(est.memory_s, term.seconds), terms=(*est.terms, term))
        return Priced(est, 0.0, float(size))
    return Priced(roofline(explicit(0.0, 2.0 * size, "bf16", "vector"), chip), 0.0, 2.0 * size)


def copy_sizes(trace: Trace, rows: list[int]) -> list[int | None]:
    """The bytes of each copy or fill at ``rows`` of the trace (None where the trace gives no size): its
    ``memcpy_details`` size or ``bytes``; a Kineto copy without either, the largest tensor of its op."""
    args = trace.events.column("args")
    sizes = [_size(args[r]) for r in rows]
    if trace.format == "kineto" and None in sizes:
        sized = _sizes_from_ops(trace)
        sizes = [sized.get(r) if size is None else size for size, r in zip(sizes, rows, strict=True)]
    return sizes


def copy_reports(trace: Trace, chip: Chip, compute: Mapping[str, Merged]) -> list[OpReport]:
    """One report row per (copy name, size): its executions (each copy event one) against its roofline."""
    execs = executions(trace, ("memcpy",), by_time=False)
    if not len(execs):
        return []
    names, rows = trace.events.column("name"), execs.row.tolist()
    keys = [(names[r], size) for r, size in zip(rows, copy_sizes(trace, rows), strict=True)]
    index: dict[tuple[str, int | None], int] = {}
    code = np.array([index.setdefault(k, len(index)) for k in keys], np.int64)
    out = []
    for k, (name, size) in enumerate(index):
        if size is None and "memset" in name.lower():  # a fill of unknown size: left out, as before
            continue
        label = f"{name} {size:,} B" if size is not None else name
        members = np.flatnonzero(code == k)
        out.append(judge(label, None, "copy", "other", Runs(execs, members), _priced(name, size, chip), compute))
    return out


def _sizes_from_ops(trace: Trace) -> dict[int, int]:
    """copy row -> bytes, for the copies of a Kineto trace whose event gives no size (ROCm's): the largest
    tensor argument of the op that launched it (``aten::copy_`` (self, src), ``aten::_to_copy`` (self):
    the tensor copied)."""
    launched = launching_ops(trace, "memcpy")
    names, args = trace.events.column("name"), trace.events.column("args")
    out: dict[int, int] = {}
    for row, op in zip(launched.kernels.tolist(), launched.ops.tolist(), strict=True):
        if op >= 0:
            torch_op = TorchOp.from_args(names[op], args[op])
            sizes = [torch_op.nbytes(i) for i in torch_op.reads() if torch_op.tensor(i) is not None]
            if sizes and max(sizes) > 0:
                out[row] = int(max(sizes))
    return out


def with_copies(report: ProfileReport, trace: Trace, chip: Chip) -> ProfileReport:
    """``report`` with the memory copies and fills of a trace as ops (unchanged when it has none). A Kineto
    trace's ops are joined with the kernels they launched only, so a copy or a fill (``gpu_memcpy`` /
    ``gpu_memset``, sized by their ``bytes``) is counted once, here; a Chrome JSON trace's copies are sized
    as an XPlane's, by their ``memcpy_details`` (a ``--timeline`` writes each copy's size there)."""
    kind, kinds = column_codes(trace.events, "kind")
    if "memcpy" not in kinds or not np.any(kind == kinds.index("memcpy")):
        return report
    compute = device_intervals(executions(trace, by_time=False))[0]
    ops = [*report.ops, *copy_reports(trace, chip, compute)]
    return assemble_parts(report.source, report.chip, ops, report.steps, report.memory, report.sharding,
                          report.notes)  # fmt: skip
