"""Process-wide runtime state shared by generated code: the cap on threads per parallel region.

Generated code reads the cap (an ``int32`` owned here, its address baked into the code) at every
parallel region and runs the region on the calling thread alone when it is 1. Two users:

* :func:`set_max_threads` limits every kernel of the process (e.g. to time one core);
* fork safety. libgomp's thread pool does not survive ``fork``: a forked child that opens a
  parallel region after its parent used the pool waits forever for threads that do not exist.
  So a child forked after a parallel kernel ran gets a cap of 1 — its kernels stay correct but
  run serially (and warn once). Worker processes that measure parallel kernels must therefore
  be started with the ``spawn`` or ``forkserver`` method, which the tuner's runner does.
"""
from __future__ import annotations

import ctypes
import os
import warnings

_NO_CAP = 1 << 30
_cap = ctypes.c_int32(_NO_CAP)
_pool_used = False
_forked_after_use = False


def cap_address() -> int:
    """Address of the int32 thread cap (read by generated code)."""
    return ctypes.addressof(_cap)


def set_max_threads(n: int | None) -> None:
    """Use at most ``n`` threads per parallel region in this process (None: no cap)."""
    if n is not None and n < 1:
        raise ValueError(f"set_max_threads: n must be >= 1 or None, got {n}")
    _cap.value = _NO_CAP if n is None else n


def before_parallel_call() -> None:
    """Called before running a kernel with parallel regions."""
    global _pool_used
    _pool_used = True
    if _forked_after_use:
        _warn_serial()


def _warn_serial() -> None:
    global _forked_after_use
    _forked_after_use = False  # once per process
    warnings.warn("workbench: this process was forked after the parent ran parallel kernels; "
                  "libgomp cannot be used here, so parallel loops run on one thread. Start "
                  "worker processes with the 'spawn' or 'forkserver' method.", RuntimeWarning,
                  stacklevel=5)


def _after_fork_in_child() -> None:
    global _forked_after_use
    if _pool_used:
        _cap.value = 1
        _forked_after_use = True


os.register_at_fork(after_in_child=_after_fork_in_child)
