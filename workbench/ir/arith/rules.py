"""The integer rewrite rules, on affine forms: floordiv / floormod, products, min / max and
comparisons.

Each rule takes :class:`~.linear.Lin` operands (already in normal form) and returns a Lin (or a
boolean expression for comparisons). Facts come from the session's interval analysis
(``bound_lin`` / ``bound_atom``); new atoms are made through the session's hash-consing
(``_atom``), so a rule never builds two copies of one structure. Every rule is an identity on
ideal integers with floor semantics — the randomized tests check each on every point.
"""

from __future__ import annotations

from math import gcd
from typing import TYPE_CHECKING, Any, Callable

from ..expr import EQ, GE, GT, LE, LT, NE, Expr, FloorDiv, FloorMod, IntImm, Max, Min, Mul
from . import interval as iv
from . import linear as lin
from .linear import Lin

TRUE = IntImm(1, "bool")
FALSE = IntImm(0, "bool")


def _tq(k: int, c: int) -> int:
    """Quotient of k by c > 0 rounded toward zero: the remainder keeps k's sign."""
    return k // c if k >= 0 else -((-k) // c)


class IntRules:
    """Mixed into :class:`~.simplifier.Simplifier`, whose state and helpers it uses."""

    if TYPE_CHECKING:  # what the Simplifier provides (declared for the type checker only)
        _cons: dict[Any, Expr]

        def to_expr(self, x: Any) -> Expr: ...
        def as_lin(self, e: Expr) -> Lin: ...
        def bound_lin(self, l: Lin) -> iv.Interval: ...
        def symbolic_bound_lin(self, l: Lin) -> iv.Interval: ...
        def bound_atom(self, a: Expr) -> iv.Interval: ...
        def _atom(self, key: tuple, make: Callable[[], Expr]) -> Lin: ...
        def _int(self, value: int, dtype: str) -> IntImm: ...
        def _cons_node(self, key: tuple, make: Callable[[], Expr]) -> Expr: ...

    def floordiv(self, x: Lin, y: Lin) -> Lin:
        if not y.terms:
            c = y.const
            if c > 0:
                return x if c == 1 else self._fdiv_const(x, c)
            if c < 0:  # floor(x / -c) == floor(-x / c)
                return self.floordiv(lin.scale(x, -1), lin.constant(-c, x.dtype))
            return self._binary_atom(FloorDiv, x, y)  # division by zero: left for the runtime
        xb, yb = self.bound_lin(x), self.bound_lin(y)
        if yb[0] > 0 and xb[0] >= 0 and xb[1] < yb[0]:
            return lin.constant(0, x.dtype)
        return self._binary_atom(FloorDiv, x, y)

    def floormod(self, x: Lin, y: Lin) -> Lin:
        if not y.terms:
            c = y.const
            if c > 0:
                return lin.constant(0, x.dtype) if c == 1 else self._fmod_const(x, c)
            if c < 0:  # x mod -c == -((-x) mod c)
                return lin.scale(self.floormod(lin.scale(x, -1), lin.constant(-c, x.dtype)), -1)
            return self._binary_atom(FloorMod, x, y)
        xb, yb = self.bound_lin(x), self.bound_lin(y)
        if yb[0] > 0 and xb[0] >= 0 and xb[1] < yb[0]:
            return x
        return self._binary_atom(FloorMod, x, y)

    def _fdiv_const(self, x: Lin, c: int) -> Lin:
        dt = x.dtype
        if not x.terms:
            return lin.constant(x.const // c, dt)
        # x = c*q + rem with every coefficient of rem in (-c, c): floor(x/c) = q + floor(rem/c)
        q, r = {}, {}
        for a, k in x.terms.items():
            qa = _tq(k, c)
            if qa:
                q[a] = qa
            if k - qa * c:
                r[a] = k - qa * c
        qk = _tq(x.const, c)
        rk = x.const - qk * c
        if not r:
            return Lin(q, x.const // c, dt)
        rem = Lin(r, rk, dt)
        lo, hi = self.bound_lin(rem)
        if iv.is_finite((lo, hi)) and lo // c == hi // c:
            return Lin(q, qk + lo // c, dt)
        out = self._factor(rem, c, True)
        if out is None:
            out = self._nested_div(rem, c)
        if out is None:
            e = self.to_expr(rem)
            out = self._atom((FloorDiv, e, c), lambda: FloorDiv(e, self._int(c, dt)))
        return lin.add(Lin(q, qk, dt), out)

    def _fmod_const(self, x: Lin, c: int) -> Lin:
        dt = x.dtype
        r = {}
        for a, k in x.terms.items():
            k -= _tq(k, c) * c
            if k:
                r[a] = k
        rk = x.const - _tq(x.const, c) * c
        if not r:
            return lin.constant(rk % c, dt)
        rem = Lin(r, rk, dt)
        lo, hi = self.bound_lin(rem)
        if iv.is_finite((lo, hi)) and lo // c == hi // c:
            return lin.add(rem, lin.constant(-(lo // c) * c, dt))
        out = self._factor(rem, c, False)
        if out is not None:
            return out
        # floormod(floormod(y, c2), c) == floormod(y, c) when c divides c2
        a = rem.single_atom()
        if type(a) is FloorMod and type(a.b) is IntImm and a.b.value % c == 0:
            return self.floormod(self.as_lin(a.a), lin.constant(c, dt))
        e = self.to_expr(rem)
        return self._atom((FloorMod, e, c), lambda: FloorMod(e, self._int(c, dt)))

    def _factor(self, rem: Lin, c: int, div: bool):
        """Split ``rem = d*big + small`` with ``d | c`` and ``small`` inside one block of d
        (``t*d <= small < (t+1)*d``); then
        ``floor(rem/c) = floor((big + t) / (c/d))`` and
        ``rem mod c = d * ((big + t) mod (c/d)) + small - t*d``.
        ``big`` takes the terms of largest coefficient; the first split that works wins.
        This is what turns ``(i*4 + j) // 8`` into ``i // 2`` when ``0 <= j < 4``."""
        dt = rem.dtype
        items = sorted(rem.terms.items(), key=lambda t: -abs(t[1]))
        n = len(items)
        suffix = [(rem.const, rem.const)] * (n + 1)
        for m in range(n - 1, -1, -1):
            a, k = items[m]
            suffix[m] = iv.add(iv.scale(self.bound_atom(a), k), suffix[m + 1])
        prefix_gcd, g = [], c
        for _, k in items:
            g = gcd(g, abs(k))
            prefix_gcd.append(g)
        for m in range(n, 0, -1):
            d = prefix_gcd[m - 1]
            lo, hi = suffix[m]
            if d == 1 or not iv.is_finite((lo, hi)) or lo // d != hi // d:
                continue
            t = lo // d
            bigset = {a for a, _ in items[:m]}
            big = Lin({a: k // d for a, k in rem.terms.items() if a in bigset}, t, dt)
            if div:
                return self.floordiv(big, lin.constant(c // d, dt))
            small = Lin({a: k for a, k in rem.terms.items() if a not in bigset}, rem.const - t * d, dt)
            return lin.add(lin.scale(self.floormod(big, lin.constant(c // d, dt)), d), small)
        return None

    def _nested_div(self, rem: Lin, c: int):
        """floordiv(floordiv(y, c2) + k, c) == floordiv(y + k*c2, c2*c)."""
        if len(rem.terms) != 1:
            return None
        ((a, k),) = rem.terms.items()
        if k != 1 or type(a) is not FloorDiv or type(a.b) is not IntImm or a.b.value <= 0:
            return None
        c2 = a.b.value
        inner = lin.add(self.as_lin(a.a), lin.constant(rem.const * c2, rem.dtype))
        return self.floordiv(inner, lin.constant(c2 * c, rem.dtype))

    def _binary_atom(self, cls: type, x: Lin, y: Lin) -> Lin:
        ex, ey = self.to_expr(x), self.to_expr(y)
        key: tuple[type, Expr, Expr] = (cls, ex, ey)
        if cls in (Mul, Min, Max) and id(ey) < id(ex):
            key = (cls, ey, ex)  # commutative: one key for both operand orders
        return self._atom(key, lambda: cls(ex, ey))

    def merge_divmod(self, l: Lin) -> Lin:
        """``floordiv(x, c)*c*a + floormod(x, c)*a -> x*a`` (undoes a split of a fused index)."""
        terms = l.terms
        if len(terms) < 2 or not any(type(a) is FloorMod for a in terms):
            return l
        for m, cm in list(terms.items()):
            if type(m) is not FloorMod or m not in terms or type(m.b) is not IntImm:
                continue
            c = m.b.value
            d = self._cons.get((FloorDiv, m.a, c))
            if d is not None and terms.get(d) == cm * c:
                l = self._replace_pair(l, m, d, lin.scale(self.as_lin(m.a), cm))
                terms = l.terms
        return l

    @staticmethod
    def _replace_pair(l: Lin, m: Expr, d: Expr, x: Lin | None) -> Lin:
        """``l`` without the terms of ``m`` and ``d``, plus ``x`` where the first of them was
        (so the recombined index keeps its place in the printed sum)."""
        terms: dict = {}
        for a, c in l.terms.items():
            if a is m or a is d:
                if x is not None:
                    for t, k in x.terms.items():
                        terms[t] = terms.get(t, 0) + k
                    x_const, x = x.const, None
                continue
            terms[a] = terms.get(a, 0) + c
        return Lin({a: c for a, c in terms.items() if c}, l.const + x_const, l.dtype)

    def mul(self, a: Lin, b: Lin) -> Lin:
        if not b.terms:
            return lin.scale(a, b.const)
        if not a.terms:
            return lin.scale(b, a.const)
        # a non-linear product: an atom, with the constant factors pulled out (2i * 3j -> 6*(i*j))
        ka, kb = _content(a), _content(b)
        return lin.scale(self._binary_atom(Mul, _divide(a, ka), _divide(b, kb)), ka * kb)

    def minmax(self, cls: type, a: Lin, b: Lin) -> Lin:
        if not a.terms and not b.terms:
            return lin.constant((min if cls is Min else max)(a.const, b.const), a.dtype)
        lo, hi = self.bound_lin(lin.add(a, b, -1))
        if hi <= 0:
            return a if cls is Min else b
        if lo >= 0:
            return b if cls is Min else a
        ea, eb = self.to_expr(a), self.to_expr(b)
        other = Max if cls is Min else Min
        for p, q in ((ea, eb), (eb, ea)):
            if type(p) is cls and isinstance(p, (Min, Max)) and (p.a is q or p.b is q):
                return lin.atom(p, p.dtype)  # min(min(x, y), x) -> min(x, y)
            if type(p) is other and (p.a is q or p.b is q):
                return self.as_lin(q)  # min(max(x, y), x) -> x
        return self._binary_atom(cls, a, b)

    def compare(self, cls: type, a: Lin, b: Lin) -> Expr:
        """An integer comparison decided by bounds, else normalised: common terms cancelled,
        coefficients divided by their gcd, positive terms on the left (``i < 4``)."""
        if cls is GT:
            cls, a, b = LT, b, a
        elif cls is GE:
            cls, a, b = LE, b, a
        d = lin.add(a, b, -1)
        lo, hi = self.symbolic_bound_lin(d)
        if cls is LT:
            if hi < 0:
                return TRUE
            if lo >= 0:
                return FALSE
        elif cls is LE:
            if hi <= 0:
                return TRUE
            if lo > 0:
                return FALSE
        else:
            decided = None
            if lo == hi == 0:
                decided = True
            elif lo > 0 or hi < 0:
                decided = False
            if decided is not None:
                return TRUE if decided == (cls is EQ) else FALSE
        terms, k = d.terms, d.const
        g = 0
        for c in terms.values():
            g = gcd(g, c)
        if g > 1:
            if cls is LT:
                k = k // g  # g*D + k < 0  <=>  D + floor(k/g) < 0
            elif cls is LE:
                k = -((-k) // g)  # g*D + k <= 0 <=>  D + ceil(k/g) <= 0
            elif k % g:
                return FALSE if cls is EQ else TRUE
            else:
                k //= g
            terms = {t: c // g for t, c in terms.items()}
        if cls in (EQ, NE) and next(iter(terms.values())) < 0:
            terms, k = {t: -c for t, c in terms.items()}, -k
        dt = d.dtype
        left = Lin({t: c for t, c in terms.items() if c > 0}, max(k, 0), dt)
        right = Lin({t: -c for t, c in terms.items() if c < 0}, max(-k, 0), dt)
        el, er = self.to_expr(left), self.to_expr(right)
        return self._cons_node((cls, el, er), lambda: cls(el, er))


def _content(l: Lin) -> int:
    """The gcd of all coefficients and the constant, signed like the first term."""
    g = l.const
    for c in l.terms.values():
        g = gcd(g, c)
    return g if next(iter(l.terms.values())) > 0 else -g


def _divide(l: Lin, k: int) -> Lin:
    """``l / k`` for a k that divides every coefficient and the constant."""
    return l if k == 1 else Lin({a: c // k for a, c in l.terms.items()}, l.const // k, l.dtype)
