"""A padding ``Select`` inside a vectorized loop whose condition is the same for every lane (the
lanes run along the channels, the padding along the pixels) is one contiguous load and a select
per vector, and the copies of an unrolled loop whose own range decides the condition test
nothing.

TVM's 43rd DEP record (anchor records_zen4_b: channels vectorized by 4, 14 pixels unrolled, the
padding inlined) tested the padding in every unrolled copy and loaded from an address clamped
per copy; LLVM turned each select into two branches and spilled the clamped offsets: 1.6-1.76x
slower than TVM's build, which simplifies the guards of each unrolled copy, leaving the middle
pixels straight-line loads and FMAs. (A branch around the edge copies' vector loads, as TVM
emits, timed the same on that record and made C2D record 10 1.4x slower: see
``ExpressionEmitter._uniform_guard_branches``.)

Properties of the emitted IR for AVX2 (znver3) and AVX-512 (znver4) targets this host may not
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

#: the record as ``workbench import-tvm`` converts it (PadInput inlined; c vectorized by 4, the
#: 14 pixels of w_3 unrolled by the auto-unroll annotation)
RECORD = (Path(__file__).resolve().parent.parent / "data" / "tvm" / "dep_rank43_zen4b.trace").read_text()


def depthwise(h: int = 5, w: int = 6, c: int = 8, pad_rows: bool = True) -> wb.Schedule:
    """A 3x3 depthwise convolution (NHWC, padding 1 along x, and along y where ``pad_rows``),
    the padding inlined, loops ``ry, rx, y, x, ch`` with x unrolled and ch vectorized."""
    X = wb.placeholder((h, w, c), "float32", name="X")
    K = wb.placeholder((3, 3, c), "float32", name="K")
    ph = 2 if pad_rows else 0
    if pad_rows:
        guard = lambda y, x: wb.all_of(y >= 1, y < h + 1, x >= 1, x < w + 1)  # noqa: E731
    else:
        guard = lambda y, x: wb.all_of(x >= 1, x < w + 1)  # noqa: E731
    pad = wb.compute(
        (h + ph, w + 2, c),
        lambda y, x, ch: wb.if_then_else(guard(y, x), X[y - ph // 2, x - 1, ch], 0.0),
        name="pad",
    )
    ry, rx = wb.reduce_axis((0, 3), name="ry"), wb.reduce_axis((0, 3), name="rx")
    out_h = h if pad_rows else h - 2
    Y = wb.compute(
        (out_h, w, c),
        lambda y, x, ch: wb.sum(pad[y + ry, x + rx, ch] * K[ry, rx, ch], axis=[ry, rx]),
        name="Y",
    )
    sch = wb.Schedule(wb.create_func([X, K, Y], name="dep"))
    sch.compute_inline(sch.get_block("pad"))
    y, x, ch, ry_, rx_ = sch.get_loops(sch.get_block("Y"))
    sch.reorder(ry_, rx_, y, x, ch)
    sch.unroll(x)
    sch.vectorize(ch)
    return sch


def reference(h: int = 5, w: int = 6, c: int = 8, pad_rows: bool = True, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((h, w, c)).astype("float32")
    k = rng.standard_normal((3, 3, c)).astype("float32")
    p = np.pad(x.astype("float64"), ((1, 1) if pad_rows else (0, 0), (1, 1), (0, 0)))
    out_h = h if pad_rows else h - 2
    want = sum(p[i : i + out_h, j : j + w] * k[i, j] for i in range(3) for j in range(3))
    return [x, k], want


def clamps(raw: str) -> list[str]:
    """i64 selects in the emitted (unoptimized) IR: the clamps of guarded addresses."""
    return re.findall(r"= select\s+i1 [^,]+, i64 ", raw)


def vector_selects(raw: str) -> list[str]:
    return re.findall(r"= select\s+i1 [^,]+, <8 x float>", raw)


@pytest.mark.parametrize("target", TARGETS)
def test_uniform_guard_is_one_select_per_vector(target):
    """Padding along y and x: each of the 6 unrolled copies one contiguous load and one select
    of a whole vector (one condition for its 8 lanes), no masked load or gather."""
    kernel = wb.build(depthwise(), target)
    raw = kernel.source("llvm-raw")
    assert len(vector_selects(raw)) == 6, raw
    assert re.search(r"= load\s+<8 x float>", raw), raw
    opt = kernel.source("llvm")
    assert "masked.load" not in opt and "masked.gather" not in opt


@pytest.mark.parametrize("target", TARGETS)
def test_middle_copies_of_an_unrolled_row_test_no_padding(target):
    """Padding along x alone, x (6 pixels) unrolled: only the first and the last copy can read
    the padding, so only they select (one clamp each); the other four read unguarded."""
    raw = wb.build(depthwise(pad_rows=False), target).source("llvm-raw")
    assert len(vector_selects(raw)) == 2, raw
    assert len(clamps(raw)) == 2, clamps(raw)


@pytest.mark.parametrize("target", TARGETS)
def test_dep_record_clamps_only_its_edge_copies(target):
    """The record: 5 smax/umin clamps left (before: 32 on znver4, one per unrolled copy and
    index), no masked load."""
    sch = wb.Schedule.from_python(RECORD, wb.workloads.get("DEP"))
    opt = wb.build(sch, target).source("llvm")
    assert len(re.findall(r"llvm\.(smax|umin)\.i64", opt)) <= 5
    assert "masked.load" not in opt and "masked.gather" not in opt


@pytest.mark.parametrize("pad_rows", [True, False])
@pytest.mark.parametrize("w", [1, 6])
def test_padded_vector_loops_match_numpy(pad_rows, w):
    """Including a single unrolled pixel (both of its sides in the padding's reach) and the
    checked build (every access inside its buffer)."""
    sch = depthwise(w=w, pad_rows=pad_rows)
    check_trace_roundtrip(sch)
    args, want = reference(w=w, pad_rows=pad_rows)
    for check in (False, True):
        out = np.full(want.shape, np.nan, "float32")
        wb.build(sch, "llvm", check_bounds=check)(*args, out)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_dep_record_numerics():
    sch = wb.Schedule.from_python(RECORD, wb.workloads.get("DEP"))
    check_dep_record(sch)
