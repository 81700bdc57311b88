"""The command line's spelling of what library code names as data: an :class:`~rooftop.reasons.Option`
is a keyword of the Python API, and the flag of the same name (argparse's rule: ``batch_tokens`` is
``--batch-tokens``) is how the CLI says it."""

from __future__ import annotations

from rooftop.errors import RooftopError, one_line, visible
from rooftop.reasons import Option, Phrased


def flag(option: Option) -> str:
    """``Option("batch_tokens")`` -> ``"--batch-tokens"``."""
    return "--" + option.name.replace("_", "-")


def error_line(err: RooftopError) -> str:
    """The error as the CLI prints it: on one line, any option it names spelled as its flag."""
    if isinstance(err, Phrased):
        return one_line(visible(err.said(flag)))
    return err.one_line()
