"""can_decompose_padding and pad_einsum (TVM 0.27's test_tir_schedule_pad_einsum.py and
docstrings; TVM's cases with a symbolic extent n become constant extents), before/after in our
words: structure, trace round trip, same numbers on llvm, one refusal per rule."""

import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

from .tvm_port import check_after, check_refused

PAD = """
@T.prim_func
def pad(A: T.Buffer((8,), "float32"), B: T.Buffer((10,), "float32")):
    P = T.alloc_buffer((10,))
    for i in range(10):
        with T.block("P"):
            vi = T.axis.remap("S", [i])
            P[vi] = T.if_then_else(1 <= vi and vi < 9, A[vi - 1], T.float32(0))
    for i in range(10):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = P[vi] * T.float32(2)
"""


def _first_loop(sch, block):
    return sch.get_loops(sch.get_block(block))[0]


def test_can_decompose_padding_answers_and_changes_nothing():
    sch = wb.Schedule(wb.parse(PAD))
    func = sch.func
    assert sch.can_decompose_padding(sch.get_block("P"), _first_loop(sch, "P")) is True
    assert sch.can_decompose_padding(sch.get_block("B"), _first_loop(sch, "B")) is False
    # a loop not above the block: decompose_padding refuses it, so the answer is False
    assert sch.can_decompose_padding(sch.get_block("P"), _first_loop(sch, "B")) is False
    assert sch.func is func
    assert sch.trace.as_python().count("sch.can_decompose_padding(block=") == 3
    check_trace_roundtrip(sch)
    assert len(sch.trace.simplified().insts) < len(sch.trace.insts)  # a pure query
    # and decompose_padding agrees
    sch.decompose_padding(sch.get_block("P"), _first_loop(sch, "P"))


MATMUL = """
@T.prim_func
def matmul(A: T.Buffer((127, 127), "float32"), B: T.Buffer((127, 127), "float32"),
           C: T.Buffer((127, 127), "float32")):
    for i0, i1, i2 in T.grid(127, 127, 127):
        with T.block("C_shared"):
            i, j, k = T.axis.remap("SSR", [i0, i1, i2])
            with T.init():
                C[i, j] = T.float32(0)
            C[i, j] = C[i, j] + A[i, k] * B[k, j]
"""

# TVM 0.27 prints this for pad_einsum(C_shared, [32, 32, 32])
MATMUL_PADDED = """
@T.prim_func
def matmul(A: T.Buffer((127, 127), "float32"), B: T.Buffer((127, 127), "float32"),
           C: T.Buffer((127, 127), "float32")):
    A_pad = T.alloc_buffer((128, 128))
    B_pad = T.alloc_buffer((128, 128))
    C_pad = T.alloc_buffer((128, 128))
    for i0, i1 in T.grid(128, 128):
        with T.block("A_pad"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            A_pad[v0, v1] = T.if_then_else(v0 < 127 and v1 < 127, A[v0, v1], T.float32(0))
    for i0, i1 in T.grid(128, 128):
        with T.block("B_pad"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            B_pad[v0, v1] = T.if_then_else(v0 < 127 and v1 < 127, B[v0, v1], T.float32(0))
    for i0, i1, i2 in T.grid(128, 128, 128):
        with T.block("C_shared"):
            i, j, k = T.axis.remap("SSR", [i0, i1, i2])
            with T.init():
                C_pad[i, j] = T.float32(0)
            C_pad[i, j] = C_pad[i, j] + A_pad[i, k] * B_pad[k, j]
    for i0, i1 in T.grid(127, 127):
        with T.block("C_pad"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            C[v0, v1] = C_pad[v0, v1]
"""

# TVM's test_pad_matmul with n = 40: only B (along j) and C are padded, A is not
MATMUL_NT = """
@T.prim_func
def matmul(A: T.Buffer((128, 128), "float32"), B: T.Buffer((40, 128), "float32"),
           C: T.Buffer((128, 40), "float32")):
    for i0, i1, i2 in T.grid(128, 40, 128):
        with T.block("C"):
            i, j, k = T.axis.remap("SSR", [i0, i1, i2])
            with T.init():
                C[i, j] = T.float32(0)
            C[i, j] = C[i, j] + A[i, k] * B[j, k]
"""

MATMUL_NT_PADDED = """
@T.prim_func
def matmul(A: T.Buffer((128, 128), "float32"), B: T.Buffer((40, 128), "float32"),
           C: T.Buffer((128, 40), "float32")):
    B_pad = T.alloc_buffer((64, 128))
    C_pad = T.alloc_buffer((128, 64))
    for i0, i1 in T.grid(64, 128):
        with T.block("B_pad"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            B_pad[v0, v1] = T.if_then_else(v0 < 40, B[v0, v1], T.float32(0))
    for i0, i1, i2 in T.grid(128, 64, 128):
        with T.block("C"):
            i, j, k = T.axis.remap("SSR", [i0, i1, i2])
            with T.init():
                C_pad[i, j] = T.float32(0)
            C_pad[i, j] = C_pad[i, j] + A[i, k] * B_pad[j, k]
    for i0, i1 in T.grid(128, 40):
        with T.block("C_pad"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            C[v0, v1] = C_pad[v0, v1]
"""

# TVM's test_pad_rms with n = 20: the sum of squares, padded along i only
RMS = """
@T.prim_func
def rms(A: T.Buffer((1, 20, 64), "float32"), S: T.Buffer((1, 20), "float32")):
    for bsz, i, k in T.grid(1, 20, 64):
        with T.block("S"):
            v_bsz, v_i, v_k = T.axis.remap("SSR", [bsz, i, k])
            with T.init():
                S[v_bsz, v_i] = T.float32(0)
            S[v_bsz, v_i] = S[v_bsz, v_i] + A[v_bsz, v_i, v_k] * A[v_bsz, v_i, v_k]
"""

RMS_PADDED = """
@T.prim_func
def rms(A: T.Buffer((1, 20, 64), "float32"), S: T.Buffer((1, 20), "float32")):
    A_pad = T.alloc_buffer((1, 32, 64))
    S_pad = T.alloc_buffer((1, 32))
    for i0, i1, i2 in T.grid(1, 32, 64):
        with T.block("A_pad"):
            v0, v1, v2 = T.axis.remap("SSS", [i0, i1, i2])
            A_pad[v0, v1, v2] = T.if_then_else(v1 < 20, A[v0, v1, v2], T.float32(0))
    for bsz, i, k in T.grid(1, 32, 64):
        with T.block("S"):
            v_bsz, v_i, v_k = T.axis.remap("SSR", [bsz, i, k])
            with T.init():
                S_pad[v_bsz, v_i] = T.float32(0)
            S_pad[v_bsz, v_i] = S_pad[v_bsz, v_i] + A_pad[v_bsz, v_i, v_k] * A_pad[v_bsz, v_i, v_k]
    for i0, i1 in T.grid(1, 20):
        with T.block("S_pad"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            S[v0, v1] = S_pad[v0, v1]
"""


def test_pad_einsum_docstring_matmul():
    sch = check_after(MATMUL, lambda s: s.pad_einsum("C_shared", [32, 32, 32]), MATMUL_PADDED)
    assert "sch.pad_einsum(block=b0, padding=[32, 32, 32])" in sch.trace.as_python()


def test_pad_einsum_pads_only_what_a_padded_iterator_indexes():
    check_after(MATMUL_NT, lambda s: s.pad_einsum("C", [32, 32, 32]), MATMUL_NT_PADDED)


def test_pad_einsum_rms():
    check_after(RMS, lambda s: s.pad_einsum("S", [1, 32, 1]), RMS_PADDED)


def test_pad_einsum_nothing_to_pad_changes_nothing():
    sch = wb.Schedule(wb.parse(MATMUL_NT))
    func = sch.func
    sch.pad_einsum("C", [1, 8, 16])
    assert sch.func is func


MAX_REDUCE = """
@T.prim_func
def rowmax(A: T.Buffer((8, 7), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 7):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(-1e30)
            B[vi] = T.max(B[vi], A[vi, vk])
"""

SHIFTED = """
@T.prim_func
def shifted(A: T.Buffer((9,), "float32"), B: T.Buffer((7,), "float32")):
    for i in range(7):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi + 1]
"""

ACCUMULATE = """
@T.prim_func
def accumulate(A: T.Buffer((7, 4), "float32"), B: T.Buffer((7,), "float32")):
    for i, k in T.grid(7, 4):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            B[vi] = B[vi] + A[vi, vk]
"""


@pytest.mark.parametrize(
    "text, block, padding, match",
    [
        (MATMUL, "C_shared", [32, 32], "padding must be 3 positive ints"),
        (MATMUL, "C_shared", [32, 0, 32], "padding must be 3 positive ints"),
        (MAX_REDUCE, "B", [1, 8], "is not `C = C \\+ a \\* b"),
        (SHIFTED, "B", [8], "the Einsum pattern"),
        (ACCUMULATE, "B", [8, 1], "has no init"),
    ],
)
def test_pad_einsum_refusals(text, block, padding, match):
    check_refused(text, lambda s: s.pad_einsum(block, padding), match)


def test_pad_einsum_refuses_split_loops():
    check_refused(
        MATMUL_NT,
        lambda s: s.pad_einsum("C", [32, 32, 32]),
        "a loop of its own",
        prepare=lambda s: s.split(s.get_loops(s.get_block("C"))[1], [None, 8]),
    )


def test_pad_einsum_refuses_predicate():
    check_refused(
        MATMUL,
        lambda s: s.pad_einsum("C_shared", [32, 32, 32]),
        "has the predicate",
        prepare=lambda s: s.split(s.get_loops(s.get_block("C_shared"))[0], [None, 2]),
    )


def test_pad_einsum_refuses_loop_binding_no_iterator():
    check_refused(
        MATMUL_NT,
        lambda s: s.pad_einsum("C", [32, 32, 32]),
        "bind no iterator",
        prepare=lambda s: s.add_unit_loop(s.get_block("C")),
    )
