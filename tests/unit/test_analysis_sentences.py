"""The modules of analysis/ that say why (an op's verdict, what a cost rule read, the notes on a profile, an
HLO module, idle time, serving phases, a diff, many hosts) return reasons as data (``rooftop.reasons``) and
write no sentence: report/reasons.py writes them. A string literal of five words or more outside docstrings
and ``raise`` statements in one of these files fails this test (error messages stay text; a schema's
signature cited as its source, ``name(arg, arg, ...)``, is data)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "rooftop"

#: files that return their reasons as data: no sentence may come back into them
SAY_NOTHING = (
    "analysis/compare.py",
    "analysis/coverage.py",
    "analysis/diff.py",
    "analysis/hostviews.py",
    "analysis/idle.py",
    "analysis/phases.py",
    "analysis/hlo/chains.py",
    "analysis/hlo/inplace.py",
    "analysis/hlo/liveness.py",
    "analysis/hlo/mesh.py",
    "analysis/torch/attention_ops.py",
    "analysis/torch/custom.py",
    "analysis/torch/engine_ops.py",
    "analysis/torch/families.py",
    "analysis/torch/gathers.py",
    "analysis/torch/launches.py",
    "analysis/torch/op.py",
    "analysis/torch/quant_ops.py",
    "analysis/torch/scan_ops.py",
    "analysis/torch/steps.py",
    "analysis/torch/unlaunched.py",
)

_WORD = re.compile(r"\(?[A-Za-z][a-z]*[,.:;)]?")
#: a parenthesised list of argument names, as a registered schema's signature cites them: ``(out!, input, ...``
_SIGNATURE = re.compile(r"\((?:\w+[!?]*, ){2,}")


def sentences(source: str) -> list[str]:
    """The string literals of ``source`` (an f-string as one, its fields as X) of five words or more,
    docstrings and the messages of ``raise`` statements aside."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and body:
            if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip.add(id(body[0].value))
        if isinstance(node, ast.Raise | ast.JoinedStr):  # a raise's message; an f-string's parts (read whole)
            skip.update(id(n) for n in ast.walk(node) if n is not node or isinstance(node, ast.Raise))
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            text = "".join(str(v.value) if isinstance(v, ast.Constant) else " X " for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if sum(1 for w in text.split() if _WORD.fullmatch(w)) >= 5 and not _SIGNATURE.search(text):
            found.append(text)
    return found


def test_the_scan_finds_sentences_and_leaves_docstrings_raises_and_names_alone() -> None:
    code = (
        '"""A docstring of many words here."""\n'
        'x = f"{n} of {m} kernels have no launch in the trace"\n'
        'y = "aten::_scaled_dot_product_flash_attention_backward"\n'
        's = "vLLM csrc/torch_bindings.cpp: rms_norm(out, input, weight, epsilon)"\n'
        'w = "each of (grad input, grad weight) is written once"\n'
        'raise ValueError("a message of five words or more")\n'
    )
    assert sentences(code) == [
        " X  of  X  kernels have no launch in the trace",
        "each of (grad input, grad weight) is written once",
    ]


def test_the_modules_that_say_why_write_no_sentence() -> None:
    found = {rel: said for rel in SAY_NOTHING if (said := sentences((SRC / rel).read_text()))}
    assert found == {}, "return a Reason (rooftop.reasons) and write its sentence in report/reasons.py"


def unsorted_figures(source: str) -> list[list[str]]:
    """The figure names of each ``Reason(code, (("name", value), ...))`` built directly in ``source`` that are
    not in sorted order (``Reason.of`` sorts them; a Reason built without it must match, or equal notes
    would compare unequal)."""
    found: list[list[str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Reason":
            figures = node.args[1] if len(node.args) > 1 else None
            if isinstance(figures, ast.Tuple):
                names = [str(e.elts[0].value) for e in figures.elts if isinstance(e, ast.Tuple)
                         and isinstance(e.elts[0], ast.Constant)]  # fmt: skip
                if names != sorted(names):
                    found.append(names)
    return found


def test_the_reasons_built_directly_list_their_figures_sorted() -> None:
    assert unsorted_figures('Reason(C.X, (("b", 1), ("a", 2)))\nReason(C.Y, (("a", 1), ("b", 2)))') == [["b", "a"]]
    rels = (*SAY_NOTHING, "analysis/torch/kineto.py", "analysis/torch/nccl.py")
    found = {rel: bad for rel in rels if (bad := unsorted_figures((SRC / rel).read_text()))}
    assert found == {}
