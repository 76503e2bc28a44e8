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
