"""Primitives on loops of symbolic extent (a size variable ``n``), as TVM 0.27 schedules them.

The expected programs are what TVM prints for the same schedule of the same function (checked
with ``tvm.s_tir.Schedule``: ``split(i, [None, 4])`` gives ``T.grid((n + 3) // 4, 4)`` and
``T.where(i_0 * 4 + i_1 < n)``; ``fuse`` then ``split`` of ``n * 64`` by 16 gives ``n * 4``
outer iterations and no predicate (TVM leaves ``(i_j_fused_0 * 16 + i_j_fused_1) // 64`` as it
is; our simplifier writes ``i_j_fused_0 // 4``); ``parallel``, ``vectorize``, ``unroll`` keep the symbolic
extent), written here in our words. Every schedule is built for llvm and run at sizes that the
split factors do not divide (1, 7, 100, 129) against numpy, and its trace round-trips.
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

SIZES = (1, 7, 100, 129)

SCALE = """
@T.prim_func
def scale(X: T.Buffer(("n", 64), "float32"), Y: T.Buffer((n, 64), "float32")):
    n = T.int32()
    for i, j in T.grid(n, 64):
        with T.block("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[vi, vj] * T.float32(2)
"""


def matmul_bias() -> wb.PrimFunc:
    """C = A @ W over n rows (a reduction), then D = C + 1."""
    n = wb.var("n")
    A = wb.placeholder((n, 32), name="A")
    W = wb.placeholder((32, 16), name="W")
    k = wb.reduce_axis(32, "k")
    C = wb.compute((n, 16), lambda i, j: wb.sum(A[i, k] * W[k, j], axis=k), name="C")
    D = wb.compute((n, 16), lambda i, j: C[i, j] + 1, name="D")
    return wb.create_func([A, W, D], name="mm")


def row_sum() -> wb.PrimFunc:
    """S[i] = sum over a symbolic reduce extent n of X[i, k]."""
    n = wb.var("n")
    X = wb.placeholder((8, n), name="X")
    k = wb.reduce_axis(n, "k")
    S = wb.compute((8,), lambda i: wb.sum(X[i, k], axis=k), name="S")
    return wb.create_func([X, S], name="row_sum")


def run_scale(sch: wb.Schedule) -> None:
    kernel = wb.build(sch, target="llvm")
    for n in SIZES:
        x = np.random.rand(n, 64).astype("float32")
        y = np.empty_like(x)
        kernel(x, y)
        np.testing.assert_allclose(y, x * 2, rtol=1e-6)
    check_trace_roundtrip(sch)


def run_matmul(sch: wb.Schedule) -> None:
    kernel = wb.build(sch, target="llvm")
    for n in SIZES:
        a, w = np.random.rand(n, 32).astype("float32"), np.random.rand(32, 16).astype("float32")
        d = np.empty((n, 16), "float32")
        kernel(a, w, d)
        np.testing.assert_allclose(d, a @ w + 1, rtol=1e-5)
    check_trace_roundtrip(sch)


def run_row_sum(sch: wb.Schedule) -> None:
    kernel = wb.build(sch, target="llvm")
    for n in SIZES:
        x = np.random.rand(8, n).astype("float32")
        s = np.empty(8, "float32")
        kernel(x, s)
        np.testing.assert_allclose(s, x.sum(1), rtol=1e-5)
    check_trace_roundtrip(sch)


def after(sch: wb.Schedule, expected: str) -> None:
    wb.assert_structural_equal(sch.func, wb.parse(expected))


# ---------------------------------------------------------------------------------------------
# split, fuse, reorder, loop kinds


def test_split_with_none_outer_gives_ceildiv_extent_and_tail_predicate():
    sch = wb.Schedule(wb.parse(SCALE))
    i, _ = sch.get_loops("Y")
    sch.split(i, factors=[None, 4])
    after(
        sch,
        """
@T.prim_func
def scale(X: T.Buffer(("n", 64), "float32"), Y: T.Buffer((n, 64), "float32")):
    n = T.int32()
    for i_0, i_1, j in T.grid((n + 3) // 4, 4, 64):
        with T.block("Y"):
            vi = T.axis.spatial(n, i_0 * 4 + i_1)
            vj = T.axis.spatial(64, j)
            T.where(i_0 * 4 + i_1 < n)
            Y[vi, vj] = X[vi, vj] * T.float32(2)
""",
    )
    run_scale(sch)


def test_split_with_none_inner_gives_a_symbolic_inner_loop():
    sch = wb.Schedule(wb.parse(SCALE))
    i, _ = sch.get_loops("Y")
    sch.split(i, factors=[4, None])
    after(
        sch,
        """
@T.prim_func
def scale(X: T.Buffer(("n", 64), "float32"), Y: T.Buffer((n, 64), "float32")):
    n = T.int32()
    for i_0, i_1, j in T.grid(4, (n + 3) // 4, 64):
        with T.block("Y"):
            vi = T.axis.spatial(n, i_0 * ((n + 3) // 4) + i_1)
            vj = T.axis.spatial(64, j)
            T.where(i_0 * ((n + 3) // 4) + i_1 < n)
            Y[vi, vj] = X[vi, vj] * T.float32(2)
""",
    )
    run_scale(sch)


def test_split_in_three_and_by_one():
    sch = wb.Schedule(wb.parse(SCALE))
    i, _ = sch.get_loops("Y")
    a, b, c = sch.split(i, factors=[None, 2, 8])
    assert "T.grid((n + 15) // 16, 2, 8, 64)" in str(sch.func)
    assert "T.where(i_0 * 16 + i_1 * 8 + i_2 < n)" in str(sch.func)
    run_scale(sch)
    sch = wb.Schedule(wb.parse(SCALE))
    i, _ = sch.get_loops("Y")
    sch.split(i, factors=[None, 1])  # the outer is the whole extent: no predicate
    assert "T.grid(n, 1, 64)" in str(sch.func) and "T.where" not in str(sch.func)
    run_scale(sch)


def test_vectorized_tail_of_a_symbolic_split():
    sch = wb.Schedule(wb.parse(SCALE))
    i, j = sch.get_loops("Y")
    fused = sch.fuse(i, j)
    outer, inner = sch.split(fused, factors=[None, 16])
    sch.parallel(outer)
    sch.vectorize(inner)
    after(
        sch,
        """
@T.prim_func
def scale(X: T.Buffer(("n", 64), "float32"), Y: T.Buffer((n, 64), "float32")):
    n = T.int32()
    for i_j_fused_0 in T.parallel(n * 4):
        for i_j_fused_1 in T.vectorized(16):
            with T.block("Y"):
                vi = T.axis.spatial(n, i_j_fused_0 // 4)
                vj = T.axis.spatial(64, i_j_fused_0 % 4 * 16 + i_j_fused_1)
                Y[vi, vj] = X[vi, vj] * T.float32(2)
""",
    )
    run_scale(sch)


def test_vectorize_the_inner_loop_of_an_imperfect_symbolic_split():
    sch = wb.Schedule(wb.parse(SCALE))
    i, j = sch.get_loops("Y")
    sch.reorder(j, i)
    outer, inner = sch.split(i, factors=[None, 8])
    sch.vectorize(inner)
    assert "for i_1 in T.vectorized(8):" in str(sch.func) and "T.where(i_0 * 8 + i_1 < n)" in str(sch.func)
    run_scale(sch)


@pytest.mark.parametrize("kind", ["parallel", "vectorize", "unroll"])
def test_loop_kinds_keep_the_symbolic_extent(kind):
    sch = wb.Schedule(wb.parse(SCALE))
    i, _ = sch.get_loops("Y")
    getattr(sch, kind)(i)
    word = {"parallel": "parallel", "vectorize": "vectorized", "unroll": "unroll"}[kind]
    assert f"for i in T.{word}(n):" in str(sch.func)
    run_scale(sch)


def test_fuse_of_two_symbolic_loops_and_split_of_the_product():
    n, m = wb.var("n"), wb.var("m")
    X = wb.placeholder((n, m), name="X")
    f = wb.create_func([X, wb.compute((n, m), lambda i, j: X[i, j] + 1, name="Y")])
    sch = wb.Schedule(f)
    i, j = sch.get_loops("Y")
    fused = sch.fuse(i, j)
    sch.split(fused, factors=[None, 8])
    text = str(sch.func)
    assert "T.grid((m * n + 7) // 8, 8)" in text and "T.where(i_j_fused_0 * 8 + i_j_fused_1 < m * n)" in text
    kernel = wb.build(sch, target="llvm")
    for rows, cols in ((1, 1), (7, 3), (5, 33)):
        x = np.random.rand(rows, cols).astype("float32")
        y = np.empty_like(x)
        kernel(x, y)
        np.testing.assert_allclose(y, x + 1)
    check_trace_roundtrip(sch)


def test_reorder_across_a_symbolic_split():
    sch = wb.Schedule(matmul_bias())
    i, j, k = sch.get_loops("C")
    io, ii = sch.split(i, factors=[None, 8])
    sch.reorder(io, j, k, ii)
    assert "for i_0, j, k, i_1 in T.grid((n + 7) // 8, 16, 32, 8):" in str(sch.func)
    run_matmul(sch)


def test_parallel_outer_of_a_split_reduction_block():
    sch = wb.Schedule(matmul_bias())
    io, _ = sch.split(sch.get_loops("C")[0], factors=[None, 8])
    sch.parallel(io)
    _, j = sch.get_loops("D")
    sch.vectorize(j)
    run_matmul(sch)


# ---------------------------------------------------------------------------------------------
# compute_at, reverse_compute_at, cache_read, cache_write, decompose_reduction


def test_reverse_compute_at_under_a_symbolic_split_guards_the_tail():
    sch = wb.Schedule(matmul_bias())
    io, _ = sch.split(sch.get_loops("C")[0], factors=[None, 8])
    sch.reverse_compute_at("D", io)
    text = str(sch.func)
    assert "for i, j_1 in T.grid(8, 16):" in text
    assert "vi_1 = T.axis.spatial(n, i_0 * 8 + i)" in text
    assert "T.where(i_0 * 8 + i < n)" in text
    run_matmul(sch)


def test_compute_at_under_a_symbolic_split():
    sch = wb.Schedule(matmul_bias())
    io, _ = sch.split(sch.get_loops("D")[0], factors=[None, 8])
    sch.compute_at("C", io)
    text = str(sch.func)
    assert "for i, j, k in T.grid(8, 16, 32):" in text and "T.where(i_0 * 8 + i < n)" in text
    run_matmul(sch)


MM_BIAS_FUSED_ROWS = """
@T.prim_func
def mm(A: T.Buffer(("n", 32), "float32"), W: T.Buffer((32, 16), "float32"), D: T.Buffer((n, 16), "float32")):
    n = T.int32()
    C = T.alloc_buffer((n, 16), "float32")
    for i in range(n):
        for j, k in T.grid(16, 32):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * W[vk, vj]
        for j_1 in range(16):
            with T.block("D"):
                vi_1, vj_1 = T.axis.remap("SS", [i, j_1])
                D[vi_1, vj_1] = C[vi_1, vj_1] + T.float32(1)
"""


def test_reverse_compute_at_a_whole_symbolic_loop_needs_no_predicate():
    """Under ``for i in range(n)``, ``i < n`` holds: TVM 0.27 emits no ``T.where`` here, and
    neither do we (the analyzer bounds ``i`` by the loop's symbolic range)."""
    sch = wb.Schedule(matmul_bias())
    sch.reverse_compute_at("D", sch.get_loops("C")[0])
    after(sch, MM_BIAS_FUSED_ROWS)
    run_matmul(sch)


def test_compute_at_a_whole_symbolic_loop_needs_no_predicate():
    sch = wb.Schedule(matmul_bias())
    sch.compute_at("C", sch.get_loops("D")[0])
    assert "T.where" not in str(sch.func)
    assert "for j, k in T.grid(16, 32):" in str(sch.func)
    run_matmul(sch)


def test_compute_at_keeps_a_whole_symbolic_domain():
    n = wb.var("n")
    X = wb.placeholder((8, n), name="X")
    k = wb.reduce_axis(n, "k")
    T2 = wb.compute((8, n), lambda i, j: X[i, j] * 2, name="T")
    S = wb.compute((8,), lambda i: wb.sum(T2[i, k], axis=k), name="S")
    sch = wb.Schedule(wb.create_func([X, S]))
    i, _ = sch.get_loops("S")
    sch.compute_at("T", i)
    assert "for j in range(n):" in str(sch.func)
    kernel = wb.build(sch, target="llvm")
    for rows in SIZES:
        x = np.random.rand(8, rows).astype("float32")
        s = np.empty(8, "float32")
        kernel(x, s)
        np.testing.assert_allclose(s, (x * 2).sum(1), rtol=1e-5)
    check_trace_roundtrip(sch)


def test_cache_read_computed_at_a_symbolic_split():
    sch = wb.Schedule(matmul_bias())
    io, _ = sch.split(sch.get_loops("C")[0], factors=[None, 8])
    cached = sch.cache_read("C", 0, "global")
    assert 'A_global = T.alloc_buffer((n, 32), "float32")' in str(sch.func)
    sch.compute_at(cached, io)
    assert "T.where(i_0 * 8 + ax0 < n)" in str(sch.func)
    run_matmul(sch)


def test_cache_write_reverse_computed_at_a_symbolic_split():
    sch = wb.Schedule(matmul_bias())
    cached = sch.cache_write("C", 0, "global")
    io, _ = sch.split(sch.get_loops("C")[0], factors=[None, 8])
    sch.reverse_compute_at(cached, io)
    run_matmul(sch)


def test_decompose_reduction_under_a_symbolic_split():
    sch = wb.Schedule(matmul_bias())
    sch.split(sch.get_loops("C")[0], factors=[None, 8])
    _, _, _, k = sch.get_loops("C")
    sch.decompose_reduction("C", k)
    assert 'with T.block("C_init"):' in str(sch.func)
    run_matmul(sch)


def test_split_symbolic_reduction_and_compute_it_at_its_consumer():
    sch = wb.Schedule(row_sum())
    _, k = sch.get_loops("S")
    ko, _ = sch.split(k, factors=[None, 4])
    assert "T.where(k_0 * 4 + k_1 < n)" in str(sch.func)
    sch.decompose_reduction("S", ko)
    run_row_sum(sch)


def test_reduction_over_a_symbolic_domain_moves_with_compute_at():
    n = wb.var("n")
    X = wb.placeholder((8, n), name="X")
    k = wb.reduce_axis(n, "k")
    S = wb.compute((8,), lambda i: wb.sum(X[i, k], axis=k), name="S")
    Y = wb.compute((8, n), lambda i, j: X[i, j] / S[i], name="Y")
    sch = wb.Schedule(wb.create_func([X, Y]))
    _, kk = sch.get_loops("S")
    sch.split(kk, factors=[None, 4])  # reduce loops over ceildiv(n, 4) * 4 clipped to n
    i, _ = sch.get_loops("Y")
    sch.compute_at("S", i)
    assert "for k in range(n):" in str(sch.func)
    kernel = wb.build(sch, target="llvm")
    for rows in SIZES:
        x = np.random.rand(8, rows).astype("float32") + 0.5
        y = np.empty_like(x)
        kernel(x, y)
        np.testing.assert_allclose(y, x / x.sum(1, keepdims=True), rtol=1e-5)
    check_trace_roundtrip(sch)


# ---------------------------------------------------------------------------------------------
# what is refused, and why


@pytest.mark.parametrize(
    "primitive, message",
    [
        (
            lambda s, i: s.split(i, factors=[8, 4]),
            r"factors \[8, 4\]: constant factors cannot be shown to cover",
        ),
        (lambda s, i: s.split(i, factors=[None, None, 4]), "only one factor may be None"),
        (lambda s, i: s.split(i, factors=[None, 0]), "factor 1 is 0"),
        (
            lambda s, i: s.sample_perfect_tile(i, n=2),
            "extent n is not known until the kernel is called: split by a constant factor.*shape_hint",
        ),
        (lambda s, i: s.bind(i, "blockIdx.x"), "thread extents are launch dimensions fixed"),
    ],
)
def test_refusals_say_why_and_change_nothing(primitive, message):
    sch = wb.Schedule(wb.parse(SCALE))
    before = str(sch.func)
    i, _ = sch.get_loops("Y")
    with pytest.raises(wb.ScheduleError, match=message):
        primitive(sch, i)
    assert str(sch.func) == before


def test_rfactor_of_a_symbolic_loop_is_refused():
    sch = wb.Schedule(row_sum())
    _, k = sch.get_loops("S")
    ko, ki = sch.split(k, factors=[None, 4])
    before = str(sch.func)
    with pytest.raises(wb.ScheduleError, match=r"extent \(n \+ 3\) // 4, not a constant: the rfactor buffer"):
        sch.rfactor(ko, 0)
    # the inner loop's partial sums for k_1 >= n would never be initialised when n < 4
    with pytest.raises(wb.ScheduleError, match="is false on the first reduce iteration"):
        sch.rfactor(ki, 0)
    assert str(sch.func) == before


def test_reorder_with_a_unit_loop_beside_the_symbolic_outer_loop():
    """What a tile drawn at a hinted size gives: [1, 1, 8] at n = 8 becomes [None, 1, 8], so i_0
    and the unit loop i_1 both have coefficient 8 in the binding."""
    sch = wb.Schedule(matmul_bias())
    i, j, k = sch.get_loops("C")
    i0, i1, i2 = sch.split(i, factors=[None, 1, 8])
    sch.reorder(i0, j, i1, k, i2)
    assert "for i_0, j, i_1, k, i_2 in T.grid((n + 7) // 8, 16, 1, 32, 8):" in str(sch.func)
    run_matmul(sch)
