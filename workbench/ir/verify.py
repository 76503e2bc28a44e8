"""The IR verifier: rules every function must satisfy, checked in one walk.

``verify(func)`` raises :class:`~workbench.errors.IRVerifyError` listing every violation:

* scoping: a variable is used only inside what binds it (a loop var inside its loop, a block
  iterator inside its block), and a block body reaches enclosing loops only through its
  iterators (a loop var bound outside the block must not appear inside it);
* blocks: names are unique; a ``BlockRealize`` binds exactly one value per iterator; its
  predicate is a bool;
* buffers: every buffer used is a parameter or allocated by an enclosing block (or
  ``Allocate``), and allocated once; loads, stores and regions index every dimension; a
  stored value has the buffer's dtype;
* loops: a constant extent is positive; a ``thread_binding`` loop names a known thread tag;
  an ``if`` condition is a bool;
* bounds (:func:`bounds_problems`): no load or store is *provably* outside its buffer's shape.

The bounds rule is conservative on purpose: an access is reported only with a witness, a point
of the loop nest that is provably reached (every loop range holds it, every enclosing ``if``,
block predicate (``T.where``), ``if_then_else`` condition and reduction-init condition is true
there) at which an index is provably outside ``[0, extent)``. Interval bounds over the loop
ranges say where to look (an access they prove in bounds costs nothing more); the witness is the
corner of the loop ranges (narrowed by simple guards such as ``3 <= j``) that pushes the index
furthest out, evaluated exactly. So a padding stage whose reads are guarded is never reported,
and an access that cannot be decided (a data-dependent index, a guard not met at the corner) is
left to the run-time checks of the python target and of ``wb.build(..., check_bounds=True)``.
``create_func`` and ``parse`` raise :class:`~workbench.errors.OutOfBoundsError` for it, and the
schedule refuses a primitive whose result has a new one.

Primitives may call it in tests (and in debug runs) to catch a rewrite that broke the IR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from ..errors import IRVerifyError, OutOfBoundsError
from .buffer import Buffer
from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    Add,
    And,
    BufferLoad,
    Div,
    Expr,
    FloorDiv,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Select,
    Sub,
    Var,
    is_int,
)
from .arith import evaluate
from .arith import interval as ivl
from .arith.simplifier import Simplifier
from .func import PrimFunc
from .functor import children, free_vars, pre_order, substitute
from .stmt import (
    REDUCE,
    THREAD_TAGS,
    Allocate,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    SeqStmt,
    Range,
    Stmt,
)

__all__ = ["verify", "verify_bounds", "bounds_problems", "BoundsProblem"]


def verify(func: PrimFunc) -> None:
    """Raise ``IRVerifyError`` if ``func`` breaks an IR rule (see the module docstring)."""
    problems = _Verifier(func).run()
    problems += [str(p) for p in bounds_problems(func)]
    if problems:
        raise IRVerifyError(func.name, problems)


def verify_bounds(func: PrimFunc) -> None:
    """Raise :class:`~workbench.errors.OutOfBoundsError` (a ``ValueError``) if an access of
    ``func`` is provably out of its buffer's bounds (see the module docstring)."""
    problems = bounds_problems(func)
    if problems:
        raise OutOfBoundsError(func.name, [str(p) for p in problems])


class _Verifier:
    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.problems: dict[str, None] = {}  # ordered set: one message per distinct problem
        #: every binding site in the function, to tell "out of scope" from "never bound"
        self.binder: dict[Var, str] = {}
        for n in pre_order(func.body):
            if isinstance(n, For):
                self.binder.setdefault(n.loop_var, f"the loop var of loop {n.loop_var.name!r}")
            elif isinstance(n, Block):
                for iv in n.iter_vars:
                    self.binder.setdefault(iv.var, f"an iterator of block {n.name!r}")
        self.bound: dict[Var, tuple[str, int]] = {}  # var in scope -> ("loop" | "iter", depth)
        for v in func.size_vars:  # bound by the call: in scope everywhere
            self.bound[v] = ("size", 0)
        self.buffers: set[Buffer] = set(func.params)
        self.allocated: set[Buffer] = set()
        self.block_names: set[str] = set()
        self.blocks: list[str] = []  # enclosing block names, innermost last

    def run(self) -> list[str]:
        self.stmt(self.func.body)
        return list(self.problems)

    def report(self, message: str) -> None:
        where = f"block {self.blocks[-1]!r}: " if self.blocks else ""
        self.problems[where + message] = None

    # expressions and regions ----------------------------------------------------------
    def expr(self, e: Expr) -> None:
        for n in pre_order(e):
            if isinstance(n, Var):
                self.var(n)
            elif isinstance(n, BufferLoad):
                self.buffer(n.buffer, len(n.indices), "loads")

    def var(self, v: Var) -> None:
        scope = self.bound.get(v)
        if scope is None:
            what = self.binder.get(v)
            self.report(
                f"variable {v.name!r} is used outside its scope ({what})"
                if what
                else f"variable {v.name!r} is used but never bound"
            )
        elif scope[0] == "loop" and scope[1] < len(self.blocks):
            self.report(
                f"loop var {v.name!r} of an enclosing loop outside the block is used "
                f"directly inside it; bind it to a block iterator instead"
            )

    def buffer(self, b: Buffer, n_indices: int, verb: str) -> None:
        if b not in self.buffers:
            self.report(f"buffer {b.name!r} is neither a parameter nor allocated by an enclosing block")
        if n_indices != b.ndim:
            self.report(f"{verb} buffer {b.name!r} ({b.ndim}-d) with {n_indices} indices")

    def regions(self, regions: Iterable[BufferRegion], kind: str) -> None:
        for r in regions:
            self.buffer(r.buffer, len(r.region), f"{kind} region of")
            for rng in r.region:
                self.expr(rng.min)
                self.expr(rng.extent)

    def condition(self, e: Expr, what: str) -> None:
        self.expr(e)
        if e.dtype != "bool":
            self.report(f"{what} {e} has dtype {e.dtype}, expected bool")

    # statements -----------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        t = type(s)
        if type(s) is SeqStmt:
            for x in s.seq:
                self.stmt(x)
        elif type(s) is For:
            self.loop(s)
        elif type(s) is BlockRealize:
            self.realize(s)
        elif type(s) is BufferStore:
            self.buffer(s.buffer, len(s.indices), "stores into")
            for i in s.indices:
                self.expr(i)
            self.expr(s.value)
            if s.value.dtype != s.buffer.dtype:
                self.report(f"stores a {s.value.dtype} value into {s.buffer.dtype} buffer {s.buffer.name!r}")
        elif type(s) is IfThenElse:
            self.condition(s.condition, "if condition")
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
        elif type(s) is Evaluate:
            self.expr(s.value)
        elif type(s) is Allocate:
            fresh = self.allocate((s.buffer,))
            self.stmt(s.body)
            self.buffers.difference_update(fresh)
        elif type(s) is Block:
            self.report(f"block {s.name!r} appears without a BlockRealize")
        else:
            self.report(f"unknown statement {t.__name__}")

    def loop(self, s: For) -> None:
        name = s.loop_var.name
        self.expr(s.min)
        self.expr(s.extent)
        if isinstance(s.extent, IntImm) and s.extent.value <= 0:
            self.report(f"loop {name!r} has non-positive extent {s.extent.value}")
        if s.kind == ForKind.THREAD_BINDING and s.thread_tag is None:
            self.report(f"loop {name!r} is a thread_binding loop without a thread tag")
        if s.thread_tag is not None and s.thread_tag not in THREAD_TAGS:
            self.report(f"loop {name!r} has unknown thread tag {s.thread_tag!r}")
        self.scoped([s.loop_var], "loop", lambda: self.stmt(s.body))

    def realize(self, r: BlockRealize) -> None:
        b = r.block
        if len(r.iter_values) != len(b.iter_vars):
            self.report(
                f"block {b.name!r} has {len(b.iter_vars)} iterators but is bound to "
                f"{len(r.iter_values)} values"
            )
        for v in r.iter_values:
            self.expr(v)
        self.condition(r.predicate, f"predicate of block {b.name!r}")
        if b.name in self.block_names:
            self.report(f"duplicate block name {b.name!r}")
        self.block_names.add(b.name)
        for iv in b.iter_vars:
            self.expr(iv.dom.min)
            self.expr(iv.dom.extent)
        self.blocks.append(b.name)
        fresh = self.allocate(b.alloc_buffers)
        self.scoped([iv.var for iv in b.iter_vars], "iter", lambda: self.block_contents(b))
        self.buffers.difference_update(fresh)
        self.blocks.pop()

    def block_contents(self, b: Block) -> None:
        self.regions(b.reads, "reads")
        self.regions(b.writes, "writes")
        if b.init is not None:
            self.stmt(b.init)
        self.stmt(b.body)

    # scopes ---------------------------------------------------------------------------
    def allocate(self, bufs: Iterable[Buffer]) -> list[Buffer]:
        """Make ``bufs`` visible; returns those to hide again when their scope ends."""
        fresh = []
        for b in bufs:
            if b in self.buffers or b in self.allocated:
                what = "a parameter" if b in self.func.params else "already allocated"
                self.report(f"allocates buffer {b.name!r}, which is {what}")
            else:
                fresh.append(b)
            self.allocated.add(b)
        self.buffers.update(fresh)
        return fresh

    def scoped(self, variables: list[Var], kind: str, visit: Callable[[], None]) -> None:
        """Run ``visit`` with ``variables`` bound (restoring the outer binding afterwards)."""
        saved = [(v, self.bound.get(v)) for v in variables]
        for v in variables:
            if v in self.bound:
                self.report(f"variable {v.name!r} is bound again inside its own scope")
            self.bound[v] = (kind, len(self.blocks))
        visit()
        for v, old in saved:
            if old is None:
                self.bound.pop(v, None)
            else:
                self.bound[v] = old


# ------------------------------------------------------------------------------------------
# bounds


@dataclass(frozen=True)
class BoundsProblem:
    """An access provably out of bounds: ``index`` (as written in the block) of dimension
    ``dim`` of ``buffer`` takes ``value`` at ``point`` (loop variable -> value), which is reached,
    while the buffer's extent there is ``extent``."""

    block: Optional[str]
    verb: str  # "reads" | "writes"
    buffer: str
    access: str  # the access as written, e.g. "B[i, j]"
    dim: int
    index: str
    value: int
    extent: int
    point: tuple[tuple[str, int], ...]

    @property
    def key(self) -> tuple:
        """What stays the same when a primitive renames loops or rewrites the index."""
        return (self.block, self.verb, self.buffer, self.dim)

    def __str__(self) -> str:
        where = f"block {self.block!r}: " if self.block else ""
        at = ", ".join(f"{n}={v}" for n, v in self.point)
        side = f"{self.value} < 0" if self.value < 0 else f"{self.value} >= {self.extent}"
        return (
            f"{where}{self.verb} {self.access} out of bounds: index {self.index} of dimension "
            f"{self.dim} reaches {self.value}, but {self.buffer} has extent {self.extent} there "
            f"(valid 0..{self.extent - 1}; {side})" + (f", e.g. at {at}" if at else "")
        )


def bounds_problems(func: PrimFunc) -> list[BoundsProblem]:
    """Every access of ``func`` that is provably out of bounds at a reached point (see the
    module docstring: conservative, an undecided access is not listed)."""
    checker = _BoundsChecker()
    # a witness point takes every size variable at 1: what is out of bounds there is out of
    # bounds in a real call; what depends on a larger size is not decided (not listed)
    checker.sizes = dict.fromkeys(func.size_vars, 1)
    return checker.run(func.body)


_CMP = (LT, LE, GT, GE, EQ)


class _BoundsChecker:
    """One walk with the loops, block bindings and guards in scope.

    The fast path bounds an index over ``ranges``: the loops' ranges, and for each block
    iterator the interval its binding spans (sound, if loose: iterators bound to one loop lose
    their correlation). Only an index it cannot prove in bounds takes the slow path, which
    substitutes the bindings (into loop variables only) and looks for a witness.
    """

    def __init__(self) -> None:
        self.loops: list[tuple[Var, Range]] = []
        self.ranges: dict[Var, Range] = {}
        self.vmap: dict[Var, Expr] = {}  # block iterator -> its binding, as written
        self.guards: list[Expr] = []  # as written (in iterators and loop variables)
        self.blocks: list[str] = []
        self.found: dict[tuple, BoundsProblem] = {}
        self.sizes: dict[Var, int] = {}  # size variable -> its value at witness points
        # one simplification session over the live ranges (its memo serves every access);
        # a fresh one where a variable is bound a second time (its old facts are stale)
        self.sim = Simplifier(self.ranges)
        self.bound_vars: set[Var] = set()

    def run(self, body: Stmt) -> list[BoundsProblem]:
        self.stmt(body)
        return list(self.found.values())

    def resolve(self, e: Expr) -> Expr:
        """``e`` in loop variables only (block iterators replaced by their bindings)."""
        for _ in range(len(self.blocks) + 1):
            if type(e) is IntImm or not (free_vars(e) & self.vmap.keys()):
                break
            e = substitute(e, self.vmap)
        return e

    def bind(self, v: Var, rng: Optional[Range]) -> Optional[Range]:
        """Give ``v`` range ``rng`` (None: unknown); returns the range it had."""
        old = self.ranges.get(v)
        if v in self.bound_vars:
            self.sim = Simplifier(self.ranges)
        self.bound_vars.add(v)
        if rng is None:
            self.ranges.pop(v, None)
        else:
            self.ranges[v] = rng
        return old

    def unbind(self, v: Var, old: Optional[Range]) -> None:
        if old is None:
            self.ranges.pop(v, None)
        else:
            self.ranges[v] = old

    def guarded(self, cond: Expr, visit: Callable[[], None]) -> None:
        if type(cond) is IntImm and cond.value:
            visit()
            return
        self.guards.append(cond)
        try:
            visit()
        finally:
            self.guards.pop()

    # statements -------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        t = type(s)
        if t is SeqStmt:
            for x in s.seq:  # type: ignore[attr-defined]
                self.stmt(x)
        elif t is For:
            self.loop(s)  # type: ignore[arg-type]
        elif t is BlockRealize:
            self.realize(s)  # type: ignore[arg-type]
        elif t is BufferStore:
            st: Any = s
            for i in st.indices:
                self.expr(i)
            self.expr(st.value)
            self.access(st.buffer, st.indices, "writes")
        elif t is IfThenElse:
            c: Any = s
            self.expr(c.condition)
            self.guarded(c.condition, lambda: self.stmt(c.then_case))
            if c.else_case is not None:
                self.guarded(Not(c.condition), lambda: self.stmt(c.else_case))
        elif t is Evaluate:
            self.expr(s.value)  # type: ignore[attr-defined]
        elif t is Allocate or t is Block:
            self.stmt(s.body)  # type: ignore[attr-defined]

    def loop(self, s: For) -> None:
        v = s.loop_var
        rng = Range(s.min, s.extent)
        old = self.bind(v, rng)
        self.loops.append((v, rng))
        try:
            self.stmt(s.body)
        finally:
            self.loops.pop()
            self.unbind(v, old)

    def realize(self, r: BlockRealize) -> None:
        b = r.block
        values = r.iter_values
        for v in values:
            self.expr(v)
        spans: list[Optional[Range]] = []
        for v in values:
            lo, hi = self.span(v)
            if lo is None or hi is None or not is_int(v.dtype):
                spans.append(None)
            else:
                spans.append(Range(IntImm(lo, v.dtype), IntImm(hi - lo + 1, v.dtype)))
        olds = [self.bind(it.var, rng) for it, rng in zip(b.iter_vars, spans)]
        saved = dict(self.vmap)
        self.vmap.update((it.var, v) for it, v in zip(b.iter_vars, values))
        self.blocks.append(b.name)

        def contents() -> None:
            if b.init is not None:
                init: Stmt = b.init
                first: Expr = IntImm(1, "bool")
                for it in b.iter_vars:
                    if it.iter_type == REDUCE:
                        first = And(first, EQ(it.var, it.dom.min))
                self.guarded(first, lambda: self.stmt(init))
            self.stmt(b.body)

        try:
            self.guarded(r.predicate, contents)
        finally:
            self.blocks.pop()
            self.vmap = saved
            for it, old in zip(b.iter_vars, olds):
                self.unbind(it.var, old)

    def span(self, e: Expr) -> tuple[Optional[int], Optional[int]]:
        """Inclusive constant bounds of ``e`` over the ranges in scope (None: unbounded)."""
        if type(e) is IntImm:
            return e.value, e.value
        return ivl.to_public(self.sim.bound(self.sim.visit(e)))

    # expressions ------------------------------------------------------------------------
    def expr(self, e: Expr) -> None:
        t = type(e)
        if t is IntImm or t is Var:
            return
        if t is Select:
            sel: Any = e
            self.expr(sel.condition)
            self.guarded(sel.condition, lambda: self.expr(sel.true_value))
            self.guarded(Not(sel.condition), lambda: self.expr(sel.false_value))
        elif t is And or t is Or:  # the right side matters only where the left does not decide
            op: Any = e
            self.expr(op.a)
            self.guarded(op.a if t is And else Not(op.a), lambda: self.expr(op.b))
        elif t is BufferLoad:
            ld: Any = e
            for i in ld.indices:
                self.expr(i)
            self.access(ld.buffer, ld.indices, "reads")
        else:
            for c in children(e):
                if isinstance(c, Expr):
                    self.expr(c)

    def access(self, buf: Buffer, indices: tuple[Expr, ...], verb: str) -> None:
        for d, (idx, extent) in enumerate(zip(indices, buf.shape)):
            if not is_int(idx.dtype):
                continue
            if not isinstance(extent, int):
                # a symbolic extent (size variable): whether ``idx < n`` holds for every n is not
                # decided here; nothing is reported rather than a false positive
                continue
            lo, hi = self.span(idx)
            if lo is not None and hi is not None and 0 <= lo and hi < extent:
                continue  # the fast path: proved in bounds
            if self.guards and self.in_bounds_where_guarded(idx, extent):
                continue  # a padding read: in bounds where its guard lets it through
            x = self.resolve(idx)
            for sign in (1, -1):
                hit = self.witness(x, sign, extent)
                if hit is None:
                    continue
                value, env = hit
                used = free_vars(x)
                block = self.blocks[-1] if self.blocks else None
                access = f"{buf.name}[{', '.join(str(i) for i in indices)}]"
                key = (block, verb, access, d)
                if key not in self.found:
                    point = tuple((v.name, env[v]) for v, _ in self.loops if v in used)
                    self.found[key] = BoundsProblem(
                        block, verb, buf.name, access, d, str(idx), value, extent, point
                    )
                break

    def in_bounds_where_guarded(self, idx: Expr, extent: int) -> bool:
        """Whether ``idx`` is in ``[0, extent)`` once the variables' ranges are narrowed by
        the simple guards in scope (``3 <= vj and vj < 17``)."""
        narrowed = self.narrowed(self.guards)
        if not narrowed:
            return False
        ranges = dict(self.ranges)
        for v, (nlo, nhi) in narrowed.items():
            lo, hi = self.span(v)
            lo = nlo if lo is None else lo if nlo is None else max(lo, nlo)
            hi = nhi if hi is None else hi if nhi is None else min(hi, nhi)
            if lo is None or hi is None:
                continue
            if lo > hi:
                return True  # never reached
            ranges[v] = Range(IntImm(lo, v.dtype), IntImm(hi - lo + 1, v.dtype))
        sim = Simplifier(ranges)
        lo, hi = ivl.to_public(sim.bound(sim.visit(idx)))
        return lo is not None and hi is not None and 0 <= lo and hi < extent

    def witness(self, x: Expr, sign: int, extent: int) -> Optional[tuple[int, dict]]:
        """``(value, point)``: a reached point where ``x`` is out of ``[0, extent)``, looking
        where ``x`` is largest (``sign`` 1) or smallest (-1); None when none is found.

        The point starts at the corner of the loop ranges (narrowed by simple guards) that
        pushes ``x`` out; where a guard fails there (``T.where(io * 4 + ii < 11)``), one
        variable at a time, innermost first, is moved back by bisection to the last value at
        which every guard holds. Whatever the search finds is checked by evaluation."""
        direction: dict[Var, int] = {}
        _directions(x, sign, direction)
        guards = [self.resolve(g) for g in self.guards]
        narrowed = self.narrowed(guards)
        ranges = [(v, self.resolve(r.min), self.resolve(r.extent)) for v, r in self.loops]
        errors = (KeyError, TypeError, ZeroDivisionError, ValueError, OverflowError)

        def span(v: Var, lo_e: Expr, ext_e: Expr, env: dict) -> tuple[int, int]:
            lo = evaluate(lo_e, env)
            hi = lo + evaluate(ext_e, env) - 1
            nlo, nhi = narrowed.get(v, (None, None))
            return (lo if nlo is None else max(lo, nlo)), (hi if nhi is None else min(hi, nhi))

        def reached(env: dict) -> bool:
            try:
                for v, lo_e, ext_e in ranges:
                    lo, hi = span(v, lo_e, ext_e, env)
                    if not lo <= env[v] <= hi:
                        return False
                return all(evaluate(g, env) is True for g in guards)
            except errors:
                return False

        env: dict[Var, int] = dict(self.sizes)
        try:
            for v, lo_e, ext_e in ranges:
                lo, hi = span(v, lo_e, ext_e, env)
                if lo > hi:
                    return None
                env[v] = hi if direction.get(v, -sign) > 0 else lo
        except errors:
            return None  # a variable with no value (data-dependent, unbound), or not an int
        if not reached(env):
            for v, lo_e, ext_e in reversed(ranges):
                if v not in direction:
                    continue
                try:
                    lo, hi = span(v, lo_e, ext_e, env)
                except errors:
                    return None
                trial = dict(env)
                good, bad = (lo, env[v]) if env[v] == hi else (hi, env[v])
                trial[v] = good
                if good == bad or not reached(trial):
                    continue
                while abs(bad - good) > 1:  # the guards are taken as monotonic: checked below
                    trial[v] = mid = (good + bad) // 2
                    good, bad = (mid, bad) if reached(trial) else (good, mid)
                trial[v] = good
                env = trial
                break
            else:
                return None
        try:
            value = evaluate(x, env)
        except errors:
            return None
        if not isinstance(value, int) or 0 <= value < extent or not reached(env):
            return None
        return value, env

    def narrowed(self, guards: list[Expr]) -> dict[Var, tuple[Optional[int], Optional[int]]]:
        """Per loop variable, the bounds that guards of the form ``c*v + k <op> 0`` give."""
        out: dict[Var, tuple[Optional[int], Optional[int]]] = {}
        if not guards:
            return out
        sim = Simplifier({})
        conjuncts: list[Expr] = []
        for g in guards:
            stack = [g]
            while stack:
                c = stack.pop()
                if type(c) is And:
                    stack.extend((c.a, c.b))
                elif type(c) in _CMP and is_int(c.a.dtype):  # type: ignore[attr-defined]
                    conjuncts.append(c)
        for c in conjuncts:
            op: Any = c
            try:
                form = sim.lin(Sub(op.a, op.b))
            except Exception:  # noqa: BLE001 - a form we cannot normalize narrows nothing
                continue
            if len(form.terms) != 1:
                continue
            ((v, k),) = form.terms.items()
            if type(v) is not Var or v not in self.ranges:
                continue
            # k*v + const <op> 0, as k*v <= b or k*v >= b
            t, b = type(c), -form.const
            lo, hi = out.get(v, (None, None))
            if t is EQ:
                if b % k:
                    continue
                lo = b // k if lo is None else max(lo, b // k)
                hi = b // k if hi is None else min(hi, b // k)
            else:
                if t is LT or t is GT:
                    b += -1 if t is LT else 1
                at_most = (t is LT or t is LE) == (k > 0)  # v is bounded from above
                if at_most:
                    q = b // k
                    hi = q if hi is None else min(hi, q)
                else:
                    q = -(-b // k)
                    lo = q if lo is None else max(lo, q)
            out[v] = (lo, hi)
        return out


def _directions(e: Expr, sign: int, out: dict[Var, int]) -> None:
    """For each variable of ``e``, which end of its range moves ``sign * e`` up (first seen
    wins; only a heuristic: the witness is checked by evaluation)."""
    t = type(e)
    if t is Var:
        out.setdefault(e, sign)  # type: ignore[arg-type]
    elif t is Add or t is Min or t is Max:
        _directions(e.a, sign, out)  # type: ignore[attr-defined]
        _directions(e.b, sign, out)  # type: ignore[attr-defined]
    elif t is Sub:
        _directions(e.a, sign, out)  # type: ignore[attr-defined]
        _directions(e.b, -sign, out)  # type: ignore[attr-defined]
    elif t is Mul:
        a, b = e.a, e.b  # type: ignore[attr-defined]
        if type(b) is IntImm and b.value:
            _directions(a, sign if b.value > 0 else -sign, out)
        elif type(a) is IntImm and a.value:
            _directions(b, sign if a.value > 0 else -sign, out)
    elif (t is FloorDiv or t is Div) and type(e.b) is IntImm and e.b.value > 0:  # type: ignore[attr-defined]
        _directions(e.a, sign, out)  # type: ignore[attr-defined]
