"""fuse: numeric equality, trace round-trip, the IR it produces, and its rules."""

import pytest

from workbench.errors import ScheduleError
from workbench.ir.stmt import ForKind
from workbench.schedule import Schedule
from workbench.testing import (
    check_elementwise,
    check_small,
    elementwise_func,
    shared_loop_func,
    small_schedule,
)
from .tvm_port import check_after, check_refused

WORKLOADS = ["GMM", "C2D", "SFM"]


@pytest.mark.parametrize("name", WORKLOADS)
def test_fuse_all_loops_of_every_block(name):
    sch = small_schedule(name)
    for block in sch.get_child_blocks(sch.get_block("root")):
        sch.fuse(*sch.get_loops(block))
    for block in sch.get_child_blocks(sch.get_block("root")):
        assert len(sch.get_loops(block)) == 1
    check_small(sch, name)


@pytest.mark.parametrize("name", WORKLOADS)
@pytest.mark.parametrize("preserve", [True, False])
def test_fuse_after_split(name, preserve):
    """Fusing split loops back (and across the original loop boundary)."""
    sch = small_schedule(name)
    for block in sch.get_child_blocks(sch.get_block("root")):
        loops = sch.get_loops(block)
        _, inner = sch.split(loops[-1], [None, 2])
        outer_of_first, inner_of_first = sch.split(loops[0], [None, 1])
        sch.fuse(outer_of_first, inner_of_first, preserve_unit_iters=preserve)
    check_small(sch, name)


def test_fuse_ir():
    sch = Schedule(elementwise_func())
    i, j = sch.get_loops("B")
    fused = sch.fuse(i, j)
    loop = sch.get(fused)
    assert loop.loop_var.name == "i_j_fused" and loop.extent.value == 32
    realize = sch.index.realizes["B"]
    assert [str(v) for v in realize.iter_values] == ["i_j_fused // 8", "i_j_fused % 8"]
    check_elementwise(sch)


def test_fuse_then_split_simplifies_back():
    sch = Schedule(elementwise_func())
    fused = sch.fuse(*sch.get_loops("B"))
    sch.split(fused, [4, 8])
    realize = sch.index.realizes["B"]
    assert [str(v) for v in realize.iter_values] == ["i_j_fused_0", "i_j_fused_1"]


def test_fuse_single_loop_renames():
    sch = Schedule(elementwise_func())
    i, _ = sch.get_loops("B")
    assert sch.get(sch.fuse(i)).loop_var.name == "i_fused"
    check_elementwise(sch)


@pytest.mark.parametrize("kinds", [("parallel", "parallel"), ("parallel", "unroll"), ("unroll", "vectorize")])
def test_fuse_accepts_any_loop_kind_and_gives_a_serial_loop(kinds):
    """As TVM's fuse: loops of any kind fuse; the fused loop is serial (kinds are reset)."""
    sch = small_schedule("GMM")
    b, i, j, _ = sch.get_loops("Z")
    outer, inner = sch.fuse(b, i), j
    getattr(sch, kinds[0])(outer)
    getattr(sch, kinds[1])(inner)
    fused = sch.fuse(outer, inner)
    assert sch.get(fused).kind == ForKind.SERIAL
    check_small(sch, "GMM")


def test_fuse_of_a_parallel_loop_then_parallel_again():
    """What TVM's RewriteParallelVectorizeUnroll records for a block computed under an
    already parallel loop: fuse that one loop, parallelize the result."""
    sch = small_schedule("GMM")
    b, i, j, k = sch.get_loops("Z")
    fused = sch.fuse(b, i, j)
    sch.parallel(fused)
    again = sch.fuse(fused)
    sch.parallel(again)
    assert sch.get(again).kind == ForKind.PARALLEL
    assert sch.get(again).loop_var.name == "b_i_j_fused_fused"
    check_small(sch, "GMM")


# -- rules --------------------------------------------------------------------------------


def test_fuse_inner_to_outer():
    sch = Schedule(elementwise_func())
    i, j = sch.get_loops("B")
    with pytest.raises(
        ScheduleError,
        match=r"fuse \(argument 'loops'\): loops must be given outer "
        r"to inner, but loop 'i' encloses loop 'j'",
    ):
        sch.fuse(j, i)


def test_fuse_not_only_child():
    sch = Schedule(shared_loop_func())
    i, j = sch.get_loops("B")
    with pytest.raises(
        ScheduleError,
        match=r"fuse.*loop 'j' is not the only statement in the body "
        r"of loop 'i'",
    ):
        sch.fuse(i, j)


def test_fuse_loops_of_different_blocks():
    sch = Schedule(elementwise_func())
    i, _ = sch.get_loops("B")
    _, j = sch.get_loops("C")
    with pytest.raises(ScheduleError, match=r"fuse.*loop 'j' is not inside loop 'i'"):
        sch.fuse(i, j)


def test_fuse_duplicate():
    sch = Schedule(elementwise_func())
    i, _ = sch.get_loops("B")
    with pytest.raises(ScheduleError, match=r"fuse.*loop 'i' is given twice"):
        sch.fuse(i, i)


def test_fuse_nothing():
    sch = Schedule(elementwise_func())
    with pytest.raises(ScheduleError, match=r"fuse.*at least one loop"):
        sch.fuse()


def test_fuse_refuses_bound_loop():
    sch = Schedule(elementwise_func())
    i, j = sch.get_loops("B")
    sch.bind(j, "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"fuse.*loop 'j' is thread_binding \(threadIdx.x\)"):
        sch.fuse(i, j)


def test_fuse_refuses_annotated_loop():
    sch = Schedule(elementwise_func())
    i, j = sch.get_loops("B")
    sch.annotate(j, "pragma_auto_unroll_max_step", 16)
    with pytest.raises(
        ScheduleError,
        match=r"fuse.*loop 'j' has annotations "
        r"\['pragma_auto_unroll_max_step'\]",
    ):
        sch.fuse(i, j)


def test_fuse_refuses_non_loops():
    sch = Schedule(elementwise_func())
    i, _ = sch.get_loops("B")
    with pytest.raises(ScheduleError, match=r"fuse \(argument 'loops'\): expected LoopRV"):
        sch.fuse(i, sch.get_block("B"))


# -- TVM's fuse cases (test_tir_schedule_split_fuse.py), before/after, shapes made small ----------
# The fused index of a middle loop reads ``f // 8 % 12`` here and ``f % 96 // 8`` in TVM: the same
# value, in our simplifier's normal form.

ELEMENTWISE = """
@T.prim_func
def elementwise(A: T.Buffer((16, 12, 8), "float32"), B: T.Buffer((16, 12, 8), "float32")):
    for i, j, k in T.grid(16, 12, 8):
        with T.block("B"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
"""

OPAQUE_BLOCK = """
@T.prim_func
def elementwise_with_opaque_block(A: T.Buffer((16, 12, 8), "float32"), B: T.Buffer((16, 12, 8), "float32")):
    for i, j, k in T.grid(16, 12, 8):
        with T.block("opaque"):
            T.reads(A[i, j, k])
            T.writes(B[i, j, k])
            with T.block("B"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                T.reads(A[vi, vj, vk])
                T.writes(B[vi, vj, vk])
                B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
"""

# TVM's opaque_access less its block "B", whose T.tvm_fill_fragment(..., dtype=...) we do not parse
OPAQUE_ACCESS = """
@T.prim_func
def opaque_access(A: T.Buffer((16, 16), "float32")):
    for i, j in T.grid(16, 16):
        with T.block("A"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads()
            T.writes(A[0:16, 0:16])
            A[vi, vj] = T.float32(1)
"""

NOT_AFFINE = """
@T.prim_func
def elementwise_not_affine(A: T.Buffer((127, 16), "float32"), B: T.Buffer((127, 16), "float32")):
    for i in range(4):
        for j, k in T.grid(T.min(31, 126 - i * 32) + 1, 16):
            with T.block("B"):
                vi = T.axis.spatial(127, i * 32 + j)
                vj = T.axis.spatial(16, k)
                B[vi, vj] = A[vi, vj]
"""

WITH_SEQ = """
@T.prim_func
def elementwise_with_seq(A: T.Buffer((16, 12, 8), "float32"), B: T.Buffer((16, 12, 8), "float32")):
    C = T.alloc_buffer((16, 12, 8))
    for i, j in T.grid(16, 12):
        for k in range(8):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                C[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
        for k in range(8):
            with T.block("B"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                B[vi, vj, vk] = C[vi, vj, vk] * T.float32(2)
"""


def _inner_loop(kind: str) -> str:
    """TVM's elementwise_with_anno / _with_starting_point / _with_thread_binding: loop k made
    annotated, starting at 2, or bound to threadIdx.x."""
    header = {
        "anno": 'T.serial(0, 8, annotations={"useless_annotation": True})',
        "start": "T.serial(2, 8)",
        "thread": 'T.thread_binding(0, 8, thread="threadIdx.x")',
    }[kind]
    return f"""
@T.prim_func
def elementwise_{kind}(A: T.Buffer((16, 12, 8), "float32"), B: T.Buffer((16, 12, 8), "float32")):
    for i, j in T.grid(16, 12):
        for k in {header}:
            with T.block("B"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
"""


DEPENDENT = """
@T.prim_func
def elementwise_dependent_loops(A: T.Buffer((16, 16, 8), "float32"), B: T.Buffer((16, 16, 8), "float32")):
    for i in range(16):
        for j, k in T.grid(i, 8):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                vj = T.axis.spatial(16, j)
                vk = T.axis.spatial(8, k)
                B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
"""


def _loops(sch, block):
    return sch.get_loops(sch.get_block(block))


def _fuse_all(block):
    return lambda sch: sch.fuse(*_loops(sch, block))


def _fuse_inner_two(block):
    def steps(sch):
        loops = _loops(sch, block)
        sch.fuse(loops[-2], loops[-1])

    return steps


FUSE_CASES = {
    "test_fuse": (
        ELEMENTWISE,
        _fuse_all("B"),
        """
@T.prim_func
def elementwise(A: T.Buffer((16, 12, 8), "float32"), B: T.Buffer((16, 12, 8), "float32")):
    for i_j_k_fused in range(1536):
        with T.block("B"):
            vi = T.axis.spatial(16, i_j_k_fused // 96)
            vj = T.axis.spatial(12, i_j_k_fused // 8 % 12)
            vk = T.axis.spatial(8, i_j_k_fused % 8)
            B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
""",
    ),
    "test_fuse_with_opaque_block": (
        OPAQUE_BLOCK,
        _fuse_all("opaque"),
        """
@T.prim_func
def elementwise_with_opaque_block(A: T.Buffer((16, 12, 8), "float32"), B: T.Buffer((16, 12, 8), "float32")):
    for i_j_k_fused in range(1536):
        with T.block("opaque"):
            T.reads(A[i_j_k_fused // 96, i_j_k_fused // 8 % 12, i_j_k_fused % 8])
            T.writes(B[i_j_k_fused // 96, i_j_k_fused // 8 % 12, i_j_k_fused % 8])
            with T.block("B"):
                vi = T.axis.spatial(16, i_j_k_fused // 96)
                vj = T.axis.spatial(12, i_j_k_fused // 8 % 12)
                vk = T.axis.spatial(8, i_j_k_fused % 8)
                T.reads(A[vi, vj, vk])
                T.writes(B[vi, vj, vk])
                B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
""",
    ),
    "test_fuse_with_opaque_access": (
        OPAQUE_ACCESS,
        _fuse_all("A"),
        """
@T.prim_func
def opaque_access(A: T.Buffer((16, 16), "float32")):
    for i_j_fused in range(256):
        with T.block("A"):
            vi = T.axis.spatial(16, i_j_fused // 16)
            vj = T.axis.spatial(16, i_j_fused % 16)
            T.reads()
            T.writes(A[0:16, 0:16])
            A[vi, vj] = T.float32(1)
""",
    ),
    "test_fuse_not_affine": (
        NOT_AFFINE,
        _fuse_inner_two("B"),
        """
@T.prim_func
def elementwise_not_affine(A: T.Buffer((127, 16), "float32"), B: T.Buffer((127, 16), "float32")):
    for i in range(4):
        for j_k_fused in range(T.min(31, 126 - i * 32) * 16 + 16):
            with T.block("B"):
                vi = T.axis.spatial(127, i * 32 + j_k_fused // 16)
                vj = T.axis.spatial(16, j_k_fused % 16)
                B[vi, vj] = A[vi, vj]
""",
    ),
}

FUSE_REFUSED = {
    "test_fuse_fail_not_only_child": (WITH_SEQ, _fuse_inner_two("B"), r"loop 'k' is not the only statement"),
    "test_fuse_split_fail_with_annotation": (
        _inner_loop("anno"),
        _fuse_inner_two("B"),
        r"loop 'k' has annotations \['useless_annotation'\]",
    ),
    "test_fuse_split_fail_not_start_with_zero": (
        _inner_loop("start"),
        _fuse_inner_two("B"),
        r"loop 'k' starts at 2, not 0",
    ),
    "test_fuse_split_fail_with_thread_binding": (
        _inner_loop("thread"),
        _fuse_inner_two("B"),
        r"loop 'k' is thread_binding \(threadIdx.x\)",
    ),
    "test_fuse_fail_with_dependent_loops": (
        DEPENDENT,
        lambda sch: sch.fuse(*_loops(sch, "B")[:2]),
        r"the extent i of loop 'j' depends on \['i'\], fused with it",
    ),
}


@pytest.mark.parametrize("case", sorted(FUSE_CASES))
def test_tvm_fuse_case(case):
    before, steps, after = FUSE_CASES[case]
    check_after(before, steps, after)


@pytest.mark.parametrize("case", sorted(FUSE_REFUSED))
def test_tvm_fuse_refused(case):
    before, steps, match = FUSE_REFUSED[case]
    check_refused(before, steps, r"^fuse \(argument 'loops'\): " + match)


def test_fuse_opaque_block_builds_with_every_use_substituted():
    """Issue 24: the opaque block's regions kept ``i, j, k`` after the fuse (unbound: the build
    failed); now no use of a fused variable is left anywhere under the new loop."""
    sch = check_after(*FUSE_CASES["test_fuse_with_opaque_block"])
    from workbench.ir.functor import free_vars

    assert {v.name for v in free_vars(sch.func.body)} >= {"i_j_k_fused"}
    assert not {"i", "j", "k"} & {v.name for v in free_vars(sch.func.body)}
