"""The sharding notation of the scaling literature (How to Scale Your Model, Part 3):

    A[I_X, J] @ B[J, K_Y] -> C[I_X, K_Y]

Each tensor lists its named dims; ``I_X`` says dim I is sharded over mesh axis X,
``I_XY`` over X and Y together; a trailing ``{U_X}`` marks partial sums still to be
reduced over X. The output is optional: when omitted it is inferred (dims in both
inputs are contracted, the rest kept in order of appearance, einsum's implicit rule).
Multi-letter axis names (``B_data``) are resolved against the mesh's axis names.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rooftop.errors import ParseError, ShardingError, shown

_TENSOR = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_']*)?\s*\[([^\]]*)\]\s*(\{\s*U_([A-Za-z0-9_,]+)\s*\})?\s*$")
#: most dims of one tensor in the notation (XLA programs use a handful)
MAX_TENSOR_DIMS = 64
_DIM = re.compile(r"^([A-Za-z][A-Za-z0-9]*)(?:_([A-Za-z0-9_{},]+))?$")


@dataclass(frozen=True)
class Dim:
    name: str
    axes_text: str = ""  # raw subscript after "_", resolved against a mesh by resolve_axes

    def __str__(self) -> str:
        return f"{self.name}_{self.axes_text}" if self.axes_text else self.name


@dataclass(frozen=True)
class Tensor:
    name: str
    dims: tuple[Dim, ...]
    unreduced_text: str = ""

    @property
    def dim_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dims)

    def __str__(self) -> str:
        u = f"{{U_{self.unreduced_text}}}" if self.unreduced_text else ""
        return f"{self.name}[{', '.join(map(str, self.dims))}]{u}"


@dataclass(frozen=True)
class MatmulExpr:
    lhs: Tensor
    rhs: Tensor
    out: Tensor
    out_given: bool

    def __str__(self) -> str:
        return f"{self.lhs} @ {self.rhs} -> {self.out}"


def parse_tensor(text: str, default_name: str = "T") -> Tensor:
    """ "A[I_X, J]" -> Tensor("A", (Dim("I", "X"), Dim("J"))); "[B_data]{U_model}" works too."""
    m = _TENSOR.match(text)
    if not m:
        raise ParseError(f"cannot read tensor {shown(text.strip())}: expected NAME[DIM, DIM_AXES, ...], e.g. A[I_X, J]")
    parts = m.group(2).split(",")
    if len(parts) > MAX_TENSOR_DIMS:
        raise ParseError(
            f"tensor {shown(text.strip())} has {len(parts):,} dims; at most {MAX_TENSOR_DIMS} are supported"
        )
    dims = []
    for part in (p.strip() for p in parts):
        if not part:
            raise ParseError(f"empty dim in tensor {shown(text.strip())}")
        dm = _DIM.match(part)
        if not dm:
            raise ParseError(
                f"cannot read dim {shown(part)} in {shown(text.strip())}: expected NAME or NAME_AXES, e.g. I_X"
            )
        dims.append(Dim(dm.group(1), (dm.group(2) or "").strip("{}")))
    dup = [n for n, k in Counter(d.name for d in dims).items() if k > 1]
    if dup:
        raise ParseError(f"tensor {shown(text.strip())} repeats dim {shown(sorted(dup)[0])}")
    return Tensor(m.group(1) or default_name, tuple(dims), m.group(4) or "")


def parse_matmul(text: str) -> MatmulExpr:
    """Parse ``LHS @ RHS [-> OUT]`` (``*`` or ``x`` also accepted for ``@``)."""
    if "->" in text:
        inputs, out_text = text.split("->", 1)
    else:
        inputs, out_text = text, ""
    parts = re.split(r"\]\s*(?:@|\*|·|\bx\b)\s*", inputs, maxsplit=1)
    if len(parts) != 2:
        raise ParseError(
            f"cannot read matmul {shown(text)}: expected 'A[I, J] @ B[J, K]' with an optional '-> C[I, K]'"
        )
    lhs = parse_tensor(parts[0] + "]", "A")
    rhs = parse_tensor(parts[1], "B")
    if out_text.strip():
        out = parse_tensor(out_text, "C")
        for d in out.dims:
            if d.name not in lhs.dim_names and d.name not in rhs.dim_names:
                raise ParseError(f"output dim {shown(d.name)} of {shown(text)} appears in neither input")
        _check_contracts(text, lhs, rhs, out)
        return MatmulExpr(lhs, rhs, out, True)
    out = _infer_output(lhs, rhs)
    _check_contracts(text, lhs, rhs, out)
    return MatmulExpr(lhs, rhs, out, False)


def _check_contracts(text: str, lhs: Tensor, rhs: Tensor, out: Tensor) -> None:
    """A matmul sums over at least one dimension both inputs have and the output drops; without one it is an
    outer (or elementwise) product, which `rooftop matmul` does not price as a matmul."""
    shared = [d for d in lhs.dim_names if d in rhs.dim_names]
    if not any(d not in out.dim_names for d in shared):
        kept = f" (both have {', '.join(shared)}, which the output keeps)" if shared else ""
        raise ParseError(
            f"matmul {shown(text)} contracts no dimension{kept}: name the summed dimension alike in both "
            f"inputs and leave it out of the output, e.g. 'A[I, J] @ B[J, K] -> C[I, K]'"
        )


def _infer_output(lhs: Tensor, rhs: Tensor) -> Tensor:
    kept = [d for d in lhs.dims if d.name not in rhs.dim_names]
    kept += [d for d in rhs.dims if d.name not in lhs.dim_names]
    return Tensor("C", tuple(kept))


def resolve_axes(text: str, axis_names: Sequence[str]) -> tuple[str, ...]:
    """Split a subscript into mesh axis names: "XY" -> ("X", "Y"), "data" -> ("data",),
    "datamodel" -> ("data", "model"); commas may separate names ("data,model")."""
    if not text:
        return ()
    if "," in text:
        parts = tuple(p for p in text.split(",") if p)
        for p in parts:
            if p not in axis_names:
                raise ShardingError(
                    f"unknown mesh axis {shown(p)} in subscript {shown(text)} (mesh axes: {', '.join(axis_names)})"
                )
        return parts
    found = _split_names(text, tuple(sorted(axis_names, key=len, reverse=True)))
    if found is None:
        raise ShardingError(
            f"subscript {shown(text)} is not made of mesh axis names (mesh axes: {', '.join(axis_names) or 'none'})"
        )
    if len(set(found)) != len(found):
        raise ShardingError(f"subscript {shown(text)} names a mesh axis twice")
    return found


def _split_names(text: str, names: tuple[str, ...]) -> tuple[str, ...] | None:
    """``text`` as a run of ``names``, preferring the longest name at each place and backing off
    when the rest cannot be split (what a depth-first search in that order finds). Solved from
    the end, each position once: time grows with len(text) x distinct name lengths, never
    exponentially (``I_aaaa...ab`` on a mesh a, aa, aaa, aaaa)."""
    known = set(names)
    lengths = sorted({len(n) for n in names if n}, reverse=True)
    step: list[int] = [0] * (len(text) + 1)  # length of the name taken at i; 0: no split from i
    ok = [False] * len(text) + [True]
    for i in range(len(text) - 1, -1, -1):
        for n in lengths:
            if i + n <= len(text) and ok[i + n] and text[i : i + n] in known:
                step[i], ok[i] = n, True
                break
    if not ok[0]:
        return None
    out, i = [], 0
    while i < len(text):
        out.append(text[i : i + step[i]])
        i += step[i]
    return tuple(out)
