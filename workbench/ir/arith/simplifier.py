"""The simplifier: one bottom-up pass that puts integer expressions in affine normal form.

A :class:`Simplifier` is a session over fixed variable ranges (made per call by the
:class:`~workbench.ir.arith.Analyzer`). It visits each node once (memoized by identity) and
returns, for a signed-integer expression, a :class:`~.linear.Lin` over canonical atoms, and for
any other expression a simplified ``Expr``. Rewrites that need facts (``floordiv(io*8 + ii, 8)
-> io``) ask the interval analysis of the same session, which is exact on affine forms over
independent variables. No rule rewrites repeatedly: the cost is linear in the expression size,
times the (small) number of terms in a sum.

Only signed integers are reassociated. Floats keep their evaluation order (constant folding and
``x + 0``, ``x * 1``, ``x / 1`` only); unsigned integers wrap, so they get folding and trivial
identities only.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Callable, Mapping, Optional, Union, cast

from ..expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    Div,
    Expr,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Select,
    Sub,
    Var,
    const,
    is_float,
)
from ..dtype import SIGNED_INT_DTYPES
from ..stmt import Range
from . import interval as iv
from . import linear as lin
from .evaluate import fold_binary, fold_call, fold_cast, int_range, trunc_div, wrap_int
from .linear import Lin
from .rules import FALSE, TRUE, IntRules

SIGNED = SIGNED_INT_DTYPES
#: index-like dtypes whose unknown values are treated as unbounded (we reason on ideal ints)
_UNBOUNDED_DTYPES = frozenset(("int32", "int64"))

_CONSTS = (IntImm, FloatImm)
_Const = Union[IntImm, FloatImm]  # what a `type(x) in _CONSTS` test admits (cast to it: no runtime check)
_FLIP = {LT: LE, LE: LT, EQ: NE, NE: EQ}


def dtype_interval(dtype: str) -> iv.Interval:
    """What a value of ``dtype`` about which nothing is known may be."""
    if dtype in _UNBOUNDED_DTYPES or is_float(dtype):
        return iv.FULL
    return int_range(dtype)


class Simplifier(IntRules):
    """One simplification session over fixed variable ranges (``Var -> Range``)."""

    def __init__(self, ranges: Mapping[Var, Range]):
        self.ranges = ranges
        self._memo: dict[int, tuple] = {}  # id(node) -> (node, result); node kept alive
        self._cons: dict[Any, Expr] = {}  # structural key -> the one canonical node
        self._lin_of: dict[Expr, Lin] = {}  # canonical sum expression -> its Lin
        self._abound: dict[Expr, iv.Interval] = {}
        self._vbusy: set[Var] = set()

    # ---------------------------------------------------------------------------------------
    # entry points

    def simplify(self, e: Expr) -> Expr:
        """The simplified expression; ``e`` itself when that is already its normal form, so
        rewrites of a whole function keep sharing the subtrees that did not change."""
        r = self.to_expr(self.visit(e))
        return e if r is not e and same_tree(r, e) else r

    def lin(self, e: Expr) -> Lin:
        """The affine form of a signed-integer expression."""
        r = self.visit(e)
        if type(r) is not Lin:
            raise TypeError(f"expected a signed integer expression, got dtype {e.dtype}")
        return r

    def visit(self, e: Expr):
        hit = self._memo.get(id(e))
        if hit is not None:
            return hit[1]
        fn = _DISPATCH.get(type(e))
        r = fn(self, e) if fn is not None else self._v_opaque(e)
        self._memo[id(e)] = (e, r)
        return r

    def to_expr(self, x) -> Expr:
        return self._lin_expr(x) if type(x) is Lin else x

    def as_lin(self, e: Expr) -> Lin:
        """The Lin of a canonical expression produced by this session."""
        if type(e) is IntImm:
            return lin.constant(e.value, e.dtype)
        found = self._lin_of.get(e)
        return found if found is not None else lin.atom(e, e.dtype)

    # ---------------------------------------------------------------------------------------
    # canonical expressions

    def _int(self, value: int, dtype: str) -> IntImm:
        key = ("int", value, dtype)
        e = self._cons.get(key)
        if e is None:
            e = self._cons[key] = IntImm(wrap_int(value, dtype), dtype)
        return e  # type: ignore[return-value]  # the "int" keys hold IntImm only

    def _atom(self, key: tuple, make: Callable[[], Expr]) -> Lin:
        a = self._cons.get(key)
        if a is None:
            a = self._cons[key] = make()
        return Lin({a: 1}, 0, a.dtype)

    def _cons_node(self, key: tuple, make: Callable[[], Expr]) -> Expr:
        e = self._cons.get(key)
        if e is None:
            e = self._cons[key] = make()
        return e

    def _lin_expr(self, l: Lin) -> Expr:
        terms = l.terms
        if not terms:
            return self._int(l.const, l.dtype)
        a = l.single_atom()
        if a is not None:
            return a
        key = ("lin", frozenset(terms.items()), l.const, l.dtype)
        e = self._cons.get(key)
        if e is None:
            e = self._cons[key] = self._build_sum(l)
            self._lin_of[e] = l
        return e

    def _build_sum(self, l: Lin) -> Expr:
        """Positive terms first (in order of appearance), then the negative ones, then the
        constant: ``i*8 + j*2 - k + 3``; ``16 - i`` or ``-1 - i`` when no term is positive."""
        dt = l.dtype

        def term(a: Expr, c: int) -> Expr:
            return a if c == 1 else Mul(a, self._int(c, dt))

        acc: Optional[Expr] = None
        k = l.const
        for a, c in l.terms.items():
            if c > 0:
                acc = term(a, c) if acc is None else Add(acc, term(a, c))
        if acc is None and k:
            acc, k = self._int(k, dt), 0
        for a, c in l.terms.items():
            if c < 0:
                acc = Sub(self._int(0, dt) if acc is None else acc, term(a, -c))
        # l has a term (_lin_expr handles the constant-only Lin), so acc is set by now
        if k > 0:
            acc = Add(cast(Expr, acc), self._int(k, dt))
        elif k < 0:
            acc = Sub(cast(Expr, acc), self._int(-k, dt))
        return cast(Expr, acc)

    def same(self, x, y) -> bool:
        """Are two visit results provably the same expression (structurally)?"""
        if type(x) is Lin and type(y) is Lin:
            return x.const == y.const and x.terms == y.terms
        if x is y:
            return True
        return type(x) in _CONSTS and type(y) is type(x) and x.value == y.value and x.dtype == y.dtype

    # ---------------------------------------------------------------------------------------
    # bounds

    def bound_lin(self, l: Lin) -> iv.Interval:
        l = self._expose_floordiv(l)
        lo = hi = l.const
        for a, c in l.terms.items():
            alo, ahi = self.bound_atom(a)
            if c > 0:
                lo += c * alo
                hi += c * ahi
            else:
                lo += c * ahi
                hi += c * alo
        return lo, hi

    def symbolic_bound_lin(self, l: Lin) -> iv.Interval:
        """:meth:`bound_lin`, tightened where a loop variable's range is symbolic: ``i`` of
        ``[0, n)`` is replaced by ``n - 1`` for the upper side (by ``0`` for the lower), so
        that ``i + 1 - n`` is at most 0 and ``i < n`` under ``for i in range(n)`` holds,
        which numeric bounds alone (``n`` unbounded) cannot see."""
        lo, hi = self.bound_lin(l)
        if lo != -iv.INF and hi != iv.INF:
            return lo, hi
        if not any(type(a) is Var and self._symbolic_range(a) is not None for a in l.terms):
            return lo, hi
        return max(lo, -self._symbolic_max(lin.scale(l, -1))), min(hi, self._symbolic_max(l))

    def _symbolic_range(self, v: Var) -> Optional[Range]:
        rng = self.ranges.get(v)
        if rng is None or (type(rng.min) is IntImm and type(rng.extent) is IntImm):
            return None
        return rng

    def _symbolic_max(self, l: Lin, depth: int = 0) -> float:
        """An upper bound of ``l``: each variable of a symbolic range replaced by its largest
        value (its smallest where its coefficient is negative), then bounded numerically."""
        if depth > 4:
            return self.bound_lin(l)[1]
        out = l
        changed = False
        for a, c in l.terms.items():
            rng = self._symbolic_range(a) if type(a) is Var else None
            if rng is None or a in self._vbusy:
                continue
            mn = self.lin(rng.min)
            end = mn if c < 0 else lin.add(mn, lin.add(self.lin(rng.extent), lin.constant(1, mn.dtype), -1))
            if a in end.terms:
                continue
            out = lin.add(lin.add(out, lin.scale(lin.atom(a, l.dtype), c), -1), lin.scale(end, c))
            changed = True
        if not changed:
            return self.bound_lin(l)[1]
        return min(self.bound_lin(l)[1], self._symbolic_max(out, depth + 1))

    def _expose_floordiv(self, l: Lin, depth: int = 0) -> Lin:
        """``k * c * (x // c)`` as ``k * (x - x % c)`` where ``x`` shares an atom with the rest, so
        that it cancels: ``(n + 7) // 8 * 8 - n`` is ``7 - (n + 7) % 8``, in [0, 7] (a split of a
        symbolic extent covers it), which bounding the atoms apart cannot see."""
        if depth > 4:
            return l
        for a, k in l.terms.items():
            if type(a) is not FloorDiv or type(a.b) is not IntImm:
                continue
            c = a.b.value
            if c <= 0 or k % c:
                continue
            x = self.lin(a.a)
            if not set(x.terms) & (set(l.terms) - {a}):
                continue
            rest = Lin({t: v for t, v in l.terms.items() if t is not a}, l.const, l.dtype)
            out = lin.add(rest, lin.scale(x, k // c))
            out = lin.add(out, lin.scale(self.lin(FloorMod(a.a, a.b)), k // c), -1)
            return self._expose_floordiv(out, depth + 1)
        return l

    def bound(self, x) -> iv.Interval:
        """Bounds of a visit result (a Lin or an Expr)."""
        if type(x) is Lin:
            return self.bound_lin(x)
        return self.bound_expr(x)

    def bound_expr(self, e: Expr) -> iv.Interval:
        t = type(e)
        if t is IntImm:
            value = cast(IntImm, e).value
            return value, value
        if t is FloatImm:
            return iv.FULL
        found = self._lin_of.get(e)
        if found is not None:
            return self.bound_lin(found)
        if e.dtype == "bool":
            return 0, 1
        if e.dtype in SIGNED:
            return self.bound_atom(e)
        return dtype_interval(e.dtype)

    def bound_atom(self, a: Expr) -> iv.Interval:
        r = self._abound.get(a)
        if r is None:
            r = self._abound[a] = self._atom_bound(a)
        return r

    def _atom_bound(self, a: Expr) -> iv.Interval:
        t = type(a)
        if type(a) is Var:
            return self.var_bound(a)
        if t in _IV_BINARY and isinstance(a, BinaryOp):
            return _IV_BINARY[t](self.bound_expr(a.a), self.bound_expr(a.b))
        if type(a) is Select:
            return iv.union(self.bound_expr(a.true_value), self.bound_expr(a.false_value))
        if type(a) is Cast:
            src = self.bound_expr(a.value) if not is_float(a.value.dtype) else iv.FULL
            lo, hi = int_range(a.dtype)
            return src if lo <= src[0] and src[1] <= hi else (lo, hi)
        if type(a) is Call and a.op == "abs":
            return iv.absolute(self.bound_expr(a.args[0]))
        return dtype_interval(a.dtype)

    def var_bound(self, v: Var) -> iv.Interval:
        rng = self.ranges.get(v)
        if rng is None or v in self._vbusy:
            return dtype_interval(v.dtype)
        self._vbusy.add(v)  # a range mentioning its own variable must not recurse forever
        try:
            mn = self.lin(rng.min)
            last = lin.add(mn, lin.add(self.lin(rng.extent), lin.constant(1, mn.dtype), -1))
            return self.bound_lin(mn)[0], self.bound_lin(last)[1]
        finally:
            self._vbusy.discard(v)

    # ---------------------------------------------------------------------------------------
    # visitors

    def _v_var(self, e: Var):
        return lin.atom(e, e.dtype) if e.dtype in SIGNED else e

    def _v_int(self, e: IntImm):
        return lin.constant(e.value, e.dtype) if e.dtype in SIGNED else e

    def _v_leaf(self, e: Expr):
        return e

    def _v_add(self, e):
        if e.dtype in SIGNED:
            return self.merge_divmod(lin.add(self.visit(e.a), self.visit(e.b)))
        return self._generic_binary(e)

    def _v_sub(self, e):
        if e.dtype in SIGNED:
            return self.merge_divmod(lin.add(self.visit(e.a), self.visit(e.b), -1))
        return self._generic_binary(e)

    def _v_mul(self, e):
        if e.dtype in SIGNED:
            return self.mul(self.visit(e.a), self.visit(e.b))
        return self._generic_binary(e)

    def _v_div(self, e):
        if e.dtype not in SIGNED:
            return self._generic_binary(e)
        a, b = self.visit(e.a), self.visit(e.b)
        if not b.terms:
            c = b.const
            if c and not a.terms:
                return lin.constant(trunc_div(a.const, c), a.dtype)
            if c in (1, -1):
                return lin.scale(a, c)
        # truncation and floor agree on a non-negative numerator and positive divisor
        if self.bound_lin(a)[0] >= 0 and self.bound_lin(b)[0] > 0:
            return self.floordiv(a, b)
        return self._binary_atom(Div, a, b)

    def _v_floordiv(self, e):
        if e.dtype in SIGNED:
            return self.floordiv(self.visit(e.a), self.visit(e.b))
        return self._generic_binary(e)

    def _v_floormod(self, e):
        if e.dtype in SIGNED:
            return self.floormod(self.visit(e.a), self.visit(e.b))
        return self._generic_binary(e)

    def _v_minmax(self, e):
        if e.dtype in SIGNED:
            return self.minmax(type(e), self.visit(e.a), self.visit(e.b))
        return self._generic_binary(e)

    def _v_cmp(self, e):
        if e.a.dtype in SIGNED:
            return self.compare(type(e), self.visit(e.a), self.visit(e.b))
        return self._generic_binary(e)

    def _generic_binary(self, e):
        """Folding and exact identities only (floats, unsigned, bools)."""
        a, b = self.to_expr(self.visit(e.a)), self.to_expr(self.visit(e.b))
        t = type(e)
        if type(a) in _CONSTS and type(b) in _CONSTS:
            try:
                return const(fold_binary(t, cast(_Const, a).value, cast(_Const, b).value, a.dtype), e.dtype)
            except ZeroDivisionError:
                pass
        ints = not is_float(e.dtype)
        if t is Add:
            if _is(b, 0):
                return a
            if _is(a, 0):
                return b
        elif t is Sub:
            if _is(b, 0):
                return a
        elif t is Mul:
            if _is(b, 1):
                return a
            if _is(a, 1):
                return b
            if ints and (_is(a, 0) or _is(b, 0)):
                return const(0, e.dtype)
        elif t is Div:
            if _is(b, 1):
                return a
        elif t in (FloorDiv, FloorMod) and ints and _is(b, 1):
            return a if t is FloorDiv else const(0, e.dtype)
        elif t in (Min, Max) and a is b:
            return a
        return e if a is e.a and b is e.b else t(a, b)

    def _v_and(self, e):
        a = self.visit(e.a)
        if type(a) is IntImm:
            return self.visit(e.b) if a.value else FALSE
        b = self.visit(e.b)
        if type(b) is IntImm:
            return a if b.value else FALSE
        if a is b:
            return a
        return e if a is e.a and b is e.b else And(a, b)

    def _v_or(self, e):
        a = self.visit(e.a)
        if type(a) is IntImm:
            return TRUE if a.value else self.visit(e.b)
        b = self.visit(e.b)
        if type(b) is IntImm:
            return TRUE if b.value else a
        if a is b:
            return a
        return e if a is e.a and b is e.b else Or(a, b)

    def _v_not(self, e):
        a = self.visit(e.a)
        t = type(a)
        if t is IntImm:
            return FALSE if a.value else TRUE
        if t is Not:
            return a.a
        if t in _FLIP and a.a.dtype in SIGNED:  # not (x < y)  ->  y <= x  (no NaN in ints)
            x, y = self.visit(a.a), self.visit(a.b)
            return self.compare(_FLIP[t], y, x) if t in (LT, LE) else self.compare(_FLIP[t], x, y)
        return e if a is e.a else Not(a)

    def _v_select(self, e):
        c = self.visit(e.condition)
        if type(c) is IntImm:
            return self.visit(e.true_value if c.value else e.false_value)
        t, f = self.visit(e.true_value), self.visit(e.false_value)
        if self.same(t, f):
            return t
        et, ef = self.to_expr(t), self.to_expr(f)
        if e.dtype in SIGNED:
            return self._atom((Select, c, et, ef), lambda: Select(c, et, ef))
        if c is e.condition and et is e.true_value and ef is e.false_value:
            return e
        return Select(c, et, ef)

    def _v_cast(self, e):
        v = self.visit(e.value)
        ev = self.to_expr(v)
        if ev.dtype == e.dtype:
            return v
        if type(ev) in _CONSTS:
            try:
                return self.visit(const(fold_cast(cast(_Const, ev).value, e.dtype), e.dtype))
            except ValueError:
                pass
        if e.dtype in SIGNED:
            return self._atom((Cast, e.dtype, ev), lambda: Cast(e.dtype, ev))
        return e if ev is e.value else Cast(e.dtype, ev)

    def _v_call(self, e):
        args = tuple(self.to_expr(self.visit(a)) for a in e.args)
        if all(type(a) in _CONSTS for a in args):
            try:
                return self.visit(
                    const(fold_call(e.op, tuple(cast(_Const, a).value for a in args), e.dtype), e.dtype)
                )
            except (ValueError, TypeError, OverflowError):
                pass
        if e.dtype in SIGNED:
            return self._atom((Call, e.op) + args, lambda: Call(e.op, args, e.dtype))
        return e if all(x is y for x, y in zip(args, e.args)) else Call(e.op, args, e.dtype)

    def _v_load(self, e):
        idx = tuple(self.to_expr(self.visit(i)) for i in e.indices)
        if e.dtype in SIGNED:
            return self._atom((BufferLoad, e.buffer) + idx, lambda: BufferLoad(e.buffer, idx))
        return e if all(x is y for x, y in zip(idx, e.indices)) else BufferLoad(e.buffer, idx)

    def _v_opaque(self, e):
        """Expression kinds the simplifier does not know: kept whole, as an atom."""
        return lin.atom(e, e.dtype) if e.dtype in SIGNED else e


_FIELDS: dict[type, tuple[str, ...]] = {}


def same_tree(a: Any, b: Any) -> bool:
    """Structural equality of two expressions, variables and buffers by identity."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    if t is tuple:
        return len(a) == len(b) and all(same_tree(x, y) for x, y in zip(a, b))
    if not isinstance(a, Expr) or t is Var:
        return a == b if isinstance(a, (str, int, float)) else False
    names = _FIELDS.get(t)
    if names is None:
        names = _FIELDS[t] = tuple(f.name for f in fields(t))
    return all(same_tree(getattr(a, n), getattr(b, n)) for n in names)


def _is(e: Expr, v) -> bool:
    return type(e) in _CONSTS and cast(_Const, e).value == v


_IV_BINARY = {
    FloorDiv: iv.floordiv,
    FloorMod: iv.floormod,
    Div: iv.truncdiv,
    Mul: iv.mul,
    Min: iv.minimum,
    Max: iv.maximum,
}

_DISPATCH: dict[type, Callable] = {
    Var: Simplifier._v_var,
    IntImm: Simplifier._v_int,
    FloatImm: Simplifier._v_leaf,
    Add: Simplifier._v_add,
    Sub: Simplifier._v_sub,
    Mul: Simplifier._v_mul,
    Div: Simplifier._v_div,
    FloorDiv: Simplifier._v_floordiv,
    FloorMod: Simplifier._v_floormod,
    Min: Simplifier._v_minmax,
    Max: Simplifier._v_minmax,
    EQ: Simplifier._v_cmp,
    NE: Simplifier._v_cmp,
    LT: Simplifier._v_cmp,
    LE: Simplifier._v_cmp,
    GT: Simplifier._v_cmp,
    GE: Simplifier._v_cmp,
    And: Simplifier._v_and,
    Or: Simplifier._v_or,
    Not: Simplifier._v_not,
    Select: Simplifier._v_select,
    Cast: Simplifier._v_cast,
    Call: Simplifier._v_call,
    BufferLoad: Simplifier._v_load,
}
