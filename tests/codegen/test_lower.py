"""Lowering: blocks disappear, iterators become their bindings, init and predicate are guarded."""

import numpy as np
import pytest

import workbench as wb
from workbench.codegen import build, lower
from workbench.errors import BuildError
from workbench.ir import (
    REDUCE,
    SPATIAL,
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    IterVar,
    PrimFunc,
    Range,
    Var,
)
from workbench.ir.expr import FloatImm, IntImm, is_const
from workbench.ir.functor import pre_order
from workbench.ir.stmt import TRUE, make_for, seq


def matmul(n=8, m=6, kk=5):
    A = wb.placeholder((n, kk), "float32", name="A")
    B = wb.placeholder((kk, m), "float32", name="B")
    k = wb.reduce_axis(kk, name="k")
    C = wb.compute((n, m), lambda i, j: wb.sum(A[i, k] * B[k, j], axis=k), name="C")
    return wb.create_func([A, B, C], name="matmul")


def two_stage(n=12):
    A = wb.placeholder((n,), "float32", name="A")
    T = wb.compute((n,), lambda i: A[i] * 2.0, name="T")
    B = wb.compute((n,), lambda i: T[i] + 1.0, name="B")
    return wb.create_func([A, B], name="two_stage")


def nodes(func, cls):
    return [n for n in pre_order(func.body) if isinstance(n, cls)]


def root(body, allocs=()):
    return BlockRealize((), TRUE, Block("root", (), (), (), body, alloc_buffers=allocs))


def split_reduce_func(n=3, kk=10, factor=4):
    """out[i] = sum_k A[i, k] with k split by ``factor`` (not dividing kk): a predicate guards
    the tail, and the init condition is on the fused value ``ko * factor + ki``."""
    A, out = Buffer("A", (n, kk)), Buffer("out", (n,))
    i, ko, ki = Var("i"), Var("ko"), Var("ki")
    vi, vk = Var("vi"), Var("vk")
    block = Block(
        "out",
        (IterVar(vi, Range.from_extent(n), SPATIAL), IterVar(vk, Range.from_extent(kk), REDUCE)),
        (),
        (),
        BufferStore(out, out[vi] + A[vi, vk], (vi,)),
        init=BufferStore(out, FloatImm(0.0), (vi,)),
    )
    k_value = ko * factor + ki
    realize = BlockRealize((i, k_value), k_value < kk, block)
    nest = make_for(i, n, make_for(ko, -(-kk // factor), make_for(ki, factor, realize)))
    return PrimFunc("split_reduce", (A, out), root(nest))


def test_matmul_lowered_has_no_blocks_and_a_guarded_init():
    low = lower(matmul())
    assert not nodes(low, Block) and not nodes(low, BlockRealize)
    loop_vars = {f.loop_var for f in nodes(low, For)}
    assert sorted(v.name for v in loop_vars) == ["i", "j", "k"]
    # every variable left is a loop variable: the block iterators were substituted
    assert {n for n in pre_order(low.body) if isinstance(n, Var)} <= loop_vars
    (guard,) = nodes(low, IfThenElse)
    assert isinstance(guard.then_case, BufferStore) and is_const(guard.then_case.value, 0.0)
    k = next(v for v in loop_vars if v.name == "k")
    assert any(n is k for n in pre_order(guard.condition))
    assert low.attrs["lowered"] is True


def test_lower_is_idempotent_and_keeps_params():
    func = matmul()
    low = lower(func)
    assert lower(low) is low
    assert low.params == func.params and low.name == func.name


def test_two_stage_intermediate_becomes_an_allocate_around_the_body():
    func = two_stage()
    low = lower(func)
    assert isinstance(low.body, Allocate) and low.body.buffer.name == "T"
    stores = [s.buffer.name for s in nodes(low, BufferStore)]
    assert stores == ["T", "B"]


def test_predicate_becomes_an_if_and_init_condition_uses_the_binding():
    low = lower(split_reduce_func())
    guards = nodes(low, IfThenElse)
    assert len(guards) == 2  # the predicate, then the init inside it
    outer, inner = guards
    assert outer.then_case is not None and inner in list(pre_order(outer.then_case))
    names = {n.name for n in pre_order(inner.condition) if isinstance(n, Var)}
    assert names == {"ko", "ki"}


def test_split_reduction_with_predicate_runs_correctly():
    a = np.random.default_rng(0).standard_normal((3, 10)).astype("float32")
    out = np.full(3, 7.0, "float32")  # garbage: the init must overwrite it
    build(split_reduce_func(), "python")(a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5)


def test_nonzero_loop_min_and_nested_block_bindings():
    """for i in [1, 7): outer block vo = i; inner block vi = vo * 2 + c: B[vi] = A[vi] + c."""
    A, B = Buffer("A", (16,)), Buffer("B", (16,))
    i, c, vo, vi = Var("i"), Var("c"), Var("vo"), Var("vi")
    inner = Block(
        "inner",
        (IterVar(vi, Range.from_extent(16)),),
        (),
        (),
        BufferStore(B, A[vi] + wb.cast("float32", c), (vi,)),
    )
    body = make_for(c, 2, BlockRealize((vo * 2 + c,), TRUE, inner))
    outer = Block("outer", (IterVar(vo, Range.from_extent(8)),), (), (), body)
    nest = make_for(i, 6, BlockRealize((i,), TRUE, outer), min=1)
    func = PrimFunc("nested", (A, B), root(nest))
    low = lower(func)
    assert not nodes(low, Block)
    loop = nodes(low, For)[0]
    assert loop.loop_var is i and is_const(loop.min, 1)
    a, b = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    build(func)(a, b)
    expected = np.zeros(16, "float32")
    expected[2:14] = a[2:14] + np.tile([0.0, 1.0], 6)  # vi = 2 * i + c for i in 1..6, c in 0, 1
    np.testing.assert_array_equal(b, expected)


def test_block_alloc_buffer_wraps_the_block_and_loop_kinds_are_kept():
    A, B = Buffer("A", (4, 3)), Buffer("B", (4,))
    tmp = Buffer("tmp", (1,), scope="local")
    i, vi = Var("i"), Var("vi")
    body = seq(BufferStore(tmp, A[vi, 0] * 2.0, (IntImm(0),)), BufferStore(B, tmp[0] + A[vi, 2], (vi,)))
    blk = Block("B", (IterVar(vi, Range.from_extent(4)),), (), (), body, alloc_buffers=(tmp,))
    loop = make_for(
        i, 4, BlockRealize((i,), TRUE, blk), kind=ForKind.PARALLEL, annotations={"pragma_unroll": 4}
    )
    func = PrimFunc("alloc", (A, B), root(loop))
    low = lower(func)
    (f,) = nodes(low, For)
    assert f.kind is ForKind.PARALLEL and dict(f.annotations) == {"pragma_unroll": 4}
    assert isinstance(f.body, Allocate) and f.body.buffer is tmp
    a, b = np.arange(12, dtype="float32").reshape(4, 3), np.zeros(4, "float32")
    build(func)(a, b)
    np.testing.assert_array_equal(b, a[:, 0] * 2 + a[:, 2])


def test_init_without_a_varying_reduce_binding_is_unguarded():
    A, out = Buffer("A", (4,)), Buffer("out", (4,))
    i, vi, vk = Var("i"), Var("vi"), Var("vk")
    blk = Block(
        "out",
        (IterVar(vi, Range.from_extent(4)), IterVar(vk, Range.from_extent(1), REDUCE)),
        (),
        (),
        BufferStore(out, out[vi] + A[vi], (vi,)),
        init=BufferStore(out, FloatImm(0.0), (vi,)),
    )
    func = PrimFunc("r1", (A, out), root(make_for(i, 4, BlockRealize((i, IntImm(0)), TRUE, blk))))
    low = lower(func)
    assert not nodes(low, IfThenElse)
    assert [s.value for s in nodes(low, BufferStore)][0].value == 0.0


def test_binding_count_mismatch_is_a_build_error():
    A = Buffer("A", (4,))
    i, vi = Var("i"), Var("vi")
    blk = Block("A", (IterVar(vi, Range.from_extent(4)),), (), (), BufferStore(A, FloatImm(1.0), (vi,)))
    func = PrimFunc("bad", (A,), root(make_for(i, 4, BlockRealize((), TRUE, blk))))
    with pytest.raises(BuildError, match="block 'A' has 1 iterators but 0 bindings"):
        lower(func)
