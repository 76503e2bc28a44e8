"""Generic traversal and rewriting of IR trees, defined once for every node class.

Nodes are frozen dataclasses; their children are the fields holding IR nodes (``Expr``,
``Stmt``, ``Range``, ``IterVar``, ``BufferRegion``) or tuples of them. ``Buffer`` is a leaf that
rewrites can swap through ``buffer_map``. A rewrite rebuilds only the path to what changed, so
unchanged subtrees are shared between the old and the new function.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, Mapping, Optional

from .buffer import Buffer
from .expr import Expr, Var, convert
from .stmt import BufferRegion, IterVar, Range, Stmt

NODE_TYPES = (Expr, Stmt, Range, IterVar, BufferRegion)

_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        _FIELDS[cls] = names
    return names


def children(node: Any) -> Iterator[Any]:
    """The direct IR-node children of ``node``, in field order."""
    for name in _field_names(type(node)):
        v = getattr(node, name)
        if isinstance(v, NODE_TYPES):
            yield v
        elif isinstance(v, tuple):
            for x in v:
                if isinstance(x, NODE_TYPES):
                    yield x


def pre_order(node: Any) -> Iterator[Any]:
    """Every IR node under ``node`` (itself first), depth-first, pre-order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(children(n))))


def post_order_visit(node: Any, fn: Callable[[Any], None]) -> None:
    for n in pre_order(node):
        fn(n)


def transform(
    node: Any,
    post: Callable[[Any], Any],
    pre: Optional[Callable[[Any], Any]] = None,
    buffer_map: Optional[Mapping[Buffer, Buffer]] = None,
) -> Any:
    """Rebuild ``node`` bottom-up.

    ``pre(n)`` may return a replacement that is used as is (its subtree is not visited);
    ``post(n)`` receives each node after its children were rebuilt and returns the node to use.
    ``buffer_map`` swaps buffers in every field that holds one.
    """
    memo: dict[int, Any] = {}

    def visit(n: Any) -> Any:
        key = id(n)
        if key in memo:
            return memo[key]
        if pre is not None:
            r = pre(n)
            if r is not None:
                memo[key] = r
                return r
        changes = {}
        for name in _field_names(type(n)):
            v = getattr(n, name)
            nv = rebuild(v)
            if nv is not v:
                changes[name] = nv
        out = dataclasses.replace(n, **changes) if changes else n
        out = post(out)
        memo[key] = out
        return out

    def rebuild(v: Any) -> Any:
        if isinstance(v, NODE_TYPES):
            return visit(v)
        if isinstance(v, tuple) and v and isinstance(v[0], NODE_TYPES + (Buffer,)):
            nv = tuple(rebuild(x) for x in v)
            return v if all(a is b for a, b in zip(nv, v)) else nv
        if buffer_map and isinstance(v, Buffer):
            return buffer_map.get(v, v)
        return v

    return visit(node)


def _identity(n: Any) -> Any:
    return n


def substitute(node: Any, vmap: Mapping[Var, Any]) -> Any:
    """Replace variables by expressions (``vmap`` maps ``Var`` objects, by identity)."""
    if not vmap:
        return node
    table = {v: convert(e) for v, e in vmap.items()}

    def pre(n: Any) -> Any:
        if isinstance(n, Var):
            return table.get(n, n)
        return None

    return transform(node, _identity, pre)


def replace_buffers(node: Any, bmap: Mapping[Buffer, Buffer]) -> Any:
    return transform(node, _identity, buffer_map=bmap) if bmap else node


def free_vars(node: Any) -> set[Var]:
    """Variables used under ``node`` (including those it binds)."""
    return {n for n in pre_order(node) if isinstance(n, Var)}


def uses_var(node: Any, var: Var) -> bool:
    return any(n is var for n in pre_order(node))
