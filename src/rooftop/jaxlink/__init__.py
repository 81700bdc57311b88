"""The JAX bridge (the ``jax`` extra).

    import rooftop.jaxlink
    report = rooftop.jaxlink.analyze(step, *args, chip="h100", steps=3)

``analyze`` (profile a jitted function and put every op on the roofline) lives in
``profiling.py``; ``calibrate.py`` measures a device's ceilings and ``workloads.py`` holds the
worked mock transformer. ``analyze`` is imported on first use (module ``__getattr__``), so
``import rooftop.jaxlink`` loads no JAX.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> (module, attribute in that module)
_EXPORTS: dict[str, tuple[str, str]] = {"analyze": ("rooftop.jaxlink.profiling", "analyze")}

if TYPE_CHECKING:
    from rooftop.jaxlink.profiling import analyze


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use and keep it in this namespace."""
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'rooftop.jaxlink' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = ["analyze"]
