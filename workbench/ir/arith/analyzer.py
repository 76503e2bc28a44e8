"""``Analyzer``: variable ranges plus the questions asked under them, and module-level wrappers.

Every question runs in a fresh :class:`~.simplifier.Simplifier` session (memoized within the
call), so binding a new range never leaves stale facts behind.

>>> i, j = Var("i"), Var("j")
>>> ana = Analyzer({i: Range.from_extent(16), j: (0, 4)})
>>> ana.simplify((i * 4 + j) // 4)
i
>>> ana.const_int_bound(i * 4 + j)
(0, 63)
>>> ana.can_prove(i * 4 + j < 64)
True
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Union, cast

from ..expr import Expr, FloatImm, IntImm, Var, convert
from ..stmt import Range
from . import interval as iv
from .relax import Relaxer, covers_range, relax_range, union_range
from .simplifier import Simplifier

#: what callers may pass as a variable's range: a Range, ``(min, extent)``, or an extent
RangeLike = Union[Range, tuple, int]
VarRanges = Optional[Mapping[Var, RangeLike]]


def as_range(r: RangeLike) -> Range:
    if isinstance(r, Range):
        return r
    if isinstance(r, tuple) and len(r) == 2:
        return Range(convert(r[0]), convert(r[1]))
    if isinstance(r, (int, Expr)):
        return Range(IntImm(0), convert(r))
    raise TypeError(f"expected a Range, a (min, extent) pair or an extent, got {r!r}")


class Analyzer:
    """Holds ``Var -> Range`` facts; simplifies, bounds and proves under them."""

    def __init__(self, var_ranges: VarRanges = None):
        self.ranges: dict[Var, Range] = {}
        for v, r in (var_ranges or {}).items():
            self.bind(v, r)

    def bind(self, var: Var, rng: RangeLike) -> None:
        """Declare that ``var`` takes values in ``rng`` (replacing an earlier binding)."""
        self.ranges[var] = as_range(rng)

    def session(self, extra: VarRanges = None) -> Simplifier:
        """A simplification session over these ranges (plus ``extra``) for many questions."""
        if not extra:
            return Simplifier(self.ranges)
        ranges = dict(self.ranges)
        ranges.update({v: as_range(r) for v, r in extra.items()})
        return Simplifier(ranges)

    # --------------------------------------------------------------------------------------

    def simplify(self, expr: Any) -> Expr:
        """An equivalent, simpler expression (see :mod:`.simplifier` for the normal form)."""
        e = convert(expr)
        if type(e) in (Var, IntImm, FloatImm):
            return e
        return Simplifier(self.ranges).simplify(e)

    def const_int_bound(self, expr: Any) -> tuple[Optional[int], Optional[int]]:
        """Inclusive ``(lo, hi)`` Python ints containing every value; None where unbounded."""
        sim = Simplifier(self.ranges)
        return iv.to_public(sim.bound(sim.visit(convert(expr))))

    def can_prove(self, cond: Any) -> bool:
        """True only if ``cond`` holds for every value of the bound variables."""
        r = Simplifier(self.ranges).visit(convert(cond, "bool"))
        return type(r) is IntImm and r.value != 0

    def relax(self, expr: Any, dom_map: Mapping[Var, RangeLike]) -> tuple[Optional[Expr], Optional[Expr]]:
        """Inclusive ``(min, max)`` of ``expr`` while the variables of ``dom_map`` sweep their
        ranges; other variables stay symbolic. A side that cannot be bounded is None."""
        dom = {v: as_range(r) for v, r in dom_map.items()}
        sim = self.session(dom)
        lo, hi = Relaxer(sim, dom).interval(sim.lin(convert(expr)))
        return (None if lo is None else sim.to_expr(lo)), (None if hi is None else sim.to_expr(hi))

    def relax_region(
        self, region: Sequence[Range], dom_map: Mapping[Var, RangeLike], shape: Optional[Sequence[int]] = None
    ) -> tuple[Range, ...]:
        """Each range relaxed over ``dom_map``; with ``shape``, a side that cannot be bounded
        is clamped to the buffer's extent (else ValueError)."""
        dom = {v: as_range(r) for v, r in dom_map.items()}
        relaxer = Relaxer(self.session(dom), dom)
        return tuple(
            relax_range(relaxer, r, None if shape is None else shape[d]) for d, r in enumerate(region)
        )

    def union_regions(self, a: Sequence[Range], b: Sequence[Range]) -> tuple[Range, ...]:
        """Per dimension, the smallest range holding both (``[i, i+1) ∪ [i+1, i+2) = [i, i+2)``)."""
        if len(a) != len(b):
            raise ValueError(f"cannot unite regions of {len(a)} and {len(b)} dimensions")
        sim = Simplifier(self.ranges)
        return tuple(union_range(sim, x, y) for x, y in zip(a, b))

    def region_covers(self, outer: Sequence[Range], inner: Sequence[Range]) -> bool:
        """True only if ``outer`` provably contains ``inner`` in every dimension."""
        sim = Simplifier(self.ranges)
        return len(outer) == len(inner) and all(covers_range(sim, o, i) for o, i in zip(outer, inner))


# ------------------------------------------------------------------------------------------
# the same questions as functions (one Analyzer per call)


def _ranges(var_ranges: VarRanges) -> Mapping[Var, Range]:
    """``var_ranges`` as ``Var -> Range`` (the mapping itself when it already is one)."""
    if not var_ranges:
        return {}
    if all(type(r) is Range for r in var_ranges.values()):
        return cast("Mapping[Var, Range]", var_ranges)  # every value was just checked to be a Range
    return {v: as_range(r) for v, r in var_ranges.items()}


def simplify(expr: Any, var_ranges: VarRanges = None) -> Expr:
    e = convert(expr)
    if type(e) in (Var, IntImm, FloatImm):
        return e
    return Simplifier(_ranges(var_ranges)).simplify(e)


def const_int_bound(expr: Any, var_ranges: VarRanges = None) -> tuple[Optional[int], Optional[int]]:
    return Analyzer(var_ranges).const_int_bound(expr)


def can_prove(cond: Any, var_ranges: VarRanges = None) -> bool:
    return Analyzer(var_ranges).can_prove(cond)


def relax(
    expr: Any, dom_map: Mapping[Var, RangeLike], var_ranges: VarRanges = None
) -> tuple[Optional[Expr], Optional[Expr]]:
    return Analyzer(var_ranges).relax(expr, dom_map)


def relax_region(
    region: Sequence[Range],
    dom_map: Mapping[Var, RangeLike],
    var_ranges: VarRanges = None,
    shape: Optional[Sequence[int]] = None,
) -> tuple[Range, ...]:
    return Analyzer(var_ranges).relax_region(region, dom_map, shape)


def union_regions(a: Sequence[Range], b: Sequence[Range], var_ranges: VarRanges = None) -> tuple[Range, ...]:
    return Analyzer(var_ranges).union_regions(a, b)


def region_covers(outer: Sequence[Range], inner: Sequence[Range], var_ranges: VarRanges = None) -> bool:
    return Analyzer(var_ranges).region_covers(outer, inner)
