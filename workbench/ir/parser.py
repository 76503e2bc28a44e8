"""TVMScript in: text -> :class:`PrimFunc`, read with Python's ``ast`` and never executed.

Accepts what :mod:`workbench.ir.printer` writes and what TVM writes: both spellings TVM has used,
``T.block`` / ``T.alloc_buffer`` / ``from tvm.script import tir as T`` (TVM <= 0.20, the MLC
course) and ``T.sblock`` / ``T.sblock_alloc_buffer`` / ``@T.prim_func(s_tir=True)`` /
``from tvm.script import tirx as T`` (TVM 0.27's ``mod.script()``)::

    @T.prim_func
    def relu(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
        for i in range(128):
            with T.block("B"):
                vi = T.axis.spatial(128, i)
                B[vi] = T.max(A[vi], T.float32(0))

Safety: the text is only ever walked as a syntax tree. Only the names ``T.*`` (and ``I.*``,
``range``) are understood; a name with a double underscore anywhere in the text is rejected
before anything else is looked at, so ``__import__('os').system(...)`` never runs.

What TVM 0.27 prints is read as the IR can hold it:

* ``x: T.let[T.int32] = v`` / ``x: T.int32 = v``: the IR has no Let node, so ``v`` is
  substituted at each use; a use after a store to a buffer ``v`` reads is refused.
* ``T.int64`` shapes, extents, iterator domains and indices: int64 index arithmetic is narrowed
  to int32 (constants that fit, casts of int32 values dropped) when every extent fits, which
  the static shapes guarantee; int64 *data* keeps its dtype.
* ``T.likely(c)`` is ``c``; ``T.axis.scan`` is an opaque iterator; ``T.Add(x, 0)`` and the other
  node-name calls are the operation as written; buffer keywords (``elem_offset=0``, dense
  ``strides``, ``offset_factor``, an int ``align``) are accepted where they change nothing.
* an ``@I.ir_module`` of several functions is an :class:`~workbench.ir.module.IRModule`.

Symbolic shapes in every form TVM writes them: ``n = T.int32()`` / ``T.int64()`` at the top of
the function, ``T.Buffer(("n", 128))`` (a string dimension declares ``n``), ``T.match_buffer(a,
(n, m))`` and scalar parameters ``m: T.int32`` used as shapes. A size variable must be exactly
some parameter's dimension (its value is read from the arrays a kernel is called with); a scalar
parameter becomes a size variable and leaves the parameter list (kernels take arrays only), and
one that no buffer shape names is refused. ``T.match_buffer`` inside a block and the opaque
intrinsics (``T.tvm_access_ptr``, ``buf.data``, ``T.call_extern`` ...) are refused, naming the
construct. Every error is a :class:`~workbench.errors.TVMScriptError` with the line and column (1-based)
of the text it is about. ``T.reads`` / ``T.writes`` are optional: when absent they are inferred
by :func:`~workbench.ir.region.infer_access_regions`, the rule the compute DSL uses.
"""

from __future__ import annotations

import ast
import difflib
import typing  # typing.cast: `cast` here is the IR constructor from .expr
from typing import Any, Callable, Optional, Sequence, Union

from ..errors import TVMScriptError
from .arith.simplifier import Simplifier
from .buffer import Buffer
from .dtype import dtype_info
from .expr import (
    DTYPES,
    INTRINSICS,
    Add,
    And,
    BinaryOp,
    BufferLoad,
    Cast,
    Div,
    EQ,
    Expr,
    FloorDiv,
    FloorMod,
    FloatImm,
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
    Sub,
    Var,
    call,
    cast,
    const,
    convert,
    if_then_else,
)
from .func import PrimFunc, check_size_vars
from .functor import pre_order
from .module import IRModule
from .region import infer_access_regions
from .stmt import (
    OPAQUE,
    REDUCE,
    SPATIAL,
    TRUE,
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
    Stmt,
    seq,
)
from .structural import structural_equal
from .verify import verify_bounds

__all__ = ["parse", "from_tvmscript"]

#: spellings of the same construct in TVM <= 0.20 and TVM 0.27 (s_tir)
_BLOCK = ("block", "sblock")
_ALLOC = ("alloc_buffer", "sblock_alloc_buffer")
_BLOCK_ATTR = ("block_attr", "sblock_attr")
_LOOPS = {
    "serial": ForKind.SERIAL,
    "parallel": ForKind.PARALLEL,
    "vectorized": ForKind.VECTORIZED,
    "unroll": ForKind.UNROLLED,
    "thread_binding": ForKind.THREAD_BINDING,
}
#: ``T.axis.scan`` (TVM's ordered iterator) has no kind of its own here: it is read as opaque,
#: which every primitive treats at least as conservatively as TVM treats a scan iterator
_AXES = {
    "spatial": SPATIAL,
    "S": SPATIAL,
    "reduce": REDUCE,
    "R": REDUCE,
    "opaque": OPAQUE,
    "scan": OPAQUE,
}
_BINOPS: dict[type, Callable[[Any, Any], Expr]] = {
    ast.Add: Add.make,
    ast.Sub: Sub.make,
    ast.Mult: Mul.make,
    ast.Div: Div.make,
    ast.FloorDiv: FloorDiv.make,
    ast.Mod: FloorMod.make,
}
_CMPOPS = {
    ast.Lt: LT.make,
    ast.LtE: LE.make,
    ast.Gt: GT.make,
    ast.GtE: GE.make,
    ast.Eq: EQ.make,
    ast.NotEq: NE.make,
}
_FUNCS2 = {
    "max": Max.make,
    "min": Min.make,
    "floordiv": FloorDiv.make,
    "floormod": FloorMod.make,
    "truncdiv": Div.make,
    # the node-name spellings TVM prints for arithmetic it kept as written (T.Add(x, 0), T.Mul(x, 1))
    "Add": Add.make,
    "Sub": Sub.make,
    "Mul": Mul.make,
    "Div": Div.make,
    "FloorDiv": FloorDiv.make,
    "FloorMod": FloorMod.make,
    "Min": Min.make,
    "Max": Max.make,
}
#: intrinsics TVM writes for opaque accesses (pointers, external calls, tensor-core fragments):
#: the IR has no opaque call, so they are refused by name
_OPAQUE_CALLS = (
    "tvm_access_ptr",
    "type_annotation",
    "call_extern",
    "call_pure_extern",
    "call_packed",
    "call_intrin",
    "call_llvm_intrin",
    "call_llvm_pure_intrin",
    "address_of",
    "reinterpret",
    "q_multiply_shift",
    "q_multiply_shift_per_axis",
    "tvm_fill_fragment",
    "tvm_load_matrix_sync",
    "tvm_store_matrix_sync",
    "tvm_mma_sync",
    "tvm_bmma_sync",
)
#: the dtypes of size variables (``n = T.int32()``, ``m: T.int64`` parameters)
_SIZE_DTYPES = ("int32", "int64")

#: keyword arguments of T.Buffer / T.alloc_buffer / T.match_buffer that the IR does not model;
#: each is accepted where its value means what a dense workbench buffer already is
_NEUTRAL_BUFFER_ARGS = ("data", "strides", "elem_offset", "offset_factor", "buffer_type", "axis_separators")
#: the T.* functions an expression may call (for "did you mean" hints)
_EXPR_FUNCS = (
    *_FUNCS2,
    *INTRINSICS,
    "likely",
    *DTYPES,
    "if_then_else",
    "Select",
    "Cast",
    "cast",
    "max_value",
    "min_value",
)
#: function attributes that mean nothing here: every function is its own symbol, and
#: workbench buffers never alias
_DROPPED_ATTRS = ("global_symbol", "tir.noalias", "tirx.noalias")
_MODULES = ("tvm.script", "tvm.script.tir", "tvm.script.tirx", "tvm.script.ir", "tvm.script.ir_builder")


def parse(text: str) -> Union[PrimFunc, IRModule]:
    """The function a TVMScript text defines (one ``@T.prim_func``, or an ``@I.ir_module``
    holding one), or the :class:`~workbench.ir.module.IRModule` of an ``@I.ir_module`` holding
    several. Raises :class:`~workbench.errors.TVMScriptError` naming line and column, and
    :class:`~workbench.errors.OutOfBoundsError` for an access provably outside its buffer."""
    if not isinstance(text, str):
        raise TypeError(f"parse expects TVMScript text (a str), got {type(text).__name__}")
    try:
        tree = ast.parse(text)
        _reject_dunders(tree, text)
        result = _Parser(text).module(tree)
    except SyntaxError as exc:
        raise TVMScriptError(
            f"not valid Python syntax: {exc.msg}", exc.lineno or 1, exc.offset or 1, text
        ) from None
    except (RecursionError, MemoryError):
        raise TVMScriptError("the text nests too deeply to be read", 1, 1, text) from None
    for func in result.values() if isinstance(result, IRModule) else [result]:
        verify_bounds(func)  # OutOfBoundsError: an access provably outside its buffer
    return result


from_tvmscript = parse


def _reject_dunders(tree: ast.AST, text: str) -> None:
    """No TVMScript name has a double underscore; Python's escape hatches all do."""
    if "__" not in text:
        return
    for node in ast.walk(tree):
        name = (
            node.id
            if isinstance(node, ast.Name)
            else node.attr
            if isinstance(node, ast.Attribute)
            else node.name
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))
            else node.arg
            if isinstance(node, (ast.arg, ast.keyword))
            else None
        )
        if name and "__" in name:
            # a name was found, so node is one of the located kinds above
            located = typing.cast(Union[ast.expr, ast.stmt, ast.arg, ast.keyword], node)
            raise TVMScriptError(
                f"`{name}` is not TVMScript (the parser never runs code)",
                located.lineno,
                located.col_offset + 1,
                text,
            )


class _Block:
    """What a block (or the root) collects while its body is read."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.allocs: list[Buffer] = []
        self.attrs: dict[str, Any] = {}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.T, self.I = {"T"}, {"I"}  # aliases the imports give the two modules
        self.scopes: list[dict[str, Any]] = [{}]
        self.loops: dict[Var, tuple[Expr, Expr]] = {}  # enclosing loop var -> (min, extent)
        self.block_names: set[str] = set()
        #: module-level ``n = TypeVar("n")``: how TVM 0.27 forward-declares an int64 size
        #: variable it cannot write as a string dimension (those are int32)
        self.type_vars: list[str] = []

    # errors and names -----------------------------------------------------------------
    def error(self, node: ast.AST, message: str) -> TVMScriptError:
        return TVMScriptError(
            message, getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1, self.text
        )

    def lookup(self, name: str) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def define(self, name: str, value: Any) -> None:
        self.scopes[-1][name] = value

    def t_name(self, node: ast.AST) -> Optional[str]:
        """``"grid"`` for ``T.grid``, ``"axis.remap"`` for ``T.axis.remap``, else None."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.T and parts:
            return ".".join(reversed(parts))
        return None

    def call_name(self, node: ast.AST) -> Optional[str]:
        return self.t_name(node.func) if isinstance(node, ast.Call) else None

    # the module -----------------------------------------------------------------------
    def module(self, tree: ast.Module) -> Union[PrimFunc, IRModule]:
        funcs = []
        in_module = False
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports(node)
            elif isinstance(node, ast.FunctionDef):
                funcs.append(node)
            elif _type_var_name(node) is not None:
                self.type_vars.append(typing.cast(str, _type_var_name(node)))
            elif isinstance(node, ast.ClassDef):
                if in_module:
                    raise self.error(node, "expected one @I.ir_module, found a second class")
                funcs.extend(self.ir_module(node))
                in_module = True
            elif not _is_docstring(node):
                raise self.error(
                    node, f"expected one @T.prim_func (and imports of tvm.script), found {_a(_what(node))}"
                )
        if len(funcs) == 1:
            return self.prim_func(funcs[0])
        top = [f for f in tree.body if isinstance(f, ast.FunctionDef)]
        if not in_module or top:
            where = (top or funcs)[1 if len(top or funcs) > 1 else 0] if funcs else tree
            raise self.error(
                where,
                "expected exactly one @T.prim_func (several go in an @I.ir_module class), "
                f"found {len(funcs)}",
            )
        out: dict[str, PrimFunc] = {}
        for f in funcs:
            if f.name in out:
                raise self.error(f, f"two functions are named {f.name} in the module")
            # each function has its own names and blocks; the parser state is per function
            self.scopes, self.loops, self.block_names = [{}], {}, set()
            out[f.name] = self.prim_func(f)
        return IRModule(out)

    def imports(self, node: ast.stmt) -> None:
        if isinstance(node, ast.ImportFrom) and node.module in _MODULES:
            for alias in node.names:
                if alias.name in ("tir", "tirx"):
                    self.T.add(alias.asname or alias.name)
                elif alias.name == "ir":
                    self.I.add(alias.asname or alias.name)
            return
        if isinstance(node, ast.Import) and all(a.name.split(".")[0] == "tvm" for a in node.names):
            return
        raise self.error(node, "only `from tvm.script import tir as T` (or tirx, ir as I) may be imported")

    def ir_module(self, node: ast.ClassDef) -> list[ast.FunctionDef]:
        if not any(
            self._deco_name(d, self.I) == "ir_module" or _dotted(d) == "tvm.script.ir_module"
            for d in node.decorator_list
        ):
            raise self.error(node, f"class {node.name} is not an @I.ir_module")
        funcs = [f for f in node.body if isinstance(f, ast.FunctionDef)]
        for f in node.body:
            if not isinstance(f, ast.FunctionDef) and not _is_docstring(f):
                raise self.error(f, f"an @I.ir_module holds functions only, found {_a(_what(f))}")
        if not funcs:
            raise self.error(node, f"@I.ir_module {node.name} has no @T.prim_func")
        return funcs

    @staticmethod
    def _deco_name(d: ast.expr, modules: set[str]) -> Optional[str]:
        d = d.func if isinstance(d, ast.Call) else d
        if isinstance(d, ast.Attribute) and isinstance(d.value, ast.Name) and d.value.id in modules:
            return d.attr
        return None

    # the function ---------------------------------------------------------------------
    def prim_func(self, node: ast.FunctionDef) -> PrimFunc:
        if not any(self._deco_name(d, self.T) == "prim_func" for d in node.decorator_list):
            raise self.error(node, f"function {node.name} needs the decorator @T.prim_func")
        a = node.args
        for tv in self.type_vars:  # each function has variables of its own
            self.define(tv, Var(tv, "int64"))
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
            raise self.error(node, f"{node.name}: parameters are plain `name: T.Buffer(...)`")
        params: list[Any] = []  # a Buffer, or an ast.arg waiting for match_buffer
        body = list(node.body)
        if body and _is_docstring(body[0]):
            body = body[1:]
        # size variables first: TVM declares `n = T.int32()` in the body, after the parameters
        # whose shapes use it
        declared: set[int] = set()
        for stmt in body:
            if self._size_var_decl(stmt):
                target = typing.cast(ast.Name, typing.cast(ast.Assign, stmt).targets[0])
                dtype = typing.cast(str, self.call_name(typing.cast(ast.Assign, stmt).value))
                self.define(target.id, Var(target.id, dtype))
                declared.add(id(stmt))
        scalars: list[tuple[ast.arg, Var]] = []
        for arg in a.args:
            if arg.annotation is not None and self.t_name(arg.annotation) in _SIZE_DTYPES:
                var = Var(arg.arg, typing.cast(str, self.t_name(arg.annotation)))
                self.define(arg.arg, var)
                scalars.append((arg, var))
        for arg in a.args:
            if arg.annotation is None:
                raise self.error(
                    arg, f'parameter {arg.arg} needs a type: `{arg.arg}: T.Buffer((..), "float32")`'
                )
            if self.t_name(arg.annotation) == "handle":
                params.append(arg)
                continue
            if self.t_name(arg.annotation) in _SIZE_DTYPES:
                continue  # a size variable (checked below to be one)
            if self.t_name(arg.annotation) in DTYPES:
                raise self.error(
                    arg,
                    f"parameter {arg.arg}: {ast.unparse(arg.annotation)} is a scalar parameter; only "
                    "integer ones used as buffer dimensions (size variables) are supported: workbench "
                    "functions take buffers",
                )
            buf = self.buffer_type(arg.annotation, arg.arg)
            self.define(arg.arg, buf)
            params.append(buf)
        attrs: dict[str, Any] = {}
        rest = []
        for stmt in body:  # the function-level statements that are not part of the body
            name = self.call_name(stmt.value) if isinstance(stmt, (ast.Expr, ast.Assign)) else None
            if id(stmt) in declared:
                continue
            if isinstance(stmt, ast.Expr) and name == "func_attr":
                attrs.update(self.literal(_one_arg(self, typing.cast(ast.Call, stmt.value), "T.func_attr")))
            elif isinstance(stmt, ast.Assign) and name == "match_buffer":
                self.match_buffer(stmt, params)
            elif (
                isinstance(stmt, ast.Assign) and name in DTYPES and not typing.cast(ast.Call, stmt.value).args
            ):
                raise self.error(
                    stmt,
                    f"`{ast.unparse(stmt.targets[0])} = T.{name}()` declares a size variable of "
                    f"dtype {name}; size variables are int32 or int64",
                )
            else:
                rest.append(stmt)
        for p in params:
            if isinstance(p, ast.arg):
                raise self.error(p, f"parameter {p.arg} is a T.handle that no T.match_buffer gives a buffer")
        root_with = rest[0] if len(rest) == 1 and isinstance(rest[0], ast.With) else None
        root: Stmt
        if root_with is not None and self._block_name(root_with) == "root":
            # a block name was read, so the context is a T.block(...) call
            root = self.block(
                typing.cast(ast.Call, root_with.items[0].context_expr), root_with.body, is_root=True
            )
        elif not self._has_blocks(rest):
            # loops and stores only (what lowering gives): no root block to add
            root = self.stmts(rest, _Block(node.name), node)
        else:
            owner = _Block("root")
            stmts = self.stmts(rest, owner, node)
            root = BlockRealize(
                (),
                TRUE,
                Block("root", (), (), (), stmts, alloc_buffers=tuple(owner.allocs), annotations=owner.attrs),
            )
        attrs = {k: v for k, v in attrs.items() if k not in _DROPPED_ATTRS}
        func = PrimFunc(node.name, tuple(params), root, attrs)
        for arg, var in scalars:
            if var not in func.size_vars:
                raise self.error(
                    arg,
                    f"parameter {arg.arg}: {ast.unparse(typing.cast(ast.expr, arg.annotation))} is "
                    "a scalar parameter that no buffer shape uses; only size variables (integer "
                    "parameters that are buffer dimensions) are supported: workbench functions take buffers",
                )
        try:
            check_size_vars(func, node.name)
        except ValueError as exc:
            raise self.error(node, str(exc)) from None
        return func

    def _size_var_decl(self, stmt: ast.stmt) -> bool:
        """``n = T.int32()`` (or ``T.int64()``): a size variable's declaration."""
        return (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and self.call_name(stmt.value) in _SIZE_DTYPES
            and not typing.cast(ast.Call, stmt.value).args
            and not typing.cast(ast.Call, stmt.value).keywords
        )

    def _has_blocks(self, body: Sequence[ast.stmt]) -> bool:
        return any(
            isinstance(n, ast.With) and any(self.call_name(i.context_expr) in _BLOCK for i in n.items)
            for stmt in body
            for n in ast.walk(stmt)
        )

    def _block_name(self, w: ast.With) -> Any:
        """The constant the block is named by (not checked to be a string here), else None."""
        if len(w.items) != 1:
            return None
        c = w.items[0].context_expr
        if self.call_name(c) in _BLOCK:
            call = typing.cast(ast.Call, c)  # call_name named it
            if call.args and isinstance(call.args[0], ast.Constant):
                return call.args[0].value
        return None

    def buffer_type(self, node: ast.expr, name: str) -> Buffer:
        """``T.Buffer((16, 16), "float32")`` (or the older ``T.Buffer[(16, 16), "float32"]``)."""
        if isinstance(node, ast.Subscript) and self.t_name(node.value) == "Buffer":
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return self.make_buffer(node, name, items, [])
        if isinstance(node, ast.Call) and self.call_name(node) == "Buffer":
            return self.make_buffer(node, name, node.args, node.keywords)
        raise self.error(
            node, f'parameter {name}: expected T.Buffer((..), "dtype"), found {ast.unparse(node)}'
        )

    def make_buffer(
        self,
        node: ast.AST,
        name: str,
        args: Sequence[ast.expr],
        keywords: Sequence[ast.keyword],
        what: str = "T.Buffer",
    ) -> Buffer:
        """A buffer from ``(shape, dtype="float32", scope="global", align=[...])`` arguments."""
        opts: dict[str, Optional[ast.expr]] = {"shape": None, "dtype": None, "scope": None, "align": None}
        opts.update(dict.fromkeys(_NEUTRAL_BUFFER_ARGS))
        if len(args) > 2:
            raise self.error(args[2], f"{what} takes (shape, dtype) and keywords scope=, align=")
        for key, arg in zip(("shape", "dtype"), args):
            opts[key] = arg
        for kw in keywords:
            if kw.arg not in opts or opts[kw.arg] is not None:
                raise self.error(kw, f"{what}: unexpected argument {kw.arg}=")
            opts[kw.arg] = kw.value
        shape_node = opts["shape"]
        if shape_node is None:
            raise self.error(node, f"{what} needs a shape")
        dims = shape_node.elts if isinstance(shape_node, (ast.Tuple, ast.List)) else [shape_node]
        shape: list[Any] = []
        for d in dims:
            value = self.int_constant(d)
            if value is None:
                shape.append(self.symbolic_dim(d, name))
                continue
            if value < 0:
                raise self.error(d, f"buffer {name}: shapes are non-negative integer constants, not {value}")
            shape.append(value)
        self.neutral_buffer_args(opts, name, shape, what)
        dtype = self.dtype(opts["dtype"]) if opts["dtype"] is not None else "float32"
        scope = self.string(opts["scope"], "scope") if opts["scope"] is not None else "global"
        align: tuple[tuple[int, int, int], ...] = ()
        if opts["align"] is not None and isinstance(self.literal(opts["align"]), int):
            pass  # TVM's align=: the allocation's byte alignment, which changes no value
        elif opts["align"] is not None:
            value = self.literal(opts["align"])
            if not (
                isinstance(value, (list, tuple))
                and all(
                    isinstance(x, (list, tuple)) and len(x) == 3 and all(isinstance(y, int) for y in x)
                    for x in value
                )
            ):
                raise self.error(
                    opts["align"], f"buffer {name}: align is a list of (dim, factor, offset) triples"
                )
            align = tuple(tuple(x) for x in value)
        try:
            return Buffer(name, tuple(shape), dtype, scope, align)
        except ValueError as exc:
            raise self.error(node, str(exc)) from None

    def symbolic_dim(self, d: ast.expr, name: str) -> Expr:
        """A dimension that is not a constant: ``"n"`` (declares size variable ``n``, int32, as
        TVM reads it, unless ``n`` is declared already), or an integer expression of size
        variables (``n``, ``n * 2``)."""
        if isinstance(d, ast.Constant) and isinstance(d.value, str):
            if not d.value.isidentifier() or "__" in d.value:
                raise self.error(
                    d, f"buffer {name}: a string dimension names a size variable, not {d.value!r}"
                )
            found = self.lookup(d.value)
            if isinstance(found, Var):
                return found
            if found is not None:
                raise self.error(
                    d, f"buffer {name}: dimension {d.value!r} names something that is not a size variable"
                )
            var = Var(d.value, "int32")
            self.scopes[0][d.value] = var
            return var
        if isinstance(d, ast.Name) and self.lookup(d.id) is None:
            raise self.error(
                d,
                f"buffer {name}: dimension {d.id} is not a declared size variable; declare it with "
                f'`{d.id} = T.int32()` at the top of the function, or write it "{d.id}"',
            )
        if isinstance(d, ast.Constant):
            raise self.error(
                d,
                f"buffer {name}: shapes are non-negative integers or size variables, found {ast.unparse(d)}",
            )
        value = self.as_expr(d)
        if not value.dtype.startswith("int") or any(
            isinstance(n, BufferLoad) or n in self.loops for n in pre_order(value)
        ):
            raise self.error(
                d,
                f"buffer {name}: a dimension is an integer constant or an expression of size "
                f"variables, found {ast.unparse(d)}",
            )
        return value

    def int_constant(self, node: ast.expr) -> Optional[int]:
        """The value of ``7``, ``T.int64(7)`` or ``T.int32(7)`` (how TVM writes shapes and
        extents), else None."""
        if isinstance(node, ast.Constant):
            value = node.value
            return value if isinstance(value, int) and not isinstance(value, bool) else None
        name = self.call_name(node)
        if name in ("int64", "int32", "int16", "int8") and not typing.cast(ast.Call, node).keywords:
            args = typing.cast(ast.Call, node).args
            if len(args) == 1:
                return self.int_constant(args[0])
        return None

    def neutral_buffer_args(self, opts: dict, name: str, shape: list[int], what: str) -> None:
        """Accept TVM's buffer keywords whose value describes a dense, unaliased buffer (what
        every workbench buffer is); refuse the others naming the keyword, as the IR would read
        a different buffer than the text means."""

        def refuse(key: str, why: str) -> TVMScriptError:
            return self.error(opts[key], f"{what} {name}: {key}={ast.unparse(opts[key])} {why}")

        if opts["data"] is not None:
            raise refuse("data", "shares another buffer's storage; workbench buffers never alias")
        if opts["elem_offset"] is not None and self.int_constant(opts["elem_offset"]) != 0:
            raise refuse("elem_offset", "is not supported: workbench buffers start at their first element")
        if opts["offset_factor"] is not None and self.int_constant(opts["offset_factor"]) is None:
            raise refuse("offset_factor", "is not supported: only a constant factor (of offset 0) is")
        if opts["buffer_type"] is not None:
            kind = opts["buffer_type"]
            if not (isinstance(kind, ast.Constant) and kind.value in ("", "default")):
                raise refuse("buffer_type", 'is not supported: only "default" buffers are')
        if opts["axis_separators"] is not None:
            seps = opts["axis_separators"]
            if not (isinstance(seps, (ast.List, ast.Tuple)) and not seps.elts):
                raise refuse("axis_separators", "is not supported: buffers are flat (no axis separators)")
        if opts["strides"] is not None:
            node = opts["strides"]
            items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else None
            given = [self.int_constant(x) for x in items] if items is not None else None
            if any(not isinstance(x, int) for x in shape):
                raise refuse(
                    "strides", "is not supported with a symbolic shape (buffers are dense row-major)"
                )
            dense: list[int] = []
            acc = 1
            for extent in reversed(shape):
                dense.insert(0, acc)
                acc *= extent
            if given != dense:
                raise refuse(
                    "strides",
                    f"is not supported: only the dense row-major strides {tuple(dense)} of shape "
                    f"{tuple(shape)} are (use T.sblock_alloc_buffer's align= / storage_align for padding)",
                )

    def match_buffer(self, stmt: ast.Assign, params: list[Any]) -> None:
        target = stmt.targets[0]
        call_node = typing.cast(ast.Call, stmt.value)  # the caller saw call_name == "match_buffer"
        if len(stmt.targets) != 1 or not isinstance(target, ast.Name):
            raise self.error(stmt, "T.match_buffer is assigned to one name: A = T.match_buffer(a, ...)")
        if not call_node.args or not isinstance(call_node.args[0], ast.Name):
            raise self.error(call_node, "T.match_buffer(handle, shape, dtype) needs the handle first")
        handle = call_node.args[0].id
        k = next((n for n, p in enumerate(params) if isinstance(p, ast.arg) and p.arg == handle), None)
        if k is None:
            raise self.error(
                call_node.args[0], f"{handle} is not a T.handle parameter (or was matched already)"
            )
        buf = self.make_buffer(call_node, target.id, call_node.args[1:], call_node.keywords, "T.match_buffer")
        params[k] = buf
        self.define(target.id, buf)

    # statements -----------------------------------------------------------------------
    def stmts(self, body: Sequence[ast.stmt], owner: _Block, parent: ast.AST) -> Stmt:
        out: list[Stmt] = []
        for k, node in enumerate(body):
            if isinstance(node, ast.Assign) and self.call_name(node.value) == "allocate":
                # ``B = T.allocate(...)``: B lives in the rest of this statement list
                call = typing.cast(ast.Call, node.value)  # call_name named it
                out.append(self.allocate(node.targets[0], call, body[k + 1 :], owner, node))
                break
            s = self.stmt(node, owner)
            if s is not None:
                out.append(s)
        if not out:
            raise self.error(parent, "nothing to do here: the body has no statement")
        return seq(*out)

    def allocate(
        self, target: ast.expr, value: ast.Call, body: Sequence[ast.stmt], owner: _Block, parent: ast.AST
    ) -> Allocate:
        if not isinstance(target, ast.Name):
            raise self.error(target, "T.allocate is bound to one name")
        buf = self.make_buffer(value, target.id, value.args, value.keywords, "T.allocate")
        self.scopes.append({target.id: buf})
        inner = self.stmts(body, owner, parent)
        self.scopes.pop()
        return Allocate(buf, inner)

    def stmt(self, node: ast.stmt, owner: _Block) -> Optional[Stmt]:
        if isinstance(node, ast.For):
            return self.for_loop(node, owner)
        if isinstance(node, ast.With):
            item = node.items[0]
            if (
                len(node.items) == 1
                and self.call_name(item.context_expr) == "allocate"
                and item.optional_vars is not None
            ):
                return self.allocate(
                    item.optional_vars, typing.cast(ast.Call, item.context_expr), node.body, owner, node
                )
            if len(node.items) != 1 or item.optional_vars is not None:
                raise self.error(node, '`with` takes one T.block("name") here')
            ctx = node.items[0].context_expr
            name = self.call_name(ctx)
            if name in _BLOCK:
                return self.block(typing.cast(ast.Call, ctx), node.body)
            if name == "init":
                raise self.error(
                    node, "`with T.init()` belongs directly inside a reduction block, before its body"
                )
            raise self.error(ctx, f'expected `with T.block("name")`, found {ast.unparse(ctx)}')
        if isinstance(node, ast.Assign):
            return self.assign(node, owner)
        if isinstance(node, ast.AnnAssign):
            self.let(node)
            return None
        if isinstance(node, ast.AugAssign):
            if not isinstance(node.target, ast.Subscript) or type(node.op) not in _BINOPS:
                raise self.error(node, "augmented assignment works on buffer elements: A[i] += x")
            load = self.expr(node.target)
            return self.store(node.target, node, self.binop(node, node.op, load, self.expr(node.value)))
        if isinstance(node, ast.If):
            then = self.stmts(node.body, owner, node)
            other = self.stmts(node.orelse, owner, node) if node.orelse else None
            return IfThenElse(self.as_expr(node.test, "bool"), then, other)
        if isinstance(node, ast.Pass) or _is_docstring(node):
            return None
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            name = self.call_name(node.value)
            if name == "evaluate":
                return Evaluate(self.as_expr(_one_arg(self, node.value, "T.evaluate")))
            if name in _BLOCK_ATTR:
                owner.attrs.update(self.literal(_one_arg(self, node.value, f"T.{name}")))
                return None
            if name in ("reads", "writes", "where"):
                raise self.error(node, f"T.{name} belongs directly inside a `with T.block(...)`")
            if name in ("func_attr", "match_buffer"):
                raise self.error(node, f"T.{name} belongs at the top of the function body")
            return Evaluate(self.as_expr(node.value))
        raise self.error(node, f"{_a(_what(node))} is not a TVMScript statement")

    def let(self, node: ast.AnnAssign) -> None:
        """``x: T.let[T.int32] = value`` (or ``x: T.int32 = value``): ``x`` stands for ``value``
        in the rest of the body. The IR has no Let node, so uses are substituted; a value that
        reads a buffer stored to before a use would change meaning, and that use is refused."""
        target, ann = node.target, node.annotation
        if not isinstance(target, ast.Name):
            raise self.error(target, "a let binds one name: x: T.let[T.int32] = ...")
        if isinstance(ann, ast.Subscript) and self.t_name(ann.value) == "let":
            ann = ann.slice
        dtype = self.t_name(ann)
        if dtype not in DTYPES:
            raise self.error(ann, f"a let is typed T.let[T.<dtype>] or T.<dtype>, found {ast.unparse(ann)}")
        if node.value is None:
            raise self.error(
                node,
                f"`{target.id}: T.{dtype}` declares a size variable this way only as a parameter; "
                f"in the body, write `{target.id} = T.{dtype}()` at the top of the function",
            )
        value = self.expr(node.value)
        if not isinstance(value, Expr):
            value = self.checked(node.value, convert, value, dtype)
        if value.dtype != dtype and not (dtype == "int64" and value.dtype == "int32"):
            raise self.error(
                node.value,
                f"let {target.id}: T.{dtype} is bound to {_a(value.dtype)} value {ast.unparse(node.value)}",
            )
        reads = {n.buffer for n in _loads(value)}
        self.define(target.id, _Let(target.id, value, frozenset(reads)))

    def assign(self, node: ast.Assign, owner: _Block) -> Optional[Stmt]:
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment (a = b = ...) is not TVMScript")
        target, value = node.targets[0], node.value
        name = self.call_name(value)
        if isinstance(target, ast.Subscript):
            return self.store(target, node, self.expr(value))
        if name in _ALLOC:
            if not isinstance(target, ast.Name):
                raise self.error(target, f"T.{name} is assigned to one name")
            call = typing.cast(ast.Call, value)  # call_name named it
            buf = self.make_buffer(call, target.id, call.args, call.keywords, f"T.{name}")
            owner.allocs.append(buf)
            self.define(target.id, buf)
            return None
        if name and name.startswith("axis."):
            raise self.error(node, f"T.{name} belongs directly inside a `with T.block(...)`, before its body")
        if name == "match_buffer":
            call = typing.cast(ast.Call, value)
            source = ast.unparse(call.args[0]) if call.args else "a region"
            raise self.error(
                node,
                f"T.match_buffer inside a block ({ast.unparse(target)} as a view of {source}) is not "
                "supported: workbench buffers never alias, so a sub-region view cannot be represented; "
                "index the buffer itself",
            )
        if name in DTYPES and not typing.cast(ast.Call, value).args:
            raise self.error(
                node,
                f"`{ast.unparse(target)} = T.{name}()` declares a size variable, which belongs at "
                "the top of the function (a dimension of some parameter), not inside its body",
            )
        raise self.error(
            target,
            "only buffer elements can be assigned (A[i] = ...); "
            f"`{ast.unparse(target)} = ...` would need a local variable, "
            "which TVMScript blocks do not have",
        )

    def store(self, target: ast.Subscript, node: ast.AST, value: Any) -> BufferStore:
        buf, indices = self.subscript(target)
        if any(isinstance(i, Range) for i in indices):
            raise self.error(target, f"cannot store into a slice of {buf.name}; store one element")
        for scope in self.scopes:
            for bound in scope.values():
                if isinstance(bound, _Let) and buf in bound.reads and bound.stale is None:
                    bound.stale = (buf.name, getattr(node, "lineno", 0))
        try:
            return BufferStore(buf, self.value_for(value, buf.dtype, node), tuple(indices))
        except TypeError as exc:
            raise self.error(node, str(exc)) from None

    def value_for(self, value: Any, dtype: str, node: ast.AST) -> Expr:
        """``value`` as an expression of ``dtype`` (a literal takes the dtype; an expression
        must already have it: a silent cast would hide a mistake)."""
        if not isinstance(value, Expr):
            return convert(value, dtype) if not isinstance(value, bool) else const(value, dtype)
        if value.dtype != dtype:
            raise self.error(
                node,
                f"{_a(value.dtype)} value stored into a {dtype} buffer; "
                f'write T.Cast("{dtype}", ...) to convert',
            )
        return value

    def for_loop(self, node: ast.For, owner: _Block) -> Stmt:
        if node.orelse:
            raise self.error(node.orelse[0], "for ... else is not TVMScript")
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        for t in targets:
            if not isinstance(t, ast.Name):
                raise self.error(t, "loop variables are plain names")
        it_node = node.iter
        name = self.call_name(it_node) if isinstance(it_node, ast.Call) else None
        is_range = (
            isinstance(it_node, ast.Call)
            and isinstance(it_node.func, ast.Name)
            and it_node.func.id == "range"
        )
        # the branches that read it as a call are those where it is one (a T. name, or range)
        it = typing.cast(ast.Call, it_node)
        headers: list[tuple]
        if name == "grid":
            if it.keywords:
                raise self.error(it.keywords[0], "T.grid takes extents only")
            if len(it.args) != len(targets):
                raise self.error(
                    it, f"T.grid has {_n(len(it.args), 'extent')} for {_n(len(targets), 'loop variable')}"
                )
            headers = [(IntImm(0), _narrow(self.as_expr(e)), ForKind.SERIAL, None, {}) for e in it.args]
        elif name in _LOOPS or is_range:
            if len(targets) != 1:
                raise self.error(
                    node.target, f"{ast.unparse(it.func)} gives one loop variable, not {len(targets)}"
                )
            headers = [self.loop_range(it, "range" if is_range else typing.cast(str, name))]
        else:
            raise self.error(
                it,
                "loops run over range(...), T.grid(...), T.serial, T.parallel, "
                "T.vectorized, T.unroll or T.thread_binding; found "
                f"{ast.unparse(it)}",
            )
        self.scopes.append({})
        made = []
        for t, (lo, extent, kind, tag, ann) in zip(typing.cast("list[ast.Name]", targets), headers):
            var = Var(t.id, extent.dtype if extent.dtype != "bool" else "int32")
            self.define(t.id, var)
            self.loops[var] = (lo, extent)
            made.append((var, lo, extent, kind, tag, ann))
        body = self.stmts(node.body, owner, node)
        self.scopes.pop()
        for var, lo, extent, kind, tag, ann in reversed(made):
            self.loops.pop(var, None)
            body = For(var, lo, extent, kind, body, thread_tag=tag, annotations=ann)
        return body

    def loop_range(self, it: ast.Call, kind: str) -> tuple:
        what = "range" if kind == "range" else f"T.{kind}"
        args = list(it.args)
        tag, annotations = None, {}
        allowed = {"annotations"} | ({"thread"} if kind == "thread_binding" else set())
        if kind == "thread_binding" and len(args) == 3:
            tag = self.string(args.pop(), "thread")
        for kw in it.keywords:
            if kw.arg not in allowed or kind == "range":
                raise self.error(kw, f"{what}: unexpected argument {kw.arg}=")
            if kw.arg == "thread":
                tag = self.string(kw.value, "thread")
            else:
                annotations = self.literal(kw.value)
                if not isinstance(annotations, dict):
                    raise self.error(kw.value, f"{what}: annotations is a dict")
        if not 1 <= len(args) <= 2:
            raise self.error(it, f"{what} takes an extent, or a start and a stop")
        if kind == "thread_binding" and tag is None:
            raise self.error(it, 'T.thread_binding needs thread="threadIdx.x" (or another tag)')
        lo, extent = self.span(args)
        return lo, extent, ForKind.SERIAL if kind == "range" else _LOOPS[kind], tag, annotations

    def span(self, args: Sequence[ast.expr]) -> tuple[Expr, Expr]:
        """(min, extent) of ``stop`` or ``start, stop``: the extent is read off ``start + n``
        as the printer writes it, so the tree comes back the same."""
        if len(args) == 1:
            return IntImm(0), _narrow(self.as_expr(args[0]))
        lo, hi = _narrow(self.as_expr(args[0])), _narrow(self.as_expr(args[1]))
        return lo, _extent(lo, hi)

    # blocks ---------------------------------------------------------------------------
    def block(self, ctx: ast.Call, body: Sequence[ast.stmt], is_root: bool = False) -> BlockRealize:
        what = ast.unparse(ctx.func)
        if (
            len(ctx.args) != 1
            or not isinstance(ctx.args[0], ast.Constant)
            or not isinstance(ctx.args[0].value, str)
            or ctx.keywords
        ):
            raise self.error(ctx, f'{what} takes the block\'s name: {what}("name")')
        name = ctx.args[0].value
        if name in self.block_names:
            raise self.error(
                ctx.args[0],
                f'two blocks are named "{name}"; a block\'s name is its identity, so names must be unique',
            )
        self.block_names.add(name)
        owner = _Block(name)
        self.scopes.append({})
        iter_vars: list[IterVar] = []
        values: list[Expr] = []
        predicate: Expr = TRUE
        reads: Optional[Sequence[BufferRegion]] = None
        writes: Optional[Sequence[BufferRegion]] = None
        init: Optional[Stmt] = None
        stmts: list[Stmt] = []
        for node in body:
            cname = self.call_name(node.value) if isinstance(node, (ast.Expr, ast.Assign)) else None
            if isinstance(node, ast.Assign) and cname and cname.startswith("axis."):
                if stmts:
                    raise self.error(node, f"block {name}: T.axis lines come before the body")
                for iv, v in self.axes(node, cname):
                    iter_vars.append(iv)
                    values.append(v)
            elif isinstance(node, ast.Expr) and cname in ("reads", "writes"):
                regions = self.regions(typing.cast(ast.Call, node.value))
                if cname == "reads":
                    reads = regions
                else:
                    writes = regions
            elif isinstance(node, ast.Expr) and cname == "where":
                predicate = _narrow(
                    self.as_expr(_one_arg(self, typing.cast(ast.Call, node.value), "T.where"), "bool")
                )
            elif (
                isinstance(node, ast.With)
                and len(node.items) == 1
                and self.call_name(node.items[0].context_expr) == "init"
            ):
                if init is not None:
                    raise self.error(node, f"block {name} has two `with T.init()`")
                init = self.stmts(node.body, owner, node)
            else:
                s = self.stmt(node, owner)
                if s is not None:
                    stmts.append(s)
        self.scopes.pop()
        if not stmts:
            if not is_root:
                raise self.error(ctx, f"block {name} has no body")
            stmts = [Evaluate(IntImm(0))]
        stmt = seq(*stmts)
        if reads is None or writes is None:
            ranges = {iv.var: iv.dom for iv in iter_vars}
            inferred = infer_access_regions(stmt, init, alloc_buffers=owner.allocs, var_ranges=ranges)
            reads = inferred[0] if reads is None else reads
            writes = inferred[1] if writes is None else writes
        block = Block(
            name, tuple(iter_vars), tuple(reads), tuple(writes), stmt, init, tuple(owner.allocs), owner.attrs
        )
        return BlockRealize(tuple(values), predicate, block)

    def axes(self, node: ast.Assign, kind: str) -> list[tuple[IterVar, Expr]]:
        """``v = T.axis.spatial(dom, value)`` or ``a, b = T.axis.remap("SR", [i, k])``."""
        target, call_node = node.targets[0], typing.cast(ast.Call, node.value)  # a T.axis call
        # (each is checked to be a Name just below)
        names = typing.cast("list[ast.Name]", target.elts if isinstance(target, ast.Tuple) else [target])
        for t in names:
            if not isinstance(t, ast.Name):
                raise self.error(t, "block iterators are plain names")
        out: list[tuple[IterVar, Expr]] = []
        if kind == "axis.remap":
            if len(call_node.args) != 2 or call_node.keywords:
                raise self.error(call_node, 'T.axis.remap takes ("SR", [loop vars])')
            kinds, loops = call_node.args
            if not isinstance(kinds, ast.Constant) or not isinstance(kinds.value, str):
                raise self.error(kinds, 'T.axis.remap expects its kinds as a string such as "SSR"')
            if not isinstance(loops, (ast.List, ast.Tuple)):
                raise self.error(loops, "T.axis.remap expects a list of loop variables")
            letters = kinds.value
            if len(letters) != len(names):
                raise self.error(
                    kinds, f'T.axis.remap expects one letter per iterator, got "{letters}" for {len(names)}'
                )
            if len(loops.elts) != len(names):
                raise self.error(
                    loops, f"T.axis.remap binds {len(names)} iterators to {len(loops.elts)} loop variables"
                )
            for t, letter, lnode in zip(names, letters, loops.elts):
                if letter not in "SR":
                    raise self.error(
                        kinds, f'T.axis.remap kinds are "S" (spatial) or "R" (reduce), got "{letter}"'
                    )
                var = self.expr(lnode) if isinstance(lnode, ast.Name) else None
                if not isinstance(var, Var) or var not in self.loops:
                    raise self.error(
                        lnode,
                        f"T.axis.remap binds to loop variables of enclosing "
                        f"loops; {ast.unparse(lnode)} is not one",
                    )
                lo, extent = self.loops[var]
                out.append((IterVar(Var(t.id, var.dtype), Range(lo, extent), letter), var))
        else:
            axis = kind[len("axis.") :]
            if axis not in _AXES:
                raise self.error(
                    call_node.func,
                    f"unknown iterator kind T.{kind}; expected "
                    "T.axis.spatial, T.axis.reduce, T.axis.opaque "
                    "or T.axis.remap",
                )
            if len(names) != 1:
                raise self.error(target, f"T.{kind} defines one iterator")
            if len(call_node.args) != 2 or call_node.keywords:
                raise self.error(
                    call_node, f"T.{kind} takes (domain, value): T.{kind}(128, i) or T.{kind}((lo, hi), i)"
                )
            dom_node, value_node = call_node.args
            dom_args = dom_node.elts if isinstance(dom_node, ast.Tuple) else [dom_node]
            if len(dom_args) not in (1, 2):
                raise self.error(dom_node, f"T.{kind}: the domain is an extent or (lo, hi)")
            lo, extent = self.span(dom_args)
            value = _narrow(self.as_expr(value_node))
            out.append((IterVar(Var(names[0].id, value.dtype), Range(lo, extent), _AXES[axis]), value))
        for t, (iv, _) in zip(names, out):
            self.define(t.id, iv.var)
        return out

    def regions(self, node: ast.Call) -> list[BufferRegion]:
        items: list[ast.expr] = []
        for a in node.args:  # T.reads(A[..], B[..]) or the older T.reads([A[..], B[..]])
            items.extend(a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])
        out = []
        for item in items:
            if (  # TVM lists a let-bound scalar it reads as `x.source[0]`: not a buffer access
                isinstance(item, ast.Subscript)
                and isinstance(item.value, ast.Attribute)
                and item.value.attr == "source"
                and isinstance(item.value.value, ast.Name)
                and isinstance(self.lookup(item.value.value.id), _Let)
            ):
                continue
            if isinstance(item, ast.Name) and isinstance(self.lookup(item.id), Buffer):
                out.append(BufferRegion.full(self.lookup(item.id)))
                continue
            if not isinstance(item, ast.Subscript):
                raise self.error(
                    item,
                    f"{ast.unparse(node.func)} lists buffer regions such as "
                    f"A[vi, 0:16], found {ast.unparse(item)}",
                )
            buf, indices = self.subscript(item, slices=True)
            out.append(
                BufferRegion(
                    buf, tuple(i if isinstance(i, Range) else Range(i, IntImm(1, i.dtype)) for i in indices)
                )
            )
        return out

    def subscript(self, node: ast.Subscript, slices: bool = False) -> tuple[Buffer, list]:
        if not isinstance(node.value, ast.Name):
            raise self.error(node.value, f"only buffers can be indexed, found {ast.unparse(node.value)}")
        buf = self.lookup(node.value.id)
        if not isinstance(buf, Buffer):
            raise self.error(
                node.value,
                f"{node.value.id} is not a buffer" if buf is not None else f"unknown buffer {node.value.id}",
            )
        sl = node.slice
        items = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        if len(items) != buf.ndim:
            raise self.error(node, f"buffer {buf.name} has {buf.ndim} dimensions, indexed with {len(items)}")
        out: list[Union[Expr, Range]] = []
        for it in items:
            if isinstance(it, ast.Slice):
                if not slices:
                    raise self.error(it, "slices (lo:hi) are only allowed in T.reads / T.writes")
                if it.lower is None or it.upper is None or it.step is not None:
                    raise self.error(it, "a region slice is lo:hi, both given, no step")
                out.append(Range(*self.span([it.lower, it.upper])))
            else:
                out.append(_narrow(self.as_expr(it)))
        return buf, out

    # expressions ----------------------------------------------------------------------
    def as_expr(self, node: ast.expr, dtype: Optional[str] = None) -> Expr:
        value = self.expr(node)
        try:
            return convert(value, dtype) if not isinstance(value, Expr) else value
        except TypeError as exc:
            raise self.error(node, str(exc)) from None

    def expr(self, node: ast.expr) -> Any:
        """An ``Expr``, or a Python number for a literal (it takes its dtype from the other
        operand, as in TVMScript: ``A[i] * 2`` on float32 is a float32 multiply)."""
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return const(node.value, "bool")
            if isinstance(node.value, (int, float)):
                return node.value
            raise self.error(node, f"a {type(node.value).__name__} constant is not an expression")
        if isinstance(node, ast.Name):
            found = self.lookup(node.id)
            if isinstance(found, Expr):
                return found
            if isinstance(found, _Let):
                if found.stale is not None:
                    raise self.error(
                        node,
                        f"let {node.id} reads {found.stale[0]}, which line {found.stale[1]} stores to "
                        "before this use; the IR has no Let node and substitutes let values, which "
                        "would read the new value here",
                    )
                return found.value
            if isinstance(found, Buffer):
                raise self.error(node, f"buffer {node.id} used as a value; index it: {node.id}[...]")
            raise self.error(node, f"unknown name {node.id}")
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _BINOPS:
                raise self.error(
                    node,
                    f"operator {_OP_TEXT.get(type(node.op), '?')} is not supported in TVMScript expressions",
                )
            return self.binop(node, node.op, self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.UnaryOp):
            value = self.expr(node.operand)
            if isinstance(node.op, ast.USub):
                return -value
            if isinstance(node.op, ast.UAdd):
                return value
            if isinstance(node.op, ast.Not):
                return Not(self.bool_expr(node.operand, value))
            raise self.error(node, "operator ~ is not supported in TVMScript expressions")
        if isinstance(node, ast.BoolOp):
            parts = [self.bool_expr(v, self.expr(v)) for v in node.values]
            out = parts[0]
            for p in parts[1:]:
                out = And(out, p) if isinstance(node.op, ast.And) else Or(out, p)
            return out
        if isinstance(node, ast.Compare):
            left = self.expr(node.left)
            conj: Optional[Expr] = None
            for op, right_node in zip(node.ops, node.comparators):
                if type(op) not in _CMPOPS:
                    raise self.error(
                        node,
                        f"comparison `{_OP_TEXT.get(type(op), '?')}` is not "
                        "supported in TVMScript expressions",
                    )
                right = self.expr(right_node)
                c = self.binop(node, op, left, right, _CMPOPS)
                conj = c if conj is None else And(conj, c)
                left = right
            return conj
        if isinstance(node, ast.IfExp):
            return self.checked(
                node, if_then_else, self.expr(node.test), self.expr(node.body), self.expr(node.orelse)
            )
        if isinstance(node, ast.Subscript):
            buf, indices = self.subscript(node)
            return buf[tuple(indices)]
        if isinstance(node, ast.Call):
            return self.call(node)
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and isinstance(self.lookup(node.value.id), Buffer)
        ):
            raise self.error(
                node,
                f"{ast.unparse(node)} (the buffer's raw {node.attr}) is an opaque access: "
                "the IR has no pointers or opaque calls, so it cannot be read",
            )
        raise self.error(node, f"{_a(_what(node))} is not a TVMScript expression")

    def bool_expr(self, node: ast.expr, value: Any) -> Expr:
        if isinstance(value, Expr) and value.dtype != "bool":
            raise self.error(
                node, f"expected a condition, found {_a(value.dtype)} expression {ast.unparse(node)}"
            )
        return convert(value, "bool")

    def binop(self, node: ast.AST, op: ast.AST, a: Any, b: Any, table=_BINOPS) -> Any:
        if not isinstance(a, Expr) and not isinstance(b, Expr):
            a = convert(a)  # two literals: a constant expression, as TVM folds it later
        return self.checked(node, table[type(op)], a, b)

    def checked(self, node: ast.AST, fn: Callable, *args: Any) -> Any:
        """Build an IR node; a dtype clash becomes an error at ``node``."""
        try:
            return fn(*args)
        except (TypeError, ValueError) as exc:
            raise self.error(node, str(exc)) from None

    def call(self, node: ast.Call) -> Any:
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "astype"
            and self.t_name(node.func) is None
        ):
            dtype = self.dtype(_one_arg(self, node, "astype"))
            return self.checked(node, cast, dtype, self.expr(node.func.value))
        name = self.t_name(node.func)
        if name is None:
            called = ast.unparse(node.func)
            hint = f"; did you mean T.{called}?" if called in _EXPR_FUNCS else ""
            raise self.error(
                node.func, f"unknown function {called}: TVMScript expressions call T.* functions only{hint}"
            )
        if name in _OPAQUE_CALLS or name.startswith(("tvm_", "ptx_", "call_")):
            raise self.error(
                node,
                f"T.{name} is an opaque intrinsic (pointers, external calls, hardware fragments): "
                "the IR has no opaque calls, so a program using it cannot be read",
            )
        if node.keywords:
            raise self.error(node.keywords[0], f"T.{name}: unexpected argument {node.keywords[0].arg}=")
        args = node.args
        if name == "likely":  # a branch-prediction hint: the condition itself is what it means
            arg = _one_arg(self, node, "T.likely")
            return self.bool_expr(arg, self.expr(arg))
        if name in DTYPES:  # T.float32(0), T.int64(4), T.float32(x)
            arg = _one_arg(self, node, f"T.{name}")
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                try:
                    return const(float(arg.value), name)
                except ValueError:
                    raise self.error(arg, f'T.{name}("{arg.value}"): not a number') from None
            value = self.expr(arg)
            if isinstance(value, Expr) and not isinstance(value, (IntImm, FloatImm)):
                return self.checked(node, cast, name, value)
            value = value.value if isinstance(value, (IntImm, FloatImm)) else value
            if name == "int64" and isinstance(value, int) and _fits_int32(value):
                return value  # narrowed: a literal takes its dtype from where it is used
            return self.checked(node, const, value, name)
        if name in ("Cast", "cast"):
            if len(args) != 2:
                raise self.error(
                    node,
                    f"T.{name} takes (dtype, value)" if name == "Cast" else "T.cast takes (value, dtype)",
                )
            dtype_node, value_node = args if name == "Cast" else args[::-1]
            dtype = self.dtype(dtype_node)
            value = self.as_expr(value_node)
            return (
                value if value.dtype == dtype and name == "cast" else self.checked(node, Cast, dtype, value)
            )
        if name in ("max_value", "min_value"):
            dtype = self.dtype(_one_arg(self, node, f"T.{name}"))
            return const(_limit(dtype, name == "max_value"), dtype)
        values = [self.expr(a) for a in args]
        if name in _FUNCS2:
            if len(values) != 2:
                raise self.error(node, f"T.{name} takes two arguments, got {len(values)}")
            a, b = values
            if not isinstance(a, Expr) and not isinstance(b, Expr):
                a = convert(a)
            return self.checked(node, _FUNCS2[name], a, b)
        if name in ("if_then_else", "Select"):
            if len(values) != 3:
                raise self.error(node, f"T.{name} takes (condition, then, else)")
            return self.checked(node, if_then_else, *values)
        if name in INTRINSICS:
            want = 2 if name == "pow" else 1
            if len(values) != want:
                raise self.error(node, f"T.{name} takes {want} argument{'s' * (want > 1)}, got {len(values)}")
            return self.checked(node, call, name, *values)
        close = difflib.get_close_matches(name, _EXPR_FUNCS, n=1)
        hint = f"; did you mean T.{close[0]}?" if close else ""
        raise self.error(node.func, f"unknown TVMScript function T.{name}{hint}")

    # literals -------------------------------------------------------------------------
    def literal(self, node: ast.expr) -> Any:
        """A Python value (attribute / annotation values): dicts, lists, tuples, constants; IR
        expressions inside (``T.int64(4)``, a loop variable) are read as expressions."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise self.error(node, "** in a dict is not TVMScript")
            # (no key is None: checked above)
            return {
                self.literal(typing.cast(ast.expr, k)): self.literal(v)
                for k, v in zip(node.keys, node.values)
            }
        if isinstance(node, ast.List):
            return [self.literal(x) for x in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.literal(x) for x in node.elts)
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)
            and isinstance(node.operand.value, (int, float))
        ):
            return -node.operand.value
        if isinstance(node, ast.Name) and isinstance(self.lookup(node.id), Buffer):
            return self.lookup(node.id)
        return self.as_expr(node)

    def string(self, node: ast.expr, what: str) -> str:
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            raise self.error(node, f"{what} is a string, found {ast.unparse(node)}")
        return node.value

    def dtype(self, node: ast.expr) -> str:
        value = self.string(node, "a dtype")
        if value not in DTYPES:
            raise self.error(node, f'unknown dtype "{value}"; expected one of {", ".join(DTYPES)}')
        return value


class _Let:
    """A let-bound name: its value, the buffers the value reads, and the first store to one of
    them after the binding (buffer name, line), if any."""

    def __init__(self, name: str, value: Expr, reads: frozenset) -> None:
        self.name, self.value, self.reads = name, value, reads
        self.stale: Optional[tuple[str, int]] = None


def _loads(e: Expr) -> list[BufferLoad]:
    return [n for n in pre_order(e) if isinstance(n, BufferLoad)]


def _fits_int32(value: int) -> bool:
    return -(2**31) <= value < 2**31


def _narrow(e: Expr) -> Expr:
    """Index arithmetic TVM writes in int64 (``T.int64(128)`` shapes, ``T.Cast("int64", v)``)
    as the int32 arithmetic of the IR: int64 constants that fit become int32, and casts of int32
    values to int64 are dropped (every extent fits in int32, so no index value overflows)."""
    if e.dtype not in ("int64", "bool") or isinstance(e, (Var, BufferLoad)):
        return e
    if isinstance(e, IntImm):
        return IntImm(e.value) if e.dtype == "int64" and _fits_int32(e.value) else e
    if isinstance(e, Cast):
        inner = _narrow(e.value)
        return inner if inner.dtype == "int32" else e
    if isinstance(e, BinaryOp):
        a, b = _narrow(e.a), _narrow(e.b)
        if a is e.a and b is e.b:
            return e
        if a.dtype != b.dtype:
            return e  # one side is real int64 data: leave the whole operation as written
        return type(e)(a, b)
    if isinstance(e, Not):
        a = _narrow(e.a)
        return e if a is e.a else Not(a)
    return e


def _extent(lo: Expr, hi: Expr) -> Expr:
    if isinstance(lo, IntImm) and isinstance(hi, IntImm):
        return IntImm(hi.value - lo.value, lo.dtype)
    if isinstance(hi, Add) and structural_equal(hi.a, lo, map_free_vars=False):
        return hi.b
    return Simplifier({}).simplify(Sub.make(hi, lo))


def _limit(dtype: str, largest: bool) -> Any:
    if dtype == "bool":
        return largest
    info = dtype_info(dtype)
    return info.max if largest else info.min


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def _dotted(node: ast.AST) -> str:
    """``"tvm.script.ir_module"`` for that attribute chain, ``""`` for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def _one_arg(p: _Parser, node: ast.Call, what: str) -> ast.expr:
    if len(node.args) != 1 or node.keywords:
        raise p.error(node, f"{what} takes one argument, got {len(node.args) + len(node.keywords)}")
    return node.args[0]


def _type_var_name(node: ast.stmt) -> Optional[str]:
    """``n`` of a module-level ``n = TypeVar("n")``, else None."""
    if not (
        isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    ):
        return None
    v = node.value
    name = node.targets[0].id
    if (
        isinstance(v, ast.Call)
        and isinstance(v.func, ast.Name)
        and v.func.id == "TypeVar"
        and len(v.args) == 1
        and isinstance(v.args[0], ast.Constant)
        and v.args[0].value == name
        and not v.keywords
    ):
        return name
    return None


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _what(node: ast.AST) -> str:
    """A readable name of a syntax node's kind ("while loop", "lambda" ...)."""
    return _KIND_TEXT.get(
        type(node),
        type(node).__name__.lower() + " " + ("statement" if isinstance(node, ast.stmt) else "expression"),
    )


_KIND_TEXT = {
    ast.While: "while loop",
    ast.Lambda: "lambda",
    ast.ListComp: "list comprehension",
    ast.FunctionDef: "nested function",
    ast.Return: "return statement",
    ast.Import: "import",
    ast.ImportFrom: "import",
    ast.Try: "try statement",
    ast.Global: "global statement",
    ast.Delete: "del statement",
    ast.Attribute: "attribute",
    ast.Starred: "starred expression",
    ast.Dict: "dict",
    ast.List: "list",
    ast.Tuple: "tuple",
    ast.Assign: "assignment",
    ast.ClassDef: "class",
    ast.Expr: "expression statement",
    ast.Lambda: "lambda",
    ast.JoinedStr: "f-string",
    ast.Await: "await",
    ast.Yield: "yield",
}
_OP_TEXT = {
    ast.Pow: "**",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}
