"""Pausing the cyclic garbage collector around bulk loading (parsers, trace loaders)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: loaders make millions of small acyclic objects, and
    collection passes over the growing heap would make loading large inputs superlinear
    (measured in benchmarks/bench_hlo_parse.py and bench_trace_load.py: about 2x)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
