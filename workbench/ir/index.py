"""An index of an immutable function's statement tree, and path-copying replacement.

Schedule primitives, analyses and lowering passes never walk the tree their own way: they ask
:func:`index` (built once per ``PrimFunc`` object, lazily, on the statement skeleton only —
expressions are not visited) for a loop by its variable, a block by its name, the parent of a
statement, the loops above a block or the blocks below a statement; then they build the new
subtree and call :func:`replace`, which copies only the path from the root to what changed and
shares everything else.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Iterator, Mapping, Optional

from ..errors import InternalError
from .expr import Var
from .func import PrimFunc
from .stmt import Allocate, Block, BlockRealize, For, IfThenElse, Range, SeqStmt, Stmt, seq


def _stmt_children(node: Stmt) -> tuple[Stmt, ...]:
    """The statements directly under ``node`` (expressions are not statements)."""
    if isinstance(node, For):
        return (node.body,)
    if isinstance(node, BlockRealize):
        return (node.block,)
    if isinstance(node, Block):
        return (node.body,) if node.init is None else (node.init, node.body)
    if isinstance(node, SeqStmt):
        return node.seq
    if isinstance(node, IfThenElse):
        return (node.then_case,) if node.else_case is None else (node.then_case, node.else_case)
    if isinstance(node, Allocate):
        return (node.body,)
    return ()


class FuncIndex:
    """Lookup tables of one function's statement tree (never mutated after construction).

    ``loops``: loop var -> For; ``realizes``: block name -> BlockRealize (in pre-order);
    ``parent``: statement -> the statement containing it (a Block's parent is its BlockRealize;
    the root realize has none); ``order``: statement -> pre-order position.
    """

    __slots__ = ("loops", "realizes", "parent", "order", "__weakref__")

    def __init__(self, body: Stmt):
        self.loops: dict[Var, For] = {}
        self.realizes: dict[str, BlockRealize] = {}
        self.parent: dict[Stmt, Stmt] = {}
        self.order: dict[Stmt, int] = {}
        stack: list[Stmt] = [body]
        while stack:
            node = stack.pop()
            self.order[node] = len(self.order)
            if isinstance(node, For):
                self.loops[node.loop_var] = node
            elif isinstance(node, BlockRealize):
                name = node.block.name
                if name in self.realizes:
                    raise InternalError(f"two blocks are named {name!r}; block names must be unique")
                self.realizes[name] = node
            kids = _stmt_children(node)
            for kid in kids:
                self.parent[kid] = node
            stack.extend(reversed(kids))

    # blocks ---------------------------------------------------------------------------------
    def block(self, name: str) -> Block:
        return self.realizes[name].block

    def scope(self, stmt: Stmt) -> Optional[Block]:
        """The nearest block strictly enclosing ``stmt`` (None for the root realize)."""
        node = self.parent.get(stmt)
        if isinstance(stmt, Block) and node is not None:  # enclosed by its realize: skip it
            node = self.parent.get(node)
        while node is not None and not isinstance(node, Block):
            node = self.parent.get(node)
        return node

    def child_realizes(self, stmt: Stmt) -> list[BlockRealize]:
        """Realizes under ``stmt`` that are not inside another block below it, in order."""
        start = stmt.block if isinstance(stmt, BlockRealize) else stmt
        out: list[BlockRealize] = []
        stack = list(reversed(_stmt_children(start)))
        while stack:
            node = stack.pop()
            if isinstance(node, BlockRealize):
                out.append(node)
            else:
                stack.extend(reversed(_stmt_children(node)))
        return out

    def realizes_under(self, stmt: Stmt) -> list[BlockRealize]:
        """Every realize under ``stmt`` (nested blocks included), in pre-order."""
        out: list[BlockRealize] = []
        stack = [stmt]
        while stack:
            node = stack.pop()
            if isinstance(node, BlockRealize) and node is not stmt:
                out.append(node)
            stack.extend(reversed(_stmt_children(node)))
        return out

    # loops ----------------------------------------------------------------------------------
    def loops_above(self, stmt: Stmt) -> list[For]:
        """Loops enclosing ``stmt`` inside its block scope, outer to inner."""
        if isinstance(stmt, Block):
            stmt = self.parent[stmt]
        out: list[For] = []
        node = self.parent.get(stmt)
        while node is not None and not isinstance(node, Block):
            if isinstance(node, For):
                out.append(node)
            node = self.parent.get(node)
        out.reverse()
        return out

    def ancestors(self, stmt: Stmt) -> Iterator[Stmt]:
        node = self.parent.get(stmt)
        while node is not None:
            yield node
            node = self.parent.get(node)

    def var_ranges(self, stmt: Stmt) -> dict[Var, Range]:
        """Ranges of every variable in scope at ``stmt``: enclosing loops and the iterators of
        enclosing blocks (what the simplifier may assume about them)."""
        out: dict[Var, Range] = {}
        for node in self.ancestors(stmt):
            if isinstance(node, For):
                out[node.loop_var] = Range(node.min, node.extent)
            elif isinstance(node, Block):
                for iv in node.iter_vars:
                    out[iv.var] = iv.dom
        return out


_INDEX: "weakref.WeakKeyDictionary[PrimFunc, FuncIndex]" = weakref.WeakKeyDictionary()


def index(func: PrimFunc) -> FuncIndex:
    """The index of ``func`` (cached per function object; functions are immutable)."""
    idx = _INDEX.get(func)
    if idx is None:
        idx = _INDEX[func] = FuncIndex(func.body)
    return idx


def replace(func: PrimFunc, old: Stmt, new: Optional[Stmt]) -> PrimFunc:
    """``func`` with statement ``old`` replaced by ``new`` (None removes it from its sequence)."""
    return replace_all(func, {old: new})


def replace_all(func: PrimFunc, mapping: Mapping[Stmt, Optional[Stmt]]) -> PrimFunc:
    """``func`` with several statements replaced at once (only their ancestors are copied).

    A replacement may be None (removal; the parent must be a sequence), or a ``SeqStmt`` inside
    a sequence (spliced in). The statements to replace must be disjoint subtrees of ``func``.
    """
    idx = index(func)
    on_path: set[Stmt] = set()
    for old in mapping:
        if old is not func.body and old not in idx.parent:
            raise InternalError(f"replace: {type(old).__name__} is not a statement of {func.name}")
        on_path.update(idx.ancestors(old))

    def rebuild(node: Stmt) -> Optional[Stmt]:
        if node in mapping:
            return mapping[node]
        if node not in on_path:
            return node
        return _with_children(node, rebuild)

    body = rebuild(func.body)
    if body is None:
        raise InternalError("replace: cannot remove the root block")
    return func.with_body(body)


def _with_children(node: Stmt, rebuild) -> Stmt:
    """``node`` with each statement child ``c`` replaced by ``rebuild(c)``."""
    if isinstance(node, SeqStmt):
        kids = [rebuild(c) for c in node.seq]
        if all(a is b for a, b in zip(kids, node.seq)):
            return node
        out = seq(*[k for k in kids if k is not None])
        if isinstance(out, SeqStmt) and not out.seq:
            raise InternalError("replace: removing every statement of a sequence")
        return out
    changes = {}
    for name in ("body", "block", "init", "then_case", "else_case"):
        old = getattr(node, name, None)
        if isinstance(old, Stmt):
            new = rebuild(old)
            if new is None:
                raise InternalError(f"replace: cannot remove the {name} of a {type(node).__name__}")
            if new is not old:
                changes[name] = new
    return dataclasses.replace(node, **changes) if changes else node  # type: ignore[type-var]
