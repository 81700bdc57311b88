"""A Term's figures are read by key: a key its rule records is required, so a renamed or misspelled one fails
loudly (naming the term, its rule and the figures it has) instead of printing None in the formula."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest

from rooftop.cost.op import explicit
from rooftop.cost.roofline import MissingFigureError, roofline
from rooftop.hardware.catalog import get_chip
from rooftop.report.formulas import term_formula
from tests.conftest import run_cli

H100 = get_chip("h100")


def _compute_term() -> Any:
    est = roofline(explicit(2e12, 1e6), H100)  # compute-bound: 2e12 FLOP against 1 MB
    return next(t for t in est.terms if t.rule == "flops")


def test_a_renamed_figure_fails_naming_it() -> None:
    term = _compute_term()
    renamed = tuple(("peak_flops", v) if k == "peak_flops_per_s" else (k, v) for k, v in term.figures)
    broken = dataclasses.replace(term, figures=renamed)
    with pytest.raises(MissingFigureError, match=r"rule 'flops'.* no figure 'peak_flops_per_s'; it has: .*peak_flops"):
        term_formula(broken)
    with pytest.raises(LookupError):  # what a caller catching a missing key catches
        broken.figure("peak_flops_per_s")


def test_optional_figures_fall_back_to_their_default() -> None:
    """An H100 bf16 term without a matmul shape: no shape figures, and its formula reads FLOPs / peak."""
    term = _compute_term()
    assert term.figure("shape_efficiency", None) is None
    assert term.figure("flops") == 2e12
    assert term_formula(term).startswith("2")  # 2e12 FLOP / (...), the peak from the chip file
    assert "None" not in term_formula(term)


def _formulas(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "formula" and isinstance(value, str):
                yield value
            else:
                yield from _formulas(value)
    elif isinstance(node, list):
        for value in node:
            yield from _formulas(value)


@pytest.mark.parametrize(
    ("argv", "rules"),
    [
        # pipeline parallel: the bubble, the hidden communication, compute and memory-bound ops, collectives
        (
            "train llama-3-8b --chip h100 --chips 16 --batch-tokens 512k --seq-len 4096 --fix tp=2,pp=2,mb=4",
            ["(p-1)/v x microbatch time", "hidden behind", "compute-bound ops", "memory-bound ops", "all-gather"],
        ),
        # serving: the groups' FLOPs and bytes, the collectives, the per-step and per-sequence host work
        (
            "serve llama-3-70b --chip h100 --chips 8 --prompt-len 1024 --gen-len 128",
            ["FLOP / (h100 matrix", "/ (h100 HBM", "all-reduce", "per step", "sequences x"],
        ),
    ],
    ids=["train", "serve"],
)
def test_every_formula_a_command_prints_has_its_figures(argv: str, rules: list[str]) -> None:
    code, out, err = run_cli(*argv.split(), "--json")
    assert code == 0, err
    formulas = list(_formulas(json.loads(out)))
    assert all(any(r in f for f in formulas) for r in rules), rules  # each rule's formula is there
    assert not [f for f in formulas if "None" in f]
