"""Expressions of the IR: immutable dataclasses with Python operator overloading.

Design notes
------------
* Every node is a frozen dataclass compared by *identity* (``eq=False``): ``hash`` is cheap and
  nodes can be dict keys. Structural equality modulo variable names is defined once, in
  :mod:`workbench.ir.structural`.
* Arithmetic and comparison operators build IR nodes (``i * 4 + j``, ``i < n``), as in TVM.
  ``==`` / ``!=`` also build ``EQ`` / ``NE`` nodes; their truth value is object identity, so
  ``x in [a, b]`` and dict lookups still behave. Engine code compares constants with
  :func:`is_const`, never with ``==``.
* Every node carries its ``dtype`` (a string: ``"int32"``, ``"float32"``, ``"bool"`` …),
  computed once at construction.
* ``//`` and ``%`` are *floor* division and modulo (Python semantics), for ints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from .dtype import DTYPE_INFO, FLOAT_DTYPES, INT_DTYPES

INDEX_DTYPE = "int32"
DTYPES = tuple(DTYPE_INFO)

#: Intrinsic functions the IR knows (all elementwise, float in, float out unless noted).
INTRINSICS = (
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "tanh",
    "sigmoid",
    "fabs",
    "pow",
    "erf",
    "floor",
    "ceil",
    "round",
    "sin",
    "cos",
    "abs",
)


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise TypeError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    return dtype


class Expr:
    """Base of all expressions. Subclasses are frozen dataclasses with a ``dtype`` field."""

    __slots__ = ()
    dtype: str

    # arithmetic -------------------------------------------------------------------------
    def __add__(self, o):
        return Add.make(self, o)

    def __radd__(self, o):
        return Add.make(o, self)

    def __sub__(self, o):
        return Sub.make(self, o)

    def __rsub__(self, o):
        return Sub.make(o, self)

    def __mul__(self, o):
        return Mul.make(self, o)

    def __rmul__(self, o):
        return Mul.make(o, self)

    def __truediv__(self, o):
        return Div.make(self, o)

    def __rtruediv__(self, o):
        return Div.make(o, self)

    def __floordiv__(self, o):
        return FloorDiv.make(self, o)

    def __rfloordiv__(self, o):
        return FloorDiv.make(o, self)

    def __mod__(self, o):
        return FloorMod.make(self, o)

    def __rmod__(self, o):
        return FloorMod.make(o, self)

    def __neg__(self):
        return Sub.make(const(0, self.dtype), self)

    # comparisons ------------------------------------------------------------------------
    def __lt__(self, o):
        return LT.make(self, o)

    def __le__(self, o):
        return LE.make(self, o)

    def __gt__(self, o):
        return GT.make(self, o)

    def __ge__(self, o):
        return GE.make(self, o)

    def __eq__(self, o):
        return EQ.make(self, o)

    def __ne__(self, o):
        return NE.make(self, o)

    __hash__ = object.__hash__

    # logic (bool expressions) -----------------------------------------------------------
    def __and__(self, o):
        return And(self, convert(o, "bool"))

    def __rand__(self, o):
        return And(convert(o, "bool"), self)

    def __or__(self, o):
        return Or(self, convert(o, "bool"))

    def __ror__(self, o):
        return Or(convert(o, "bool"), self)

    def __invert__(self):
        return Not(self)

    def __str__(self) -> str:
        from .printer import expr_str  # a cycle: printer imports this module

        return expr_str(self)

    __repr__ = __str__


# ----------------------------------------------------------------------------------------
# leaves


@dataclass(frozen=True, eq=False, repr=False)
class Var(Expr):
    """A variable (loop variable, block iterator, symbolic value). Identity matters, not name."""

    name: str
    dtype: str = INDEX_DTYPE


@dataclass(frozen=True, eq=False, repr=False)
class IntImm(Expr):
    value: int
    dtype: str = INDEX_DTYPE


@dataclass(frozen=True, eq=False, repr=False)
class FloatImm(Expr):
    value: float
    dtype: str = "float32"


def const(value: Union[int, float, bool], dtype: str) -> Expr:
    """A constant of ``dtype`` (``bool`` constants are ``IntImm`` with dtype ``"bool"``)."""
    check_dtype(dtype)
    if dtype == "bool":
        return IntImm(int(bool(value)), "bool")
    if is_int(dtype):
        if isinstance(value, float) and not value.is_integer():
            raise TypeError(f"cannot make a {dtype} constant from {value!r}")
        return IntImm(int(value), dtype)
    return FloatImm(float(value), dtype)


def convert(value: Any, dtype: str | None = None) -> Expr:
    """Turn a Python scalar into a constant (of ``dtype`` when given); leave Exprs alone. An
    object with a ``__wb_expr__()`` method (a schedule's sampled integer) gives what it returns."""
    if isinstance(value, Expr):
        return value
    if hasattr(type(value), "__wb_expr__"):
        return value.__wb_expr__()
    if isinstance(value, bool):
        return const(value, dtype or "bool")
    if isinstance(value, int):
        return const(value, dtype or INDEX_DTYPE)
    if isinstance(value, float):
        if dtype is not None and not is_float(dtype):
            dtype = "float32"
        return const(value, dtype or "float32")
    if hasattr(value, "dtype") and hasattr(value, "item"):  # numpy scalar
        return const(value.item(), str(value.dtype))
    raise TypeError(f"cannot convert {type(value).__name__} {value!r} to an IR expression")


def is_const(e: Any, value: int | float | None = None) -> bool:
    """True if ``e`` is a constant (equal to ``value`` when given)."""
    if not isinstance(e, (IntImm, FloatImm)):
        return False
    return value is None or e.value == value


def _unify(a: Any, b: Any) -> tuple[Expr, Expr]:
    """Convert operands to a common dtype: Python scalars take the other side's dtype,
    an int expression meeting a float one is cast to float."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        raise TypeError("at least one operand must be an IR expression")
    if not isinstance(a, Expr):
        a = convert(a, b.dtype)
    if not isinstance(b, Expr):
        b = convert(b, a.dtype)
    if a.dtype != b.dtype:
        if is_float(a.dtype) and not is_float(b.dtype):
            b = Cast(a.dtype, b)
        elif is_float(b.dtype) and not is_float(a.dtype):
            a = Cast(b.dtype, a)
        elif is_int(a.dtype) and is_int(b.dtype):
            wide = a.dtype if int(a.dtype.lstrip("uint")) >= int(b.dtype.lstrip("uint")) else b.dtype
            a = a if a.dtype == wide else Cast(wide, a)
            b = b if b.dtype == wide else Cast(wide, b)
        else:
            raise TypeError(f"dtype mismatch: {a.dtype} vs {b.dtype} in {a!s} and {b!s}")
    return a, b


# ----------------------------------------------------------------------------------------
# binary operators


@dataclass(frozen=True, eq=False, repr=False)
class BinaryOp(Expr):
    a: Expr
    b: Expr
    dtype: str = field(default="", compare=False)

    #: printed operator (None: printed as a function call)
    symbol = ""

    def __post_init__(self):
        if not self.dtype:
            object.__setattr__(self, "dtype", self.result_dtype(self.a))

    @staticmethod
    def result_dtype(a: Expr) -> str:
        return a.dtype

    @classmethod
    def make(cls, a: Any, b: Any) -> Expr:
        a, b = _unify(a, b)
        return cls(a, b)


class Add(BinaryOp):
    symbol = "+"


class Sub(BinaryOp):
    symbol = "-"


class Mul(BinaryOp):
    symbol = "*"


class Div(BinaryOp):
    symbol = "/"  # true division (floats); on ints it truncates like C


class FloorDiv(BinaryOp):
    symbol = "//"


class FloorMod(BinaryOp):
    symbol = "%"


class Min(BinaryOp):
    symbol = ""


class Max(BinaryOp):
    symbol = ""


class CmpOp(BinaryOp):
    @staticmethod
    def result_dtype(a: Expr) -> str:
        return "bool"


class EQ(CmpOp):
    symbol = "=="

    def __bool__(self):  # keeps `x in list` and dict lookups working on expressions
        return self.a is self.b


class NE(CmpOp):
    symbol = "!="

    def __bool__(self):
        return self.a is not self.b


class LT(CmpOp):
    symbol = "<"


class LE(CmpOp):
    symbol = "<="


class GT(CmpOp):
    symbol = ">"


class GE(CmpOp):
    symbol = ">="


class And(CmpOp):
    symbol = "and"


class Or(CmpOp):
    symbol = "or"


@dataclass(frozen=True, eq=False, repr=False)
class Not(Expr):
    a: Expr
    dtype: str = field(default="bool", compare=False)


@dataclass(frozen=True, eq=False, repr=False)
class Select(Expr):
    """``true_value if condition else false_value`` (both sides may be evaluated)."""

    condition: Expr
    true_value: Expr
    false_value: Expr
    dtype: str = field(default="", compare=False)

    def __post_init__(self):
        if not self.dtype:
            object.__setattr__(self, "dtype", self.true_value.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class Cast(Expr):
    dtype: str
    value: Expr


@dataclass(frozen=True, eq=False, repr=False)
class Call(Expr):
    """An intrinsic call: ``op`` is one of :data:`INTRINSICS`."""

    op: str
    args: tuple[Expr, ...]
    dtype: str = field(default="", compare=False)

    def __post_init__(self):
        if self.op not in INTRINSICS:
            raise ValueError(f"unknown intrinsic {self.op!r}; known: {', '.join(INTRINSICS)}")
        if not self.dtype:
            object.__setattr__(self, "dtype", self.args[0].dtype)


@dataclass(frozen=True, eq=False, repr=False)
class BufferLoad(Expr):
    buffer: "Buffer"
    indices: tuple[Expr, ...]
    dtype: str = field(default="", compare=False)

    def __post_init__(self):
        if not self.dtype:
            object.__setattr__(self, "dtype", self.buffer.dtype)


# ----------------------------------------------------------------------------------------
# helpers used by the DSL and by primitives


def min_expr(a: Any, b: Any) -> Expr:
    return Min.make(a, b)


def max_expr(a: Any, b: Any) -> Expr:
    return Max.make(a, b)


def if_then_else(cond: Any, t: Any, f: Any) -> Expr:
    t, f = _unify(t, f) if isinstance(t, Expr) or isinstance(f, Expr) else (convert(t), convert(f))
    return Select(convert(cond, "bool"), t, f)


def cast(dtype: str, x: Any) -> Expr:
    check_dtype(dtype)
    x = convert(x)
    return x if x.dtype == dtype else Cast(dtype, x)


def call(op: str, *args: Any) -> Expr:
    conv = [convert(a) for a in args]
    if len(conv) == 2:
        conv = list(_unify(*conv))
    if is_int(conv[0].dtype) and op not in ("abs",):
        conv = [Cast("float32", c) for c in conv]
    return Call(op, tuple(conv))


def conjuncts(cond: Expr) -> list[Expr]:
    """``a and b and c`` -> ``[a, b, c]``, left to right (a constant-true part gives nothing)."""
    if isinstance(cond, And):
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [] if is_const(cond, 1) else [cond]


def as_int(e: Any) -> int:
    """The Python int of a constant expression (raises TypeError otherwise)."""
    if isinstance(e, int):
        return e
    if isinstance(e, IntImm):
        return e.value
    raise TypeError(f"expected a constant integer, got {e!s}")


from .buffer import Buffer  # noqa: E402  (circular: Buffer indexes into BufferLoad)
