"""Rewriting the bindings of the blocks under a statement after loop variables changed.

In TensorIR a loop variable is used only by the loop headers and ``IfThenElse`` conditions
between it and the next blocks, and by those blocks' iterator bindings and predicates (a
block's body sees its own iterators only). So when a primitive replaces loop variables by
expressions of new ones (split, fuse, …), only that skeleton is rewritten: the blocks
themselves are shared unchanged, and the new bindings are simplified with the ranges of the
loops around them so that ``(i_0 * 16 + i_1) // 16`` reads ``i_0``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ..ir.expr import And, Expr, Var, is_const
from ..ir.functor import substitute
from ..ir.stmt import BlockRealize, For, IfThenElse, Range, SeqStmt, Stmt


def simplify(expr: Expr, ranges: Mapping[Var, Range]) -> Expr:
    from ..ir.arith import simplify as arith_simplify

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
    """``stmt`` with ``vmap`` substituted in loop headers, conditions and block bindings.

    ``ranges``: the variables in scope at ``stmt`` (including any new loops the caller wraps
    around it). ``predicate``: a condition to add to every block directly under ``stmt``
    (an imperfect split's guard). Bindings and predicates are simplified with the ranges.
    """
    scope = dict(ranges)

    def visit(node: Stmt) -> Stmt:
        if isinstance(node, BlockRealize):
            values = tuple(_resimplify(v, vmap, scope) for v in node.iter_values)
            pred = node.predicate
            if predicate is not None:
                pred = conjoin(pred, predicate)
            pred = _resimplify(pred, vmap, scope, force=predicate is not None)
            if all(a is b for a, b in zip(values, node.iter_values)) and pred is node.predicate:
                return node
            return BlockRealize(values, pred, node.block)
        if isinstance(node, For):
            lo, ext = substitute(node.min, vmap), substitute(node.extent, vmap)
            scope[node.loop_var] = Range(lo, ext)
            body = visit(node.body)
            del scope[node.loop_var]
            if body is node.body and lo is node.min and ext is node.extent:
                return node
            return node.with_(min=lo, extent=ext, body=body)
        if isinstance(node, SeqStmt):
            kids = tuple(visit(s) for s in node.seq)
            return node if all(a is b for a, b in zip(kids, node.seq)) else SeqStmt(kids)
        if isinstance(node, IfThenElse):
            cond = substitute(node.condition, vmap)
            then = visit(node.then_case)
            other = None if node.else_case is None else visit(node.else_case)
            if cond is node.condition and then is node.then_case and other is node.else_case:
                return node
            return IfThenElse(cond, then, other)
        return substitute(node, vmap)

    return visit(stmt)
