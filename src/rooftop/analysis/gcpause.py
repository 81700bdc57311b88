"""Pausing the cyclic garbage collector around bulk loading (parsers, trace loaders), and giving the C heap's
free memory back to the system after it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: objects made while paused past which they are moved to the oldest generation unscanned: a young
#: collection of the million objects a Kineto trace of 1.2M events leaves took 0.5 s, and its cost is in what
#: they hold too (the 17,000 of a JAX trace, among them its columns of 1.2M values: 0.1 s; the 3,000 made by
#: the report of a trace of 1.2M kernels: 0.17 s)
_AGE_PAST = 1 << 10


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: loaders make millions of small acyclic objects, and
    collection passes over the growing heap would make loading large inputs superlinear
    (measured in benchmarks/bench_hlo_parse.py and bench_trace_load.py: about 2x).

    When the collector is turned back on after more than :data:`_AGE_PAST` objects were made, they are
    moved to the oldest generation as they are (``gc.freeze`` then ``gc.unfreeze``, both O(1)): the
    young collection that the next allocation would start, and then the middle one, would scan them all
    only to find them alive. Any cycle among them is found by the next full collection. Not done where
    objects were frozen by the program (``gc.unfreeze`` would release them too)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_count()[0] > _AGE_PAST and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def release_free_heap() -> None:
    """Give the C heap's free memory back to the system (glibc's ``malloc_trim``; nothing where the C library
    has none, as musl). A loader that frees many blocks while the heap above them stays in use (a trace read
    by several processes: thousands of chunks of rows, each freed as it is copied into the table's columns)
    leaves that memory free but resident: about 90 MiB of a 1.2M-event Kineto trace read by 8 processes, on
    which the report built after the load would be resident too."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass
