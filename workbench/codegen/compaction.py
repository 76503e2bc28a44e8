"""Where each intermediate buffer is allocated, and how small it can be (TVM's
PlanAndUpdateBufferAllocationLocation + CompactBufferAllocation, on block IR, for lowering).

A cache stage moved under a tile loop (``cache_write`` + ``reverse_compute_at``, ``cache_read``
+ ``compute_at``) still has its buffer allocated by the root block at full size, so a backend
keeps it in memory instead of registers. :func:`plan_allocations` finds, for every buffer some
block allocates:

* the *site*: the deepest loop whose body holds every access (their lowest common ancestor),
  moved out of vectorized loops (one allocation per SIMD lane makes no sense) and, for a GPU
  scope, out of the thread loops that share it (``global``: any); a ``shared`` buffer may sit
  inside threadIdx loops (as in TVM, one buffer serves all their threads), its region then
  relaxed over them too;
* the *region* one execution of the site touches: each access relaxed over the loops between
  the site and it, united. A dimension whose extent has a constant bound below the buffer's
  becomes that bound, and indices are shifted by the region's minimum (which may depend on
  the loops above the site)::

      Z_local = alloc((1, 64, 64))              for i_0 in range(8):
      for i_0 in range(8):                          Z_local = alloc((1, 8, 32))
        for k, i_1, j_1: Z_local[0, i_0*8 + i_1, j_1] ...   ==>   Z_local[0, i_1, j_1] ...
        for ax1, ax2:    Z[...] = Z_local[0, i_0*8 + ax1, ax2]     Z[...] = Z_local[0, ax1, ax2]

Moving the allocation into a loop gives each iteration a fresh buffer, which is only correct if
no iteration reads what an earlier one left behind. TensorIR's block semantics usually
guarantee it, but this module checks it (``_Planner.private``): every read must be preceded, in the
same execution of the site, by an unconditional write that provably covers it — an earlier
block writing a dense region that contains the read, or the read-modify-write of a reduction
whose init and reduction loops all lie below the site. When that cannot be shown, the buffer
stays where its block allocates it and is only compacted there. A buffer is moved only when it
also shrinks: moving alone would buy nothing and cost a full-size allocation per iteration.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Optional, Sequence, cast

from ..ir import expr as E
from ..ir.arith import linear
from ..ir.arith.linear import Lin
from ..ir.arith.relax import Relaxer, covers_range, relax_range, union_range
from ..ir.arith.simplifier import Simplifier
from ..ir.buffer import Buffer
from ..ir.func import PrimFunc
from ..ir.functor import children, free_vars, substitute
from ..ir.stmt import (
    REDUCE,
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    Range,
    SeqStmt,
    Stmt,
)

__all__ = ["Placement", "plan_allocations"]


@dataclass(frozen=True)
class Placement:
    """How lowering allocates one intermediate buffer: ``buffer`` (the compacted one, a new
    object) wraps the body of the loop of ``site`` (None: where its block allocated the
    original), and an access ``old[idx]`` becomes ``buffer[idx - offsets]``."""

    buffer: Buffer
    offsets: tuple[E.Expr, ...]
    site: Optional[E.Var]


def plan_allocations(func: PrimFunc) -> dict[Buffer, Placement]:
    """A :class:`Placement` for each intermediate buffer of ``func`` (block IR) that can be
    compacted; buffers left out keep their shape and place."""
    walk = _Walk()
    walk.stmt(func.body)
    if walk.rebound or not any(walk.accesses.values()):
        return {}  # (one range per loop variable is what makes the single session sound)
    planner = _Planner(Simplifier(walk.ranges), walk.alloc_depth, walk.conditions)
    plans = {}
    for buf, accesses in walk.accesses.items():
        if accesses:
            plan = planner.plan(buf, accesses, walk.alloc_depth[buf])
            if plan is not None:
                plans[buf] = plan
    return plans


# ------------------------------------------------------------------------------------------
# collecting the accesses


class _Loop:
    """One loop on the way down (a fresh object per visit, so paths compare by identity)."""

    __slots__ = ("var", "rng", "kind", "thread_tag")

    def __init__(self, var: E.Var, rng: Range, kind: ForKind, thread_tag: Optional[str]):
        self.var, self.rng, self.kind, self.thread_tag = var, rng, kind, thread_tag


@dataclass(eq=False)
class _BlockCtx:
    block: Block
    values: tuple[E.Expr, ...]  # iterator bindings, in loop variables


@dataclass(eq=False)
class _Access:
    write: bool
    indices: tuple[E.Expr, ...]  # in loop variables
    path: tuple[_Loop, ...]  # enclosing loops, outermost first
    guards: tuple[tuple, ...]  # (key, loop depth) of each enclosing condition
    order: int  # execution order within one iteration of common loops
    ctx: Optional[_BlockCtx]  # innermost block
    in_init: bool


class _Walk:
    """One pass over the block IR: loop ranges, and every access to an intermediate buffer
    with its loop path and the conditions around it."""

    def __init__(self) -> None:
        # the enclosing loops and conditions, as tuples shared by the accesses under them
        self.path: tuple[_Loop, ...] = ()
        self.guards: tuple[tuple, ...] = ()
        self.vmap: dict[E.Var, E.Expr] = {}
        self.ctx: Optional[_BlockCtx] = None
        self.in_init = False
        self.ranges: dict[E.Var, Range] = {}
        self.rebound = False  # a variable bound by two loops
        self.alloc_depth: dict[Buffer, int] = {}
        self.accesses: dict[Buffer, list[_Access]] = {}
        # the condition of each guard key that is one (a block predicate, an if's then-branch),
        # in loop variables
        self.conditions: dict[tuple, E.Expr] = {}

    def record(self, buf: Buffer, indices: Sequence[E.Expr], write: bool) -> None:
        found = self.accesses.get(buf)
        if found is not None:
            found.append(
                _Access(
                    write,
                    tuple(self.subst(i) for i in indices),
                    self.path,
                    self.guards,
                    len(found),
                    self.ctx,
                    self.in_init,
                )
            )

    def subst(self, e: E.Expr) -> E.Expr:
        """``e`` in loop variables (block iterators replaced by their bindings)."""
        t = type(e)
        if t is E.Var:
            return self.vmap.get(cast(E.Var, e), e)
        return e if t is E.IntImm else substitute(e, self.vmap)

    def expr(self, e: E.Expr) -> None:
        """Record the loads in ``e`` (a hand-written walk: this runs on every expression)."""
        t = type(e)
        if t is E.Var or t is E.IntImm or t is E.FloatImm:
            return
        if t is E.BufferLoad:
            ld = cast(E.BufferLoad, e)
            for i in ld.indices:
                self.expr(i)
            self.record(ld.buffer, ld.indices, False)
        elif isinstance(e, E.BinaryOp):
            self.expr(e.a)
            self.expr(e.b)
        elif t is E.Select:
            sel = cast(E.Select, e)
            self.expr(sel.condition)
            self.expr(sel.true_value)
            self.expr(sel.false_value)
        elif t is E.Cast:
            self.expr(cast(E.Cast, e).value)
        elif t is E.Not:
            self.expr(cast(E.Not, e).a)
        else:
            for c in children(e):
                self.expr(c)

    def guarded(self, key: tuple, s: Stmt) -> None:
        outer = self.guards
        self.guards = outer + ((key, len(self.path)),)
        self.stmt(s)
        self.guards = outer

    def stmt(self, s: Stmt) -> None:
        t = type(s)
        if t is BufferStore:
            st = cast(BufferStore, s)
            self.expr(st.value)  # the loads happen before the store
            for i in st.indices:
                self.expr(i)
            self.record(st.buffer, st.indices, True)
        elif t is SeqStmt:
            for x in cast(SeqStmt, s).seq:
                self.stmt(x)
        elif t is For:
            f = cast(For, s)
            self.expr(f.min)
            self.expr(f.extent)
            rng = Range(self.subst(f.min), self.subst(f.extent))
            self.rebound |= f.loop_var in self.ranges
            self.ranges[f.loop_var] = rng
            outer = self.path
            self.path = outer + (_Loop(f.loop_var, rng, f.kind, f.thread_tag),)
            self.stmt(f.body)
            self.path = outer
        elif t is IfThenElse:
            ite = cast(IfThenElse, s)
            self.expr(ite.condition)
            self.conditions[(id(s), "then")] = self.subst(ite.condition)
            self.guarded((id(s), "then"), ite.then_case)
            if ite.else_case is not None:
                self.guarded((id(s), "else"), ite.else_case)
        elif t is BlockRealize:
            self.realize(cast(BlockRealize, s))
        elif t is Evaluate:
            self.expr(cast(Evaluate, s).value)
        elif t is Allocate:
            self.stmt(cast(Allocate, s).body)
        elif t is Block:  # a Block outside a BlockRealize: lowering reports it
            blk = cast(Block, s)
            for c in (blk.init, blk.body):
                if c is not None:
                    self.stmt(c)

    def realize(self, r: BlockRealize) -> None:
        for v in r.iter_values:
            self.expr(v)
        self.expr(r.predicate)
        blk = r.block
        for buf in blk.alloc_buffers:
            self.alloc_depth[buf] = len(self.path)
            self.accesses[buf] = []
        values = tuple(self.subst(v) for v in r.iter_values)
        saved = self.vmap, self.ctx, self.guards, self.in_init
        self.vmap = {**self.vmap, **{iv.var: v for iv, v in zip(blk.iter_vars, values)}}
        self.ctx, self.in_init = _BlockCtx(blk, values), False
        if not E.is_const(r.predicate, 1):
            self.conditions[(id(r), "predicate")] = self.subst(r.predicate)
            self.guards += (((id(r), "predicate"), len(self.path)),)
        if blk.init is not None:
            self.in_init = True
            self.guarded((id(blk), "init"), blk.init)  # runs on the first reduction step only
            self.in_init = False
        self.stmt(blk.body)
        self.vmap, self.ctx, self.guards, self.in_init = saved


# ------------------------------------------------------------------------------------------
# deciding


class _Planner:
    """Site, privacy and region questions, in one simplification session over all loops."""

    def __init__(self, sim: Simplifier, alloc_depth: dict[Buffer, int], conditions: dict[tuple, E.Expr]):
        self.sim = sim
        self.alloc_depth = alloc_depth
        self.conditions = conditions
        self.thread_shared = False  # planning a shared-scope buffer (see relaxed())
        self._relaxers: dict[tuple, Relaxer] = {}
        self._points: dict[tuple, Range] = {}

    def plan(self, buf: Buffer, accesses: list[_Access], alloc_depth: int) -> Optional[Placement]:
        # a shared buffer under thread loops is one buffer for all their threads (TVM): its
        # region at a site inside them is relaxed over them too
        self.thread_shared = buf.scope.startswith("shared")
        site = _site_depth(buf, accesses, alloc_depth)
        placement = self.compact(buf, accesses, site)
        if placement is None or site == alloc_depth:
            return placement  # (a region that does not shrink at the site cannot above it)
        if self.private(buf, accesses, site):
            return placement
        return self.compact(buf, accesses, alloc_depth)

    # regions -------------------------------------------------------------------------------
    def relaxer(self, path: tuple[_Loop, ...], depth: int) -> Relaxer:
        """Relaxes over the loops ``path[depth:]`` (paths are shared tuples: keyed by id)."""
        key = (id(path), depth, self.thread_shared)
        found = self._relaxers.get(key)
        if found is None:
            found = self._relaxers[key] = Relaxer(self.sim, {f.var: f.rng for f in self.relaxed(path, depth)})
        return found

    def relaxed(self, path: tuple[_Loop, ...], depth: int) -> list[_Loop]:
        """The loops an access is relaxed over at depth ``depth``: ``path[depth:]``, and for a
        shared buffer the thread loops above that share it."""
        out = list(path[depth:])
        if self.thread_shared:
            out += [
                f
                for f in path[:depth]
                if f.kind == ForKind.THREAD_BINDING and not (f.thread_tag or "").startswith("blockIdx")
            ]
        return out

    def point_range(
        self, idx: E.Expr, path: tuple[_Loop, ...], depth: int, extent: Optional[int | E.Expr]
    ) -> Range:
        """The values of index ``idx`` while the loops ``path[depth:]`` run (``[0, extent)``
        where unbounded)."""
        # (a reduction reads what it writes: the same idx)
        key = (id(idx), id(path), depth, extent, self.thread_shared)
        found = self._points.get(key)
        if found is None:
            relaxer = self.relaxer(path, depth)
            form = self.sim.visit(idx)
            found = _affine_range(form, relaxer) if type(form) is Lin else None
            if found is None:
                found = relax_range(relaxer, Range(idx, E.IntImm(1, idx.dtype)), extent)
            self._points[key] = found
        return found

    def extent_bound(self, rng: Range) -> float:
        if type(rng.extent) is E.IntImm:
            return rng.extent.value
        return self.sim.bound(self.sim.visit(rng.extent))[1]

    def compact(self, buf: Buffer, accesses: list[_Access], depth: int) -> Optional[Placement]:
        """The placement in the body of loop ``depth - 1`` (depth 0: where the buffer's block
        allocates it) if the region touched there is smaller than the buffer. A symbolic
        dimension (``n``) becomes the constant extent of its region where that has one (the
        256 rows of a tile), as TVM compacts it; a constant tile beats any ``n``-sized buffer."""
        sim = self.sim
        hull: Optional[tuple[Range, ...]] = None
        for a in accesses:
            r = tuple(self.point_range(i, a.path, depth, n) for i, n in zip(a.indices, buf.shape))
            if all(_covers(self.extent_bound(x), n) for x, n in zip(r, buf.shape)):
                return None  # one access already spans the whole buffer
            hull = r if hull is None else tuple(_union(sim, x, y) for x, y in zip(hull, r))
        assert hull is not None  # a planned buffer has accesses (the site is their ancestor)
        shape: list = []
        offsets: list[E.Expr] = []
        for n, rng in zip(buf.shape, hull):
            hi = self.extent_bound(rng)
            if _covers(hi, n):
                shape.append(n)
                offsets.append(E.IntImm(0))
            else:
                shape.append(max(int(hi), 1))  # not None: it covers otherwise
                offsets.append(rng.min)
        new = buf.with_(shape=tuple(shape))
        if buf.is_symbolic:
            if buf.align:
                return None
            if new.is_symbolic and _static_size(new) >= _static_size(buf):
                return None  # the symbolic dimensions are the same: compare the static ones
        elif new.alloc_size() >= buf.alloc_size():
            return None
        site = accesses[0].path[depth - 1].var if depth > self.alloc_depth[buf] else None
        return Placement(new, tuple(offsets), site)

    # privacy -------------------------------------------------------------------------------
    def private(self, buf: Buffer, accesses: list[_Access], site: int) -> bool:
        """Does every read see a value written earlier in the same execution of the site?"""
        writes = [a for a in accesses if a.write]
        for r in accesses:
            if r.write or self.reduction_step(r, accesses, site):
                continue
            if not any(w.order < r.order and self.covers(buf, w, r) for w in writes):
                return False
        return True

    def covers(self, buf: Buffer, w: _Access, r: _Access) -> bool:
        """Whether write ``w``, over one iteration of the loops it shares with read ``r``,
        certainly writes every element ``r`` may read in that iteration.

        A condition around ``w`` that ``r`` does not share means ``w`` may not run when ``r``
        does, unless it only skips elements outside the buffer (the tail predicate
        ``v < n`` of a split symbolic loop, on the written index): ``r`` reads none of those.
        """
        d = _common_depth(w.path, r.path)
        shared = set(r.guards)
        for g in w.guards:
            if g[1] >= d and g not in shared and not self.in_bounds_guard(buf, w, g[0]):
                return False  # w may not run when r does
        if not self.dense(w, d):
            return False
        for iw, ir_ in zip(w.indices, r.indices):
            try:
                outer = self.point_range(iw, w.path, d, None)
                inner = self.point_range(ir_, r.path, d, None)
            except ValueError:  # a data-dependent index: no bound to compare
                return False
            if not covers_range(self.sim, outer, inner):
                return False
        return True

    def in_bounds_guard(self, buf: Buffer, w: _Access, key: tuple) -> bool:
        """Is the guard ``key`` of ``w`` true wherever ``w``'s indices lie in ``buf`` (each
        conjunct implied by ``0 <= index < extent`` of one dimension)?"""
        cond = self.conditions.get(key)
        if cond is None:
            return False  # a reduction's init, or an else branch
        sim = self.sim
        for c in E.conjuncts(cond):
            gap = negative_form(sim, c)  # c holds where gap < 0
            if gap is None:
                return False
            implied = False
            for idx, n in zip(w.indices, buf.shape):
                if idx.dtype not in ("int32", "int64"):
                    continue
                index = sim.lin(idx)
                extent = sim.lin(E.convert(n, idx.dtype))
                upper = _lin_sub(_lin_sub(index, extent), gap)  # (index - extent) - gap >= 0?
                lower = _lin_sub(_lin_sub(_lin_neg(index), _lin_one(index)), gap)  # (-index - 1) - gap
                if sim.symbolic_bound_lin(upper)[0] >= 0 or sim.symbolic_bound_lin(lower)[0] >= 0:
                    implied = True
                    break
            if not implied:
                return False
        return True

    def dense(self, w: _Access, depth: int) -> bool:
        """Does ``w`` write *every* point of its relaxed region over ``w.path[depth:]``?

        Each index must be affine in the relaxed loop variables (constant extents, each
        variable in one dimension only), with coefficients that leave no gaps: sorted by size,
        each at most the span of the ones before (``i_0*8 + i_1`` over i_1 < 8 is dense). A
        fused loop ``f`` seen only as ``f // c`` and ``f % c`` (``c`` dividing its extent: what
        fusing two loops and vectorizing them leaves) counts as the two loops it was made of.
        """
        loops = {f.var: f for f in self.relaxed(w.path, depth)}
        for f in loops.values():
            if (
                not isinstance(f.rng.extent, E.IntImm)
                or f.rng.extent.value < 1
                or free_vars(f.rng.min) & loops.keys()
            ):
                return False
        seen: set = set()
        split_by: dict[E.Var, object] = {}  # loop var -> its divisor, or None: used whole
        for idx in w.indices:
            terms = []
            if idx.dtype not in ("int32", "int64"):
                return False
            for atom, c in self.sim.lin(idx).terms.items():
                part = _loop_part(atom, loops)
                if part is not None:
                    key, var, divisor, extent = part
                    if key in seen or split_by.setdefault(var, divisor) != divisor:
                        return False
                    seen.add(key)
                    terms.append((abs(c), extent))
                elif free_vars(atom) & loops.keys():
                    return False
            span = 1
            for c, extent in sorted(terms):
                if c > span:
                    return False
                span += c * (extent - 1)
        return True

    def reduction_step(self, r: _Access, accesses: list[_Access], site: int) -> bool:
        """Is ``r`` the read of a reduction update whose init writes the same element, with
        every reduction loop below the site (so each execution of the site runs the whole
        reduction of the elements it touches, init first)?"""
        ctx = r.ctx
        if ctx is None or r.in_init or ctx.block.init is None:
            return False
        sim = self.sim
        init_write = any(
            a.write
            and a.in_init
            and a.ctx is ctx
            and len(a.guards) == len(r.guards) + 1
            and all(sim.same(sim.visit(x), sim.visit(y)) for x, y in zip(a.indices, r.indices))
            for a in accesses
        )
        if not init_write:
            return False
        reduce_vars: set[E.Var] = set()
        spatial_vars: set[E.Var] = set()
        for iv, v in zip(ctx.block.iter_vars, ctx.values):
            (reduce_vars if iv.iter_type == REDUCE else spatial_vars).update(free_vars(v))
        below = {f.var for f in r.path[site:]}
        return not reduce_vars & spatial_vars and reduce_vars <= below


def _loop_part(atom: E.Expr, loops: dict) -> Optional[tuple]:
    """``(key, loop var, divisor, extent)`` when ``atom`` ranges over a whole relaxed loop:
    the loop variable itself (divisor None), or ``v // c`` / ``v % c`` of one whose extent
    ``c`` divides (``v // c`` then takes extent / c values, ``v % c`` takes c)."""
    if type(atom) is E.Var and atom in loops:
        return atom, atom, None, loops[atom].rng.extent.value
    if (
        isinstance(atom, (E.FloorDiv, E.FloorMod))
        and type(atom.a) is E.Var
        and atom.a in loops
        and isinstance(atom.b, E.IntImm)
        and atom.b.value > 0
    ):
        c, extent = atom.b.value, loops[atom.a].rng.extent.value
        if extent % c == 0:
            part = extent // c if isinstance(atom, E.FloorDiv) else c
            return (atom.a, type(atom).__name__), atom.a, c, part
    return None


def _lin_sub(a: Lin, b: Lin) -> Lin:
    return linear.add(a, b, -1)


def _lin_neg(a: Lin) -> Lin:
    return linear.scale(a, -1)


def _lin_one(a: Lin) -> Lin:
    return linear.constant(1, a.dtype)


def negative_form(sim: Simplifier, cond: E.Expr) -> Optional[Lin]:
    """``g`` with ``cond`` equivalent to ``g < 0``, for an integer comparison (else None)."""
    if not isinstance(cond, (E.LT, E.LE, E.GT, E.GE)) or cond.a.dtype not in ("int32", "int64"):
        return None
    a, b = sim.lin(cond.a), sim.lin(cond.b)
    if isinstance(cond, E.LT):
        return _lin_sub(a, b)
    if isinstance(cond, E.LE):
        return _lin_sub(_lin_sub(a, b), _lin_one(a))
    if isinstance(cond, E.GT):
        return _lin_sub(b, a)
    return _lin_sub(_lin_sub(b, a), _lin_one(a))


def _common_depth(a: Sequence[_Loop], b: Sequence[_Loop]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x is not y:
            break
        n += 1
    return n


def _site_depth(buf: Buffer, accesses: list[_Access], alloc_depth: int) -> int:
    """How many loops enclose the allocation: the accesses' common loops, but not a vectorized
    loop nor a thread loop sharing the buffer's scope."""
    path = accesses[0].path
    depth = len(path)
    for a in accesses[1:]:
        depth = min(depth, _common_depth(path, a.path))
    for d in range(alloc_depth, depth):
        f = path[d]
        if f.kind == ForKind.VECTORIZED or (f.kind == ForKind.THREAD_BINDING and buf.scope == "global"):
            return d
    return depth


def _union(sim: Simplifier, a: Range, b: Range) -> Range:
    """``union_range``, short-cut for ranges from the same start (hash-consed: identical)."""
    if a.min is b.min and type(a.extent) is E.IntImm and type(b.extent) is E.IntImm:
        return a if a.extent.value >= b.extent.value else b
    return union_range(sim, a, b)


def _affine_range(form: Lin, relaxer: Relaxer) -> Optional[Range]:
    """The fast path of relaxation, for the usual tiled index ``outer + Σ c * v`` over loops
    ``v`` with constant bounds: a constant extent. None when it does not apply."""
    sim = relaxer.sim
    base: dict = {}
    lo = hi = form.const
    for atom, c in form.terms.items():
        if type(atom) is E.Var and atom in relaxer.dom:
            rng = relaxer.dom[atom]
            if type(rng.min) is not E.IntImm or type(rng.extent) is not E.IntImm:
                return None
            first, last = c * rng.min.value, c * (rng.min.value + rng.extent.value - 1)
            lo, hi = lo + min(first, last), hi + max(first, last)
        elif relaxer.depends(atom):
            return None
        else:
            base[atom] = c
    return Range(sim.to_expr(Lin(base, lo, form.dtype)), E.IntImm(hi - lo + 1, form.dtype))


def _covers(hi: Optional[float], n) -> bool:
    """An extent bounded by ``hi`` (None: unbounded) spans a dimension of ``n`` (an Expr: a
    symbolic dimension, spanned only by an unbounded extent)."""
    if not isinstance(n, int):
        return hi is None or hi == math.inf
    return hi is None or hi >= n


def _static_size(b: Buffer) -> int:
    return math.prod(s for s in b.shape if isinstance(s, int))
