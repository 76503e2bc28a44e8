"""Vector reads whose lanes are a small constant stride apart (2 to 4 elements: a stride-2
convolution's or pooling's input along its output x) are one contiguous load of the span and a
shufflevector keeping every stride-th element, not a gather (one load per lane).

Properties of the generated IR, for AVX2 (znver3) and AVX-512 (znver4) targets this host may not
have (compile-only kernels still give their IR), and numerics on this host.
"""

import re

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

TARGETS = ["llvm -mcpu=znver3", "llvm -mcpu=znver4"]


def strided(stride: int, n: int = 64, lanes: int = 16, offset: int = 0, tail: int = 0) -> wb.Schedule:
    """``B[i] = A[stride * i + offset] * 2`` with ``i`` split by ``lanes`` and vectorized; A holds
    the elements read and ``tail`` more (0: its last element is the last lane's)."""
    A = wb.placeholder((stride * (n - 1) + 1 + offset + tail,), "float32", name="A")
    B = wb.compute((n,), lambda i: A[i * stride + offset] * 2.0, name="B")
    sch = wb.Schedule(wb.create_func([A, B], name=f"stride{stride}"))
    (i,) = sch.get_loops(sch.get_block("B"))
    _, inner = sch.split(i, [None, lanes])
    sch.vectorize(inner)
    return sch


def loads(ir: str) -> dict[str, list[str]]:
    return {
        "gather": re.findall(r"masked\.gather", ir),
        "wide": re.findall(r"= load <(\d+) x float>", ir),
        "shuffle": re.findall(r"shufflevector <\d+ x float> [^,]+, <\d+ x float> \w+, <(\d+) x i32>", ir),
    }


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("stride", [2, 3, 4])
def test_small_strides_are_wide_loads_and_shuffles(target, stride):
    """A buffer with room after the last lane's element (a padded row): whole stride x 16 loads
    (whole registers); one ending at it: loads that end at the last lane's element."""
    for tail, span in ((stride - 1, stride * 16), (0, stride * 15 + 1)):
        found = loads(wb.build(strided(stride, tail=tail), target).source("llvm"))
        assert not found["gather"], found
        assert found["shuffle"] and set(found["shuffle"]) == {"16"}, found
        assert found["wide"] and {int(s) for s in found["wide"]} == {span}, (tail, found)


@pytest.mark.parametrize("target", TARGETS)
def test_a_larger_stride_is_still_a_gather(target):
    """Stride 8: a load of 8 x 16 floats per 16 would read 8 times what it keeps."""
    found = loads(wb.build(strided(8), target).source("llvm"))
    assert found["gather"] and not found["shuffle"], found


@pytest.mark.parametrize("stride, offset", [(2, 0), (2, 1), (3, 2), (4, 3)])
def test_strided_reads_match_numpy_and_stay_inside_the_buffer(stride, offset):
    """The buffer ends at the last lane's element: the last vector's load must not read past it
    (check_bounds checks each access against A's shape)."""
    sch = strided(stride, n=48, offset=offset)
    check_trace_roundtrip(sch)
    for check in (False, True):
        kernel = wb.build(sch, "llvm", check_bounds=check)
        a = np.random.default_rng(0).standard_normal(stride * 47 + 1 + offset).astype("float32")
        b = np.full(48, np.nan, "float32")
        kernel(a, b)
        np.testing.assert_array_equal(b, a[offset::stride][:48] * 2)
