"""reorder: numeric equality, trace round-trip, the IR it produces, and its rules."""

import pytest

from workbench.errors import ScheduleError
from workbench.schedule import Schedule
from workbench.testing import (
    check_elementwise,
    check_small,
    elementwise_func,
    opaque_func,
    shared_loop_func,
    small_schedule,
    triangular_func,
)

import workbench as wb
from workbench.testing import check_trace_roundtrip

from .tvm_port import check_after, check_refused, check_same_numbers

WORKLOADS = ["GMM", "C2D", "SFM"]


def names(sch, block):
    return [l.loop_var.name for l in sch.get(sch.get_loops(block))]


@pytest.mark.parametrize("name", WORKLOADS)
def test_reverse_every_nest(name):
    sch = small_schedule(name)
    for block in sch.get_child_blocks(sch.get_block("root")):
        before = names(sch, block)
        sch.reorder(*reversed(sch.get_loops(block)))
        assert names(sch, block) == before[::-1]
    check_small(sch, name)


@pytest.mark.parametrize("name", WORKLOADS)
def test_reorder_tiles(name):
    """The multi-level tiling pattern: split every loop, then outer tiles before inner ones."""
    sch = small_schedule(name)
    for block in sch.get_child_blocks(sch.get_block("root")):
        tiles = [sch.split(l, [None, 2]) for l in sch.get_loops(block)]
        sch.reorder(*[t[0] for t in tiles], *[t[1] for t in tiles])
    check_small(sch, name)


def test_reorder_keeps_loops_not_given():
    sch = small_schedule("GMM")
    b, i, j, k = sch.get_loops("Z")
    sch.reorder(k, i)
    assert names(sch, "Z") == ["b", "k", "j", "i"]
    check_small(sch, "GMM")


def test_reorder_one_loop_is_a_no_op():
    sch = small_schedule("GMM")
    before = sch.func
    sch.reorder(sch.get_loops("Z")[1])
    assert sch.func is before


# -- rules --------------------------------------------------------------------------------


def test_reorder_duplicate():
    sch = small_schedule("GMM")
    _, i, j, _ = sch.get_loops("Z")
    with pytest.raises(ScheduleError, match=r"reorder \(argument 'ordered_loops'\): loop 'i' is given twice"):
        sch.reorder(i, j, i)


def test_reorder_not_one_chain():
    sch = Schedule(elementwise_func())
    i, _ = sch.get_loops("B")
    _, j = sch.get_loops("C")
    with pytest.raises(
        ScheduleError, match=r"reorder.*loop '(i|j)' and loop '(i|j)' are not in one loop chain"
    ):
        sch.reorder(j, i)


def test_reorder_sibling_loops():
    sch = Schedule(shared_loop_func())
    _, j = sch.get_loops("B")
    _, j2 = sch.get_loops("C")
    with pytest.raises(ScheduleError, match=r"reorder.*not in one loop chain"):
        sch.reorder(j2, j)


def test_reorder_not_single_branch():
    sch = Schedule(shared_loop_func())
    i, j = sch.get_loops("B")
    with pytest.raises(
        ScheduleError,
        match=r"reorder.*not a single branch: loop 'i' holds other "
        r"statements besides loop 'j'",
    ):
        sch.reorder(j, i)


def test_reorder_opaque_block():
    sch = Schedule(opaque_func())
    i, j = sch.get_loops("B")
    with pytest.raises(ScheduleError, match=r"reorder.*block 'B' below the loops has opaque iterator 'vi'"):
        sch.reorder(j, i)


def test_reorder_dependent_bounds():
    sch = Schedule(triangular_func())
    i, j = sch.get_loops("B")
    with pytest.raises(ScheduleError, match=r"reorder.*the bounds of loop 'j' depend on \['i'\]"):
        sch.reorder(j, i)


def test_reorder_valid_on_shared_loop_inner_part():
    """Reordering inside one branch of a shared loop is fine."""
    sch = Schedule(shared_loop_func())
    b = sch.get_block("B")
    i, j = sch.get_loops(b)
    j0, j1 = sch.split(j, [2, 4])
    sch.reorder(j1, j0)
    check_elementwise(sch)


def test_reorder_refuses_to_swap_loops_mixing_spatial_and_reduce_iters():
    """fuse(j, k) then split leaves two loops that each feed vj and vk: swapping them would
    visit an output's k=3 before its k=0, where the init runs (found by a random sequence)."""
    import workbench as wb
    from workbench.errors import ScheduleError

    sch = wb.Schedule(wb.workloads.get("GMM", b=1, n=4, m=8, k=10))
    _, _, j, k = sch.get_loops(sch.get_block("Z"))
    outer, inner = sch.split(sch.fuse(j, k), factors=[None, 7])
    before = sch.func
    with pytest.raises(ScheduleError, match=r"reorder.*feed both spatial and reduce.*'Z'"):
        sch.reorder(inner, outer)
    assert sch.func is before


# -- TVM's reorder cases (test_tir_schedule_reorder.py), before/after, shapes made small ----------


def _elementwise(order: str = "i, j, k, l", where: str = "") -> str:
    loops = order.split(", ")
    extents = {"i": 4, "j": 6, "k": 8, "l": 10}
    return f"""
@T.prim_func
def elementwise(A: T.Buffer((4, 6, 8, 10), "float32"), B: T.Buffer((4, 6, 8, 10), "float32")):
    for {order} in T.grid({", ".join(str(extents[v]) for v in loops)}):
        with T.block("B"):
            {where}
            vi, vj, vk, vl = T.axis.remap("SSSS", [i, j, k, l])
            B[vi, vj, vk, vl] = A[vi, vj, vk, vl] * T.float32(2)
"""


# TVM's opaque_access less its block "B", whose T.tvm_fill_fragment(..., dtype=...) we do not parse
OPAQUE_ACCESS = """
@T.prim_func
def opaque_access(A: T.Buffer((16, 16), "float32")):
    for {0}, {1} in T.grid(16, 16):
        with T.block("A"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads()
            T.writes(A[0:16, 0:16])
            A[vi, vj] = T.float32(1)
"""

OVERLAPPED = """
@T.prim_func
def overlapped_access(A: T.Buffer((14, 4), "float32"), B: T.Buffer((14, 4), "float32")):
    for {0}, {1}, {2} in T.grid(6, 4, 4):
        with T.block("block"):
            i = T.axis.spatial(14, v0 * 2 + v1)
            j = T.axis.spatial(4, v2)
            B[i, j] = A[i, j] + T.float32(1)
"""

NON_AFFINE = """
@T.prim_func
def non_affine_func(A: T.Buffer((14, 4), "float32"), B: T.Buffer((14, 4), "float32")):
    for {0}, {1}, {2} in T.grid(3, 4, 4):
        with T.block("block"):
            i = T.axis.spatial(14, v0 * v0 + v1)
            j = T.axis.spatial(4, v2)
            B[i, j] = A[i, j] + T.float32(1)
"""

CASCADE = """
@T.prim_func
def cascade_pool_ops(x: T.Buffer((1, 4, 20, 20), "float32"), y2: T.Buffer((1, 4, 16, 16), "float32")):
    y1 = T.alloc_buffer((1, 4, 18, 18))
    for n, c, h, w, kh, kw in T.grid(1, 4, 18, 18, 3, 3):
        with T.block("pool_0"):
            ax0, ax1, ax2, ax3, rv0, rv1 = T.axis.remap("SSSSRR", [n, c, h, w, kh, kw])
            with T.init():
                y1[ax0, ax1, ax2, ax3] = T.float32(0)
            y1[ax0, ax1, ax2, ax3] = y1[ax0, ax1, ax2, ax3] + x[ax0, ax1, ax2 + rv0, ax3 + rv1]
    for n, c, h, w, kh, kw in T.grid(1, 4, 16, 16, 3, 3):
        with T.block("pool_1"):
            ax0, ax1, ax2, ax3, rv0, rv1 = T.axis.remap("SSSSRR", [n, c, h, w, kh, kw])
            with T.init():
                y2[ax0, ax1, ax2, ax3] = T.float32(0)
            y2[ax0, ax1, ax2, ax3] = y2[ax0, ax1, ax2, ax3] + y1[ax0, ax1, ax2 + rv0, ax3 + rv1]
"""

CASCADE_TILE_REORDERED = """
@T.prim_func
def cascade_pool_ops(x: T.Buffer((1, 4, 20, 20), "float32"), y2: T.Buffer((1, 4, 16, 16), "float32")):
    y1 = T.alloc_buffer((1, 4, 18, 18))
    for n, c, h_o in T.grid(1, 4, 4):
        for w, h_i, kh, kw in T.grid(18, 6, 3, 3):
            with T.block("pool_0"):
                ax0 = T.axis.spatial(1, 0)
                ax1 = T.axis.spatial(4, c)
                ax2 = T.axis.spatial(18, h_o * 4 + h_i)
                ax3, rv0, rv1 = T.axis.remap("SRR", [w, kh, kw])
                with T.init():
                    y1[ax0, ax1, ax2, ax3] = T.float32(0)
                y1[ax0, ax1, ax2, ax3] = y1[ax0, ax1, ax2, ax3] + x[ax0, ax1, ax2 + rv0, ax3 + rv1]
        for h_i, w, kh, kw in T.grid(4, 16, 3, 3):
            with T.block("pool_1"):
                ax0 = T.axis.spatial(1, n)
                ax1 = T.axis.spatial(4, c)
                ax2 = T.axis.spatial(16, h_o * 4 + h_i)
                ax3, rv0, rv1 = T.axis.remap("SRR", [w, kh, kw])
                with T.init():
                    y2[ax0, ax1, ax2, ax3] = T.float32(0)
                y2[ax0, ax1, ax2, ax3] = y2[ax0, ax1, ax2, ax3] + y1[ax0, ax1, ax2 + rv0, ax3 + rv1]
"""

NON_SINGLE_BRANCH = """
@T.prim_func
def elementwise_non_single_branch(A: T.Buffer((4, 6, 8), "float32"), B: T.Buffer((4, 6, 8), "float32")):
    C = T.alloc_buffer((4, 6, 8))
    for i, j in T.grid(4, 6):
        for k in range(8):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                C[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
        for k in range(8):
            with T.block("B"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                B[vi, vj, vk] = C[vi, vj, vk] * T.float32(2)
"""

NOT_SAME_SCOPE = """
@T.prim_func
def loops_not_same_scope(A: T.Buffer((4, 6, 8), "float32"), B: T.Buffer((4, 6, 8), "float32")):
    for i, j in T.grid(4, 6):
        with T.block("A"):
            vi, vj = T.axis.remap("SS", [i, j])
            for k in range(8):
                with T.block("B"):
                    vk = T.axis.spatial(8, k)
                    T.reads(A[vi, vj, vk])
                    T.writes(B[vi, vj, vk])
                    B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
"""

# TVM's T.axis.scan iterator, which we do not have, as an opaque one: neither is spatial or reduce
WRONG_ITER_TYPE = """
@T.prim_func
def wrong_block_var_type(A: T.Buffer((4, 6, 8), "float32"), B: T.Buffer((4, 6, 8), "float32")):
    for i, j, k in T.grid(4, 6, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            vk = T.axis.opaque(8, k)
            T.reads(A[vi, vj, vk])
            T.writes(B[vi, vj, vk])
            B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
"""

DEPENDENT = """
@T.prim_func
def elementwise_dependent_loop(A: T.Buffer((4, 6, 8, 10), "float32"), B: T.Buffer((4, 6, 8, 10), "float32")):
    for i in range(4):
        for j, k, l in T.grid(6, i, 10):
            with T.block("B"):
                vi, vj, vk, vl = T.axis.remap("SSSS", [i, j, k, l])
                B[vi, vj, vk, vl] = A[vi, vj, vk, vl] * T.float32(2)
"""

NOT_AFFINE = """
@T.prim_func
def elementwise_not_affine(A: T.Buffer((4, 6, 8, 128), "float32"), B: T.Buffer((4, 6, 8, 128), "float32")):
    for i, j, k, l in T.grid(4, 6, 8, 8):
        with T.block("B"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            vl = T.axis.spatial(128, l * 16)
            B[vi, vj, vk, vl] = A[vi, vj, vk, vl] * T.float32(2)
"""


def _reorder(block, *positions):
    def steps(sch):
        loops = sch.get_loops(sch.get_block(block))
        sch.reorder(*[loops[p] for p in positions])

    return steps


def _cascade_steps(sch):
    pool_0, pool_1 = sch.get_block("pool_0"), sch.get_block("pool_1")
    _, _, h, _, _, _ = sch.get_loops(pool_1)
    h_o, _ = sch.split(h, factors=[None, 4])
    sch.compute_at(pool_0, h_o)
    _, _, _, h_i, w, _, _ = sch.get_loops(pool_0)
    sch.reorder(w, h_i)


REORDER_CASES = {
    "test_reorder": (_elementwise(), _reorder("B", 3, 0), _elementwise("l, j, k, i")),
    "test_reorder2": (_elementwise(), _reorder("B", 2, 0, 3), _elementwise("k, j, i, l")),
    "test_reorder_with_opaque_access": (
        OPAQUE_ACCESS.format("i", "j"),
        _reorder("A", 1, 0),
        OPAQUE_ACCESS.format("j", "i"),
    ),
    "test_reorder_overlapped_access": (
        OVERLAPPED.format("v0", "v1", "v2"),
        _reorder("block", 0, 2, 1),
        OVERLAPPED.format("v0", "v2", "v1"),
    ),
    # v0 * v0 is no affine binding, but v0 stays outside the loops reordered (TVM: partial affinity)
    "test_reorder_with_partial_affineness": (
        NON_AFFINE.format("v0", "v1", "v2"),
        _reorder("block", 2, 1),
        NON_AFFINE.format("v0", "v2", "v1"),
    ),
    "test_reorder_with_cascade_tiled_ops": (CASCADE, _cascade_steps, CASCADE_TILE_REORDERED),
}

REORDER_REFUSED = {
    "test_reorder_with_partial_affineness": (
        NON_AFFINE.format("v0", "v1", "v2"),
        _reorder("block", 0, 2, 1),
        r"block 'block' below the loops is not bound affinely to the loops from loop 'v0' down: "
        r"v0 \* v0 is not a slice of a loop",
    ),
    "test_reorder_with_predicate": (
        _elementwise(where="T.where(i * 480 + j * 80 + k * 10 + l < 100)"),
        _reorder("B", 3, 0),
        r"not bound affinely .*predicate i \* 480 \+ j \* 80 \+ k \* 10 \+ l < 100 bounds no sum",
    ),
    "test_reorder_fail_with_multi_appearance_loops": (
        _elementwise(),
        _reorder("B", 2, 0, 0),
        r"loop 'i' is given twice",
    ),
    "test_reorder_fail_with_non_single_branch_loop[0]": (
        NON_SINGLE_BRANCH,
        _reorder("B", 2, 0),
        r"not a single branch: loop 'j' holds other statements",
    ),
    "test_reorder_fail_with_non_single_branch_loop[1]": (
        NON_SINGLE_BRANCH,
        lambda sch: sch.reorder(
            sch.get_loops(sch.get_block("B"))[2],
            sch.get_loops(sch.get_block("B"))[0],
            sch.get_loops(sch.get_block("C"))[2],
        ),
        r"not in one loop chain",
    ),
    "test_reorder_fail_with_loops_not_under_same_scope": (
        NOT_SAME_SCOPE,
        lambda sch: sch.reorder(sch.get_loops(sch.get_block("B"))[0], sch.get_loops(sch.get_block("A"))[0]),
        r"not in one loop chain",
    ),
    "test_reorder_fail_with_wrong_block_var_type": (
        WRONG_ITER_TYPE,
        _reorder("B", 2, 0),
        r"block 'B' below the loops has opaque iterator 'vk'",
    ),
    "test_reorder_fail_with_dependent_loops": (
        DEPENDENT,
        _reorder("B", 3, 0),
        r"the bounds of loop 'k' depend on \['i'\]",
    ),
    "test_reorder_fail_not_affine_bindings": (
        NOT_AFFINE,
        _reorder("B", 3, 0),
        r"not bound affinely to the loops from loop 'i' down: the values it takes have gaps",
    ),
}


@pytest.mark.parametrize("case", sorted(REORDER_CASES))
def test_tvm_reorder_case(case):
    before, steps, after = REORDER_CASES[case]
    check_after(before, steps, after)


@pytest.mark.parametrize("case", sorted(REORDER_REFUSED))
def test_tvm_reorder_refused(case):
    before, steps, match = REORDER_REFUSED[case]
    check_refused(before, steps, r"^reorder \(argument 'ordered_loops'\): .*" + match)


DIAGONAL = """
@T.prim_func
def diagonal(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            vj = T.axis.spatial(8, i + j)
            B[vi, vj] = A[vi, vj] * T.float32(2)
"""


def test_reorder_refuses_a_loop_feeding_two_iterators():
    """``vi = i, vj = i + j``: loop i feeds both iterators, no affine binding (TVM refuses)."""
    check_refused(
        DIAGONAL,
        _reorder("B", 1, 0),
        r"^reorder \(argument 'ordered_loops'\): block 'B' .* i feeds two iterators",
    )


def test_reorder_after_imperfect_splits_of_a_fused_loop():
    """The guards split leaves (``(f_0 * 5 + f_1) < 32``, ``f_1_0 * 2 + f_1_1 < 5``) bound sums
    the bindings are made of: reordering the split loops stays allowed, as in TVM."""
    sch = wb.Schedule(wb.parse(_elementwise()))
    i, j, k, l = sch.get_loops(sch.get_block("B"))
    f = sch.fuse(k, l)
    f0, f1 = sch.split(f, factors=[None, 7])
    f10, f11 = sch.split(f1, factors=[None, 2])
    sch.reorder(f11, f10, j)
    check_trace_roundtrip(sch)
    check_same_numbers(sch.func, _elementwise())


def test_reorder_refuses_loops_above_an_opaque_scan():
    """A prefix sum in an opaque block reads what the previous iteration wrote: reordering the
    split loops would run it out of order (found by the fuzzer; TVM 0.27 accepts it and computes
    9 of 13 outputs wrong)."""
    from workbench import fuzz

    sch = wb.Schedule(wb.parse(fuzz.SCRIPTS["scan"]))
    a, b, c = sch.split(sch.get_loops("B")[0], [2, None, 4], preserve_unit_iters=False)
    before, steps = sch.func, len(sch.trace)
    with pytest.raises(wb.ScheduleError, match=r"opaque block 'B' .* reads what it writes"):
        sch.reorder(c, b, a)
    assert sch.func is before and len(sch.trace) == steps
    check_same_numbers(sch.func, fuzz.SCRIPTS["scan"])  # the split alone keeps the order
