"""annotate / unannotate / add_unit_loop: effects, numeric equality, round-trip, rules."""

import pytest

from workbench.errors import ScheduleError
from workbench.schedule import Schedule
from workbench.testing import check_elementwise, check_small, elementwise_func, small_schedule

WORKLOADS = ["GMM", "C2D", "SFM"]


@pytest.mark.parametrize("name", WORKLOADS)
def test_annotate_blocks_and_loops(name):
    sch = small_schedule(name)
    v = sch.sample_categorical(candidates=[0, 16, 64], probs=[0.2, 0.3, 0.5])
    for block in sch.get_child_blocks(sch.get_block("root")):
        loops = sch.get_loops(block)
        sch.annotate(block, "meta_schedule.tiling_structure", "SSRSRS")
        sch.annotate(loops[0], "pragma_auto_unroll_max_step", v)
        # (a list value; lowering pipelines the loop: one stage per statement of its body)
        sch.annotate(loops[-1], "software_pipeline_stage", [0])
        sch.annotate(block, "scale", 0.5)
        sch.unannotate(block, "scale")
    for block in sch.get_child_blocks(sch.get_block("root")):
        node = sch.get(block)
        assert node.annotations == {"meta_schedule.tiling_structure": "SSRSRS"}
        first, last = sch.get(sch.get_loops(block))[0], sch.get(sch.get_loops(block))[-1]
        assert first.annotations == {"pragma_auto_unroll_max_step": sch.get(v)}
        assert last.annotations["software_pipeline_stage"] == (0,)
    check_small(sch, name)


@pytest.mark.parametrize("name", WORKLOADS)
def test_add_unit_loop(name):
    sch = small_schedule(name)
    for block in sch.get_child_blocks(sch.get_block("root")):
        outer = sch.get_loops(block)[0]
        u_block = sch.add_unit_loop(block)
        u_loop = sch.add_unit_loop(outer)
        loops = sch.get_loops(block)
        assert loops[0] is not outer and sch.get(loops[0]) is sch.get(u_loop)
        assert sch.get(loops[-1]) is sch.get(u_block)
        assert sch.get(u_block).extent.value == 1 and sch.get(u_block).loop_var.name == "u"
    check_small(sch, name)


def test_unit_loop_can_be_parallel():
    sch = Schedule(elementwise_func())
    sch.parallel(sch.add_unit_loop("B"))
    check_elementwise(sch)


# -- rules --------------------------------------------------------------------------------


def test_unannotate_missing_key_names_block():
    sch = Schedule(elementwise_func())
    sch.annotate("B", "a", 1)
    with pytest.raises(
        ScheduleError,
        match=r"unannotate \(argument 'ann_key'\): block 'B' has no "
        r"annotation 'b' \(it has: 'a'\)",
    ):
        sch.unannotate("B", "b")


def test_unannotate_missing_key_names_loop():
    sch = Schedule(elementwise_func())
    with pytest.raises(ScheduleError, match=r"unannotate.*loop 'j' has no annotation 'x' \(it has: none\)"):
        sch.unannotate(sch.get_loops("B")[1], "x")


@pytest.mark.parametrize("bad", [{"a": 1}, object(), [1, [2]]])
def test_annotate_bad_value(bad):
    sch = Schedule(elementwise_func())
    with pytest.raises(ScheduleError, match=r"annotate \(argument 'ann_val'\): annotation values are"):
        sch.annotate("B", "k", bad)


def test_annotate_bad_key():
    sch = Schedule(elementwise_func())
    with pytest.raises(ScheduleError, match=r"annotate \(argument 'ann_key'\)"):
        sch.annotate("B", "", 1)


def test_add_unit_loop_above_root():
    sch = Schedule(elementwise_func())
    with pytest.raises(ScheduleError, match=r"add_unit_loop.*root block"):
        sch.add_unit_loop("root")


def test_annotate_unknown_block_name():
    sch = Schedule(elementwise_func())
    with pytest.raises(
        ScheduleError,
        match=r"get_block \(argument 'name'\): no block named 'D' in "
        r"elementwise; blocks: root, B, C",
    ):
        sch.annotate("D", "k", 1)
