"""The affine normal form of integer expressions: ``sum(coeff * atom) + const``.

An *atom* is a canonical expression that is not a sum (a variable, a floordiv, a min, a load…).
Atoms are hash-consed by the simplifier, so one structure is one object and the terms can be a
dict keyed by atom identity. The dict's insertion order is the order in which terms first
appeared, which is also the printing order: the form is deterministic and does not depend on
variable names.
"""

from __future__ import annotations


class Lin:
    """``sum(terms[a] * a) + const`` over atoms ``a``; no zero coefficient is stored."""

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, terms: dict, const: int, dtype: str):
        self.terms = terms
        self.const = const
        self.dtype = dtype

    def single_atom(self):
        """The atom if this is exactly ``1 * atom + 0``, else None."""
        if self.const == 0 and len(self.terms) == 1:
            ((a, c),) = self.terms.items()
            if c == 1:
                return a
        return None

    def __repr__(self) -> str:  # debugging aid only
        parts = [f"{c}*{a!r}" for a, c in self.terms.items()]
        return "Lin(" + " + ".join(parts + [str(self.const)]) + ")"


def constant(value: int, dtype: str) -> Lin:
    return Lin({}, value, dtype)


def atom(a, dtype: str) -> Lin:
    return Lin({a: 1}, 0, dtype)


def add(a: Lin, b: Lin, sign: int = 1) -> Lin:
    """``a + sign * b``."""
    if not b.terms:
        return Lin(a.terms, a.const + sign * b.const, a.dtype) if b.const else a
    if not a.terms and not a.const and sign == 1:
        return b
    terms = dict(a.terms)
    for t, c in b.terms.items():
        v = terms.get(t, 0) + sign * c
        if v:
            terms[t] = v
        else:
            del terms[t]
    return Lin(terms, a.const + sign * b.const, a.dtype)


def scale(a: Lin, k: int) -> Lin:
    if k == 1:
        return a
    if k == 0:
        return Lin({}, 0, a.dtype)
    return Lin({t: c * k for t, c in a.terms.items()}, a.const * k, a.dtype)
