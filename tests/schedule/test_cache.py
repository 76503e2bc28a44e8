"""cache_read, cache_write, reindex: numeric equality (python and llvm), trace round-trips,
where the copy stage goes, and every rule."""

import numpy as np
import pytest

import workbench as wb
from workbench import workloads
from workbench import fuzz
from workbench.errors import ScheduleError
from workbench.ir import dsl
from workbench.ir.functor import pre_order
from workbench.ir.stmt import Block, SeqStmt
from workbench.ir.verify import verify
from workbench.schedule import Schedule
from workbench.testing import check_numeric, check_small, check_trace_roundtrip, original_func, small_schedule


def check_both(sch, name):
    """Valid IR, python result + trace round-trip, llvm result."""
    verify(sch.func)
    check_small(sch, name)
    check_numeric(sch, name, target="llvm", **workloads.small(name))


def top_level_blocks(sch):
    """Names of the blocks of root's body statements, in order (first block of each)."""
    body = sch.func.root.body
    stmts = body.seq if isinstance(body, SeqStmt) else (body,)
    return [
        sch.index.realizes_under(s)[0].block.name if not hasattr(s, "block") else s.block.name for s in stmts
    ]


def reads_of(sch, name):
    return [r.buffer.name for r in sch.get(sch.get_block(name)).reads]


# ------------------------------------------------------------------------------------------
# cache_read


@pytest.mark.parametrize(
    "name, block, index, scope",
    [
        ("GMM", "Z", 0, "shared"),  # a function input
        ("C2D", "conv2d_nhwc", 0, "local"),  # an intermediate with a producer
        ("SFM", "T_softmax_expsum", 0, "local"),  # an intermediate read by two blocks
        ("CBR", "bias_add", 0, "shared"),
    ],
)
def test_cache_read_workloads(name, block, index, scope):
    sch = small_schedule(name)
    buf = sch.get(sch.get_block(block)).reads[index].buffer
    cache = sch.cache_read(block, index, scope)
    copy = sch.get(cache)
    assert copy.name == f"{buf.name}_{scope}"
    assert copy.writes[0].buffer.scope == scope and copy.reads[0].buffer is buf
    assert f"{buf.name}_{scope}" in reads_of(sch, block)
    check_both(sch, name)


def test_cache_read_placement():
    """An input's copy goes first; an intermediate's right after its producer."""
    sch = small_schedule("C2D")
    sch.cache_read("conv2d_nhwc", 1, "local")  # weight: a parameter
    sch.cache_read("conv2d_nhwc", 0, "shared")  # PadInput: produced by PadInput
    assert top_level_blocks(sch) == ["weight_local", "PadInput", "PadInput_shared", "conv2d_nhwc"]
    check_both(sch, "C2D")


def test_cache_read_all_consumers_or_given_ones():
    sch = small_schedule("SFM")
    sch.cache_read("T_softmax_norm", 0, "local")
    assert reads_of(sch, "T_softmax_expsum")[0] == "T_softmax_exp_local"
    assert reads_of(sch, "T_softmax_norm")[0] == "T_softmax_exp_local"
    sch = small_schedule("SFM")
    sch.cache_read("T_softmax_norm", 0, "local", consumer_blocks=["T_softmax_norm"])
    assert reads_of(sch, "T_softmax_expsum")[0] == "T_softmax_exp"
    assert reads_of(sch, "T_softmax_norm")[0] == "T_softmax_exp_local"
    # the copy goes right before the first consumer that reads it
    assert top_level_blocks(sch)[-2:] == ["T_softmax_exp_local", "T_softmax_norm"]
    check_both(sch, "SFM")


def test_cache_read_twice_gets_fresh_names():
    sch = small_schedule("GMM")
    first = sch.cache_read("Z", 0, "local")
    second = sch.cache_read("Z", 0, "local")  # now caches X_local
    assert sch.get(first).name == "X_local" and sch.get(second).name == "X_local_local"
    third = sch.cache_read(first, 0, "local")  # X again, read by the first copy
    assert sch.get(third).name == "X_local_1"
    check_both(sch, "GMM")


def test_cache_read_inside_a_loop_after_compute_at():
    """With the producer moved under loop j, the copy goes in that loop, copying one row."""
    sch = small_schedule("CBR")
    _, j, _, _ = sch.get_loops("bias_add")
    sch.compute_at("Conv2dOutput", j)
    copy = sch.cache_read("bias_add", 0, "local")
    loops = sch.get(sch.get_loops(copy))
    assert [l.loop_var.name for l in loops][:2] == ["i", "j"]
    assert [l.extent.value for l in loops[2:]] == [1, 1, 4, 4]
    check_both(sch, "CBR")


def test_gmm_tiled_with_shared_local_caches():
    """The typical use: tile, cache A/B under the reduction tile, C_local written back per tile."""
    sch = small_schedule("GMM")
    z = sch.get_block("Z")
    _, i, j, k = sch.get_loops(z)
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 4])
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(io, jo, ko, ii, ji, ki)
    xs = sch.cache_read(z, 0, "shared")
    yl = sch.cache_read(z, 1, "local")
    zl = sch.cache_write(z, 0, "local")
    sch.compute_at(xs, ko)
    sch.compute_at(yl, ko)
    sch.reverse_compute_at(zl, jo)
    assert sch.get(sch.get_loops(xs))[-1].extent.value == 4
    assert [l.loop_var.name for l in sch.get(sch.get_loops(zl))][:3] == ["b", "i_0", "j_0"]
    check_both(sch, "GMM")


# ------------------------------------------------------------------------------------------
# cache_write


@pytest.mark.parametrize(
    "name, block",
    [
        ("GMM", "Z"),
        ("C2D", "conv2d_nhwc"),
        ("SFM", "T_softmax_maxelem"),
        ("CBR", "Conv2dOutput"),
    ],
)
def test_cache_write_workloads(name, block):
    sch = small_schedule(name)
    buf = sch.get(sch.get_block(block)).writes[0].buffer
    back = sch.cache_write(block, 0, "local")
    node = sch.get(sch.get_block(block))
    assert node.writes[0].buffer.name == f"{buf.name}_local"
    if node.init is not None:  # a reduction's init moved with it
        assert node.init.buffer.name == f"{buf.name}_local"
    assert sch.get(back).writes[0].buffer is buf
    names = top_level_blocks(sch)
    assert names[names.index(block) + 1] == f"{buf.name}_local"
    check_both(sch, name)


def test_cache_write_with_direct_consumers():
    sch = small_schedule("CBR")
    bias_add = sch.get_block("bias_add")  # a BlockRV: recorded as a variable
    sch.cache_write("Conv2dOutput", 0, "local", consumer_blocks=[bias_add])
    assert "consumer_blocks=[b0]" in str(sch.trace)
    assert reads_of(sch, "bias_add")[0] == "Conv2dOutput_local"
    assert top_level_blocks(sch)[-1] == "Conv2dOutput_local"  # nobody else reads it
    check_both(sch, "CBR")


def test_cache_write_then_read_the_cache():
    sch = small_schedule("SFM")
    sch.cache_write("T_softmax_exp", 0, "local")
    sch.cache_read("T_softmax_exp_local", 0, "shared")
    check_both(sch, "SFM")


# ------------------------------------------------------------------------------------------
# reindex


@pytest.mark.parametrize(
    "name, block, buffer",
    [
        ("GMM", "Z", ("read", 0)),
        ("GMM", "Z", ("write", 0)),
        ("C2D", "conv2d_nhwc", ("read", 1)),
        ("SFM", "T_softmax_norm", "T_softmax_exp"),
        ("CBR", "bias_add", ("write", 0)),
    ],
)
def test_reindex_workloads(name, block, buffer):
    sch = small_schedule(name)
    node = sch.get(sch.get_block(block))
    copy = sch.reindex(block, buffer)
    new = sch.get(sch.get_block(block))
    kind = buffer[0] if isinstance(buffer, tuple) else "read"
    region = new.reads if kind == "read" else new.writes
    reindexed = [r for r in region if r.buffer.name.endswith("_reindex")]
    assert len(reindexed) == 1
    # indexed by the block's own iterators
    assert all(rng.min in [iv.var for iv in node.iter_vars] for rng in reindexed[0].region)
    names = top_level_blocks(sch)
    offset = -1 if kind == "read" else 1
    assert names[names.index(block) + offset] == sch.get(copy).name
    check_both(sch, name)


def test_reindex_buffer_shape_follows_used_iterators():
    sch = small_schedule("C2D")
    sch.reindex("conv2d_nhwc", ("read", 0))  # PadInput[vn, vh*2 + vrh, vw*2 + vrw, vrc]
    buf = [b for b in sch.func.root.alloc_buffers if b.name == "PadInput_reindex"][0]
    assert buf.shape == (1, 4, 4, 3, 3, 3)  # vn, vh, vw, vrh, vrw, vrc
    check_both(sch, "C2D")


# ------------------------------------------------------------------------------------------
# rules


def padded_twice():
    """C2D after decompose_padding: PadInput has two writers."""
    sch = small_schedule("C2D")
    sch.decompose_padding("PadInput", sch.get_loops("PadInput")[0])
    return sch


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda s: s.cache_read("Z", 2, "local"), "not an index"),
        (lambda s: s.cache_read("Z", 1, "texture"), "unknown storage scope"),
        (lambda s: s.cache_read("Z", 1, "local", consumer_blocks=["root"]), "not a block of the same"),
        (lambda s: s.cache_read("Z", 1, "local", consumer_blocks="Z"), "list of blocks"),
        (lambda s: s.cache_write("Z", 1, "local"), "not an index"),
        (lambda s: s.cache_write("Z", 0, "registers"), "unknown storage scope"),
        (lambda s: s.cache_write("Z", 0, "local", consumer_blocks=["Z"]), "not a block of the same"),
        (lambda s: s.reindex("Z", ("read", 7)), "not an index"),
        (lambda s: s.reindex("Z", ("both", 0)), "expected"),
        (lambda s: s.reindex("Z", "W"), "no buffer named"),
    ],
)
def test_rules_on_gmm(call, match):
    sch = small_schedule("GMM")
    before = sch.func
    with pytest.raises(ScheduleError, match=match):
        call(sch)
    assert sch.func is before and len(sch.trace) == 0  # nothing half-applied


def test_cache_read_of_a_buffer_the_block_updates_in_place():
    """Without its init (after decompose_reduction) Z reads Z first, as in TVM; caching that read
    would leave the block updating a copy."""
    sch = small_schedule("GMM")
    sch.decompose_reduction("Z", sch.get_loops("Z")[0])
    assert reads_of(sch, "Z_update")[0] == "Z"
    before, steps = sch.func, len(sch.trace)
    with pytest.raises(ScheduleError, match="updates it in place"):
        sch.cache_read("Z_update", 0, "local")
    assert sch.func is before and len(sch.trace) == steps


def test_single_writer_rules():
    sch = padded_twice()
    with pytest.raises(ScheduleError, match="written by several blocks"):
        sch.cache_read("conv2d_nhwc", 0, "local")
    with pytest.raises(ScheduleError, match="written by several blocks"):
        sch.cache_write("PadInput", 0, "local")


def test_reindex_needs_a_single_access_pattern():
    A = dsl.placeholder((8,), "float32", name="A")
    B = dsl.compute((8,), lambda i: A[i] + A[7 - i], name="B")
    sch = Schedule(dsl.create_func([A, B]))
    with pytest.raises(ScheduleError, match="different indices"):
        sch.reindex("B", ("read", 0))


def test_reindex_needs_the_block_alone_under_its_loops():
    sch = small_schedule("CBR")
    _, j, _, _ = sch.get_loops("bias_add")
    sch.compute_at("Conv2dOutput", j)
    with pytest.raises(ScheduleError, match="holds other statements"):
        sch.reindex("bias_add", ("write", 0))


# ------------------------------------------------------------------------------------------
# updates and blocks the fuzzer found wrong (workbench.fuzz): refused, or computed right

#: a matmul whose init block sits in an outer block, then a bias (the fuzzer's program)
MATMUL_SPLIT_INIT = fuzz.SCRIPTS["nested"]

OWN_LOOPS = """
@T.prim_func
def own_loops(A: T.Buffer((6, 10), "float32"), C: T.Buffer((6, 10), "float32")):
    with T.block("C"):
        T.reads(A[0:6, 0:10])
        T.writes(C[0:6, 0:10])
        for i in range(6):
            for j in range(10):
                C[i, j] = A[i, 9 - j] * T.float32(3)
"""


def same_as_unscheduled(sch):
    """The schedule on llvm computes what the unscheduled function computes (outputs start NaN,
    so an element nobody writes shows), and its trace replays."""
    func, orig = sch.func, original_func(sch)
    rng = np.random.default_rng(0)
    outs = {r.buffer for n in pre_order(orig.body) if isinstance(n, Block) for r in n.writes}
    args = [
        np.full(shape_of(p), np.nan, "float32")
        if p in outs
        else rng.uniform(-1, 1, shape_of(p)).astype("float32")
        for p in orig.params
    ]
    got, want = [a.copy() for a in args], [a.copy() for a in args]
    wb.build(func, target="llvm")(*got)
    wb.build(orig, target="llvm")(*want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    check_trace_roundtrip(sch)


def shape_of(buf):
    return tuple(int(getattr(s, "value", s)) for s in buf.shape)


def refused(sch, match, primitive, *args):
    before, steps = sch.func, len(sch.trace)
    with pytest.raises(ScheduleError, match=match):
        getattr(sch, primitive)(*args)
    assert sch.func is before and len(sch.trace) == steps


def test_reindex_of_the_read_of_an_update_is_refused():
    # the updates would go to B_reindex, never written back: B stayed 0 (fuzz seeds 587, 919)
    sch = Schedule(wb.parse(MATMUL_SPLIT_INIT))
    refused(sch, "also writes B.*never be written back", "reindex", "B", ("read", 0))


def test_reindex_of_the_write_of_an_update_without_its_init_is_refused():
    # B_init writes B, not the new buffer: the update would accumulate into what nobody wrote
    sch = Schedule(wb.parse(MATMUL_SPLIT_INIT))
    refused(sch, "no init of its own", "reindex", "B", ("write", 0))


def test_reindex_of_the_write_of_an_update_with_its_init():
    # the init moves to the new buffer with the update: right, as in TVM
    sch = small_schedule("GMM")
    copy = sch.reindex("Z", ("write", 0))
    assert sch.get(copy).name == "Z_reindex"
    assert sch.get(sch.get_block("Z")).init.buffer.name == "Z_reindex"
    same_as_unscheduled(sch)


def test_reindex_of_a_block_indexing_by_its_own_loops_is_refused():
    # the copy block would use the loops i, j outside the block (fuzz seeds 335, 415; TVM crashes)
    sch = Schedule(wb.parse(OWN_LOOPS))
    refused(sch, r"indexes C by \['i', 'j'\].*not its iterators", "reindex", "C", ("write", 0))
    refused(sch, r"indexes A by \['i', 'j'\]", "reindex", "C", ("read", 0))


def test_reindex_names_as_tvm():
    """TVM 0.27: the buffer ``<buffer>_reindex``; the copy block named after the buffer it
    writes plus ``_reindex`` (so ``A_reindex_reindex`` for a read); a repeated name gets ``_1``."""
    sch = small_schedule("GMM")
    a, b = (r.buffer.name for r in sch.get(sch.get_block("Z")).reads[:2])
    read_a = sch.reindex("Z", ("read", 0))
    write = sch.reindex("Z", ("write", 0))
    assert sch.get(read_a).name == f"{a}_reindex_reindex"
    assert sch.get(read_a).writes[0].buffer.name == f"{a}_reindex"
    assert sch.get(write).name == "Z_reindex"
    again = sch.reindex("Z", ("read", 0))  # reads A_reindex now
    assert sch.get(again).name == f"{a}_reindex_reindex_reindex"
    assert sch.get(again).writes[0].buffer.name == f"{a}_reindex_reindex"
    same_as_unscheduled(sch)


def test_cache_write_of_an_update_whose_init_went_to_an_outer_block_is_refused():
    # blockize twice moved the init to T0_o; the cache was read before written (fuzz seed 1859)
    A = dsl.placeholder((24,), "float32", name="A")
    k = dsl.reduce_axis(24, name="k")
    T = dsl.compute((1,), lambda i: dsl.sum(A[k], axis=k), name="T")
    sch = Schedule(dsl.create_func([A, T]))
    sch.blockize(sch.get_loops("T")[1], preserve_unit_iters=False)
    (loop,) = sch.get_loops("T")
    sch.blockize(loop)
    refused(sch, "no init of its own", "cache_write", "T", 0, "local")
    # on the block holding the init it is fine
    sch.cache_write("T_o", 0, "local")
    same_as_unscheduled(sch)
