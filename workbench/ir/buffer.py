"""Buffers: named, typed storage with a scope; static shapes (ints) or symbolic ones (size vars)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

#: Storage scopes a buffer may live in. ``global`` is the function's memory (parameters and
#: intermediates); ``local`` is per-thread (registers / stack); ``shared`` is GPU shared memory.
SCOPES = ("global", "shared", "shared.dyn", "local", "wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")


@dataclass(frozen=True, eq=False)
class Buffer:
    """A multi-dimensional array. Compared by identity.

    Shape entries are Python ints where static (every static path keeps plain int arithmetic)
    or integer ``Expr`` over size variables (``wb.var("n")``) where symbolic: then ``size``,
    ``strides`` and ``alloc_size`` are Exprs too (:attr:`is_symbolic`).

    ``axis_separators``/strides are not modelled: buffers are dense and row-major, except that
    ``storage_align`` may pad the stride of a dimension (``align`` holds (dim, factor, offset)).
    """

    name: str
    shape: tuple[Any, ...]  # int | Expr
    dtype: str = "float32"
    scope: str = "global"
    align: tuple[tuple[int, int, int], ...] = ()

    def __post_init__(self):
        from .expr import check_dtype  # a cycle: expr imports this module (BufferLoad holds a Buffer)

        check_dtype(self.dtype)
        object.__setattr__(self, "shape", tuple(_dim(s, self.name) for s in self.shape))
        if self.scope not in SCOPES:
            raise ValueError(
                f"buffer {self.name}: unknown storage scope {self.scope!r}; "
                f"expected one of {', '.join(SCOPES)}"
            )

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_symbolic(self) -> bool:
        """Whether some dimension is an expression of size variables (not a Python int)."""
        return any(not isinstance(s, int) for s in self.shape)

    def static_shape(self, what: str) -> tuple[int, ...]:
        """The shape as ints; a symbolic shape raises ``ValueError`` saying that ``what`` (a
        phrase naming the operation) needs static shapes."""
        if self.is_symbolic:
            raise ValueError(
                f"{what} needs a static shape, but buffer {self.name} has the symbolic shape "
                f"{shape_str(self.shape)}"
            )
        return self.shape

    @property
    def size(self) -> Any:
        n: Any = 1
        for s in self.shape:
            n = _mul(n, s)
        return n

    def strides(self) -> tuple[Any, ...]:
        """Row-major element strides, honouring ``storage_align`` padding."""
        pad = {d: (f, o) for d, f, o in self.align}
        out: list[Any] = [1] * self.ndim
        acc: Any = 1
        for d in range(self.ndim - 1, -1, -1):
            out[d] = acc
            acc = _mul(acc, self.shape[d])
            if d - 1 in pad:  # the stride of dim d-1 is acc, padded up to factor*k + offset
                f, o = pad[d - 1]
                acc = acc + ((o - acc) % f)
        return tuple(out)

    def alloc_size(self) -> Any:
        """Elements to allocate (with alignment padding)."""
        if self.ndim == 0:
            return 1
        return _mul(self.strides()[0], self.shape[0])

    def with_(self, **changes: Any) -> "Buffer":
        """A new buffer (new identity) with some fields changed."""
        return replace(self, **changes)

    def __getitem__(self, indices):
        from .expr import BufferLoad, convert  # a cycle: expr imports this module

        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise IndexError(f"buffer {self.name} has {self.ndim} dimensions, indexed with {len(indices)}")
        return BufferLoad(self, tuple(convert(i) for i in indices))

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        scope = "" if self.scope == "global" else f", scope={self.scope!r}"
        return f"Buffer({self.name}, {shape_str(self.shape)}, {self.dtype}{scope})"


def _dim(s: Any, name: str) -> Any:
    """A shape entry: an int stays an int (a constant expression becomes one); an integer
    expression of size variables stays an expression."""
    from .expr import Expr, IntImm, is_int  # a cycle: expr imports this module

    if isinstance(s, IntImm):
        return int(s.value)
    if isinstance(s, Expr):
        if not is_int(s.dtype):
            raise TypeError(f"buffer {name}: a shape entry must be an integer, got {s} of dtype {s.dtype}")
        return s
    if hasattr(type(s), "__wb_expr__"):  # a schedule's sampled integer
        return _dim(s.__wb_expr__(), name)
    return int(s)


def _mul(a: Any, b: Any) -> Any:
    """``a * b`` keeping ints ints, and dropping unit factors of a symbolic product."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if isinstance(a, int) and a == 1:
        return b
    if isinstance(b, int) and b == 1:
        return a
    return a * b


def shape_str(shape: tuple) -> str:
    """``[n, 64]``: a shape as the user wrote it."""
    return "[" + ", ".join(str(s) for s in shape) + "]"
