"""What every result type shows in a notebook: a one-line ``repr``, ``_repr_html_``, ``to_dict()`` and
``to_frame()``.

Results are values: cost/, plan/ and analysis/ never render. A result class takes these methods from
``Displayed``, and each method imports ``rooftop.report.notebook`` only when it is called, which renders
the result with the payload functions of the command that prints it (``to_dict()`` is what ``--json``
writes). Importing this module imports nothing, so no module below report/ loads report/ at import time
and no import cycle can form. A dataclass that takes these methods says ``repr=False``, so that the
dataclass's own field-by-field repr does not replace the short one.
"""

from __future__ import annotations

from typing import Any


class Displayed:
    """The notebook methods of a result (see the module docstring)."""

    __slots__ = ()

    def __repr__(self) -> str:
        from rooftop.report.notebook import view

        return view(self).repr_text()

    def _repr_html_(self) -> str:
        from rooftop.report.notebook import view

        return view(self).html()

    def to_dict(self) -> dict[str, Any]:
        """The result as the command line's ``--json`` writes it: raw SI numbers, infinities as None."""
        from rooftop.report.notebook import view

        return view(self).to_dict()

    def to_frame(self) -> Any:
        """The result's rows (layouts, serving points, ops, instructions or terms) as a pandas DataFrame, one
        column per key of the JSON rows (nested keys dotted, lists left out). Needs pandas."""
        from rooftop.report.notebook import view

        return view(self).to_frame()
