"""Structural equality and hashing of IR trees, modulo variable names.

Both are defined by one canonical serialization: an iterative pre-order walk that turns a tree
into a flat list of plain tokens (class names, constants, dtypes, block names, loop kinds …).
Two trees are structurally equal iff their token lists are equal, and the hash is the sha256 of
that list, so ``hash(a) == hash(b)`` iff ``structural_equal(a, b)`` (up to sha256 collisions)
and the digest is identical in every process (it keys the tuning database).

What is compared:

* Variables by *position of definition*, never by name: a loop var or block iterator gets the
  next number where it is bound; later uses refer to that number. Free variables (bound outside
  the compared tree) are numbered at first use with ``map_free_vars=True`` (the default), or must
  be the very same object with ``map_free_vars=False``.
* Function parameters by name, shape, dtype, scope and alignment: they are the interface.
  Intermediate buffers (``alloc_buffers``, ``Allocate``) by shape, dtype, scope and alignment,
  by position, names ignored. Buffers used but not defined in the tree are free: compared like
  parameters (with ``map_free_vars=False``: by identity).
* Block names (a block's identity), loop kinds, thread tags, annotations and attributes (plain
  values, dict order ignored), constants with their dtypes. A ``PrimFunc``'s name is a label
  and is ignored, like variable names.

:func:`structural_match` is the same comparison with two relaxations (block names and buffer
names may be ignored) that also returns *how* the trees correspond: which variable and which
buffer of one stands for which of the other (what tensorize needs to bind an intrinsic).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, Mapping, Optional, cast

from .buffer import Buffer
from .expr import Expr, FloatImm, Var
from .func import PrimFunc
from .module import IRModule
from .stmt import Allocate, Block, BufferRegion, For, IterVar, Range, Stmt

__all__ = [
    "structural_equal",
    "structural_hash",
    "assert_structural_equal",
    "structural_match",
    "StructuralMatch",
]

_NODES = (Expr, Stmt, Range, IterVar, BufferRegion, PrimFunc)

#: fields that *bind* what they hold; every other Var / Buffer field is a use
_VAR_DEFS = {For: "loop_var", IterVar: "var"}
_BUFFER_DEFS = {Block: "alloc_buffers", Allocate: "buffer"}
#: fields not walked: a function's name is a label; its params are defined first, by hand
_SKIP: dict[type, tuple[str, ...]] = {PrimFunc: ("name", "params")}

_FIELD_CACHE: dict[type, tuple[tuple[str, str], ...]] = {}


def structural_equal(a: Any, b: Any, map_free_vars: bool = True) -> bool:
    """True if ``a`` and ``b`` are the same tree up to variable and intermediate-buffer names."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    return _Serializer(map_free_vars).run(a) == _Serializer(map_free_vars).run(b)


def structural_hash(node: Any, buffer_names: bool = True) -> str:
    """A stable hex digest: equal for structurally equal trees, in every process.

    ``buffer_names=False``: parameter names are left out too (what the tuning database keys a
    workload by: a matmul over ``X, Y`` is the workload of a matmul over ``A, B``)."""
    tokens = _Serializer(map_free_vars=True, buffer_names=buffer_names).run(node)
    return hashlib.sha256(repr(tokens).encode()).hexdigest()


def assert_structural_equal(a: Any, b: Any, map_free_vars: bool = True) -> None:
    """Raise ``AssertionError`` with the first differing path and both printed forms."""
    if structural_equal(a, b, map_free_vars):
        return
    where = _first_difference(a, b, lambda: _Serializer(map_free_vars, paths=True))
    raise AssertionError(f"structural mismatch at {where}\n--- first:\n{_text(a)}\n--- second:\n{_text(b)}")


@dataclass
class StructuralMatch:
    """The outcome of :func:`structural_match`; true when the trees match.

    ``vars`` / ``buffers`` map every variable / buffer *defined or first used* in the first tree
    to its counterpart in the second (empty on a mismatch); ``mismatch`` names the first
    difference (each tree's path to it and what was found there), ``""`` on a match.
    """

    vars: dict = field(default_factory=dict)
    buffers: dict = field(default_factory=dict)
    mismatch: str = ""

    def __bool__(self) -> bool:
        return not self.mismatch


def structural_match(
    a: Any, b: Any, *, map_free_vars: bool = True, block_names: bool = True, buffer_names: bool = True
) -> StructuralMatch:
    """Compare like :func:`structural_equal` and return the correspondence of the two trees.

    ``block_names=False``: blocks may be named differently. ``buffer_names=False``: buffers are
    compared by shape, dtype, scope and alignment only (parameters and free buffers included).
    """

    def serializer(paths: bool = False) -> _Serializer:
        return _Serializer(map_free_vars, paths=paths, block_names=block_names, buffer_names=buffer_names)

    if type(a) is type(b):
        sa, sb = serializer(), serializer()
        if sa.run(a) == sb.run(b):
            return StructuralMatch(
                dict(zip(sa.var_defs, sb.var_defs)), dict(zip(sa.buffer_defs, sb.buffer_defs))
            )
    return StructuralMatch(mismatch=_first_difference(a, b, lambda: serializer(paths=True)))


def _first_difference(a: Any, b: Any, make) -> str:
    """``"<path in a> (<token>) vs <path in b> (<token>)"`` for the first differing token."""
    if type(a) is not type(b):
        return f"the root: {type(a).__name__} vs {type(b).__name__}"
    sa, sb = make(), make()
    ta, tb = sa.run(a), sb.run(b)
    n = next((k for k, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))

    def at(s: _Serializer, toks: list) -> str:
        paths = s.paths or []  # the serializer was made with paths=True
        return f"{paths[n]} ({toks[n]!r})" if n < len(toks) else "<end>"

    return f"{at(sa, ta)} vs {at(sb, tb)}"


def _text(node: Any) -> str:
    try:
        return str(node)
    except TypeError:
        return repr(node)


def _plain(v: Any) -> str:
    """Canonical text of an annotation / attribute value (dict order ignored)."""
    if isinstance(v, Enum):
        v = v.value
    if v is None or isinstance(v, (bool, int, float, str)):
        return repr(v)
    if isinstance(v, Mapping):
        return "{" + ",".join(sorted(f"{_plain(k)}:{_plain(x)}" for k, x in v.items())) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_plain(x) for x in v) + "]"
    raise TypeError(
        f"cannot compare or hash an annotation value of type {type(v).__name__}: "
        f"{v!r}; use plain Python values or IR expressions"
    )


def _field_plan(cls: type) -> tuple[tuple[str, str], ...]:
    """(field name, role) for a node class; role is 'var_def', 'buffer_def', 'block_name' or
    'value'."""
    plan = _FIELD_CACHE.get(cls)
    if plan is None:
        skip = _SKIP.get(cls, ())
        var_def = next((f for k, f in _VAR_DEFS.items() if issubclass(cls, k)), None)
        buf_def = next((f for k, f in _BUFFER_DEFS.items() if issubclass(cls, k)), None)
        plan = tuple(
            (
                f.name,
                "var_def"
                if f.name == var_def
                else "buffer_def"
                if f.name == buf_def
                else "block_name"
                if cls is Block and f.name == "name"
                else "value",
            )
            for f in fields(cls)
            if f.name not in skip
        )
        _FIELD_CACHE[cls] = plan
    return plan


class _Serializer:
    """Turns a tree into canonical tokens; optionally records each token's path."""

    def __init__(
        self, map_free_vars: bool, paths: bool = False, block_names: bool = True, buffer_names: bool = True
    ) -> None:
        self.map_free = map_free_vars
        self.block_names = block_names
        self.buffer_names = buffer_names
        #: variables / buffers in order of definition (a match zips two of these lists)
        self.var_defs: list[Var] = []
        self.buffer_defs: list[Buffer] = []
        self.tokens: list[Any] = []
        self.paths: Optional[list[str]] = [] if paths else None
        self.vars: dict[Var, int] = {}  # by identity (Expr hashes by id)
        self.buffers: dict[Buffer, int] = {}
        self.n_vars = self.n_buffers = 0  # counters: a var bound twice gets a new number
        self.path = ""

    def emit(self, tok: Any) -> None:
        self.tokens.append(tok)
        if self.paths is not None:
            self.paths.append(self.path)

    def sub(self, name: str) -> str:
        """The path of a child (only built when paths are recorded: it costs time)."""
        return f"{self.path}{name}" if self.paths is not None else ""

    def run(self, root: Any) -> list[Any]:
        stack: list[tuple[Any, str]] = [(root, type(root).__name__ if self.paths is not None else "")]
        while stack:
            node, self.path = stack.pop()
            pushed: list[tuple[Any, str]] = []
            self.visit(node, pushed)
            stack.extend(reversed(pushed))
        return self.tokens

    # one node: plain fields are emitted now, child nodes are queued in field order --------
    def visit(self, node: Any, pushed: list) -> None:
        cls = type(node)
        if cls is Var:
            self.use_var(node)
            return
        if cls is Buffer:
            self.use_buffer(node)
            return
        if cls is tuple or cls is list:
            self.emit(len(node))
            pushed.extend((x, self.sub(f"[{k}]")) for k, x in enumerate(node))
            return
        if cls is IRModule:  # function names are part of a module (callers name them)
            self.emit("IRModule")
            self.emit(tuple(node))
            pushed.extend((f, self.sub(f"[{name!r}]")) for name, f in node.items())
            return
        if not isinstance(node, _NODES):
            raise TypeError(f"cannot compare or hash {cls.__name__} {node!r}")
        self.emit(cls.__name__)
        if isinstance(node, PrimFunc):
            for v in node.size_vars:  # numbered by position, as loop variables are
                self.define_var(v)
            for b in node.params:
                self.define_buffer(b, with_name=True)
        base = self.path
        for name, role in _field_plan(cls):
            v = getattr(node, name)
            if self.paths is not None:
                self.path = f"{base}.{name}"
            if role == "var_def":
                self.define_var(v)
            elif role == "buffer_def":
                for b in v if isinstance(v, tuple) else (v,):
                    self.define_buffer(b, with_name=False)
            elif role == "block_name":
                self.emit(v if self.block_names else "<block>")
            elif isinstance(v, _NODES):
                self.emit("+")
                pushed.append((v, self.path))
            elif isinstance(v, tuple) and v and isinstance(v[0], _NODES):
                self.emit(len(v))
                pushed.extend((x, self.sub(f"[{k}]")) for k, x in enumerate(v))
            elif isinstance(v, Buffer):
                self.use_buffer(v)
            elif isinstance(v, Mapping):
                self.mapping(v, pushed)
            elif cls is FloatImm and name == "value":
                self.emit(repr(float(v)))  # as text: nan must equal nan
            elif type(v) in (int, str) or v is None:
                self.emit(v)
            else:
                self.emit(_plain(v))
        self.path = base

    def mapping(self, m: Mapping, pushed: list) -> None:
        """Annotations: sorted keys; IR-valued entries are walked, others compared as text."""
        self.emit(len(m))
        for key in sorted(m, key=_plain):
            v = m[key]
            self.emit(_plain(key))
            if isinstance(v, (_NODES, Buffer)):
                self.emit("+")
                pushed.append((v, self.sub(f"[{key!r}]")))
            else:
                self.emit(_plain(v))

    def define_var(self, v: Var) -> None:
        self.var_defs.append(v)
        self.vars[v] = self.n_vars
        self.n_vars += 1
        self.emit(("def", v.dtype))

    def use_var(self, v: Var) -> None:
        n = self.vars.get(v)
        if n is not None:
            self.emit(("var", n))
        elif self.map_free:
            self.define_var(v)
        else:
            self.emit(("free_var", id(v)))

    def define_buffer(self, b: Buffer, with_name: bool) -> None:
        self.buffer_defs.append(b)
        self.buffers[b] = self.n_buffers
        self.n_buffers += 1
        name = b.name if with_name and self.buffer_names else None
        shape = tuple(s if isinstance(s, int) else self.shape_expr(s) for s in b.shape)
        self.emit(("buffer", name, shape, b.dtype, b.scope, b.align))

    def shape_expr(self, e: Expr) -> tuple:
        """A symbolic shape entry as plain tokens, its variables by number (never by name)."""
        if isinstance(e, Var):
            if e not in self.vars and self.map_free:
                self.define_var(e)
            n = self.vars.get(e)
            return ("var", n) if n is not None else ("free_var", id(e))
        parts: list = [type(e).__name__, e.dtype]
        for f in fields(cast(Any, e)):
            v = getattr(e, f.name)
            if isinstance(v, Expr):
                parts.append(self.shape_expr(v))
            elif f.name != "dtype":
                parts.append(_plain(v))
        return tuple(parts)

    def use_buffer(self, b: Buffer) -> None:
        n = self.buffers.get(b)
        if n is not None:
            self.emit(("buf", n))
        elif self.map_free:
            self.define_buffer(b, with_name=True)
        else:
            self.emit(("free_buffer", id(b)))
