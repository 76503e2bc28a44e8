"""Index maps: ``lambda i, j: (i // 16, j, i % 16)`` as data.

``transform_layout`` and ``transform_block_layout`` take a map from index tuples to index
tuples. People write it as a Python lambda; the schedule keeps it as an :class:`IndexMap`
(parameter variables and result expressions) and the trace records its text, printed exactly
as a lambda, so ``as_python`` shows runnable code and JSON holds a plain string. Reading the
text back (:meth:`IndexMap.parse`) never evaluates it: a small parser accepts the subset of
the IR that index maps use — integer literals, the parameters, ``+ - * // %`` and parentheses.

The analyses the primitives need live here too: the shape a map sends a buffer to
(:meth:`~IndexMap.map_shape`), whether it is injective on that buffer
(:meth:`~IndexMap.is_injective`, checked by evaluating it on every index), and the inverse of
a bijective affine map (:meth:`~IndexMap.inverse`: splits, fuses and reorders of iterators).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .arith import const_int_bound
from .expr import Add, BinaryOp, Expr, FloorDiv, FloorMod, IntImm, Mul, Sub, Var, convert, is_const
from .functor import pre_order, substitute
from .stmt import Range

#: largest number of indices :meth:`IndexMap.is_injective` evaluates
MAX_CHECKED_POINTS = 1 << 21

_BINARY = {"+": Add, "-": Sub, "*": Mul, "//": FloorDiv, "%": FloorMod}
_SYMBOL = {cls: sym for sym, cls in _BINARY.items()}
_PRECEDENCE = {Add: 1, Sub: 1, Mul: 2, FloorDiv: 2, FloorMod: 2}


@dataclass(frozen=True, eq=False)
class IndexMap:
    """``params -> results``: integer expressions of the parameters, one per output axis."""

    params: tuple[Var, ...]
    results: tuple[Expr, ...]
    #: named integers the results may use besides the parameters, known only when the map is
    #: applied (a schedule's sampled tile size): :meth:`bind` replaces them by their values
    symbols: tuple[Var, ...] = ()

    def __post_init__(self):
        names = [p.name for p in self.params + self.symbols]
        if len(set(names)) != len(names):
            raise ValueError(f"index map parameters and symbols must have distinct names, got {names}")
        if not self.results:
            raise ValueError("an index map must produce at least one index")
        for e in self.results:
            for n in pre_order(e):
                if isinstance(n, Var) and n not in self.params and n not in self.symbols:
                    raise ValueError(f"index map result {e} uses {n.name!r}, not a parameter")
                if type(n) not in (Var, IntImm) + tuple(_SYMBOL) and not isinstance(n, Var):
                    raise ValueError(
                        f"index maps use + - * // % on ints only; {e} contains a {type(n).__name__}"
                    )
                if type(n) in (FloorDiv, FloorMod) and not self._valid_divisor(n.b):
                    raise ValueError(f"in {e}: the divisor of // and % must be a positive integer constant")
                if n.dtype != "int32":
                    raise ValueError(f"index map expression {n} has dtype {n.dtype}, not int32")

    def _valid_divisor(self, d: Expr) -> bool:
        if isinstance(d, IntImm):
            return d.value > 0
        # a divisor made of symbols is checked when they are bound
        return bool(self.symbols) and not any(isinstance(n, Var) and n in self.params for n in pre_order(d))

    # construction ----------------------------------------------------------------------------
    @classmethod
    def from_func(cls, fn: Callable, symbols: bool = False) -> "IndexMap":
        """Call ``fn`` on one variable per positional parameter (named after it). ``symbols``:
        variables other than the parameters in the results become :attr:`symbols` (else they
        are refused)."""
        params = []
        for p in inspect.signature(fn).parameters.values():
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                raise ValueError(
                    f"an index map takes plain positional parameters; {p.name!r} is {p.kind.description}"
                )
            params.append(Var(p.name))
        out = fn(*params)
        results = tuple(convert(r) for r in (tuple(out) if isinstance(out, (tuple, list)) else (out,)))
        found: list[Var] = []
        if symbols:
            for r in results:
                for n in pre_order(r):
                    if isinstance(n, Var) and n not in params and n not in found:
                        found.append(n)
        return cls(tuple(params), results, tuple(found))

    @classmethod
    def parse(cls, text: str, symbols: Sequence[str] = ()) -> "IndexMap":
        """The map written as ``lambda i, j: (…)`` (the form ``str()`` produces); no eval.
        ``symbols``: names the results may use besides the parameters."""
        return _Parser(text, symbols).index_map()

    @classmethod
    def coerce(cls, value: Any) -> "IndexMap":
        """An IndexMap from an IndexMap, its lambda text, or a Python callable."""
        if isinstance(value, IndexMap):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if callable(value):
            return cls.from_func(value)
        raise TypeError(f"expected an index map (a lambda, its text or an IndexMap), got {value!r}")

    def bind(self, values: Mapping[Var, int]) -> "IndexMap":
        """The map with each symbol replaced by its value (constants folded); ValueError for a
        divisor that is not positive then."""
        missing = [s.name for s in self.symbols if s not in values]
        if missing:
            raise ValueError(f"{self}: no value for {missing}")
        vmap = {s: IntImm(int(values[s])) for s in self.symbols}
        return IndexMap(self.params, tuple(_fold(substitute(r, vmap)) for r in self.results))

    def rename_symbols(self, names: Sequence[str]) -> "IndexMap":
        """The same map with its symbols renamed (for printing)."""
        new = tuple(Var(n) for n in names)
        vmap = dict(zip(self.symbols, new))
        return IndexMap(self.params, tuple(substitute(r, vmap) for r in self.results), new)

    @classmethod
    def __trace_arg__(cls, value: Any) -> str:
        """What a trace records for an index-map argument: its lambda text."""
        return str(cls.coerce(value))

    # rendering -------------------------------------------------------------------------------
    def __str__(self) -> str:
        results = ", ".join(_text(r) for r in self.results)
        if len(self.results) == 1:
            results += ","
        return f"lambda {', '.join(p.name for p in self.params)}: ({results})"

    __repr__ = __str__

    # applying --------------------------------------------------------------------------------
    def map_indices(self, indices: Sequence[Any]) -> tuple[Expr, ...]:
        """The results with the parameters replaced by ``indices``."""
        if len(indices) != len(self.params):
            raise ValueError(f"{self} takes {len(self.params)} indices, got {len(indices)}")
        vmap = dict(zip(self.params, indices))
        return tuple(substitute(r, vmap) for r in self.results)

    def _ranges(self, shape: Sequence[int]) -> dict[Var, Range]:
        if len(shape) != len(self.params):
            raise ValueError(
                f"{self} takes {len(self.params)} indices; the shape {list(shape)} has {len(shape)}"
            )
        return {p: Range.from_extent(int(s)) for p, s in zip(self.params, shape)}

    def map_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """The smallest shape holding every mapped index of ``shape`` (bound analysis)."""
        ranges = self._ranges(shape)
        out = []
        for r in self.results:
            lo, hi = const_int_bound(r, ranges)
            if lo is None or hi is None or lo < 0:
                raise ValueError(
                    f"{r} takes values in [{lo}, {hi}] on shape {list(shape)}; "
                    f"an index map must send indices to non-negative ones"
                )
            out.append(hi + 1)
        return tuple(out)

    def is_injective(self, shape: Sequence[int]) -> bool:
        """True if no two indices of ``shape`` map to the same index (checked on all of them)."""
        total = int(np.prod(shape, dtype=np.int64))
        if total > MAX_CHECKED_POINTS:
            raise ValueError(
                f"shape {list(shape)} has {total} indices, more than the "
                f"{MAX_CHECKED_POINTS} that injectivity is checked on"
            )
        points = np.indices(tuple(shape), dtype=np.int64).reshape(len(shape), -1)
        env = dict(zip(self.params, points))
        new_shape = self.map_shape(shape)
        flat = np.zeros(total, dtype=np.int64)
        for r, extent in zip(self.results, new_shape):
            flat = flat * extent + np.broadcast_to(_evaluate(r, env), (total,))
        return len(np.unique(flat)) == total

    def inverse(self, shape: Sequence[int]) -> tuple["IndexMap", tuple[int, ...]]:
        """``(inverse map, mapped shape)`` of a map that is a bijection from ``shape`` onto
        the mapped shape, built from splits (``// %``), fuses (``* +``) and reorders of the
        parameters; ValueError for any other map."""
        return _Inverter(self, shape).run()


# ------------------------------------------------------------------------------------------
# printing and parsing


def _text(e: Expr) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, IntImm):
        return str(e.value)
    assert isinstance(e, BinaryOp), e  # index maps hold variables, constants and + - * // %
    prec = _PRECEDENCE[type(e)]
    left, right = _text(e.a), _text(e.b)
    # left-associative: the right operand of an equal-precedence operator keeps its parens
    if _PRECEDENCE.get(type(e.a), 3) < prec:  # type: ignore[arg-type]
        left = f"({left})"
    if _PRECEDENCE.get(type(e.b), 3) <= prec:  # type: ignore[arg-type]
        right = f"({right})"
    return f"{left} {_SYMBOL[type(e)]} {right}"


_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_]\w*)|(//|[-+*%(),:]))")


class _Parser:
    """Recursive descent over ``lambda params: expr`` or ``lambda params: (expr, …)``."""

    def __init__(self, text: str, symbols: Sequence[str] = ()):
        self.text = text
        self.symbols = {n: Var(n) for n in symbols}
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                raise ValueError(f"cannot read index map {text!r} at {text[pos:]!r}")
            self.tokens.append(m.group(1) or m.group(2) or m.group(3))
            pos = m.end()
        self.pos = 0
        self.vars: dict[str, Var] = {}

    def peek(self) -> str:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if not tok or (expected is not None and tok != expected):
            want = f"{expected!r}" if expected else "more"
            raise ValueError(f"index map {self.text!r}: expected {want}, got {tok or 'the end'!r}")
        self.pos += 1
        return tok

    def index_map(self) -> IndexMap:
        self.take("lambda")
        while self.peek() != ":":
            name = self.take()
            if not name.isidentifier() or name in self.vars or name in self.symbols:
                raise ValueError(f"index map {self.text!r}: parameters must be distinct names, got {name!r}")
            self.vars[name] = Var(name)
            if self.peek() != ":":
                self.take(",")
        self.take(":")
        results = self.results()
        if self.peek():
            raise ValueError(f"index map {self.text!r}: unexpected {self.peek()!r}")
        used = [v for v in self.symbols.values() if any(v is n for r in results for n in pre_order(r))]
        return IndexMap(tuple(self.vars.values()), results, tuple(used))

    def results(self) -> tuple[Expr, ...]:
        if self.peek() != "(":
            return (self.sum(),)
        self.take("(")
        items = [self.sum()]
        tuple_ = False
        while self.peek() == ",":
            self.take(",")
            tuple_ = True
            if self.peek() == ")":
                break
            items.append(self.sum())
        self.take(")")
        if not tuple_:  # "(expr)" was a parenthesized expression, maybe followed by more
            return (self._continue(items[0]),)
        return tuple(items)

    def _continue(self, left: Expr) -> Expr:
        """``(a) * b + c``: the parenthesized head of a longer expression."""
        left = self._product_tail(left)
        return self._sum_tail(left)

    def sum(self) -> Expr:
        return self._sum_tail(self.product())

    def _sum_tail(self, left: Expr) -> Expr:
        while self.peek() in ("+", "-"):
            op = _BINARY[self.take()]
            left = op(left, self.product())
        return left

    def product(self) -> Expr:
        return self._product_tail(self.unary())

    def _product_tail(self, left: Expr) -> Expr:
        while self.peek() in ("*", "//", "%"):
            op = _BINARY[self.take()]
            left = op(left, self.unary())
        return left

    def unary(self) -> Expr:
        if self.peek() == "-":
            self.take()
            operand = self.unary()
            if isinstance(operand, IntImm):
                return IntImm(-operand.value)
            return Sub(IntImm(0), operand)
        tok = self.take()
        if tok == "(":
            inner = self.sum()
            self.take(")")
            return inner
        if tok.isdigit():
            return IntImm(int(tok))
        if tok in self.vars:
            return self.vars[tok]
        if tok in self.symbols:
            return self.symbols[tok]
        what = "unknown name" if tok.isidentifier() else "unexpected"
        raise ValueError(f"index map {self.text!r}: {what} {tok!r}")


def _fold(e: Expr) -> Expr:
    """``e`` with the operations on two constants computed."""
    if not isinstance(e, BinaryOp):
        return e
    a, b = _fold(e.a), _fold(e.b)
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        if isinstance(e, (FloorDiv, FloorMod)) and b.value <= 0:
            raise ValueError(f"{_text(e)}: the divisor of // and % must be positive, got {b.value}")
        return IntImm(int(_evaluate(type(e)(a, b), {})))
    return type(e)(a, b)


def _evaluate(e: Expr, env: dict) -> Any:
    """``e`` on numpy int64 arrays (Python's floor semantics for ``//`` and ``%``)."""
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, IntImm):
        return np.int64(e.value)
    assert isinstance(e, BinaryOp), e
    a, b = _evaluate(e.a, env), _evaluate(e.b, env)
    if isinstance(e, Add):
        return a + b
    if isinstance(e, Sub):
        return a - b
    if isinstance(e, Mul):
        return a * b
    if isinstance(e, FloorDiv):
        return np.floor_divide(a, b)
    return np.mod(a, b)


# ------------------------------------------------------------------------------------------
# inverse of bijective affine maps


@dataclass(frozen=True)
class _Digit:
    """``scale * ((var // lower) % extent)``: one mixed-radix digit of a parameter."""

    var: Var
    lower: int
    extent: int
    scale: int


class _Inverter:
    """Writes each result as a sum of digits of the parameters, checks that the digits of
    every result form a dense mixed-radix number (so the result covers ``[0, extent)``) and
    that the digits of every parameter tile it exactly once; then each parameter is the sum
    of its digits, each read back from the result holding it."""

    def __init__(self, imap: IndexMap, shape: Sequence[int]):
        self.imap = imap
        self.extent = {p: int(s) for p, s in zip(imap.params, shape)}
        if len(shape) != len(imap.params):
            raise ValueError(
                f"{imap} takes {len(imap.params)} indices; the shape {list(shape)} has {len(shape)}"
            )

    def fail(self, why: str) -> ValueError:
        return ValueError(f"{self.imap} is not a bijective affine map on {list(self.extent.values())}: {why}")

    def digits(self, e: Expr) -> list[_Digit]:
        if isinstance(e, Var):
            return [_Digit(e, 1, self.extent[e], 1)] if self.extent[e] > 1 else []
        if is_const(e, 0):
            return []
        if isinstance(e, Add):
            return self.digits(e.a) + self.digits(e.b)
        if isinstance(e, Mul):
            const, other = (e.a, e.b) if isinstance(e.a, IntImm) else (e.b, e.a)
            if isinstance(const, IntImm) and const.value > 0:
                return [_Digit(d.var, d.lower, d.extent, d.scale * const.value) for d in self.digits(other)]
        if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm):  # else: fail below
            terms = sorted(self.digits(e.a), key=lambda d: d.scale)
            return self.divmod(terms, e.b.value, isinstance(e, FloorDiv), e)
        raise self.fail(f"{_text(e)} is not a sum of scaled splits of the parameters")

    def divmod(self, terms: list[_Digit], c: int, div: bool, e: Expr) -> list[_Digit]:
        """``sum(terms) // c`` or ``% c`` for digits that form one dense number times a scale."""
        if not terms:
            return []
        base = terms[0].scale
        for lo, hi in zip(terms, terms[1:]):
            if hi.scale != lo.scale * lo.extent:
                raise self.fail(f"{_text(e)} divides a sum that is not a dense mixed-radix number")
        if base % c == 0:  # every digit is a multiple of c
            return [_Digit(d.var, d.lower, d.extent, d.scale // c) for d in terms] if div else []
        if c % base:
            raise self.fail(f"{_text(e)}: {c} and the scale {base} do not divide each other")
        rest = c // base
        out: list[_Digit] = []
        for d in terms:
            if rest == 1:
                if div:
                    out.append(_Digit(d.var, d.lower, d.extent, d.scale // c))
                continue
            if rest % d.extent == 0:  # the digit lies wholly below c
                rest //= d.extent
                if not div:
                    out.append(d)
            elif d.extent % rest == 0:  # c cuts the digit in two
                if div:
                    out.append(_Digit(d.var, d.lower * rest, d.extent // rest, d.scale * rest // c))
                else:
                    out.append(_Digit(d.var, d.lower, rest, d.scale))
                rest = 1
            else:
                raise self.fail(
                    f"{_text(e)}: {c} does not align with a digit of extent {d.extent} of {d.var.name}"
                )
        return out

    def run(self) -> tuple[IndexMap, tuple[int, ...]]:
        shape: list[int] = []
        placed: list[tuple[_Digit, int]] = []  # (digit, result position)
        for k, r in enumerate(self.imap.results):
            terms = sorted(self.digits(r), key=lambda d: d.scale)
            expect = 1
            for d in terms:
                if d.scale != expect:
                    raise self.fail(f"{_text(r)} skips values (not dense)")
                expect *= d.extent
                placed.append((d, k))
            shape.append(expect)
        new_vars = tuple(Var(f"v{k}") for k in range(len(shape)))
        inverse = []
        for p in self.imap.params:
            mine = sorted((pd for pd in placed if pd[0].var is p), key=lambda pd: pd[0].lower)
            value: Expr = IntImm(0)
            expect = 1
            for d, k in mine:
                if d.lower != expect:
                    raise self.fail(f"the digits of {p.name} overlap or leave a gap")
                expect *= d.extent
                digit: Expr = new_vars[k]
                if d.scale != 1:
                    digit = FloorDiv(digit, IntImm(d.scale))
                if d.scale * d.extent != shape[k]:
                    digit = FloorMod(digit, IntImm(d.extent))
                term = digit if d.lower == 1 else Mul(digit, IntImm(d.lower))
                value = term if is_const(value, 0) else Add(value, term)
            if expect != self.extent[p]:
                raise self.fail(
                    f"{p.name} has extent {self.extent[p]} but the results cover {expect} of its values"
                )
            inverse.append(value)
        return IndexMap(new_vars, tuple(inverse)), tuple(shape)


__all__ = ["IndexMap", "MAX_CHECKED_POINTS"]
