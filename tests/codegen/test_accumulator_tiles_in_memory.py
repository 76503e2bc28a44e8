"""A tile of accumulators larger than the register file stays in memory.

TVM's 17th-best C1D record (records_zen4_b) accumulates a 32 x 64 float tile (``cache_write``
moved under the parallel loop, 8 KB once compacted) under fully unrolled tile loops. On the
stack, LLVM's SROA split it into 128 vector values live across the whole reduction loop, which
the register allocator spilled ~700 times per iteration (2x slower than TVM's build). Buffers
over 1 KB are now heap-allocated, as TVM's are (its workspace above ``kMaxStackAlloca``), and
stay in memory. Properties of the generated IR for AVX2 (znver3) and AVX-512 (znver4) targets,
which this host may not have; numerics on this host.
"""

import re

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

TARGETS = ["llvm -mcpu=znver3", "llvm -mcpu=znver4"]


def tiled(rows: int, cols: int = 64, n: int = 64, k: int = 16) -> wb.Schedule:
    """``C = A @ B`` in ``rows x cols`` tiles accumulated in a cache_write buffer (compacted to
    the tile), the tile loops unrolled and the innermost 16 columns vectorized."""
    A = wb.placeholder((n, k), "float32", name="A")
    B = wb.placeholder((k, n), "float32", name="B")
    r = wb.reduce_axis(k, name="r")
    C = wb.compute((n, n), lambda i, j: wb.sum(A[i, r] * B[r, j], axis=r), name="C")
    sch = wb.Schedule(wb.create_func([A, B, C], name="tile"))
    blk = sch.get_block("C")
    i, j, kk = sch.get_loops(blk)
    io, ii = sch.split(i, [None, rows])
    jo, jt, jv = sch.split(j, [None, cols // 16, 16])
    sch.reorder(io, jo, kk, ii, jt, jv)
    cw = sch.cache_write(blk, 0, "global")
    sch.reverse_compute_at(cw, jo)
    for loop in (ii, jt):
        sch.unroll(loop)
    sch.vectorize(jv)
    sch.decompose_reduction(blk, kk)
    return sch


def vector_phis(ir: str) -> int:
    return len(re.findall(r"= phi <\d+ x float>", ir))


@pytest.mark.parametrize("target", TARGETS)
def test_a_large_tile_is_on_the_heap_and_not_promoted(target):
    """32 x 64 floats (8 KB): heap-allocated, and not 128 loop-carried vectors (before: an
    ``alloca [2048 x float]`` and 128 ``phi <16 x float>`` in the reduction loop). Where the
    reduction loop is small enough, LLVM's LICM still keeps a heap tile in registers (as it
    does TVM's); this one is not."""
    ir = wb.build(tiled(32), target).source("llvm")
    assert "alloca [2048 x float]" not in ir
    assert re.search(r"@aligned_alloc\(i64 64, i64 8192\)", ir)
    assert vector_phis(ir) == 0, vector_phis(ir)


@pytest.mark.parametrize("target", TARGETS)
def test_a_tile_that_fits_the_registers_stays_promoted(target):
    """4 x 64 floats (1 KB): on the stack, its 16 vectors carried in registers."""
    ir = wb.build(tiled(4), target).source("llvm")
    assert "aligned_alloc" not in ir
    assert vector_phis(ir) >= 16, vector_phis(ir)


def test_a_heap_tile_matches_numpy():
    sch = tiled(32)
    check_trace_roundtrip(sch)
    rng = np.random.default_rng(0)
    a, b = (wb.aligned(rng.standard_normal(s).astype("float32")) for s in ((64, 16), (16, 64)))
    c = wb.aligned(np.full((64, 64), np.nan, "float32"))
    wb.build(sch, "llvm -num-cores=2")(a, b, c)
    np.testing.assert_allclose(c, a.astype("float64") @ b.astype("float64"), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_a_stage_buffer_at_function_level_stays_on_the_stack(target):
    """A whole stage's 32 KB buffer (allocated outside every loop) stays on the stack: the 1 KB
    bound is for tiles; softmax's rfactor buffers on the heap ran 1.4-2.3x slower."""
    A = wb.placeholder((64, 128), "float32", name="A")
    B = wb.compute((64, 128), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((64, 128), lambda i, j: B[i, j] + 1.0, name="C")
    sch = wb.Schedule(wb.create_func([A, C], name="stages"))
    ir = wb.build(sch, target).source("llvm")
    assert "alloca [8192 x float]" in ir
    assert "aligned_alloc" not in ir
    a = wb.aligned(np.random.default_rng(0).standard_normal((64, 128)).astype("float32"))
    c = wb.aligned(np.zeros((64, 128), "float32"))
    wb.build(sch, "llvm")(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("target, on_stack", [("llvm -mcpu=znver4", True), ("llvm -mcpu=znver3", False)])
def test_a_tile_that_fills_the_avx512_registers_stays_on_the_stack(target, on_stack):
    """7 x 64 floats (1792 B, 28 zmm: the default ResNet conv schedule's accumulators) fit
    AVX-512's 32 registers: on the stack there, and promoted; with AVX2's 16 ymm they cannot,
    and the 1 KB bound puts them on the heap."""
    ir = wb.build(tiled(7), target).source("llvm")
    assert ("@aligned_alloc(i64 64, i64 1792)" in ir) == (not on_stack)
    if on_stack:  # promoted: its 28 vectors carried in registers across the reduction
        assert vector_phis(ir) >= 28, vector_phis(ir)
