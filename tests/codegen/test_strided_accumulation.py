"""LLVM's loop vectorizer is kept off loops where it would vectorize a float accumulation with
gathers, so the tile's spatial copies are vectorized side by side as in TVM's build.

Two of TVM's records (anchor records_zen4_b) with no vectorize annotation on the tile:

* C1D rank 7: ``l_2`` (8) around ``co_2`` (8, contiguous), ``rc_1`` (4), ``l_3`` (2); LLVM fully
  unrolled the inner loops and vectorized ``l_2``, gathering the input and gathering/scattering
  the accumulators (stride 16) -- 6.8x slower than TVM's build, which vectorizes ``co_2``;
* C2D rank 25: a 7 x 3 reduction (``rh_1``, ``rc_1``) around 8 unrolled ``w`` copies; with our
  ``reassoc`` flags LLVM vectorized the reduction over ``rh_1`` (7 of 8 lanes, masked gathers,
  horizontal sums) -- 5.7x slower than TVM's build, where SLP vectorizes the 8 copies.

IR properties, not timings; compile-only kernels for CPUs this host may lack.
"""

import re
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

DATA = Path(__file__).resolve().parent.parent / "data" / "tvm"
RECORDS = {"C1D": "c1d_rank7_zen4.trace", "C2D": "c2d_rank25_zen4.trace"}


def record(name: str) -> wb.Schedule:
    return wb.Schedule.from_python((DATA / RECORDS[name]).read_text(), wb.workloads.get(name))


def count(ir: str, pattern: str) -> int:
    return len(re.findall(pattern, ir))


def test_c1d_accumulators_are_not_gathered():
    """AVX-512 (cheap gathers in LLVM's cost model): no gather, no scatter (before: 73 and 49)."""
    ir = wb.build(record("C1D"), "llvm -mcpu=znver4").source("llvm")
    assert count(ir, r"@llvm\.masked\.gather\.") == 0
    assert count(ir, r"@llvm\.masked\.scatter\.") == 0
    assert count(ir, r"fmul[^<]*<(8|16) x float>") > 0


@pytest.mark.parametrize("target", ["llvm -mcpu=znver3", "llvm -mcpu=znver4"])
def test_c2d_reduction_is_not_vectorized_across_its_iterations(target):
    """No horizontal sum and no partly masked gather (before, on AVX-512: 17 and 55); the 7 x 3 x 2
    products of each tile row are full 8-lane vector operations."""
    ir = wb.build(record("C2D"), target).source("llvm")
    assert count(ir, r"vector\.reduce\.fadd") == 0
    assert count(ir, r"masked\.gather[^(]*\([^)]*i1 false") == 0
    if target.endswith("znver4"):
        assert count(ir, r"fmul[^<]*<8 x float>") >= 7 * 3 * 2


def loop_vectorize_metadata(sch: wb.Schedule) -> int:
    return wb.build(sch, "llvm").source("llvm-raw").count('"llvm.loop.vectorize.enable", i1 0')


def reduction(strided: bool) -> wb.Schedule:
    """``C[i] = sum_k A[i, k]`` (k contiguous) or ``C[i] = sum_k A[k, i]`` (k strided)."""
    A = wb.placeholder((32, 32), "float32", name="A")
    k = wb.reduce_axis(32, name="k")
    C = wb.compute((32,), lambda i: wb.sum((A[k, i] if strided else A[i, k]), axis=k), name="C")
    return wb.Schedule(wb.create_func([A, C], name="rowsum"))


@pytest.mark.parametrize("strided", [False, True])
def test_only_strided_reductions_lose_the_loop_vectorizer(strided):
    """A contiguous float reduction (softmax's, a norm's) keeps LLVM's loop vectorizer; one that
    would gather its reads does not."""
    assert loop_vectorize_metadata(reduction(strided)) == (1 if strided else 0)
    a = np.random.default_rng(4).uniform(-1, 1, (32, 32)).astype("float32")
    c = np.full(32, np.nan, "float32")
    wb.build(reduction(strided), "llvm")(a, c)
    np.testing.assert_allclose(c, a.sum(axis=0 if strided else 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", RECORDS)
def test_records_numerics_and_trace(name):
    sch = record(name)
    check_trace_roundtrip(sch)
    args = [wb.aligned(a) for a in wb.workloads.random_args(name, seed=7)]
    args[-1].fill(np.nan)
    wb.build(sch, "llvm")(*args)
    want = [wb.aligned(a) for a in wb.workloads.random_args(name, seed=7)]
    wb.build(wb.workloads.get(name), "llvm")(*want)
    np.testing.assert_allclose(args[-1], want[-1], rtol=1e-4, atol=1e-4)
