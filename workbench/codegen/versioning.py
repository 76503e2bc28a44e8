"""Tail versioning and tail-test hoisting of lowered loops over a symbolic extent (llvm).

A split of a loop of symbolic extent ``n`` leaves a tail predicate on every statement of the
tile, ``if i_0 * 256 + i_1 * 16 + i_2 < n``, in the innermost loops: each unrolled copy tests its
own row, so the hot loop of a tiled matmul keeps a branch per vector statement. A build for a
symbolic ``n`` ran 1.6x slower than the same schedule built for a constant ``n`` that the tile
divides (whose predicates fold away). :func:`version_tails` does two things:

* the body of the outermost loop of symbolic extent gets two versions::

    for t in range(ceildiv(n, 256)):            for t in range(ceildiv(n, 256)):
      for i in range(256):                        if t * 256 + 255 < n:      # a full tile
        if t * 256 + i < n:             ==>         for i in range(256): S    # no test
          S                                       else:
                                                    for i in range(256):
                                                      if t * 256 + i < n: S

  The fast version drops each test that mentions a size variable and, relaxed over the loops
  between the body and itself, holds whenever the tile is full: the version's test is the
  conjunction of those relaxed tests, so it implies each dropped one. All tiles but the last
  take it. The body is duplicated once (versioned bodies are not versioned again).
* then (:meth:`_Versioner.hoist`, what the last tile runs) each tail test moves out of the loops
  it does not depend on, and a loop whose body is a tail test is guarded by "some iteration
  passes it", so the last tile tests once per row and skips the rows past ``n`` whole.

TVM 0.27 lowers the same schedule with the predicates in place; its default pipeline's
``HoistIfThenElse`` then does the hoisting above (without the "some iteration" guard), and its
``LoopPartition`` leaves these loops alone, so every tile runs the tests. Static functions are
left as they are (their tests on constant sizes are often folded or hoisted by the simplifier).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..ir import expr as E
from ..ir.arith.relax import Relaxer
from ..ir.arith.simplifier import Simplifier
from ..ir.func import PrimFunc
from ..ir.functor import free_vars, pre_order, substitute
from ..ir.stmt import TRUE, Allocate, For, ForKind, IfThenElse, Range, SeqStmt, Stmt
from ..ir.structural import structural_equal
from .compaction import negative_form

__all__ = ["version_tails"]


def version_tails(func: PrimFunc) -> PrimFunc:
    """``func`` (lowered) with the body of each outermost loop of symbolic extent versioned for
    full tiles; ``func`` itself when it has no size variable or nothing to version."""
    sizes = frozenset(func.size_vars)
    if not sizes:
        return func
    v = _Versioner(sizes)
    body = v.hoist(v.stmt(func.body, {}), {})
    return func if body is func.body else replace(func, body=body)


class _Versioner:
    def __init__(self, sizes: frozenset) -> None:
        self.sizes = sizes

    def stmt(self, s: Stmt, ranges: dict) -> Stmt:
        """``s`` with the outermost symbolic loops under it versioned (``ranges``: the loops
        around ``s``)."""
        if isinstance(s, For):
            inner = {**ranges, s.loop_var: Range(s.min, s.extent)}
            if free_vars(s.extent) & self.sizes:
                body = self.version(s.body, inner)
            else:
                body = self.stmt(s.body, inner)
            return s if body is s.body else _with(s, body=body)
        if isinstance(s, SeqStmt):
            seq = tuple(self.stmt(x, ranges) for x in s.seq)
            return s if all(a is b for a, b in zip(seq, s.seq)) else SeqStmt(seq)
        if isinstance(s, IfThenElse):
            then = self.stmt(s.then_case, ranges)
            other = None if s.else_case is None else self.stmt(s.else_case, ranges)
            if then is s.then_case and other is s.else_case:
                return s
            return IfThenElse(s.condition, then, other)
        if isinstance(s, Allocate):
            body = self.stmt(s.body, ranges)
            return s if body is s.body else Allocate(s.buffer, body)
        return s

    def hoist(self, s: Stmt, ranges: dict) -> Stmt:
        """``s`` with each tail test moved out of the loops it does not depend on, and a loop
        whose body is one tail test guarded by "some iteration passes it" (bottom-up)::

            for k in range(128):                    if t * 256 < n:
              for i in range(16):                     for k in range(128):
                for j in T.vectorized(8):   ==>         for i in range(16):
                  if t * 256 + i < n: S                   if t * 256 + i < n:
                                                            for j in T.vectorized(8): S

        so the tail tile of a symbolic loop tests once per row instead of once per element,
        and skips the rows past ``n`` whole."""
        if isinstance(s, For):
            inner = {**ranges, s.loop_var: Range(s.min, s.extent)}
            body = self.hoist(s.body, inner)
            loop = s if body is s.body else _with(s, body=body)
            if (
                not isinstance(body, IfThenElse)
                or body.else_case is not None
                or s.kind == ForKind.THREAD_BINDING
            ):
                return loop
            if not self.is_tail(body.condition):
                return loop
            if s.loop_var not in free_vars(body.condition):
                return _guard(body.condition, _with(s, body=body.then_case))
            if E.is_const(s.extent, 1):  # one iteration: the test at it is exact
                at = Simplifier(ranges).simplify(substitute(body.condition, {s.loop_var: s.min}))
                return _guard(at, _with(s, body=body.then_case))
            test = self.exists_test(body.condition, s.loop_var, Range(s.min, s.extent), inner)
            return loop if test is None else _guard(test, loop)
        if isinstance(s, SeqStmt):
            seq = tuple(self.hoist(x, ranges) for x in s.seq)
            return s if all(a is b for a, b in zip(seq, s.seq)) else SeqStmt(seq)
        if isinstance(s, IfThenElse):
            then = self.hoist(s.then_case, ranges)
            other = None if s.else_case is None else self.hoist(s.else_case, ranges)
            if then is s.then_case and other is s.else_case:
                return s
            if other is None:
                return _guard(s.condition, then)
            return IfThenElse(s.condition, then, other)
        if isinstance(s, Allocate):
            body = self.hoist(s.body, ranges)
            return s if body is s.body else Allocate(s.buffer, body)
        return s

    def is_tail(self, cond: E.Expr) -> bool:
        return bool(free_vars(cond) & self.sizes) and not any(
            isinstance(n, E.BufferLoad) for n in pre_order(cond)
        )

    def exists_test(self, cond: E.Expr, var: E.Var, rng: Range, ranges: dict) -> Optional[E.Expr]:
        """A test free of ``var`` that holds whenever ``cond`` holds for some value of ``var``
        in ``rng`` (None where a conjunct is not a comparison it can relax)."""
        if free_vars(rng.min) | free_vars(rng.extent):
            return None
        session = Simplifier(ranges)
        relaxer = Relaxer(session, {var: rng})
        out: Optional[E.Expr] = None
        for c in E.conjuncts(cond):
            if var not in free_vars(c):
                test = c
            else:
                gap = negative_form(session, c)
                lo = None if gap is None else relaxer.interval(gap)[0]
                if lo is None:
                    return None
                test = session.simplify(E.LT(session.to_expr(lo), E.IntImm(0, lo.dtype)))
            if not E.is_const(test, 1):
                out = test if out is None else E.And(out, test)
        return out

    def version(self, body: Stmt, outer: dict) -> Stmt:
        """``if <full tile>: body without the tail tests  else: body`` (``body`` when nothing
        would be dropped)."""
        found: dict[int, Optional[E.Expr]] = {}  # id(if) -> its relaxed test (None: kept)
        tests: list[E.Expr] = []
        keys: set = set()
        sim = Simplifier({**outer})

        def visit(s: Stmt, inner: dict) -> None:  # inner: the loops between body and s
            if isinstance(s, For):
                visit(s.body, {**inner, s.loop_var: Range(s.min, s.extent)})
            elif isinstance(s, SeqStmt):
                for x in s.seq:
                    visit(x, inner)
            elif isinstance(s, Allocate):
                visit(s.body, inner)
            elif isinstance(s, IfThenElse):
                test = self.full_tile_test(s.condition, sim, inner)
                found[id(s)] = test
                if test is not None and not E.is_const(test, 1):
                    key = str(test)
                    if key not in keys:
                        keys.add(key)
                        tests.append(test)
                visit(s.then_case, inner)
                if s.else_case is not None:
                    visit(s.else_case, inner)

        visit(body, {})
        if not any(t is not None for t in found.values()):
            return body
        if not tests:
            return _drop(body, found)
        condition = tests[0]
        for t in tests[1:]:
            condition = E.And(condition, t)
        fast = _drop(body, found)
        return IfThenElse(condition, fast, body)

    def full_tile_test(self, cond: E.Expr, sim: Simplifier, inner: dict) -> Optional[E.Expr]:
        """A test free of the loops ``inner`` that implies ``cond`` wherever they run (TRUE:
        ``cond`` always holds), for a tail condition (comparisons mentioning a size variable,
        no loads), else None."""
        if not free_vars(cond) & self.sizes or any(isinstance(n, E.BufferLoad) for n in pre_order(cond)):
            return None
        conjuncts = E.conjuncts(cond)
        dom = {v: r for v, r in inner.items() if v in free_vars(cond)}
        if any(free_vars(r.min) | free_vars(r.extent) for r in dom.values()):
            return None  # an inner loop whose range moves: keep it simple
        session = Simplifier({**sim.ranges, **dom})
        relaxer = Relaxer(session, dom)
        out: Optional[E.Expr] = None
        for c in conjuncts:
            gap = negative_form(session, c)
            if gap is None:
                return None
            hi = relaxer.interval(gap)[1]
            if hi is None:
                return None
            test = session.simplify(E.LT(session.to_expr(hi), E.IntImm(0, hi.dtype)))
            if E.is_const(test, 0):
                return None  # never a full tile
            if not E.is_const(test, 1):
                out = test if out is None else E.And(out, test)
        return out if out is not None else TRUE  # true in every iteration


def _guard(cond: E.Expr, body: Stmt) -> Stmt:
    """``if cond: body``, without repeating a test ``body`` already starts with."""
    if E.is_const(cond, 1):
        return body
    if type(body) is IfThenElse and body.else_case is None:
        if structural_equal(body.condition, cond, map_free_vars=False):
            return body
    return IfThenElse(cond, body)


def _drop(s: Stmt, found: dict) -> Stmt:
    """``s`` with each ``if`` of a relaxed test (``found``) replaced by its then-branch."""
    if isinstance(s, For):
        return _with(s, body=_drop(s.body, found))
    if isinstance(s, SeqStmt):
        return SeqStmt(tuple(_drop(x, found) for x in s.seq))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _drop(s.body, found))
    if isinstance(s, IfThenElse):
        then = _drop(s.then_case, found)
        if found.get(id(s)) is not None:
            return then
        other = None if s.else_case is None else _drop(s.else_case, found)
        return IfThenElse(s.condition, then, other)
    return s


def _with(loop: For, **changes) -> For:
    return replace(loop, **changes)
