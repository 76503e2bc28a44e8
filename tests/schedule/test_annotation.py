"""annotate / unannotate / add_unit_loop: effects, numeric equality, round-trip, rules."""

import numpy as np
import pytest

import workbench as wb

from workbench.errors import ScheduleError
from workbench.schedule import Schedule
from workbench.testing import (
    check_elementwise,
    check_small,
    check_trace_roundtrip,
    elementwise_func,
    small_schedule,
)

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


def test_annotate_bad_value():
    sch = Schedule(elementwise_func())
    with pytest.raises(ScheduleError, match=r"annotate \(argument 'ann_val'\): annotation values are"):
        sch.annotate("B", "k", object())


def test_annotate_nested_list():
    # (dicts and nested lists were refused before; TVM takes them)
    sch = Schedule(elementwise_func())
    sch.annotate("B", "k", [1, [2]])
    assert sch.get(sch.get_block("B")).annotations["k"] == (1, (2,))
    check_trace_roundtrip(sch)


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


# -- TVM's test_annotate_unannotate_loop / _block (test_tir_schedule_utilities.py), 16 wide ----

MATMUL_RELU = """
@T.prim_func
def matmul_relu(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
                D: T.Buffer((16, 16), "float32")):
    C = T.alloc_buffer((16, 16))
    for i, j, k in T.grid(16, 16, 16):
        with T.block("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(16, 16):
        with T.block("relu"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = T.max(C[vi, vj], T.float32(0))
"""

LOOPS_ANNOTATED = """
@T.prim_func
def matmul_relu(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
                D: T.Buffer((16, 16), "float32")):
    C = T.alloc_buffer((16, 16))
    for i in T.serial(16, annotations={"test1": "aaa", "test4": {"arr": [0, 0], "key": 3}}):
        for j in T.serial(16, annotations={"test2": 612, "test3": ["aa", 1]}):
            for k in range(16):
                with T.block("matmul"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(16, 16):
        with T.block("relu"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = T.max(C[vi, vj], T.float32(0))
"""

BLOCKS_ANNOTATED = """
@T.prim_func
def matmul_relu(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
                D: T.Buffer((16, 16), "float32")):
    C = T.alloc_buffer((16, 16))
    for i, j, k in T.grid(16, 16, 16):
        with T.block("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.block_attr({"test1": "aaa", "test4": {"arr": [0, 0], "key": 3}})
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(16, 16):
        with T.block("relu"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.block_attr({"test2": 0.22, "test3": ["aa", 1]})
            D[vi, vj] = T.max(C[vi, vj], T.float32(0))
"""


def _check_matmul_relu(sch):
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (16, 16)).astype("float32") for _ in range(2))
    d = np.zeros((16, 16), "float32")
    wb.build(sch.func, target="llvm")(a, b, d)
    np.testing.assert_allclose(d, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("on", ["loops", "blocks"])
def test_tvm_annotate_dict_and_list_values(on):
    sch = wb.Schedule(wb.parse(MATMUL_RELU))
    if on == "loops":
        i, j, _ = sch.get_loops("matmul")
        targets, expected = [i, j, j, i], LOOPS_ANNOTATED
        values = ["aaa", 612, ["aa", 1], {"arr": [0, 0], "key": 3}]
    else:
        m, r = sch.get_block("matmul"), sch.get_block("relu")
        targets, expected = [m, r, r, m], BLOCKS_ANNOTATED
        values = ["aaa", 0.22, ["aa", 1], {"arr": [0, 0], "key": 3}]
    for k, (node, value) in enumerate(zip(targets, values)):
        sch.annotate(node, f"test{k + 1}", value)
    wb.assert_structural_equal(sch.func, wb.parse(expected))
    assert 'ann_val={"arr": [0, 0], "key": 3}' in sch.trace.as_python()
    check_trace_roundtrip(sch)  # JSON, Python and the printed TVMScript
    _check_matmul_relu(sch)
    for k, node in enumerate(targets):
        sch.unannotate(node, f"test{k + 1}")
    wb.assert_structural_equal(sch.func, wb.parse(MATMUL_RELU))
    check_trace_roundtrip(sch)


def test_annotate_value_is_kept_from_later_changes_of_the_argument():
    sch = wb.Schedule(wb.parse(MATMUL_RELU))
    value = {"arr": [0, 0]}
    sch.annotate("relu", "k", value)
    value["arr"].append(1)
    assert sch.get(sch.get_block("relu")).annotations["k"] == {"arr": (0, 0)}


@pytest.mark.parametrize("value", [{1: "a"}, {"a": {2}}, [0, object()], {"a": [None]}])
def test_annotate_refuses_other_values(value):
    sch = wb.Schedule(wb.parse(MATMUL_RELU))
    before = sch.func
    with pytest.raises(ScheduleError, match=r"annotate \(argument 'ann_val'\): annotation values are"):
        sch.annotate("relu", "k", value)
    assert sch.func is before
