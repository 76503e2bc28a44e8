"""A padded read in scalar code lowered as a branch (``select_true``: the load only where the
guard holds, tests/codegen/test_padded_select_branches.py) has its element offset computed ahead
of the branch; the branch holds the address and the load alone.

Computed inside the branch, each read's offset lived in a block that no other read's block
dominates, so the copies of an unrolled padded window (one branch per read) kept ~20
instructions of index arithmetic each, which LLVM could not share: the loop around them was
then over LLVM's cost limit for unswitching the padding tests, every read kept its own branch,
and TVM's C2D record 47 (records_zen4_b: a stride-2 7x7 window, the channel and two output
rows unrolled under a 7-iteration loop) ran 1.75x slower than TVM's build of it, whose
common-subexpression pass leaves the index arithmetic in ``let`` bindings ahead of its
``if_then_else`` branches. Properties of the emitted IR for AVX2 (znver3) and AVX-512 (znver4)
targets this host may not have, numerics on this host.
"""

import re

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

TARGETS = ["llvm -mcpu=znver3", "llvm -mcpu=znver4"]
SHAPE = dict(h=16, w=16, ci=3, co=8, kernel=7, stride=2, padding=3)


def window() -> wb.Schedule:
    """C2D #47's inner structure at a small shape: the padding inlined into the reduction, the
    kernel row and the output column outside the output channel, the kernel column a loop and
    inside it the input channel and two output rows unrolled (six padded reads per step)."""
    sch = wb.Schedule(wb.workloads.get("C2D", **SHAPE))
    sch.compute_inline(sch.get_block("PadInput"))
    n, h, w, co, rh, rw, rc = sch.get_loops(sch.get_block("conv2d_nhwc"))
    ho, hi = sch.split(h, [None, 2])
    sch.reorder(n, ho, rh, w, co, rw, rc, hi)
    sch.unroll(rc)
    sch.unroll(hi)
    return sch


def branch_blocks(raw: str) -> list[list[str]]:
    """The instructions of each ``select_true`` block of the emitted (unoptimized) IR."""
    blocks = re.split(r"\n(?=\"?[\w.]+\"?:)", raw)
    return [b.splitlines()[1:] for b in blocks if re.match(r"\"?select_true(\.\d+)?\"?:", b)]


@pytest.mark.parametrize("target", TARGETS)
def test_padded_reads_compute_their_offsets_before_the_branch(target):
    blocks = branch_blocks(wb.build(window(), target).source("llvm-raw"))
    assert len(blocks) == 6  # one per unrolled read in the kernel-column loop
    for block in blocks:
        ops = [re.sub(r"^\s*(%\S+ = )?", "", line).split()[0] for line in block if line.strip()]
        assert ops == ["getelementptr", "load", "br"], block


def record47(hw: int = 224) -> wb.Schedule:
    """TVM's C2D record 47's loop nest (7x7 stride-2 window, pad 3) on an ``hw`` x ``hw`` input:
    output rows tiled (.., 8, 2), columns (.., hw / 8), channels (8, 2, 4); the kernel row and
    the output column outside the channel's last 4, the kernel column inside them, a loop; the
    input channel and the two output rows unrolled under it."""
    sch = wb.Schedule(wb.workloads.get("C2D", h=hw, w=hw))
    sch.compute_inline(sch.get_block("PadInput"))
    n, h, w, co, rh, rw, rc = sch.get_loops(sch.get_block("conv2d_nhwc"))
    h0, h1, h3 = sch.split(h, [None, 8, 2])
    w1, w2 = sch.split(w, [None, hw // 8])
    c0, c1, c2 = sch.split(co, [8, 2, 4])
    sch.reorder(n, h0, c0, h1, w1, c1, rh, w2, c2, rw, rc, h3)
    sch.unroll(rc)
    sch.unroll(h3)
    return sch


@pytest.mark.parametrize("target", TARGETS)
def test_row_padding_tests_are_unswitched(target):
    """With the offsets shared, LLVM unswitches the tests on the output rows (the same for the
    whole column loop) out of the column loop, as in TVM's build: the loop comes in versions
    (``.us``, LLVM's name for a copy under a hoisted test) whose reads test the columns only.
    Before, one column loop kept a test (a branch, or on AVX-512 a masked gather) per read."""
    opt = wb.build(record47(), target).source("llvm")
    assert re.search(r"^for_w_1\.us[\w.]*:", opt, re.M), re.findall(r"^for_\w+", opt, re.M)


@pytest.mark.parametrize(
    "make, shape", [(window, SHAPE), (lambda: record47(32), dict(h=32, w=32))], ids=["window", "record47"]
)
def test_matches_numpy(make, shape):
    sch = make()
    check_trace_roundtrip(sch)
    args = [wb.aligned(a) for a in wb.workloads.random_args("C2D", seed=3, **shape)]
    want = wb.workloads.reference("C2D", **shape)(*args[:-1])
    for check in (False, True):
        args[-1].fill(np.nan)
        wb.build(sch, "llvm", check_bounds=check)(*args)
        np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=1e-4)
