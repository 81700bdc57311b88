"""A PyTorch (Kineto) trace on the roofline. Such a trace has no HLO: each kernel is joined with the aten op
that launched it (:func:`launching_ops`) and priced from the op's shapes (:mod:`rooftop.analysis.torch.ops`);
NCCL kernels are priced from their args as collectives on a topology of their group size
(:mod:`rooftop.analysis.torch.nccl`); :func:`kineto_report` assembles the report. The verdicts per op are
those of :mod:`rooftop.analysis.compare`.

A trace of a million kernels is read column-wise: the join of kernels and ops
(:mod:`rooftop.analysis.torch.launches`) and the groupings are numpy sorts over the kernel rows, an op's args
are read and priced once per distinct args (the loader shares them between events), and executions are
columns (:class:`~rooftop.analysis.trace.ops.Executions`), not one object per kernel."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from rooftop.analysis.categories import category_of
from rooftop.analysis.compare import (
    OpReport,
    Priced,
    ProfileReport,
    assemble_parts,
    judge,
    memory_of,
)
from rooftop.analysis.gcpause import paused_gc
from rooftop.analysis.intervals import Runs, device_intervals, device_step_sums, step_table
from rooftop.analysis.torch.capture import Capture, replay_executions
from rooftop.analysis.torch.engine_ops import collective_kind, family_category
from rooftop.analysis.torch.families import SeqStats
from rooftop.analysis.torch.launches import GRAPH_REPLAY, REASONS, Launches, gathered, launching_ops
from rooftop.analysis.torch.nccl import Collectives, comm_kernels, nccl_row
from rooftop.analysis.torch.nested import NestedOps, with_expert_tensors
from rooftop.analysis.torch.op import TorchOp
from rooftop.analysis.torch.ops import op_cost
from rooftop.analysis.torch.steps import annotated_at, is_attention, kineto_steps, step_lengths
from rooftop.analysis.torch.unlaunched import attribute, continued_calls
from rooftop.analysis.trace.events import EventTable, Trace
from rooftop.analysis.trace.ops import Executions, column_codes, executions, first_codes, floats, members_of
from rooftop.cost.roofline import roofline
from rooftop.errors import RooftopError
from rooftop.hardware.chip import Chip
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

__all__ = ["kernel_labels", "kineto_report"]


def _price(op: TorchOp, chip: Chip, stats: SeqStats | None = None) -> tuple[str, Priced]:
    price = op_cost(op, stats)
    if price.cost is None:
        return op.label(price.tag), Priced(None, unknown=price.what)
    try:
        estimate = roofline(price.cost, chip)
    except RooftopError as exc:
        return op.label(price.tag), Priced(None, price.cost.flops, price.cost.hbm_bytes, unknown=str(exc))
    return op.label(price.tag), Priced(estimate, price.cost.flops, price.cost.hbm_bytes)


def _priced_once(
    prices: dict[tuple[Any, ...], tuple[str, Priced]], nccl: Collectives, op: TorchOp, lengths: SeqStats | None
) -> tuple[str, Priced]:
    """The op's label and price, priced once per distinct (name, dims, types, concrete values, lengths)."""
    shapes = (op.name, op.dims, op.types, op.concrete, lengths)
    if shapes not in prices:
        prices[shapes] = nccl.op(op) if collective_kind(op.name) else _price(op, nccl.chip, lengths)
    return prices[shapes]


def kineto_report(
    trace: Trace, chip: Chip, topology: str | None = None, capture: Capture | None = None
) -> ProfileReport:
    """Every kernel of a PyTorch trace judged against the roofline of the op that launched it, one row per
    (aten op, shapes, dtypes); NCCL kernels as collectives; kernels no op explains stay "unknown cost"."""
    with paused_gc():
        return _kineto_report(trace, chip, topology, capture)


@dataclass
class _Group:
    """One report row: its name, opcode and price, and its executions."""

    label: str
    opcode: str | None
    priced: Priced
    runs: Runs | None = None


def _kineto_report(trace: Trace, chip: Chip, topology: str | None, capture: Capture | None) -> ProfileReport:
    nccl = Collectives(trace, chip, topology)
    launched = launching_ops(trace)
    execs = executions(trace, by_time=False)  # for the steps and the intervals: their order does not matter
    groups, unexplained, by_name = _kernel_groups(trace, chip, nccl, launched, execs, capture)
    intervals = device_intervals(execs, comm_kernels(trace, launched))
    ops: list[OpReport] = []
    for key, g in groups.items():
        by_family = family_category(g.opcode) if g.opcode else None
        category = "communication" if key[0] == "nccl" else by_family or category_of(g.label, g.opcode or g.label)
        assert g.runs is not None
        ops.append(judge(g.label, None, g.opcode, category, g.runs, g.priced, intervals[0]))
    n_priced = sum(g.runs.events() for g in groups.values() if g.runs and g.priced.estimate and not g.priced.unknown)
    notes: list[Note] = [
        Reason.of(ReasonCode.KERNELS_PRICED, priced=n_priced, kernels=len(launched), unexplained=unexplained),
        *nccl.notes,
    ]
    if by_name + nccl.continued:
        notes.append(Reason.of(ReasonCode.KERNELS_WITHOUT_LAUNCH, kernels=by_name + nccl.continued))
    notes += _replay_notes(groups, unexplained, capture)
    if not launched.shapes:
        notes.append(Reason.of(ReasonCode.NO_INPUT_DIMS))
    steps, how = kineto_steps(trace, execs)
    if how:
        notes.append(how)
    table = step_table(steps, device_step_sums(steps, *intervals))
    return assemble_parts(trace.source, chip.name, ops, table, memory_of(trace), (), notes)


def _replay_notes(groups: dict[tuple[Any, ...], _Group], unexplained: int, capture: Capture | None) -> list[Note]:
    """What the report says of graph replays: how many kernels the capture attributed, how many are left and
    their share of the kernel time, and how to get a capture when there is none."""

    def busy(keep: Any) -> float:
        return sum(g.runs.busy_s() for k, g in groups.items() if g.runs is not None and keep(k))

    left = sum(len(g.runs or ()) for key, g in groups.items() if key[0] == "kernel" and key[2] == GRAPH_REPLAY)
    done = sum(g.runs.events() for key, g in groups.items() if key[0] == "replay" and g.runs is not None)
    total = busy(lambda k: True) or 1.0
    share = busy(lambda k: k[0] == "replay" or (k[0] == "kernel" and k[2] == GRAPH_REPLAY)) / total
    notes: list[Note] = []
    if capture is not None and done:
        notes.append(Reason.of(ReasonCode.GRAPH_REPLAY_ATTRIBUTED, kernels=done, capture=capture.source,
                               launches=capture.launches))  # fmt: skip
    if left:
        code = ReasonCode.GRAPH_REPLAY_UNMATCHED if capture is not None else ReasonCode.GRAPH_REPLAY_NO_CAPTURE
        notes.append(Reason.of(code, left=left, unexplained=unexplained))
    if share:
        notes.append(Reason.of(ReasonCode.GRAPH_REPLAY_SHARE, share=share))
    return notes


def _kernel_groups(
    trace: Trace, chip: Chip, nccl: Collectives, launched: Launches, execs: Executions, capture: Capture | None = None
) -> tuple[dict[tuple[Any, ...], _Group], int, int]:
    """The kernels grouped into report rows: per NCCL call signature and per reason for kernels no op
    explains (each kernel one execution), then per priced (aten op, shapes, dtypes) (each op's kernels on
    one device one execution; a kernel without a launch attributed by its name (:func:`by_kernel_name`)
    one execution); rows in the order of their first execution, executions in the order of their first
    kernel. Also how many kernels no op launched, and how many were attributed by name."""
    ev = trace.events
    kernels, op_row = launched.kernels, launched.ops
    name, name_values = column_codes(ev, "name")
    name = name[kernels]
    is_nccl = np.array(["nccl" in n.lower() for n in name_values], bool)[name]
    groups: dict[tuple[Any, ...], _Group] = {}
    replays: dict[tuple[Any, ...], _Group] = {}  # joined to the others at the end: the row codes below count those
    replayed = ~is_nccl & (op_row < 0) & (launched.why == REASONS.index(GRAPH_REPLAY))
    if capture is not None and replayed.any():
        at = np.flatnonzero(replayed)
        hit = _replays(ev, nccl, kernels[at], launched.launch[at], capture, replays)
        op_row = op_row.copy()
        op_row[at[hit]] = -2  # attributed from the capture: neither alone nor priced from a profile op
    guessed, guessed_run = attribute(ev, kernels, op_row, launched.why, name, is_nccl)
    run_of = op_row
    if (guessed >= 0).any():  # kernels without a launch, attributed to the ops they replay
        at = np.flatnonzero(guessed >= 0)
        op_row, run_of = op_row.copy(), op_row.copy()
        op_row[at], run_of[at] = guessed[at], guessed_run[at]
    alone = _where(is_nccl | (op_row == -1))  # kernels that are executions by themselves
    unexplained = int(np.count_nonzero(~is_nccl & (op_row == -1)))
    rows = kernels[alone]
    group = _alone_groups(ev, nccl, rows, name[alone], is_nccl[alone], launched.why[alone], groups, op_row[alone])
    del name
    alone_runs, at = _as_executions(ev, rows, execs)
    del rows
    for g, members in zip(groups.values(), members_of(group, len(groups)), strict=True):
        g.runs = Runs(alone_runs, at[members])
    priced = np.flatnonzero(~is_nccl & (op_row >= 0))
    if len(priced):
        op_runs, group = _op_runs(ev, nccl, kernels[priced], op_row[priced], groups, run_of[priced])
        for g, members in zip(groups.values(), members_of(group, len(groups)), strict=True):
            if len(members):
                g.runs = Runs(op_runs, members)
    groups.update(replays)
    return groups, unexplained, int(np.count_nonzero(guessed >= 0))


def _replays(
    ev: EventTable,
    nccl: Collectives,
    rows: np.ndarray,
    graph: np.ndarray,
    capture: Capture,
    groups: dict[tuple[Any, ...], _Group],
) -> np.ndarray:
    """Report rows for the replayed kernels the capture trace attributes to ops (one execution per graph
    launch and captured op), priced from the captured op's shapes and the lengths of the step annotation
    the graph was launched in; which of ``rows`` were attributed (a mask)."""
    runs, captured, hit = replay_executions(ev, rows, graph, capture)
    if not len(runs):
        return hit
    launch_at = floats(ev.column("start_s"))[graph[hit]]
    step, stats = annotated_at(ev, launch_at)
    kernel_step = dict(zip(rows[hit].tolist(), step.tolist(), strict=True))
    prices: dict[tuple[Any, ...], tuple[str, Priced]] = {}
    member: list[int] = []
    index: dict[tuple[Any, ...], int] = {}
    for c, row in zip(captured, runs.row.tolist(), strict=True):
        op = TorchOp.from_args(c.op, c.args)
        lengths = stats[kernel_step[row]] if kernel_step.get(row, -1) >= 0 and is_attention(op.name) else None
        label, priced = _priced_once(prices, nccl, op, lengths)
        key = ("replay", label, priced.flops, priced.bytes, priced.unknown)
        if key not in groups:
            groups[key] = _Group(f"{label} (graph replay)", collective_kind(op.name) or op.name, priced)
            index[key] = len(index)
        member.append(index[key])
    keys = list(index)
    for k, mine in enumerate(members_of(np.array(member, np.int64), len(keys))):
        groups[keys[k]].runs = Runs(runs, mine)
    return hit


def _where(mask: np.ndarray) -> np.ndarray | slice:
    """The positions where ``mask`` holds, or the whole range (a slice: no copy) when it holds everywhere."""
    return slice(None) if mask.all() else np.flatnonzero(mask)


def _as_executions(ev: EventTable, rows: np.ndarray, execs: Executions) -> tuple[Executions, np.ndarray]:
    """Executions holding each kernel of ``rows`` as one of its own, and where: ``execs`` when they are
    there (a Kineto trace: kernels carry no HLO instruction, so each is one), else new ones."""
    where = np.full(len(ev), -1, np.int32 if len(execs) < 1 << 31 else np.int64)
    where[execs.row] = np.arange(len(execs), dtype=where.dtype)
    at = where[rows]
    del where
    if not len(at) or (at.min() >= 0 and (execs.events.max() == 1 or np.all(execs.events[at] == 1))):
        return execs, at
    start, dur = floats(ev.column("start_s")), floats(ev.column("duration_s"))
    device, devices = column_codes(ev, "device")
    times = (start[rows], start[rows] + dur[rows], dur[rows] + 0.0)  # busy = 0 + dur, a sum of one
    return Executions(ev, rows, times, np.ones(len(rows), np.int64), (device[rows], devices)), np.arange(len(rows))


def _call_args(args: Any, kernels: np.ndarray, ops: np.ndarray) -> list[Any]:
    """The args naming each NCCL kernel's call: its own, or where they name no collective (older PyTorch,
    RCCL's ``ncclDevKernel_Generic``) those of the op that launched it (``record_param_comms`` records the
    collective, its counts, dtype and group)."""
    own = gathered(args, kernels)
    for i in np.flatnonzero(ops >= 0).tolist():
        if "Collective name" not in own[i]:
            launcher = args[int(ops[i])]
            if "Collective name" in launcher:
                own[i] = launcher
    return own


def _alone_groups(
    ev: EventTable, nccl: Collectives, rows: np.ndarray, name: np.ndarray, is_nccl: np.ndarray, why: np.ndarray,
    groups: dict[tuple[Any, ...], _Group], ops: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """The report row of each kernel that is an execution by itself: an NCCL kernel by its call (its args,
    or its launching op's: :func:`_call_args`; read once per distinct args), another by (name, why no op).
    The rows are made, and NCCL calls priced, in the order of their first kernel."""
    names, args = ev.column("name"), ev.column("args")
    index: dict[tuple[Any, ...], int] = {}
    first: dict[int, Any] = {}  # the args of the first kernel of each NCCL key
    key_of = np.empty(len(rows), np.int32)
    calls = np.flatnonzero(is_nccl)
    if len(calls):  # read once per (kernel name, common part of the args), in order of first appearance
        of_calls = _call_args(args, rows[calls], ops[calls])  # each one's common part (getattr(a, "shared", a))
        of_calls, nccl.continued = continued_calls(ev, rows[calls], of_calls, why[calls], name[calls], nccl.key)
        common, _ = first_codes(np.fromiter(map(id, map(getattr, of_calls, itertools.repeat("shared"), of_calls)),
                                            np.int64, len(calls)))  # fmt: skip
        code, at = first_codes(name[calls].astype(np.int64) * (int(common.max()) + 1) + common)
        del common
        made = []
        for i in at.tolist():
            row, a = int(rows[calls[i]]), of_calls[i]
            k = index.setdefault(("nccl", *nccl.key(a), "" if a.get("Collective name") else names[row]), len(index))
            first.setdefault(k, a)
            made.append(k)
        key_of[calls] = np.array(made, np.int32)[code]
        del code, of_calls
    other = _where(~is_nccl)
    if len(other) if isinstance(other, np.ndarray) else len(rows):
        wide = np.int64 if int(name.max(initial=0)) >= (1 << 31) // len(REASONS) else np.int32
        code, at = first_codes(name[other].astype(wide) * len(REASONS) + why[other])
        firsts = other[at] if isinstance(other, np.ndarray) else at
        keys = [index.setdefault(("kernel", names[rows[i]], REASONS[why[i]]), len(index)) for i in firsts.tolist()]
        key_of[other] = np.array(keys, np.int32)[code]
        del code
    group, at = first_codes(key_of)
    keys_list = list(index)
    for k in key_of[at].tolist():  # in the order of their first kernel
        key = keys_list[k]
        if key[0] == "nccl":
            groups[key] = _Group(*nccl.price(key[1:-1], first[k], key[-1]))
        else:
            groups[key] = _Group(key[1], None, Priced(None, unknown=key[2]))
    return group


def _op_runs(
    ev: EventTable, nccl: Collectives, kernels: np.ndarray, op_row: np.ndarray, groups: dict[tuple[Any, ...], _Group],
    run_of: np.ndarray | None = None,
) -> tuple[Executions, np.ndarray]:  # fmt: skip
    """The executions of the priced kernels, one per (op, device) (numbered by first kernel), as columns,
    with each one's report row, per (aten op, shapes, dtypes): ops read and priced once per distinct
    (name, args). Rows are added to ``groups`` in the order of their first execution."""
    names, args = ev.column("name"), ev.column("args")
    start, dur = floats(ev.column("start_s")), floats(ev.column("duration_s"))
    device, devices = column_codes(ev, "device")
    run, first = first_codes((op_row if run_of is None else run_of) * max(len(devices), 1) + device[kernels])
    rows, events = kernels[first], np.bincount(run, minlength=len(first))
    device = device[rows]
    begin, end, busy = start[rows], start[rows] + dur[rows], dur[rows] + 0.0  # one kernel: busy = 0 + dur
    several = np.flatnonzero(events > 1)
    if len(several):
        order = np.argsort(run, kind="stable")
        offsets = np.concatenate(([0], np.cumsum(events)))
        for r in several.tolist():
            mine = kernels[order[offsets[r] : offsets[r + 1]]].tolist()
            begin[r] = min(start[mine].tolist())
            end[r] = max((start[mine] + dur[mine]).tolist())
            busy[r] = sum(dur[mine].tolist())
    ops = op_row[first]
    name, _ = column_codes(ev, "name")
    of_ops = gathered(args, ops)  # each one's common part (getattr(a, "shared", a), in C), by identity
    ids, _ = first_codes(np.fromiter(map(id, map(getattr, of_ops, itertools.repeat("shared"), of_ops)), np.int64,
                                     len(ops)))  # fmt: skip
    del of_ops
    step, stats = step_lengths(ev, ops, names, name[ops])
    key = (name[ops].astype(np.int64) * (int(ids.max()) + 1) + ids) * (len(stats) + 1) + step + 1
    sig, at = first_codes(key)
    del name, ids, key
    prices: dict[tuple[Any, ...], tuple[str, Priced]] = {}
    index = {key: k for k, key in enumerate(groups)}
    made = []
    nested = NestedOps(ev)
    for i in at.tolist():  # each distinct op: read, priced (once per shapes), given its report row
        r = int(ops[i])
        op = TorchOp.from_args(names[r], with_expert_tensors(names[r], args[r], partial(nested, r)))
        lengths = stats[step[i]] if step[i] >= 0 else None
        label, priced = _priced_once(prices, nccl, op, lengths)
        key = ("op", label, priced.flops, priced.bytes, priced.unknown)
        if key not in groups:
            index[key] = len(groups)
            groups[key] = _Group(label, collective_kind(op.name) or op.name, priced)
        made.append(index[key])
    runs = Executions(ev, rows, (begin, end, busy), events, (device, devices))
    return runs, np.array(made, np.int64)[sig]


def kernel_labels(trace: Trace, chip: Chip) -> tuple[dict[int, str], dict[int, tuple[int, int]]]:
    """(kernel row -> its report row (``OpReport.name``): the aten op that launched it for the kernels priced
    from their op's shapes, the NCCL call for an NCCL kernel (kernels no op launched are left out); kernel row
    -> (op row, launch row) for the kernels of an op run that launched one kernel name more than once (a
    ``_foreach_`` op's chunks)): what a timeline needs to put an op's roofline time beside its kernels, and
    to read back as the same rows and runs."""
    ev = trace.events
    names, args = ev.column("name"), ev.column("args")
    launched = launching_ops(trace)
    labels: dict[int, str] = {}
    out: dict[int, str] = {}
    nccl = Collectives(trace, chip, None)
    seen: dict[tuple[int, str], list[int]] = {}  # (op row, kernel name) -> its kernels
    for k, (kernel, op) in enumerate(zip(launched.kernels.tolist(), launched.ops.tolist(), strict=True)):
        if "nccl" in names[kernel].lower():
            out[kernel] = nccl_row(nccl.key(args[kernel] or {}), names[kernel])
            continue
        if op < 0:
            continue
        label = labels.get(op)
        if label is None:
            label = labels[op] = _price(TorchOp.from_args(names[op], args[op]), chip)[0]
        out[kernel] = label
        seen.setdefault((op, names[kernel]), []).append(k)
    repeated = {k for ks in seen.values() if len(ks) > 1 for k in ks}
    ops_of = {int(launched.ops[k]) for k in repeated}
    runs = {
        int(kernel): (int(op), int(launch))
        for kernel, op, launch in zip(launched.kernels, launched.ops, launched.launch, strict=True)
        if int(op) in ops_of and launch >= 0
    }
    return out, runs
