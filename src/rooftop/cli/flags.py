"""The command line's spelling of errors that name options as data (``rooftop.reasons.Phrased``): each
option as its flag (``report.reasons.flag``), the message on one line."""

from __future__ import annotations

from rooftop.errors import RooftopError, one_line, visible
from rooftop.reasons import Phrased
from rooftop.report.reasons import flag, sentence


def error_line(err: RooftopError) -> str:
    """The error as the CLI prints it: on one line, any option it names spelled as its flag."""
    if isinstance(err, Phrased):
        return one_line(visible(err.said(flag, sentence)))
    return err.one_line()
