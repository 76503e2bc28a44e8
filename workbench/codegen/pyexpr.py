"""IR expressions as Python source: one printer for the targets that generate Python.

The python target (:mod:`.python`: scalars, CPython semantics made to agree with the IR's) and
the GPU emulator (:mod:`.gpu.emulate`: numpy arrays with one lane per GPU thread) print the
same operators the same way; they differ in what a value *is*. :class:`PyExprPrinter` holds the
dispatch and the common rules, a subclass its target's tables and the nodes it means otherwise:

==================  ==========================================  =================================
node                python target                               emulator
==================  ==========================================  =================================
binary operators    Python's, fewest parentheses (precedence)   every operation parenthesized
``and`` ``or``      Python's ``and`` / ``or``                   ``np.logical_*``, the right side
                                                                under the left's mask
integer ``Div``     ``_truncdiv`` (C's rule)                    ``S.truncdiv``
float ``Div``       ``/`` by a nonzero constant, else ``_div``  ``/`` (numpy: IEEE)
                    (IEEE where CPython raises)
``Min`` / ``Max``   ``min`` / ``max``                           ``np.minimum`` / ``np.maximum``
``Select``          ``a if c else b``                           ``S.where``, each side masked
``Cast``            floats stay doubles, ints unbounded         ``astype`` (numpy's rules)
float literal       a Python float (computed in double)         a numpy scalar of its dtype
``Call``            runtime functions named as the op           numpy (``CALLS``)
==================  ==========================================  =================================
"""

from __future__ import annotations

from typing import Callable, ClassVar, cast

from ..errors import BuildError
from ..ir import expr as E

# Python operator precedence (higher binds tighter)
P_COND, P_OR, P_AND, P_NOT, P_CMP = 0, 1, 2, 3, 4
P_ADD, P_MUL, P_UNARY, P_ATOM = 6, 7, 8, 10

BINOPS: dict[type, tuple[str, int]] = {
    E.Add: ("+", P_ADD),
    E.Sub: ("-", P_ADD),
    E.Mul: ("*", P_MUL),
    E.FloorDiv: ("//", P_MUL),
    E.FloorMod: ("%", P_MUL),
    E.EQ: ("==", P_CMP),
    E.NE: ("!=", P_CMP),
    E.LT: ("<", P_CMP),
    E.LE: ("<=", P_CMP),
    E.GT: (">", P_CMP),
    E.GE: (">=", P_CMP),
    E.And: ("and", P_AND),
    E.Or: ("or", P_OR),
}


class PyExprPrinter:
    """(text, precedence) of an expression; ``vars`` names the variables in scope."""

    #: prefix of error messages
    TARGET: ClassVar[str] = "python target"
    #: binary operators printed as Python operators: node type -> (operator, precedence)
    BINOPS: ClassVar[dict[type, tuple[str, int]]] = BINOPS
    #: parenthesize every binary operation (the emulator's source reads as its C counterpart)
    FULL_PARENS: ClassVar[bool] = False
    MIN_MAX: ClassVar[dict[type, str]] = {E.Min: "min", E.Max: "max"}
    TRUNCDIV: ClassVar[str] = "_truncdiv"
    #: intrinsic -> the function generated code calls (absent: the intrinsic's own name)
    CALLS: ClassVar[dict[str, str]] = {}
    #: the end of the message for a variable not in scope
    UNBOUND: ClassVar[str] = "is not bound"

    def __init__(self) -> None:
        self.vars: dict[E.Var, str] = {}
        self._dispatch: dict[type, Callable] = {
            E.Var: self.var,
            E.IntImm: self.int_imm,
            E.FloatImm: self.float_imm,
            E.BufferLoad: self.load,
            E.Div: self.div,
            E.Min: self.min_max,
            E.Max: self.min_max,
            E.Not: self.not_,
            E.Select: self.select,
            E.Cast: self.cast,
            E.Call: self.call,
        }

    def expr(self, e: E.Expr) -> tuple[str, int]:
        t = type(e)
        fn = self._dispatch.get(t)
        if fn is not None:
            return fn(e)
        if t in self.BINOPS:
            return self.binop(cast(E.BinaryOp, e))
        raise BuildError(f"{self.TARGET}: unsupported expression {t.__name__}")

    def text(self, e: E.Expr) -> str:
        return self.expr(e)[0]

    def paren(self, e: E.Expr, prec: int) -> str:
        """``e`` as an operand that needs at least precedence ``prec``."""
        text, p = self.expr(e)
        return text if p >= prec else f"({text})"

    def binary(self, a: E.Expr, op: str, p: int, b: E.Expr) -> tuple[str, int]:
        # left-associative: the right operand of an equal-precedence op needs parentheses;
        # comparisons do not chain in the IR, so both of their operands do
        left = p + 1 if p == P_CMP else p
        text = f"{self.paren(a, left)} {op} {self.paren(b, p + 1)}"
        return (f"({text})", P_ATOM) if self.FULL_PARENS else (text, p)

    # nodes -----------------------------------------------------------------------------------
    def var(self, v: E.Var) -> tuple[str, int]:
        if v not in self.vars:
            raise BuildError(f"{self.TARGET}: variable {v.name} {self.UNBOUND}")
        return self.vars[v], P_ATOM

    def int_imm(self, i: E.IntImm) -> tuple[str, int]:
        if i.dtype == "bool":
            return ("True" if i.value else "False"), P_ATOM
        if self.FULL_PARENS:
            return f"({i.value})", P_ATOM
        return str(i.value), (P_ATOM if i.value >= 0 else P_UNARY)

    def float_imm(self, f: E.FloatImm) -> tuple[str, int]:
        raise NotImplementedError

    def load(self, ld: E.BufferLoad) -> tuple[str, int]:
        raise NotImplementedError

    def binop(self, e: E.BinaryOp) -> tuple[str, int]:
        op, p = self.BINOPS[type(e)]
        return self.binary(e.a, op, p, e.b)

    def div(self, e: E.Div) -> tuple[str, int]:
        if E.is_int(e.dtype):
            return f"{self.TRUNCDIV}({self.text(e.a)}, {self.text(e.b)})", P_ATOM
        return self.binary(e.a, "/", P_MUL, e.b)

    def min_max(self, e: E.BinaryOp) -> tuple[str, int]:
        return f"{self.MIN_MAX[type(e)]}({self.text(e.a)}, {self.text(e.b)})", P_ATOM

    def not_(self, e: E.Not) -> tuple[str, int]:
        return f"not {self.paren(e.a, P_NOT)}", P_NOT

    def select(self, e: E.Select) -> tuple[str, int]:
        return (
            f"{self.paren(e.true_value, P_OR)} if {self.paren(e.condition, P_OR)} "
            f"else {self.paren(e.false_value, P_COND)}"
        ), P_COND

    def cast(self, e: E.Cast) -> tuple[str, int]:
        raise NotImplementedError

    def call(self, e: E.Call) -> tuple[str, int]:
        return f"{self.CALLS.get(e.op, e.op)}({', '.join(self.text(a) for a in e.args)})", P_ATOM
