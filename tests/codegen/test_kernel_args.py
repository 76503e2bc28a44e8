"""``Kernel`` checks every argument before running anything, naming the parameter at fault."""

import numpy as np
import pytest

import workbench as wb
from workbench.codegen import Kernel, build


@pytest.fixture
def setup():
    A = wb.placeholder((4, 3), "float32", name="A")
    B = wb.placeholder((3,), "float32", name="B")
    C = wb.compute((4, 3), lambda i, j: A[i, j] + B[j], name="C")
    func = wb.create_func([A, B, C], name="add_bias")
    calls = []
    kernel = Kernel(func, "python", lambda *arrays: calls.append(arrays), "def add_bias(): ...")
    good = (np.ones((4, 3), "float32"), np.ones(3, "float32"), np.zeros((4, 3), "float32"))
    return kernel, good, calls


def test_good_arguments_reach_the_entry_in_order(setup):
    kernel, good, calls = setup
    kernel(*good)
    assert len(calls) == 1 and all(a is b for a, b in zip(calls[0], good))


def test_wrong_count_names_the_parameters(setup):
    kernel, good, calls = setup
    with pytest.raises(TypeError, match=r"add_bias\(\) takes 3 arrays \(A, B, C\), got 2"):
        kernel(*good[:2])
    assert not calls


def test_non_numpy_argument(setup):
    kernel, good, calls = setup
    with pytest.raises(TypeError, match="argument 'B' must be a numpy.ndarray, got list"):
        kernel(good[0], [1.0, 2.0, 3.0], good[2])
    assert not calls


def test_wrong_dtype_names_parameter_expected_and_got(setup):
    kernel, good, calls = setup
    with pytest.raises(TypeError, match="argument 'A' has dtype float64, expected float32"):
        kernel(good[0].astype("float64"), good[1], good[2])
    assert not calls


def test_wrong_shape_names_parameter_expected_and_got(setup):
    kernel, good, calls = setup
    with pytest.raises(ValueError, match=r"argument 'C' has shape \(3, 4\), expected \(4, 3\)"):
        kernel(good[0], good[1], np.zeros((3, 4), "float32"))
    assert not calls


def test_non_contiguous_argument(setup):
    kernel, good, calls = setup
    strided = np.ones((4, 6), "float32")[:, ::2]
    with pytest.raises(ValueError, match="argument 'A' is not C-contiguous"):
        kernel(strided, good[1], good[2])
    assert not calls


def test_read_only_output_but_read_only_input_is_fine(setup):
    kernel, good, calls = setup
    frozen_out = good[2].copy()
    frozen_out.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'C' is read-only, but the kernel writes it"):
        kernel(good[0], good[1], frozen_out)
    assert not calls
    frozen_in = good[0].copy()
    frozen_in.flags.writeable = False
    kernel(frozen_in, good[1], good[2])
    assert len(calls) == 1


def test_time_checks_arguments_too(setup):
    kernel, good, calls = setup
    with pytest.raises(ValueError, match="argument 'B' has shape"):
        kernel.time(good[0], np.ones(4, "float32"), good[2])
    assert not calls
    assert kernel.time(*good, number=3, repeat=2, warmup=1) >= 0
    assert len(calls) == 1 + 3 * 2


def test_repr_summarises_signature_and_target(setup):
    kernel, _, _ = setup
    assert repr(kernel) == (
        "Kernel(add_bias(A: float32[4, 3], B: float32[3], C: float32[4, 3] (out)), target='python')"
    )


def test_checks_apply_to_a_built_kernel():
    A = wb.placeholder((2, 2), "float32", name="A")
    B = wb.compute((2, 2), lambda i, j: A[j, i], name="B")
    kernel = build(wb.create_func([A, B], name="transpose"))
    a, b = np.arange(4, dtype="float32").reshape(2, 2), np.zeros((2, 2), "float32")
    with pytest.raises(ValueError, match="argument 'B' is not C-contiguous"):
        kernel(a, np.zeros((2, 2), "float32").T)
    kernel(a, b)
    np.testing.assert_array_equal(b, a.T)
