"""Cost rules for aten's gathers and their gradients: ops that read rows picked by an index tensor (an
embedding lookup, ``index_select``, ``gather``, the negative log-likelihood's pick of one logit per row)
or scatter into a dense gradient. They do no arithmetic worth the name: each is memory-bound, and its bytes
are what it must move at the least:

- ``index_select(self, dim, index)``: the output is ``self`` with ``dim`` cut to ``index``'s length; the
  picked elements are read once and written once, and ``index`` read;
- ``embedding(weight [V, ..], indices)``: the output is ``indices``' shape followed by a row of
  ``weight``; the rows are read and written once, and ``indices`` read;
- ``gather(self, dim, index)``: the output has ``index``'s shape; its elements read from ``self`` and
  written once, and ``index`` read;
- ``embedding_dense_backward(grad, indices, num_weights, ..)``: the dense gradient [num_weights, H]
  written once, ``grad`` and ``indices`` read, one add per element of ``grad``;
- ``nll_loss_forward(self [N, C], target [N], ..)``: one element of each of the N rows read, ``target``
  read, the output (N, or one with a reduction) and the total weight written, one FLOP per row;
- ``nll_loss_backward(grad_out, self [N, C], target [N], ..)``: the gradient (``self``'s shape) written
  once, ``target`` and ``grad_out`` read, one FLOP per row.

Argument positions are those of ATen's native_functions.yaml (PyTorch 2.x)."""

from __future__ import annotations

import math

from rooftop.analysis.torch.op import Price, TorchOp
from rooftop.cost.op import explicit
from rooftop.dtypes import dtype_bytes
from rooftop.errors import InvalidConfigError
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Reason


def _moved(picked: float, op: TorchOp, source: int, index: int, what: ReasonCode, shape: tuple[int, ...]) -> Price:
    """``picked`` elements of argument ``source`` read and written once, argument ``index`` read."""
    nbytes = 2 * picked * dtype_bytes(op.dtype(source)) + op.nbytes(index)
    return Price(explicit(0.0, nbytes, op.dtype(source), "vector"), Reason(what, (("shape", shape),)))


def _dim(op: TorchOp, i: int, rank: int) -> int:
    dims = op.ints(i, 1)
    if dims is None or len(dims) != 1 or not -rank <= dims[0] < max(rank, 1):
        raise InvalidConfigError(f"argument {i} (dim) {op.text(i)!r} is not a dim of a rank-{rank} tensor")
    return dims[0] % max(rank, 1)


def index_select(op: TorchOp) -> Price:
    src, index = op.need(0, 2)
    shape = list(src)
    if shape:
        shape[_dim(op, 1, len(src))] = math.prod(index)
    return _moved(float(math.prod(shape)), op, 0, 2, ReasonCode.TORCH_INDEX_SELECT, tuple(shape))


def embedding(op: TorchOp) -> Price:
    weight, indices = op.need(0, 1)
    shape = (*indices, *weight[1:])
    return _moved(float(math.prod(shape)), op, 0, 1, ReasonCode.TORCH_EMBEDDING, shape)


def gather(op: TorchOp) -> Price:
    src, index = op.need(0, 2)
    _dim(op, 1, len(src))
    return _moved(float(math.prod(index)), op, 0, 2, ReasonCode.TORCH_GATHER, index)


def embedding_dense_backward(op: TorchOp) -> Price:
    grad, _ = op.need(0, 1)
    rows = op.ints(2, 1)
    if rows is None or len(rows) != 1 or rows[0] < 0 or not grad:
        raise InvalidConfigError(f"num_weights {op.text(2)!r} is not a row count, or the gradient has no rows")
    out = (rows[0], grad[-1])
    written = math.prod(out) * dtype_bytes(op.dtype(0))
    cost = explicit(op.elements(0), written + op.nbytes(0) + op.nbytes(1), op.dtype(0), "vector")
    return Price(cost, Reason(ReasonCode.TORCH_EMBEDDING_BACKWARD, (("grad", grad), ("out", out))))


def _rows(logits: tuple[int, ...]) -> int:
    return logits[0] if len(logits) == 2 else 1


def nll_loss_forward(op: TorchOp) -> Price:
    logits, _ = op.need(0, 1)
    rows, elt = _rows(logits), dtype_bytes(op.dtype(0))
    reduction = op.ints(3, 1)
    out = rows if reduction == (0,) else 1  # reduction 0: none, one loss per row
    nbytes = (rows + out + 1) * elt + op.nbytes(1)
    what = Reason(ReasonCode.TORCH_NLL_LOSS, (("logits", logits),))
    return Price(explicit(rows, nbytes, op.dtype(0), "vector"), what)


def nll_loss_backward(op: TorchOp) -> Price:
    _, logits, _ = op.need(0, 1, 2)
    rows = _rows(logits)
    nbytes = op.nbytes(1) + op.nbytes(2) + op.nbytes(0)
    what = Reason(ReasonCode.TORCH_NLL_LOSS_BACKWARD, (("logits", logits),))
    return Price(explicit(rows, nbytes, op.dtype(1), "vector"), what)


#: op name -> rule (module docstring)
GATHERS = {
    "aten::index_select": index_select,
    "aten::embedding": embedding,
    "aten::gather": gather,
    "aten::embedding_dense_backward": embedding_dense_backward,
    "aten::nll_loss_forward": nll_loss_forward,
    "aten::nll_loss_backward": nll_loss_backward,
}
