"""Kernels with runtime shapes: one build runs at any size; sizes come from the arrays passed in,
and wrong or inconsistent ones are a ValueError naming the parameter and the dimension."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb

TARGETS = ["llvm", "python"]
SIZES = (1, 7, 100, 128)


def elementwise():
    n = wb.var("n")
    X = wb.placeholder((n, 64), name="X")
    Y = wb.compute((n, 64), lambda i, j: X[i, j] * 2 + 1, name="Y")
    return wb.create_func([X, Y], name="scale"), lambda x: x * 2 + 1


def matmul():
    n = wb.var("n")
    A = wb.placeholder((n, 32), name="A")
    W = wb.placeholder((32, 16), name="W")
    k = wb.reduce_axis(32, "k")
    C = wb.compute((n, 16), lambda i, j: wb.sum(A[i, k] * W[k, j], axis=k), name="C")
    return wb.create_func([A, W, C], name="mm")


def softmax():
    """Rows of symbolic length: reductions over n, an intermediate of shape (4, n)."""
    n = wb.var("n")
    S = wb.placeholder((4, n), name="S")
    k1, k2 = wb.reduce_axis(n, "k1"), wb.reduce_axis(n, "k2")
    M = wb.compute((4,), lambda i: wb.max(S[i, k1], axis=k1), name="M")
    E = wb.compute((4, n), lambda i, j: wb.exp(S[i, j] - M[i]), name="E")
    Z = wb.compute((4,), lambda i: wb.sum(E[i, k2], axis=k2), name="Z")
    O = wb.compute((4, n), lambda i, j: E[i, j] / Z[i], name="O")
    return wb.create_func([S, O], name="softmax")


def layer_norm(d: int = 32):
    """n rows of d features: intermediates of shape (n,)."""
    n = wb.var("n")
    X = wb.placeholder((n, d), name="X")
    G = wb.placeholder((d,), name="G")
    k1, k2 = wb.reduce_axis(d, "k1"), wb.reduce_axis(d, "k2")
    s1 = wb.compute((n,), lambda i: wb.sum(X[i, k1], axis=k1), name="s1")
    s2 = wb.compute((n,), lambda i: wb.sum(X[i, k2] * X[i, k2], axis=k2), name="s2")

    def norm(i, j):
        mean = s1[i] / d
        return (X[i, j] - mean) * wb.rsqrt(s2[i] / d - mean * mean + 1e-5) * G[j]

    return wb.create_func([X, G, wb.compute((n, d), norm, name="Y")], name="layer_norm")


@pytest.fixture(params=TARGETS)
def target(request):
    return request.param


def test_elementwise_at_several_sizes(target):
    f, ref = elementwise()
    kernel = wb.build(f, target=target)
    for n in SIZES:
        x = np.random.rand(n, 64).astype("float32")
        y = np.empty_like(x)
        kernel(x, y)
        np.testing.assert_allclose(y, ref(x), rtol=1e-6)


def test_matmul_with_symbolic_rows(target):
    kernel = wb.build(matmul(), target=target)
    w = np.random.rand(32, 16).astype("float32")
    for n in SIZES:
        a = np.random.rand(n, 32).astype("float32")
        c = np.empty((n, 16), "float32")
        kernel(a, w, c)
        np.testing.assert_allclose(c, a @ w, rtol=1e-5)


def test_softmax_over_symbolic_rows(target):
    kernel = wb.build(softmax(), target=target)
    for n in SIZES:
        s = np.random.randn(4, n).astype("float32")
        o = np.empty_like(s)
        kernel(s, o)
        e = np.exp(s - s.max(1, keepdims=True))
        np.testing.assert_allclose(o, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_layer_norm_over_symbolic_rows(target):
    kernel = wb.build(layer_norm(), target=target)
    g = np.random.rand(32).astype("float32")
    for n in SIZES:
        x = np.random.randn(n, 32).astype("float32")
        y = np.empty_like(x)
        kernel(x, g, y)
        ref = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * g
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_wrong_and_inconsistent_sizes_name_parameter_and_dimension(target):
    kernel = wb.build(matmul(), target=target)
    a, w = np.ones((128, 32), "float32"), np.ones((32, 16), "float32")
    with pytest.raises(ValueError, match=r"mm\(\): C: dimension 0 is 100 but n = 128 from A"):
        kernel(a, w, np.empty((100, 16), "float32"))
    with pytest.raises(ValueError, match=r"W: dimension 1 is 8 but must be 16"):
        kernel(a, np.ones((32, 8), "float32"), np.empty((128, 16), "float32"))
    with pytest.raises(ValueError, match=r"argument 'A' has 1 dimensions \(shape \(128,\)\), expected 2"):
        kernel(np.ones(128, "float32"), w, np.empty((128, 16), "float32"))
    with pytest.raises(ValueError, match="C: dimension 0 is 100 but n = 128 from A"):
        kernel.time(a, w, np.empty((100, 16), "float32"))


def test_a_dimension_that_is_an_expression_of_size_variables(target):
    n = wb.var("n")
    A = wb.placeholder((n,), name="A")
    B = wb.compute((n * 2,), lambda i: A[i // 2], name="B")
    kernel = wb.build(wb.create_func([A, B], name="dup"), target=target)
    a = np.arange(5, dtype="float32")
    b = np.empty(10, "float32")
    kernel(a, b)
    np.testing.assert_array_equal(b, np.repeat(a, 2))
    with pytest.raises(ValueError, match=r"B: dimension 0 is 9 but n \* 2 = 10 \(n = 5 from A\)"):
        kernel(a, np.empty(9, "float32"))


def test_time_and_empty_arrays_on_a_symbolic_kernel(target):
    f, ref = elementwise()
    kernel = wb.build(f, target=target)
    x = np.random.rand(7, 64).astype("float32")
    y = np.empty_like(x)
    assert kernel.time(x, y, number=2, repeat=2) > 0
    np.testing.assert_allclose(y, ref(x), rtol=1e-6)
    kernel(np.empty((0, 64), "float32"), np.empty((0, 64), "float32"))  # n = 0: nothing runs


def test_llvm_int64_size_var_checked_build_and_the_python_path():
    n = wb.var("n", "int64")
    X = wb.placeholder((n, 16), name="X")
    f = wb.create_func([X, wb.compute((n, 16), lambda i, j: X[i, j] + 1, name="Y")], name="inc")
    x = np.random.rand(9, 16).astype("float32")
    for kernel in (wb.build(f, target="llvm"), wb.build(f, target="llvm", check_bounds=True)):
        y = np.empty_like(x)
        kernel(x, y)
        np.testing.assert_allclose(y, x + 1)

    class Sub(np.ndarray):  # not taken by the native fast path: the ctypes path passes n too
        pass

    y = np.empty_like(x).view(Sub)
    wb.build(f, target="llvm")(x, y)
    np.testing.assert_allclose(y, x + 1)


def test_llvm_parallel_loop_captures_the_size_variable():
    sch = wb.Schedule(layer_norm())
    i, j = sch.get_loops(sch.get_block("Y"))
    sch.reorder(j, i)
    sch.parallel(j)  # the task's inner loop runs to n, and indexes with strides of n
    kernel = wb.build(sch, target="llvm")
    assert "_par0" in kernel.source("llvm-raw")
    g = np.random.rand(32).astype("float32")
    for n in (1, 7, 100):
        x = np.random.randn(n, 32).astype("float32")
        y = np.empty_like(x)
        kernel(x, g, y)
        ref = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * g
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_cuda_source_and_emulator_take_sizes_as_kernel_parameters():
    f, ref = elementwise()
    sch = wb.Schedule(f)
    i, j = sch.get_loops(sch.get_block("Y"))
    sch.reorder(j, i)
    sch.bind(j, "threadIdx.x")
    kernel = wb.build(sch, target="cuda-emulate")
    assert "float* __restrict__ Y, int n)" in kernel.source("cuda")
    for n in (1, 7, 33):
        x = np.random.rand(n, 64).astype("float32")
        y = np.empty_like(x)
        kernel(x, y)
        np.testing.assert_allclose(y, ref(x), rtol=1e-6)
    with pytest.raises(ValueError, match="Y: dimension 0 is 2 but n = 3 from X"):
        kernel(np.ones((3, 64), "float32"), np.ones((2, 64), "float32"))


def test_static_kernels_keep_their_exact_shape_check():
    x = np.ones((4, 4), "float32")
    A = wb.placeholder((4, 4), name="A")
    kernel = wb.build(wb.create_func([A, wb.compute((4, 4), lambda i, j: A[i, j], name="B")]), "llvm")
    with pytest.raises(ValueError, match=r"argument 'B' has shape \(5, 4\), expected \(4, 4\)"):
        kernel(x, np.ones((5, 4), "float32"))
