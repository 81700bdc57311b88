"""What every result type shows in a notebook: a one-line ``repr``, ``_repr_html_``, ``to_dict()`` and
``to_frame()``.

Results are values: cost/, plan/ and analysis/ never render. A result class takes these methods from
``Displayed``; each looks up the view of the result's type (or its nearest base) in a registry that the
report layer fills: ``report/notebook.py`` calls ``register_view(Estimate, estimate_view)`` and so on, with
the payload function of the command that prints the result (``to_dict()`` is what ``--json`` writes). This
module imports only errors.py: it sits on the ground floor, and nothing below report/ reaches up into report/.
When a result is shown before report/ was loaded, the package root (``rooftop/__init__.py``, which names every
public module by string already) loads the module that registers the views. A dataclass that takes these
methods says ``repr=False``, so that the dataclass's own field-by-field repr does not replace the short one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from rooftop.errors import InvalidConfigError


class View(Protocol):
    """What a registered view gives for one result (report/notebook.py's ``View`` is one)."""

    def repr_text(self) -> str: ...

    def html(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...

    def to_frame(self) -> Any: ...


R = TypeVar("R")

#: result type -> the function that builds its view (registered by the report layer)
_VIEWS: dict[type, Callable[[Any], View]] = {}


def register_view(cls: type[R], build: Callable[[R], View]) -> None:
    """Show results of type ``cls`` (and of its subclasses that have no view of their own) through ``build``."""
    _VIEWS[cls] = build


def _registered(result: object) -> Callable[[Any], View] | None:
    for cls in type(result).__mro__:
        build = _VIEWS.get(cls)
        if build is not None:
            return build
    return None


def view(result: object) -> View:
    """The View of a result: its type's, or the nearest base class's that has one."""
    build = _registered(result)
    if build is None:
        import rooftop  # the package root knows the module that registers the views

        rooftop._load_views()
        build = _registered(result)
    if build is None:
        raise InvalidConfigError(f"no notebook view for a {type(result).__name__}")
    return build(result)


class Displayed:
    """The notebook methods of a result (see the module docstring)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return view(self).repr_text()

    def _repr_html_(self) -> str:
        return view(self).html()

    def to_dict(self) -> dict[str, Any]:
        """The result as the command line's ``--json`` writes it: raw SI numbers, infinities as None."""
        return view(self).to_dict()

    def to_frame(self) -> Any:
        """The result's rows (layouts, serving points, ops, instructions or terms) as a pandas DataFrame, one
        column per key of the JSON rows (nested keys dotted, lists left out). Needs pandas."""
        return view(self).to_frame()
