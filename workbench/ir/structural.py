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
"""
from __future__ import annotations

import hashlib
from dataclasses import fields
from enum import Enum
from typing import Any, Mapping, Optional

from .buffer import Buffer
from .expr import Expr, FloatImm, Var
from .func import PrimFunc
from .stmt import Allocate, Block, BufferRegion, For, IterVar, Range, Stmt

__all__ = ["structural_equal", "structural_hash", "assert_structural_equal"]

_NODES = (Expr, Stmt, Range, IterVar, BufferRegion, PrimFunc)

#: fields that *bind* what they hold; every other Var / Buffer field is a use
_VAR_DEFS = {For: "loop_var", IterVar: "var"}
_BUFFER_DEFS = {Block: "alloc_buffers", Allocate: "buffer"}
#: fields not walked: a function's name is a label; its params are defined first, by hand
_SKIP = {PrimFunc: ("name", "params")}

_FIELD_CACHE: dict[type, tuple[tuple[str, str], ...]] = {}


def structural_equal(a: Any, b: Any, map_free_vars: bool = True) -> bool:
    """True if ``a`` and ``b`` are the same tree up to variable and intermediate-buffer names."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    return _Serializer(map_free_vars).run(a) == _Serializer(map_free_vars).run(b)


def structural_hash(node: Any) -> str:
    """A stable hex digest: equal for structurally equal trees, in every process."""
    tokens = _Serializer(map_free_vars=True).run(node)
    return hashlib.sha256(repr(tokens).encode()).hexdigest()


def assert_structural_equal(a: Any, b: Any, map_free_vars: bool = True) -> None:
    """Raise ``AssertionError`` with the first differing path and both printed forms."""
    if structural_equal(a, b, map_free_vars):
        return
    sa, sb = _Serializer(map_free_vars, paths=True), _Serializer(map_free_vars, paths=True)
    ta, tb = sa.run(a), sb.run(b)
    n = next((k for k, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))

    def at(s: _Serializer, toks: list) -> str:
        return f"{s.paths[n]} ({toks[n]!r})" if n < len(toks) else "<end>"

    raise AssertionError(
        f"structural mismatch at {at(sa, ta)} vs {at(sb, tb)}\n"
        f"--- first:\n{_text(a)}\n--- second:\n{_text(b)}")


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
    raise TypeError(f"cannot compare or hash an annotation value of type {type(v).__name__}: "
                    f"{v!r}; use plain Python values or IR expressions")


def _field_plan(cls: type) -> tuple[tuple[str, str], ...]:
    """(field name, role) for a node class; role is 'var_def', 'buffer_def' or 'value'."""
    plan = _FIELD_CACHE.get(cls)
    if plan is None:
        skip = _SKIP.get(cls, ())
        var_def = next((f for k, f in _VAR_DEFS.items() if issubclass(cls, k)), None)
        buf_def = next((f for k, f in _BUFFER_DEFS.items() if issubclass(cls, k)), None)
        plan = tuple((f.name, "var_def" if f.name == var_def else
                      "buffer_def" if f.name == buf_def else "value")
                     for f in fields(cls) if f.name not in skip)
        _FIELD_CACHE[cls] = plan
    return plan


class _Serializer:
    """Turns a tree into canonical tokens; optionally records each token's path."""

    def __init__(self, map_free_vars: bool, paths: bool = False) -> None:
        self.map_free = map_free_vars
        self.tokens: list[Any] = []
        self.paths: Optional[list[str]] = [] if paths else None
        self.vars: dict[Var, int] = {}       # by identity (Expr hashes by id)
        self.buffers: dict[Buffer, int] = {}
        self.n_vars = self.n_buffers = 0     # counters: a var bound twice gets a new number
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
        if not isinstance(node, _NODES):
            raise TypeError(f"cannot compare or hash {cls.__name__} {node!r}")
        self.emit(cls.__name__)
        if cls is PrimFunc:
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
                for b in (v if isinstance(v, tuple) else (v,)):
                    self.define_buffer(b, with_name=False)
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
                self.emit(repr(float(v)))    # as text: nan must equal nan
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
        self.buffers[b] = self.n_buffers
        self.n_buffers += 1
        self.emit(("buffer", b.name if with_name else None, b.shape, b.dtype, b.scope, b.align))

    def use_buffer(self, b: Buffer) -> None:
        n = self.buffers.get(b)
        if n is not None:
            self.emit(("buf", n))
        elif self.map_free:
            self.define_buffer(b, with_name=True)
        else:
            self.emit(("free_buffer", id(b)))
