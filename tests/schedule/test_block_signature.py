"""reorder_block_iter_var, unsafe_set_dtype, unsafe_hide_buffer_access, annotate_buffer_access:
TVM 0.27's cases (test_tir_schedule_reorder_block_iter_var.py, test_tir_schedule_set_dtype.py,
test_tir_schedule_annotate_buffer_access.py) as before/after TVMScript, at smaller shapes; each
checked structurally, replayed from its trace and run on llvm beside the unscheduled function.
"""

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

from .tvm_port import check_after, check_refused

MATMUL = """
@T.prim_func
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
"""

ELEMENTWISE = """
@T.prim_func
def element_wise(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    B = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
"""


# reorder_block_iter_var -------------------------------------------------------------------


def test_reorder_block_iter_var():
    check_after(
        MATMUL,
        lambda sch: sch.reorder_block_iter_var(sch.get_block("C"), [2, 1, 0]),
        """
@T.prim_func
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vk, vj, vi = T.axis.remap("RSS", [k, j, i])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
""",
    )


@pytest.mark.parametrize("order", [[2, 1], [-1, 3, 2], [0, 0, 2], [0, 1, 2, 3]])
def test_reorder_block_iter_var_not_a_permutation(order):
    check_refused(
        MATMUL,
        lambda sch: sch.reorder_block_iter_var(sch.get_block("C"), order),
        r"reorder_block_iter_var \(argument 'new_order'\): .* not a permutation .* block 'C'",
    )


# unsafe_set_dtype -------------------------------------------------------------------------

ELEMENTWISE_F16 = """
@T.prim_func
def element_wise(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    B = T.alloc_buffer((16, 16), "float16")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.Cast("float16", A[vi, vj] * T.float32(2))
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.Cast("float32", B[vi, vj]) + T.float32(1)
"""


def test_unsafe_set_dtype():
    sch = wb.Schedule(wb.parse(ELEMENTWISE))
    sch.unsafe_set_dtype("B", 0, "float16")
    wb.assert_structural_equal(sch.func, wb.parse(ELEMENTWISE_F16))
    check_trace_roundtrip(sch)
    a = np.random.default_rng(0).standard_normal((16, 16)).astype("float32")
    c = np.zeros_like(a)
    wb.build(sch, target="llvm")(a, c)
    want = (a * 2).astype("float16").astype("float32") + 1
    np.testing.assert_array_equal(c, want)


def test_unsafe_set_dtype_widening_keeps_values():
    check_after(
        ELEMENTWISE,
        lambda sch: sch.unsafe_set_dtype("B", 0, "float64"),
        ELEMENTWISE_F16.replace("float16", "float64"),
    )


def test_unsafe_set_dtype_same_dtype_changes_nothing():
    sch = wb.Schedule(wb.parse(ELEMENTWISE))
    func = sch.func
    sch.unsafe_set_dtype("B", 0, "float32")
    assert sch.func is func


def test_unsafe_set_dtype_refuses_a_parameter():
    check_refused(
        ELEMENTWISE,
        lambda sch: sch.unsafe_set_dtype("C", 0, "float16"),
        r"unsafe_set_dtype \(argument 'buffer_index'\): C is a parameter",
    )


@pytest.mark.parametrize("index", [1, -1])
def test_unsafe_set_dtype_index_out_of_range(index):
    check_refused(
        ELEMENTWISE,
        lambda sch: sch.unsafe_set_dtype("B", index, "float64"),
        r"unsafe_set_dtype \(argument 'buffer_index'\): block 'B' writes 1 buffers",
    )


def test_unsafe_set_dtype_unknown_dtype():
    check_refused(
        ELEMENTWISE,
        lambda sch: sch.unsafe_set_dtype("B", 0, "float13"),
        r"unsafe_set_dtype \(argument 'dtype'\)",
    )


# unsafe_hide_buffer_access ----------------------------------------------------------------

GATHER = """
@T.prim_func
def gather(A: T.Buffer((16,), "float32"), I: T.Buffer((8,), "int32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.reads(I[vi], A[0:16])
            T.writes(B[vi])
            B[vi] = A[I[vi]] + T.float32(1)
"""


def _gather_numbers(sch):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(16).astype("float32")
    idx = rng.integers(0, 16, 8).astype("int32")
    b = np.zeros(8, "float32")
    wb.build(sch, target="llvm")(a, idx, b)
    np.testing.assert_array_equal(b, a[idx] + 1)


def test_unsafe_hide_buffer_access_read():
    sch = wb.Schedule(wb.parse(GATHER))
    sch.unsafe_hide_buffer_access(sch.get_block("B"), "read", [0])
    wb.assert_structural_equal(
        sch.func,
        wb.parse(GATHER.replace("T.reads(I[vi], A[0:16])", "T.reads(A[0:16])")),
    )
    check_trace_roundtrip(sch)
    _gather_numbers(sch)


def test_unsafe_hide_buffer_access_write_and_repeats():
    sch = wb.Schedule(wb.parse(GATHER))
    sch.unsafe_hide_buffer_access(sch.get_block("B"), "write", [0, 0])
    assert sch.get(sch.get_block("B")).writes == ()
    check_trace_roundtrip(sch)
    _gather_numbers(sch)


def test_unsafe_hide_buffer_access_bad_type():
    check_refused(
        GATHER,
        lambda sch: sch.unsafe_hide_buffer_access(sch.get_block("B"), "readwrite", [0]),
        r"unsafe_hide_buffer_access \(argument 'buf_type'\)",
    )


@pytest.mark.parametrize("indices", [[2], [-1], [0, 1, 5]])
def test_unsafe_hide_buffer_access_bad_index(indices):
    check_refused(
        GATHER,
        lambda sch: sch.unsafe_hide_buffer_access(sch.get_block("B"), "read", indices),
        r"unsafe_hide_buffer_access \(argument 'buf_index_array'\): block 'B' has 2 read regions",
    )


# annotate_buffer_access -------------------------------------------------------------------


def test_annotate_read_buffer_access():
    check_after(
        ELEMENTWISE,
        lambda sch: sch.annotate_buffer_access(
            sch.get_block("B"), 0, "read", lambda vi, vj: ((vi - 1, vi + 1), (vj - 1, vj + 1))
        ),
        """
@T.prim_func
def element_wise(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    B = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi - 1 : vi - 1 + 2, vj - 1 : vj - 1 + 2])
            T.writes(B[vi, vj])
            T.block_attr({"explicit_read_region": [0]})
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
""",
    )


def test_annotate_read_and_write_then_again():
    """TVM's read_and_write and double_annotate cases: the second read annotation replaces
    the first and the index is listed once; a single index stands for ``(v, v + 1)``."""

    def steps(sch):
        b = sch.get_block("B")
        sch.annotate_buffer_access(b, 0, "read", lambda vi, vj: ((vi - 1, vi + 2), (vj - 1, vj + 2)))
        sch.annotate_buffer_access(b, 0, "write", lambda vi, vj: ((vi, vi + 2), vj))
        sch.annotate_buffer_access(b, 0, "read", lambda vi, vj: ((vi - 2, vi + 3), (vj - 2, vj + 3)))

    sch = check_after(
        ELEMENTWISE,
        steps,
        """
@T.prim_func
def element_wise(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    B = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi - 2 : vi - 2 + 5, vj - 2 : vj - 2 + 5])
            T.writes(B[vi : vi + 2, vj])
            T.block_attr({"explicit_read_region": [0], "explicit_write_region": [0]})
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
""",
    )
    # TVM's text: the ranges as a list of (begin, end) pairs
    assert "gen_new_ranges=lambda vi, vj: [(vi, vi + 2), (vj, vj + 1)])" in sch.trace.as_python()


def test_annotate_buffer_access_text_form():
    sch = wb.Schedule(wb.parse(ELEMENTWISE))
    sch.annotate_buffer_access("B", 0, "read", "lambda a, b: (a - 1, a + 1, b - 1, b + 1)")
    got = sch.get(sch.get_block("B")).reads[0].region
    assert [str(r.min) for r in got] == ["vi - 1", "vj - 1"]


@pytest.mark.parametrize(
    "buf_type, index, fn, match",
    [
        ("load", 0, lambda vi, vj: (vi, vj), r"\(argument 'buf_type'\)"),
        ("read", 1, lambda vi, vj: (vi, vj), r"\(argument 'buffer_index'\): block 'B' reads 1 buffers"),
        (
            "read",
            0,
            lambda vi: (vi, vi),
            r"\(argument 'gen_new_ranges'\): .* takes 1 iterators; block 'B' has 2",
        ),
        ("read", 0, lambda vi, vj: (vi,), r"\(argument 'gen_new_ranges'\): .* gives 1 ranges; A has 2 axes"),
        ("read", 0, lambda vi, vj: ((vi, vi), vj), r"\(argument 'gen_new_ranges'\): .* is empty"),
        ("read", 0, lambda vi, vj: ((vi, vi, 1), vj), r"\(argument 'gen_new_ranges'\): a range is"),
        ("read", 0, 3, r"\(argument 'gen_new_ranges'\): expected a function"),
    ],
)
def test_annotate_buffer_access_refused(buf_type, index, fn, match):
    check_refused(
        ELEMENTWISE,
        lambda sch: sch.annotate_buffer_access(sch.get_block("B"), index, buf_type, fn),
        "annotate_buffer_access " + match,
    )
