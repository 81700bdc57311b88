"""Kernels of a PyTorch (Kineto) trace whose launch is not in it: the device keeps recording kernels that
were launched before the host activity of the trace begins (a warm-up step's tail), and their runtime
launch, hence their op and shapes, is lost. Such kernels are attributed to ops by what they are
(:func:`attribute`):

- by the program they replay (:func:`by_sequence`): a run of them on a stream whose kernel names are, in
  order, those of a stretch of launched kernels on that stream (at least :data:`MIN_RUN` kernels; the
  longest such run first) ran the same ops: each kernel takes the op of its counterpart, consecutive
  kernels of one op one execution;
- else by name (:func:`by_kernel_name`): when every kernel of its name that has a launch in the trace was
  launched by ops of one signature (name, Input Dims, types and concrete values), each of which launched
  that kernel alone, the kernel is one more execution of that op.

Others (a GEMM kernel reused across shapes, out of any replayed run) are left unattributed."""

from __future__ import annotations

import itertools

import numpy as np

from rooftop.analysis.torch.launches import gathered
from rooftop.analysis.trace.events import EventTable
from rooftop.analysis.trace.ops import column_codes, first_codes, floats

#: the reason (an index into launches.REASONS) of a kernel whose launch is not in the trace
NO_LAUNCH = 1
#: the fewest kernels a run must have to be matched by its sequence of names
MIN_RUN = 8
#: suffixes that match nowhere before a stream's search stops (each costs a scan of the stream's names)
MAX_MISSES = 256


def attribute(ev: EventTable, kernels: np.ndarray, ops: np.ndarray, why: np.ndarray, name: np.ndarray,
              skip: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """For each kernel (rows ``kernels``; ``ops`` the row of the op that launched it or < 0, ``why`` the
    reason there is none, ``name`` its name code, ``skip`` kernels never attributed, e.g. NCCL's): the row
    of the op a kernel without a launch is attributed to (-1: none), and its execution key (distinct from
    every op row: the trace's length plus the row of the execution's first kernel)."""
    op_of, run = by_sequence(ev, kernels, ops, why, name, skip)
    rest = by_kernel_name(ev, kernels, ops, why, name, skip | (op_of >= 0))
    at = np.flatnonzero(rest >= 0)
    op_of[at], run[at] = rest[at], len(ev) + kernels[at]
    return op_of, run


def by_sequence(ev: EventTable, kernels: np.ndarray, ops: np.ndarray, why: np.ndarray, name: np.ndarray,
                skip: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The ops (and execution keys) of kernels without a launch matched, per stream, to a stretch of
    launched kernels with the same names in the same order (module docstring)."""
    op_of, run = np.full(len(kernels), -1, np.int64), np.full(len(kernels), -1, np.int64)
    lost_all = ~skip & (ops < 0) & (why == NO_LAUNCH)
    if not lost_all.any():
        return op_of, run
    device, _ = column_codes(ev, "device")
    line, lines = column_codes(ev, "line")
    stream = device[kernels].astype(np.int64) * len(lines) + line[kernels]
    start = floats(ev.column("start_s"))[kernels]
    for s in np.unique(stream[lost_all]).tolist():
        mine = np.flatnonzero(stream == s)
        mine = mine[np.argsort(start[mine], kind="stable")]
        lost, known = mine[lost_all[mine]], mine[~skip[mine] & (ops[mine] >= 0)]
        if len(known) >= MIN_RUN:
            _match_runs(kernels, ops, name, lost, known, op_of, run, len(ev))
    return op_of, run


def _match_runs(kernels: np.ndarray, ops: np.ndarray, name: np.ndarray, lost: np.ndarray, known: np.ndarray,
                op_of: np.ndarray, run: np.ndarray, offset: int) -> None:  # fmt: skip
    """Match the lost kernels of one stream (in time order) to its known ones, from the end: the longest
    suffix whose names occur as a stretch of the known names (found by a binary search on its length: a
    suffix that occurs has every shorter one occur), then on from where it begins; a kernel whose suffix
    matches nowhere is skipped (at most :data:`MAX_MISSES` of them a stream)."""
    text = name[known].astype(">u4").tobytes()
    codes = name[lost].astype(">u4")

    def where(first: int, end: int) -> int:  # where codes[first:end] occurs in the known names, or -1
        needle, at = codes[first:end].tobytes(), text.find(codes[first:end].tobytes())
        while at != -1 and at % 4:
            at = text.find(needle, at + 1)
        return at // 4 if at != -1 else -1

    end, misses, seen = len(lost), 0, set(np.unique(name[known]).tolist())
    while end >= MIN_RUN and misses <= MAX_MISSES:
        if int(name[lost[end - 1]]) not in seen or where(end - MIN_RUN, end) < 0:
            end, misses = end - 1, misses + 1
            continue
        lo, hi, best, found = MIN_RUN, end, 0, -1
        while lo <= hi:
            mid = (lo + hi) // 2
            at = where(end - mid, end)
            if at >= 0:
                lo, best, found = mid + 1, mid, at
            else:
                hi = mid - 1
        if not best:
            end -= 1
            continue
        mine, theirs = lost[end - best : end], ops[known[found : found + best]]
        op_of[mine] = theirs
        new = np.concatenate(([True], theirs[1:] != theirs[:-1]))  # a new op: a new execution
        run[mine] = offset + kernels[mine[np.flatnonzero(new)]][np.cumsum(new) - 1]
        end -= best


def by_kernel_name(ev: EventTable, kernels: np.ndarray, ops: np.ndarray, why: np.ndarray, name: np.ndarray,
                   skip: np.ndarray) -> np.ndarray:  # fmt: skip
    """For each kernel (rows ``kernels``; ``ops`` the row of the op that launched it or < 0, ``why`` the
    reason there is none, ``name`` the kernel's name code, ``skip`` kernels never attributed, e.g. NCCL's):
    the row of an op whose signature a kernel without a launch is attributed to (module docstring), or -1."""
    out = np.full(len(kernels), -1, np.int64)
    lost = np.flatnonzero(~skip & (ops < 0) & (why == NO_LAUNCH))
    has = np.flatnonzero(ops >= 0)
    if not len(lost) or not len(has):
        return out
    op = ops[has]
    of_ops = gathered(ev.column("args"), op)
    shared, _ = first_codes(np.fromiter(map(id, map(getattr, of_ops, itertools.repeat("shared"), of_ops)), np.int64,
                                        len(op)))  # fmt: skip
    del of_ops
    op_name, _ = column_codes(ev, "name")
    sig, _ = first_codes(op_name[op].astype(np.int64) * (int(shared.max()) + 1) + shared)
    _, inverse, count = np.unique(op, return_inverse=True, return_counts=True)
    alone = count[inverse] == 1  # the op launched this kernel only
    kname = name[has].astype(np.int64)
    pairs = np.unique(kname * (int(sig.max()) + 1) + sig) // (int(sig.max()) + 1)
    names, per_name = np.unique(pairs, return_counts=True)
    good = np.setdiff1d(names[per_name == 1], np.unique(kname[~alone]))
    first_names, first = np.unique(kname, return_index=True)
    rep = dict(zip(first_names.tolist(), op[first].tolist(), strict=True))
    hit = lost[np.isin(name[lost], good)]
    out[hit] = [rep[int(n)] for n in name[hit].tolist()]
    return out
