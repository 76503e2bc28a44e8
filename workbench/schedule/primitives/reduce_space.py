"""Whether a reduction block's loops visit each point of its reduce iterators' domains once.

``compute_at`` and ``reverse_compute_at`` rebuild a moved block's loops as one loop per
iterator, over the iterator's domain (or the part of it the consumers need). For a reduction
block the new reduce loops then sum over the whole *box* of the reduce domains; that is the
original reduction only if the block's own loops visited every point of that box exactly once
per spatial point — no term added, none repeated. Tied iterators break it: with ``vi = o // 8``
beside ``vo = o`` the box holds eight times the terms the loop ``o`` produced.

TVM requires reduction blocks to have affine bindings (an independent map of the loops onto
the iterators, ``DetectIterMap``) and so never meets such a block. Here the reduce bindings must
have the shapes split and fuse give them:

* each is ``dom.min + sum(coeff * slice)``, the coefficients a mixed radix ``1, e1, e1*e2, …``
  of the slices' extents, whose product is the domain's extent — or exceeds it, when a
  predicate conjunct ``binding < dom.min + extent`` clips it (an imperfect split);
* a slice is ``(x // lower) % extent`` of a loop ``x`` of the block (``x``, ``x // c``,
  ``x % c``, ``x // a % b``, ``x % a // b``) or of a *fused* sum ``x`` of slices, itself a
  mixed radix, whose extent a predicate conjunct ``x < bound`` may clip (a fused loop split
  imperfectly: ``(f0*3 + f1) // 16`` under ``f0*3 + f1 < 128``);
* the slices of each loop and fused sum, over all reduce iterators, tile it exactly: lowers
  ``1, e1, e1*e2, …`` up to its extent;
* no loop feeds both a spatial and a reduce iterator, and every predicate conjunct on the
  reduce loops is one of the clips above.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Optional, Sequence, cast

from ...ir.arith import Simplifier
from ...ir.arith.evaluate import evaluate
from ...ir.expr import LT, Add, Expr, FloorDiv, FloorMod, IntImm, Mul, Sub, Var, as_int, conjuncts, is_const
from ...ir.functor import free_vars
from ...ir.stmt import REDUCE, SPATIAL, BlockRealize, For, Range


@dataclass(frozen=True)
class _Slice:
    """``(source // lower) % extent``; the source is a loop variable or a fused sum."""

    source: Expr
    lower: int
    extent: Optional[int]  # None: a loop of symbolic extent (unbounded here), the top slice


class _NotExact(Exception):
    """Why the reduce loops may not visit the box of the reduce domains exactly once."""


class _ReduceSpace:
    """The slices the reduce bindings of one block take of its loops and fused sums."""

    def __init__(self, realize: BlockRealize, loops: Sequence[For], spatial_too: bool = False):
        block = realize.block
        self.loop_vars = {l.loop_var for l in loops}
        # only loops from 0 can be sliced; a symbolic extent (a size variable's) is None: such a
        # loop can only be the topmost slice of a binding
        # keyed by loop variables; typed by Expr since it is looked up with any expression
        self.extents: dict[Expr, Optional[int]] = {
            l.loop_var: l.extent.value if isinstance(l.extent, IntImm) else None
            for l in loops
            if is_const(l.min, 0)
        }
        self.symbolic: dict[Expr, Expr] = {
            l.loop_var: l.extent for l in loops if is_const(l.min, 0) and not isinstance(l.extent, IntImm)
        }
        self.sim = Simplifier(
            cast(
                "dict[Var, Range]",
                {l.loop_var: Range(l.min, l.extent) for l in loops if is_const(l.min, 0)},
            )
        )
        # with spatial_too every binding is sliced, so a shared loop shows as overlapping slices
        self.spatial_loops = (
            set()
            if spatial_too
            else set().union(
                *(
                    free_vars(v)
                    for iv, v in zip(block.iter_vars, realize.iter_values)
                    if iv.iter_type == SPATIAL
                ),
            )
        )
        self.spatial_too = spatial_too
        self.conds = conjuncts(realize.predicate)
        self.slices_of: dict[Expr, list[tuple[_Slice, str]]] = {}
        self.expanding: set[Expr] = set()

    def radix(self, e: Expr, user: str) -> tuple[list[_Slice], Optional[int], int]:
        """``e`` as ``const + sum(coeff * slice)`` with mixed-radix coefficients: (slices, the
        number of values they span (None: unbounded, a symbolic top slice), const)."""
        try:
            form = self.sim.lin(e)
        except TypeError:
            raise _NotExact(f"{user} = {e} is not an integer expression") from None
        terms = []
        for atom, coeff in form.terms.items():
            piece = self.slice(atom, user)
            if coeff <= 0:
                raise _NotExact(f"{user} = {e} has the negative term {coeff} * {atom}")
            if piece.extent is None or piece.extent > 1:
                terms.append((coeff, piece))
        span: Optional[int] = 1
        out = []
        for coeff, piece in sorted(terms, key=lambda t: t[0]):
            if coeff != span:
                raise _NotExact(f"{user} = {e} is not a mixed-radix number of loop slices")
            span = None if piece.extent is None or span is None else span * piece.extent
            out.append(piece)
        for piece in out:
            self.slices_of.setdefault(piece.source, []).append((piece, user))
        return out, span, form.const

    def slice(self, e: Expr, user: str) -> _Slice:
        """``e`` as a slice of a loop or fused sum; a slice of a slice is a slice when the
        divisor or modulus divides its extent."""
        if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0:
            inner, c = self.slice(e.a, user), e.b.value
            if inner.extent is None:
                if isinstance(e, FloorDiv):
                    return _Slice(inner.source, inner.lower * c, None)
                return _Slice(inner.source, inner.lower, c)
            if inner.extent % c == 0:
                if isinstance(e, FloorDiv):
                    return _Slice(inner.source, inner.lower * c, inner.extent // c)
                return _Slice(inner.source, inner.lower, c)
        elif isinstance(e, Var) and self.spatial_too and e not in self.loop_vars:
            # an iterator of an enclosing block or a size variable: a constant for these loops
            return _Slice(e, 1, 1)
        elif isinstance(e, Var) and e in self.extents:
            if e in self.spatial_loops:
                raise _NotExact(f"loop {e.name!r} feeds spatial iterators and reduce iterator {user!r}")
            return _Slice(e, 1, self.extents[e])
        elif isinstance(e, (Add, Sub, Mul)):  # a sum the simplifier could not split
            return _Slice(e, 1, self.fused_extent(e, user))
        raise _NotExact(f"{user} uses {e}, not a slice of one of the block's loops")

    def fused_extent(self, e: Expr, user: str) -> Optional[int]:
        """The extent of fused sum ``e`` (registering its own slices once)."""
        if e not in self.extents:
            if e in self.expanding:  # a product of loops (``k * k``): its form is itself
                raise _NotExact(f"{user} uses {e}, not a slice of one of the block's loops")
            self.expanding.add(e)
            _, span, const = self.radix(e, user)
            if const:
                raise _NotExact(f"{user} uses {e}, a fused sum not starting at 0")
            bound = self.take_clip(e)
            if not isinstance(bound, int):
                self.extents[e] = span  # a symbolic clip bounds nothing constant
            else:
                self.extents[e] = bound if span is None else min(span, bound)
        return self.extents[e]

    def take_clip(self, e: Expr) -> Optional[int | Expr]:
        """``bound`` if a predicate conjunct reads ``e < bound`` (it is then accounted for); an
        Expr where the bound is symbolic (over size variables, no loop of the block)."""
        for cond in self.conds:
            if isinstance(cond, LT):
                diff = self.sim.simplify(Sub(Sub(cond.a, cond.b), e))
                if isinstance(diff, IntImm):
                    self.conds.remove(cond)
                    return -diff.value
                if not free_vars(diff) & self.loop_vars:
                    self.conds.remove(cond)
                    return self.sim.simplify(-diff)
        return None

    def check_disjoint(self) -> None:
        """No two slices of one loop or fused sum overlap (parts may be left out)."""
        for source, pieces in self.slices_of.items():
            end: Optional[int] = 1
            for piece, _ in sorted(pieces, key=lambda p: p[0].lower):
                if end is None or piece.lower < end:
                    what = f"loop {source.name!r}" if isinstance(source, Var) else f"the sum {source}"
                    users = sorted({user for _, user in pieces})
                    raise _NotExact(f"{what} feeds {users} through overlapping slices")
                end = None if piece.extent is None else piece.lower * piece.extent

    def check_tiling(self) -> None:
        """Each loop and fused sum is cut into slices exactly once: none overlaps another (a
        term repeated), none is left out (the loop would repeat the others' terms)."""
        for source, pieces in self.slices_of.items():
            lower: Optional[int] = 1
            chained = True
            for piece, _ in sorted(pieces, key=lambda p: p[0].lower):
                chained = chained and piece.lower == lower
                lower = None if lower is None or piece.extent is None else lower * piece.extent
            if not chained or lower != self.extents[source]:
                what = f"loop {source.name!r}" if isinstance(source, Var) else f"the sum {source}"
                users = sorted({user for _, user in pieces})
                raise _NotExact(f"{what} feeds {users} through slices that overlap or leave part of it out")


def _check_symbolic_reduce(space: _ReduceSpace, name: str, value: Expr, dom: Range) -> None:
    """A reduce iterator over ``[d0, d0 + n)``, ``n`` symbolic: its binding must be mixed-radix
    slices whose top one is a whole loop of symbolic extent ``E`` over constant slices spanning
    ``s`` below, with ``s * E == n`` (``vk = k`` over ``range(n)``), or ``s * E >= n`` and a
    predicate clipping the binding to ``n`` (``k_0 * 4 + k_1 < n`` under ``range((n + 3) // 4)``,
    a split of ``range(n)``)."""
    slices, _, const = space.radix(value, name)
    if const != as_int(dom.min):
        raise _NotExact(f"{name} = {value} does not start at its domain's minimum {dom.min}")
    top = slices[-1] if slices else None
    if top is None or top.extent is not None or top.source not in space.symbolic or top.lower != 1:
        raise _NotExact(
            f"{name} = {value} does not run over a loop of symbolic extent as its domain {dom} does"
        )
    below = 1
    for piece in slices[:-1]:
        below *= cast(int, piece.extent)
    n = dom.extent
    total = space.symbolic[top.source] * below
    if is_const(space.sim.simplify(total - n), 0):
        return
    clip = space.take_clip(Sub(value, dom.min))
    if clip is None or isinstance(clip, int) or not is_const(space.sim.simplify(clip - n), 0):
        raise _NotExact(f"{name} = {value} reaches {total} values, and the predicate does not clip it to {n}")
    if space.sim.bound_lin(space.sim.lin(total - n))[0] < 0:
        raise _NotExact(f"{name} = {value} reaches {total} values, which may be fewer than {n}")


def reduce_space_problem(realize: BlockRealize, loops: Sequence[For]) -> Optional[str]:
    """Why the reduce iterators of ``realize``, under ``loops`` (its loops in its scope), might
    not visit each point of their domains exactly once per spatial point; None when they do."""
    space = _ReduceSpace(realize, loops)
    try:
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if iv.iter_type != REDUCE:
                continue
            name = iv.var.name
            try:
                d0 = as_int(iv.dom.min)
            except TypeError:
                raise _NotExact(f"{name} has the non-constant domain {iv.dom}") from None
            if not isinstance(iv.dom.extent, IntImm):
                _check_symbolic_reduce(space, name, value, iv.dom)
                continue
            n = as_int(iv.dom.extent)
            _, span, const = space.radix(value, name)
            if span is None:
                raise _NotExact(f"{name} = {value} runs over a loop of symbolic extent, its domain has {n}")
            if const != d0:
                raise _NotExact(f"{name} = {value} does not start at its domain's minimum {d0}")
            if span < n:
                raise _NotExact(f"{name} = {value} reaches {span} of the {n} values of its domain")
            if span > n and space.take_clip(Sub(value, iv.dom.min)) != n:
                raise _NotExact(
                    f"{name} = {value} spans past its domain and the predicate does not clip it to {n}"
                )
        space.check_tiling()
        reduce_loops = {s for s in space.slices_of if isinstance(s, Var)}
        for cond in space.conds:
            if free_vars(cond) & reduce_loops:
                raise _NotExact(f"the predicate {cond} restricts the reduce loops")
    except _NotExact as exc:
        return str(exc)
    return None


def affine_binding_problem(realize: BlockRealize, loops: Sequence[For]) -> Optional[str]:
    """Why the bindings of ``realize`` are not quasi-affine in ``loops`` (None when they are).

    TVM's ``affine_binding`` (``DetectIterMap``, surjective level): each binding, spatial or
    reduce, is ``const + sum(coeff * slice)`` with mixed-radix coefficients from 1 (``2 * i``
    and ``k * k // 2`` are not), and no two slices of one loop overlap (``vi = i`` beside
    ``vk = i + k`` shares ``i``); unlike :func:`reduce_space_problem` a binding may leave part
    of a loop out (``k // 2``) and need not cover its domain."""
    space = _ReduceSpace(realize, loops, spatial_too=True)
    try:
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            space.radix(value, iv.var.name)
        space.check_disjoint()
    except _NotExact as exc:
        # The simplifier may have rewritten a quasi-affine binding out of the form the slices
        # read: `(f0 * 128 + f1) // 30` (a fused loop split by 128) becomes
        # `f0 * 4 + (f0 * 8 + f1) // 30`. What the rule protects is that each iteration point
        # maps to its own iterator point; where the loops are few enough, that is counted.
        if _bijective_on_loops(realize, loops):
            return None
        return str(exc)
    return None


#: the most loop points :func:`_bijective_on_loops` enumerates
MAX_ENUMERATED_POINTS = 1 << 16


def _bijective_on_loops(realize: BlockRealize, loops: Sequence[For]) -> bool:
    """Whether the points of ``loops`` that the predicate of ``realize`` admits map one to one
    onto the block's iteration domain, every iterator point once: what a quasi-affine binding
    guarantees, counted (False when there are too many points). A binding with gaps
    (``vi = i * 2``) or overlaps is not such a map."""
    doms = [iv.dom for iv in realize.block.iter_vars]
    if not all(isinstance(l.min, IntImm) and isinstance(l.extent, IntImm) for l in loops):
        return False
    if not all(isinstance(d.min, IntImm) and isinstance(d.extent, IntImm) for d in doms):
        return False
    box = [(cast(IntImm, d.min).value, cast(IntImm, d.extent).value) for d in doms]
    extents = [cast(IntImm, l.extent).value for l in loops]
    if math.prod(extents) > MAX_ENUMERATED_POINTS:
        return False
    seen: set[tuple] = set()
    for point in itertools.product(*(range(e) for e in extents)):
        env = {l.loop_var: cast(IntImm, l.min).value + p for l, p in zip(loops, point)}
        try:
            if not evaluate(realize.predicate, env):
                continue
            key = tuple(evaluate(v, env) for v in realize.iter_values)
        except (KeyError, ZeroDivisionError):
            return False  # a variable bound outside these loops: not decidable here
        if key in seen or any(not lo <= k < lo + n for k, (lo, n) in zip(key, box)):
            return False
        seen.add(key)
    return len(seen) == math.prod(n for _, n in box)
