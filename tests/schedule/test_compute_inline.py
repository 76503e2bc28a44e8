"""compute_inline and reverse_compute_inline: numeric equality (python and llvm), trace
round-trip, the IR they leave, and every rule they enforce."""

import numpy as np
import pytest

import workbench as wb

from workbench import workloads
from workbench.errors import ScheduleError
from workbench.ir import dsl
from workbench.ir.expr import BufferLoad, IntImm
from workbench.ir.functor import pre_order
from workbench.ir.region import infer_access_regions
from workbench.ir.stmt import BufferStore
from workbench.ir.verify import verify
from workbench.schedule import Schedule
from workbench.ir.index import index, replace
from workbench.testing import (
    check_elementwise,
    check_numeric,
    check_trace_roundtrip,
    elementwise_func,
    small_schedule,
)


def check(sch, name):
    verify(sch.func)
    shape = workloads.small(name)
    check_numeric(sch, name, **shape)
    check_numeric(sch, name, target="llvm", **shape)
    check_trace_roundtrip(sch)


def block_names(sch):
    return [b.name for b in sch.func.blocks()]


def allocated(sch):
    return [b.name for b in sch.func.root.alloc_buffers]


def reads(sch, block):
    return [r.buffer.name for r in sch.get(sch.get_block(block)).reads]


# -- compute_inline -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,pad,conv",
    [
        ("C2D", "PadInput", "conv2d_nhwc"),
        ("T2D", "PadInput", "conv2d_transpose_nhwc"),
        ("CBR", "PaddedInput", "Conv2dOutput"),
    ],
)
def test_inline_padding(name, pad, conv):
    sch = small_schedule(name)
    sch.compute_inline(sch.get_block(pad))
    assert pad not in block_names(sch) and pad not in allocated(sch)
    assert pad not in reads(sch, conv)
    assert not any(isinstance(n, BufferLoad) and n.buffer.name == pad for n in pre_order(sch.func.body))
    check(sch, name)


def test_inline_cbr_epilogue_into_relu():
    sch = small_schedule("CBR")
    for name in ("bias_add", "bn_mul", "bn_add"):
        sch.compute_inline(sch.get_block(name))
    assert block_names(sch) == ["root", "PaddedInput", "Conv2dOutput", "compute"]
    assert reads(sch, "compute") == ["Conv2dOutput", "bias", "bn_scale", "bn_offset"]
    check(sch, "CBR")


def test_inline_into_two_consumers():
    """exp is read by both the sum and the normalization: each recomputes it."""
    sch = small_schedule("SFM")
    sch.compute_inline(sch.get_block("T_softmax_exp"))
    assert reads(sch, "T_softmax_expsum") == ["A", "T_softmax_maxelem"]
    assert reads(sch, "T_softmax_norm") == ["A", "T_softmax_maxelem", "T_softmax_expsum"]
    check(sch, "SFM")


def test_inline_after_loop_transformations():
    """The producer's loops (split, reordered) vanish with it; the consumer keeps its own."""
    sch = small_schedule("C2D")
    i0, i1, i2, i3 = sch.get_loops("PadInput")
    sch.split(i1, [None, 3])
    sch.reorder(i3, i2)
    sch.compute_inline(sch.get_block("PadInput"))
    assert len(list(sch.func.loops())) == 7
    check(sch, "C2D")


def test_inline_elementwise():
    sch = Schedule(elementwise_func())
    sch.compute_inline(sch.get_block("B"))
    store = sch.get(sch.get_block("C")).body
    assert str(store.value) == "A[vi, vj] * T.float32(2) + T.float32(1)"
    check_elementwise(sch)
    check_trace_roundtrip(sch)


# -- reverse_compute_inline ------------------------------------------------------------------


def test_reverse_inline_cbr_epilogue_chain():
    sch = small_schedule("CBR")
    for name in ("compute", "bn_add", "bn_mul"):
        sch.reverse_compute_inline(sch.get_block(name))
    assert block_names(sch) == ["root", "PaddedInput", "Conv2dOutput", "bias_add"]
    bias_add = sch.get(sch.get_block("bias_add"))
    assert [w.buffer.name for w in bias_add.writes] == ["compute"]
    assert allocated(sch) == ["PaddedInput", "Conv2dOutput"]
    check(sch, "CBR")


def test_reverse_inline_one_stage():
    """bn_mul folds into bias_add, which now writes bn_mul's output; bn_add still reads it."""
    sch = small_schedule("CBR")
    sch.reverse_compute_inline(sch.get_block("bn_mul"))
    assert "bn_mul" not in block_names(sch) and "bias_add" not in allocated(sch)
    assert reads(sch, "bn_add") == ["bn_mul", "bn_offset"]
    check(sch, "CBR")


def test_reverse_inline_keeps_producer_loops():
    sch = Schedule(elementwise_func())
    i, j = sch.get_loops("B")
    sch.split(j, [None, 4])
    sch.reverse_compute_inline(sch.get_block("C"))
    assert [l.extent.value for l in sch.get(sch.get_loops("B"))] == [4, 2, 4]
    assert [w.buffer.name for w in sch.get(sch.get_block("B")).writes] == ["C"]
    check_elementwise(sch)
    check_trace_roundtrip(sch)


def test_reverse_inline_transposed_read():
    """The consumer reads its producer transposed: still one instance per element."""
    A = dsl.placeholder((4, 6), name="A")
    B = dsl.compute((4, 6), lambda i, j: A[i, j] + 1.0, name="B")
    C = dsl.compute((6, 4), lambda i, j: B[j, i] * 3.0, name="C")
    sch = Schedule(dsl.create_func([A, C], name="transpose"))
    sch.reverse_compute_inline(sch.get_block("C"))
    verify(sch.func)
    import numpy as np
    from workbench.codegen import build

    a = np.arange(24, dtype="float32").reshape(4, 6)
    for target in ("python", "llvm"):
        out = np.zeros((6, 4), "float32")
        build(sch.func, target=target)(a, out)
        np.testing.assert_allclose(out, ((a + 1) * 3).T)
    check_trace_roundtrip(sch)


# -- rules: compute_inline -------------------------------------------------------------------


def test_inline_refuses_reduction():
    sch = small_schedule("CBR")
    with pytest.raises(
        ScheduleError,
        match=r"compute_inline \(argument 'block'\): block "
        r"'Conv2dOutput' is not a complete block: it has "
        r"non-spatial iterators \['vry', 'vrx', 'vrc'\]",
    ):
        sch.compute_inline(sch.get_block("Conv2dOutput"))


def test_inline_refuses_output_block():
    sch = small_schedule("CBR")
    with pytest.raises(
        ScheduleError,
        match=r"compute_inline \(argument 'block'\): block 'compute' "
        r"is an output block",
    ):
        sch.compute_inline(sch.get_block("compute"))


def _with_store(func, name, make):
    """``func`` with block ``name``'s store replaced by ``make(store, iter_vars)`` (regions
    recomputed)."""
    block = index(func).block(name)
    body = make(block.body, [iv.var for iv in block.iter_vars])
    r, w = infer_access_regions(body)
    return replace(func, block, block.with_(body=body, reads=r, writes=w))


def test_inline_refuses_nontrivial_store_index():
    func = _with_store(
        elementwise_func(), "B", lambda s, v: BufferStore(s.buffer, s.value, (v[0], v[1] * 0 + IntImm(0)))
    )
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match=r"compute_inline.*block 'B' stores B at index 1 = "):
        sch.compute_inline(sch.get_block("B"))


def test_inline_refuses_repeated_store_index():
    func = _with_store(
        elementwise_func((4, 4)), "B", lambda s, v: BufferStore(s.buffer, s.value, (v[0], v[0]))
    )
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match=r"each index must be a distinct iterator"):
        sch.compute_inline(sch.get_block("B"))


def test_inline_refuses_block_reading_its_output():
    func = _with_store(
        elementwise_func(), "B", lambda s, v: BufferStore(s.buffer, s.buffer[v[0], v[1]] * 2.0, s.indices)
    )
    sch = Schedule(func)
    with pytest.raises(
        ScheduleError,
        match=r"block 'B' is not a complete block: it reads the "
        r"buffers \['B'\] it writes",
    ):
        sch.compute_inline(sch.get_block("B"))


def test_inline_refuses_root():
    sch = small_schedule("C2D")
    with pytest.raises(ScheduleError, match=r"compute_inline \(argument 'block'\): the root block"):
        sch.compute_inline(sch.get_block("root"))


# -- rules: reverse_compute_inline -----------------------------------------------------------


def test_reverse_inline_refuses_two_producers():
    sch = small_schedule("SFM")
    with pytest.raises(
        ScheduleError,
        match=r"reverse_compute_inline \(argument 'block'\): block "
        r"'T_softmax_norm' has 2 producer blocks",
    ):
        sch.reverse_compute_inline(sch.get_block("T_softmax_norm"))


def test_reverse_inline_refuses_reduction_producer():
    sch = small_schedule("CBR")
    with pytest.raises(ScheduleError, match=r"producer 'Conv2dOutput' is not a complete block"):
        sch.reverse_compute_inline(sch.get_block("bias_add"))


def test_reverse_inline_refuses_reduction_consumer():
    sch = small_schedule("SFM")
    with pytest.raises(ScheduleError, match=r"block 'T_softmax_maxelem' is not a complete block"):
        sch.reverse_compute_inline(sch.get_block("T_softmax_maxelem"))


def test_reverse_inline_refuses_shared_buffer():
    A = dsl.placeholder((4, 8), name="A")
    B = dsl.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = dsl.compute((4, 8), lambda i, j: B[i, j] + 1.0, name="C")
    D = dsl.compute((4, 8), lambda i, j: B[i, j] - 1.0, name="D")
    sch = Schedule(dsl.create_func([A, C, D], name="fork"))
    with pytest.raises(ScheduleError, match=r"B is also read by blocks \['D'\]"):
        sch.reverse_compute_inline(sch.get_block("C"))


def test_reverse_inline_refuses_parameter_buffer():
    A = dsl.placeholder((4, 8), name="A")
    B = dsl.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = dsl.compute((4, 8), lambda i, j: B[i, j] + 1.0, name="C")
    sch = Schedule(dsl.create_func([A, B, C], name="two_outputs"))
    with pytest.raises(ScheduleError, match=r"producer 'B' writes the function parameter B"):
        sch.reverse_compute_inline(sch.get_block("C"))


def test_reverse_inline_refuses_diagonal_read():
    A = dsl.placeholder((4, 4), name="A")
    B = dsl.compute((4, 4), lambda i, j: A[i, j] * 2.0, name="B")
    C = dsl.compute((4,), lambda i: B[i, i], name="C")
    sch = Schedule(dsl.create_func([A, C], name="diagonal"))
    before = sch.func
    with pytest.raises(ScheduleError, match=r"reads B\[vi, vi\]: the indices are not a one-to-one affine"):
        sch.reverse_compute_inline(sch.get_block("C"))
    assert sch.func is before


def _slice_schedule(rows=2):
    A = dsl.placeholder((4, 8), name="A")
    B = dsl.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = dsl.compute((rows, 8), lambda i, j: B[i, j], name="C")
    return Schedule(dsl.create_func([A, C], name="slice"))


def test_reverse_inline_partial_read_guards_the_producer():
    # the consumer reads rows 0..1 of the 4 the producer computes: the producer keeps its loops
    # and computes C only where C had an instance (TVM's reverse_compute_inline does the same)
    sch = _slice_schedule()
    sch.reverse_compute_inline(sch.get_block("C"))
    realize = index(sch.func).realizes["B"]
    assert str(realize.predicate) == "i < 2"
    assert [w.buffer.name for w in realize.block.writes] == ["C"]
    check_trace_roundtrip(sch)
    a = np.random.default_rng(0).uniform(-1, 1, (4, 8)).astype("float32")
    for target in ("python", "llvm"):
        c = np.zeros((2, 8), "float32")
        wb.build(sch.func, target=target)(a, c)
        np.testing.assert_allclose(c, a[:2] * 2.0)


def test_reverse_inline_refuses_consumer_with_predicate():
    sch = _slice_schedule(rows=4)
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, factors=[None, 3])
    before = sch.func
    with pytest.raises(ScheduleError, match=r"block 'C' has a predicate \(T.where\)"):
        sch.reverse_compute_inline(sch.get_block("C"))
    assert sch.func is before


def test_reverse_inline_refuses_strided_read():
    A = dsl.placeholder((8,), name="A")
    B = dsl.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = dsl.compute((4,), lambda i: B[i * 2], name="C")
    sch = Schedule(dsl.create_func([A, C], name="strided"))
    before = sch.func
    # the inverse i = x // 2 would also compute C[1] from B[3]
    with pytest.raises(ScheduleError, match=r"reads B\[vi \* 2\]: the indices are not a one-to-one"):
        sch.reverse_compute_inline(sch.get_block("C"))
    assert sch.func is before


def test_reverse_inline_refuses_producer_not_covering():
    # B is 8 long, but its producer stores only its first 4 elements, and C reads all 8
    sch = Schedule(wb.parse(_SHORT))
    before = sch.func
    with pytest.raises(ScheduleError, match=r"producer 'B' stores B only at \[0, 3\] in dimension 0"):
        sch.reverse_compute_inline(sch.get_block("C"))
    assert sch.func is before


_SHORT = """
@T.prim_func
def short(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in range(4):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * T.float32(2)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi]
"""


def test_reverse_inline_refuses_producer_computing_an_instance_twice():
    sch = Schedule(wb.parse(_TWICE))
    before = sch.func
    with pytest.raises(ScheduleError, match=r"computes 3 distinct of the block's 3 instances \(6 times\)"):
        sch.reverse_compute_inline(sch.get_block("C"))
    assert sch.func is before


_TWICE = """
@T.prim_func
def twice(A: T.Buffer((8,), "float32"), C: T.Buffer((3,), "float32")):
    B = T.alloc_buffer((4,))
    for i in range(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi // 2] = A[vi] * T.float32(2)
    for i in range(3):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi]
"""


def test_reverse_inline_refuses_two_reads_at_different_indices():
    A = dsl.placeholder((8,), name="A")
    B = dsl.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = dsl.compute((7,), lambda i: B[i] + B[i + 1], name="C")
    sch = Schedule(dsl.create_func([A, C], name="stencil"))
    with pytest.raises(ScheduleError, match=r"must read B at one and the same index, 2 distinct"):
        sch.reverse_compute_inline(sch.get_block("C"))
