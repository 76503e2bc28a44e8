"""loop_partition (TVM 0.27's test_tir_schedule_partition.py and its docstring), before/after in
our words: structure, trace round trip, same numbers on llvm, and one refusal per rule."""

import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

from .tvm_port import check_after, check_refused

ELEMWISE = """
@T.prim_func
def elemwise(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
"""

# TVM 0.27 prints this for loop_partition(i, [2, 6]): the rest (8) becomes a third part
THREE_PARTS = """
@T.prim_func
def elemwise(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    with T.block("B_i_common"):
        with T.block("B_i0_partition"):
            for i0, j in T.grid(2, 8):
                with T.block("B_i0"):
                    vi, vj = T.axis.remap("SS", [i0, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)
        with T.block("B_i1_partition"):
            for i1 in range(2, 8):
                for j in range(8):
                    with T.block("B_i1"):
                        vi, vj = T.axis.remap("SS", [i1, j])
                        B[vi, vj] = A[vi, vj] * T.float32(2)
        with T.block("B_i2_partition"):
            for i2 in range(8, 16):
                for j in range(8):
                    with T.block("B_i2"):
                        vi, vj = T.axis.remap("SS", [i2, j])
                        B[vi, vj] = A[vi, vj] * T.float32(2)
"""

INFERRED = """
@T.prim_func
def elemwise(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    with T.block("B_i_common"):
        with T.block("B_i0_partition"):
            for i0, j in T.grid(12, 8):
                with T.block("B_i0"):
                    vi, vj = T.axis.remap("SS", [i0, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)
        with T.block("B_i1_partition"):
            for i1 in range(12, 16):
                for j in range(8):
                    with T.block("B_i1"):
                        vi, vj = T.axis.remap("SS", [i1, j])
                        B[vi, vj] = A[vi, vj] * T.float32(2)
"""

MATMUL = """
@T.prim_func
def matmul(A: T.Buffer((12, 8), "float32"), B: T.Buffer((8, 12), "float32"),
           C: T.Buffer((12, 12), "float32")):
    for i, j, k in T.grid(12, 12, 8):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def _loops(block, n=0):
    return lambda sch: sch.get_loops(sch.get_block(block))[n]


def test_partition_rest_becomes_a_part():
    check_after(ELEMWISE, lambda s: s.loop_partition(_loops("B")(s), [2, 6]), THREE_PARTS)


def test_partition_inferred_factor():
    sch = check_after(ELEMWISE, lambda s: s.loop_partition(_loops("B")(s), [None, 4]), INFERRED)
    assert "loop_partition(loop=l1, factors=[None, 4], preserve_unit_iters=True)" in sch.trace.as_python()


def test_partition_returns_loops_that_schedule_on():
    sch = wb.Schedule(wb.parse(MATMUL))
    i, j, k = sch.get_loops(sch.get_block("C"))
    parts = sch.loop_partition(k, [4, None])
    assert [sch.get(p).extent.value for p in parts] == [4, 4]
    assert [sch.get(p).min.value for p in parts] == [0, 4]
    # the inner reduction loop of one part, split further
    sch.split(sch.get_loops(sch.get_block("C_k0"))[-1], [2, 2])
    check_trace_roundtrip(sch)
    from .tvm_port import check_same_numbers

    check_same_numbers(sch.func, MATMUL)


def test_partition_outer_loop_of_reduction():
    sch = wb.Schedule(wb.parse(MATMUL))
    i = sch.get_loops(sch.get_block("C"))[0]
    sch.loop_partition(i, [5, 5])
    assert {"C_i0", "C_i1", "C_i2", "C_i_common"} <= {b.name for b in sch.func.blocks()}
    check_trace_roundtrip(sch)
    from .tvm_port import check_same_numbers

    check_same_numbers(sch.func, MATMUL)


@pytest.mark.parametrize(
    "factors, match",
    [
        ([16], "not less than the extent"),
        ([10, 10], "not less than the extent"),
        ([20, None], "not less than the extent"),
        ([0, 16], "positive"),
        ([None, None, 4], "only one factor may be None"),
    ],
)
def test_partition_refuses_bad_factors(factors, match):
    check_refused(ELEMWISE, lambda s: s.loop_partition(_loops("B")(s), factors), match)


def test_partition_refuses_parallel_loop():
    check_refused(
        ELEMWISE,
        lambda s: s.loop_partition(_loops("B")(s), [4, None]),
        "is parallel",
        prepare=lambda s: s.parallel(_loops("B")(s)),
    )


def test_partition_refuses_annotated_loop():
    check_refused(
        ELEMWISE,
        lambda s: s.loop_partition(_loops("B")(s), [4, None]),
        "annotations",
        prepare=lambda s: s.annotate(_loops("B")(s), "pragma_x", 1),
    )


def test_partition_refuses_loop_not_from_zero():
    check_refused(
        ELEMWISE,
        lambda s: s.loop_partition(sch_loop(s, "B_i1"), [2, None]),
        "starts at",
        prepare=lambda s: s.loop_partition(_loops("B")(s), [4, None]),
    )


def sch_loop(sch, block):
    return sch.get_loops(sch.get_block(block))[-2]
