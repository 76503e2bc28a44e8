"""Schedules of a padding stage that used to give wrong results (found by random schedules; TVM
0.27 gets the first three wrong too): reverse_compute_at of the padding stage under a loop of
its producer, decompose_padding beside another block under the same loop, reindex of a read
inside the padding guard, and reindex of a block that holds other blocks.

The program is ``T -> Pad -> conv`` with a padding value of 1, not 0: an element of the padded
buffer that is never written then shows in the result even where fresh memory is zeroed.
"""

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

PAD_CONV = """
@T.prim_func
def pad_conv(A: T.Buffer((1, 6, 6, 2), "float32"), W: T.Buffer((3, 3, 2, 2), "float32"),
             O: T.Buffer((1, 6, 6, 2), "float32")):
    Tt = T.alloc_buffer((1, 6, 6, 2), "float32")
    P = T.alloc_buffer((1, 8, 8, 2), "float32")
    for n, h, w, c in T.grid(1, 6, 6, 2):
        with T.block("T"):
            vn, vh, vw, vc = T.axis.remap("SSSS", [n, h, w, c])
            Tt[vn, vh, vw, vc] = A[vn, vh, vw, vc] * T.float32(2)
    for n, h, w, c in T.grid(1, 8, 8, 2):
        with T.block("Pad"):
            vn, vh, vw, vc = T.axis.remap("SSSS", [n, h, w, c])
            P[vn, vh, vw, vc] = T.if_then_else(1 <= vh and vh < 7 and 1 <= vw and vw < 7,
                                               Tt[vn, vh - 1, vw - 1, vc], T.float32(1))
    for n, h, w, co, rh, rw, ci in T.grid(1, 6, 6, 2, 3, 3, 2):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.axis.remap("SSSSRRR", [n, h, w, co, rh, rw, ci])
            with T.init():
                O[vn, vh, vw, vco] = T.float32(0)
            O[vn, vh, vw, vco] = O[vn, vh, vw, vco] + P[vn, vh + vrh, vw + vrw, vci] * W[vrh, vrw, vci, vco]
"""

# Pad followed by an elementwise consumer of the padded buffer
PAD_SCALE = """
@T.prim_func
def pad_scale(A: T.Buffer((6, 6), "float32"), O: T.Buffer((8, 8), "float32")):
    P = T.alloc_buffer((8, 8), "float32")
    for h, w in T.grid(8, 8):
        with T.block("Pad"):
            vh, vw = T.axis.remap("SS", [h, w])
            P[vh, vw] = T.if_then_else(1 <= vh and vh < 7 and 1 <= vw and vw < 7,
                                       A[vh - 1, vw - 1], T.float32(1))
    for h, w in T.grid(8, 8):
        with T.block("S"):
            vh, vw = T.axis.remap("SS", [h, w])
            O[vh, vw] = P[vh, vw] * T.float32(3)
"""


def _run(func, shapes, target="llvm"):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") for s in shapes[:-1]]
    out = np.full(shapes[-1], np.nan, "float32")
    wb.build(func, target=target)(*args, out)
    return out


def check_same_as_unscheduled(sch, target="llvm"):
    shapes = [tuple(wb.ir.expr.as_int(x) for x in b.shape) for b in sch.func.params]
    np.testing.assert_allclose(
        _run(sch.func, shapes, target), _run(wb.testing.original_func(sch), shapes, target), rtol=1e-5
    )
    check_trace_roundtrip(sch)


def refused(sch, match, primitive, *args):
    before, steps = sch.func, len(sch.trace)
    with pytest.raises(wb.ScheduleError, match=match):
        getattr(sch, primitive)(*args)
    assert sch.func is before and len(sch.trace) == steps


# ------------------------------------------------------------------------------------------
# reverse_compute_at of a padding stage


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_reverse_compute_at_of_a_padding_stage_is_refused(depth):
    # per iteration the moved Pad would cover only the rows T wrote: its border never runs
    sch = wb.Schedule(wb.parse(PAD_CONV))
    loop = sch.get_loops("T")[depth]
    refused(sch, r"would not cover its whole iteration domain.*only where", "reverse_compute_at", "Pad", loop)


def test_reverse_compute_at_still_moves_an_unguarded_consumer():
    sch = wb.Schedule(wb.parse(PAD_SCALE))
    h, w = sch.get_loops("Pad")
    sch.reverse_compute_at("S", w)
    check_same_as_unscheduled(sch)


def test_reverse_compute_at_of_a_consumer_reading_a_shifted_window():
    # S reads B[v + 2]: the instances it runs per iteration still cover its whole domain
    src = """
@T.prim_func
def shifted(A: T.Buffer((10,), "float32"), O: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((10,), "float32")
    for i in range(10):
        with T.block("B"):
            vi = T.axis.spatial(10, i)
            B[vi] = A[vi] + T.float32(1)
    for i in range(8):
        with T.block("S"):
            vi = T.axis.spatial(8, i)
            O[vi] = B[vi + 2] * T.float32(2)
"""
    sch = wb.Schedule(wb.parse(src))
    sch.reverse_compute_at("S", sch.get_loops("B")[0])
    check_same_as_unscheduled(sch)


def test_reverse_compute_at_refuses_a_consumer_reading_before_the_produced_range():
    # B[i + 2] is produced for i in [0, 8) and O[i] = B[i] reads B[0], B[1] too: nothing produces
    # them, so instances 0 and 1 would never run (the original read unwritten memory there;
    # still, no silent change)
    src = """
@T.prim_func
def shifted(A: T.Buffer((8,), "float32"), O: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((10,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi + 2] = A[vi] + T.float32(1)
    for i in range(8):
        with T.block("S"):
            vi = T.axis.spatial(8, i)
            O[vi] = B[vi] * T.float32(2)
"""
    sch = wb.Schedule(wb.parse(src))
    refused(sch, "outside what the producers write", "reverse_compute_at", "S", sch.get_loops("B")[0])


def test_reverse_compute_at_refuses_iterators_fixed_by_different_producers():
    # S[x, y] = B1[x] + B2[y]: per iteration i of the shared loop only S[i, i] would run
    src = """
@T.prim_func
def outer(A: T.Buffer((4,), "float32"), O: T.Buffer((4, 4), "float32")):
    B1 = T.alloc_buffer((4,), "float32")
    B2 = T.alloc_buffer((4,), "float32")
    for i in range(4):
        with T.block("B1"):
            vi = T.axis.spatial(4, i)
            B1[vi] = A[vi] + T.float32(1)
        with T.block("B2"):
            vi = T.axis.spatial(4, i)
            B2[vi] = A[vi] * T.float32(2)
    for x, y in T.grid(4, 4):
        with T.block("S"):
            vx, vy = T.axis.remap("SS", [x, y])
            O[vx, vy] = B1[vx] + B2[vy]
"""
    sch = wb.Schedule(wb.parse(src))
    refused(sch, "does not fix", "reverse_compute_at", "S", sch.get_loops("B1")[0])


# ------------------------------------------------------------------------------------------
# decompose_padding with another block under the padding stage's loops


def test_decompose_padding_keeps_a_producer_under_the_same_loop():
    sch = wb.Schedule(wb.parse(PAD_CONV))
    sch.compute_at("T", sch.get_loops("Pad")[3])  # T's realize now sits beside Pad's under c
    sch.decompose_padding("Pad", sch.get_loops("Pad")[0])
    assert {"T", "Pad", "Pad_pad_const"} <= set(sch.index.realizes)
    check_same_as_unscheduled(sch)


def test_decompose_padding_keeps_a_consumer_under_the_same_loop():
    sch = wb.Schedule(wb.parse(PAD_SCALE))
    sch.reverse_compute_at("S", sch.get_loops("Pad")[1])  # S's realize sits beside Pad's under w
    sch.decompose_padding("Pad", sch.get_loops("Pad")[0])
    assert "S" in sch.index.realizes
    check_same_as_unscheduled(sch)


# ------------------------------------------------------------------------------------------
# reindex


def test_reindex_of_a_guarded_read_keeps_the_guard():
    sch = wb.Schedule(wb.parse(PAD_CONV))
    copy = sch.reindex("Pad", ("read", 0))
    store = sch.get(copy).body
    assert isinstance(store.value, wb.ir.expr.Select)  # the copy reads Tt only inside the guard
    check_same_as_unscheduled(sch, target="python")  # out-of-bounds reads raise IndexError there
    check_same_as_unscheduled(sch)


def test_reindex_of_a_guarded_write_copies_back_only_under_the_guard():
    src = """
@T.prim_func
def guarded(A: T.Buffer((8,), "float32"), O: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("fill"):
            vi = T.axis.spatial(8, i)
            O[vi] = T.float32(5)
    for i in range(8):
        with T.block("G"):
            vi = T.axis.spatial(8, i)
            if vi < 5:
                O[vi] = A[vi] * T.float32(2)
"""
    sch = wb.Schedule(wb.parse(src))
    sch.reindex("G", ("write", 0))
    # (the python target shows it: its fresh buffers are zeros, where O must keep its 5s)
    check_same_as_unscheduled(sch, target="python")
    check_same_as_unscheduled(sch)


def test_reindex_refuses_a_guard_it_cannot_evaluate():
    # the guard tests vj, which does not index A: the copy block (over vi only) cannot test it
    src = """
@T.prim_func
def guarded(A: T.Buffer((8,), "float32"), O: T.Buffer((8, 4), "float32")):
    for i, j in T.grid(8, 4):
        with T.block("G"):
            vi, vj = T.axis.remap("SS", [i, j])
            O[vi, vj] = T.if_then_else(vj < 2, A[vi], T.float32(0))
"""
    sch = wb.Schedule(wb.parse(src))
    refused(sch, "cannot test that condition", "reindex", "G", ("read", 0))


def test_reindex_refuses_a_block_holding_blocks():
    sch = wb.Schedule(wb.parse(PAD_CONV))
    sch.blockize(sch.get_loops("T")[2])
    refused(sch, "not a leaf block", "reindex", "T_o", ("read", 0))
    sch.reindex("T", ("read", 0))  # the inner block is fine
    check_same_as_unscheduled(sch)
