"""Library code (every module outside cli/ and report/: plan/, analysis/, cost/, model/, hardware/,
sharding/ and the top-level modules) returns reasons as data and never names a command-line flag: only cli/
and report/ write ``--chip``. A flag of the rooftop CLI inside a string literal (docstrings aside) below
them fails this test, except in the files of ALLOWED, which may only shrink: a file whose count drops
must have its entry lowered (or removed) so the flag that left cannot come back unnoticed."""

from __future__ import annotations

import argparse
import ast
import pickle
import re
from pathlib import Path

from rooftop.cli.main import build_parser
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Option, OptionError, Reason
from rooftop.report.reasons import _SENTENCES, flag, sentence

SRC = Path(__file__).resolve().parents[2] / "src" / "rooftop"
ABOVE_LIBRARY = ("cli", "report")  # the layers that write the command line's words

#: file -> flags its string literals still name (being converted; the count may only go down)
ALLOWED: dict[str, int] = {}

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _cli_flags(parser: argparse.ArgumentParser) -> set[str]:
    out: set[str] = set()
    for action in parser._actions:
        out.update(s for s in action.option_strings if s.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= _cli_flags(sub)
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def flags_named(source: str, flags: set[str]) -> list[str]:
    """The CLI flags named by the string literals of ``source`` (f-string parts included), docstrings aside."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return [
        m
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        for m in FLAG.findall(node.value)
        if m in flags
    ]


def test_no_cli_flag_is_named_below_the_cli() -> None:
    flags = _cli_flags(build_parser())
    assert {"--chip", "--fix", "--hlo", "--topology", "--cluster"} <= flags  # the scan knows the CLI's flags
    found = {}
    for path in sorted(SRC.glob("**/*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.split("/")[0] not in ABOVE_LIBRARY and (named := flags_named(path.read_text(), flags)):
            found[rel] = len(named)
    assert found == ALLOWED, "a flag below the CLI: name an Option or return a Reason (rooftop.reasons)"


def test_the_scan_finds_a_flag_and_skips_docstrings_and_other_programs_flags() -> None:
    flags = {"--hlo", "--chip"}
    code = '"""give --hlo"""\nx = f"give --hlo {y}"\nz = "XLA_FLAGS=--xla_gpu_x=1 --chips-list --chip"\n'
    assert sorted(flags_named(code, flags)) == ["--chip", "--hlo"]


def test_an_option_is_spelled_as_its_flag_and_a_reason_as_its_sentence() -> None:
    err = OptionError("a batch needs both ", Option("batch_tokens"), " and ", Option("seq_len"))
    assert str(err) == "a batch needs both batch_tokens and seq_len"  # the library's words: its parameters
    assert err.said(flag) == "a batch needs both --batch-tokens and --seq-len"
    why = Reason.of(ReasonCode.HLO_MISSING, module="jit_f")
    assert why.figure("module") == "jit_f"
    assert sentence(why) == "no HLO for module 'jit_f' in the profile (give --hlo to price its ops)"
    assert set(_SENTENCES) == set(ReasonCode)  # every code has its words
    again = pickle.loads(pickle.dumps(err))  # raised in a worker process: the options survive
    assert type(again) is OptionError and again.said(flag) == err.said(flag)


def test_errors_of_the_lower_layers_spell_their_options_as_flags_only_on_the_command_line() -> None:
    """cost/, hardware/, model/ and sharding/ errors name their options as data: the library says the
    parameter, the CLI's error line the flag (an error wrapped with the nearest slices keeps its options)."""
    import pytest

    from rooftop.cli.flags import error_line
    from rooftop.hardware.catalog import get_chip
    from rooftop.hardware.slices import slice_for_chips
    from rooftop.model.catalog import config_from_dims

    with pytest.raises(OptionError) as pod:
        slice_for_chips(get_chip("tpu-v5p"), 100_000)  # over one pod: several slices need a topology
    assert "--" not in str(pod.value) and "give topology, e.g. 2*16x20x28" in str(pod.value)
    line = error_line(pod.value)
    assert "give --topology, e.g. 2*16x20x28" in line and line.endswith("(give one with --topology)")
    with pytest.raises(OptionError) as dims:
        config_from_dims({"D": 8})
    assert error_line(dims.value).startswith("--dims gives no F, L, N, V") and str(dims.value).startswith("dims ")
