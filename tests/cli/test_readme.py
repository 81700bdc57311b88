"""The README works: every command and snippet of it runs, and the figures its comments quote are the output's.

The fenced blocks run in order in one empty folder: ``python`` blocks are executed in this process (8 CPU
devices, as tests/conftest.py sets XLA_FLAGS) in one namespace, and they write the files the commands after
them read (``step.hlo.txt``, ``logdir``); each ``rooftop`` command of a ``bash`` block goes through the
in-process CLI. A comment after a command, on its line or on the lines below it, may quote figures
("17.5 us", "46.5%", "$35,481,075"): each must appear in that command's output. The set-up commands
(pip, pytest) are the only others a block may hold; they are not run.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import measured_calibration, run_cli, worked_example

README = Path(__file__).resolve().parents[2] / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: commands a block may hold besides rooftop's: installing and testing (not run here)
SET_UP = (("python3", "-m", "pip", "install"), ("python3", "-m", "pytest"))
#: a figure a comment quotes: a number with a unit of time, bytes, FLOPs or rates, a percentage, dollars
FIGURE = re.compile(
    r"\$[0-9][0-9,]*(?:\.[0-9]+)?"
    r"|(?<![\w.])[0-9][0-9,]*(?:\.[0-9]+)?(?:%| (?:ns|us|ms|s|min|h|d|B|KiB|MiB|GiB|TiB|[kMGTPE]?FLOP|[kMGTPE]?B/s)\b)"
)


@dataclass
class Command:
    argv: list[str]
    comment: str  # the comment after it, on its line and the lines below


def blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced block of the README, in order."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(README.read_text())]


def _split_comment(line: str) -> tuple[str, str]:
    """(code, comment) of a shell line: the comment starts at a # outside quotes after a blank."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i + 1 :]
    return line, ""


def shell_commands(text: str) -> list[Command]:
    """The commands of a bash block, continuation lines joined and ``a && b`` split."""
    commands: list[Command] = []
    for line in text.replace("\\\n", " ").splitlines():
        code, comment = _split_comment(line)
        if not code.strip():
            if commands and comment:
                commands[-1].comment += " " + comment
            continue
        tokens = shlex.split(code)
        groups = [[]]  # type: list[list[str]]
        for token in tokens:
            groups.append([]) if token == "&&" else groups[-1].append(token)
        commands += [Command(g, "") for g in groups if g]
        commands[-1].comment = comment
    return commands


def is_set_up(argv: list[str]) -> bool:
    return any(tuple(argv[: len(s)]) == s for s in SET_UP)


def flat(text: str) -> str:
    return " ".join(text.split())


def test_readme_has_commands_and_snippets() -> None:
    kinds = [lang for lang, _ in blocks()]
    assert kinds.count("bash") >= 3 and kinds.count("python") >= 2, kinds
    commands = [c for lang, text in blocks() if lang == "bash" for c in shell_commands(text)]
    unknown = [c.argv for c in commands if c.argv[0] != "rooftop" and not is_set_up(c.argv)]
    assert not unknown, f"README commands the test cannot run: {unknown}"
    names = {c.argv[1] for c in commands if c.argv[0] == "rooftop"}
    assert {"train", "serve", "hlo", "profile", "calibrate", "roofline"} <= names


def test_shell_parsing() -> None:
    text = (
        'rooftop a "x # y" --b \\\n    c   # 17.5 us, bandwidth-bound\n#   46.5% more\n'
        "python3 -m pip install -e . && rooftop d\n"
    )
    commands = shell_commands(text)
    assert [c.argv for c in commands] == [
        ["rooftop", "a", "x # y", "--b", "c"],
        ["python3", "-m", "pip", "install", "-e", "."],
        ["rooftop", "d"],
    ]
    assert FIGURE.findall(commands[0].comment) == ["17.5 us", "46.5%"]
    quoted = "dp=560 tp=8, 15T tokens in 39.3 d for $35,481,075; 2048 > 240.5"
    assert FIGURE.findall(quoted) == ["39.3 d", "$35,481,075"]


@pytest.mark.jax
@pytest.mark.slow
def test_every_readme_command_and_snippet_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calibration: tuple[Path, str]
) -> None:
    jax = pytest.importorskip("jax")
    if len(jax.devices()) < 8:
        pytest.skip("the README's examples run on 8 devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    monkeypatch.chdir(tmp_path)
    # the snippets make the worked example twice (to write its HLO and profile, then for jaxlink.analyze):
    # they get the session's one (tests/conftest.py), compiled once for every test that profiles it
    import rooftop.workloads

    monkeypatch.setattr(rooftop.workloads, "mock_transformer", worked_example)
    # `rooftop calibrate --quick --out mychip.toml` writes (and prints) the session's quick measurement
    # (tests/conftest.py; its measuring is tests/cli/test_calibrate_cli.py's): a second one would measure
    # the same device for about 1.3 CPU-s more
    import rooftop.jaxlink.calibrate

    def session_calibration(quick: bool = False, repeats: int = 5, progress: object = None) -> object:
        assert quick and rooftop.jaxlink.calibrate.check_repeats(repeats) == 5
        return measured_calibration()

    monkeypatch.setattr(rooftop.jaxlink.calibrate, "calibrate", session_calibration)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    outputs: dict[tuple[str, ...], str] = {}
    for n, (lang, text) in enumerate(blocks(), 1):
        if lang == "python":
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(text, f"README.md block {n}", "exec"), namespace)
            continue
        for command in shell_commands(text) if lang == "bash" else ():
            if is_set_up(command.argv):
                continue
            key = tuple(command.argv)
            if key not in outputs:
                code, out, err = run_cli(*command.argv[1:])
                assert code == 0, f"README block {n}: {shlex.join(command.argv)} exited {code}: {err}"
                outputs[key] = flat(out)
            for figure in FIGURE.findall(command.comment):
                assert figure in outputs[key], f"README block {n}: {shlex.join(command.argv)} no longer says {figure}"
    assert (tmp_path / "roof.png").stat().st_size > 0 and (tmp_path / "mychip.toml").is_file()
    report = namespace["report"]
    assert report.ops and all(op.measured_s > 0 for op in report.ops)  # type: ignore[attr-defined]
