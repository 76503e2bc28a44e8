"""A vector loop reading at ``v % c`` or ``v // c`` with ``c`` below the lanes (``W[f % 4]`` by 16
AVX-512 lanes) loads the ``c`` (or ``lanes / c``) contiguous elements once and shuffles them into
the lanes' repeating pattern, as TVM's build does (its vectorizer scalarizes such an index per
lane at constant offsets and LLVM merges the loads); it was a gather, one load per lane
(vgatherdps on AVX-512, scalar loads and inserts on AVX2). The split of
tests/codegen/test_vector_divisor_split.py covers divisors of at least half a machine vector.

Properties of the emitted IR for AVX2 (znver3) and AVX-512 (znver4) targets this host may not
have (compile-only kernels still give their IR), and numerics on this host.
"""

import re

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

TARGETS = ["llvm -mcpu=znver3", "llvm -mcpu=znver4"]


def periodic(c: int, dtype: str, n: int, offset: int = 0) -> wb.Schedule:
    """``B[k, f] = A[k, f] * W[(f + offset) % c] + S[k, (f + offset) // c]``, f vectorized over n."""
    A = wb.placeholder((3, n), dtype, name="A")
    W = wb.placeholder((c,), dtype, name="W")
    S = wb.placeholder((3, (n + offset) // c + 1), dtype, name="S")
    B = wb.compute((3, n), lambda k, f: A[k, f] * W[(f + offset) % c] + S[k, (f + offset) // c], name="B")
    sch = wb.Schedule(wb.create_func([A, W, S, B], name=f"periodic{c}"))
    sch.vectorize(sch.get_loops(sch.get_block("B"))[1])
    return sch


def reference(c: int, dtype: str, n: int, offset: int = 0, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((3, n)) * 8).astype(dtype)
    w = (rng.standard_normal(c) * 8).astype(dtype)
    s = (rng.standard_normal((3, (n + offset) // c + 1)) * 8).astype(dtype)
    f = np.arange(n)
    return [a, w, s], (a * w[(f + offset) % c] + s[:, (f + offset) // c]).astype(dtype)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    "c, dtype, n, offset", [(4, "float32", 16, 0), (4, "float32", 20, 3), (2, "float64", 16, 1)]
)
def test_small_divisors_are_a_load_and_a_shuffle(target, c, dtype, n, offset):
    ir = wb.build(periodic(c, dtype, n, offset), target).source("llvm")
    assert "masked.gather" not in ir, target
    assert "shufflevector" in ir
    elem = {"float32": "float", "float64": "double"}[dtype]
    # W's c elements loaded as one short vector (not c scalars into a gather's pointers)
    assert re.search(rf"= load <{c} x {elem}>", ir) or re.search(rf"= load <\d+ x {elem}>", ir), ir


@pytest.mark.parametrize("target", TARGETS)
def test_a_dividend_off_the_block_keeps_the_gather(target):
    """``(f + k) % 4`` with k an outer loop: lane 0's remainder changes with k, so the lanes'
    pattern is not a constant; still computed right (test below)."""
    assert "masked.gather" in wb.build(shifted(), target).source("llvm")


def shifted() -> wb.Schedule:
    A = wb.placeholder((3, 16), "float32", name="A")
    W = wb.placeholder((4,), "float32", name="W")
    B = wb.compute((3, 16), lambda k, f: A[k, f] * W[(f + k) % 4], name="B")
    sch = wb.Schedule(wb.create_func([A, W, B], name="shifted"))
    sch.vectorize(sch.get_loops(sch.get_block("B"))[1])
    return sch


def test_shifted_dividend_matches_numpy():
    rng = np.random.default_rng(1)
    a, w = rng.standard_normal((3, 16)).astype("float32"), rng.standard_normal(4).astype("float32")
    k, f = np.meshgrid(np.arange(3), np.arange(16), indexing="ij")
    out = np.zeros((3, 16), "float32")
    wb.build(shifted(), "llvm")(a, w, out)
    np.testing.assert_allclose(out, a * w[(f + k) % 4], rtol=1e-6)


@pytest.mark.parametrize(
    "c, dtype, n, offset",
    [(4, "float32", 16, 0), (4, "float32", 20, 3), (2, "float64", 16, 1), (3, "int32", 24, 2)],
)
def test_small_divisors_match_numpy(c, dtype, n, offset):
    """Including the checked build (every access inside its buffer)."""
    sch = periodic(c, dtype, n, offset)
    check_trace_roundtrip(sch)
    args, want = reference(c, dtype, n, offset)
    for check in (False, True):
        out = np.zeros((3, n), dtype)
        wb.build(sch, "llvm", check_bounds=check)(*args, out)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
