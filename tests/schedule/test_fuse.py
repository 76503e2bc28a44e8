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
