"""64-byte aligned arrays (wb.empty / wb.zeros / wb.aligned) and aligned workload arguments."""

import numpy as np
import pytest

import workbench as wb
from workbench.codegen.arrays import ALIGNMENT, is_aligned


@pytest.mark.parametrize(
    "shape,dtype",
    [((3,), "float32"), ((5, 7), "float64"), ((0, 4), "int8"), ((), "int32"), ((129, 3), "float16")],
)
def test_empty_and_zeros_are_aligned_and_contiguous(shape, dtype):
    for make in (wb.empty, wb.zeros):
        a = make(shape, dtype)
        assert a.shape == shape and a.dtype == np.dtype(dtype)
        assert a.flags.c_contiguous and a.flags.writeable
        assert a.size == 0 or a.ctypes.data % ALIGNMENT == 0  # no data, no address
    assert not wb.zeros(shape, dtype).any()


def test_aligned_copies_only_when_needed():
    a = wb.empty((8, 8), "float32")
    assert wb.aligned(a) is a
    raw = np.zeros(65, dtype="float32")
    misaligned = raw[1:] if raw.ctypes.data % ALIGNMENT == 0 else raw[:64]
    if is_aligned(misaligned):
        misaligned = raw[2:]
    b = wb.aligned(misaligned)
    assert b is not misaligned and is_aligned(b)
    np.testing.assert_array_equal(b, misaligned)
    t = wb.aligned(np.arange(12.0).reshape(3, 4).T)  # not C-contiguous: copied
    assert t.flags.c_contiguous and is_aligned(t)
    np.testing.assert_array_equal(t, np.arange(12.0).reshape(3, 4).T)


def test_workload_args_are_aligned_and_kernels_accept_any_alignment():
    args = wb.workloads.random_args("NRM", m=16, n=16)
    assert all(is_aligned(a) for a in args)
    func = wb.workloads.get("NRM", m=16, n=16)
    args = wb.workloads.random_args("NRM", m=16, n=16)
    kernel = wb.build(func, target="llvm")
    expected = wb.workloads.reference("NRM", m=16, n=16)(*args[:-1])
    raw = np.empty(args[0].size + 1, dtype=args[0].dtype)
    shifted = raw[1:].reshape(args[0].shape)  # 4 bytes off the aligned start
    shifted[...] = args[0]
    kernel(shifted, args[1])
    np.testing.assert_allclose(args[1], expected, rtol=1e-5)
