"""Allocation placement and buffer compaction in lowering: a cache stage moved under a tile loop
gets a small buffer allocated in that loop; a buffer whose values cross iterations does not."""

import numpy as np
import pytest

import workbench as wb
from workbench import workloads
from workbench.codegen import build, lower
from workbench.codegen.compaction import plan_allocations
from workbench.ir import (
    REDUCE,
    SPATIAL,
    Block,
    BlockRealize,
    Buffer,
    BufferStore,
    ForKind,
    IterVar,
    PrimFunc,
    Range,
    Var,
)
from workbench.ir.expr import FloatImm, Select
from workbench.ir.functor import pre_order
from workbench.ir.stmt import TRUE, make_for, seq
from workbench.schedule import Schedule
from workbench.testing import check_numeric

from codegenhelpers import allocations

TARGETS = ["python", "llvm"]


def gmm(n=32, rows=8, cols=16, parallel=False, decompose=False, cache_x=None):
    """GMM tiled rows x cols with a local accumulator written back per row tile (and X copied
    per k-tile into ``cache_x`` scope when given)."""
    sch = Schedule(workloads.get("GMM", b=1, n=n, m=n, k=n), seed=0)
    block = sch.get_block("Z")
    b, i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, rows])
    jo, ji = sch.split(j, [None, cols])
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(jo, io, ko, ki, ii, ji)
    if cache_x:
        sch.compute_at(sch.cache_read(block, 0, cache_x), ko)  # X (a reduction reads: X, Y)
    sch.reverse_compute_at(sch.cache_write(block, 0, "local"), io)
    if parallel:
        sch.parallel(sch.fuse(b, jo))
    sch.unroll(ii)
    sch.vectorize(ji)
    # decomposed last: the update block it leaves (reduce iterators, no init) is not a reduction
    # block any more, and TVM refuses to vectorize or parallelize a loop above it
    if decompose:
        sch.decompose_reduction(block, ko)
    return sch


def check_gmm(sch, n=32):
    for target in TARGETS:
        check_numeric(sch, "GMM", target=target, b=1, n=n, m=n, k=n)


@pytest.mark.parametrize("parallel", [False, True])
def test_cache_write_local_accumulator_is_a_tile_allocated_in_the_tile_loop(parallel):
    sch = gmm(parallel=parallel)
    buf, loop = allocations(lower(sch.func))["Z_local"]
    assert buf.shape == (1, 8, 16) and buf.scope == "local" and loop == "i_0"
    check_gmm(sch)


def test_compacted_accesses_are_shifted_to_the_tile():
    low = lower(gmm().func)
    acc = allocations(low)["Z_local"][0]
    stores = [s for s in pre_order(low.body) if isinstance(s, BufferStore) and s.buffer is acc]
    names = {tuple(str(i) for i in s.indices) for s in stores}
    assert names == {("0", "i_1", "j_1")}  # i_0 * 8 + i_1 - i_0 * 8 folded


@pytest.mark.parametrize("scope", ["local", "shared"])
def test_cache_read_computed_at_the_k_tile_is_a_k_tile(scope):
    sch = gmm(cache_x=scope, decompose=True)
    allocs = allocations(lower(sch.func))
    x_buf, x_loop = allocs[f"X_{scope}"]
    assert x_buf.shape == (1, 8, 4) and x_buf.scope == scope and x_loop == "k_0"
    assert allocs["Z_local"][0].shape == (1, 8, 16)  # the decomposed init covers the reads
    check_gmm(sch)


def test_storage_align_survives_compaction():
    sch = gmm(cache_x="shared")
    sch.storage_align(sch.get_block("X_shared"), 0, axis=1, factor=8, offset=1)
    buf = allocations(lower(sch.func))["X_shared"][0]
    assert buf.shape == (1, 8, 4) and buf.align == ((1, 8, 1),)
    assert buf.strides() == (72, 9, 1)
    check_gmm(sch)


def test_allocation_stays_outside_vectorized_loops():
    """T computed at a vectorized loop is allocated in the loop above, one vector wide."""
    A = wb.placeholder((16,), "float32", name="A")
    T = wb.compute((16,), lambda i: A[i] * 2.0, name="T")
    B = wb.compute((16,), lambda i: T[i] + 1.0, name="B")
    sch = Schedule(wb.create_func([A, B], name="two_stage"))
    io, ii = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 8])
    sch.vectorize(ii)
    sch.compute_at(sch.get_block("T"), ii)
    buf, loop = allocations(lower(sch.func))["T"]
    assert buf.shape == (8,) and loop == "i_0"
    a = np.arange(16, dtype="float32")
    for target in TARGETS:
        b = np.zeros(16, "float32")
        build(sch.func, target)(a, b)
        np.testing.assert_array_equal(b, a * 2 + 1)


# buffers whose values cross iterations: left whole, at the root ------------------------------


def root(body, allocs):
    return BlockRealize((), TRUE, Block("root", (), (), (), body, alloc_buffers=allocs))


def carried_rows_func():
    """for t: T[t + 1, :] = A[t, :] * 2; B[t, :] = T[t + 1, :] + (T[t, :] if t > 0 else 0).
    Iteration t reads the row iteration t - 1 wrote: per-iteration storage would lose it."""
    A, B, T = Buffer("A", (3, 4)), Buffer("B", (3, 4)), Buffer("T", (4, 4))
    t, i, j = Var("t"), Var("i"), Var("j")
    vt, vi, wt, wj = Var("vt"), Var("vi"), Var("wt"), Var("wj")
    iters = lambda a, b: (IterVar(a, Range.from_extent(3)), IterVar(b, Range.from_extent(4)))
    write = Block("T", iters(vt, vi), (), (), BufferStore(T, A[vt, vi] * 2.0, (vt + 1, vi)))
    prev = Select(wt > 0, T[wt, wj], FloatImm(0.0))
    read = Block("B", iters(wt, wj), (), (), BufferStore(B, T[wt + 1, wj] + prev, (wt, wj)))
    body = make_for(
        t,
        3,
        seq(
            make_for(i, 4, BlockRealize((t, i), TRUE, write)),
            make_for(j, 4, BlockRealize((t, j), TRUE, read)),
        ),
    )
    return PrimFunc("carried", (A, B), root(body, (T,)))


def carried_reduction_func():
    """for k: for i: X[i] += A[i, k] (init at k == 0); B[i] = X[i]. The accumulator is only
    touched inside the i loop, but its reduction loop k is outside it."""
    A, B, X = Buffer("A", (4, 5)), Buffer("B", (4,)), Buffer("X", (4,))
    k, i, vi, vk, wi = Var("k"), Var("i"), Var("vi"), Var("vk"), Var("wi")
    acc = Block(
        "X",
        (IterVar(vi, Range.from_extent(4), SPATIAL), IterVar(vk, Range.from_extent(5), REDUCE)),
        (),
        (),
        BufferStore(X, X[vi] + A[vi, vk], (vi,)),
        init=BufferStore(X, FloatImm(0.0), (vi,)),
    )
    out = Block("B", (IterVar(wi, Range.from_extent(4)),), (), (), BufferStore(B, X[wi], (wi,)))
    body = make_for(k, 5, make_for(i, 4, seq(BlockRealize((i, k), TRUE, acc), BlockRealize((i,), TRUE, out))))
    return PrimFunc("carried_sum", (A, B), root(body, (X,)))


@pytest.mark.parametrize("target", TARGETS)
def test_buffer_carried_across_iterations_stays_whole(target):
    func = carried_rows_func()
    assert plan_allocations(func) == {}
    buf, loop = allocations(lower(func))["T"]
    assert buf.shape == (4, 4) and loop is None
    a = np.arange(12, dtype="float32").reshape(3, 4)
    b = np.zeros((3, 4), "float32")
    build(func, target)(a, b)
    expected = a * 2
    expected[1:] += a[:-1] * 2
    np.testing.assert_array_equal(b, expected)


@pytest.mark.parametrize("target", TARGETS)
def test_reduction_with_its_loop_above_the_uses_stays_whole(target):
    func = carried_reduction_func()
    assert plan_allocations(func) == {}
    a = np.random.default_rng(0).standard_normal((4, 5)).astype("float32")
    b = np.zeros(4, "float32")
    build(func, target)(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5)


def test_loops_sharing_a_variable_are_not_planned():
    """Two loops binding one Var would give it two ranges: planning is skipped, not guessed."""
    A, B, T = Buffer("A", (4, 8)), Buffer("B", (4, 8)), Buffer("T", (4, 8))
    o, i, v, w, vo, wo = Var("o"), Var("i"), Var("v"), Var("w"), Var("vo"), Var("wo")
    it = lambda a, b: (IterVar(a, Range.from_extent(4)), IterVar(b, Range.from_extent(8)))
    fill = Block("T", it(vo, v), (), (), BufferStore(T, A[vo, v] * 2.0, (vo, v)))
    use = Block("B", it(wo, w), (), (), BufferStore(B, T[wo, w] + 1.0, (wo, w)))
    body = make_for(
        o,
        4,
        seq(
            make_for(i, 8, BlockRealize((o, i), TRUE, fill)), make_for(i, 8, BlockRealize((o, i), TRUE, use))
        ),
    )
    func = PrimFunc("reused", (A, B), root(body, (T,)))
    assert plan_allocations(func) == {}
    a = np.arange(32, dtype="float32").reshape(4, 8)
    b = np.zeros((4, 8), "float32")
    build(func, "python")(a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)


# GPU scopes: a shared buffer is not split across the threads that share it -------------------


# (a shared buffer may be allocated inside the thread loop, as in TVM: one buffer for all the
# threads, its region relaxed over them; the CUDA backend declares it once per block)
@pytest.mark.parametrize("scope, site, shape", [("local", "tx", (1,)), ("shared", "tx", (4,))])
def test_thread_loops_bound_the_site_by_scope(scope, site, shape):
    A, B, S = Buffer("A", (16,)), Buffer("B", (16,)), Buffer("S", (16,), scope=scope)
    bx, tx, v, w = Var("bx"), Var("tx"), Var("v"), Var("w")
    it = lambda x: (IterVar(x, Range.from_extent(16)),)
    fill = Block("S", it(v), (), (), BufferStore(S, A[v] * 2.0, (v,)))
    use = Block("B", it(w), (), (), BufferStore(B, S[w] + 1.0, (w,)))
    x = bx * 4 + tx
    body = make_for(
        bx,
        4,
        make_for(
            tx,
            4,
            seq(BlockRealize((x,), TRUE, fill), BlockRealize((x,), TRUE, use)),
            ForKind.THREAD_BINDING,
            thread_tag="threadIdx.x",
        ),
        ForKind.THREAD_BINDING,
        thread_tag="blockIdx.x",
    )
    (plan,) = plan_allocations(PrimFunc("bound", (A, B), root(body, (S,)))).values()
    assert plan.site.name == site and plan.buffer.shape == shape


# workloads after compute_at / compute_inline -------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_stages_computed_at_the_row_loop(target):
    shape = workloads.small("SFM")
    sch = Schedule(workloads.get("SFM", **shape))
    row = sch.get_loops(sch.get_block("T_softmax_norm"))[0]
    for name in ("T_softmax_expsum", "T_softmax_exp", "T_softmax_maxelem"):
        sch.compute_at(sch.get_block(name), row)
    low = lower(sch.func)
    allocs = allocations(low)
    assert allocs["T_softmax_exp"][0].shape == (1, shape["n"])
    assert allocs["T_softmax_maxelem"][0].shape == allocs["T_softmax_expsum"][0].shape == (1,)
    assert {loop for _, loop in allocs.values()} == {low.body.loop_var.name}  # the row loop
    check_numeric(sch, "SFM", target=target, **shape)


@pytest.mark.parametrize("target", TARGETS)
def test_conv_padding_computed_at_an_output_row(target):
    shape = workloads.small("C2D")
    sch = Schedule(workloads.get("C2D", **shape))
    h = sch.get_loops(sch.get_block("conv2d_nhwc"))[1]
    sch.compute_at(sch.get_block("PadInput"), h)
    pad = allocations(lower(sch.func))["PadInput"][0]
    assert pad.shape[1] == shape["kernel"]  # the input rows one output row needs
    check_numeric(sch, "C2D", target=target, **shape)


@pytest.mark.parametrize("target", TARGETS)
def test_conv_bn_relu_inlined_and_computed_at(target):
    shape = workloads.small("CBR")
    sch = Schedule(workloads.get("CBR", **shape))
    for name in ("bias_add", "bn_mul", "bn_add"):
        sch.compute_inline(sch.get_block(name))
    row = sch.get_loops(sch.get_block("compute"))[1]
    sch.compute_at(sch.get_block("Conv2dOutput"), row)
    sch.compute_at(sch.get_block("PaddedInput"), sch.get_loops(sch.get_block("Conv2dOutput"))[1])
    allocs = allocations(lower(sch.func))
    assert allocs["Conv2dOutput"][0].shape == (1, 1, 4, 4)
    assert allocs["PaddedInput"][0].shape[1] == shape["kernel"]
    check_numeric(sch, "CBR", target=target, **shape)


def test_unscheduled_intermediates_keep_their_shape():
    func = workloads.get("SFM", **workloads.small("SFM"))
    assert plan_allocations(func) == {}
    allocs = allocations(lower(func))
    assert all(
        buf.shape == orig.shape
        for buf, orig in zip(
            (allocs[b.name][0] for b in func.body.block.alloc_buffers), func.body.block.alloc_buffers
        )
    )
