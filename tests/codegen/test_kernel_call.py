"""Calling an LLVM kernel: the native fast path and the Python path give the same results and
the same errors (the fast path sends anything it does not accept to the Python checks)."""

import numpy as np
import pytest

import workbench as wb
from workbench.codegen import build
from workbench.codegen.llvm import pycall


def add_bias():
    A = wb.placeholder((4, 3), "float32", name="A")
    B = wb.placeholder((3,), "float32", name="B")
    C = wb.compute((4, 3), lambda i, j: A[i, j] + B[j], name="C")
    return wb.create_func([A, B, C], name="add_bias")


@pytest.fixture(scope="module")
def kernels():
    """The same function built with the fast path and with the Python path only."""
    fast = build(add_bias(), "llvm")
    mp = pytest.MonkeyPatch()
    mp.setattr(pycall, "available", lambda: False)
    try:
        slow = build(add_bias(), "llvm")
    finally:
        mp.undo()
    assert fast._fast is not None and slow._fast is None
    return fast, slow


def good():
    rng = np.random.default_rng(0)
    return (rng.random((4, 3), dtype="float32"), rng.random(3, dtype="float32"), np.zeros((4, 3), "float32"))


def test_python_entry_passes_its_layout_self_test_here():
    assert pycall.available()


def test_fast_and_python_paths_compute_the_same(kernels):
    fast, slow = kernels
    a, b, c1 = good()
    c2 = np.zeros_like(c1)
    fast(a, b, c1)
    slow(a, b, c2)
    np.testing.assert_array_equal(c1, a + b)
    np.testing.assert_array_equal(c1, c2)


def _frozen(x):
    x = x.copy()
    x.flags.writeable = False
    return x


BAD = {
    "too few": lambda a, b, c: (a, b),
    "too many": lambda a, b, c: (a, b, c, c),
    "a list": lambda a, b, c: (a, list(b), c),
    "an int": lambda a, b, c: (a, 3, c),
    "float64": lambda a, b, c: (a.astype("float64"), b, c),
    "int32 output": lambda a, b, c: (a, b, c.astype("int32")),
    "byte-swapped": lambda a, b, c: (a.astype(">f4"), b, c),
    "transposed shape": lambda a, b, c: (a, b, np.zeros((3, 4), "float32")),
    "wrong rank": lambda a, b, c: (a.reshape(12), b, c),
    "0-d": lambda a, b, c: (a, np.float32(1.0), c),
    "strided": lambda a, b, c: (np.ones((4, 6), "float32")[:, ::2], b, c),
    "fortran order": lambda a, b, c: (np.asfortranarray(a), b, c),
    "read-only output": lambda a, b, c: (a, b, _frozen(c)),
}


def _error(kernel, args):
    try:
        kernel(*args)
    except (TypeError, ValueError) as err:
        return type(err), str(err)
    return None


@pytest.mark.parametrize("case", list(BAD))
def test_fast_and_python_paths_raise_the_same_error(kernels, case):
    fast, slow = kernels
    args = BAD[case](*good())
    before = [np.array(x, copy=True) if isinstance(x, np.ndarray) else x for x in args]
    err = _error(fast, args)
    assert err is not None and err == _error(slow, args)
    for x, y in zip(args, before):  # nothing ran
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)


def test_read_only_input_is_accepted(kernels):
    fast, _ = kernels
    a, b, c = good()
    fast(_frozen(a), _frozen(b), c)
    np.testing.assert_array_equal(c, a + b)


class Tagged(np.ndarray):
    """An ndarray subclass: not what the native checks accept, fine for the Python ones."""


def test_what_only_the_python_checks_accept_still_runs(kernels):
    fast, _ = kernels
    a, b, c = good()
    assert fast._fast.call(a.view(Tagged), b, c) == pycall.MISMATCH
    fast(a.view(Tagged), b, c)
    np.testing.assert_array_equal(c, a + b)
    # an equal dtype that is not numpy's builtin float32 object
    tagged = np.dtype("float32", metadata={"unit": "m"})
    assert tagged == np.dtype("float32") and tagged is not np.dtype("float32")
    c[...] = 0
    fast(a.view(tagged), b, c)
    np.testing.assert_array_equal(c, a + b)
    # the timing entry (arguments checked once, up front) takes the same detour
    c[...] = 0
    fast.entry(a.view(Tagged), b, c)
    np.testing.assert_array_equal(c, a + b)


def test_zero_dimensional_and_empty_arrays():
    A = wb.placeholder((), "float32", name="A")
    B = wb.compute((), lambda: A[()] * 2.0, name="B")
    scalar = build(wb.create_func([A, B], name="scalar"), "llvm")
    out = np.zeros((), "float32")
    scalar(np.array(3.0, "float32"), out)
    assert out == 6.0
    with pytest.raises(ValueError, match=r"argument 'B' has shape \(1,\), expected \(\)"):
        scalar(np.array(3.0, "float32"), np.zeros(1, "float32"))
    E = wb.placeholder((0, 3), "float32", name="E")
    F = wb.compute((0, 3), lambda i, j: E[i, j] * 2.0, name="F")
    empty = build(wb.create_func([E, F], name="empty"), "llvm")
    empty(np.zeros((0, 3), "float32"), np.zeros((0, 3), "float32"))
    with pytest.raises(ValueError, match=r"argument 'F' has shape \(3, 0\), expected \(0, 3\)"):
        empty(np.zeros((0, 3), "float32"), np.zeros((3, 0), "float32"))


def test_parallel_kernel_runs_through_the_fast_path():
    A = wb.placeholder((64, 16), "float32", name="A")
    B = wb.compute((64, 16), lambda i, j: A[i, j] + 1.0, name="B")
    sch = wb.Schedule(wb.create_func([A, B], name="inc"))
    sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    kernel = build(sch, "llvm")
    assert kernel._parallel and kernel._fast is not None
    a, b = np.arange(64 * 16, dtype="float32").reshape(64, 16), np.zeros((64, 16), "float32")
    kernel(a, b)
    np.testing.assert_array_equal(b, a + 1)
