"""Random variables: handles a schedule gives out for blocks, loops and sampled integers.

A random variable is an identity object: it holds no value itself. The ``Schedule``'s symbol
table maps it to what it stands for in the *current* function (a block name, a loop variable,
an int), so the same handle keeps working after primitives rewrite the tree around it — and a
trace replayed on another schedule maps each of its variables to a fresh one.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Optional
from ..ir.expr import Var, convert


class RV:
    """Base of the random variables; ``prefix`` names them in traces (``b0``, ``l1``, ``v2``)."""

    __slots__ = ("__weakref__",)
    prefix = "?"
    kind = "random variable"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} at 0x{id(self):x}>"


class BlockRV(RV):
    """A block, by its (unique) name."""

    __slots__ = ()
    prefix = "b"
    kind = "block"


class LoopRV(RV):
    """A loop, by its loop variable."""

    __slots__ = ()
    prefix = "l"
    kind = "loop"


class ExprRV(RV):
    """An integer drawn by a sampling instruction (a tile size, a categorical choice …).

    It takes part in integer arithmetic as in TVM, where it is a variable: ``j // (v1 * v2)``
    in an index map given to ``transform_layout`` is an expression in which ``v1`` and ``v2``
    stand for :func:`rv_var` variables; the primitive replaces them by the sampled values and
    its trace keeps the dependence on the sampling instruction.
    """

    __slots__ = ("_var",)
    prefix = "v"
    kind = "integer"
    _var: Any

    def __wb_expr__(self) -> Any:
        """The variable standing for this random variable inside an IR expression."""
        try:
            return self._var
        except AttributeError:
            var = Var(f"rv{next(_COUNT)}")  # distinct: an index map's names must be
            _RV_OF_VAR[id(var)] = self
            self._var = var
            return var

    def _op(name: str, reflected: bool = False):  # type: ignore[misc]
        def op(self: "ExprRV", other: Any) -> Any:
            mine = self.__wb_expr__()
            if isinstance(other, ExprRV):
                other = other.__wb_expr__()
            a, b = (convert(other), mine) if reflected else (mine, other)
            return getattr(a, name)(b)

        return op

    __add__, __radd__ = _op("__add__"), _op("__add__", True)
    __sub__, __rsub__ = _op("__sub__"), _op("__sub__", True)
    __mul__, __rmul__ = _op("__mul__"), _op("__mul__", True)
    __floordiv__, __rfloordiv__ = _op("__floordiv__"), _op("__floordiv__", True)
    __mod__, __rmod__ = _op("__mod__"), _op("__mod__", True)
    del _op


_COUNT = itertools.count()

#: id of a variable :meth:`ExprRV.__wb_expr__` made -> its random variable, which holds the
#: variable (so the id is not reused while the entry lives)
_RV_OF_VAR: "weakref.WeakValueDictionary[int, ExprRV]" = weakref.WeakValueDictionary()


def rv_of_var(var: Any) -> Optional[ExprRV]:
    """The random variable a variable stands for in an expression, or None."""
    rv = _RV_OF_VAR.get(id(var))
    return rv if rv is not None and getattr(rv, "_var", None) is var else None


#: What a LoopRV may stand for instead of a loop: the compute locations "leave the block at
#: the root of its scope" and "inline the block", drawn by ``sample_compute_location``.
ROOT_MARK, INLINE_MARK = "root", "inline"
#: The primitives (and ``Schedule.get``) that accept such a location where a loop is expected.
LOCATION_PRIMITIVES: set[str] = {"get"}

#: trace-name prefix -> class, to rebuild variables from a serialized trace
RV_CLASSES: dict[str, type[RV]] = {c.prefix: c for c in (BlockRV, LoopRV, ExprRV)}
