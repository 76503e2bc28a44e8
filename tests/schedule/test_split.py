"""split: numeric equality, trace round-trip, the IR it produces, and its rules."""

import pytest

from workbench.errors import ScheduleError
from workbench.ir.expr import is_const
from workbench.testing import check_elementwise, check_small, elementwise_func, small_schedule
from workbench.schedule import Schedule

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
