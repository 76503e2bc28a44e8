"""compute_at, reverse_compute_at and sample_compute_location: numeric equality (python and
llvm), trace round-trip, the regions they infer, and every rule they enforce."""

import numpy as np
import pytest

from workbench import workloads
from workbench.codegen import build
from workbench.errors import ScheduleError
from workbench.ir import dsl
from workbench.ir.parser import parse as wb_parse
from workbench.ir.expr import Var, is_const
from workbench.ir.structural import assert_structural_equal
from workbench.ir.stmt import TRUE, Block, BlockRealize, make_for, seq
from workbench.ir.verify import verify
from workbench.schedule import Schedule
from workbench.schedule.primitives import reduction
from workbench.schedule.primitives.compute_location import compute_location_candidates
from workbench.ir.index import index, replace
from workbench.testing import (
    check_numeric,
    check_trace_roundtrip,
    elementwise_func,
    opaque_func,
    small_schedule,
)


def check(sch, name):
    """Valid IR, the numpy result through both targets, and the trace round-trip."""
    verify(sch.func)
    shape = workloads.small(name)
    check_numeric(sch, name, **shape)
    check_numeric(sch, name, target="llvm", **shape)
    check_trace_roundtrip(sch)


def extents(sch, block):
    return [loop.extent.value for loop in sch.get(sch.get_loops(block))]


def gmm_relu(n=12, m=10, k=8):
    """GMM with an elementwise ReLU consumer ``R`` (GMM's small shape, made ragged)."""
    X = dsl.placeholder((1, n, k), name="X")
    Y = dsl.placeholder((1, k, m), name="Y")
    rk = dsl.reduce_axis(k, name="k")
    Z = dsl.compute((1, n, m), lambda b, i, j: dsl.sum(X[b, i, rk] * Y[b, rk, j], axis=rk), name="Z")
    R = dsl.compute((1, n, m), lambda b, i, j: dsl.maximum(Z[b, i, j], 0.0), name="R")
    return dsl.create_func([X, Y, R], name="gmm_relu")


def check_gmm_relu(sch, n=12, m=10, k=8):
    verify(sch.func)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, n, k)).astype("float32")
    y = rng.uniform(-1, 1, (1, k, m)).astype("float32")
    for target in ("python", "llvm"):
        out = np.zeros((1, n, m), "float32")
        build(sch.func, target=target)(x, y, out)
        np.testing.assert_allclose(out, np.maximum(x @ y, 0), rtol=1e-5, atol=1e-5)
    check_trace_roundtrip(sch)


def tiled(sch, block, i_factor=5, j_factor=4):
    """Split the ``i``/``j`` loops of ``block`` (b, i, j, ...) and put both outer tiles first."""
    b, i, j, *_ = sch.get_loops(block)
    io, ii = sch.split(i, [None, i_factor])
    jo, ji = sch.split(j, [None, j_factor])
    sch.reorder(io, jo, ii, ji)
    return io, jo


# -- compute_at on the workloads ------------------------------------------------------------


@pytest.mark.parametrize(
    "name,pad,conv",
    [
        ("C2D", "PadInput", "conv2d_nhwc"),
        ("T2D", "PadInput", "conv2d_transpose_nhwc"),
        ("CBR", "PaddedInput", "Conv2dOutput"),
    ],
)
@pytest.mark.parametrize("depth", [1, 2, 3, 4, 6])
def test_padding_at_every_conv_loop(name, pad, conv, depth):
    sch = small_schedule(name)
    sch.compute_at(sch.get_block(pad), sch.get_loops(conv)[depth])
    assert len(sch.get_loops(pad)) >= depth + 1
    check(sch, name)


def test_padding_region_is_the_window():
    """Under the conv's ``h`` loop, one output row needs ``kernel`` padded rows (stride 2) and
    the 9 columns the strided windows touch (not the 10th); under ``w`` a 3 x 3 window."""
    sch = small_schedule("C2D")
    n, h, w, *_ = sch.get_loops("conv2d_nhwc")
    sch.compute_at(sch.get_block("PadInput"), h)
    assert extents(sch, "PadInput") == [1, 4, 3, 9, 3]  # n, h, then rows, cols, channels
    realize = sch.index.realizes["PadInput"]
    assert str(realize.iter_values[1]) == "h * 2 + i1"
    assert is_const(realize.predicate, 1)
    sch.compute_at(sch.get_block("PadInput"), w)
    assert extents(sch, "PadInput") == [1, 4, 4, 3, 3, 3]
    check(sch, "C2D")


def test_softmax_stages_under_one_row_loop():
    sch = small_schedule("SFM")
    i0 = sch.get_loops("T_softmax_norm")[0]
    for name in ("T_softmax_expsum", "T_softmax_exp", "T_softmax_maxelem"):
        sch.compute_at(sch.get_block(name), i0)
    root = sch.get(sch.get_block("root"))
    assert isinstance(root.body, type(sch.get(i0)))  # one loop holds everything
    assert [r.block.name for r in sch.index.child_realizes(sch.get(i0))] == [
        "T_softmax_maxelem",
        "T_softmax_exp",
        "T_softmax_expsum",
        "T_softmax_norm",
    ]
    assert [extents(sch, n)[1:] for n in ("T_softmax_maxelem", "T_softmax_exp")] == [[16], [16]]
    check(sch, "SFM")


def test_cbr_epilogue_and_conv_at_consumer_loops():
    """A chain of compute_at's: every stage of CBR ends up under the ReLU's loops; the conv
    (a reduction producer) brings its init and reduce loops along."""
    sch = small_schedule("CBR")
    loops = sch.get_loops("compute")
    for name in ("bn_add", "bn_mul", "bias_add"):
        sch.compute_at(sch.get_block(name), loops[2])
    sch.compute_at(sch.get_block("Conv2dOutput"), loops[2])
    sch.compute_at(sch.get_block("PaddedInput"), sch.get_loops("Conv2dOutput")[3])
    assert extents(sch, "Conv2dOutput") == [1, 4, 4, 4, 3, 3, 3]
    assert sch.get(sch.get_block("Conv2dOutput")).init is not None
    check(sch, "CBR")


def test_compute_at_imperfect_tile_gets_predicate():
    """The last 5-row tile of a 12-row consumer would ask for rows 10..14: the producer's new
    loops keep the tile's extent and a predicate keeps it in its domain."""
    sch = Schedule(gmm_relu())
    io, jo = tiled(sch, "R")
    sch.compute_at(sch.get_block("Z"), jo)
    assert extents(sch, "Z") == [1, 3, 3, 5, 4, 8]
    assert str(sch.index.realizes["Z"].predicate) == "i_0 * 5 + i < 12 and j_0 * 4 + j < 10"
    check_gmm_relu(sch)


def test_preserve_unit_loops():
    sch = Schedule(gmm_relu())
    io, jo = tiled(sch, "R")
    sch.compute_at(sch.get_block("Z"), jo, preserve_unit_loops=True)
    assert extents(sch, "Z") == [1, 3, 3, 1, 5, 4, 8]
    check_gmm_relu(sch)


def test_index_places_the_block():
    """Under the SFM row loop holding [exp, expsum, norm], maxelem may go at position 0 only
    (-2 = first, -1 = last valid place); exp may go anywhere before expsum."""
    sch = small_schedule("SFM")
    i0 = sch.get_loops("T_softmax_norm")[0]
    sch.compute_at(sch.get_block("T_softmax_expsum"), i0)
    sch.compute_at(sch.get_block("T_softmax_exp"), i0)
    sch.compute_at(sch.get_block("T_softmax_maxelem"), i0, index=0)
    names = [r.block.name for r in sch.index.child_realizes(sch.get(i0))]
    assert names[0] == "T_softmax_maxelem"
    check(sch, "SFM")
    with pytest.raises(
        ScheduleError,
        match=r"compute_at \(argument 'index'\): index 3 is not a "
        r"valid insertion point under loop 'i0': expected "
        r"-1, -2 or one of \[0\]",
    ):
        sch2 = small_schedule("SFM")
        l0 = sch2.get_loops("T_softmax_norm")[0]
        sch2.compute_at(sch2.get_block("T_softmax_expsum"), l0)
        sch2.compute_at(sch2.get_block("T_softmax_exp"), l0, index=3)


def test_index_minus_two_is_first_place():
    sch = Schedule(elementwise_func())
    i, j = sch.get_loops("C")
    sch.compute_at(sch.get_block("B"), i, index=-2)
    assert [r.block.name for r in sch.index.child_realizes(sch.get(i))] == ["B", "C"]


# -- reverse_compute_at ----------------------------------------------------------------------


def test_reverse_compute_at_epilogue_under_gmm_tile():
    sch = Schedule(gmm_relu())
    io, jo = tiled(sch, "Z")
    sch.reverse_compute_at(sch.get_block("R"), jo)
    assert extents(sch, "R") == [1, 3, 3, 5, 4]
    assert str(sch.index.realizes["R"].predicate) == "i_0 * 5 + i < 12 and j_0 * 4 + j < 10"
    check_gmm_relu(sch)


def test_reverse_compute_at_softmax_rows():
    sch = small_schedule("SFM")
    i0 = sch.get_loops("T_softmax_maxelem")[0]
    for name in ("T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"):
        sch.reverse_compute_at(sch.get_block(name), i0)
    assert len(sch.index.child_realizes(sch.get(i0))) == 4
    check(sch, "SFM")


def test_reverse_compute_at_fused_cbr_epilogue():
    """The Ansor-style CBR: padding inlined, the epilogue inlined into one block computed per
    output tile of the tiled conv, parallel and vectorized."""
    sch = small_schedule("CBR")
    sch.compute_inline(sch.get_block("PaddedInput"))
    for name in ("compute", "bn_add", "bn_mul"):
        sch.reverse_compute_inline(sch.get_block(name))
    nn, yy, xx, ff, ry, rx, rc = sch.get_loops("Conv2dOutput")
    xo, xi = sch.split(xx, [None, 2])
    fo, fi = sch.split(ff, [None, 2])
    sch.reorder(yy, xo, fo, ry, rx, rc, xi, fi)
    sch.reverse_compute_at(sch.get_block("bias_add"), fo)
    sch.parallel(sch.fuse(nn, yy))
    sch.vectorize(fi)
    sch.vectorize(sch.get_loops("bias_add")[-1])
    assert extents(sch, "bias_add") == [4, 2, 2, 2, 2]
    assert [b.name for b in sch.func.blocks()] == ["root", "Conv2dOutput", "bias_add"]
    check(sch, "CBR")


def test_mixed_compute_at_and_reverse_compute_at():
    """The padding's old loops disappear with it; the epilogue follows the conv's loops."""
    sch = small_schedule("CBR")
    old = sch.get_loops("PaddedInput")[1]
    sch.compute_at(sch.get_block("PaddedInput"), sch.get_loops("Conv2dOutput")[1])
    sch.reverse_compute_at(sch.get_block("bias_add"), sch.get_loops("Conv2dOutput")[3])
    sch.reverse_compute_at(sch.get_block("bn_mul"), sch.get_loops("bias_add")[2])
    with pytest.raises(
        ScheduleError,
        match=r"loop 'i1' \(l\d+\) no longer exists: step \d+ "
        r"removed it: `sch.compute_at",
    ):
        sch.get(old)
    assert sch.get(sch.get_loops("bn_mul")[:3]) == sch.get(sch.get_loops("Conv2dOutput")[:3])
    assert extents(sch, "bn_mul") == [1, 4, 4, 4]  # its own channel loop under xx
    check(sch, "CBR")


def nrm_rfactor(factors=(64, 2)):
    """NRM's two reduce loops fused and split, the inner part rfactored (the sampler's
    AddRFactor sketch). With (64, 2), ``vi = ij_0 // 8`` and ``vj = ij_0 % 8 * 2 + ij_1``
    share the loop ``ij_0``."""
    sch = small_schedule("NRM")
    _, i, j = sch.get_loops("C")
    _, inner = sch.split(sch.fuse(i, j), list(factors))
    return sch, sch.rfactor(inner, 1)


@pytest.mark.parametrize("factors", [(64, 2), (16, 8), (128, 1), (8, 16)])
def test_compute_at_rfactor_block_sums_each_term_once(factors):
    """Regression (found by the design-space sampler): compute_at rebuilt the rfactor block's
    tied reduce iterators ``vi = ij_0 // 8`` and ``vij_0 = ij_0`` as two loops and summed each
    term of ``vi`` eight times."""
    sch, rf = nrm_rfactor(factors)
    sch.compute_at(rf, sch.get_loops("C")[0])
    check(sch, "NRM")


def test_rfactor_block_has_one_reduce_iterator_per_shared_loop():
    """rfactor splits ``vi`` too, as it shares ``ij_0`` with the split ``vj``: the rfactor
    block's iterators are then independent (each bound to one loop)."""
    sch, rf = nrm_rfactor()
    block = sch.get(rf)
    assert "".join(iv.iter_type for iv in block.iter_vars) == "SSR"
    assert all(isinstance(v, Var) for v in sch.index.realizes[block.name].iter_values)


def test_compute_at_refuses_tied_reduce_iterators(monkeypatch):
    """TVM's rfactor keeps ``vi = ij_0 // 8`` beside the new ``vij_0 = ij_0`` (its compute_at
    then refuses the block: not an affine binding); so must ours."""
    monkeypatch.setattr(reduction, "_split_loops", lambda block, realize, rf_var, loops: {rf_var})
    sch, rf = nrm_rfactor()
    assert [iv.var.name for iv in sch.get(rf).iter_vars][2:] == ["vi", "vi_j_fused_0"]
    with pytest.raises(
        ScheduleError,
        match=r"compute_at \(argument 'block'\): reduction block "
        r"'C_rf' cannot be rebuilt with one loop per iterator: "
        r"loop 'i_j_fused_0' feeds \['vi', 'vi_j_fused_0'\] "
        r"through slices that overlap",
    ):
        sch.compute_at(rf, sch.get_loops("C")[0])


@pytest.mark.parametrize("how", ["fused_split3", "imperfect", "fused_imperfect", "fused_imperfect3"])
def test_compute_at_reduction_with_split_and_fused_reduce_loops(how):
    """The reduce bindings split and fuse produce (slices of loops, of fused sums, clipped by
    the predicate) are recognised as visiting their domains exactly once."""
    sch = small_schedule("NRM")
    _, i, j = sch.get_loops("C")
    if how == "imperfect":
        sch.split(j, [None, 3])
    else:
        factors = {
            "fused_split3": [4, 16, 2],
            "fused_imperfect": [None, 3],
            "fused_imperfect3": [None, 5, 3],
        }[how]
        sch.split(sch.fuse(i, j), factors)
    sch.compute_at(sch.get_block("C"), sch.get_loops("D")[0])
    assert extents(sch, "C") == [2, 8, 16]
    check(sch, "NRM")


def rebound_nrm(split_j=True, **changes):
    """NRM (j split by 3 when ``split_j``) with the realize of C changed by hand."""
    sch = small_schedule("NRM")
    if split_j:
        sch.split(sch.get_loops("C")[2], [None, 3])
    realize = sch.index.realizes["C"]
    changes = {k: v(sch.get(sch.get_loops("C")), realize) for k, v in changes.items()}
    return Schedule(replace(sch.func, realize, realize.with_(**changes)))


@pytest.mark.parametrize(
    "changes,message",
    [
        (
            {"predicate": lambda loops, r: loops[2].loop_var * 3 + loops[3].loop_var < 12},
            r"vj = j_0 \* 3 \+ j_1 spans past its domain and the predicate does not clip it to 16",
        ),
        (
            {"predicate": lambda loops, r: r.predicate & (loops[3].loop_var < 2)},
            r"the predicate j_1 < 2 restricts the reduce loops",
        ),
        (
            {"iter_values": lambda loops, r: (r.iter_values[0], loops[0].loop_var, r.iter_values[2])},
            r"loop 'b' feeds spatial iterators and reduce iterator 'vi'",
        ),
        (
            {"iter_values": lambda loops, r: r.iter_values[:2] + (loops[2].loop_var * 3,)},
            r"vj = j_0 \* 3 is not a mixed-radix number of loop slices",
        ),
    ],
)
def test_compute_at_refuses_reduction_not_visiting_its_domain_once(changes, message):
    sch = rebound_nrm(**changes)
    with pytest.raises(
        ScheduleError,
        match=r"reduction block 'C' cannot be rebuilt with one "
        r"loop per iterator: " + message,
    ):
        sch.compute_at(sch.get_block("C"), sch.get_loops("D")[0])


# -- rules -----------------------------------------------------------------------------------


def test_compute_at_refuses_output_block():
    sch = Schedule(gmm_relu())
    with pytest.raises(
        ScheduleError,
        match=r"compute_at \(argument 'block'\): block 'R' is an "
        r"output block: it writes the function parameter\(s\) \['R'\]",
    ):
        sch.compute_at(sch.get_block("R"), sch.get_loops("Z")[1])


def test_compute_at_refuses_own_loop():
    sch = small_schedule("C2D")
    with pytest.raises(
        ScheduleError,
        match=r"compute_at \(argument 'loop'\): loop 'i1' encloses "
        r"block 'PadInput'",
    ):
        sch.compute_at(sch.get_block("PadInput"), sch.get_loops("PadInput")[1])


def test_compute_at_needs_all_consumers_under_loop():
    sch = small_schedule("SFM")
    with pytest.raises(
        ScheduleError,
        match=r"compute_at \(argument 'loop'\): the consumers "
        r"\['T_softmax_expsum'\] of block 'T_softmax_exp' are not under loop",
    ):
        sch.compute_at(sch.get_block("T_softmax_exp"), sch.get_loops("T_softmax_norm")[0])


def test_reverse_compute_at_needs_all_producers_under_loop():
    sch = small_schedule("CBR")
    with pytest.raises(
        ScheduleError,
        match=r"reverse_compute_at \(argument 'loop'\): the producers "
        r"\['Conv2dOutput'\] of block 'bias_add' are not under",
    ):
        sch.reverse_compute_at(sch.get_block("bias_add"), sch.get_loops("PaddedInput")[1])


def test_reverse_compute_at_refuses_moving_past_a_consumer():
    """The padding has no producer block, but its consumer (the conv) precedes bias_add's
    loops: moved there, the padding would be computed after it is read."""
    sch = small_schedule("CBR")
    with pytest.raises(
        ScheduleError,
        match=r"reverse_compute_at \(argument 'loop'\): block "
        r"'Conv2dOutput', a consumer of block 'PaddedInput', "
        r"comes before loop 'j': the block would move after",
    ):
        sch.reverse_compute_at(sch.get_block("PaddedInput"), sch.get_loops("bias_add")[1])


def test_compute_at_refuses_opaque_block():
    sch = Schedule(opaque_func())
    with pytest.raises(
        ScheduleError,
        match=r"compute_at \(argument 'block'\): block 'B' is neither "
        r"a complete nor a reduction block: as a complete block "
        r"it has non-spatial iterators",
    ):
        sch.compute_at(sch.get_block("B"), sch.get_loops("C")[0])


def test_reverse_compute_at_sums_a_row_piecewise():
    """expsum under exp's column loop adds one term per iteration, the first iteration (vk = 0)
    running the init: each iteration of the serial loop holds the next piece of the reduce
    domain, as TVM's reverse_compute_at of an rfactor'd reduction."""
    sch = small_schedule("SFM")
    sch.reverse_compute_at(sch.get_block("T_softmax_expsum"), sch.get_loops("T_softmax_exp")[1])
    check(sch, "SFM")


def test_reverse_compute_at_refuses_split_reduction_on_parallel_loop():
    """The same split over a parallel loop: its iterations would update one sum at once."""
    sch = small_schedule("SFM")
    sch.parallel(sch.get_loops("T_softmax_exp")[1])
    func = sch.func
    with pytest.raises(
        ScheduleError,
        match=r"reduction block 'T_softmax_expsum' would have its reduce iterator split across "
        r"iterations of loop 'i1': the loop is parallel",
    ):
        sch.reverse_compute_at(sch.get_block("T_softmax_expsum"), sch.get_loops("T_softmax_exp")[1])
    assert sch.func is func


REVERSED_SUM = """
@T.prim_func
def f(A: T.Buffer((8,), "float32"), C: T.Buffer((1,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[7 - vi] = A[7 - vi] * T.float32(2)
    for k in range(8):
        with T.block("C"):
            vk = T.axis.reduce(8, k)
            with T.init():
                C[0] = T.float32(0)
            C[0] = C[0] + B[vk]
"""


def test_reverse_compute_at_refuses_split_reduction_out_of_order():
    """B is written from the end: the term vk = 0, which runs the init, would come last and
    wipe the sum of the others."""
    sch = Schedule(wb_parse(REVERSED_SUM))
    func = sch.func
    with pytest.raises(ScheduleError, match=r"does not cut \[0, 0 \+ 8\) into consecutive pieces"):
        sch.reverse_compute_at(sch.get_block("C"), sch.get_loops("B")[0])
    assert sch.func is func


def test_reverse_compute_at_refuses_unsolvable_index():
    """The conv reads its padded input at ``vh * 2 + vrh`` (two iterators, overlapping
    windows): no iterator range can be solved (TVM refuses it too)."""
    sch = small_schedule("C2D")
    with pytest.raises(
        ScheduleError,
        match=r"cannot infer the iteration range of block "
        r"'conv2d_nhwc': it accesses PadInput\[vn, vh \* 2 \+ vrh",
    ):
        sch.reverse_compute_at(sch.get_block("conv2d_nhwc"), sch.get_loops("PadInput")[1])


def test_compute_at_refuses_root_block():
    sch = small_schedule("C2D")
    with pytest.raises(ScheduleError, match=r"compute_at \(argument 'block'\): the root block"):
        sch.compute_at(sch.get_block("root"), sch.get_loops("conv2d_nhwc")[0])


def test_compute_at_refuses_loop_of_another_scope():
    """Block C wrapped in a block ``W``: its loops are in W's scope, not in B's."""
    func = elementwise_func()
    idx = index(func)
    i, j = Var("i"), Var("j")
    c = idx.block("C")
    inner = make_for(i, 4, make_for(j, 8, BlockRealize((i, j), TRUE, c)))
    wrap = BlockRealize((), TRUE, Block("W", (), c.reads, c.writes, inner))
    body = seq(idx.loops_above(idx.realizes["B"])[0], wrap)
    func = func.with_body(func.body.with_(block=func.root.with_(body=body)))
    sch = Schedule(func)
    with pytest.raises(
        ScheduleError,
        match=r"compute_at \(argument 'loop'\): loop 'i' is not in "
        r"the block scope of block 'B' \(scope 'root'\)",
    ):
        sch.compute_at(sch.get_block("B"), sch.get_loops("C")[0])


def test_failed_compute_at_leaves_schedule_unchanged():
    sch = small_schedule("SFM")
    block, loop = sch.get_block("T_softmax_exp"), sch.get_loops("T_softmax_norm")[0]
    before = (sch.func, len(sch.trace), len(sch.history))
    with pytest.raises(ScheduleError):
        sch.compute_at(block, loop)
    assert (sch.func, len(sch.trace), len(sch.history)) == before


# -- sample_compute_location -----------------------------------------------------------------


def test_candidates_follow_tvm_rules():
    sch = small_schedule("CBR")
    func = sch.func

    def cands(name):
        return compute_location_candidates(func, index(func).block(name))[0]

    assert cands("PaddedInput") == [-2, -1, 1, 2, 3]  # nn is a unit loop; stop at reduce ry
    assert cands("Conv2dOutput") == [-1, 1, 2, 3]  # a reduction does not inline
    assert cands("compute") == [-1]  # no consumer, output block


@pytest.mark.parametrize("seed", range(6))
def test_sampled_locations_replay(seed):
    sch = small_schedule("CBR", seed=seed)
    for name in ("bn_add", "bn_mul", "bias_add", "Conv2dOutput", "PaddedInput"):
        block = sch.get_block(name)
        sch.compute_at(block, sch.sample_compute_location(block))
    check(sch, "CBR")


def test_sampled_decision_is_used_and_recorded():
    sch = small_schedule("C2D")
    pad = sch.get_block("PadInput")
    loop = sch.sample_compute_location(pad, decision=2)
    assert sch.trace[-1].decision == 2
    assert sch.get(loop) is sch.get(sch.get_loops("conv2d_nhwc")[2])
    sch.compute_at(pad, loop)
    assert len(sch.get_loops("PadInput")) > 3
    check(sch, "C2D")


def test_location_marks_root_and_inline():
    sch = small_schedule("C2D")
    pad = sch.get_block("PadInput")
    root = sch.sample_compute_location(pad, decision=-1)
    assert sch.get(root) == "root"
    before = sch.func
    sch.compute_at(pad, root)
    assert sch.func is before
    inline = sch.sample_compute_location(pad, decision=-2)
    assert sch.get(inline) == "inline"
    with pytest.raises(
        ScheduleError,
        match=r"split \(argument 'loop'\): this LoopRV is the "
        r"compute location 'inline'",
    ):
        sch.split(inline, [2, None])
    sch.compute_at(pad, inline)
    assert [b.name for b in sch.func.blocks()] == ["root", "conv2d_nhwc"]
    check(sch, "C2D")


def test_stale_decision_falls_back_to_earlier_candidate():
    """Decision 6 (the conv's reduce loop rc) is no candidate; the nearest before it is 3."""
    sch = small_schedule("C2D")
    pad = sch.get_block("PadInput")
    sch.sample_compute_location(pad, decision=6)
    assert sch.trace[-1].decision == 3
    sch.sample_compute_location(sch.get_block("conv2d_nhwc"), decision=-2)
    assert sch.trace[-1].decision == -1  # a reduction cannot be inlined: root


def test_a_pinned_decision_that_is_no_candidate_is_refused_not_moved():
    """A replay falls back to a near location for a free decision (as TVM does) but refuses a
    pinned one: the tuner used to record the moved location still flagged pinned."""
    sch = small_schedule("C2D")
    func = sch.func
    pad = sch.get_block("PadInput")
    sch.compute_at(pad, sch.sample_compute_location(pad, decision=3))
    step = next(k for k, inst in enumerate(sch.trace) if inst.kind.name == "sample_compute_location")
    stale = sch.trace.with_decision(step, 6)  # the reduce loop rc: no candidate
    moved = Schedule(func)
    stale.apply_to_schedule(moved)
    assert moved.trace[step].decision == 3 and not moved.trace[step].pinned
    refused = Schedule(func)
    with pytest.raises(
        ScheduleError,
        match=r"sample_compute_location \(argument 'decision'\): the pinned decision 6 cannot be "
        r"replayed.*would take 3 instead.*never replaced",
    ) as err:
        sch.trace.with_decision(step, 6, pinned=True).apply_to_schedule(refused)
    assert err.value.step == step
    assert (refused.func, len(refused.trace), len(refused.history)) == (func, 0, 1)
    kept = Schedule(func)
    sch.trace.with_decision(step, 3, pinned=True).apply_to_schedule(kept)
    assert kept.trace[step].decision == 3 and kept.trace[step].pinned
    check(kept, "C2D")


@pytest.mark.parametrize("bad", [-3, 1.5, "root", True])
def test_sample_compute_location_bad_decision(bad):
    sch = small_schedule("C2D")
    with pytest.raises(ScheduleError, match=r"sample_compute_location \(argument 'decision'\)"):
        sch.sample_compute_location(sch.get_block("PadInput"), decision=bad)


# -- regressions ----------------------------------------------------------------------------

COPY_THEN_SUB = """
@T.prim_func
def f(A0: T.Buffer((5, 12), "float32"), A1: T.Buffer((5, 12), "float32"), T0: T.Buffer((5, 12), "float32")):
    A0_local = T.alloc_buffer((5, 12), "float32")
    for i0, i1 in T.grid(5, 12):
        with T.block("A0_local"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            A0_local[v0, v1] = A0[v0, v1]
    for i0, i1 in T.grid(5, 12):
        with T.block("T0"):
            vi0, vi1 = T.axis.remap("SS", [i0, i1])
            T0[vi0, vi1] = A0_local[vi0, vi1] - A1[vi0, vi1] * T.float32(0.5)
"""


def test_reverse_compute_at_of_a_block_reading_nothing_produced_there():
    """(fuzzer) The copy has no producer under T0's loop, so nothing bounds its iterators: as in
    TVM, each iteration recomputes the whole copy. Its new loops were named after ``v0, v1``
    minus the ``v``, i.e. ``0, 1``, and the printed function did not parse back."""
    before = wb_parse(COPY_THEN_SUB)
    sch = Schedule(before)
    copy = sch.get_block("A0_local")
    sch.reverse_compute_at(copy, sch.get_loops(sch.get_block("T0"))[1], preserve_unit_loops=True)
    assert [l.loop_var.name for l in sch.get(sch.get_loops(copy))] == ["i0", "i1", "ax0", "ax1"]
    assert extents(sch, sch.get_block("A0_local")) == [5, 12, 5, 12]
    reparsed = wb_parse(str(sch.func))
    assert_structural_equal(reparsed, sch.func)
    check_trace_roundtrip(sch)
    rng = np.random.default_rng(0)
    args = [rng.uniform(-1, 1, (5, 12)).astype("float32") for _ in range(3)]
    want = [a.copy() for a in args]
    build(before, target="llvm")(*want)
    build(sch.func, target="llvm")(*args)
    np.testing.assert_allclose(args[2], want[2])


def test_new_loops_named_after_iterators():
    """``v_ax1`` gives ``ax1`` (not ``_ax1``); ``vi`` gives ``i``."""
    text = COPY_THEN_SUB.replace("v0, v1", "v_ax0, v_ax1").replace("[v0, v1]", "[v_ax0, v_ax1]")
    sch = Schedule(wb_parse(text))
    copy = sch.get_block("A0_local")
    sch.compute_at(copy, sch.get_loops(sch.get_block("T0"))[0], preserve_unit_loops=True)
    assert [l.loop_var.name for l in sch.get(sch.get_loops(copy))] == ["i0", "ax0", "ax1"]
