"""Rewriting the bindings of the blocks under a statement after loop variables changed.

A loop variable is used by the loop headers and ``IfThenElse`` conditions between it and the
next blocks, and by those blocks' iterator bindings and predicates. A block with iterators sees
only them, but an opaque block (no iterators, as TVM allows) may use the enclosing loop
variables anywhere: in its reads/writes regions, its body and the loops, bindings and
predicates of the blocks nested in it. So when a primitive replaces loop variables by
expressions of new ones (split, fuse, …), the skeleton is rewritten, and so is every block
that uses one of the replaced variables; the other blocks are shared unchanged. Bindings and
predicates are simplified with the ranges of the loops around them so that
``(i_0 * 16 + i_1) // 16`` reads ``i_0``; what a block's regions and body compute is
substituted as is (as TVM does).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from ..ir.arith import simplify as arith_simplify
from ..ir.expr import And, Expr, Var, is_const
from ..ir.functor import pre_order, substitute
from ..ir.stmt import Block, BlockRealize, For, IfThenElse, Range, SeqStmt, Stmt


def simplify(expr: Expr, ranges: Mapping[Var, Range]) -> Expr:
    return arith_simplify(expr, ranges)


def conjoin(a: Expr, b: Expr) -> Expr:
    """``a and b``, dropping a constant-true side."""
    if is_const(a, 1):
        return b
    if is_const(b, 1):
        return a
    return And(a, b)


def _resimplify(e: Expr, vmap: Mapping[Var, Any], scope: Mapping[Var, Range], force: bool = False) -> Expr:
    """``e`` with ``vmap`` substituted and simplified; untouched expressions stay shared."""
    new = substitute(e, vmap)
    if new is e and not force:
        return e
    return simplify(new, scope)


def rebind(
    stmt: Stmt, vmap: Mapping[Var, Any], ranges: Mapping[Var, Range], predicate: Optional[Expr] = None
) -> Stmt:
    """``stmt`` with ``vmap`` substituted in loop headers, conditions, block bindings and the
    blocks that use a replaced variable (opaque blocks: regions, bodies, nested blocks).

    ``ranges``: the variables in scope at ``stmt`` (including any new loops the caller wraps
    around it). ``predicate``: a condition to add to every block directly under ``stmt``
    (an imperfect split's guard). Bindings and predicates are simplified with the ranges.
    """
    scope = dict(ranges)
    replaced = set(vmap)

    def uses_replaced(block: Block) -> bool:
        return any(isinstance(n, Var) and n in replaced for n in pre_order(block))

    def visit_block(block: Block) -> Block:
        if not uses_replaced(block):
            return block
        for iv in block.iter_vars:
            scope[iv.var] = iv.dom
        # the guard belongs to the blocks directly under ``stmt``, not to the ones nested in them
        body = visit(block.body, None)
        init = None if block.init is None else visit(block.init, None)
        for iv in block.iter_vars:
            del scope[iv.var]
        return dataclasses.replace(
            block,
            iter_vars=tuple(substitute(iv, vmap) for iv in block.iter_vars),
            reads=tuple(substitute(r, vmap) for r in block.reads),
            writes=tuple(substitute(r, vmap) for r in block.writes),
            body=body,
            init=init,
        )

    def visit(node: Stmt, guard: Optional[Expr]) -> Stmt:
        if isinstance(node, BlockRealize):
            values = tuple(_resimplify(v, vmap, scope) for v in node.iter_values)
            pred = node.predicate
            if guard is not None:
                pred = conjoin(pred, guard)
            pred = _resimplify(pred, vmap, scope, force=guard is not None)
            block = visit_block(node.block)
            if (
                all(a is b for a, b in zip(values, node.iter_values))
                and pred is node.predicate
                and block is node.block
            ):
                return node
            return BlockRealize(values, pred, block)
        if isinstance(node, For):
            lo, ext = substitute(node.min, vmap), substitute(node.extent, vmap)
            scope[node.loop_var] = Range(lo, ext)
            body = visit(node.body, guard)
            del scope[node.loop_var]
            if body is node.body and lo is node.min and ext is node.extent:
                return node
            return node.with_(min=lo, extent=ext, body=body)
        if isinstance(node, SeqStmt):
            kids = tuple(visit(s, guard) for s in node.seq)
            return node if all(a is b for a, b in zip(kids, node.seq)) else SeqStmt(kids)
        if isinstance(node, IfThenElse):
            cond = substitute(node.condition, vmap)
            then = visit(node.then_case, guard)
            other = None if node.else_case is None else visit(node.else_case, guard)
            if cond is node.condition and then is node.then_case and other is node.else_case:
                return node
            return IfThenElse(cond, then, other)
        return substitute(node, vmap)

    return visit(stmt, predicate)
