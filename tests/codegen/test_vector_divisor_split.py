"""A vectorized loop whose indices use ``v // c`` and ``v % c`` is emitted in chunks of ``c`` lanes
(or a divisor of ``c``), within which ``v // c`` is one scalar and ``v % c`` the lane plus a
scalar: every access is a contiguous vector, not a gather.

TVM's 11th-best DEP record on Zen 3 (anchor records_zen3, rank 10) vectorizes the fused
``w_3, c_3`` loop (2 pixels x 32 channels, 64 lanes) and reads the weights at ``c % 32``: lanes
``0..31, 0..31``. As one 64-lane vector that was a gather per weight (scalar loads and inserts on
AVX2): 7x slower than TVM's build of the same record, whose 64-lane weights are one contiguous
32-float load and a shuffle.

Properties of the generated IR for AVX2 (znver3) and AVX-512 (znver4) targets this host may not
have (compile-only kernels still give their IR), and numerics on this host.
"""

import re
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip
from codegenhelpers import check_dep_record

TARGETS = ["llvm -mcpu=znver3", "llvm -mcpu=znver4"]

#: the record as ``workbench import-tvm`` converts it (tiles h = [14, 4, 1, 2], w = [2, 14, 2, 2],
#: c = [1, 1, 1, 32]; the innermost w and c fused and vectorized: 64 lanes)
RECORD = (Path(__file__).resolve().parent.parent / "data" / "tvm" / "dep_rank10_zen3.trace").read_text()


def fused(c: int, dtype: str, rows: int = 2, offset: int = 0) -> wb.Schedule:
    """``B[n, f] = A[n, f // c, f % c] * W[(f + offset) % c] + S[n, (f + offset) // c]`` with
    ``f`` over ``rows * c`` lanes, vectorized: A contiguous along f, W periodic, S constant per
    block of c lanes."""
    A = wb.placeholder((3, rows, c), dtype, name="A")
    W = wb.placeholder((c,), dtype, name="W")
    S = wb.placeholder((3, rows + 1), dtype, name="S")
    B = wb.compute(
        (3, rows * c),
        lambda n, f: A[n, f // c, f % c] * W[(f + offset) % c] + S[n, (f + offset) // c],
        name="B",
    )
    sch = wb.Schedule(wb.create_func([A, W, S, B], name=f"fused{c}"))
    sch.vectorize(sch.get_loops(sch.get_block("B"))[1])
    return sch


def reference(c: int, dtype: str, rows: int = 2, offset: int = 0, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((3, rows, c)) * 8).astype(dtype)
    w = (rng.standard_normal(c) * 8).astype(dtype)
    s = (rng.standard_normal((3, rows + 1)) * 8).astype(dtype)
    f = np.arange(rows * c)
    want = a.reshape(3, rows * c) * w[(f + offset) % c] + s[:, (f + offset) // c]
    return [a, w, s], want.astype(dtype)


def gathers(ir: str) -> list[str]:
    return re.findall(r"masked\.gather", ir)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("c", [8, 32])
def test_div_mod_indices_are_contiguous_vectors(target, dtype, c):
    """No gather, and W (read at ``f % c``) is loaded as contiguous vectors."""
    ir = wb.build(fused(c, dtype), target).source("llvm")
    assert not gathers(ir), target
    elem = {"float32": "float", "float64": "double", "int32": "i32"}[dtype]
    assert re.findall(rf"= load <\d+ x {elem}>", ir)


@pytest.mark.parametrize("target", TARGETS)
def test_an_offset_dividend_splits_at_its_alignment(target):
    """``(f + 8) % 32`` stays in one block of 32 over chunks of 8 lanes starting at multiples
    of 8: no gather."""
    assert not gathers(wb.build(fused(32, "float32", offset=8), target).source("llvm"))


@pytest.mark.parametrize("target", TARGETS)
def test_dep_record_reads_weights_contiguously(target):
    """The record: no gather (before: 72 of 8 floats on znver3, 9 of 64 on znver4)."""
    sch = wb.Schedule.from_python(RECORD, wb.workloads.get("DEP"))
    assert not gathers(wb.build(sch, target).source("llvm"))


@pytest.mark.parametrize(
    "c, dtype, rows, offset",
    [
        (32, "float32", 2, 0),
        (8, "float64", 4, 0),
        (8, "int32", 3, 0),
        (32, "float32", 2, 8),
        (4, "float32", 5, 3),
    ],
)
def test_split_loops_match_numpy(c, dtype, rows, offset):
    """Including 5 * 4 lanes at ``(f + 3) % 4`` (no usable chunk: left as it was) and the
    checked build (every access inside its buffer)."""
    sch = fused(c, dtype, rows, offset)
    check_trace_roundtrip(sch)
    args, want = reference(c, dtype, rows, offset)
    for check in (False, True):
        out = np.full((3, rows * c), 0, dtype)
        wb.build(sch, "llvm", check_bounds=check)(*args, out)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)  # an FMA rounds once


def test_dep_record_numerics():
    sch = wb.Schedule.from_python(RECORD, wb.workloads.get("DEP"))
    check_dep_record(sch)


@pytest.mark.parametrize("target", TARGETS)
def test_a_loop_already_contiguous_is_not_split(target):
    """``B[f] = A[f // 32, f % 32] + 1`` over 64 lanes walks A contiguously (the pair of adjacent
    dimensions is ``f``): emitted as the same vectors as ``B[f] = A[f] + 1``, not in chunks of 32."""

    def loads(shape, index):
        A = wb.placeholder(shape, "float32", name="A")
        B = wb.compute((64,), lambda f: A[index(f)] + 1.0, name="B")
        sch = wb.Schedule(wb.create_func([A, B], name="copy"))
        sch.vectorize(sch.get_loops(sch.get_block("B"))[0])
        return re.findall(r"= load <(\d+) x float>", wb.build(sch, target).source("llvm-raw"))

    flat = loads((64,), lambda f: (f,))
    assert loads((2, 32), lambda f: (f // 32, f % 32)) == flat and "32" not in flat
