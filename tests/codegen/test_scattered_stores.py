"""A loop whose float stores move at a stride (not filled in between by its inner loops) is kept
off LLVM's loop vectorizer: vectorized, its stores would be scatters.

The case, from TVM's C2D #32 record (anchor records_zen4_b): the padding stage computed inside
the convolution's reduction loops, a 13 x 13 tile of one input channel refilled at every
reduction step. Under ``unroll_explicit`` the tile's inner loop is unrolled, and LLVM vectorized
the outer one across the tile's rows (13 of 16 lanes) on AVX-512: masked gathers of the input
and scatters into the tile, the scatters microcoded on Zen 4/5. Workbench's build ran 2.8x
slower than TVM's, which keeps the copy scalar. A loop that fills every element between its
iterations' (a small interleaved group) still goes to the vectorizer.

Properties of the generated IR for AVX2 (znver3) and AVX-512 (znver4) targets this host may not
have (compile-only kernels still give their IR); numerics on this host.
"""

import re

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

TARGETS = ["llvm -mcpu=znver3", "llvm -mcpu=znver4"]

#: a small conv2d_nhwc with C2D's kernel, stride and padding (output 16 x 16 x 8)
SHAPE = dict(h=32, w=32, ci=3, co=8)


def padded_tile_schedule() -> wb.Schedule:
    """The C2D #32 record's structure at a small shape: h, w, co tiled [4, 4, 1], [2, 8],
    [2, 4, 1]; rh, rw, rc as [1, 7], [7, 1], [3, 1]; the padding computed at rc's outer loop
    (a 13 x 15 x 1 tile); the zero initialisation outside rh; ``unroll_explicit`` 64 on the outer loop."""
    sch = wb.Schedule(wb.workloads.get("C2D", **SHAPE))
    conv = sch.get_block("conv2d_nhwc")
    n, h, w, co, rh, rw, rc = sch.get_loops(conv)
    h0, h2, h3 = sch.split(h, [None, 4, 1])
    w0, w3 = sch.split(w, [None, 8])
    co0, co2, co3 = sch.split(co, [None, 4, 1])
    rh0, rh1 = sch.split(rh, [1, 7])
    rw0, rw1 = sch.split(rw, [7, 1])
    rc0, rc1 = sch.split(rc, [3, 1])
    sch.reorder(n, h0, w0, co0, rh0, rw0, rc0, h2, co2, rh1, rw1, rc1, h3, w3, co3)
    sch.compute_at(sch.get_block("PadInput"), rc0)
    sch.decompose_reduction(conv, rh0)
    sch.annotate(n, "pragma_auto_unroll_max_step", 64)
    sch.annotate(n, "pragma_unroll_explicit", 1)
    return sch


def memory_ops(ir: str) -> dict[str, int]:
    """Calls of gathers of 8 lanes or more (the loop vectorizer's) and of scatters. The SLP
    vectorizer may still gather the few loads of a row whose column index is clamped."""
    gathers = re.findall(r"call <(\d+) x float> @llvm\.masked\.gather", ir)
    return {
        "gather": sum(int(n) >= 8 for n in gathers),
        "scatter": len(re.findall(r"call void @llvm\.masked\.scatter", ir)),
    }


@pytest.mark.parametrize("target", TARGETS)
def test_padding_tile_is_not_scattered(target):
    """The tile's copy loop carries ``llvm.loop.vectorize.enable`` false; no wide gather, no
    scatter anywhere in the kernel (before, on znver4: 46 gathers and 16 scatters)."""
    ir = wb.build(padded_tile_schedule(), target).source("llvm")
    assert memory_ops(ir) == {"gather": 0, "scatter": 0}, memory_ops(ir)
    raw = wb.build(padded_tile_schedule(), target).source("llvm-raw")
    back_edge = re.search(r'br i1 [^\n]*label %"for_i1", label %"for_i1_end"[^\n]*', raw).group(0)
    tile_loop = re.search(r"!llvm\.loop !(\d+)", back_edge)
    assert tile_loop, back_edge
    loop_md = re.search(rf"^!{tile_loop.group(1)} = [^\n]*", raw, re.M).group(0)
    disabled = [
        m
        for m in re.findall(r"!(\d+)", loop_md)
        if re.search(rf'^!{m} = !{{ !"llvm\.loop\.vectorize\.enable", i1 (0|false) }}', raw, re.M)
    ]
    assert disabled, loop_md


def interleaved(stride: int) -> wb.Schedule:
    """``B[i, j] = A[i, j] * 2`` over an (8 x 32) x ``stride`` buffer: the inner loop (unrolled)
    fills the ``stride`` elements between two iterations of the outer one."""
    A = wb.placeholder((256, stride), "float32", name="A")
    B = wb.compute((256, stride), lambda i, j: A[i, j] * 2.0, name="B")
    sch = wb.Schedule(wb.create_func([A, B], name=f"interleaved{stride}"))
    _, j = sch.get_loops(sch.get_block("B"))
    sch.unroll(j)
    return sch


@pytest.mark.parametrize("target", TARGETS)
def test_an_interleaved_store_group_still_vectorizes(target):
    """Stride 3 with every element written: LLVM's interleaved stores (shuffles and whole
    vector stores), left to the vectorizer; stride 8, no such group: kept scalar."""
    ir = wb.build(interleaved(3), target).source("llvm")
    assert re.search(r"store <\d+ x float>", ir), "vectorized"
    assert memory_ops(ir)["scatter"] == 0
    raw = wb.build(interleaved(8), target).source("llvm-raw")
    assert re.search(r'!"llvm\.loop\.vectorize\.enable", i1 (0|false)', raw)


@pytest.mark.parametrize("check", [False, True])
def test_padded_tile_matches_numpy(check):
    sch = padded_tile_schedule()
    check_trace_roundtrip(sch)
    args = [wb.aligned(a) for a in wb.workloads.random_args("C2D", seed=3, **SHAPE)]
    args[-1].fill(np.nan)
    wb.build(sch, "llvm", check_bounds=check)(*args)
    want = wb.workloads.reference("C2D", **SHAPE)(*(a.astype("float64") for a in args[:2]))
    np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=1e-4)
