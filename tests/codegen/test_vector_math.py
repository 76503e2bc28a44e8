"""Whole-register math through libmvec, and fused-loop indices recognized as contiguous.

Expectations come from the target: the libmvec symbol at the target's register width (``e``:
AVX-512, ``d``: AVX2), and only where the host's libmvec has it.
"""

import re

import numpy as np
import pytest

import workbench as wb
from workbench.codegen.llvm import vector_math
from workbench.codegen.llvm.analysis import linear_coeff
from workbench.target import Target
from workbench.ir import expr as E

TARGETS = ["llvm -mcpu=znver3", "llvm -mcpu=skylake-avx512"]


def math_func(n):
    A = wb.placeholder((3, n), "float32", name="A")
    B = wb.compute(
        (3, n), lambda i, j: wb.exp(A[i, j]) + wb.log(wb.fabs(A[i, j]) + 1.0) + wb.tanh(A[i, j]), name="B"
    )
    sch = wb.Schedule(wb.create_func([A, B], name="vmath"))
    _, j = sch.get_loops(sch.get_block("B"))
    sch.vectorize(j)
    return sch


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", [5, 16, 24, 64])
def test_vector_math_matches_numpy_at_any_lane_count(target, n):
    t = Target(target)
    kernel = wb.build(math_func(n), t)
    bits = vector_math.register_bits(t, "exp", "float32")
    used = set(re.findall(r"@(_ZGV\w+)", kernel.source("llvm")))
    if bits:
        lanes = bits // 32
        isa = {512: "e", 256: "d"}[bits]
        assert used == {f"_ZGV{isa}N{lanes}v_{f}f" for f in ("exp", "log", "tanh")}
    else:  # not runnable here, or no libmvec: LLVM's intrinsics, no vector-library call
        assert not used
    if t.cannot_run() is not None:
        return
    a = np.random.default_rng(n).uniform(-6, 6, (3, n)).astype("float32")
    b = np.zeros_like(a)
    kernel(a, b)
    np.testing.assert_allclose(b, np.exp(a) + np.log(np.abs(a) + 1) + np.tanh(a), rtol=3e-6, atol=1e-6)


def test_no_vector_library_for_scalars_or_other_targets():
    assert vector_math.register_bits(Target("llvm"), "erf", "float32") is None
    assert vector_math.register_bits(Target("llvm"), "exp", "int32") is None
    cross = Target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1")
    assert vector_math.register_bits(cross, "exp", "float32") is None


def test_fused_halves_are_contiguous():
    f = E.Var("f", "int32")
    h = E.Var("h", "int32")
    three = E.IntImm(3, "int32")
    # A[h, f // 3, f % 3] of a (n, 3, 3) buffer: 9*h + 3*(f // 3) + f % 3 == 9*h + f
    off = E.Add(
        E.Add(E.Mul(h, E.IntImm(9, "int32")), E.Mul(E.FloorDiv(f, three), three)), E.FloorMod(f, three)
    )
    assert linear_coeff(off, f) == 1
    assert linear_coeff(off, h) == 9
    # a different divisor, or the quotient alone, is not contiguous
    assert (
        linear_coeff(E.Add(E.Mul(E.FloorDiv(f, three), three), E.FloorMod(f, E.IntImm(4, "int32"))), f)
        is None
    )
    assert linear_coeff(E.FloorDiv(f, three), f) is None


def test_fused_and_vectorized_producer_compacts_and_stays_correct():
    """compute_at + fuse + vectorize of a padding stage (what TVM's C2D schedules do): the
    producer's write ``Pad[.., f // 3, f % 3]`` is recognized as dense, so its buffer moves
    under the consumer's loop at its small size, and reads are contiguous (no gathers)."""
    from workbench.codegen.lower import lower

    A = wb.placeholder((6, 6, 3), "float32", name="A")
    Pad = wb.compute(
        (8, 8, 3),
        lambda h, w, c: wb.if_then_else(wb.all_of(h >= 1, h < 7, w >= 1, w < 7), A[h - 1, w - 1, c], 0.0),
        name="Pad",
    )
    B = wb.compute((6, 6, 3), lambda h, w, c: Pad[h, w, c] + Pad[h + 2, w + 2, c], name="B")
    sch = wb.Schedule(wb.create_func([A, B], name="padded"))
    h, w, c = sch.get_loops(sch.get_block("B"))
    sch.compute_at(sch.get_block("Pad"), w)
    *_, pw, pc = sch.get_loops(sch.get_block("Pad"))
    sch.vectorize(sch.fuse(pw, pc))
    allocs = [line for line in str(lower(sch.func)).splitlines() if "T.allocate" in line]
    assert len(allocs) == 1 and "(3, 3, 3)" in allocs[0], allocs
    kernel = wb.build(sch, "llvm")
    assert "gather" not in kernel.source("llvm")
    a = np.random.default_rng(0).random((6, 6, 3), dtype="float32")
    b = np.zeros((6, 6, 3), "float32")
    kernel(a, b)
    pad = np.pad(a, ((1, 1), (1, 1), (0, 0)))
    np.testing.assert_allclose(b, pad[:6, :6] + pad[2:, 2:], rtol=1e-6)
