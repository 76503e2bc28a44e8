"""Access regions of block bodies, and of realized blocks relaxed over loops."""

import workbench.ir.dsl as wb
from workbench.ir.buffer import Buffer
from workbench.ir.expr import FloatImm, IntImm, Min, Var, is_const
from workbench.ir.region import block_access_regions, infer_access_regions
from workbench.ir.stmt import (
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    ForKind,
    IfThenElse,
    IterVar,
    Range,
    SeqStmt,
    TRUE,
    make_for,
)

A = Buffer("A", (64,))
B = Buffer("B", (64,))
C = Buffer("C", (16, 16))
vi, vj = Var("vi"), Var("vj")


def test_point_accesses_are_united():
    body = BufferStore(B, A[vi] + A[vi + 2] + A[vi + 1], (vi,))
    reads, writes = infer_access_regions(body)
    assert [r.buffer for r in reads] == [A] and [w.buffer for w in writes] == [B]
    (rng,) = reads[0].region
    assert rng.min is vi and is_const(rng.extent, 3)
    (w,) = writes[0].region
    assert w.min is vi and is_const(w.extent, 1)


def test_reduction_reads_exclude_its_output_and_order_is_first_use():
    """As in TVM: a block with an init does not list what it accumulates into among its reads."""
    k = wb.reduce_axis(16, name="k")
    X = wb.placeholder((16, 16), name="X")
    Y = wb.placeholder((16, 16), name="Y")
    Z = wb.compute((16, 16), lambda i, j: wb.sum(X[i, k] * Y[k, j], axis=k), name="Z")
    func = wb.create_func([X, Y, Z])
    block = func.block("Z")
    reads, writes = infer_access_regions(block.body, block.init)
    assert [r.buffer.name for r in reads] == ["X", "Y"]
    assert [w.buffer.name for w in writes] == ["Z"]
    vi_, vj_, vk_ = (iv.var for iv in block.iter_vars)
    x_region = reads[0].region
    assert x_region[0].min is vi_ and x_region[1].min is vk_
    assert all(is_const(r.extent, 1) for r in x_region)


def test_own_allocations_are_left_out():
    T = Buffer("T", (64,))
    body = SeqStmt((BufferStore(T, A[vi], (vi,)), BufferStore(B, T[vi], (vi,))))
    reads, writes = infer_access_regions(body, alloc_buffers=(T,))
    assert [r.buffer for r in reads] == [A] and [w.buffer for w in writes] == [B]


def test_loops_inside_the_body_are_relaxed():
    ii = Var("ii")
    body = make_for(ii, 8, BufferStore(B, A[vi * 8 + ii] * FloatImm(2.0), (vi * 8 + ii,)))
    reads, writes = infer_access_regions(body)
    for region in (reads[0], writes[0]):
        (rng,) = region.region
        assert isinstance(rng.min, type(vi * 8)) and rng.min.a is vi and is_const(rng.min.b, 8)
        assert is_const(rng.extent, 8)


def test_conditions_read_buffers_and_constant_offsets_unite():
    body = IfThenElse(
        A[IntImm(0)] > FloatImm(0.0),
        BufferStore(B, A[IntImm(5)], (IntImm(1),)),
        BufferStore(B, A[IntImm(9)], (IntImm(3),)),
    )
    reads, writes = infer_access_regions(body)
    (ra,) = reads[0].region
    assert is_const(ra.min, 0) and is_const(ra.extent, 10)
    (wb_,) = writes[0].region
    assert is_const(wb_.min, 1) and is_const(wb_.extent, 3)


def test_data_dependent_index_under_a_loop_covers_the_dimension():
    idx = Buffer("I", (8,), "int32")
    ii = Var("ii")
    body = make_for(ii, 8, BufferStore(B, A[idx[ii]], (ii,)))
    reads, _ = infer_access_regions(body)
    by_name = {r.buffer.name: r.region[0] for r in reads}
    assert [r.buffer.name for r in reads] == ["A", "I"]
    assert is_const(by_name["A"].min, 0) and is_const(by_name["A"].extent, 64)
    assert is_const(by_name["I"].min, 0) and is_const(by_name["I"].extent, 8)


def _inner_block(io):
    """``for ii in range(4): block(vx = io*4 + ii) { B[vx] = A[vx] }`` with its own scratch."""
    vx, ii = Var("vx"), Var("ii")
    S = Buffer("S", (4,))
    inner = Block(
        "inner",
        (IterVar(vx, Range.from_extent(64)),),
        (BufferRegion(A, (Range(vx, IntImm(1)),)), BufferRegion(S, (Range.from_extent(4),))),
        (BufferRegion(B, (Range(vx, IntImm(1)),)),),
        BufferStore(B, A[vx], (vx,)),
        alloc_buffers=(S,),
    )
    return make_for(ii, 4, BlockRealize((io * 4 + ii,), TRUE, inner), ForKind.SERIAL)


def test_inner_blocks_contribute_declared_regions():
    io = Var("io")
    reads, writes = infer_access_regions(_inner_block(io))
    assert [r.buffer for r in reads] == [A] and [w.buffer for w in writes] == [B]
    (rng,) = reads[0].region
    assert rng.min.a is io and is_const(rng.min.b, 4) and is_const(rng.extent, 4)


def test_block_access_regions_relaxed_over_loops():
    io, ii = Var("io"), Var("ii")
    vx = Var("vx")
    block = Block(
        "b",
        (IterVar(vx, Range.from_extent(64)),),
        (BufferRegion(A, (Range(vx, IntImm(2)),)),),
        (BufferRegion(B, (Range(vx, IntImm(1)),)),),
        BufferStore(B, A[vx] + A[vx + 1], (vx,)),
    )
    realize = BlockRealize((io * 8 + ii,), TRUE, block)
    reads, writes = block_access_regions(realize, {ii: 8})
    (r,) = reads[0].region
    assert r.min.a is io and is_const(r.min.b, 8) and is_const(r.extent, 9)
    (w,) = writes[0].region
    assert is_const(w.extent, 8)
    # relaxed over both loops: the whole range the nest touches
    reads, _ = block_access_regions(realize, {io: 8, ii: 8})
    assert is_const(reads[0].region[0].min, 0) and is_const(reads[0].region[0].extent, 65)


def test_dsl_stage_regions():
    X = wb.placeholder((16,), name="X")
    Y = wb.compute((14,), lambda i: X[i] + X[i + 2], name="Y")
    block = wb.create_func([X, Y]).block("Y")
    (r,) = block.reads[0].region
    assert r.min is block.iter_vars[0].var and is_const(r.extent, 3)


def test_loop_variable_reused_by_a_sibling_loop():
    ii = Var("ii")
    body = SeqStmt(
        (
            make_for(ii, 2, BufferStore(B, A[ii], (ii,))),
            make_for(ii, 8, BufferStore(B, A[Min(ii, IntImm(5))], (ii,))),
        )
    )
    reads, writes = infer_access_regions(body)
    (r,) = reads[0].region
    assert is_const(r.min, 0) and is_const(r.extent, 6)  # not 8, not 2: each loop its own range
    assert is_const(writes[0].region[0].extent, 8)
