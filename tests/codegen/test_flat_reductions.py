"""A float sum over two nested serial loops that read memory contiguously across both
(``for i, j: C[x] += A[.., i, j] ** 2``, a norm's unscheduled or unrfactored sum) is emitted as one
loop: LLVM's vectorizer then keeps four vector accumulators over the whole matrix and reduces them
to a scalar once, after the loop, where the nest reduced a vector per row.

Properties of the generated IR for AVX2 (znver3) and AVX-512 (znver4) targets this host may not
have (compile-only kernels still give their IR), and numerics on this host.
"""

import re

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

TARGETS = {"llvm -mcpu=znver3": 8, "llvm -mcpu=znver4": 16}  # float lanes of a register


def plain_sum(m=256, n=256, transposed=False) -> wb.Schedule:
    """``D[0] = sqrt(sum_ij A[0, i, j]^2)`` (NRM's loops, or A read as ``A[0, j, i]``), its
    initialization decomposed out of the nest as the tuner's postprocessing does."""
    A = wb.placeholder((1, n, m) if transposed else (1, m, n), "float32", name="A")
    i, j = wb.reduce_axis(m, name="i"), wb.reduce_axis(n, name="j")
    a = (lambda b: A[b, j, i]) if transposed else (lambda b: A[b, i, j])
    C = wb.compute((1,), lambda b: wb.sum(a(b) * a(b), axis=[i, j]), name="C")
    D = wb.compute((1,), lambda b: wb.sqrt(C[b]), name="D")
    sch = wb.Schedule(wb.create_func([A, D], name="norm"))
    c = sch.get_block("C")
    sch.decompose_reduction(c, sch.get_loops(c)[1])
    return sch


def blocks(ir: str) -> dict[str, str]:
    """The kernel function's basic blocks by label (the packed wrapper and declarations dropped)."""
    body = ir.split("define ", 2)[1].split("\n}\n", 1)[0]
    parts = re.split(r"^([\w.]+):.*$", body, flags=re.M)
    return {"entry": parts[0], **dict(zip(parts[1::2], parts[2::2]))}


def loops(ir: str) -> dict[str, str]:
    """Blocks that branch back to themselves (every loop here is a single block)."""
    return {k: v for k, v in blocks(ir).items() if re.search(rf"label %{re.escape(k)}\b", v)}


@pytest.mark.parametrize("target, lanes", TARGETS.items())
def test_a_contiguous_nest_is_one_loop_with_four_accumulators(target, lanes):
    sch = plain_sum()
    ir = wb.build(sch, target).source("llvm")
    (body,) = loops(ir).values()  # one loop for the 256 x 256 elements
    assert len(re.findall(rf"= phi <{lanes} x float>", body)) == 4, body
    assert len(re.findall(rf"= load <{lanes} x float>", body)) == 4, body
    assert "vector.reduce" not in body and "vector.reduce.fadd" in ir  # once, after the loop
    assert "llvm.loop.unroll.disable" in ir
    check_trace_roundtrip(sch)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kw", [dict(transposed=True), dict(n=24)])
def test_strided_or_odd_rows_keep_the_nest(target, kw):
    """Read across rows (the flat index would not be contiguous), or rows of a length that is
    not a power of two (the indices would need a division): two loops, as before."""
    ir = wb.build(plain_sum(**kw), target).source("llvm")
    assert "llvm.loop.unroll.disable" not in ir


@pytest.mark.parametrize("kw", [dict(), dict(m=3, n=16), dict(n=24), dict(m=8, n=32, transposed=True)])
def test_sums_match_numpy(kw):
    sch = plain_sum(**kw)
    kernel = wb.build(sch, "llvm")
    m, n = kw.get("m", 256), kw.get("n", 256)
    shape = (1, n, m) if kw.get("transposed") else (1, m, n)
    a = wb.aligned(np.random.default_rng(0).standard_normal(shape).astype("float32"))
    d = wb.aligned(np.full(1, np.nan, "float32"))
    kernel(a, d)
    expected = np.sqrt(np.sum(a.astype(np.float64) ** 2))
    np.testing.assert_allclose(d[0], expected, rtol=1e-5)


def rfactor_sum(lanes: int = 64) -> wb.Schedule:
    """NRM as MetaSchedule's rfactor sketch leaves it: ``lanes`` partial sums ``C_rf[v]`` over a
    vectorized ``v``, each adding every ``lanes``-th element in a serial loop, then summed."""
    sch = wb.Schedule(wb.workloads.get("NRM"))
    c = sch.get_block("C")
    _, i, j = sch.get_loops(c)
    _, inner = sch.split(sch.fuse(i, j), [None, lanes])
    rf = sch.rfactor(inner, factor_axis=1)
    _, serial, v = sch.get_loops(rf)
    sch.vectorize(v)
    sch.decompose_reduction(rf, serial)
    return sch


@pytest.mark.parametrize("target", TARGETS)
def test_vector_partial_sums_are_not_unrolled(target):
    """The loop adding into the vector of partial sums keeps one copy of its body (loads of
    the 64 elements per iteration, in one vector or in registers' widths), where LLVM would
    unroll it 8 times."""
    sch = rfactor_sum()
    ir = wb.build(sch, target).source("llvm")
    (body,) = (b for b in loops(ir).values() if "fadd" in b)
    assert sum(int(n) for n in re.findall(r"= load <(\d+) x float>", body)) == 64, body
    assert "llvm.loop.unroll.disable" in ir
    check_trace_roundtrip(sch)


def test_vector_partial_sums_match_numpy():
    kernel = wb.build(rfactor_sum(), "llvm")
    args = [wb.aligned(a) for a in wb.workloads.random_args("NRM")]
    kernel(*args)
    np.testing.assert_allclose(args[-1], wb.workloads.reference("NRM")(*args[:-1]), rtol=1e-5)
