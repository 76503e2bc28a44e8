"""Queries: get_block, get_loops, get_child_blocks, get_producers, get_consumers, sch.get."""

import pytest

from workbench.errors import ScheduleError
from workbench.ir.stmt import Block, For
from workbench.schedule import BlockRV, LoopRV, Schedule
from workbench.testing import check_trace_roundtrip, shared_loop_func, small_schedule


def block_names(sch, rvs):
    return [sch.get(b).name for b in rvs]


def test_get_block_and_get():
    sch = small_schedule("GMM")
    z = sch.get_block("Z")
    assert isinstance(z, BlockRV) and isinstance(sch.get(z), Block) and sch.get(z).name == "Z"
    root = sch.get_block("root")
    assert sch.get(root) is sch.func.root


def test_get_loops_are_loop_rvs_outer_to_inner():
    sch = small_schedule("GMM")
    loops = sch.get_loops(sch.get_block("Z"))
    assert all(isinstance(l, LoopRV) for l in loops)
    nodes = sch.get(loops)
    assert all(isinstance(n, For) for n in nodes)
    assert [n.loop_var.name for n in nodes] == ["b", "i", "j", "k"]
    assert nodes[0] is sch.func.root.body and nodes[1] is nodes[0].body


def test_child_blocks():
    sch = small_schedule("SFM")
    root = sch.get_block("root")
    assert block_names(sch, sch.get_child_blocks(root)) == [
        "T_softmax_maxelem",
        "T_softmax_exp",
        "T_softmax_expsum",
        "T_softmax_norm",
    ]
    loop = sch.get_loops("T_softmax_exp")[0]
    assert block_names(sch, sch.get_child_blocks(loop)) == ["T_softmax_exp"]
    shared = Schedule(shared_loop_func())
    assert block_names(shared, shared.get_child_blocks(shared.get_loops("B")[0])) == ["B", "C"]
    assert shared.get_child_blocks("B") == []


def test_producers_and_consumers():
    sch = small_schedule("SFM")
    assert block_names(sch, sch.get_producers("T_softmax_exp")) == ["T_softmax_maxelem"]
    assert block_names(sch, sch.get_consumers("T_softmax_exp")) == ["T_softmax_expsum", "T_softmax_norm"]
    assert block_names(sch, sch.get_producers("T_softmax_norm")) == ["T_softmax_exp", "T_softmax_expsum"]
    assert sch.get_producers("T_softmax_maxelem") == []  # reads only the input (and itself)
    assert sch.get_consumers("T_softmax_norm") == []
    c2d = small_schedule("C2D")
    assert block_names(c2d, c2d.get_consumers("PadInput")) == ["conv2d_nhwc"]


def test_queries_are_recorded_and_replay():
    sch = small_schedule("SFM")
    exp = sch.get_block("T_softmax_exp")
    sch.get_producers(exp)
    consumers = sch.get_consumers(exp)
    sch.split(sch.get_loops(consumers[1])[1], [None, 4])
    kinds = [inst.kind.name for inst in sch.trace]
    assert kinds == ["get_block", "get_producers", "get_consumers", "get_loops", "split"]
    assert str(sch.trace).splitlines()[2] == "b2, b3 = sch.get_consumers(block=b0)"
    check_trace_roundtrip(sch)


def test_get_block_missing_lists_blocks():
    sch = small_schedule("GMM")
    with pytest.raises(
        ScheduleError,
        match=r"get_block \(argument 'name'\): no block named 'C' in "
        r"batch_matmul_nkkm; blocks: root, Z",
    ):
        sch.get_block("C")


def test_get_rv_of_another_schedule():
    a, b = small_schedule("GMM"), small_schedule("GMM")
    z = a.get_block("Z")
    with pytest.raises(ScheduleError, match=r"get: this BlockRV is not a random variable of this schedule"):
        b.get(z)
    with pytest.raises(ScheduleError, match=r"get_loops \(argument 'block'\): this BlockRV is not"):
        b.get_loops(z)


def test_get_list_in_list_out():
    sch = small_schedule("GMM")
    v = sch.sample_categorical([3, 5], [1.0, 0.0])
    loops = sch.get_loops("Z")
    assert sch.get([v, v]) == [3, 3]
    assert sch.get(tuple(loops[:2]))[1].loop_var.name == "i"
