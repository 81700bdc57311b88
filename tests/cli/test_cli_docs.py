"""Every command and every option is documented in docs/cli.md."""

from pathlib import Path

from docs.gen_cli import subcommands
from rooftop.cli.main import build_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_every_command_and_option_documented() -> None:
    text = DOC.read_text()
    for name, sub in subcommands(build_parser()).items():
        assert f"## rooftop {name}" in text, f"rooftop {name} missing from docs/cli.md: run python docs/gen_cli.py"
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in text, f"{name} {flag} missing from docs/cli.md: run python docs/gen_cli.py"


def test_every_command_has_json() -> None:
    for name, sub in subcommands(build_parser()).items():
        flags = {f for a in sub._actions for f in a.option_strings}
        assert "--json" in flags, f"rooftop {name} has no --json"
