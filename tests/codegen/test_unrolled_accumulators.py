"""An explicitly unrolled reduction tile keeps its accumulators in registers.

TVM's 6th-best DEP record (anchor records_zen4_b, rank 5) writes each output vector of a 4x2x2x2
tile straight to the output (no cache_write) and unrolls the whole tile (``unroll_explicit``
512). Every copy of the body addresses the output with offsets like ``(f // 2 * 4 + h) * 3584 +
...`` with ``h`` a different constant. Emitted as written, InstCombine turned them into ``or``
forms that alias analysis no longer reads as "the same base plus a constant": each store might
clobber each load, so the zero initialisation was stored and loaded back and every accumulator
went through memory after each FMA (TVM's build of the same record was 3.2x faster). Offsets are
now emitted as one shared sum plus a constant per copy.

Properties of the generated code, not timings; they hold on any host (compile-only kernels).
"""

import re
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.codegen.llvm.analysis import affine_form
from workbench.ir import expr as E
from workbench.testing import check_trace_roundtrip
from codegenhelpers import check_dep_record

TARGETS = ["llvm -mcpu=znver3", "llvm -mcpu=znver4", "llvm -mcpu=znver4 -num-cores=2"]

#: the record as ``workbench import-tvm`` converts it: tiles n, h, w, c = [1,1,1,1], [28,1,4,1],
#: [1,28,2,2], [2,1,2,8] (c's innermost 8 vectorized), rh = [3, 1], rw = [1, 3]; unroll 512
RECORD = (Path(__file__).resolve().parent.parent / "data" / "tvm" / "dep_rank5_zen4.trace").read_text()


def record() -> wb.Schedule:
    return wb.Schedule.from_python(RECORD, wb.workloads.get("DEP"))


@pytest.mark.parametrize("target", TARGETS)
def test_tile_accumulators_stay_in_registers(target):
    """Per output tile (32 vectors of 8 floats): 32 stores, none of them the zero
    initialisation, and no load of the output: the 8-float loads are the 18 weights and the
    6 x 6 x 2 padded input vectors the tile reads. Before: 128 stores (32 of zeros), 198 loads."""
    ir = wb.build(record(), target).source("llvm")
    stores = re.findall(r"store <8 x float> (\S+)", ir)
    assert len(stores) == 32, len(stores)
    assert "zeroinitializer" not in stores
    assert len(re.findall(r"= load <8 x float>", ir)) == 18 + 6 * 6 * 2


def test_record_numerics_and_trace():
    sch = record()
    check_dep_record(sch, seed=5)


def test_affine_form_folds_constants_and_merges_atoms():
    i, j = E.Var("i", "int64"), E.Var("j", "int64")
    half = i // 2
    off = (half * 4 + 2) * 3584 + (j - 1) * 32 + half * 16 + 8
    terms, c = affine_form(off)
    assert c == 2 * 3584 - 32 + 8
    assert terms == [(4 * 3584 + 16, half), (32, j)]
    assert affine_form(E.IntImm(7, "int64")) == ([], 7)


@pytest.mark.parametrize("unroll", [False, True])
def test_unrolled_tile_with_offsets_matches_numpy(unroll):
    """A 4 x 8 tile of a matmul accumulated in the output, its rows ``i0 * 4 + ii`` (unrolled
    or not) and a shifted read ``A[r - 1]``: the shared-sum-plus-constant offsets address the
    same elements as the written ones."""
    n = 16
    A = wb.placeholder((n + 1, n), "float32", name="A")
    B = wb.placeholder((n, n), "float32", name="B")
    k = wb.reduce_axis(n, name="k")
    C = wb.compute((n, n), lambda r, c: wb.sum(A[r + 1, k] * B[k, c], axis=k), name="C")
    sch = wb.Schedule(wb.create_func([A, B, C], name="mm"))
    r, c, kk = sch.get_loops("C")
    r0, r1 = sch.split(r, [None, 4])
    c0, c1 = sch.split(c, [None, 8])
    sch.reorder(r0, c0, kk, r1, c1)
    if unroll:
        sch.unroll(r1)
    sch.vectorize(c1)
    a = np.random.default_rng(2).uniform(-1, 1, (n + 1, n)).astype("float32")
    b = np.random.default_rng(3).uniform(-1, 1, (n, n)).astype("float32")
    out = np.full((n, n), np.nan, dtype="float32")
    wb.build(sch, "llvm")(a, b, out)
    np.testing.assert_allclose(out, a[1:] @ b, rtol=1e-5, atol=1e-5)


#: TVM's 5th-best GMM record (records_zen4_b, rank 4): an 8 x 32 tile of Z accumulated over k in
#: a local buffer, the tile fully unrolled (unroll_explicit 512), no vectorize annotation
GMM_RECORD = (Path(__file__).resolve().parent.parent / "data" / "tvm" / "gmm_rank4_zen4.trace").read_text()


@pytest.mark.parametrize("target", ["llvm -mcpu=znver3", "llvm -mcpu=znver4"])
def test_promoted_accumulators_stay_in_register_sized_vectors(target):
    """With the tile's 256 accumulators promoted to registers, SLP bundled them into one
    ``<224 x float>`` (plus shuffles and thousands of inserts): 28x slower. Its vectors are
    capped at 16 floats; the widest left is the 32-lane write-back the schedule asks for."""
    sch = wb.Schedule.from_python(GMM_RECORD, wb.workloads.get("GMM"))
    ir = wb.build(sch, target).source("llvm")
    widths = {int(n) for n in re.findall(r"<(\d+) x float>", ir)}
    assert widths and max(widths) <= 32, sorted(widths)
    x, y, z = (wb.aligned(a) for a in wb.workloads.random_args("GMM", seed=1))
    if target.endswith("znver4"):
        return
    check_trace_roundtrip(sch)
    z.fill(np.nan)
    wb.build(sch, "llvm")(x, y, z)
    np.testing.assert_allclose(z, x.astype("float64") @ y.astype("float64"), rtol=1e-4, atol=1e-4)
