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
  an ``if`` condition is a bool.

Primitives may call it in tests (and in debug runs) to catch a rewrite that broke the IR.
"""

from __future__ import annotations

from typing import Callable, Iterable

from ..errors import IRVerifyError
from .buffer import Buffer
from .expr import BufferLoad, Expr, IntImm, Var
from .func import PrimFunc
from .functor import pre_order
from .stmt import (
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
    Stmt,
)

__all__ = ["verify"]


def verify(func: PrimFunc) -> None:
    """Raise ``IRVerifyError`` if ``func`` breaks an IR rule (see the module docstring)."""
    problems = _Verifier(func).run()
    if problems:
        raise IRVerifyError(func.name, problems)


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
