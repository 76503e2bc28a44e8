"""rfactor and decompose_reduction: numeric equality (python and llvm), trace round-trip, the IR
they produce, and every rule they enforce."""

import pytest

from workbench import workloads
from workbench.errors import ScheduleError
from workbench.ir import dsl
from workbench.ir.expr import Sub, Var
from workbench.ir.stmt import make_for
from workbench.ir.verify import verify
from workbench.schedule import Schedule
from workbench.ir.index import index, replace
from workbench.testing import check_numeric, check_small, elementwise_func, shared_loop_func, small_schedule


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
    assert init_block.name == "Z_init" and sch.get(sch.get_block("Z")).init is None
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
    sch = small_schedule("NRM")
    u = sch.add_unit_loop("C")
    with pytest.raises(ScheduleError, match="loop 'u' is not bound to any reduce iterator"):
        sch.rfactor(u, 0)


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
    assert "Z_init" in block_names(sch)
    with pytest.raises(ScheduleError, match="block 'Z' is not a reduction block: it has no init"):
        sch.decompose_reduction("Z", sch.get_loops("Z")[0])
