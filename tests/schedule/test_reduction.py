"""rfactor and decompose_reduction: numeric equality (python and llvm), trace round-trip, the IR
they produce, and every rule they enforce."""

import numpy as np
import pytest

import workbench as wb
from workbench import workloads
from workbench.errors import ScheduleError
from workbench.ir import dsl
from workbench.ir.expr import Sub, Var
from workbench.ir.stmt import make_for
from workbench.ir.verify import verify
from workbench.schedule import Schedule
from workbench.ir.index import index, replace
from workbench.testing import (
    check_numeric,
    check_small,
    check_trace_roundtrip,
    elementwise_func,
    shared_loop_func,
    small_schedule,
)

from .tvm_port import check_after


def check(sch, name):
    """Valid IR, the numpy reference through both targets, and the trace round-trip."""
    verify(sch.func)
    check_small(sch, name)
    check_numeric(sch, name, target="llvm", **workloads.small(name))


def block_names(sch):
    return list(sch.index.realizes)


# -- rfactor -------------------------------------------------------------------------------


@pytest.mark.parametrize("factor_axis", [0, 1, -1])
def test_rfactor_nrm_fused_split(factor_axis):
    """NRM: the two reduce loops fused and split; the inner part becomes the factored axis."""
    sch = small_schedule("NRM")
    _, i, j = sch.get_loops("C")
    _, inner = sch.split(sch.fuse(i, j), [None, 4])
    rf = sch.rfactor(inner, factor_axis=factor_axis)
    assert sch.get(rf).name == "C_rf"
    rf_buf = sch.get(rf).writes[0].buffer
    assert rf_buf.name == "C_rf"
    assert rf_buf.shape == ((4, 2) if factor_axis == 0 else (2, 4))
    # the write-back block reduces over the factored loop only: b and the rfactor loop remain
    wb_loops = sch.get(sch.get_loops("C"))
    assert [l.extent.value for l in wb_loops] == [2, 4]
    assert [iv.iter_type for iv in sch.get(sch.get_block("C")).iter_vars] == ["R", "S"]
    check(sch, "NRM")


def test_rfactor_then_decompose_nrm():
    sch = small_schedule("NRM")
    _, _, j = sch.get_loops("C")
    rf = sch.rfactor(j, factor_axis=0)  # the whole j loop is the factored axis
    init = sch.decompose_reduction(rf, sch.get_loops(rf)[1])
    assert sch.get(init).name == "C_rf_init" and sch.get(rf).init is None
    check(sch, "NRM")


@pytest.mark.parametrize("block", ["T_softmax_maxelem", "T_softmax_expsum"])
def test_rfactor_sfm_max_and_sum(block):
    """SFM: a max and a sum reduction, each factored by the inner part of its split k loop."""
    sch = small_schedule("SFM")
    _, k = sch.get_loops(block)
    _, k1 = sch.split(k, [None, 4])
    rf = sch.rfactor(k1, factor_axis=1)
    init = sch.decompose_reduction(rf, sch.get_loops(rf)[0])
    assert sch.get(init).name == block + "_rf_init"
    check(sch, "SFM")


def test_rfactor_gmm_keeps_other_reduce_iters():
    """GMM: k split in three, rfactor by the middle part; the outer part stays a reduce
    iterator of the rfactor block, the write-back block keeps the spatial loops and k_1."""
    sch = small_schedule("GMM")
    _, _, _, k = sch.get_loops("Z")
    _, k1, _ = sch.split(k, [2, 4, None])
    rf = sch.rfactor(k1, factor_axis=2)
    types = "".join(iv.iter_type for iv in sch.get(rf).iter_vars)
    assert types == "SSSSRR"
    assert [l.loop_var.name for l in sch.get(sch.get_loops("Z"))] == ["b", "i", "j", "k_1"]
    check(sch, "GMM")


def test_rfactor_imperfect_split_keeps_guard():
    """A predicate on the removed loops guards the rfactor block only."""
    sch = small_schedule("NRM")
    _, _, j = sch.get_loops("C")
    _, j1 = sch.split(j, [None, 5])  # 16 -> 4 x 5: guarded
    rf = sch.rfactor(j1, factor_axis=0)
    assert "< 16" in str(sch.index.realizes[sch.get(rf).name].predicate)
    check(sch, "NRM")


def test_rfactor_trace_text():
    sch = small_schedule("NRM")
    _, _, j = sch.get_loops("C")
    sch.rfactor(j, factor_axis=-1)
    assert "b4 = sch.rfactor(loop=l3, factor_axis=-1)" in str(sch.trace)


# -- decompose_reduction -----------------------------------------------------------------


@pytest.mark.parametrize("at", [1, 3])
def test_decompose_gmm(at):
    """GMM: init before the i loop (it loops over i, j) or before the k loop (no loop)."""
    sch = small_schedule("GMM")
    loops = sch.get_loops("Z")
    init = sch.decompose_reduction("Z", loops[at])
    init_block = sch.get(init)
    assert init_block.name == "Z_init" and sch.get(sch.get_block("Z_update")).init is None
    assert [iv.var.name for iv in init_block.iter_vars] == ["vb_init", "vi_init", "vj_init"]
    copied = [l.loop_var.name for l in sch.get(sch.get_loops(init))]
    assert copied == (["b", "i_init", "j_init"] if at == 1 else ["b", "i", "j"])
    check(sch, "GMM")


def test_decompose_gmm_after_split():
    sch = small_schedule("GMM")
    b, i, j, k = sch.get_loops("Z")
    i0, i1 = sch.split(i, [None, 4])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, k0, i1, j, k1)
    sch.decompose_reduction("Z", k0)  # the init nest loops over i1 and j
    assert [l.loop_var.name for l in sch.get(sch.get_loops("Z_init"))] == ["b", "i_0", "i_1_init", "j_init"]
    check(sch, "GMM")


def test_decompose_tbg():
    sch = small_schedule("TBG")
    loops = sch.get_loops("C")
    sch.decompose_reduction("C", loops[2])
    check(sch, "TBG")


# -- rules ---------------------------------------------------------------------------------


def test_rfactor_spatial_loop():
    sch = small_schedule("GMM")
    with pytest.raises(ScheduleError, match=r"rfactor \(argument 'loop'\).*feeds a spatial iterator"):
        sch.rfactor(sch.get_loops("Z")[1], 0)


def test_rfactor_unbound_loop():
    """A loop feeding no iterator repeats the whole reduction: one partial result per iteration
    would count every term once per iteration (a unit loop is fine, see test_rfactor_unit_loop)."""
    func = workloads.get("NRM", **workloads.small("NRM"))
    top = index(func).loops_above(index(func).realizes["C"])[0]
    sch = Schedule(replace(func, top, make_for(Var("x"), 2, top)))
    x = sch.get_loops("C")[0]
    before, n = sch.func, len(sch.trace)
    with pytest.raises(ScheduleError, match=r"loop 'x' is not bound to any reduce iterator.*extent 1"):
        sch.rfactor(x, 0)
    assert sch.func is before and len(sch.trace) == n


def test_rfactor_loop_feeding_both_kinds():
    sch = small_schedule("GMM")
    _, _, j, k = sch.get_loops("Z")
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(k0, j)
    sch.fuse(k0, j)
    with pytest.raises(ScheduleError, match="feeds both spatial and reduce iterators"):
        sch.rfactor(k1, 0)


def _nrm_with_update(make_value):
    func = workloads.get("NRM", **workloads.small("NRM"))
    block = index(func).block("C")
    body = block.body.with_(value=make_value(block.body.value))
    return Schedule(replace(func, block, block.with_(body=body)))


def test_rfactor_non_associative_update():
    sch = _nrm_with_update(lambda v: Sub(v.a, v.b))  # C = C - A*A
    with pytest.raises(ScheduleError, match=r"not an associative reduction; expected C = C \+ x"):
        sch.rfactor(sch.get_loops("C")[2], 0)


def test_rfactor_update_reading_output_twice():
    sch = _nrm_with_update(lambda v: v.a + v.a)  # C = C + C
    with pytest.raises(ScheduleError, match="with x not reading C"):
        sch.rfactor(sch.get_loops("C")[2], 0)


def test_rfactor_init_not_identity():
    A = dsl.placeholder((4, 8), name="A")
    k = dsl.reduce_axis(8)
    B = dsl.compute((4,), lambda i: dsl.sum(A[i, k], axis=k, init=1.0), name="B")
    sch = Schedule(dsl.create_func([A, B]))
    with pytest.raises(ScheduleError, match=r"init value T.float32\(1\) is not the identity of the sum"):
        sch.rfactor(sch.get_loops("B")[1], 0)


def test_rfactor_not_a_reduction_block():
    sch = Schedule(elementwise_func())
    with pytest.raises(ScheduleError, match="block 'B' is not a reduction block: it has no init"):
        sch.rfactor(sch.get_loops("B")[1], 0)


def test_rfactor_loop_over_two_blocks():
    sch = Schedule(shared_loop_func())
    with pytest.raises(ScheduleError, match="holds 2 blocks; rfactor needs exactly one"):
        sch.rfactor(sch.get_loops("B")[0], 0)


@pytest.mark.parametrize("axis", [2, -3, 1.0])
def test_rfactor_factor_axis_range(axis):
    sch = small_schedule("NRM")
    with pytest.raises(ScheduleError, match=r"\(argument 'factor_axis'\).*must be an int in \[-2, 1\]"):
        sch.rfactor(sch.get_loops("C")[2], axis)


def test_rfactor_non_serial_loop():
    sch = small_schedule("NRM")
    j = sch.get_loops("C")[2]
    sch.unroll(j)
    with pytest.raises(ScheduleError, match="loop 'j' is unrolled; rfactor applies to a serial"):
        sch.rfactor(j, 0)


def test_rfactor_unbound_loop_under_reduce_loop():
    func = workloads.get("NRM", **workloads.small("NRM"))
    realize = index(func).realizes["C"]
    func = replace(func, realize, make_for(Var("x"), 2, realize))
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match="loop 'x' feeds no iterator .* under a reduce loop"):
        sch.rfactor(sch.get_loops("C")[2], 0)


def test_rfactor_block_not_first_under_outer_loop():
    sch = small_schedule("SFM")
    sch.reverse_compute_at("T_softmax_expsum", sch.get_loops("T_softmax_exp")[0])
    with pytest.raises(ScheduleError, match="'T_softmax_expsum' is not the first block under"):
        sch.rfactor(sch.get_loops("T_softmax_expsum")[1], 0)


def test_rfactor_failure_leaves_schedule_unchanged():
    sch = small_schedule("GMM")
    i = sch.get_loops("Z")[1]
    before, n = sch.func, len(sch.trace)
    with pytest.raises(ScheduleError):
        sch.rfactor(i, 0)
    assert sch.func is before and len(sch.trace) == n


def test_decompose_loop_not_above_block():
    sch = small_schedule("TBG")
    with pytest.raises(
        ScheduleError,
        match=r"decompose_reduction \(argument 'loop'\): loop 'b' is "
        r"not a loop above block 'C'",
    ):
        sch.decompose_reduction("C", sch.get_loops("query_T")[0])


def test_decompose_not_a_reduction_block():
    sch = Schedule(elementwise_func())
    with pytest.raises(ScheduleError, match="block 'C' is not a reduction block"):
        sch.decompose_reduction("C", sch.get_loops("C")[0])


def test_decompose_below_a_reduce_loop():
    sch = small_schedule("GMM")
    k0, k1 = sch.split(sch.get_loops("Z")[3], [None, 4])
    with pytest.raises(ScheduleError, match="loop 'k_0' above loop 'k_1' feeds reduce iterator 'vk'"):
        sch.decompose_reduction("Z", k1)


def test_decompose_twice():
    sch = small_schedule("GMM")
    sch.decompose_reduction("Z", sch.get_loops("Z")[0])
    assert {"Z_init", "Z_update"} <= set(block_names(sch))
    with pytest.raises(ScheduleError, match="block 'Z_update' is not a reduction block: it has no init"):
        sch.decompose_reduction("Z_update", sch.get_loops("Z_update")[0])


# -- bindings, stage pipeline, identities, unit loops (TVM's rfactor rules) --------------------

ROWSUM_BINDING = """
@T.prim_func
def rowsum(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128,), "float32")):
    for i, k in T.grid(16, 16):
        with T.block("B"):
            vi = T.axis.spatial(128, {vi})
            vk = T.axis.reduce(128, {vk})
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""

ROW_REDUCE = """
@T.prim_func
def row_reduce(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32({init})
            B[vi] = {op}(B[vi], A[vi, vk])
"""

WAR_SCOPE = """
@T.prim_func
def war(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, k in T.grid(16, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
    for i, j in T.grid(16, 16):
        with T.block("W"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = C[vi, vj]
"""


def _same_on_llvm(sch, func, *arrays):
    import numpy as np

    import workbench as wb

    want = [a.copy() for a in arrays]
    got = [a.copy() for a in arrays]
    wb.build(func, target="llvm")(*want)
    wb.build(sch, target="llvm")(*got)
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-5)


@pytest.mark.parametrize(
    "vi, vk, why",
    [
        # k = 0 and k = 1 both restart the reduction (vk == 0): rfactor changed every output
        ("i", "k * k // 2", r"vk uses k \* k, not a slice"),
        # TVM accepts this one and changes the result the same way
        ("i", "k // 2", r"vk = k // 2 reaches 8 of the 128 values of its domain"),
        ("i", "k + 3", r"vk = k \+ 3 does not start at its domain's minimum 0"),
        ("i * 2", "k", r"vi = i \* 2 is not a mixed-radix"),
    ],
)
def test_rfactor_binding_refused(vi, vk, why):
    sch = Schedule(wb.parse(ROWSUM_BINDING.format(vi=vi, vk=vk)))
    k = sch.get_loops("B")[1]
    before, n = sch.func, len(sch.trace)
    with pytest.raises(
        ScheduleError, match=rf"rfactor \(argument 'loop'\): block 'B': its reduce loops.*{why}"
    ):
        sch.rfactor(k, 0)
    assert sch.func is before and len(sch.trace) == n


def test_rfactor_scope_not_stage_pipeline():
    sch = Schedule(wb.parse(WAR_SCOPE))
    k = sch.get_loops("B")[1]
    before, n = sch.func, len(sch.trace)
    with pytest.raises(
        ScheduleError,
        match=r"not a stage pipeline: block 'W' writes \['A'\], which the earlier block 'B' reads",
    ):
        sch.rfactor(k, 0)
    assert sch.func is before and len(sch.trace) == n


@pytest.mark.parametrize(
    "op, init",
    [
        ("T.max", "-3.4028234663852886e+38"),  # what TVM's softmax writes
        ("T.max", '"-inf"'),
        ("T.min", "3.4028234663852886e+38"),
    ],
)
def test_rfactor_max_min_finite_identity(op, init):
    func = wb.parse(ROW_REDUCE.format(op=op, init=init))
    sch = Schedule(func)
    rf = sch.rfactor(sch.get_loops("B")[1], 0)
    assert sch.get(rf).name == "B_rf"
    a = np.random.default_rng(0).standard_normal((16, 16)).astype("float32")
    _same_on_llvm(sch, func, a, np.zeros(16, "float32"))
    check_trace_roundtrip(sch)


def test_rfactor_max_not_lowest_refused():
    sch = Schedule(wb.parse(ROW_REDUCE.format(op="T.max", init="-3.4e+38")))
    with pytest.raises(ScheduleError, match="is not the identity of the max reduction"):
        sch.rfactor(sch.get_loops("B")[1], 0)


def test_rfactor_unit_loop():
    """A unit loop that feeds nothing (TVM accepts it): one partial result per row."""
    func = wb.parse(
        """
@T.prim_func
def rowsum(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""
    )
    sch = Schedule(func)
    u = sch.add_unit_loop("B")
    sch.rfactor(u, 0)
    wb.assert_structural_equal(
        sch.func,
        wb.parse(
            """
@T.prim_func
def rowsum(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    B_rf = T.alloc_buffer((1, 16), "float32")
    for i, k, u in T.grid(16, 16, 1):
        with T.block("B_rf"):
            vu, vi, vk = T.axis.remap("SSR", [u, i, k])
            with T.init():
                B_rf[vu, vi] = T.float32(0)
            B_rf[vu, vi] = B_rf[vu, vi] + A[vi, vk]
    for i, u in T.grid(16, 1):
        with T.block("B"):
            vu, vi = T.axis.remap("RS", [u, i])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + B_rf[vu, vi]
"""
        ),
    )
    _same_on_llvm(
        sch, func, np.random.default_rng(0).random((16, 16), dtype="float32"), np.zeros(16, "float32")
    )
    check_trace_roundtrip(sch)


def test_rfactor_only_reduce_loop_stores_terms():
    """Factoring the only reduce loop leaves the rfactor block one term per element: like TVM,
    it stores the term, with no init."""
    func = wb.parse(ROW_REDUCE.format(op="T.max", init="-3.4028234663852886e+38"))
    sch = Schedule(func)
    sch.rfactor(sch.get_loops("B")[1], 1)
    wb.assert_structural_equal(
        sch.func,
        wb.parse(
            """
@T.prim_func
def row_reduce(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    B_rf = T.alloc_buffer((16, 16), "float32")
    for i, k in T.grid(16, 16):
        with T.block("B_rf"):
            vk, vi = T.axis.remap("SS", [k, i])
            B_rf[vi, vk] = A[vi, vk]
    for i, k in T.grid(16, 16):
        with T.block("B"):
            vk, vi = T.axis.remap("RS", [k, i])
            with T.init():
                B[vi] = T.float32(-3.4028234663852886e+38)
            B[vi] = T.max(B[vi], B_rf[vi, vk])
"""
        ),
    )
    a = np.random.default_rng(0).standard_normal((16, 16)).astype("float32")
    _same_on_llvm(sch, func, a, np.zeros(16, "float32"))
    check_trace_roundtrip(sch)


# -- rfactor of an imperfect split (found by workbench.fuzz, seed 1060) --------------------


def conv_2x2():
    """``O[i, j] = sum(A[i + r, j + s] * W[r, s])`` over r, s in 2 x 2 (the fuzz program)."""
    A = dsl.placeholder((7, 17), "float32", name="A")
    W = dsl.placeholder((2, 2), "float32", name="W")
    r, s = dsl.reduce_axis(2, name="r"), dsl.reduce_axis(2, name="s")
    O = dsl.compute((6, 16), lambda i, j: dsl.sum(A[i + r, j + s] * W[r, s], axis=[r, s]), name="O")
    return dsl.create_func([A, W, O])


def same_as_unscheduled(sch):
    """llvm against the unscheduled function, the output starting NaN (a partial result summed
    without being written shows), and the trace round-trip."""
    func = wb.testing.original_func(sch)
    rng = np.random.default_rng(0)
    shapes = [tuple(int(getattr(d, "value", d)) for d in p.shape) for p in func.params]
    args = [rng.uniform(-1, 1, s).astype("float32") for s in shapes[:-1]]
    got, want = np.full(shapes[-1], np.nan, "float32"), np.full(shapes[-1], np.nan, "float32")
    wb.build(sch.func, target="llvm")(*args, got)
    wb.build(func, target="llvm")(*args, want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    check_trace_roundtrip(sch)


@pytest.mark.parametrize("factor_axis", [0, 2])
def test_rfactor_of_the_inner_loop_of_an_imperfect_split_is_refused(factor_axis):
    # r = r_0 * 4 + r_1 < 2: the slots r_1 = 2, 3 are never written (init included), and the
    # write-back block summed them (TVM accepts it and sums uninitialised memory)
    sch = Schedule(conv_2x2())
    _, _, r, _ = sch.get_loops("O")
    _, r_1 = sch.split(r, [None, 4])
    before, steps = sch.func, len(sch.trace)
    with pytest.raises(ScheduleError, match=r"predicate r_0 \* 4 \+ r_1 < 2 .* never be initialised"):
        sch.rfactor(r_1, factor_axis=factor_axis)
    assert sch.func is before and len(sch.trace) == steps


def test_rfactor_of_the_outer_loop_of_an_imperfect_split():
    # every slot of the outer loop holds at least its first term: right
    A = dsl.placeholder((3, 10), "float32", name="A")
    k = dsl.reduce_axis(10, name="k")
    C = dsl.compute((3,), lambda i: dsl.sum(A[i, k], axis=k), name="C")
    sch = Schedule(dsl.create_func([A, C]))
    k_0, _ = sch.split(sch.get_loops("C")[1], [None, 4])  # k_0 * 4 + k_1 < 10, k_0 in 0..2
    sch.rfactor(k_0, factor_axis=0)
    same_as_unscheduled(sch)


def test_rfactor_of_a_loop_the_predicate_alone_guards():
    # a predicate term on the rfactor loop alone stays on the write-back block, which does not
    # read the slots it skips
    sch = Schedule(
        wb.parse(
            """
@T.prim_func
def guarded(A: T.Buffer((3, 10), "float32"), C: T.Buffer((3,), "float32")):
    for i, k in T.grid(3, 12):
        with T.block("C"):
            vi = T.axis.spatial(3, i)
            vk = T.axis.reduce(10, k)
            T.where(k < 10)
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
"""
        )
    )
    sch.rfactor(sch.get_loops("C")[1], factor_axis=1)
    assert "k < 10" in str(sch.index.realizes["C"].predicate)
    same_as_unscheduled(sch)


def test_rfactor_of_a_perfect_split_of_an_imperfectly_split_spatial_loop():
    # the predicate is on spatial loops only: every slot is written at each valid (i, j)
    sch = Schedule(conv_2x2())
    i, _, r, _ = sch.get_loops("O")
    sch.split(i, [None, 4])
    _, r_1 = sch.split(r, [None, 2])
    sch.rfactor(r_1, factor_axis=1)
    same_as_unscheduled(sch)


# ------------------------------------------------------------------------------------------
# decompose_reduction: TVM's cases (test_tir_schedule_reduction.py) in our words. TVM 0.27 names
# the init block <name>_init and renames the update block <name>_update; the block's random
# variables follow the update block.

MATMUL = """
@T.prim_func
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("update"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
"""


@pytest.mark.parametrize("by_name", [False, True])
def test_decompose_at_the_outermost_loop(by_name):
    after = """
@T.prim_func
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
    for i_init, j_init in T.grid(16, 16):
        with T.block("update_init"):
            vi, vj = T.axis.remap("SS", [i_init, j_init])
            C[vi, vj] = T.float32(0)
    for i, j, k in T.grid(16, 16, 16):
        with T.block("update_update"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
"""

    def steps(sch):
        block = "update" if by_name else sch.get_block("update")
        i, _, _ = sch.get_loops(block)
        sch.decompose_reduction(block, i)

    sch = check_after(MATMUL, steps, after)
    assert sch.get(sch.get_block("update_update")).init is None


def test_decompose_at_the_reduce_loop():
    after = """
@T.prim_func
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
    for i, j in T.grid(16, 16):
        with T.block("update_init"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.float32(0)
        for k in range(16):
            with T.block("update_update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
"""

    def steps(sch):
        _, _, k = sch.get_loops(sch.get_block("update"))
        sch.decompose_reduction(sch.get_block("update"), k)

    check_after(MATMUL, steps, after)


def test_decompose_keeps_loop_kinds_and_the_block_rv_follows_the_update():
    """TVM's test_reduction_decompose_with_different_for_kind: get_block("B_update") is the
    block the old BlockRV stands for; get_block("B") finds nothing."""
    before = """
@T.prim_func
def colsum(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8,), "float32")):
    for k in range(16):
        for i in T.vectorized(8):
            with T.block("B"):
                vk, vi = T.axis.remap("RS", [k, i])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vk, vi]
"""
    after = """
@T.prim_func
def colsum(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i_init in T.vectorized(8):
        with T.block("B_init"):
            vi = T.axis.spatial(8, i_init)
            B[vi] = T.float32(0)
    for k in range(16):
        for i in T.vectorized(8):
            with T.block("B_update"):
                vk, vi = T.axis.remap("RS", [k, i])
                B[vi] = B[vi] + A[vk, vi]
"""
    found = {}

    def steps(sch):
        block = sch.get_block("B")
        k, _ = sch.get_loops(block)
        found["init"] = sch.decompose_reduction(block, k)
        found["block"] = block

    sch = check_after(before, steps, after)
    assert sch.get(found["block"]) is sch.get(sch.get_block("B_update"))
    assert sch.get(found["init"]) is sch.get(sch.get_block("B_init"))
    with pytest.raises(ScheduleError, match="B"):
        sch.get_block("B")
    assert 'b0 = sch.get_block(name="B")' in str(sch.trace)  # the trace names the block as it was


def test_decompose_a_block_holding_blocks():
    """TVM's test_decompose_reduction_nested_block."""
    before = """
@T.prim_func
def nested(A: T.Buffer((1, 64), "float32"), B: T.Buffer((1,), "float32")):
    for i, ko in T.grid(1, 2):
        with T.block("outer"):
            vi, vko = T.axis.remap("SR", [i, ko])
            T.reads(A[vi, vko * 32:vko * 32 + 32])
            T.writes(B[vi])
            C = T.alloc_buffer((32,), "float32")
            with T.init():
                B[vi] = T.float32(0)
            for ki in range(32):
                with T.block("inner_1"):
                    vki = T.axis.remap("S", [ki])
                    C[vki] = A[vi, vko * 32 + vki]
            for ki in range(32):
                with T.block("inner_2"):
                    vki = T.axis.remap("R", [ki])
                    B[vi] = B[vi] + C[vki]
"""
    after = """
@T.prim_func
def nested(A: T.Buffer((1, 64), "float32"), B: T.Buffer((1,), "float32")):
    for i in range(1):
        with T.block("outer_init"):
            vi = T.axis.spatial(1, i)
            T.reads()
            T.writes(B[vi])
            B[vi] = T.float32(0)
        for ko in range(2):
            with T.block("outer_update"):
                vi, vko = T.axis.remap("SR", [i, ko])
                T.reads(B[vi], A[vi, vko * 32:vko * 32 + 32])
                T.writes(B[vi])
                C = T.alloc_buffer((32,), "float32")
                for ki in range(32):
                    with T.block("inner_1"):
                        vki = T.axis.spatial(32, ki)
                        C[vki] = A[vi, vko * 32 + vki]
                for ki in range(32):
                    with T.block("inner_2"):
                        vki = T.axis.reduce(32, ki)
                        B[vi] = B[vi] + C[vki]
"""

    def steps(sch):
        outer = sch.get_block("outer")
        _, ko = sch.get_loops(outer)
        sch.decompose_reduction(outer, ko)

    check_after(before, steps, after)


def test_decompose_update_name_taken():
    """A block already named <name>_update: the update block takes the next free name."""
    before = """
@T.prim_func
def f(A: T.Buffer((4, 4), "float32"), D: T.Buffer((4,), "float32")):
    C = T.alloc_buffer((4,), "float32")
    for i, k in T.grid(4, 4):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
    for i in range(4):
        with T.block("C_update"):
            vi = T.axis.remap("S", [i])
            D[vi] = C[vi] * T.float32(2)
"""
    after = """
@T.prim_func
def f(A: T.Buffer((4, 4), "float32"), D: T.Buffer((4,), "float32")):
    C = T.alloc_buffer((4,), "float32")
    for i_init in range(4):
        with T.block("C_init"):
            vi = T.axis.remap("S", [i_init])
            C[vi] = T.float32(0)
    for i, k in T.grid(4, 4):
        with T.block("C_update_1"):
            vi, vk = T.axis.remap("SR", [i, k])
            C[vi] = C[vi] + A[vi, vk]
    for i in range(4):
        with T.block("C_update"):
            vi = T.axis.remap("S", [i])
            D[vi] = C[vi] * T.float32(2)
"""
    check_after(before, lambda sch: sch.decompose_reduction("C", sch.get_loops("C")[0]), after)
