"""The runner times the kernel, not itself: the same loop, arguments and entry as kernel.time.

No timing thresholds: the tests check *which path* the timed calls take (the kernel's native
entry, not the ctypes fallback that cost ~2.5 us per call) and that the runner's worker and
``kernel.time`` hand the same routine the same arguments.
"""

import pickle

import numpy as np
import pytest

import workbench as wb
from workbench.codegen import kernel as kernel_mod
from workbench.codegen.arrays import canonical_dtype
from workbench.codegen.llvm import pycall
from workbench.codegen.timing import time_runs
from workbench.tune import worker as worker_mod

from tunehelpers import small


def transported(arrays):
    """Arrays as a worker receives them: pickled (their dtypes are equal copies)."""
    return pickle.loads(pickle.dumps(list(arrays)))


@pytest.fixture(scope="module")
def nrm():
    func = small("NRM")
    sch = wb.Schedule(func)
    kernel = wb.build(sch.func, "llvm")
    if kernel._fast is None:
        pytest.skip("no native entry on this Python / numpy")
    return func, kernel


def test_canonical_dtype_gives_numpy_builtin_dtype_view():
    for dtype in ("float32", "float16", "int8", "int64", "bool", "uint8"):
        a = transported([np.arange(6).astype(dtype)])[0]
        assert a.dtype == np.dtype(dtype) and a.dtype is not np.dtype(dtype)  # why it matters
        c = canonical_dtype(a)
        assert c.dtype is np.dtype(dtype)
        assert np.shares_memory(a, c) and np.array_equal(a, c)
    fresh = np.zeros(3, "float32")
    assert canonical_dtype(fresh) is fresh
    rec = np.zeros(2, dtype=[("x", "f4")])
    assert canonical_dtype(rec) is rec


def test_unpickled_arrays_miss_the_native_entry(nrm):
    """The cause: the native entry compares dtype objects, so a pickled array goes to ctypes."""
    func, kernel = nrm
    args = transported(wb.workloads.random_args("NRM", **wb.workloads.small("NRM")))
    assert kernel._fast.call(*args) == pycall.MISMATCH
    assert kernel._fast.call(*[canonical_dtype(a) for a in args]) == pycall.RAN


def test_worker_times_through_the_native_entry(nrm, monkeypatch):
    """The worker's task arrays (received pickled) are taken by the native entry, and it times
    them with kernel.time's routine: every timed call is the kernel's, not ctypes' marshalling."""
    func, kernel = nrm
    arrays = transported(wb.workloads.random_args("NRM", **wb.workloads.small("NRM")))
    outputs = wb.workloads.output_params(func)
    worker = worker_mod.Worker(conn=None)
    msg = transported([func, "llvm", arrays, outputs, None, (1e-3, 1e-4)])
    assert worker.on_task("t", *msg)[0] == "task_ok"
    assert worker.on_build(1, "t", pickle.loads(pickle.dumps(func)))[0] == "built"
    task = worker.tasks["t"]
    built = worker.kernels[1][1]
    assert built._fast.call(*task.arrays) == pycall.RAN

    seen = []
    real = worker_mod.time_runs

    def spy(fn, args, **kw):
        seen.append((fn, list(args), kw))
        return real(fn, args, **kw)

    monkeypatch.setattr(worker_mod, "time_runs", spy)
    reply = worker.on_run(1, {"number": 1, "repeat": 2, "min_repeat_ms": 1.0}, True)
    assert reply[2] == "ok", reply
    ((fn, args, kw),) = seen
    assert fn is built.entry
    assert all(a.dtype is np.dtype(a.dtype.name) for a in args)
    assert built._fast.call(*args) == pycall.RAN
    assert kw["min_repeat_ms"] == 1.0 and len(reply[3]) == 2


def test_kernel_time_takes_the_native_entry_for_any_equal_dtype(nrm, monkeypatch):
    func, kernel = nrm
    args = transported(wb.workloads.random_args("NRM", **wb.workloads.small("NRM")))
    seen = []
    real = kernel_mod.time_runs

    def spy(fn, targs, **kw):
        seen.append((fn, list(targs)))
        return real(fn, targs, **kw)

    monkeypatch.setattr(kernel_mod, "time_runs", spy)
    t = kernel.time(*args, number=2, repeat=1)
    assert t > 0
    ((fn, targs),) = seen
    assert fn is kernel.entry
    assert kernel._fast.call(*targs) == pycall.RAN
    assert real is time_runs and worker_mod.time_runs is time_runs  # one routine for both
