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

Others (a GEMM kernel reused across shapes, out of any replayed run) are left unattributed.

A collective kernel without a launch whose args name no collective (RCCL's ``ncclDevKernel_Generic``: its
call is on the op that launched it) takes its call from its stream's launched collectives
(:func:`continued_calls`): when their calls, in order, repeat with a period p (the shortest, seen at least
twice), a step's communication program, the kernels recorded before the first of them continue that program
backwards: the j-th before it makes the call p - j mod p places into the launched ones, as long as their
names agree."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from typing import Any

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
#: the longest period of a stream's collective calls looked for (each candidate costs a pass over them)
MAX_PERIOD = 1024


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


def continued_calls(ev: EventTable, rows: np.ndarray, calls: list[Any], why: np.ndarray, name: np.ndarray,
                    key: Callable[[Any], Hashable]) -> tuple[list[Any], int]:  # fmt: skip
    """The calls of collective kernels (rows ``rows``, their args naming the call or not ``calls``, ``why``
    they have no op, ``name`` their name codes; ``key`` a call's signature), with those of kernels without a
    launch whose args name no collective taken from their stream's launched ones (module docstring); and how
    many were."""
    lost = np.fromiter((w == NO_LAUNCH and "Collective name" not in c
                        for w, c in zip(why.tolist(), calls, strict=True)), bool, len(calls))  # fmt: skip
    if not lost.any():
        return calls, 0
    device, _ = column_codes(ev, "device")
    line, lines = column_codes(ev, "line")
    stream = device[rows].astype(np.int64) * len(lines) + line[rows]
    start = floats(ev.column("start_s"))[rows]
    codes: dict[tuple[int, Hashable], int] = {}
    sig = np.array([codes.setdefault((n, key(c)), len(codes)) for n, c in zip(name.tolist(), calls, strict=True)],
                   np.int64)  # fmt: skip
    twin = by_period(stream, start, lost, sig, name)
    out = list(calls)
    for i in np.flatnonzero(twin >= 0).tolist():
        out[i] = calls[int(twin[i])]
    return out, int(np.count_nonzero(twin >= 0))


def by_period(stream: np.ndarray, start: np.ndarray, lost: np.ndarray, sig: np.ndarray,
              name: np.ndarray) -> np.ndarray:  # fmt: skip
    """For each kernel (``stream`` its stream code, ``start`` its start, ``lost`` whether its call is unknown,
    ``sig`` its call's code where known, ``name`` its name code): the index of the launched kernel whose call
    a lost one repeats, by the period of its stream's known calls (module docstring), or -1."""
    out = np.full(len(stream), -1, np.int64)
    for s in np.unique(stream[lost]).tolist():
        mine = np.flatnonzero(stream == s)
        mine = mine[np.argsort(start[mine], kind="stable")]
        known = mine[~lost[mine]]
        p = _period(sig[known])
        if p is None:
            continue
        before = mine[lost[mine] & (start[mine] < start[known[0]])]
        for j, k in enumerate(before[::-1].tolist(), 1):
            twin = int(known[-j % p])
            if name[k] != name[twin]:
                break
            out[k] = twin
    return out


def _period(sig: np.ndarray) -> int | None:
    """The shortest p (at most :data:`MAX_PERIOD`) with ``sig[i] == sig[i + p]`` for every i, ``sig`` holding
    at least two periods; None when there is none."""
    for p in np.flatnonzero(sig[1 : min(len(sig) // 2, MAX_PERIOD) + 1] == sig[0]).tolist():
        if np.array_equal(sig[p + 1 :], sig[: -p - 1]):
            return p + 1
    return None
