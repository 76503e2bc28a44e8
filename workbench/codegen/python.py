"""The python target: the lowered function as one readable Python ``def``, run by CPython.

This is the reference backend — for teaching (read the loop nest a schedule produced) and for
checking the compiled backends. For the matmul of ``lower``'s docstring it generates::

    def matmul(A_arr, B_arr, C_arr):
        A = A_arr.ravel().tolist()
        B = B_arr.ravel().tolist()
        C = C_arr.ravel().tolist()
        for i in range(128):
            for j in range(128):
                for k in range(128):
                    if k == 0:
                        C[i * 128 + j] = 0.0
                    C[i * 128 + j] += A[i * 128 + k] * B[k * 128 + j]
        _store(C_arr, C)

Semantics and their limits (documented choices, not accidents):

* Buffers are flat Python lists (row-major, ``Buffer.strides()``): CPython indexes a list of
  Python scalars several times faster than a numpy array, and computes on Python floats faster
  than on numpy scalars. Written parameters are copied back into their arrays at the end.
* Floats are computed in double precision and rounded to the buffer dtype only when copied back
  (float32 results agree with numpy to ~1e-6 relative). Integers are unbounded (no wrap-around).
* ``//`` and ``%`` floor (Python = IR semantics); integer ``Div`` truncates towards zero like C.
  Float ``/``, ``exp``, ``log`` ... follow IEEE (inf / nan) where CPython would raise.
* ``round`` rounds half away from zero (C's rule, not numpy's half to even).
* Loop kinds and thread bindings are ignored: every loop runs serially.
* Every access is bounds-checked, dimension by dimension: where the loop ranges do not prove
  an index in bounds, the flat index comes from ``_at(A_dims, i - 1, j)``, which raises
  :class:`~workbench.errors.BufferIndexError` naming the buffer, the index and the shape
  instead of a bare ``IndexError`` (or, for a negative index, instead of silently wrapping
  around as a list does). A check under an ``if`` or an ``if_then_else`` runs only where the
  guard holds, so padding reads are checked only where they happen.
* Intermediate buffers start *poisoned*, not zeroed: NaN for floats, the dtype's minimum for
  signed integers (maximum for unsigned), so a read of what was never written shows in the
  output instead of passing for a zero (DESIGN decision 9).
"""

from __future__ import annotations

import itertools
import keyword
import math
from typing import Any, Callable

import numpy as np

from ..errors import BufferIndexError, BuildError
from ..ir.arith import const_int_bound, simplify
from ..ir.dtype import poison
from ..ir import expr as E
from ..ir.buffer import Buffer, shape_str
from ..ir.func import PrimFunc, size_var_sources
from ..ir.structural import structural_equal
from ..ir.functor import pre_order, uses_var
from ..ir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    Range,
    SeqStmt,
    Stmt,
)
from .kernel import Kernel
from .lower import lower
from .printing import SourceWriter, flat_index
from .pyexpr import P_ADD, P_ATOM, P_MUL, P_UNARY, PyExprPrinter

# ---------------------------------------------------------------------------------------------
# runtime: the names generated code may call


def _ieee(fast: Callable[..., float], slow: Callable[..., Any]) -> Callable[..., float]:
    """``fast`` (a ``math`` function), falling back to numpy's IEEE result where it raises."""

    def f(*args):
        try:
            return fast(*args)
        except (ValueError, OverflowError, ZeroDivisionError):
            with np.errstate(all="ignore"):
                return float(slow(*args))

    f.__name__ = fast.__name__
    return f


def _sigmoid(x: float) -> float:
    try:
        return 1.0 / (1.0 + math.exp(-x))
    except OverflowError:  # exp(-x) overflowed: x is very negative
        return 0.0


def _round(x: float) -> float:
    """Half away from zero, like C's ``round`` (and LLVM's ``llvm.round``)."""
    f = math.floor(abs(x))
    return math.copysign(f + 1.0 if abs(x) - f >= 0.5 else f, x)


def _div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        with np.errstate(all="ignore"):
            return float(np.float64(a) / np.float64(b))


def _truncdiv(a: int, b: int) -> int:
    """C integer division: the quotient rounded towards zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _at(dims: tuple, *index: int) -> int:
    """The flat index of ``index`` in the buffer ``dims = (name, shape, strides)``, checked."""
    name, shape, strides = dims
    flat = 0
    for d, (x, n, stride) in enumerate(zip(index, shape, strides)):
        if not 0 <= x < n:
            raise BufferIndexError(
                f"{name}{list(index)} is out of bounds: index {x} of dimension {d} is not in "
                f"[0, {n}) (the shape of {name} is {tuple(shape)})",
                name,
                index,
                shape,
            )
        flat += x * stride
    return flat


def _store(arr: np.ndarray, flat: list) -> None:
    # via an array so out-of-range integers wrap (numpy casts arrays unsafely) instead of raising
    arr.reshape(-1)[:] = np.asarray(flat)


RUNTIME: dict[str, Any] = {
    "math": math,
    "exp": _ieee(math.exp, np.exp),
    "log": _ieee(math.log, np.log),
    "sqrt": _ieee(math.sqrt, np.sqrt),
    "rsqrt": _ieee(lambda x: 1.0 / math.sqrt(x), lambda x: 1.0 / np.sqrt(x)),
    "tanh": math.tanh,
    "sigmoid": _sigmoid,
    "fabs": math.fabs,
    "pow": _ieee(math.pow, np.power),
    "erf": math.erf,
    "floor": _ieee(lambda x: float(math.floor(x)), np.floor),
    "ceil": _ieee(lambda x: float(math.ceil(x)), np.ceil),
    "round": _ieee(_round, np.round),  # numpy only for inf / nan, where both rules agree
    "sin": _ieee(math.sin, np.sin),
    "cos": _ieee(math.cos, np.cos),
    "_div": _div,
    "_truncdiv": _truncdiv,
    "_store": _store,
    "_at": _at,
    "_product": itertools.product,
}
assert set(E.INTRINSICS) <= set(RUNTIME) | {"abs"}, "an intrinsic has no python implementation"

#: Names generated code must not shadow (runtime, builtins it uses, keywords).
_RESERVED = set(RUNTIME) | {"abs", "min", "max", "int", "float", "bool", "range", "True", "False"}

# ---------------------------------------------------------------------------------------------
# code generation

#: indentation depth from which perfect loop nests are folded (CPython's limit is 20 blocks)
_MAX_PLAIN_DEPTH = 12


class PythonCodegen(SourceWriter, PyExprPrinter):
    """Emit the Python source of a lowered function (see the module docstring)."""

    UNBOUND = "is not bound by a loop"

    def __init__(self, func: PrimFunc):
        SourceWriter.__init__(self)
        PyExprPrinter.__init__(self)
        self.func = func
        self.entry_name = ""  # the def's name, known after generate()
        self.taken = set(_RESERVED)
        self.bufs: dict[Buffer, str] = {}
        self.strides: dict[Buffer, tuple[int, ...]] = {}
        self.ranges: dict[E.Var, Range] = {}  # of the enclosing loops
        self.dims: dict[Buffer, str] = {}  # buffers with checked accesses -> their dims local

    def reserved(self, name: str) -> bool:
        return name in self.taken or keyword.iskeyword(name)

    # whole function --------------------------------------------------------------------------
    def generate(self) -> str:
        f = self.func
        # a runtime name would be overwritten by the def; buffer and loop names may shadow the
        # function's own name harmlessly (they are locals)
        fname = self.entry_name = self.fresh(f.name)
        self.taken.discard(fname)
        allocs = [n.buffer for n in pre_order(f.body) if isinstance(n, Allocate)]
        for b in list(f.params) + allocs:
            if b in self.bufs:
                raise BuildError(f"python target: buffer {b.name} is allocated twice")
            self.bufs[b] = self.fresh(b.name)
            self.strides[b] = b.strides()
        args = [self.fresh(self.bufs[b] + "_arr") for b in f.params]
        for b in f.params:
            if b.is_symbolic:
                if b.align:
                    raise BuildError(
                        f"python target: parameter {b.name} has padded strides (storage_align) and a "
                        "symbolic shape; parameters must be dense row-major"
                    )
                continue
            dense = Buffer(b.name, b.shape, b.dtype).strides()
            if self.strides[b] != dense:
                raise BuildError(
                    f"python target: parameter {b.name} has padded strides "
                    f"{self.strides[b]}; parameters must be dense row-major"
                )
        self.emit(0, f"def {fname}({', '.join(args)}):")
        # size variables come from the arrays' shapes (the Kernel checked that they agree)
        for v, (k, d) in size_var_sources(f).items():
            self.vars[v] = self.fresh(v.name)
            self.emit(1, f"{self.vars[v]} = {args[k]}.shape[{d}]")
        for b, a in zip(f.params, args):
            self.emit(1, f"{self.bufs[b]} = {a}.ravel().tolist()")
        header = len(self.lines)
        self.stmt(f.body, 1)
        self.lines[header:header] = [
            f"    {name} = ({b.name!r}, {self.ints(b.shape)}, {self.ints(self.strides[b])})"
            for b, name in self.dims.items()
        ]
        written = {n.buffer for n in pre_order(f.body) if isinstance(n, BufferStore)}
        for b, a in zip(f.params, args):
            if b in written:
                self.emit(1, f"_store({a}, {self.bufs[b]})")
        return "\n".join(self.lines) + "\n"

    # statements ------------------------------------------------------------------------------
    def stmt(self, s: Stmt, d: int) -> None:
        if isinstance(s, For):
            self.loop(s, d)
        elif isinstance(s, SeqStmt):
            if not s.seq:
                self.emit(d, "pass")
            for x in s.seq:
                self.stmt(x, d)
        elif isinstance(s, BufferStore):
            target, v = self.access(s.buffer, s.indices), s.value
            # ``C[..] += x`` for accumulations: shorter, and CPython computes the index once
            if (
                isinstance(v, E.Add)
                and isinstance(v.a, E.BufferLoad)
                and self.access(v.a.buffer, v.a.indices) == target
            ):
                self.emit(d, f"{target} += {self.expr(v.b)[0]}")
            else:
                self.emit(d, f"{target} = {self.expr(v)[0]}")
        elif isinstance(s, IfThenElse):
            self.emit(d, f"if {self.expr(s.condition)[0]}:")
            self.stmt(s.then_case, d + 1)
            if s.else_case is not None:
                self.emit(d, "else:")
                self.stmt(s.else_case, d + 1)
        elif isinstance(s, Allocate):
            b = s.buffer
            fill = poison(b.dtype)
            text = "math.nan" if isinstance(fill, float) else repr(fill)
            size = b.alloc_size()
            size_text = str(size) if isinstance(size, int) else self.paren(size, P_MUL + 1)
            self.emit(
                d, f"{self.bufs[b]} = [{text}] * {size_text}  # {b.dtype}{shape_str(b.shape)}, {b.scope}"
            )
            self.stmt(s.body, d)
        elif isinstance(s, Evaluate):
            if not E.is_const(s.value):
                self.emit(d, self.expr(s.value)[0])
        elif isinstance(s, (Block, BlockRealize)):
            raise BuildError("python target: the function is not lowered (found a block)")
        else:
            raise BuildError(f"python target: unsupported statement {type(s).__name__}")

    def loop(self, s: For, d: int) -> None:
        # CPython allows 20 nested blocks per function: deep nests (heavily split schedules)
        # fold perfectly nested loops with independent bounds into one ``itertools.product``
        chain = [s]
        if d >= _MAX_PLAIN_DEPTH:
            while isinstance(chain[-1].body, For) and not any(
                uses_var(chain[-1].body.min, f.loop_var) or uses_var(chain[-1].body.extent, f.loop_var)
                for f in chain
            ):
                chain.append(chain[-1].body)
        names = [self.fresh(f.loop_var.name) for f in chain]
        ranges = [f"range({self.loop_range(f)})" for f in chain]
        note = "".join(
            f"  # {f.kind.value}" + (f" {f.thread_tag}" if f.thread_tag else "")
            for f in chain
            if f.kind != ForKind.SERIAL
        )
        if len(chain) == 1:
            self.emit(d, f"for {names[0]} in {ranges[0]}:{note}")
        else:
            self.emit(d, f"for {', '.join(names)} in _product({', '.join(ranges)}):{note}")
        for f, name in zip(chain, names):
            self.vars[f.loop_var] = name
            self.ranges[f.loop_var] = Range(f.min, f.extent)
        self.stmt(chain[-1].body, d + 1)
        # the names are free again after the loop: sibling loops reuse short names
        for f, name in zip(chain, names):
            del self.vars[f.loop_var], self.ranges[f.loop_var]
            self.taken.discard(name)

    def loop_range(self, s: For) -> str:
        lo, ext = s.min, s.extent
        if E.is_const(lo, 0):
            return self.expr(ext)[0]
        if isinstance(lo, E.IntImm) and isinstance(ext, E.IntImm):
            return f"{lo.value}, {lo.value + ext.value}"
        lo_s = self.expr(lo)[0]
        return f"{lo_s}, {lo_s} + {self.paren(ext, P_ADD + 1)}"

    # expressions -----------------------------------------------------------------------------
    def access(self, buf: Buffer, indices: tuple[E.Expr, ...]) -> str:
        """``name[flat index]``, row-major with the buffer's strides, simplified."""
        if buf not in self.bufs:
            raise BuildError(f"python target: buffer {buf.name} is neither a parameter nor allocated")
        if not all(self.in_bounds(idx, n) for idx, n in zip(indices, buf.shape)):
            args = ", ".join(self.expr(simplify(i, self.ranges))[0] for i in indices)
            return f"{self.bufs[buf]}[_at({self.dims_of(buf)}, {args})]"
        # under the loop ranges, split / fuse patterns fold: fused // 4 * 4 + fused % 4 -> fused
        return f"{self.bufs[buf]}[{self.text(simplify(flat_index(buf, indices), self.ranges))}]"

    def ints(self, values: tuple) -> str:
        """A tuple of ints and size-variable expressions as Python source."""
        items = [str(x) if isinstance(x, int) else self.text(x) for x in values]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    def in_bounds(self, idx: E.Expr, extent: Any) -> bool:
        """Whether the enclosing loops' ranges prove ``0 <= idx < extent``."""
        if not isinstance(extent, int):
            return loop_var_spans(idx, extent, self.ranges)
        if isinstance(idx, E.IntImm):
            return 0 <= idx.value < extent
        lo, hi = const_int_bound(idx, self.ranges)
        return lo is not None and hi is not None and lo >= 0 and hi < extent

    def dims_of(self, buf: Buffer) -> str:
        """The local naming ``(name, shape, strides)`` of ``buf`` for ``_at`` (defined at the
        top of the function the first time a checked access needs it)."""
        name = self.dims.get(buf)
        if name is None:
            name = self.dims[buf] = self.fresh(self.bufs[buf] + "_dims")
        return name

    def float_imm(self, f: E.FloatImm) -> tuple[str, int]:
        v = f.value
        if math.isnan(v):
            return "math.nan", P_ATOM
        if math.isinf(v):
            return ("math.inf", P_ATOM) if v > 0 else ("-math.inf", P_UNARY)
        return repr(v), (P_ATOM if v >= 0 else P_UNARY)

    def load(self, ld: E.BufferLoad) -> tuple[str, int]:
        return self.access(ld.buffer, ld.indices), P_ATOM

    def div(self, e: E.Div) -> tuple[str, int]:
        if E.is_int(e.dtype) or (isinstance(e.b, (E.FloatImm, E.IntImm)) and e.b.value != 0):
            return super().div(e)
        return f"_div({self.text(e.a)}, {self.text(e.b)})", P_ATOM

    def cast(self, e: E.Cast) -> tuple[str, int]:
        src, dst = e.value.dtype, e.dtype
        inner = self.expr(e.value)[0]
        if dst == "bool":
            return f"bool({inner})", P_ATOM
        if E.is_float(dst):
            return self.expr(e.value) if E.is_float(src) else (f"float({inner})", P_ATOM)
        if E.is_int(src):  # int -> int: Python ints are unbounded, nothing to do
            return self.expr(e.value)
        return f"int({inner})", P_ATOM  # float/bool -> int truncates towards zero


def python_source(func: PrimFunc) -> str:
    """The Python source of ``func`` (lowered first if needed)."""
    return PythonCodegen(lower(func)).generate()


def build_python(func: PrimFunc, target: Any = "python") -> Kernel:
    """Compile ``func`` with the python target into a :class:`Kernel`."""
    gen = PythonCodegen(lower(func))
    src = gen.generate()
    namespace = dict(RUNTIME)
    try:
        code = compile(src, f"<workbench python target: {func.name}>", "exec")
    except SyntaxError as err:  # e.g. a nest still too deep after folding perfect nests
        raise BuildError(f"python target cannot express {func.name}: {err.msg}") from err
    exec(code, namespace)  # noqa: S102  (our own generated code)
    entry = namespace[gen.entry_name]
    return Kernel(func, target, entry, src)


def loop_var_spans(idx: E.Expr, extent: E.Expr, ranges: dict) -> bool:
    """``idx`` is a variable ranging over ``[0, extent)`` exactly: the one symbolic bound proved
    without an analyzer (``A[vi]`` for ``vi`` in ``range(n)`` over a buffer of extent ``n``)."""
    rng = ranges.get(idx) if isinstance(idx, E.Var) else None
    return (
        rng is not None
        and E.is_const(rng.min, 0)
        and structural_equal(rng.extent, extent, map_free_vars=False)
    )
