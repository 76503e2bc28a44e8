"""Statements of the IR (TensorIR-like): loops, blocks, stores, sequences.

A function body is a tree whose root is the ``BlockRealize`` of a block named ``"root"`` that
owns the intermediate buffers. Each computation stage is a ``Block`` with typed iterators
(spatial ``"S"``, reduce ``"R"``, opaque ``"O"``) bound by its ``BlockRealize`` to expressions of
the enclosing loop variables; the block declares what it reads and writes, and a reduction block
has an ``init`` statement run on the first iteration of its reduce iterators.

Identity across rewrites (DESIGN decision 2): a loop *is* its ``loop_var`` (a primitive that
keeps a loop keeps its variable), and a block *is* its ``name`` (unique in a function).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Mapping, Optional

from .buffer import Buffer
from .expr import Expr, IntImm, Var, const, convert


class Stmt:
    """Base of all statements (frozen dataclasses, compared by identity)."""

    __slots__ = ()

    def __str__(self) -> str:
        from .printer import stmt_str  # a cycle: printer imports this module

        return stmt_str(self)

    def with_(self, **changes: Any):
        """A copy with some fields changed (the original is untouched)."""
        return replace(self, **changes)  # type: ignore[type-var]  # every Stmt is a dataclass


class ForKind(str, Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    THREAD_BINDING = "thread_binding"


#: Iterator types of a block.
SPATIAL, REDUCE, OPAQUE = "S", "R", "O"

#: Thread tags accepted by ``bind``.
THREAD_TAGS = (
    "blockIdx.x",
    "blockIdx.y",
    "blockIdx.z",
    "threadIdx.x",
    "threadIdx.y",
    "threadIdx.z",
    "vthread.x",
    "vthread.y",
    "vthread.z",
)


@dataclass(frozen=True, eq=False)
class Range:
    """``[min, min + extent)``."""

    min: Expr
    extent: Expr

    @staticmethod
    def from_extent(extent: Any, min: Any = 0) -> "Range":
        return Range(convert(min), convert(extent))

    def __repr__(self) -> str:
        return f"Range({self.min}, {self.extent})"


@dataclass(frozen=True, eq=False)
class IterVar:
    var: Var
    dom: Range
    iter_type: str = SPATIAL

    def __post_init__(self):
        if self.iter_type not in (SPATIAL, REDUCE, OPAQUE):
            raise ValueError(f"iter_type must be 'S', 'R' or 'O', got {self.iter_type!r}")


@dataclass(frozen=True, eq=False)
class BufferRegion:
    buffer: Buffer
    region: tuple[Range, ...]

    @staticmethod
    def full(buffer: Buffer) -> "BufferRegion":
        return BufferRegion(buffer, tuple(Range.from_extent(s) for s in buffer.shape))


@dataclass(frozen=True, eq=False)
class BufferStore(Stmt):
    buffer: Buffer
    value: Expr
    indices: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class Evaluate(Stmt):
    value: Expr


@dataclass(frozen=True, eq=False)
class SeqStmt(Stmt):
    seq: tuple[Stmt, ...]


@dataclass(frozen=True, eq=False)
class IfThenElse(Stmt):
    condition: Expr
    then_case: Stmt
    else_case: Optional[Stmt] = None


@dataclass(frozen=True, eq=False)
class For(Stmt):
    loop_var: Var
    min: Expr
    extent: Expr
    kind: ForKind
    body: Stmt
    thread_tag: Optional[str] = None
    annotations: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Block(Stmt):
    name: str
    iter_vars: tuple[IterVar, ...]
    reads: tuple[BufferRegion, ...]
    writes: tuple[BufferRegion, ...]
    body: Stmt
    init: Optional[Stmt] = None
    alloc_buffers: tuple[Buffer, ...] = ()
    annotations: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_reduction(self) -> bool:
        return self.init is not None or any(iv.iter_type == REDUCE for iv in self.iter_vars)


@dataclass(frozen=True, eq=False)
class BlockRealize(Stmt):
    iter_values: tuple[Expr, ...]
    predicate: Expr
    block: Block


@dataclass(frozen=True, eq=False)
class Allocate(Stmt):
    """Produced by lowering only: ``buffer`` is live inside ``body``."""

    buffer: Buffer
    body: Stmt


TRUE = IntImm(1, "bool")


def seq(*stmts: Stmt) -> Stmt:
    """A sequence, flattened; a single statement stays itself."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        elif s is not None:
            flat.append(s)
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


def make_for(
    var: Var, extent: Any, body: Stmt, kind: ForKind = ForKind.SERIAL, min: Any = 0, **kw: Any
) -> For:
    return For(var, convert(min), convert(extent), kind, body, **kw)


__all__ = [
    "Stmt",
    "ForKind",
    "SPATIAL",
    "REDUCE",
    "OPAQUE",
    "THREAD_TAGS",
    "Range",
    "IterVar",
    "BufferRegion",
    "BufferStore",
    "Evaluate",
    "SeqStmt",
    "IfThenElse",
    "For",
    "Block",
    "BlockRealize",
    "Allocate",
    "TRUE",
    "seq",
    "make_for",
    "const",
]
