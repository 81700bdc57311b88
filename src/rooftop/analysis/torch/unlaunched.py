"""Kernels of a PyTorch (Kineto) trace whose launch is not in it: the device keeps recording kernels that
were launched before the host activity of the trace begins (a warm-up step's tail), and their runtime
launch, hence their op and shapes, is lost. Such a kernel is attributed to an op by what it is: when every
kernel of its name that has a launch in the trace was launched by ops of one signature (name, Input Dims,
types and concrete values), each of which launched that kernel alone, the kernel is one more execution of
that op (:func:`by_kernel_name`). A name launched by ops of several shapes (a GEMM kernel reused across
layers), or by ops that launch several kernels, is left unattributed."""

from __future__ import annotations

import itertools

import numpy as np

from rooftop.analysis.torch.launches import gathered
from rooftop.analysis.trace.events import EventTable
from rooftop.analysis.trace.ops import column_codes, first_codes

#: the reason (an index into launches.REASONS) of a kernel whose launch is not in the trace
NO_LAUNCH = 1


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
