"""Workbench's thread pool (codegen/llvm/pool.py): a parallel region waits only for the workers
that joined it, so a region whose workers the OS has not run yet finishes on its caller alone
(libgomp's GOMP_parallel waited for every thread's check-in: 200 ms per call of GMM-128 beside
another real-time process). Deterministic: ``hold_workers`` keeps woken workers from joining."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

from workbench.codegen.llvm import build_llvm, pool
from workbench.ir import Buffer, BufferStore, Cast, ForKind, Var
from workbench.ir.stmt import make_for

from .test_llvm_loops import lowered

pytestmark = pytest.mark.skipif(not pool.available(), reason="the thread pool needs Linux x86-64/AArch64")

P = ForKind.PARALLEL
_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_LAUNCH = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)


def _kernel():
    A = Buffer("A", (256,))
    p = Var("p")
    body = make_for(p, 256, BufferStore(A, A[p] + Cast("float32", p), (p,)), P)
    return build_llvm(lowered([A], body), "llvm -num-cores=2")


def test_regions_finish_without_workers_that_have_not_run():
    kernel = _kernel()
    a = np.zeros(256, "float32")
    kernel(a)  # the worker exists
    pool.hold_workers(True)
    try:
        joined = pool.regions_joined()
        for _ in range(50):  # the old runtime waited here for the held worker's check-in
            kernel(a)
        assert pool.regions_joined() == joined  # every region ran on the caller alone
    finally:
        pool.hold_workers(False)
    kernel(a)
    np.testing.assert_array_equal(a, 52 * np.arange(256, dtype="float32"))


def test_a_late_worker_does_not_join_a_closed_region():
    """A worker released after its region closed goes back to waiting: later regions still
    run (and may be joined), and no region's closure is touched after it ended."""
    kernel = _kernel()
    a = np.zeros(256, "float32")
    pool.hold_workers(True)
    try:
        kernel(a)
    finally:
        pool.hold_workers(False)
    for _ in range(20):
        kernel(a)
    np.testing.assert_array_equal(a, 21 * np.arange(256, dtype="float32"))


def test_a_region_started_while_the_pool_is_busy_runs_alone():
    """Kernels release the GIL: a second thread's region, while the pool runs another, runs on
    its own thread instead of waiting for the pool."""
    launch = _LAUNCH(pool._addresses()[0])
    inside, release, seen = threading.Event(), threading.Event(), []

    @_FN
    def hold(_closure):  # run by the region's caller and its worker
        seen.append(threading.get_ident())
        inside.set()
        release.wait(30)

    first = threading.Thread(target=launch, args=(ctypes.cast(hold, ctypes.c_void_p), None, 2))
    first.start()
    try:
        assert inside.wait(30)
        kernel, a = _kernel(), np.zeros(256, "float32")
        kernel(a)  # the pool is busy: this region must not wait for the first one
        np.testing.assert_array_equal(a, np.arange(256, dtype="float32"))
    finally:
        release.set()
        first.join(30)
    assert not first.is_alive()
