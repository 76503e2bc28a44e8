"""Concrete semantics of expressions: evaluation on Python values and constant folding.

One definition of what each operator computes, shared by the simplifier's constant folding and
by anyone who needs to evaluate an expression (tests, debuggers, the UI):

* integers are two's-complement of their dtype's width (results wrap, as generated code does);
  ``//`` and ``%`` are *floor* division and modulo, ``Div`` on integers truncates like C;
* floats are computed in their own dtype through numpy scalars (IEEE results, no exceptions);
* booleans are Python bools.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from ..dtype import dtype_info
from ..expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    Div,
    Expr,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Select,
    Sub,
    Var,
    is_float,
)


def int_range(dtype: str) -> tuple[int, int]:
    """Smallest and largest value of an integer (or bool) dtype."""
    info = dtype_info(dtype)
    return int(info.min), int(info.max)


def wrap_int(value: int, dtype: str) -> int:
    """``value`` reduced to the range of ``dtype`` (two's complement wrap-around)."""
    if dtype == "bool":
        return int(value != 0)
    info = dtype_info(dtype)
    value &= (1 << info.bits) - 1
    if info.kind == "int" and value >> (info.bits - 1):
        value -= 1 << info.bits
    return value


def trunc_div(a: int, b: int) -> int:
    """C integer division (rounds toward zero)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _np(dtype: str):
    return np.dtype(dtype).type


_INT_OPS: dict[type, Callable[[int, int], Any]] = {
    Add: lambda a, b: a + b,
    Sub: lambda a, b: a - b,
    Mul: lambda a, b: a * b,
    Div: trunc_div,
    FloorDiv: lambda a, b: a // b,
    FloorMod: lambda a, b: a % b,
    Min: min,
    Max: max,
}
_FLOAT_OPS: dict[type, Callable[[Any, Any], Any]] = {
    Add: np.add,
    Sub: np.subtract,
    Mul: np.multiply,
    Div: np.divide,
    FloorDiv: np.floor_divide,
    FloorMod: np.mod,
    Min: np.minimum,
    Max: np.maximum,
}
_CMP_OPS: dict[type, Callable[[Any, Any], bool]] = {
    EQ: lambda a, b: a == b,
    NE: lambda a, b: a != b,
    LT: lambda a, b: a < b,
    LE: lambda a, b: a <= b,
    GT: lambda a, b: a > b,
    GE: lambda a, b: a >= b,
    And: lambda a, b: bool(a) and bool(b),
    Or: lambda a, b: bool(a) or bool(b),
}


def fold_binary(op: type, a: Any, b: Any, dtype: str) -> Any:
    """``a op b`` for operands of ``dtype``; raises ZeroDivisionError for integer x/0."""
    cmp = _CMP_OPS.get(op)
    if cmp is not None:
        return bool(cmp(a, b))
    if is_float(dtype):
        t = _np(dtype)
        with np.errstate(all="ignore"):
            return float(_FLOAT_OPS[op](t(a), t(b)))
    if dtype == "bool":
        a, b = int(a), int(b)
    if op in (Div, FloorDiv, FloorMod) and b == 0:
        raise ZeroDivisionError(f"integer {op.__name__} by zero")
    return wrap_int(_INT_OPS[op](a, b), dtype)


def fold_cast(value: Any, dtype: str) -> Any:
    """``value`` converted to ``dtype`` as C does (float to int truncates toward zero).

    Raises ValueError for a NaN or infinite float cast to an integer (undefined in C).
    """
    if dtype == "bool":
        return bool(value)
    if is_float(dtype):
        with np.errstate(all="ignore"):
            return float(_np(dtype)(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot cast {value} to {dtype}")
        value = math.trunc(value)
    return wrap_int(int(value), dtype)


def _round_half_away(x: float) -> float:
    return math.copysign(math.floor(abs(x) + 0.5), x)


_FLOAT_INTRINSICS: dict[str, Callable[..., Any]] = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "fabs": np.abs,
    "abs": np.abs,
    "pow": np.power,
    "erf": lambda x: math.erf(float(x)),
    "floor": np.floor,
    "ceil": np.ceil,
    "round": lambda x: _round_half_away(float(x)),
    "sin": np.sin,
    "cos": np.cos,
}


def fold_call(op: str, args: tuple[Any, ...], dtype: str) -> Any:
    """The value of intrinsic ``op`` on constant ``args`` (``abs`` also works on integers)."""
    if not is_float(dtype):
        if op != "abs":
            raise TypeError(f"intrinsic {op} on {dtype}")
        return wrap_int(abs(int(args[0])), dtype)
    t = _np(dtype)
    with np.errstate(all="ignore"):
        return float(t(_FLOAT_INTRINSICS[op](*(t(a) for a in args))))


def evaluate(expr: Expr, env: Mapping[Any, Any] | None = None) -> Any:
    """The value of ``expr`` with variables (and buffers, as numpy arrays) taken from ``env``.

    Returns a Python int, float or bool. Raises KeyError for an unbound variable or buffer and
    ZeroDivisionError for an integer division by zero. Only the chosen branch of a ``Select``
    is evaluated.
    """
    env = env or {}
    memo: dict[int, Any] = {}

    def ev(e: Expr) -> Any:
        key = id(e)
        if key in memo:
            return memo[key]
        t = type(e)
        v: Any
        if type(e) is IntImm:
            v = bool(e.value) if e.dtype == "bool" else e.value
        elif type(e) is FloatImm:
            v = e.value
        elif type(e) is Var:
            if e not in env:
                raise KeyError(f"variable {e.name} has no value")
            v = env[e]
            v = fold_cast(v, e.dtype) if e.dtype != "bool" else bool(v)
        elif type(e) is Not:
            v = not ev(e.a)
        elif type(e) is Select:
            v = ev(e.true_value) if ev(e.condition) else ev(e.false_value)
        elif type(e) is Cast:
            v = fold_cast(ev(e.value), e.dtype)
        elif type(e) is Call:
            v = fold_call(e.op, tuple(ev(a) for a in e.args), e.dtype)
        elif type(e) is BufferLoad:
            arr = env[e.buffer]
            v = arr[tuple(ev(i) for i in e.indices)].item()
        elif (t in _INT_OPS or t in _CMP_OPS) and isinstance(e, BinaryOp):
            v = fold_binary(t, ev(e.a), ev(e.b), e.a.dtype)
        else:
            raise TypeError(f"cannot evaluate {t.__name__} nodes")
        memo[key] = v
        return v

    return ev(expr)
