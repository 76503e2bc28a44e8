"""Integer interval arithmetic on inclusive bounds that may be infinite.

A bound is a Python int or ``-inf`` / ``inf`` (floats); an interval is a ``(lo, hi)`` tuple.
Every operation is *sound*: the result contains every value the operation can produce on
operands drawn from the argument intervals. Only the public API turns infinities into None.
"""

from __future__ import annotations

import math

INF = math.inf
FULL = (-INF, INF)
Interval = tuple  # (lo, hi)


def is_finite(iv: Interval) -> bool:
    return iv[0] != -INF and iv[1] != INF


def add(a: Interval, b: Interval) -> Interval:
    return a[0] + b[0], a[1] + b[1]


def scale(a: Interval, k: int) -> Interval:
    if k == 0:
        return 0, 0
    lo, hi = _mul(a[0], k), _mul(a[1], k)
    return (lo, hi) if k > 0 else (hi, lo)


def _mul(x, y):
    # 0 * inf is 0 here: an interval endpoint at infinity stands for "any large value"
    return 0 if x == 0 or y == 0 else x * y


def mul(a: Interval, b: Interval) -> Interval:
    c = (_mul(a[0], b[0]), _mul(a[0], b[1]), _mul(a[1], b[0]), _mul(a[1], b[1]))
    return min(c), max(c)


def _fdiv(x, c: int):
    """floor(x / c) for an extended int x and a finite nonzero int c."""
    if x in (INF, -INF):
        return x if c > 0 else -x
    return x // c


def _tdiv(x, c: int):
    if x in (INF, -INF):
        return x if c > 0 else -x
    q = abs(x) // abs(c)
    return q if (x < 0) == (c < 0) else -q


def floordiv(a: Interval, b: Interval) -> Interval:
    return _div(a, b, _fdiv)


def truncdiv(a: Interval, b: Interval) -> Interval:
    return _div(a, b, _tdiv)


def _div(a: Interval, b: Interval, f) -> Interval:
    blo, bhi = b
    if blo > 0 or bhi < 0:
        if is_finite(b):
            # x / y is monotone in each argument when y keeps its sign: corners suffice
            c = [f(x, y) for x in a for y in b]
            return min(c), max(c)
        if a[0] >= 0 and blo > 0:
            return 0, f(a[1], blo)
    return FULL


def floormod(a: Interval, b: Interval) -> Interval:
    blo, bhi = b
    if blo == bhi and blo != 0 and is_finite(b):
        c = blo
        if is_finite(a) and a[0] // c == a[1] // c:
            # the whole interval lies in one period: the modulo is a shift
            t = a[0] // c
            lo, hi = a[0] - c * t, a[1] - c * t
            return (lo, hi) if lo <= hi else (hi, lo)
        return (0, c - 1) if c > 0 else (c + 1, 0)
    if blo > 0:
        hi = bhi - 1
        if a[0] >= 0:
            hi = min(hi, a[1])
        return 0, hi
    if bhi < 0:
        return blo + 1, 0
    return FULL


def minimum(a: Interval, b: Interval) -> Interval:
    return min(a[0], b[0]), min(a[1], b[1])


def maximum(a: Interval, b: Interval) -> Interval:
    return max(a[0], b[0]), max(a[1], b[1])


def union(a: Interval, b: Interval) -> Interval:
    return min(a[0], b[0]), max(a[1], b[1])


def absolute(a: Interval) -> Interval:
    lo, hi = a
    if lo >= 0:
        return a
    if hi <= 0:
        return -hi, -lo
    return 0, max(-lo, hi)


def to_public(iv: Interval) -> tuple:
    """``(lo, hi)`` with infinities as None (the API's convention)."""
    lo, hi = iv
    return (None if lo == -INF else int(lo)), (None if hi == INF else int(hi))
