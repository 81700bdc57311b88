"""One recorded PyTorch op call (:class:`TorchOp`: its name and the ``Input Dims``, ``Input type`` and
``Concrete Inputs`` the trace records), the answer a cost rule gives (:class:`Price`), and the generic
vector-op rule (:class:`Vec`, :func:`vector_price`) that the aten rules (:mod:`rooftop.analysis.torch.ops`)
and the serving engines' custom ops (:mod:`rooftop.analysis.torch.custom`) share. Argument conventions
are in the ops module's docstring."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from rooftop.cost.cost import Cost
from rooftop.cost.op import explicit
from rooftop.dtypes import TORCH_DTYPES, TORCH_PACKED, compute_dtype, dtype_bytes
from rooftop.errors import InvalidConfigError, shown
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Reason

#: the largest size, element count, stride or padding read from a trace (PyTorch sizes are int64).
MAX_INT = 2**63 - 1
_INTS_RE = re.compile(r"\[?[-0-9, ]*\]?")
_INT_RE = re.compile(r"-?[0-9]{1,19}")
# fmt: off
#: NCCL ``Collective name`` -> cost/cost.py Comm kind (broadcast, reduce, gather, scatter have no rule).
NCCL_KINDS: dict[str, str] = {
    **dict.fromkeys(("allreduce", "allreduce_coalesced", "all_reduce"), "all-reduce"),
    **dict.fromkeys(("allgather", "_allgather_base", "all_gather", "allgather_into_tensor_coalesced",
                     "allgather_coalesced", "all_gather_into_tensor"), "all-gather"),
    **dict.fromkeys(("reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced",
                     "reduce_scatter_tensor"), "reduce-scatter"),
    **dict.fromkeys(("alltoall", "alltoall_base", "all_to_all"), "all-to-all"),
    **dict.fromkeys(("send", "recv"), "permute"),
}
# fmt: on


class Price(NamedTuple):
    """A rule's answer: the Cost of one execution (None when unknown), what it was priced as (or why
    not), and a short tag that tells otherwise identical shapes apart ("causal", "stride 2")."""

    cost: Cost | None
    what: Note
    tag: str = ""


@dataclass(frozen=True)
class TorchOp:
    """One aten op call as the trace records it. ``problem`` says why the recorded arguments cannot be
    read (a size that is not a count, Input Dims that do not match Input type), as a Reason
    (``TORCH_INPUT_DIMS``); such an op has no Cost."""

    name: str
    dims: tuple[Any, ...]  # per argument: a shape (tuple of ints), or a tuple of shapes for a TensorList
    types: tuple[str, ...]
    concrete: tuple[str, ...] = ()
    problem: Reason | None = None

    @staticmethod
    def from_args(name: str, args: Mapping[str, Any]) -> TorchOp:
        """The op from a cpu_op's args; fields of the wrong JSON type are read as absent or named in ``problem``."""
        types = tuple(map(str, _list(args.get("Input type"))))
        concrete = tuple(map(str, _list(args.get("Concrete Inputs"))))
        dims: list[Any] = []
        found: Reason | None = None
        for i, raw in enumerate(_list(args.get("Input Dims"))):
            kind = types[i] if i < len(types) else ""
            shape, problem = _shape(raw, kind == "TensorList")
            if kind in TORCH_DTYPES and any(isinstance(d, tuple) for d in shape):
                shape, problem = (), _SHAPES_FOR_TENSOR
            dims.append(shape)
            if problem is not None and found is None and (kind == "TensorList" or kind in TORCH_DTYPES):  # read
                found = Reason(ReasonCode.TORCH_INPUT_DIMS, (("argument", i), ("dims", shown(raw)),
                                                             ("op", str(name)), ("why", problem)))  # fmt: skip
        return TorchOp(str(name), tuple(dims), types + ("",) * (len(dims) - len(types)), concrete, found)

    def is_list(self, i: int) -> bool:
        return i < len(self.types) and self.types[i] == "TensorList"

    def tensor(self, i: int) -> tuple[int, ...] | None:
        """The shape of argument ``i`` when it is a tensor of a known dtype."""
        if i < len(self.dims) and self.types[i] in TORCH_DTYPES:
            shape: tuple[int, ...] = self.dims[i]
            return shape
        return None

    def need(self, *idx: int) -> list[tuple[int, ...]]:
        shapes = [self.tensor(i) for i in idx]
        missing = [i for i, s in zip(idx, shapes, strict=True) if s is None]
        if missing:
            got = self.types[missing[0]] if missing[0] < len(self.types) else "absent"
            raise InvalidConfigError(f"argument {missing[0]} is not a tensor of a known dtype ({got!r})")
        return shapes  # type: ignore[return-value]

    def dtype(self, i: int, default: str = "fp32") -> str:
        return TORCH_DTYPES.get(self.types[i], default) if i < len(self.types) else default

    def elements(self, i: int) -> float:
        shapes = self.dims[i] if self.is_list(i) else (self.dims[i],)
        return sum(float(math.prod(s)) for s in shapes)

    def packing(self, i: int) -> int:
        """Values per recorded element of argument ``i`` (2 for PyTorch's packed fp4, else 1)."""
        return TORCH_PACKED.get(self.types[i], 1) if i < len(self.types) else 1

    def nbytes(self, i: int) -> float:
        return self.elements(i) * self.packing(i) * dtype_bytes(self.dtype(i))

    def reads(self) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.dims)) if self.tensor(i) is not None or self.is_list(i))

    def text(self, i: int) -> str | None:
        return self.concrete[i] if i < len(self.concrete) and self.concrete[i] != "" else None

    def flag(self, i: int) -> bool | None:
        return {"True": True, "False": False, "1": True, "0": False}.get(self.text(i) or "")

    def ints(self, i: int, n: int) -> tuple[int, ...] | None:
        """Integer argument ``i`` ("[2, 2]" or "2") repeated to ``n`` values; None when not recorded."""
        text = self.text(i)
        if text is None or not _INTS_RE.fullmatch(text):
            return None
        found = re.findall(r"-?[0-9]+", text)
        if not all(_INT_RE.fullmatch(v) for v in found):
            raise InvalidConfigError(f"argument {i} {shown(text)} holds an integer of more than 19 digits")
        values = tuple(int(v) for v in found)
        return values * n if len(values) == 1 else values

    def label(self, tag: str = "") -> str:
        """``aten::mm [64,128]x[128,256] fp32``: the op, its tensor shapes and their dtypes."""
        shapes = [
            f"[{len(self.dims[i])} tensors]" if self.is_list(i) else fmt_shape(self.dims[i]) for i in self.reads()
        ]
        dtypes = "/".join(dict.fromkeys(self.dtype(i) for i in self.reads() if not self.is_list(i)))
        return " ".join(p for p in (self.name, "x".join(shapes), dtypes, tag) if p)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def size_value(value: Any) -> int | None:
    """A dim from JSON: an int (or an integral float) in [0, 2**63 - 1], else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if 0 <= value <= MAX_INT else None


#: why an Input Dims entry cannot be read (the figure ``why`` of a TORCH_INPUT_DIMS reason)
_NOT_COUNTS = Reason(ReasonCode.DIMS_NOT_COUNTS)
_TOO_MANY = Reason(ReasonCode.DIMS_TOO_MANY_ELEMENTS)
_LIST_NOT_SHAPES = Reason(ReasonCode.DIMS_LIST_NOT_SHAPES)
_MIXED = Reason(ReasonCode.DIMS_MIXED)
_SHAPES_FOR_TENSOR = Reason(ReasonCode.DIMS_SHAPES_FOR_TENSOR)


def _one_shape(dims: list[Any]) -> tuple[tuple[int, ...], Reason | None]:
    sizes = [size_value(d) for d in dims]
    if None in sizes:
        return (), _NOT_COUNTS
    shape = tuple(s for s in sizes if s is not None)
    if math.prod(shape) > MAX_INT:
        return (), _TOO_MANY
    return shape, None


def _shape(dims: Any, tensor_list: bool = False) -> tuple[Any, Reason | None]:
    """(shape, problem) of one Input Dims entry: a tuple of ints, or a tuple of shapes when every entry is a
    list (a TensorList); anything unreadable is () and the problem says why (a non-list is () silently)."""
    if not isinstance(dims, list):
        return (), None
    if dims and all(isinstance(d, list) for d in dims):
        shapes = [_one_shape(d) for d in dims]
        problem = next((p for _, p in shapes if p is not None), None)
        return (() if problem is not None else tuple(s for s, _ in shapes)), problem
    if tensor_list:
        return (), _LIST_NOT_SHAPES
    if any(isinstance(d, list) for d in dims):
        return (), _MIXED
    return _one_shape(dims)


def fmt_shape(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


@dataclass(frozen=True)
class Vec:
    """A vector-unit op: ``flops`` per output element; it reads the tensor arguments ``reads`` (None:
    all) and writes ``outputs`` tensors shaped like argument ``out`` (None: the broadcast of the reads)."""

    flops: float = 1.0
    reads: tuple[int, ...] | None = None
    out: int | None = None
    outputs: int = 1


def _broadcast(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    rank = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (rank - len(s)) + s for s in shapes]
    return tuple(max(col) if min(col) != 0 else 0 for col in zip(*padded, strict=True))


def vector_price(op: TorchOp, spec: Vec) -> Price:
    reads = op.reads() if spec.reads is None else tuple(i for i in spec.reads if i in op.reads())
    target = spec.out if spec.out is not None else (reads[0] if reads and op.is_list(reads[0]) else None)
    if target is not None:
        if not op.is_list(target):
            op.need(target)
        elements, dt = op.elements(target), op.dtype(target)
    else:
        if not reads:
            raise InvalidConfigError("no tensor argument")
        elements = math.prod(float(v) for v in _broadcast([op.dims[i] for i in reads]))
        # a 0-dim tensor (a wrapped Python scalar) does not promote a dimensioned one: fp32 * fp64 scalar is fp32
        shaped = [i for i in reads if op.dims[i] != ()] or list(reads)
        dt = compute_dtype(*(op.dtype(i) for i in shaped))
    nbytes = sum(op.nbytes(i) for i in reads) + spec.outputs * elements * dtype_bytes(dt)
    what = Reason.of(ReasonCode.TORCH_VECTOR, flops=spec.flops, elements=elements, reads=len(reads),
                     writes=spec.outputs)  # fmt: skip
    return Price(explicit(elements * spec.flops, nbytes, dt, "vector"), what)
