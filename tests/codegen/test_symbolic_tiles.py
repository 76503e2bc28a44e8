"""A tiled matmul over a symbolic row count n, built as fast as the same schedule at a constant n.

Three things made the symbolic build of a tuned matmul 1.6-3.7x slower than the specialised one,
each checked here on the lowered IR and then numerically at sizes the tile does and does not
divide:

* the ``C_global`` write cache stayed ``(n, 256)`` in memory: the tail predicate on the init
  block (``... < n``) defeated compaction's privacy proof, and a symbolic dimension was never
  compacted. Now a guard that only skips rows past the buffer's end does not count against the
  proof, and the symbolic dimension shrinks to its tile's constant extent (as TVM compacts it);
* every element of every tile tested ``row < n`` in the innermost loops: the llvm build now
  versions the body of the symbolic loop (a full tile runs without tests) and hoists the tests
  of the last tile out of the loops they do not depend on (``workbench.codegen.versioning``);
* (the redundant ``T.where(i < n)`` of compute_at under ``range(n)``: see
  tests/schedule/test_symbolic_primitives.py).
"""

from __future__ import annotations

import numpy as np

import workbench as wb
from workbench.codegen import lower
from workbench.codegen.versioning import version_tails
from workbench.ir.functor import pre_order
from workbench.ir.stmt import BufferStore, For, ForKind, IfThenElse
from workbench.testing import check_trace_roundtrip
from workbench.tune.symbolic import specialize

from codegenhelpers import allocations

SIZES = (1, 7, 33, 128, 130)
K = COLS = 32


def matmul() -> wb.PrimFunc:
    n = wb.var("n")
    A = wb.placeholder((n, K), name="A")
    W = wb.placeholder((K, COLS), name="W")
    k = wb.reduce_axis(K, "k")
    C = wb.compute((n, COLS), lambda i, j: wb.sum(A[i, k] * W[k, j], axis=k), name="C")
    return wb.create_func([A, W, C], name="mm")


def tuned() -> wb.Schedule:
    """The shape of the schedule bench/symbolic.py's tuner picks (SSRSRS tiles, a global write
    cache reverse-computed at the outer tile, fused parallel loop, vectorized lanes, unrolled
    inner tiles, the reduction decomposed), at a size that keeps the test fast: tiles of 32
    rows by 16 columns."""
    sch = wb.Schedule(matmul())
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1, i2, i3 = sch.split(i, [None, 4, 8, 1])
    j0, j1, j2, j3 = sch.split(j, [2, 2, 4, 2])
    k0, k1 = sch.split(k, [16, 2])
    sch.reorder(i0, j0, i1, j1, k0, i2, j2, k1, i3, j3)
    cache = sch.cache_write(block, 0, "global")
    sch.reverse_compute_at(cache, j0)
    sch.parallel(sch.fuse(i0, j0))
    sch.vectorize(j3)
    sch.vectorize(sch.get_loops(cache)[-1])
    for loop in (i2, j2, k1):
        sch.unroll(loop)
    sch.decompose_reduction(block, k0)
    return sch


def check_numbers(sch: wb.Schedule, sizes=SIZES) -> None:
    kernel = wb.build(sch, target="llvm")
    rng = np.random.default_rng(0)
    w = rng.random((K, COLS), "float32")
    for n in sizes:
        a = rng.random((n, K), "float32")
        c = np.full((n, COLS), np.nan, "float32")
        kernel(a, w, c)
        np.testing.assert_allclose(c, a @ w, rtol=1e-5, err_msg=f"n={n}")


def ifs_inside_vectorized_loops(stmt) -> int:
    return sum(
        1
        for loop in pre_order(stmt)
        if isinstance(loop, For) and loop.kind == ForKind.VECTORIZED
        for s in pre_order(loop.body)
        if isinstance(s, IfThenElse)
    )


# ---------------------------------------------------------------------------------------------
# compaction


def test_symbolic_write_cache_is_compacted_to_its_tile_in_the_parallel_loop():
    sch = tuned()
    buf, loop = allocations(lower(sch.func))["C_global"]
    assert buf.shape == (32, 16) and loop == "i_0_j_0_fused"
    check_trace_roundtrip(sch)


SCALE_TILES = """
@T.prim_func
def scale(X: T.Buffer(("n", 16), "float32"), Y: T.Buffer((n, 16), "float32")):
    n = T.int32()
    Tmp = T.alloc_buffer((n, 16), "float32")
    for i_0 in range((n + 7) // 8):
        for i_1, j in T.grid(8, 16):
            with T.block("Tmp"):
                vi = T.axis.spatial(n, i_0 * 8 + i_1)
                vj = T.axis.spatial(16, j)
                T.where(i_0 * 8 + i_1 < LIMIT)
                Tmp[vi, vj] = X[vi, vj] * T.float32(2)
        for ax0, ax1 in T.grid(8, 16):
            with T.block("Y"):
                vi = T.axis.spatial(n, i_0 * 8 + ax0)
                vj = T.axis.spatial(16, ax1)
                T.where(i_0 * 8 + ax0 < n)
                Y[vi, vj] = Tmp[vi, vj]
"""


def test_a_tail_predicate_on_the_producer_leaves_the_buffer_private():
    func = wb.parse(SCALE_TILES.replace("LIMIT", "n"))
    buf, loop = allocations(lower(func))["Tmp"]
    assert buf.shape == (8, 16) and loop == "i_0"
    kernel = wb.build(func, target="llvm")
    for n in SIZES:
        x = np.random.rand(n, 16).astype("float32")
        y = np.empty_like(x)
        kernel(x, y)
        np.testing.assert_allclose(y, x * 2)


def test_a_predicate_that_skips_an_element_in_bounds_keeps_the_buffer_whole():
    """Row n - 1 is read but never written in its tile: the values cross iterations (here
    uninitialised ones), so the buffer must not move into the tile loop."""
    func = wb.parse(SCALE_TILES.replace("LIMIT", "n - 1"))
    buf, loop = allocations(lower(func))["Tmp"]
    assert buf.shape[1] == 16 and not isinstance(buf.shape[0], int) and loop is None


# ---------------------------------------------------------------------------------------------
# tail versioning


def test_full_tiles_run_without_tail_tests():
    low = lower(tuned().func, version_tails=True)
    (par,) = [s for s in pre_order(low.body) if isinstance(s, For) and s.kind == ForKind.PARALLEL]
    version = par.body
    assert isinstance(version, IfThenElse)
    assert str(version.condition) == "i_0_j_0_fused // 2 * 32 + 31 < n"  # the tile's last row exists
    assert not any(isinstance(s, IfThenElse) for s in pre_order(version.then_case))
    # the last tile tests once per row, not once per element: no test in a vectorized loop,
    # and the rows past n are skipped whole (a test outside the k loop)
    assert ifs_inside_vectorized_loops(version.else_case) == 0
    k_loops = [s for s in pre_order(version.else_case) if isinstance(s, For) and s.loop_var.name == "k_0"]
    assert k_loops and not any(isinstance(s, IfThenElse) for s in [k_loops[0].body])


def test_lowering_without_versioning_is_unchanged():
    func = tuned().func
    low = lower(func)
    assert ifs_inside_vectorized_loops(low.body) > 0  # the block predicates, where TVM keeps them
    assert version_tails(low) is not low


def test_a_static_function_is_not_versioned():
    """The same trace at a constant n = 130 keeps its tests where they are (static code paths are
    unchanged)."""
    spec = wb.Schedule(specialize(matmul(), {"n": 130}))
    tuned().trace.apply_to_schedule(spec)
    low = lower(spec.func)
    assert version_tails(low) is low


def test_versioned_split_and_vectorized_tail():
    sch = wb.Schedule(wb.parse(SCALE_TILES.replace("LIMIT", "n")))
    sch.vectorize(sch.get_loops("Y")[-1])
    sch.unroll(sch.get_loops("Tmp")[1])
    kernel = wb.build(sch, target="llvm")
    for n in (1, 7, 8, 9, 33, 128):
        x = np.random.rand(n, 16).astype("float32")
        y = np.empty_like(x)
        kernel(x, y)
        np.testing.assert_allclose(y, x * 2)
    check_trace_roundtrip(sch)


def test_tuned_schedule_numerics_with_tails():
    check_numbers(tuned(), sizes=SIZES + (31, 32, 64, 100))


def test_stores_of_the_fast_version_are_the_unguarded_ones():
    """The fast copy holds the same stores as the original, only without their tests."""
    low = lower(tuned().func, version_tails=True)
    plain = lower(tuned().func)
    (par,) = [s for s in pre_order(low.body) if isinstance(s, For) and s.kind == ForKind.PARALLEL]
    count = sum(isinstance(s, BufferStore) for s in pre_order(plain.body))
    assert sum(isinstance(s, BufferStore) for s in pre_order(par.body.then_case)) == count
    assert sum(isinstance(s, BufferStore) for s in pre_order(par.body.else_case)) == count


def test_last_tile_tests_once_per_row():
    """In the last tile, the tail test moves out of the column loop: one test per row."""
    func = wb.parse(SCALE_TILES.replace("LIMIT", "n"))
    low = lower(func, version_tails=True)
    (loop,) = [s for s in pre_order(low.body) if isinstance(s, For) and s.loop_var.name == "i_0"]
    assert isinstance(loop.body, IfThenElse) and str(loop.body.condition) == "i_0 * 8 + 7 < n"
    tail = loop.body.else_case
    rows = [s for s in pre_order(tail) if isinstance(s, For) and s.loop_var.name in ("i_1", "ax0")]
    assert [str(s.body.condition) for s in rows] == ["i_0 * 8 + i_1 < n", "i_0 * 8 + ax0 < n"]
    cols = [s for s in pre_order(tail) if isinstance(s, For) and s.loop_var.name in ("j", "ax1")]
    assert len(cols) == 2 and not any(isinstance(x, IfThenElse) for c in cols for x in pre_order(c))
    kernel = wb.build(func, target="llvm")
    for n in (1, 7, 8, 9, 130):
        x = np.random.rand(n, 16).astype("float32")
        y = np.empty_like(x)
        kernel(x, y)
        np.testing.assert_allclose(y, x * 2)
