"""TVM 0.27 traces using get_output_blocks, merge, reorder_block_iter_var, unsafe_set_dtype,
unsafe_hide_buffer_access and sample_partitioned_tile import through ``KIND_MAP`` and replay
to the function TVM 0.27 printed for the same trace."""

import workbench as wb
from workbench.schedule import Schedule
from workbench.testing import check_trace_roundtrip
from workbench.tune.database import tvm as tvmdb

BEFORE = """
@T.prim_func
def f(A: T.Buffer((8, 16), "float32"), I: T.Buffer((8,), "int32"), C: T.Buffer((8, 16), "float32"),
      D: T.Buffer((8, 16), "float32")):
    B = T.alloc_buffer((8, 16))
    for i, j in T.grid(8, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj], I[vi])
            T.writes(B[vi, vj])
            B[vi, vj] = A[vi, vj] * T.float32(2) + T.Cast("float32", I[vi])
    for i, j in T.grid(8, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
    for i, j in T.grid(8, 16):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = A[vi, vj] + T.float32(1)
"""

# sch.trace.as_json() of TVM 0.27 for the steps in the module docstring
TVM_TRACE = [
    [
        ["GetSBlock", [], ["root", "main"], ["b0"]],
        ["GetOutputBlocks", ["b0"], [], ["b1", "b2"]],
        ["GetLoops", ["b1"], [], ["l3", "l4"]],
        ["GetLoops", ["b2"], [], ["l5", "l6"]],
        ["Merge", ["l3", "l5"], [], ["l7"]],
        ["GetSBlock", [], ["B", "main"], ["b8"]],
        ["ReorderBlockIterVar", ["b8", [1, 0]], [], []],
        ["UnsafeSetDType", ["b8"], [0, "float64"], []],
        ["UnsafeHideBufferAccess", ["b8", '"read"', [1]], [], []],
        ["GetLoops", ["b8"], [], ["l9", "l10"]],
        ["SamplePartitionedTile", ["l10"], [3, 1, 4], ["v11", "v12", "v13"]],
        ["Split", ["l10", "v11", "v12", "v13"], [1, 0], ["l14", "l15", "l16"]],
    ],
    [[10, [1, 1, 16]]],
]

# what TVM 0.27 printed after that trace
TVM_AFTER = """
@T.prim_func
def f(A: T.Buffer((8, 16), "float32"), I: T.Buffer((8,), "int32"), C: T.Buffer((8, 16), "float32"),
      D: T.Buffer((8, 16), "float32")):
    B = T.alloc_buffer((8, 16), "float64")
    for i, j_0, j_1, j_2 in T.grid(8, 1, 1, 16):
        with T.block("B"):
            vj = T.axis.spatial(16, j_0 * 16 + j_1 * 16 + j_2)
            vi = T.axis.spatial(8, i)
            T.reads(A[vi, vj])
            T.writes(B[vi, vj])
            B[vi, vj] = T.Cast("float64", A[vi, vj] * T.float32(2) + T.Cast("float32", I[vi]))
    for i_m in range(8):
        for j in range(16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i_m, j])
                C[vi, vj] = T.Cast("float32", B[vi, vj]) + T.float32(1)
        for j in range(16):
            with T.block("D"):
                vi, vj = T.axis.remap("SS", [i_m, j])
                D[vi, vj] = A[vi, vj] + T.float32(1)
"""


def test_tvm_trace_with_the_027_kinds_replays():
    trace = tvmdb.convert_trace(TVM_TRACE)
    sch = Schedule(wb.parse(BEFORE))
    trace.apply_to_schedule(sch)
    wb.assert_structural_equal(sch.func, wb.parse(TVM_AFTER))
    check_trace_roundtrip(sch)
