"""Arrays for kernels: numpy arrays whose data starts on a 64-byte boundary.

numpy aligns data to 16 bytes only (and an array of a few hundred KB, served by ``mmap``
through malloc, starts 16 bytes past a page). A 512-bit load from such an array straddles two
cache lines, which costs memory-bound kernels up to 2x (NRM, measured on AVX-512). TVM's
runtime allocates every tensor 64-byte aligned; these helpers give numpy arrays the same start,
so that workbench and TVM kernels are timed on equal terms and tuned on the arrays users get
from :func:`workbench.workloads.random_args`. Kernels accept any C-contiguous array: alignment
is a speed matter, never a correctness one.

    >>> a = wb.empty((128, 128), "float32")        # uninitialized, 64-byte aligned
    >>> b = wb.aligned(np.random.rand(128, 128))   # a copy when not aligned already
"""

from __future__ import annotations

from typing import Sequence, Union

import numpy as np
import numpy.typing as npt

#: bytes: a cache line, and a 512-bit vector
ALIGNMENT = 64


def empty(shape: Union[int, Sequence[int]], dtype: npt.DTypeLike = "float32") -> np.ndarray:
    """An uninitialized C-contiguous array whose data is ``ALIGNMENT``-byte aligned."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def zeros(shape: Union[int, Sequence[int]], dtype: npt.DTypeLike = "float32") -> np.ndarray:
    """A zeroed :func:`empty` array."""
    out = empty(shape, dtype)
    out[...] = 0
    return out


def is_aligned(array: np.ndarray) -> bool:
    return array.ctypes.data % ALIGNMENT == 0


def aligned(array: np.ndarray) -> np.ndarray:
    """``array`` itself when C-contiguous and aligned, else an aligned C-contiguous copy."""
    array = np.asarray(array)
    if array.flags.c_contiguous and is_aligned(array):
        return array
    out = empty(array.shape, array.dtype)
    out[...] = array
    return out


def canonical_dtype(array: np.ndarray) -> np.ndarray:
    """``array`` itself, or a view of it whose dtype is numpy's builtin object for that type.

    An array that crossed a process boundary (pickled: the tuner's workers get their inputs
    so) has a dtype *equal* to ``np.dtype("float32")`` but not that object, and a kernel's
    native entry (:mod:`workbench.codegen.llvm.pycall`) takes only the builtin one: anything
    else is called through ctypes, about 2.5 us more per call -- as much as NRM's whole run.
    A view costs nothing and changes no data."""
    dtype = array.dtype
    if dtype.isbuiltin == 1 or dtype.kind not in "biufc" or dtype.names or dtype.metadata:
        return array  # the builtin object already, or one no kernel parameter has
    builtin = np.dtype(dtype.str)
    return array.view(builtin) if builtin == dtype and builtin.isbuiltin == 1 else array
