"""Symbolic relaxation: the range an expression spans while some variables sweep their domain.

``relax(io*8 + ii, {ii: [0, 8)})`` is ``(io*8, io*8 + 7)``: variables of the domain map are
relaxed over their ranges, all others stay symbolic. This is what compute_at and the access-
region analysis need to express "the part of a buffer touched by one iteration of a loop".
Results are inclusive bounds and always sound; they are exact for affine expressions in which
each relaxed variable appears once, and over-approximate otherwise. A side that cannot be bounded
(a data-dependent index, a product of unknown sign) is None.

The functions here work inside one :class:`~.simplifier.Simplifier` session, whose ranges must
include the relaxed variables' ranges (so constant bounds can serve as a fallback).
"""

from __future__ import annotations

from typing import Mapping, Optional

from ..expr import Expr, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Select, Var
from ..functor import children
from ..stmt import Range
from . import interval as iv
from . import linear as lin
from .linear import Lin
from .simplifier import Simplifier

Bounds = tuple  # (Optional[Lin], Optional[Lin]) inclusive


class Relaxer:
    """Relaxes affine forms of one session over the variables of ``dom``."""

    def __init__(self, sim: Simplifier, dom: Mapping[Var, Range]):
        self.sim = sim
        self.dom = dom
        self._dep: dict[Expr, bool] = {}
        self._iv: dict[Expr, Bounds] = {}

    def depends(self, e: Expr) -> bool:
        """Does ``e`` mention a relaxed variable?"""
        found = self._dep.get(e)
        if found is None:
            if type(e) is Var:
                found = e in self.dom
            else:
                found = any(self.depends(c) for c in children(e) if isinstance(c, Expr))
            self._dep[e] = found
        return found

    def interval(self, l: Lin) -> Bounds:
        lo: Lin | None = lin.constant(l.const, l.dtype)
        hi: Lin | None = lo
        for a, c in l.terms.items():
            if not self.depends(a):
                piece = Lin({a: c}, 0, l.dtype)
                lo = lo if lo is None else lin.add(lo, piece)
                hi = hi if hi is None else lin.add(hi, piece)
                continue
            alo, ahi = self.atom_interval(a)
            if c < 0:
                alo, ahi = ahi, alo
            lo = None if lo is None or alo is None else lin.add(lo, lin.scale(alo, c))
            hi = None if hi is None or ahi is None else lin.add(hi, lin.scale(ahi, c))
        sim = self.sim
        return (None if lo is None else sim.merge_divmod(lo), None if hi is None else sim.merge_divmod(hi))

    def range_bounds(self, rng: Range) -> Bounds:
        """Smallest first and largest last element of ``[min, min + extent)``."""
        mn = self.sim.lin(rng.min)
        last = lin.add(mn, lin.add(self.sim.lin(rng.extent), lin.constant(1, mn.dtype), -1))
        return self.interval(mn)[0], self.interval(last)[1]

    def atom_interval(self, a: Expr) -> Bounds:
        found = self._iv.get(a)
        if found is None:
            found = self._iv[a] = self._atom_interval(a)
        return found

    def _atom_interval(self, a: Expr) -> Bounds:
        sim, t = self.sim, type(a)
        if type(a) is Var:  # exactly: a DSL reduce axis is not a loop variable here
            return self.range_bounds(self.dom[a])
        if isinstance(a, (FloorDiv, FloorMod)) and isinstance(a.b, IntImm) and a.b.value > 0:
            c = lin.constant(a.b.value, a.dtype)
            lo, hi = self.interval(sim.as_lin(a.a))
            if t is FloorDiv:  # monotone
                return (
                    None if lo is None else sim.floordiv(lo, c),
                    None if hi is None else sim.floordiv(hi, c),
                )
            if lo is not None and hi is not None:
                q = sim.floordiv(lo, c)
                if sim.same(q, sim.floordiv(hi, c)):  # one period: the modulo is a shift
                    shift = lin.scale(q, -a.b.value)
                    return lin.add(lo, shift), lin.add(hi, shift)
        elif isinstance(a, (Min, Max)):
            alo, ahi = self.interval(sim.as_lin(a.a))
            blo, bhi = self.interval(sim.as_lin(a.b))
            # monotone in both operands: combine lower bounds, and upper bounds
            return (_combine(sim, t, alo, blo, strict=t is Min), _combine(sim, t, ahi, bhi, strict=t is Max))
        elif isinstance(a, Select):
            tlo, thi = self.interval(sim.as_lin(a.true_value))
            flo, fhi = self.interval(sim.as_lin(a.false_value))
            return (_combine(sim, Min, tlo, flo, strict=True), _combine(sim, Max, thi, fhi, strict=True))
        elif isinstance(a, Mul) and sim.bound_expr(a.a)[0] >= 0 and sim.bound_expr(a.b)[0] >= 0:
            alo, ahi = self.interval(sim.as_lin(a.a))
            blo, bhi = self.interval(sim.as_lin(a.b))
            return (
                None if alo is None or blo is None else sim.mul(alo, blo),
                None if ahi is None or bhi is None else sim.mul(ahi, bhi),
            )
        # anything else: the constant bounds of the whole atom over the relaxed ranges
        lo, hi = sim.bound_atom(a)
        return (
            None if lo == -iv.INF else lin.constant(lo, a.dtype),
            None if hi == iv.INF else lin.constant(hi, a.dtype),
        )


def _combine(sim: Simplifier, cls: type, x: Optional[Lin], y: Optional[Lin], strict: bool):
    """``cls(x, y)`` where None is the infinity on the side being computed: with ``strict``
    (min of lower bounds, max of upper bounds) an unbounded operand makes the result unbounded;
    otherwise the bounded operand alone decides."""
    if x is None or y is None:
        return None if strict else (y if x is None else x)
    return sim.minmax(cls, x, y)


def relax_range(relaxer: Relaxer, rng: Range, extent_if_unbounded: Optional[int | Expr] = None) -> Range:
    """``rng`` relaxed over the relaxer's domain; an unbounded side is clamped to
    ``[0, extent_if_unbounded)`` when given, else raises ValueError."""
    sim = relaxer.sim
    lo, hi = relaxer.range_bounds(rng)
    if lo is None or hi is None:
        if extent_if_unbounded is None:
            raise ValueError(f"cannot bound the range {rng} over the relaxed variables")
        lo = lin.constant(0, "int32") if lo is None else lo
        if hi is None:  # a symbolic extent (a size variable's) clamps as an expression
            top = extent_if_unbounded - 1
            hi = lin.constant(top, "int32") if isinstance(top, int) else sim.lin(top)
    extent = lin.add(lin.add(hi, lo, -1), lin.constant(1, hi.dtype))
    return Range(sim.to_expr(lo), sim.to_expr(sim.merge_divmod(extent)))


def union_range(sim: Simplifier, a: Range, b: Range) -> Range:
    """The smallest range holding both (the hull; min/max stay when bounds cannot decide)."""
    amin, bmin = sim.lin(a.min), sim.lin(b.min)
    one = lin.constant(1, amin.dtype)
    alast = lin.add(lin.add(amin, sim.lin(a.extent)), one, -1)
    blast = lin.add(lin.add(bmin, sim.lin(b.extent)), one, -1)
    lo = sim.minmax(Min, amin, bmin)
    hi = sim.minmax(Max, alast, blast)
    return Range(sim.to_expr(lo), sim.to_expr(lin.add(lin.add(hi, lo, -1), one)))


def covers_range(sim: Simplifier, outer: Range, inner: Range) -> bool:
    """Provably ``outer ⊇ inner`` (an empty inner range is not special-cased)."""
    omin, imin = sim.lin(outer.min), sim.lin(inner.min)
    oend = lin.add(omin, sim.lin(outer.extent))
    iend = lin.add(imin, sim.lin(inner.extent))
    return sim.bound_lin(lin.add(imin, omin, -1))[0] >= 0 and sim.bound_lin(lin.add(oend, iend, -1))[0] >= 0
