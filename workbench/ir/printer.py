"""Readable TVMScript-like text for expressions, statements and functions.

>>> print(func)                                   # doctest: +SKIP
@T.prim_func
def matmul(A: T.Buffer((128, 128), "float32"), ...):
    # with T.block("root"):
    for i, j, k in T.grid(128, 128, 128):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            ...

Variables are identified by object, not by name, so the printer gives every distinct ``Var``
(and ``Buffer``) one unambiguous name per printed tree: the first object to claim a name keeps
it, later ones get ``_1``, ``_2``… suffixes, in printing order (deterministic).
Expressions get the fewest parentheses that keep the tree's shape under Python's precedence.
"""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass
from enum import Enum
from typing import Any, Mapping

from .buffer import Buffer
from .expr import (
    Add,
    And,
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    CmpOp,
    Div,
    EQ,
    Expr,
    FloatImm,
    FloorDiv,
    FloorMod,
    GE,
    GT,
    IntImm,
    LE,
    LT,
    Max,
    Min,
    Mul,
    NE,
    Not,
    Or,
    Select,
    Sub,
    Var,
)
from .func import PrimFunc
from .functor import uses_var
from .stmt import (
    OPAQUE,
    REDUCE,
    SPATIAL,
    Allocate,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IterVar,
    Range,
    SeqStmt,
    Stmt,
)

__all__ = ["expr_str", "stmt_str", "func_str"]

INDENT = "    "

# Python operator precedence (higher binds tighter); atoms and calls are 10.
_ATOM, _UNARY = 10, 8
_PREC: dict[type, int] = {
    Or: 1,
    And: 2,
    EQ: 4,
    NE: 4,
    LT: 4,
    LE: 4,
    GT: 4,
    GE: 4,
    Add: 6,
    Sub: 6,
    Mul: 7,
    Div: 7,
    FloorDiv: 7,
    FloorMod: 7,
}
_NOT_PREC = 3
_CALL_NAMES = {Min: "T.min", Max: "T.max"}
_AXIS_KIND = {SPATIAL: "spatial", REDUCE: "reduce", OPAQUE: "opaque"}
_LOOP_FN = {
    ForKind.SERIAL: "T.serial",
    ForKind.PARALLEL: "T.parallel",
    ForKind.VECTORIZED: "T.vectorized",
    ForKind.UNROLLED: "T.unroll",
    ForKind.THREAD_BINDING: "T.thread_binding",
}


def expr_str(expr: Expr) -> str:
    return _Printer().expr(expr)


def stmt_str(stmt: Any) -> str:
    """A statement (or a ``Block``, ``Range``, ``IterVar``, ``BufferRegion``) as text."""
    p = _Printer()
    if isinstance(stmt, Stmt):
        p.stmt(stmt, 0)
        return "\n".join(p.lines)
    if isinstance(stmt, Range):
        return p.range(stmt)
    if isinstance(stmt, BufferRegion):
        return p.region(stmt)
    if isinstance(stmt, IterVar):
        return f"{p.name(stmt.var)}: T.axis.{_AXIS_KIND[stmt.iter_type]}({p.dom(stmt.dom)})"
    if isinstance(stmt, Expr):
        return p.expr(stmt)
    raise TypeError(f"cannot print {type(stmt).__name__}")


def func_str(func: PrimFunc) -> str:
    p = _Printer()
    size_vars = func.size_vars
    for v in size_vars:  # named before the buffers, so that `n` keeps its name
        p.name(v)
    # as TVM prints them: a size variable's first appearance (a dimension that is exactly it) is
    # its name as a string, which declares it; `n = T.int32()` at the top of the body binds it
    declared: set = set()

    def dim(s: Any) -> str:
        if isinstance(s, Var) and s not in declared:
            declared.add(s)
            return f'"{p.name(s)}"'
        return str(s) if isinstance(s, int) else p.expr(s)

    params = ", ".join(
        f'{p.name(b)}: T.Buffer({_shape(tuple(dim(s) for s in b.shape))}, "{b.dtype}"{_scope(b)})'
        for b in func.params
    )
    p.lines += ["@T.prim_func", f"def {func.name}({params}):"]
    for v in size_vars:
        p.emit(1, f"{p.name(v)} = T.{v.dtype}()")
    if func.attrs:
        p.emit(1, f"T.func_attr({_value(func.attrs, p)})")
    body = func.body
    if isinstance(body, BlockRealize) and _is_plain_root(body):
        root = body.block
        p.emit(1, '# with T.block("root"):')
        for buf in root.alloc_buffers:
            p.alloc_line(buf, 1)
        if root.annotations:
            p.emit(1, f"T.block_attr({_value(root.annotations, p)})")
        p.stmt(root.body, 1)
    else:
        p.stmt(body, 1)
    return "\n".join(p.lines)


def _is_plain_root(r: BlockRealize) -> bool:
    b = r.block
    return (
        b.name == "root"
        and not b.iter_vars
        and not b.reads
        and not b.writes
        and b.init is None
        and _is_true(r.predicate)
    )


def _is_true(e: Expr) -> bool:
    return isinstance(e, IntImm) and e.dtype == "bool" and e.value == 1


def _shape(shape: tuple) -> str:
    """``(n, 64)``: entries are ints, size-variable expressions (printed by their ``str``, in which
    a variable is its own name) or already printed text."""
    return f"({shape[0]},)" if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"


def _scope(b: Buffer) -> str:
    out = "" if b.scope == "global" else f', scope="{b.scope}"'
    if b.align:
        out += f", align={list(b.align)}"
    return out


def _float_text(v: float) -> str:
    v = float(v)
    if math.isnan(v) or math.isinf(v):
        return f'"{v}"'
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def _value(v: Any, p: "_Printer") -> str:
    """Annotation / attribute values: Python literals, IR expressions inside."""
    if isinstance(v, Enum):
        v = v.value
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{_value(k, p)}: {_value(x, p)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x, p) for x in v) + "]"
    if isinstance(v, tuple):
        return ("(" + ", ".join(_value(x, p) for x in v) + (",)" if len(v) == 1 else ")")) if v else "()"
    if isinstance(v, Expr):
        return p.expr(v)
    if isinstance(v, Buffer):
        return p.name(v)
    return repr(v)


class _Printer:
    """One printing session: the name table and the output lines."""

    def __init__(self) -> None:
        self.names: dict[Any, str] = {}  # Var or Buffer (hashed by identity) -> its name
        self.taken: set[str] = set()
        self.loops: dict[Var, For] = {}  # loop var -> its loop, while printing its body
        self.lines: list[str] = []

    # names ----------------------------------------------------------------------------
    def name(self, obj: Any) -> str:
        got = self.names.get(obj)
        if got is not None:
            return got
        base = obj.name or "v"
        name, n = base, 0
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        self.names[obj] = name
        return name

    def shape(self, b: Buffer) -> tuple:
        return tuple(s if isinstance(s, int) else self.expr(s) for s in b.shape)

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(INDENT * depth + text)

    # expressions ----------------------------------------------------------------------
    def expr(self, e: Expr) -> str:
        return self._expr(e)[0]

    def _expr(self, e: Expr) -> tuple[str, int]:
        """The text of ``e`` and its precedence."""
        t = type(e)
        if isinstance(e, Var):
            return self.name(e), _ATOM
        if type(e) is IntImm:
            if e.dtype == "bool":
                return ("True" if e.value else "False"), _ATOM
            if e.dtype != "int32":
                return f"T.{e.dtype}({e.value})", _ATOM
            return str(e.value), (_UNARY if e.value < 0 else _ATOM)
        if type(e) is FloatImm:
            return f"T.{e.dtype}({_float_text(e.value)})", _ATOM
        if type(e) is BufferLoad:
            return self._subscript(e.buffer, [self.expr(i) for i in e.indices]), _ATOM
        prec = _PREC.get(t)
        if prec is not None and isinstance(e, BinaryOp):
            return self._binary(e, prec), prec
        if t in _CALL_NAMES and isinstance(e, BinaryOp):
            return f"{_CALL_NAMES[t]}({self.expr(e.a)}, {self.expr(e.b)})", _ATOM
        if type(e) is Not:
            return f"not {self._operand(e.a, _NOT_PREC, strict=False)}", _NOT_PREC
        if type(e) is Select:
            args = ", ".join(self.expr(x) for x in (e.condition, e.true_value, e.false_value))
            return f"T.Select({args})", _ATOM
        if type(e) is Cast:
            return f'T.Cast("{e.dtype}", {self.expr(e.value)})', _ATOM
        if type(e) is Call:
            return f"T.{e.op}({', '.join(self.expr(a) for a in e.args)})", _ATOM
        if isinstance(e, Expr) and is_dataclass(e):
            # an expression class outside the IR proper (the DSL's Reduce): its fields, so
            # that repr() in a notebook never fails
            args = ", ".join(_value(getattr(e, f.name), self) for f in fields(e) if f.name != "dtype")
            return f"{t.__name__}({args})", _ATOM
        raise TypeError(f"cannot print expression of type {t.__name__}")

    def _binary(self, e: BinaryOp, prec: int) -> str:
        # Comparisons chain in Python (a < b < c), so an equal-precedence left operand needs
        # parentheses too; for the others only a right one does (left-associative).
        left = self._operand(e.a, prec, strict=isinstance(e, CmpOp) and prec == 4)
        right = self._operand(e.b, prec, strict=True)
        return f"{left} {e.symbol} {right}"

    def _operand(self, e: Expr, prec: int, strict: bool) -> str:
        text, p = self._expr(e)
        return f"({text})" if p < prec or (strict and p == prec) else text

    def _subscript(self, buf: Buffer, items: list[str]) -> str:
        return f"{self.name(buf)}[{', '.join(items) or '()'}]"

    # regions and domains --------------------------------------------------------------
    def range(self, r: Range) -> str:
        """``lo:hi`` slice text (``hi`` folded when both ends are constants)."""
        if isinstance(r.min, IntImm) and isinstance(r.extent, IntImm):
            return f"{r.min.value}:{r.min.value + r.extent.value}"
        return f"{self.expr(r.min)}:{self.expr(Add(r.min, r.extent))}"

    def region(self, br: BufferRegion) -> str:
        items = [
            self.expr(r.min) if isinstance(r.extent, IntImm) and r.extent.value == 1 else self.range(r)
            for r in br.region
        ]
        return self._subscript(br.buffer, items)

    def dom(self, r: Range) -> str:
        """``128`` for ``[0, 128)``, ``(lo, hi)`` otherwise (T.axis / loop style)."""
        if isinstance(r.min, IntImm) and r.min.value == 0:
            return self.expr(r.extent)
        if isinstance(r.min, IntImm) and isinstance(r.extent, IntImm):
            return f"({r.min.value}, {r.min.value + r.extent.value})"
        return f"({self.expr(r.min)}, {self.expr(Add(r.min, r.extent))})"

    # statements -----------------------------------------------------------------------
    def stmt(self, s: Stmt, depth: int) -> None:
        t = type(s)
        if type(s) is SeqStmt:
            last = len(s.seq) - 1
            for n, x in enumerate(s.seq):
                if isinstance(x, Allocate) and n != last:
                    self.allocate(x, depth, scoped=True)  # later siblings are outside it
                else:
                    self.stmt(x, depth)
        elif type(s) is For:
            self.loop(s, depth)
        elif type(s) is BlockRealize:
            self.block(s.block, depth, s)
        elif type(s) is Block:
            self.block(s, depth, None)
        elif type(s) is BufferStore:
            target = self._subscript(s.buffer, [self.expr(i) for i in s.indices])
            self.emit(depth, f"{target} = {self.expr(s.value)}")
        elif type(s) is Evaluate:
            self.emit(depth, f"T.evaluate({self.expr(s.value)})")
        elif type(s) is IfThenElse:
            self.emit(depth, f"if {self.expr(s.condition)}:")
            self.stmt(s.then_case, depth + 1)
            if s.else_case is not None:
                self.emit(depth, "else:")
                self.stmt(s.else_case, depth + 1)
        elif type(s) is Allocate:
            self.allocate(s, depth, scoped=False)
        else:
            raise TypeError(f"cannot print statement of type {t.__name__}")

    def allocate(self, s: Allocate, depth: int, scoped: bool) -> None:
        b = s.buffer
        call = f'T.allocate({_shape(self.shape(b))}, "{b.dtype}", scope="{b.scope}")'
        if scoped:
            self.emit(depth, f"with {call} as {self.name(b)}:")
            self.stmt(s.body, depth + 1)
        else:
            self.emit(depth, f"{self.name(b)} = {call}")
            self.stmt(s.body, depth)

    def alloc_line(self, b: Buffer, depth: int) -> None:
        self.emit(depth, f'{self.name(b)} = T.alloc_buffer({_shape(self.shape(b))}, "{b.dtype}"{_scope(b)})')

    def loop(self, s: For, depth: int) -> None:
        grid = [s]
        # T.grid extents are evaluated up front: an inner extent using an outer var can't join
        while (
            _is_grid_loop(grid[-1])
            and isinstance(grid[-1].body, For)
            and _is_grid_loop(grid[-1].body)
            and not any(uses_var(grid[-1].body.extent, f.loop_var) for f in grid)
        ):
            grid.append(grid[-1].body)
        if len(grid) > 1:
            names = ", ".join(self.name(f.loop_var) for f in grid)
            extents = ", ".join(self.expr(f.extent) for f in grid)
            self.emit(depth, f"for {names} in T.grid({extents}):")
        elif _is_grid_loop(s):
            self.emit(depth, f"for {self.name(s.loop_var)} in range({self.expr(s.extent)}):")
        else:
            self.emit(depth, f"for {self.name(s.loop_var)} in {self._loop_call(s)}:")
        for f in grid:
            self.loops[f.loop_var] = f
        self.stmt(grid[-1].body, depth + 1)
        for f in grid:
            self.loops.pop(f.loop_var, None)

    def _loop_call(self, s: For) -> str:
        if isinstance(s.min, IntImm) and s.min.value == 0:
            args = [self.expr(s.extent)]
        elif isinstance(s.min, IntImm) and isinstance(s.extent, IntImm):
            args = [str(s.min.value), str(s.min.value + s.extent.value)]
        else:
            args = [self.expr(s.min), self.expr(Add(s.min, s.extent))]
        if s.thread_tag is not None:
            args.append(f'thread="{s.thread_tag}"')
        if s.annotations:
            args.append(f"annotations={_value(s.annotations, self)}")
        return f"{_LOOP_FN[s.kind]}({', '.join(args)})"

    def block(self, b: Block, depth: int, realize: BlockRealize | None) -> None:
        self.emit(depth, f'with T.block("{b.name}"):')
        d = depth + 1
        if realize is None:
            for iv in b.iter_vars:
                self.emit(d, f"{self.name(iv.var)} = T.axis.{_AXIS_KIND[iv.iter_type]}({self.dom(iv.dom)})")
        else:
            self.bindings(b.iter_vars, realize.iter_values, d)
            if not _is_true(realize.predicate):
                self.emit(d, f"T.where({self.expr(realize.predicate)})")
        self.emit(d, f"T.reads({', '.join(self.region(r) for r in b.reads)})")
        self.emit(d, f"T.writes({', '.join(self.region(r) for r in b.writes)})")
        if b.annotations:
            self.emit(d, f"T.block_attr({_value(b.annotations, self)})")
        for buf in b.alloc_buffers:
            self.alloc_line(buf, d)
        if b.init is not None:
            self.emit(d, "with T.init():")
            self.stmt(b.init, d + 1)
        self.stmt(b.body, d)

    def bindings(self, ivs: tuple[IterVar, ...], values: tuple[Expr, ...], depth: int) -> None:
        if ivs and len(ivs) == len(values) and all(self._remappable(iv, v) for iv, v in zip(ivs, values)):
            lhs = ", ".join(self.name(iv.var) for iv in ivs)
            kinds = "".join(iv.iter_type for iv in ivs)
            loops = ", ".join(self.name(v) for v in values)
            self.emit(depth, f'{lhs} = T.axis.remap("{kinds}", [{loops}])')
            return
        for n, iv in enumerate(ivs):
            value = f", {self.expr(values[n])}" if n < len(values) else ""
            self.emit(
                depth, f"{self.name(iv.var)} = T.axis.{_AXIS_KIND[iv.iter_type]}({self.dom(iv.dom)}{value})"
            )

    def _remappable(self, iv: IterVar, value: Expr) -> bool:
        """``T.axis.remap`` is exact only when the iterator spans its loop's whole range."""
        loop = self.loops.get(value) if isinstance(value, Var) else None
        return (
            loop is not None
            and iv.iter_type in (SPATIAL, REDUCE)
            and _same_const(loop.min, iv.dom.min)
            and _same_const(loop.extent, iv.dom.extent)
        )


def _same_const(a: Expr, b: Expr) -> bool:
    return a is b or (isinstance(a, IntImm) and isinstance(b, IntImm) and a.value == b.value)


def _is_grid_loop(s: For) -> bool:
    return (
        s.kind == ForKind.SERIAL
        and isinstance(s.min, IntImm)
        and s.min.value == 0
        and not s.annotations
        and s.thread_tag is None
    )


def module_str(mod: Any) -> str:
    """An :class:`~workbench.ir.module.IRModule` as TVMScript: ``@I.ir_module class Module:``
    with each function as a method (what ``wb.parse`` reads back)."""
    lines = ["@I.ir_module", "class Module:"]
    for k, func in enumerate(mod.values()):
        if k:
            lines.append("")
        lines += ["    " + line if line else line for line in func_str(func).splitlines()]
    return "\n".join(lines)
