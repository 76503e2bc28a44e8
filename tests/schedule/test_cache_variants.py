"""reindex_cache_read, reindex_cache_write, cache_inplace (TVM 0.27's docstrings and
test_tir_schedule_cache_read_write.py cases), before/after in our words: structure, trace round
trip, same numbers on llvm, one refusal per rule."""

import workbench as wb
from workbench.testing import check_trace_roundtrip

from .tvm_port import check_after, check_refused, check_same_numbers

ELEMWISE = """
@T.prim_func
def elemwise(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
"""

READ_TRANSPOSED = """
@T.prim_func
def elemwise(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    A_local = T.alloc_buffer((8, 8), scope="local")
    for i, j in T.grid(8, 8):
        with T.block("A_local"):
            vi, vj = T.axis.remap("SS", [i, j])
            A_local[vj, vi] = A[vi, vj]
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A_local[vj, vi] * T.float32(2)
"""

WRITE_SPLIT = """
@T.prim_func
def elemwise(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    B_local = T.alloc_buffer((4, 2, 8), scope="local")
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B_local[vi // 2, vi % 2, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(8, 8):
        with T.block("B_local"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = B_local[vi // 2, vi % 2, vj]
"""

MATMUL = """
@T.prim_func
def matmul(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
    for i0, i1, i2 in T.grid(16, 16, 8):
        with T.block("C"):
            i, j, k = T.axis.remap("SSR", [i0, i1, i2])
            with T.init():
                C[i, j] = T.float32(0)
            C[i, j] = C[i, j] + A[i, k] * B[k, j]
"""

# TVM 0.27: reindex_cache_read(C, 1, "global", lambda i, j, k: (j // 4, k, j % 4))
MATMUL_PACKED_B = """
@T.prim_func
def matmul(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
    B_global = T.alloc_buffer((4, 8, 4))
    for i1, i2 in T.grid(16, 8):
        with T.block("B_global"):
            j, k = T.axis.remap("SS", [i1, i2])
            B_global[j // 4, k, j % 4] = B[k, j]
    for i0, i1, i2 in T.grid(16, 16, 8):
        with T.block("C"):
            i, j, k = T.axis.remap("SSR", [i0, i1, i2])
            with T.init():
                C[i, j] = T.float32(0)
            C[i, j] = C[i, j] + A[i, k] * B_global[j // 4, k, j % 4]
"""

# TVM 0.27: reindex_cache_write(C, 0, "global", lambda i, j, k: (j, i))
MATMUL_C_TRANSPOSED = """
@T.prim_func
def matmul(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
    C_global = T.alloc_buffer((16, 16))
    for i0, i1, i2 in T.grid(16, 16, 8):
        with T.block("C"):
            i, j, k = T.axis.remap("SSR", [i0, i1, i2])
            with T.init():
                C_global[j, i] = T.float32(0)
            C_global[j, i] = C_global[j, i] + A[i, k] * B[k, j]
    for i0, i1 in T.grid(16, 16):
        with T.block("C_global"):
            i, j = T.axis.remap("SS", [i0, i1])
            C[i, j] = C_global[j, i]
"""

INPLACE = """
@T.prim_func
def inplace(A: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("A"):
            vi = T.axis.remap("S", [i])
            A[vi] = A[vi] * T.float32(2)
"""

# TVM 0.27 gives both copy blocks the name A_local (and leaves vi free in their bindings)
INPLACE_AFTER = """
@T.prim_func
def inplace(A: T.Buffer((16,), "float32")):
    A_local = T.alloc_buffer((16,), scope="local")
    for i in range(16):
        for ax0 in range(1):
            with T.block("A_local"):
                vax0 = T.axis.spatial(16, i + ax0)
                A_local[vax0] = A[vax0]
        with T.block("A"):
            vi = T.axis.remap("S", [i])
            A_local[vi] = A_local[vi] * T.float32(2)
        for ax0 in range(1):
            with T.block("A_local_1"):
                vax0 = T.axis.spatial(16, i + ax0)
                A[vax0] = A_local[vax0]
"""

TWO_POINTS = """
@T.prim_func
def two_points(A: T.Buffer((9,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] + A[vi + 1]
"""

ACCUMULATE = """
@T.prim_func
def accumulate(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 4):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            B[vi] = B[vi] + A[vi, vk]
"""

GUARDED = """
@T.prim_func
def guarded(A: T.Buffer((8,), "float32"), B: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = T.if_then_else(1 <= vi and vi < 9, A[vi - 1], T.float32(0))
"""


def test_reindex_cache_read_docstring_case():
    sch = check_after(
        ELEMWISE, lambda s: s.reindex_cache_read("B", 0, "local", lambda vi, vj: (vj, vi)), READ_TRANSPOSED
    )
    assert "index_map=lambda vi, vj: (vj, vi)" in sch.trace.as_python()


def test_reindex_cache_write_docstring_case():
    check_after(
        ELEMWISE,
        lambda s: s.reindex_cache_write("B", 0, "local", lambda vi, vj: (vi // 2, vi % 2, vj)),
        WRITE_SPLIT,
    )


def test_reindex_cache_read_packs_matmul_operand():
    check_after(
        MATMUL,
        lambda s: s.reindex_cache_read("C", 1, "global", lambda i, j, k: (j // 4, k, j % 4)),
        MATMUL_PACKED_B,
    )


def test_reindex_cache_write_reduction_keeps_init():
    check_after(
        MATMUL, lambda s: s.reindex_cache_write("C", 0, "global", lambda i, j, k: (j, i)), MATMUL_C_TRANSPOSED
    )


def test_reindex_cache_read_then_compute_at_under_split_loops():
    sch = wb.Schedule(wb.parse(MATMUL))
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(i, [4, None])
    pack = sch.reindex_cache_read("C", 0, "global", lambda i, j, k: (k, i))
    assert len(sch.get_loops(pack)) == 3  # i_0, i_1, i2: the loops binding i and k
    sch.compute_at(pack, sch.get_loops(sch.get_block("C"))[0])
    check_trace_roundtrip(sch)
    check_same_numbers(sch.func, MATMUL)


def test_reindex_cache_refusals():
    def read(index, imap, block="B"):
        return lambda s: s.reindex_cache_read(block, index, "local", imap)

    check_refused(
        ELEMWISE,
        lambda s: s.reindex_cache_read("B", 0, "shmem", lambda vi, vj: (vj, vi)),
        "unknown storage scope",
    )
    check_refused(ELEMWISE, read(3, lambda vi, vj: (vj, vi)), "not an index")
    check_refused(ELEMWISE, read(0, lambda vi: (vi,)), "takes 1 indices but block 'B' has 2")
    check_refused(ELEMWISE, read(0, lambda vi, vj: (vi // 2, vj)), "same element of the cache")
    check_refused(TWO_POINTS, read(0, lambda vi: (vi,)), "needs a single point")
    check_refused(GUARDED, read(0, lambda vi: (vi,)), "only where")
    check_refused(MATMUL, read(0, lambda i, j, k: (j, k), "C"), "does not index A")
    check_refused(
        ACCUMULATE, lambda s: s.reindex_cache_read("B", "B", "local", lambda i, k: (i,)), "use cache_inplace"
    )
    check_refused(
        ACCUMULATE, lambda s: s.reindex_cache_write("B", 0, "local", lambda i, k: (i,)), "has no init"
    )


def test_cache_inplace():
    sch = check_after(INPLACE, lambda s: s.cache_inplace("A", 0, "local"), INPLACE_AFTER)
    assert 'b1, b2 = sch.cache_inplace(block=b0, read_buffer_index=0, storage_scope="local")' in (
        sch.trace.as_python()
    )


def test_cache_inplace_accumulation_then_numbers():
    sch = wb.Schedule(wb.parse(ACCUMULATE))
    sch.cache_inplace("B", "B", "local")
    check_trace_roundtrip(sch)
    check_same_numbers(sch.func, ACCUMULATE)


def test_cache_inplace_refusals():
    check_refused(INPLACE, lambda s: s.cache_inplace("A", 0, "texture"), "unknown storage scope")
    check_refused(ELEMWISE, lambda s: s.cache_inplace("B", 0, "local"), "does not write it")
    check_refused(INPLACE, lambda s: s.cache_inplace("A", 1, "local"), "not an index")
