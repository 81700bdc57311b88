"""Exact sums of seconds, so that figures summed over many hosts apart and then together are the same to
the last bit as when summed over all the events at once.

``math.fsum`` rounds the exact sum of its values once, whatever their order. A host's values are kept as
their *partials*: a few floats, non-overlapping, whose exact sum is the exact sum of the values (the
expansion arithmetic of Shewchuk, "Adaptive Precision Floating-Point Arithmetic and Fast Robust Geometric
Predicates", Discrete Comput. Geom. 18, 1997: each addition splits into the rounded sum and its exact
error). ``math.fsum`` of every host's partials is then ``math.fsum`` of all the values."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

_HALF = 26  # a 53-bit significand as two halves, so that a million of each sum exactly in an int64


def partials(values: Iterable[float], into: list[float] | None = None) -> list[float]:
    """The non-overlapping partials of ``values`` (added to ``into``'s, when given): ``math.fsum`` of them
    equals ``math.fsum`` of the values. Finite values only (an infinity or NaN is kept as it is)."""
    out = into if into is not None else []
    for x in values:
        x = float(x)
        if not math.isfinite(x):
            out.append(x)
            continue
        kept = 0
        for y in out:
            if not math.isfinite(y):
                out[kept] = y
                kept += 1
                continue
            if abs(x) < abs(y):
                x, y = y, x
            high = x + y
            low = y - (high - x)  # the error of the rounded addition, exact (|x| >= |y|)
            if low:
                out[kept] = low
                kept += 1
            x = high
        del out[kept:]
        out.append(x)
    return out


def total(parts: Iterable[float]) -> float:
    """The correctly rounded sum of partials (of one host, or of many put together)."""
    return math.fsum(parts)


def array_partials(values: np.ndarray, into: list[float] | None = None) -> list[float]:
    """:func:`partials` of a float64 array, column-wise: each value is ``(high * 2**26 + low) * 2**(e - 53)``
    (its significand's halves as integers, ``np.frexp``); the halves of the values of one exponent are
    summed exactly as int64 and each sum is a float exactly (under 2**53 for fewer than 2**26 values)."""
    a = np.asarray(values, np.float64).ravel()
    if not len(a):
        return into if into is not None else []
    if len(a) >= 1 << _HALF or not np.all(np.isfinite(a)):
        return partials(a.tolist(), into)
    mantissa, exponent = np.frexp(a)
    if int(exponent.min()) < -900:  # near the subnormals: a half's sum scaled down could round
        return partials(a.tolist(), into)
    whole = np.ldexp(mantissa, 53).astype(np.int64)
    high, low = whole >> _HALF, whole & ((1 << _HALF) - 1)
    exps, where = np.unique(exponent, return_inverse=True)
    high_sums = np.zeros(len(exps), np.int64)
    low_sums = np.zeros(len(exps), np.int64)
    np.add.at(high_sums, where, high)
    np.add.at(low_sums, where, low)
    terms = [math.ldexp(float(h), int(e) - 53 + _HALF) for h, e in zip(high_sums.tolist(), exps.tolist(), strict=True)]
    terms += [math.ldexp(float(lo), int(e) - 53) for lo, e in zip(low_sums.tolist(), exps.tolist(), strict=True)]
    return partials(terms, into)
