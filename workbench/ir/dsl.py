"""The compute DSL: describe *what* to compute; ``create_func`` turns it into a ``PrimFunc``.

>>> A = placeholder((128, 128), "float32", name="A")
>>> B = placeholder((128, 128), "float32", name="B")
>>> k = reduce_axis(128, name="k")
>>> C = compute((128, 128), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")
>>> func = create_func([A, B, C], name="matmul")

Each ``compute`` becomes one block named after the tensor, nested in one loop per axis (spatial
axes first, then reduce axes), exactly what TensorIR's ``create_prim_func`` produces.
"""

from __future__ import annotations

import inspect
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from .buffer import Buffer
from .expr import (
    BufferLoad,
    Expr,
    FloatImm,
    IntImm,
    Max,
    Min,
    Var,
    call,
    cast,
    check_dtype,
    const,
    convert,
    if_then_else,
    is_float,
)
from .func import PrimFunc, check_size_vars
from .functor import pre_order, substitute
from .region import infer_access_regions
from .stmt import REDUCE, SPATIAL, Block, BlockRealize, BufferStore, IterVar, Range, Stmt, TRUE, make_for, seq
from .verify import verify_bounds

__all__ = [
    "var",
    "Tensor",
    "ReduceAxis",
    "placeholder",
    "compute",
    "reduce_axis",
    "sum",
    "max",
    "min",
    "maximum",
    "minimum",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "tanh",
    "sigmoid",
    "fabs",
    "pow",
    "erf",
    "if_then_else",
    "cast",
    "create_func",
    "all_of",
    "any_of",
]


#: compute buffer -> its Tensor, so create_func can walk from outputs to producers
_PRODUCER: "weakref.WeakKeyDictionary[Buffer, Tensor]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False, repr=False)
class ReduceAxis(Var):
    """A reduction axis: a variable (usable in index arithmetic) with its domain."""

    dom: Range = None  # type: ignore[assignment]

    @property
    def var(self) -> Var:
        return self

    @property
    def extent(self) -> Any:
        """An int, or the Expr of a symbolic extent."""
        ext = self.dom.extent
        return ext.value if isinstance(ext, IntImm) else ext


@dataclass(frozen=True, eq=False)
class Reduce(Expr):
    """``combiner`` over ``axes`` of ``source``: only valid as the whole body of a compute."""

    combiner: str  # "sum" | "max" | "min"
    source: Expr
    axes: tuple[ReduceAxis, ...]
    init: Expr
    dtype: str = ""

    def __post_init__(self):
        object.__setattr__(self, "dtype", self.source.dtype)


@dataclass(eq=False)
class Tensor:
    """A placeholder (input) or the output of a ``compute`` stage."""

    buffer: Buffer
    axes: tuple[Var, ...] = ()
    body: Optional[Expr] = None  # None for placeholders

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def shape(self) -> tuple[Any, ...]:
        return self.buffer.shape

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def ndim(self) -> int:
        return self.buffer.ndim

    def __getitem__(self, indices):
        if not isinstance(indices, tuple):
            indices = (indices,)
        return self.buffer[indices]

    def __repr__(self) -> str:
        kind = "placeholder" if self.body is None else "compute"
        return f"Tensor({self.name}, {list(self.shape)}, {self.dtype}, {kind})"


def var(name: str, dtype: str = "int32") -> Var:
    """A size variable: a dimension known only when the kernel is called (``int32`` or ``int64``).

    Use it in shapes (``placeholder((n, 64))``, ``compute((n, 64), ...)``, ``reduce_axis(n)``);
    the built kernel takes its value from the first parameter whose shape names it."""
    if dtype not in ("int32", "int64"):
        raise TypeError(f"var {name!r}: a size variable is int32 or int64, got {dtype!r}")
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"var: the name must be an identifier, got {name!r}")
    return Var(name, dtype)


def _shape(shape: Any) -> tuple:
    return tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)


def placeholder(shape: Sequence[Any], dtype: str = "float32", name: str = "placeholder") -> Tensor:
    return Tensor(Buffer(name, _shape(shape), check_dtype(dtype)))


def reduce_axis(dom: Any, name: str = "k") -> ReduceAxis:
    """A reduction axis over ``[0, dom)`` or ``[lo, hi)``; bounds may be size-variable expressions."""
    lo, hi = dom if isinstance(dom, (tuple, list)) else (0, dom)
    lo, hi = convert(lo), convert(hi)
    if isinstance(lo, IntImm) and isinstance(hi, IntImm):
        extent: Expr = IntImm(hi.value - lo.value, hi.dtype)
    elif isinstance(lo, IntImm) and lo.value == 0:
        extent = hi
    else:
        extent = hi - lo
    return ReduceAxis(name, extent.dtype, Range(cast(extent.dtype, lo), extent))


def compute(
    shape: Sequence[Any], fcompute: Callable[..., Any], name: str = "compute", dtype: Optional[str] = None
) -> Tensor:
    """A stage ``name[i, j, ...] = fcompute(i, j, ...)``; axis names come from the lambda."""
    shape = _shape(shape)
    try:
        params = list(inspect.signature(fcompute).parameters)
    except (TypeError, ValueError):
        params = []
    if len(params) != len(shape):
        params = [f"i{d}" for d in range(len(shape))] if not params or params[0] != "*" else params
    if len(params) != len(shape):
        raise ValueError(f"compute {name}: fcompute takes {len(params)} axes, shape has {len(shape)}")
    axes = tuple(Var(p, s.dtype if isinstance(s, Expr) else "int32") for p, s in zip(params, shape))
    body = fcompute(*axes)
    body = convert(body, dtype)
    if dtype is not None and body.dtype != dtype and not isinstance(body, Reduce):
        body = cast(dtype, body)
    t = Tensor(Buffer(name, shape, dtype or body.dtype), axes, body)
    _PRODUCER[t.buffer] = t
    return t


# ----------------------------------------------------------------------------------------
# reductions and elementwise math


def _axes(axis: Any) -> tuple[ReduceAxis, ...]:
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    if not axes or not all(isinstance(a, ReduceAxis) for a in axes):
        raise TypeError("axis must be a reduce_axis or a list of them")
    return axes


def _lowest(dtype: str) -> Expr:
    return FloatImm(float("-inf"), dtype) if is_float(dtype) else const(-(2**31), dtype)


def _highest(dtype: str) -> Expr:
    return FloatImm(float("inf"), dtype) if is_float(dtype) else const(2**31 - 1, dtype)


def sum(expr: Any, axis: Any, init: Any = None) -> Reduce:  # noqa: A001  (DSL name)
    expr = convert(expr)
    return Reduce("sum", expr, _axes(axis), convert(0 if init is None else init, expr.dtype))


def max(expr: Any, axis: Any, init: Any = None) -> Reduce:  # noqa: A001
    expr = convert(expr)
    init = _lowest(expr.dtype) if init is None else convert(init, expr.dtype)
    return Reduce("max", expr, _axes(axis), init)


def min(expr: Any, axis: Any, init: Any = None) -> Reduce:  # noqa: A001
    expr = convert(expr)
    init = _highest(expr.dtype) if init is None else convert(init, expr.dtype)
    return Reduce("min", expr, _axes(axis), init)


def maximum(a: Any, b: Any) -> Expr:
    return Max.make(a, b)


def minimum(a: Any, b: Any) -> Expr:
    return Min.make(a, b)


def exp(x):
    return call("exp", x)


def log(x):
    return call("log", x)


def sqrt(x):
    return call("sqrt", x)


def rsqrt(x):
    return call("rsqrt", x)


def tanh(x):
    return call("tanh", x)


def sigmoid(x):
    return call("sigmoid", x)


def fabs(x):
    return call("fabs", x)


def pow(x, y):
    return call("pow", x, y)  # noqa: A001


def erf(x):
    return call("erf", x)


def all_of(*conds: Any) -> Expr:
    out = convert(conds[0], "bool")
    for c in conds[1:]:
        out = out & c
    return out


def any_of(*conds: Any) -> Expr:
    out = convert(conds[0], "bool")
    for c in conds[1:]:
        out = out | c
    return out


# ----------------------------------------------------------------------------------------
# create_func


def _loads(expr: Expr) -> list:
    return [n for n in pre_order(expr) if isinstance(n, BufferLoad)]


def _stage_block(t: Tensor) -> Stmt:
    """Loops + block of one compute stage."""
    body = t.body
    red = body if isinstance(body, Reduce) else None
    raxes = red.axes if red else ()
    loop_vars = [Var(v.name, v.dtype) for v in t.axes] + [Var(r.name, r.dtype) for r in raxes]
    ivars = [
        IterVar(Var("v" + v.name, v.dtype), Range.from_extent(s), SPATIAL) for v, s in zip(t.axes, t.shape)
    ]
    ivars += [IterVar(Var("v" + r.name, r.dtype), r.dom, REDUCE) for r in raxes]
    vmap = {src: iv.var for src, iv in zip(list(t.axes) + list(raxes), ivars)}
    out_idx = tuple(iv.var for iv in ivars[: len(t.axes)])
    out = t.buffer
    if red is None:
        value = cast(out.dtype, substitute(body, vmap))
        stmt, init = BufferStore(out, value, out_idx), None
    else:
        src = cast(out.dtype, substitute(red.source, vmap))
        cur = out[out_idx]
        update = {"sum": lambda: cur + src, "max": lambda: Max(cur, src), "min": lambda: Min(cur, src)}
        stmt = BufferStore(out, update[red.combiner](), out_idx)
        init = BufferStore(out, cast(out.dtype, red.init), out_idx)
    reads, writes = infer_access_regions(stmt, init)
    block = Block(t.name, tuple(ivars), reads, writes, stmt, init)
    nest: Stmt = BlockRealize(tuple(loop_vars), TRUE, block)
    extents = list(t.shape) + [r.dom for r in raxes]
    for v, ext in reversed(list(zip(loop_vars, extents))):
        if isinstance(ext, Range):
            nest = make_for(v, ext.extent, nest, min=ext.min)
        else:
            nest = make_for(v, ext, nest)
    return nest


def _producers(t: Tensor) -> list[Tensor]:
    """The compute tensors ``t`` reads (placeholders are reached as parameters)."""
    if t.body is None:
        return []
    exprs = [t.body.source, t.body.init] if isinstance(t.body, Reduce) else [t.body]
    return [_PRODUCER[ld.buffer] for e in exprs for ld in _loads(e) if ld.buffer in _PRODUCER]


def create_func(tensors: Sequence[Tensor], name: str = "main") -> PrimFunc:
    """Build a PrimFunc whose parameters are ``tensors`` (inputs and outputs, in that order).

    Every compute stage reachable from the parameters becomes one block, producers first;
    stages that are not parameters become intermediate buffers allocated by the root block.
    Raises :class:`~workbench.errors.OutOfBoundsError` (a ``ValueError``) when a stage provably
    indexes a tensor outside its shape.
    """
    params = tuple(t.buffer for t in tensors)
    stages: list[Tensor] = []
    done: set[int] = set()

    def visit(t: Tensor, path: tuple[int, ...]) -> None:
        if id(t) in done:
            return
        if id(t) in path:
            raise ValueError(f"create_func: cycle through {t.name}")
        for p in _producers(t):
            visit(p, path + (id(t),))
        if t.body is not None:
            for e in [t.body.source, t.body.init] if isinstance(t.body, Reduce) else [t.body]:
                for ld in _loads(e):
                    if ld.buffer not in _PRODUCER and ld.buffer not in params:
                        raise ValueError(
                            f"create_func: stage {t.name} reads {ld.buffer.name}, which is not a parameter"
                        )
            stages.append(t)
        done.add(id(t))

    for t in tensors:
        visit(t, ())
    all_buffers = list(params) + [t.buffer for t in stages if t.buffer not in params]
    names = [b.name for b in all_buffers]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"create_func: several tensors are named {dup}; names must be unique")
    intermediates = tuple(all_buffers[len(params) :])
    body = seq(*[_stage_block(t) for t in stages])
    root = Block("root", (), (), (), body, alloc_buffers=intermediates)
    func = PrimFunc(name, params, BlockRealize((), TRUE, root))
    check_size_vars(func, "create_func")
    # a stage indexing past a tensor (B[i, j] for i < 32 when B has 16 rows) is refused here,
    # naming the block, rather than built into a kernel that reads out of bounds
    verify_bounds(func)
    return func
