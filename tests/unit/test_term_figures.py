"""A Term's figures are typed, one NamedTuple per rule (cost/figures.py): a misspelled or missing figure fails
the type check, on the side that records it and on the side that reads it, before anything runs. The mypy
tests below run the type checker on small modules and assert which lines it refuses; the rest check the
figures at run time: the rule follows the type, a figure read by name names what the term has, Terms
pickle, and every formula a command prints is written from its figures."""

from __future__ import annotations

import json
import os
import pickle
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rooftop.cost.figures import RULES, FlopsFigures, HbmFigures, recorded
from rooftop.cost.op import explicit
from rooftop.cost.roofline import MissingFigureError, Term, figures_of, roofline
from rooftop.hardware.catalog import get_chip
from rooftop.report.formulas import term_formula
from tests.conftest import run_cli

H100 = get_chip("h100")
SRC = Path(__file__).resolve().parents[2] / "src" / "rooftop"

#: a producer and readers that type-check: narrowing by isinstance or by figures_of, optional figures read
#: as optional
GOOD = """
from rooftop.cost.figures import FlopsFigures, HbmFigures, RoutingFigures


def produce() -> FlopsFigures:
    return FlopsFigures(flops=2e12, chip="h100", unit="matrix", dtype="bf16", used_dtype="bf16",
                        peak_flops_per_s=9.9e14, efficiency=1.0)


def read(f: FlopsFigures | HbmFigures) -> float:
    if isinstance(f, FlopsFigures):
        reach = f.achievable_fraction if f.achievable_fraction is not None else 1.0
        return f.flops / (f.peak_flops_per_s * f.efficiency * reach)
    return f.bytes / f.hbm_bytes_per_s


def routed(f: HbmFigures) -> HbmFigures:
    return f._replace(routing=RoutingFigures(routed_tokens=8, experts_touched=7, expert_mean_rows=1.1,
                                             expert_busiest_rows=2))
"""

#: one mistake each, and the line mypy must refuse (the mistake is on the last line of each)
BAD = {
    "misspelled_on_the_producer": """
from rooftop.cost.figures import HbmFigures
f = HbmFigures(bytes=1e9, chip="h100", hbm_bytes_per_s=3.35e12, efficency=1.0)
""",
    "missing_on_the_producer": """
from rooftop.cost.figures import HbmFigures
f = HbmFigures(bytes=1e9, chip="h100", hbm_bytes_per_s=3.35e12)
""",
    "misspelled_on_the_reader": """
from rooftop.cost.figures import FlopsFigures
def peak(f: FlopsFigures) -> float:
    return f.peak_flops
""",
    "another_rule_s_figure_without_narrowing": """
from rooftop.cost.figures import FlopsFigures, HbmFigures
def peak(f: FlopsFigures | HbmFigures) -> float:
    return f.peak_flops_per_s
""",
    "an_optional_figure_read_as_recorded": """
from rooftop.cost.figures import FlopsFigures
def shape(f: FlopsFigures) -> float:
    return 1 / f.shape_efficiency
""",
    "misspelled_in_a_replace": """
from rooftop.cost.figures import FlopsFigures
def shaped(f: FlopsFigures) -> FlopsFigures:
    return f._replace(shape_eficiency=0.9)
""",
}

#: the same through a Term (cost/roofline.py): its figures are the union of every rule's until narrowed
TERM_GOOD = """
from rooftop.cost.figures import FlopsFigures
from rooftop.cost.roofline import Term, figures_of


def peak(t: Term) -> float:
    return figures_of(t, FlopsFigures).peak_flops_per_s


def used(t: Term) -> str:
    match t.figures:
        case FlopsFigures() as f:
            return f.used_dtype
        case _:
            return ""
"""
TERM_BAD = {
    "a_term_s_figure_without_narrowing": """
from rooftop.cost.roofline import Term
def peak(t: Term) -> float:
    return t.figures.peak_flops_per_s
""",
    "misspelled_through_figures_of": """
from rooftop.cost.figures import FlopsFigures
from rooftop.cost.roofline import Term, figures_of
def peak(t: Term) -> float:
    return figures_of(t, FlopsFigures).peak_flops
""",
}


def _mypy(tmp_path: Path, cases: dict[str, str], *modules: str) -> dict[str, list[str]]:
    """mypy --strict on each case (a module of its own) with ``modules`` of rooftop (their imports skipped,
    so a run takes ~1 s of CPU): the errors of each case, by name."""
    api = pytest.importorskip("mypy.api")
    paths = []
    for name, code in cases.items():
        (tmp_path / f"{name}.py").write_text(code)
        paths.append(str(tmp_path / f"{name}.py"))
    (tmp_path / "mypy.ini").write_text("[mypy]\n")  # not the project's: these files and flags only
    argv = [
        "--config-file",
        str(tmp_path / "mypy.ini"),
        "--strict",
        "--follow-imports",
        "skip",
        "--cache-dir",
        os.devnull,
    ]
    argv += ["--python-version", "3.11", "--no-error-summary", "--show-error-codes"]
    out, err, _ = api.run([*argv, *paths, *(str(SRC / m) for m in modules)])
    assert not err, err
    errors: dict[str, list[str]] = {name: [] for name in cases}
    for line in out.splitlines():
        m = re.match(r"(.*?)([^/\\]+)\.py:(\d+): error: (.*)", line)
        if m and m.group(2) in errors and m.group(1).rstrip("/\\") == str(tmp_path):
            errors[m.group(2)].append(f"{m.group(3)}: {m.group(4)}")
    return errors


def test_mypy_refuses_a_misspelled_or_missing_figure_on_either_side(tmp_path: Path) -> None:
    errors = _mypy(tmp_path, {"good": GOOD, **BAD}, "cost/figures.py")
    assert errors.pop("good") == []
    last = {name: str(len(code.strip("\n").splitlines()) + 1) for name, code in BAD.items()}  # + the leading \n
    for name, found in errors.items():
        assert found and {e.split(":")[0] for e in found} == {last[name]}, (name, found)
    assert any(
        '"efficency"' in e and '"efficiency"' in e for e in errors["misspelled_on_the_producer"]
    )  # mypy's "did you mean"
    assert any('Missing positional argument "efficiency"' in e for e in errors["missing_on_the_producer"])
    assert any('no attribute "peak_flops"' in e for e in errors["misspelled_on_the_reader"])
    assert any('"HbmFigures" of' in e for e in errors["another_rule_s_figure_without_narrowing"])
    assert any('("int" and "None")' in e for e in errors["an_optional_figure_read_as_recorded"])
    assert any('argument "shape_eficiency"' in e for e in errors["misspelled_in_a_replace"])


@pytest.mark.long  # the Term's module and its standard-library imports take ~4 s of CPU to check cold
def test_mypy_refuses_reading_a_term_s_figures_before_narrowing_them(tmp_path: Path) -> None:
    errors = _mypy(tmp_path, {"good": TERM_GOOD, **TERM_BAD}, "cost/figures.py", "cost/roofline.py")
    assert errors.pop("good") == []
    assert all(found for found in errors.values()), errors
    assert any('no attribute "peak_flops_per_s"' in e for e in errors["a_term_s_figure_without_narrowing"])
    assert any('no attribute "peak_flops"' in e for e in errors["misspelled_through_figures_of"])


def _compute_term() -> Term:
    est = roofline(explicit(2e12, 1e6), H100)  # compute-bound: 2e12 FLOP against 1 MB
    return next(t for t in est.terms if isinstance(t.figures, FlopsFigures))


def test_the_rule_is_the_figures_type_and_a_figure_read_by_name_names_what_the_term_has() -> None:
    term = _compute_term()
    assert term.rule == "flops" and RULES[FlopsFigures] == "flops"
    assert term.figure("flops") == 2e12 == figures_of(term, FlopsFigures).flops
    assert term.figure("shape_efficiency", None) is None  # not recorded: H100 bf16 without a matmul shape
    with pytest.raises(MissingFigureError, match=r"rule 'flops'.* no figure 'peak_flops'; it has: .*peak_flops_per_s"):
        term.figure("peak_flops")
    with pytest.raises(LookupError, match=r"rule 'flops'\) has no HbmFigures"):  # what a caller catching a key catches
        figures_of(term, HbmFigures)
    assert [k for k, _ in recorded(term.figures)] == [
        "flops", "chip", "unit", "dtype", "used_dtype", "peak_flops_per_s", "efficiency", "shape_applied",
    ]  # fmt: skip


def test_terms_pickle_with_their_figures() -> None:
    """Terms cross process boundaries (a profile's hosts are analysed in worker processes)."""
    est = roofline(explicit(2e12, 1e6), H100)
    back = pickle.loads(pickle.dumps(est))
    assert back == est and [type(t.figures) for t in back.terms] == [FlopsFigures, HbmFigures]
    assert [term_formula(t) for t in back.terms] == [term_formula(t) for t in est.terms]


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
