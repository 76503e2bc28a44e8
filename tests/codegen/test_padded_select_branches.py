"""A padded read in scalar code whose guard moves with the innermost loop,
``Select(1 <= w + rw <= W, A[.., w + rw - 1, ..], 0)`` along ``w``, is two blocks and a phi (the
load only where the guard holds, as TVM lowers ``if_then_else``), not a load from an address
clamped per element: the clamps (two compares and selects per index and element, kept live
across LLVM's unrolled inner loop) made TVM's 57th DEP record (padding inlined, no vectorize)
1.8x slower than TVM's build of it on one thread. A guard on outer loops only keeps its clamp:
LLVM hoists it and still vectorizes the inner loop (tests/codegen/test_vectorize_unannotated.py).

Properties of the emitted IR for AVX2 (znver3) and AVX-512 (znver4) targets this host may not
have (compile-only kernels still give their IR), and numerics on this host.
"""

import re

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

TARGETS = ["llvm -mcpu=znver3", "llvm -mcpu=znver4"]


def padded(guard: str, n: int = 6, m: int = 20) -> wb.Schedule:
    """``P[i, j] = 2 * A[i - 1, j - 1]`` inside A, 0 in a border of one (``guard``: "cols" the
    guard on j only, the inner loop; "rows" on i only, the outer one)."""
    if guard == "cols":
        A = wb.placeholder((n, m), "float32", name="A")
        shape = (n, m + 2)
        body = lambda i, j: wb.if_then_else(wb.all_of(j >= 1, j < m + 1), A[i, j - 1], 0.0) * 2.0  # noqa: E731
    else:
        A = wb.placeholder((n, m), "float32", name="A")
        shape = (n + 2, m)
        body = lambda i, j: wb.if_then_else(wb.all_of(i >= 1, i < n + 1), A[i - 1, j], 0.0) * 2.0  # noqa: E731
    P = wb.compute(shape, body, name="P")
    return wb.Schedule(wb.create_func([A, P], name=f"pad_{guard}"))


def depthwise(h: int = 10, w: int = 14, c: int = 4) -> wb.Schedule:
    """A 3x3 depthwise convolution (NHWC, pad 1) with the padding inlined into the reduction
    and the output's w innermost, as TVM's 57th DEP record (anchor records_zen4_b) leaves it."""
    X = wb.placeholder((1, h, w, c), "float32", name="X")
    K = wb.placeholder((1, 3, 3, c), "float32", name="K")
    pad = wb.compute(
        (1, h + 2, w + 2, c),
        lambda n, y, x, ch: wb.if_then_else(
            wb.all_of(y >= 1, y < h + 1, x >= 1, x < w + 1), X[n, y - 1, x - 1, ch], 0.0
        ),
        name="pad",
    )
    ry, rx = wb.reduce_axis((0, 3), name="ry"), wb.reduce_axis((0, 3), name="rx")
    Y = wb.compute(
        (1, h, w, c),
        lambda n, y, x, ch: wb.sum(pad[n, y + ry, x + rx, ch] * K[0, ry, rx, ch], axis=[ry, rx]),
        name="Y",
    )
    sch = wb.Schedule(wb.create_func([X, K, Y], name="dep"))
    sch.compute_inline(sch.get_block("pad"))
    n, y, x, ch, ry_, rx_ = sch.get_loops(sch.get_block("Y"))
    sch.reorder(ch, ry_, rx_, y, x)
    return sch


def vectorized_conv(h: int = 6, w: int = 7, ci: int = 3, co: int = 16) -> wb.Schedule:
    """A 3x3 convolution (NHWC, pad 1), the padding inlined, the output channel vectorized and
    the kernel's column ``rx`` the innermost loop around it: the guard is the same for every
    lane and moves with ``rx``, as in TVM's C2D record 9 (anchor records_zen4_b)."""
    X = wb.placeholder((1, h, w, ci), "float32", name="X")
    K = wb.placeholder((3, 3, ci, co), "float32", name="K")
    pad = wb.compute(
        (1, h + 2, w + 2, ci),
        lambda n, y, x, c: wb.if_then_else(
            wb.all_of(y >= 1, y < h + 1, x >= 1, x < w + 1), X[n, y - 1, x - 1, c], 0.0
        ),
        name="pad",
    )
    ry, rx = wb.reduce_axis((0, 3), name="ry"), wb.reduce_axis((0, 3), name="rx")
    rc = wb.reduce_axis((0, ci), name="rc")
    Y = wb.compute(
        (1, h, w, co),
        lambda n, y, x, o: wb.sum(pad[n, y + ry, x + rx, rc] * K[ry, rx, rc, o], axis=[ry, rx, rc]),
        name="Y",
    )
    sch = wb.Schedule(wb.create_func([X, K, Y], name="conv"))
    sch.compute_inline(sch.get_block("pad"))
    n, y, x, o, ry_, rx_, rc_ = sch.get_loops(sch.get_block("Y"))
    sch.reorder(n, y, x, ry_, rc_, rx_, o)
    sch.vectorize(o)
    return sch


def clamps(raw: str) -> list[str]:
    """i64 selects in the emitted (unoptimized) IR: the clamps of guarded addresses."""
    return re.findall(r"= select\s+i1 [^,]+, i64 ", raw)


@pytest.mark.parametrize("target", TARGETS)
def test_guard_along_the_inner_loop_is_a_branch(target):
    kernel = wb.build(padded("cols"), target)
    raw = kernel.source("llvm-raw")
    assert not clamps(raw), clamps(raw)
    assert re.search(r"= phi\s+float", raw), raw
    opt = kernel.source("llvm")  # the load stays a plain one under its branch, no masked load
    assert "masked.load" not in opt and "masked.gather" not in opt


@pytest.mark.parametrize("target", TARGETS)
def test_guard_on_an_outer_loop_keeps_its_clamp(target):
    raw = wb.build(padded("rows"), target).source("llvm-raw")
    assert clamps(raw)
    assert not re.search(r"= phi\s+float", raw)


@pytest.mark.parametrize("target", TARGETS)
def test_depthwise_with_inlined_padding_has_no_clamped_reads(target):
    raw = wb.build(depthwise(), target).source("llvm-raw")
    assert not clamps(raw), clamps(raw)
    assert re.search(r"= phi\s+float", raw)


@pytest.mark.parametrize("target", TARGETS)
def test_guard_along_the_inner_loop_under_a_vectorized_loop_is_a_branch(target):
    """The guard of a padded read broadcast into a vector (the same for every lane) is a branch
    too: clamped reads there (a masked scalar load, a mask and a broadcast per input element)
    kept TVM's C2D record 9 1.4x slower than TVM's build, which branches."""
    kernel = wb.build(vectorized_conv(), target)
    raw = kernel.source("llvm-raw")
    assert not clamps(raw), clamps(raw)
    assert re.search(r"= phi\s+float", raw)
    assert "masked" not in kernel.source("llvm")


def padded_channels(h: int = 5, w: int = 6, c: int = 4) -> wb.Schedule:
    """A padding stage over NHWC with its channel loop vectorized: the read moves with the
    lanes, the guard (rows and columns) with the column loop around them."""
    A = wb.placeholder((h, w, c), "float32", name="A")
    P = wb.compute(
        (h + 2, w + 2, c),
        lambda i, j, k: wb.if_then_else(
            wb.all_of(i >= 1, i < h + 1, j >= 1, j < w + 1), A[i - 1, j - 1, k], 0.0
        ),
        name="P",
    )
    sch = wb.Schedule(wb.create_func([A, P], name="pad_channels"))
    sch.vectorize(sch.get_loops(sch.get_block("P"))[-1])
    return sch


@pytest.mark.parametrize("target", TARGETS)
def test_a_guarded_vector_read_keeps_its_clamp(target):
    """A read whose lanes are contiguous stays one vector load from a clamped address and a
    select, not a branch per vector (TVM's C2D record 10's padding stage, 3 lanes, ran 1.3x
    slower so)."""
    raw = wb.build(padded_channels(), target).source("llvm-raw")
    assert clamps(raw)
    assert not re.search(r"= phi\s+<\d+ x float>", raw)


def test_padded_channels_match_numpy():
    sch = padded_channels()
    check_trace_roundtrip(sch)
    a = np.random.default_rng(4).standard_normal((5, 6, 4)).astype("float32")
    for check in (False, True):
        out = np.full((7, 8, 4), np.nan, "float32")
        wb.build(sch, "llvm", check_bounds=check)(a, out)
        np.testing.assert_array_equal(out, np.pad(a, ((1, 1), (1, 1), (0, 0))))


def test_vectorized_conv_matches_numpy():
    sch = vectorized_conv()
    check_trace_roundtrip(sch)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 6, 7, 3)).astype("float32")
    k = rng.standard_normal((3, 3, 3, 16)).astype("float32")
    p = np.pad(x.astype("float64"), ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = sum(p[:, i : i + 6, j : j + 7, :] @ k[i, j] for i in range(3) for j in range(3))
    for check in (False, True):
        out = np.full((1, 6, 7, 16), np.nan, "float32")
        wb.build(sch, "llvm", check_bounds=check)(x, k, out)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("guard", ["cols", "rows"])
def test_padded_matches_numpy(guard):
    sch = padded(guard)
    a = np.random.default_rng(0).standard_normal((6, 20)).astype("float32")
    want = 2 * (np.pad(a, ((0, 0), (1, 1))) if guard == "cols" else np.pad(a, ((1, 1), (0, 0))))
    for check in (False, True):
        out = np.full(want.shape, np.nan, "float32")
        wb.build(sch, "llvm", check_bounds=check)(a, out)
        np.testing.assert_array_equal(out, want)


def test_depthwise_matches_numpy():
    sch = depthwise()
    check_trace_roundtrip(sch)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 10, 14, 4)).astype("float32")
    k = rng.standard_normal((1, 3, 3, 4)).astype("float32")
    p = np.pad(x.astype("float64"), ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = sum(p[:, i : i + 10, j : j + 14, :] * k[0, i, j] for i in range(3) for j in range(3))
    for check in (False, True):
        out = np.full((1, 10, 14, 4), np.nan, "float32")
        wb.build(sch, "llvm", check_bounds=check)(x, k, out)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
