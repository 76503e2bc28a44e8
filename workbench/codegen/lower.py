"""Lowering: turn a scheduled ``PrimFunc`` into the *lowered form* every backend consumes.

The lowered body holds only ``For``, ``SeqStmt``, ``BufferStore``, ``IfThenElse``, ``Evaluate``
and ``Allocate`` statements; blocks are gone::

    for i, j, k:                              for i in range(128):
      block C:                                  for j in range(128):
        vi, vj, vk = bind(i, j, k)    ==>         for k in range(128):
        init: C[vi, vj] = 0                         if k == 0:
        C[vi, vj] += A[vi, vk] * B[vk, vj]              C[i, j] = 0
                                                    C[i, j] = C[i, j] + A[i, k] * B[k, j]

* block iterators are replaced by their bindings (then simplified, with the enclosing loops'
  ranges, when :mod:`workbench.ir.arith` is available);
* a block predicate becomes an ``IfThenElse`` around the block's statements;
* a block ``init`` runs first, guarded by "every reduce iterator is at its domain minimum"
  (TensorIR semantics: the init happens on the first iteration of the reduction);
* a loop annotated ``software_pipeline_stage`` / ``_order`` is software-pipelined
  (:mod:`.pipeline`: its statements delayed by their stages, buffers versioned);
* each buffer a block allocates becomes an ``Allocate`` around the statement that replaced it
  (the root block's ones wrap the whole body) — or, when :mod:`.compaction` can shrink it to
  the region one iteration of a loop touches, a smaller buffer allocated inside that loop,
  its indices shifted to the region's start.

Indices stay multi-dimensional (backends flatten them with ``Buffer.strides()``); loop kinds,
thread tags and annotations are kept for the backends to interpret (and the block annotations
of :data:`LOWERED_BLOCK_ANNOTATIONS`, moved to the block's outermost loop).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Optional

from ..errors import BuildError
from ..ir.arith.simplifier import Simplifier
from ..ir.buffer import Buffer
from ..ir.expr import EQ, And, BufferLoad, Expr, FloatImm, IntImm, Sub, Var, is_const
from ..ir.func import PrimFunc
from ..ir.functor import transform
from ..ir.stmt import (
    REDUCE,
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    Range,
    SeqStmt,
    Stmt,
    seq,
)
from .compaction import Placement, plan_allocations
from .pipeline import inject, is_pipelined
from .versioning import version_tails as _version_tails

#: ``PrimFunc.attrs`` key marking a function that is already in lowered form.
LOWERED_ATTR = "lowered"

_CONSTS = (IntImm, FloatImm)
#: block annotations that survive lowering on the block's outermost loop (a tensorized wmma
#: block: the CUDA backend prints that loop nest as one warp-wide wmma operation)
LOWERED_BLOCK_ANNOTATIONS = ("wmma", "wmma.layout")


def is_lowered(func: PrimFunc) -> bool:
    return bool(func.attrs.get(LOWERED_ATTR))


def lower(func: PrimFunc, compact: bool = True, version_tails: bool = False) -> PrimFunc:
    """The lowered form of ``func`` (same name and parameters, ``attrs["lowered"] = True``).

    Lowering an already lowered function returns it unchanged. ``compact=False`` keeps every
    intermediate buffer whole where its block allocates it (to measure what compaction buys).
    ``version_tails=True`` (the CPU backends) gives the body of each loop of symbolic extent a
    version without the tail predicates, for the tiles that are full (:mod:`.versioning`).
    """
    if is_lowered(func):
        return func
    body = _Lowerer(plan_allocations(func) if compact else {}).stmt(func.body, {})
    out = replace(func, body=body, attrs={**func.attrs, LOWERED_ATTR: True})
    return _version_tails(out) if version_tails else out


class _Lowerer:
    """One pass over the statement tree, carrying the block-iterator bindings in scope."""

    def __init__(self, plans: Mapping[Buffer, Placement]) -> None:
        # ranges of the loops entered so far: loop variables are unique, so one simplifier
        # session (sharing its memo across the whole body) is valid for every expression
        self.ranges: dict[Var, Range] = {}
        self.sim = Simplifier(self.ranges)
        self.enclosing: list[tuple[Var, Range]] = []
        self.plans = plans
        # compacted buffers allocated in the body of a loop, by loop variable
        self.sites: dict[Var, list[Buffer]] = {}
        for p in plans.values():
            if p.site is not None:
                self.sites.setdefault(p.site, []).append(p.buffer)

    # statements ----------------------------------------------------------------------------
    def stmt(self, s: Stmt, vmap: Mapping[Var, Expr]) -> Stmt:
        if isinstance(s, BlockRealize):
            return self.realize(s, vmap)
        if isinstance(s, For):
            lo, ext = self.expr(s.min, vmap), self.expr(s.extent, vmap)
            rng = Range(lo, ext)
            if s.loop_var in self.ranges:  # a variable bound twice: its old facts are stale
                self.ranges = dict(self.enclosing)
                self.sim = Simplifier(self.ranges)
            self.ranges[s.loop_var] = rng
            self.enclosing.append((s.loop_var, rng))
            try:
                if is_pipelined(s):
                    children = s.body.seq if isinstance(s.body, SeqStmt) else (s.body,)
                    return inject(
                        replace(s, min=lo, extent=ext),
                        [self.stmt(c, vmap) for c in children],
                        self.sites.get(s.loop_var, ()),
                    )
                body = self.stmt(s.body, vmap)
            finally:
                self.enclosing.pop()
            for buf in reversed(self.sites.get(s.loop_var, ())):
                body = Allocate(buf, body)
            if lo is s.min and ext is s.extent and body is s.body:
                return s
            return replace(s, min=lo, extent=ext, body=body)
        if isinstance(s, SeqStmt):
            return seq(*(self.stmt(x, vmap) for x in s.seq))
        if isinstance(s, BufferStore):
            buf, indices = self.access(s.buffer, s.indices, vmap)
            return BufferStore(buf, self.expr(s.value, vmap), indices)
        if isinstance(s, IfThenElse):
            return self.guard(
                self.cond(s.condition, vmap),
                self.stmt(s.then_case, vmap),
                None if s.else_case is None else self.stmt(s.else_case, vmap),
            )
        if isinstance(s, Evaluate):
            return Evaluate(self.expr(s.value, vmap))
        if isinstance(s, Allocate):
            return Allocate(s.buffer, self.stmt(s.body, vmap))
        if isinstance(s, Block):
            raise BuildError(f"lower: block {s.name!r} is not under a BlockRealize")
        raise BuildError(f"lower: unexpected statement {type(s).__name__}")

    def realize(self, r: BlockRealize, vmap: Mapping[Var, Expr]) -> Stmt:
        blk: Block = r.block
        if len(r.iter_values) != len(blk.iter_vars):
            raise BuildError(
                f"lower: block {blk.name!r} has {len(blk.iter_vars)} iterators "
                f"but {len(r.iter_values)} bindings"
            )
        values = [self.index(v, vmap) for v in r.iter_values]
        inner = dict(vmap)
        inner.update((iv.var, v) for iv, v in zip(blk.iter_vars, values))
        body = self.stmt(blk.body, inner)
        kept = {k: v for k, v in blk.annotations.items() if k in LOWERED_BLOCK_ANNOTATIONS}
        if kept and isinstance(body, For):
            body = replace(body, annotations={**body.annotations, **kept})
        if blk.init is not None:
            init = self.stmt(blk.init, inner)
            body = seq(self.guard(self.init_condition(blk, values, vmap), init), body)
        body = self.guard(self.cond(r.predicate, vmap), body)
        for buf in reversed(blk.alloc_buffers):
            plan = self.plans.get(buf)
            if plan is None:
                body = Allocate(buf, body)
            elif plan.site is None:
                body = Allocate(plan.buffer, body)
        return body

    def init_condition(self, blk: Block, values: list[Expr], vmap: Mapping[Var, Expr]) -> Optional[Expr]:
        """``value == dom.min`` for every reduce iterator (None when always true)."""
        cond: Optional[Expr] = None
        for iv, v in zip(blk.iter_vars, values):
            if iv.iter_type != REDUCE:
                continue
            lo = self.expr(iv.dom.min, vmap)
            if isinstance(v, IntImm) and isinstance(lo, IntImm) and v.value == lo.value:
                continue
            c = self.cond(EQ(v, lo), {})
            cond = c if cond is None else And(cond, c)
        return cond

    @staticmethod
    def guard(cond: Optional[Expr], then: Stmt, other: Optional[Stmt] = None) -> Stmt:
        """``if cond: then else: other``, dropping the test when ``cond`` is known true."""
        if cond is None or (isinstance(cond, _CONSTS) and cond.value and cond.dtype == "bool"):
            return then
        return IfThenElse(cond, then, other)

    # expressions ---------------------------------------------------------------------------
    def expr(self, e: Expr, vmap: Mapping[Var, Expr]) -> Expr:
        """``e`` with block iterators substituted and load indices simplified."""
        if isinstance(e, Var):
            return vmap.get(e, e)
        if isinstance(e, _CONSTS):
            return e

        def pre(n):
            if isinstance(n, Var):
                return vmap.get(n, n)
            if isinstance(n, BufferLoad):
                buf, idx = self.access(n.buffer, n.indices, vmap)
                if buf is n.buffer and all(a is b for a, b in zip(idx, n.indices)):
                    return n
                return BufferLoad(buf, idx, n.dtype)
            return None

        return transform(e, _keep, pre)

    def access(
        self, buf: Buffer, indices: tuple[Expr, ...], vmap: Mapping[Var, Expr]
    ) -> tuple[Buffer, tuple[Expr, ...]]:
        """The buffer an access goes to and its lowered indices (shifted into a compacted
        buffer's region)."""
        plan = self.plans.get(buf)
        if plan is None:
            return buf, tuple(self.index(i, vmap) for i in indices)
        out: list[Expr] = []
        for i, off, extent in zip(indices, plan.offsets, plan.buffer.shape):
            if extent == 1:  # the region holds one index: it is the start
                out.append(IntImm(0, i.dtype))
            elif is_const(off, 0):
                out.append(self.index(i, vmap))
            else:
                out.append(self.sim.simplify(Sub(self.expr(i, vmap), off)))
        return plan.buffer, tuple(out)

    def index(self, e: Expr, vmap: Mapping[Var, Expr]) -> Expr:
        out = self.expr(e, vmap)
        if out is e or isinstance(out, (Var,) + _CONSTS):
            return out
        return self.sim.simplify(out)

    def cond(self, e: Expr, vmap: Mapping[Var, Expr]) -> Expr:
        if isinstance(e, IntImm):
            return e
        return self.sim.simplify(self.expr(e, vmap))


def _keep(n):
    return n
