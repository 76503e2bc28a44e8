"""split: numeric equality, trace round-trip, the IR it produces, and its rules."""

import pytest

from workbench.errors import ScheduleError
from workbench.ir.expr import is_const
from workbench.testing import check_elementwise, check_small, elementwise_func, small_schedule
from workbench.schedule import Schedule

from .test_fuse import ELEMENTWISE, OPAQUE_ACCESS, OPAQUE_BLOCK, _inner_loop, _loops
from .tvm_port import check_after, check_refused

WORKLOADS = ["GMM", "C2D", "SFM"]


@pytest.mark.parametrize("name", WORKLOADS)
@pytest.mark.parametrize("preserve", [True, False])
def test_split_every_loop(name, preserve):
    """Perfect, imperfect (predicate) and unit splits of every loop of every block."""
    sch = small_schedule(name)
    for block in sch.get_child_blocks(sch.get_block("root")):
        for n, loop in enumerate(sch.get_loops(block)):
            factors = [[None, 3], [2, None, 1], [1, None]][n % 3]
            sch.split(loop, factors=factors, preserve_unit_iters=preserve)
    check_small(sch, name)


def test_split_ir_and_names():
    sch = small_schedule("GMM")
    _, i, _, _ = sch.get_loops("Z")
    i0, i1 = sch.split(i, factors=[None, 4])
    loops = sch.get(sch.get_loops("Z"))
    assert [l.loop_var.name for l in loops] == ["b", "i_0", "i_1", "j", "k"]
    assert [l.extent.value for l in loops] == [1, 4, 4, 16, 16]
    assert sch.get(i0) is loops[1] and sch.get(i1) is loops[2]
    realize = sch.index.realizes["Z"]
    assert str(realize.iter_values[1]) == "i_0 * 4 + i_1"
    assert is_const(realize.predicate, 1)  # a perfect split needs no guard


def test_imperfect_split_adds_predicate():
    sch = small_schedule("GMM")
    _, i, _, _ = sch.get_loops("Z")
    sch.split(i, factors=[None, 5])  # 16 -> 4 x 5 = 20 iterations
    assert [l.extent.value for l in sch.get(sch.get_loops("Z"))][1:3] == [4, 5]
    assert str(sch.index.realizes["Z"].predicate) == "i_0 * 5 + i_1 < 16"
    check_small(sch, "GMM")


def test_split_with_sampled_factors():
    sch = small_schedule("GMM")
    _, i, j, _ = sch.get_loops("Z")
    factors = sch.sample_perfect_tile(i, n=3, max_innermost_factor=4)
    loops = sch.split(i, factors=factors)
    assert [sch.get(l).extent.value for l in loops] == sch.get(factors)
    check_small(sch, "GMM")


def test_split_keeps_block_untouched():
    """Only the loop skeleton and the bindings change: the block node is shared."""
    sch = small_schedule("GMM")
    before = sch.get(sch.get_block("Z"))
    sch.split(sch.get_loops("Z")[1], [None, 4])
    assert sch.get(sch.get_block("Z")) is before


def test_split_loop_of_one_block_leaves_others_shared():
    sch = Schedule(elementwise_func())
    c_realize = sch.index.realizes["C"]
    sch.split(sch.get_loops("B")[0], [2, 2])
    assert sch.index.realizes["C"] is c_realize
    check_elementwise(sch)


# -- rules --------------------------------------------------------------------------------


def test_split_two_none_factors():
    sch = small_schedule("GMM")
    with pytest.raises(ScheduleError, match=r"split \(argument 'factors'\).*only one factor may be None"):
        sch.split(sch.get_loops("Z")[1], [None, None])


def test_split_product_too_small():
    sch = small_schedule("GMM")
    with pytest.raises(
        ScheduleError, match=r"split.*\[2, 3\] multiply to 6, less than the extent 16 of loop 'i'"
    ):
        sch.split(sch.get_loops("Z")[1], [2, 3])


@pytest.mark.parametrize("bad", [0, -2, 2.5, "4", True])
def test_split_bad_factor(bad):
    sch = small_schedule("GMM")
    with pytest.raises(ScheduleError, match=r"split \(argument 'factors'\): factor 1 is"):
        sch.split(sch.get_loops("Z")[1], [None, bad])


def test_split_needs_two_factors():
    sch = small_schedule("GMM")
    with pytest.raises(ScheduleError, match=r"split.*at least 2 factors"):
        sch.split(sch.get_loops("Z")[1], [16])


def test_split_refuses_parallel_loop():
    sch = small_schedule("GMM")
    i = sch.get_loops("Z")[1]
    sch.parallel(i)
    with pytest.raises(ScheduleError, match=r"split \(argument 'loop'\): loop 'i' is parallel"):
        sch.split(i, [None, 4])


def test_split_refuses_annotated_loop():
    sch = small_schedule("GMM")
    i = sch.get_loops("Z")[1]
    sch.annotate(i, "pragma", 1)
    with pytest.raises(ScheduleError, match=r"split.*loop 'i' has annotations \['pragma'\]"):
        sch.split(i, [None, 4])


def test_split_refuses_block_rv():
    sch = small_schedule("GMM")
    with pytest.raises(ScheduleError, match=r"split \(argument 'loop'\): expected LoopRV, got a BlockRV"):
        sch.split(sch.get_block("Z"), [None, 4])


def test_split_of_removed_loop_names_the_step():
    sch = small_schedule("GMM")
    i = sch.get_loops("Z")[1]
    sch.split(i, [None, 4])
    with pytest.raises(
        ScheduleError,
        match=r"split \(argument 'loop'\): loop 'i' \(l2\) no longer "
        r"exists: step 3 removed it: `l5, l6 = sch.split\(loop=l2",
    ):
        sch.split(i, [None, 2])


# -- TVM's split and add_unit_loop cases (test_tir_schedule_split_fuse.py), shapes made small -----
# TVM's guard of a 3-way split reads ``(i_0 * 2 + i_1) * 3 + i_2 < 16``; ours is its normal form.


def _split_each(*factors):
    def steps(sch):
        for loop, f in zip(_loops(sch, "B"), factors):
            sch.split(loop, factors=f)

    return steps


def _split_first(block, factors, at=0):
    return lambda sch: sch.split(_loops(sch, block)[at], factors=factors)


ZERO_DIM = """
@T.prim_func
def zero_dim(A: T.Buffer((), "int32"), B: T.Buffer((), "int32"), C: T.Buffer((), "int32")):
    with T.block("C"):
        vi = T.axis.spatial(1, 0)
        C[()] = A[()] + B[()]
"""

ZERO_DIM_UNIT_LOOP = """
@T.prim_func
def zero_dim(A: T.Buffer((), "int32"), B: T.Buffer((), "int32"), C: T.Buffer((), "int32")):
    for u in range(1):
        with T.block("C"):
            vi = T.axis.spatial(1, 0)
            C[()] = A[()] + B[()]
"""

SPLIT_CASES = {
    # TVM's test_split runs with and without disable_predication (an argument we do not have);
    # these factors are exact, so both give this
    "test_split": (
        ELEMENTWISE,
        _split_each([2, 1, 8], [3, 4], [4, 2]),
        """
@T.prim_func
def elementwise(A: T.Buffer((16, 12, 8), "float32"), B: T.Buffer((16, 12, 8), "float32")):
    for i_0, i_1, i_2, j_0, j_1, k_0, k_1 in T.grid(2, 1, 8, 3, 4, 4, 2):
        with T.block("B"):
            vi = T.axis.spatial(16, i_0 * 8 + i_1 * 8 + i_2)
            vj = T.axis.spatial(12, j_0 * 4 + j_1)
            vk = T.axis.spatial(8, k_0 * 2 + k_1)
            B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
""",
    ),
    "test_split_with_inferred_factor": (
        ELEMENTWISE,
        _split_each([None, 1, 8], [2, None, 6], [2, 1, None]),
        """
@T.prim_func
def elementwise(A: T.Buffer((16, 12, 8), "float32"), B: T.Buffer((16, 12, 8), "float32")):
    for i_0, i_1, i_2, j_0, j_1, j_2, k_0, k_1, k_2 in T.grid(2, 1, 8, 2, 1, 6, 2, 1, 4):
        with T.block("B"):
            vi = T.axis.spatial(16, i_0 * 8 + i_1 * 8 + i_2)
            vj = T.axis.spatial(12, j_0 * 6 + j_1 * 6 + j_2)
            vk = T.axis.spatial(8, k_0 * 4 + k_1 * 4 + k_2)
            B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
""",
    ),
    "test_split_with_predicate": (
        ELEMENTWISE,
        _split_each([3, 2, 3], [None, 13], [3, None]),
        """
@T.prim_func
def elementwise(A: T.Buffer((16, 12, 8), "float32"), B: T.Buffer((16, 12, 8), "float32")):
    for i_0, i_1, i_2, j_0, j_1, k_0, k_1 in T.grid(3, 2, 3, 1, 13, 3, 3):
        with T.block("B"):
            vi = T.axis.spatial(16, i_0 * 6 + i_1 * 3 + i_2)
            vj = T.axis.spatial(12, j_0 * 13 + j_1)
            vk = T.axis.spatial(8, k_0 * 3 + k_1)
            T.where(i_0 * 6 + i_1 * 3 + i_2 < 16 and j_0 * 13 + j_1 < 12 and k_0 * 3 + k_1 < 8)
            B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
""",
    ),
    "test_split_with_opaque_block": (
        OPAQUE_BLOCK,
        _split_first("opaque", [None, 4]),
        """
@T.prim_func
def elementwise_with_opaque_block(A: T.Buffer((16, 12, 8), "float32"), B: T.Buffer((16, 12, 8), "float32")):
    for i_0, i_1, j, k in T.grid(4, 4, 12, 8):
        with T.block("opaque"):
            T.reads(A[i_0 * 4 + i_1, j, k])
            T.writes(B[i_0 * 4 + i_1, j, k])
            with T.block("B"):
                vi = T.axis.spatial(16, i_0 * 4 + i_1)
                vj, vk = T.axis.remap("SS", [j, k])
                T.reads(A[vi, vj, vk])
                T.writes(B[vi, vj, vk])
                B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
""",
    ),
    "test_split_with_opaque_access": (
        OPAQUE_ACCESS,
        _split_first("A", [None, 4], at=1),
        """
@T.prim_func
def opaque_access(A: T.Buffer((16, 16), "float32")):
    for i, j_0, j_1 in T.grid(16, 4, 4):
        with T.block("A"):
            vi = T.axis.spatial(16, i)
            vj = T.axis.spatial(16, j_0 * 4 + j_1)
            T.reads()
            T.writes(A[0:16, 0:16])
            A[vi, vj] = T.float32(1)
""",
    ),
    "test_add_unit_loop_above_block": (
        ZERO_DIM,
        lambda sch: sch.add_unit_loop(sch.get_block("C")),
        ZERO_DIM_UNIT_LOOP,
    ),
    "test_add_unit_loop_above_loop": (
        ZERO_DIM_UNIT_LOOP,
        lambda sch: sch.add_unit_loop(sch.get_loops(sch.get_block("C"))[0]),
        """
@T.prim_func
def zero_dim(A: T.Buffer((), "int32"), B: T.Buffer((), "int32"), C: T.Buffer((), "int32")):
    for u_1, u in T.grid(1, 1):
        with T.block("C"):
            vi = T.axis.spatial(1, 0)
            C[()] = A[()] + B[()]
""",
    ),
}


def _split_k(sch):
    sch.split(_loops(sch, "B")[-1], factors=[None, 10])


SPLIT_REFUSED = {
    "test_fuse_split_fail_with_annotation": (
        _inner_loop("anno"),
        _split_k,
        r"loop 'k' has annotations \['useless_annotation'\]",
    ),
    "test_fuse_split_fail_not_start_with_zero": (
        _inner_loop("start"),
        _split_k,
        r"loop 'k' starts at 2, not 0",
    ),
    "test_fuse_split_fail_with_thread_binding": (
        _inner_loop("thread"),
        _split_k,
        r"loop 'k' is thread_binding \(threadIdx.x\)",
    ),
    "test_split_with_non_positive_factors[0]": (
        ELEMENTWISE,
        _split_first("B", [-2, -64]),
        r"factor 0 is -2",
    ),
    "test_split_with_non_positive_factors[1]": (
        ELEMENTWISE,
        _split_first("B", [0, None], at=1),
        r"factor 0 is 0",
    ),
    "test_split_with_non_positive_factors[2]": (
        ELEMENTWISE,
        _split_first("B", [None, -16], at=2),
        r"factor 1 is -16",
    ),
}


@pytest.mark.parametrize("case", sorted(SPLIT_CASES))
def test_tvm_split_case(case):
    before, steps, after = SPLIT_CASES[case]
    check_after(before, steps, after)


@pytest.mark.parametrize("case", sorted(SPLIT_REFUSED))
def test_tvm_split_refused(case):
    before, steps, match = SPLIT_REFUSED[case]
    check_refused(before, steps, r"^split \(argument '(loop|factors)'\): " + match)


def test_split_opaque_block_builds_with_every_use_substituted():
    """Issue 24: the opaque block's regions kept ``i`` after the split, unbound: the build failed
    with "variable 'i' is used but never bound"."""
    from workbench.ir.functor import free_vars

    sch = check_after(*SPLIT_CASES["test_split_with_opaque_block"])
    assert "i" not in {v.name for v in free_vars(sch.func.body)}


def test_split_guard_goes_to_the_opaque_block_only():
    """The guard of an imperfect split is the predicate of the blocks directly under the loop:
    the block nested in the opaque one runs only when its parent does, and gets none."""
    sch = check_after(
        OPAQUE_BLOCK,
        _split_first("opaque", [None, 5]),
        """
@T.prim_func
def elementwise_with_opaque_block(A: T.Buffer((16, 12, 8), "float32"), B: T.Buffer((16, 12, 8), "float32")):
    for i_0, i_1, j, k in T.grid(4, 5, 12, 8):
        with T.block("opaque"):
            T.where(i_0 * 5 + i_1 < 16)
            T.reads(A[i_0 * 5 + i_1, j, k])
            T.writes(B[i_0 * 5 + i_1, j, k])
            with T.block("B"):
                vi = T.axis.spatial(16, i_0 * 5 + i_1)
                vj, vk = T.axis.remap("SS", [j, k])
                T.reads(A[vi, vj, vk])
                T.writes(B[vi, vj, vk])
                B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
""",
    )
    assert sch.index.realizes["B"].predicate.value
