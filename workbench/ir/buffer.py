"""Buffers: named, statically shaped, typed storage with a scope."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

#: Storage scopes a buffer may live in. ``global`` is the function's memory (parameters and
#: intermediates); ``local`` is per-thread (registers / stack); ``shared`` is GPU shared memory.
SCOPES = ("global", "shared", "shared.dyn", "local", "wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")


@dataclass(frozen=True, eq=False)
class Buffer:
    """A multi-dimensional array. Compared by identity; shapes are Python ints.

    ``axis_separators``/strides are not modelled: buffers are dense and row-major, except that
    ``storage_align`` may pad the stride of a dimension (``align`` holds (dim, factor, offset)).
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    scope: str = "global"
    align: tuple[tuple[int, int, int], ...] = ()

    def __post_init__(self):
        from .expr import check_dtype  # a cycle: expr imports this module (BufferLoad holds a Buffer)

        check_dtype(self.dtype)
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        if self.scope not in SCOPES:
            raise ValueError(
                f"buffer {self.name}: unknown storage scope {self.scope!r}; "
                f"expected one of {', '.join(SCOPES)}"
            )

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def strides(self) -> tuple[int, ...]:
        """Row-major element strides, honouring ``storage_align`` padding."""
        pad = {d: (f, o) for d, f, o in self.align}
        out = [1] * self.ndim
        acc = 1
        for d in range(self.ndim - 1, -1, -1):
            out[d] = acc
            acc *= self.shape[d]
            if d - 1 in pad:  # the stride of dim d-1 is acc, padded up to factor*k + offset
                f, o = pad[d - 1]
                acc = acc + ((o - acc) % f)
        return tuple(out)

    def alloc_size(self) -> int:
        """Elements to allocate (with alignment padding)."""
        if self.ndim == 0:
            return 1
        return self.strides()[0] * self.shape[0]

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
        return f"Buffer({self.name}, {list(self.shape)}, {self.dtype}{scope})"
