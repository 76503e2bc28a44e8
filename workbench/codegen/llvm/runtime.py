"""Process-wide runtime state shared by generated code: the cap on threads per parallel region,
and how libgomp's threads wait.

Generated code reads the cap (an ``int32`` owned here, its address baked into the code) at every
parallel region and runs the region on the calling thread alone when it is 1. Two users:

* :func:`set_max_threads` limits every kernel of the process (e.g. to time one core);
* fork safety. The thread pool (:mod:`.pool`) does not survive ``fork``: a forked child has
  none of its threads (libgomp's pool, which the kernels used before, even made such a child
  wait forever). So a child forked after a parallel kernel ran gets a cap of 1: its kernels stay
  correct but run serially, and it says so once. Worker processes that measure parallel kernels must therefore
  be started with the ``spawn`` or ``forkserver`` method, which the tuner's runner does.

Waiting. The pool's threads spin ~300 iterations before they sleep (:mod:`.pool`), the bound
measured below for libgomp, which other libraries may still load (OpenMP builds of BLAS). Between
parallel regions and at their ends, libgomp's threads spin before they sleep:
300,000 iterations by default, about 7 ms here (~25 ns per iteration). On a machine shared with
other work that is ruinous: a thread spinning at a barrier holds the core that the thread it
waits for needs until the scheduler's slice ends, so each call costs a slice. Sleeping at once
(``OMP_WAIT_POLICY=passive``) is as ruinous on a quiet machine, where each wake-up of an idle
core is slow. Measured on 2 cores (AMD EPYC, a VM), GMM-128 hand-scheduled, ms per call:

    GOMP_SPINCOUNT          300000 (default)   10000    1000    300    100    passive
    quiet machine               0.010          0.010   0.010   0.010  0.0103   0.040
    one busy process beside     7.8              -     0.080   0.041  0.032    0.026
    load average ~5             16             1.1     0.17    0.080  0.061    0.051

:func:`bound_spinning` sets :data:`SPIN_COUNT` (300: as fast as the default when quiet, ~8 µs,
enough to catch the next call of a loop of kernel calls) unless the user chose a wait policy;
the LLVM backend applies it when it initializes (for libraries that load libgomp later: an
OpenMP BLAS), and the tuner's measuring workers get it in their environment.
"""

from __future__ import annotations

import ctypes
import os
import warnings
from typing import MutableMapping, Optional

#: libgomp spin iterations before a waiting thread sleeps (see the module docstring)
SPIN_COUNT = 300
#: the variables through which a user chooses libgomp's waiting; either one set: left alone
WAIT_VARIABLES = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")

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


def bound_spinning(env: Optional[MutableMapping[str, str]] = None) -> bool:
    """Set ``GOMP_SPINCOUNT`` to :data:`SPIN_COUNT` in ``env`` (default: this process's
    environment) unless it already chooses a wait policy (:data:`WAIT_VARIABLES`); True if
    set. libgomp reads the environment once, when it is loaded: call this before."""
    env = os.environ if env is None else env
    if any(name in env for name in WAIT_VARIABLES):
        return False
    env["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    return True


def before_parallel_call() -> None:
    """Called before running a kernel with parallel regions."""
    global _pool_used
    _pool_used = True
    if _forked_after_use:
        _warn_serial()


def _warn_serial() -> None:
    global _forked_after_use
    _forked_after_use = False  # once per process
    warnings.warn(
        "workbench: this process was forked after the parent ran parallel kernels; "
        "libgomp cannot be used here, so parallel loops run on one thread. Start "
        "worker processes with the 'spawn' or 'forkserver' method.",
        RuntimeWarning,
        stacklevel=5,
    )


def _after_fork_in_child() -> None:
    global _forked_after_use
    if _pool_used:
        _cap.value = 1
        _forked_after_use = True


os.register_at_fork(after_in_child=_after_fork_in_child)
