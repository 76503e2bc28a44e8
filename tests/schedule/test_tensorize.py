"""blockize, tensorize and the TensorIntrin registry: numeric equality (python and llvm), trace
round-trip, the IR they produce, and every rule they enforce."""

import numpy as np
import pytest

import workbench as wb
from workbench import workloads
from workbench.codegen import build
from workbench.errors import ScheduleError
from workbench.ir import dsl
from workbench.ir.expr import Var
from workbench.ir.structural import structural_match
from workbench.ir.verify import verify
from workbench.schedule import Schedule
from workbench.target import Target
from workbench.schedule.intrinsics import gemm_intrinsics
from workbench.schedule.intrinsics.x86 import gemm_desc, gemm_impl, gemm_isa, gemm_name
from workbench.ir.index import index, replace
from workbench.schedule.tensor_intrin import TensorIntrin
from workbench.testing import (
    X86_TARGETS,
    check_numeric,
    check_small,
    runs_here,
    shared_loop_func,
    small_schedule,
)

GEMM = "avx512_f32_gemm_4x16x4"


def check(sch, name):
    """Valid IR, the numpy reference through both targets, and the trace round-trip."""
    verify(sch.func)
    check_small(sch, name)
    check_numeric(sch, name, target="llvm", **workloads.small(name))


def tiled_gmm(ti=4, tj=16, tk=4, order=("i1", "j1", "k1")):
    """GMM (16^3) with i, j, k split by ti, tj, tk; the inner loops last, in ``order``."""
    sch = small_schedule("GMM")
    _, i, j, k = sch.get_loops("Z")
    i0, i1 = sch.split(i, [None, ti])
    j0, j1 = sch.split(j, [None, tj])
    k0, k1 = sch.split(k, [None, tk])
    inner = {"i1": i1, "j1": j1, "k1": k1}
    sch.reorder(i0, j0, k0, *[inner[n] for n in order])
    return sch, inner[order[0]]


# -- blockize --------------------------------------------------------------------------------


def test_blockize_gmm_reduction():
    sch, i1 = tiled_gmm()
    outer = sch.blockize(i1)
    blk = sch.get(outer)
    assert blk.name == "Z_o"
    assert [(iv.var.name, iv.iter_type, iv.dom.extent.value) for iv in blk.iter_vars] == [
        ("vb_o", "S", 1),
        ("vi_o", "S", 4),
        ("vj_o", "S", 1),
        ("vk_o", "R", 4),
    ]
    inner = sch.get(sch.get_block("Z"))
    assert [iv.var.name for iv in inner.iter_vars] == ["vi_i", "vj_i", "vk_i"]
    assert inner.init is None
    assert str(inner.body.indices[1]) == "vi_o * 4 + vi_i"
    # the init runs once per output tile, from the outer block, over the inner spatial loops
    init_realize = blk.init.body.body
    assert init_realize.block.name == "Z_init"
    assert [iv.var.name for iv in init_realize.block.iter_vars] == ["vi_i_init", "vj_i_init"]
    check(sch, "GMM")


@pytest.mark.parametrize(
    "name,block,at", [("SFM", "T_softmax_norm", 2), ("TBG", "query_T", 2), ("NRM", "C", 1)]
)
def test_blockize_workloads(name, block, at):
    """After splitting the innermost loop by 4, blockize at loop ``at``: the inner part of a
    split (SFM), whole inner loops (TBG) and a reduction with its init (NRM)."""
    sch = small_schedule(name)
    sch.split(sch.get_loops(block)[-1], [None, 4])
    sch.blockize(sch.get_loops(block)[at])
    check(sch, name)


def test_blockize_whole_nest():
    """At the outermost loop every outer iterator has extent 1 (bound to 0)."""
    sch = small_schedule("GMM")
    outer = sch.blockize(sch.get_loops("Z")[0])
    realize = sch.index.realizes[sch.get(outer).name]
    assert [v.value for v in realize.iter_values] == [0, 0, 0, 0]
    assert sch.get_loops(outer) == []
    check(sch, "GMM")


@pytest.mark.parametrize("preserve", [True, False])
def test_blockize_unit_iters(preserve):
    """b has extent 1 above the blockized loop: its outer iterator stays used or becomes 0."""
    sch, i1 = tiled_gmm()
    sch.blockize(i1, preserve_unit_iters=preserve)
    body = str(sch.get(sch.get_block("Z")).body)
    assert ("Z[vb_o," in body) == preserve
    check(sch, "GMM")


def test_blockize_nested_then_decompose():
    """The outer block is a reduction block like any other: it blockizes and decomposes."""
    sch, i1 = tiled_gmm()
    outer = sch.blockize(i1)
    outer2 = sch.blockize(sch.get_loops(outer)[1])
    assert sch.get(outer2).name == "Z_o_o"
    init = sch.decompose_reduction(outer2, sch.get_loops(outer2)[0])
    assert sch.get(init).name == "Z_o_o_init" and sch.get(outer2).init is None
    check(sch, "GMM")


def test_blockize_fused_binding():
    """A fused-then-split binding still divides: vi = f0 // 2, vj = f0 % 2 * 8 + f1."""
    sch = small_schedule("GMM")
    _, i, j, _ = sch.get_loops("Z")
    f = sch.fuse(i, j)
    _, f1 = sch.split(f, [None, 8])
    sch.reorder(f1, sch.get_loops("Z")[3])
    sch.blockize(sch.get_loops("Z")[2])
    check(sch, "GMM")


def test_blockize_chain_required():
    sch = Schedule(shared_loop_func())
    with pytest.raises(
        ScheduleError,
        match=r"blockize \(argument 'loop'\): the statements "
        r"under loop 'i' must be a chain of loops ending in "
        r"one block",
    ):
        sch.blockize(sch.get_loops("B")[0])


def test_blockize_not_divisible():
    sch = small_schedule("GMM")
    _, i, j, _ = sch.get_loops("Z")
    _, f1 = sch.split(sch.fuse(i, j), [None, 3])
    with pytest.raises(ScheduleError, match="binding vi = .* is not divisible as outer \\* c"):
        sch.blockize(f1)


def test_blockize_mixed_predicate():
    sch = small_schedule("GMM")
    _, i1 = sch.split(sch.get_loops("Z")[1], [None, 5])
    with pytest.raises(ScheduleError, match=r"predicate i_0 \* 5 \+ i_1 < 16 of block 'Z' mixes"):
        sch.blockize(i1)


# -- tensorize -------------------------------------------------------------------------------


def test_tensorize_gmm_avx512():
    sch, i1 = tiled_gmm()
    sch.tensorize(i1, GEMM)
    blk = sch.get(sch.get_block("Z_o"))
    assert "Z" not in sch.index.realizes  # the inner block was replaced
    assert [b.name for b in blk.alloc_buffers] == ["acc"]
    assert f'sch.tensorize(block_or_loop=l6, tensor_intrin="{GEMM}", preserve_unit_iters=True)' in str(
        sch.trace
    )
    check(sch, "GMM")


@pytest.mark.parametrize("target", X86_TARGETS)
def test_tensorize_gmm_with_the_targets_kernel(target):
    """The 4x16x4 kernel of the target's family (AVX2 or AVX-512): numpy-correct where the host
    runs it, and fused multiply-adds on the target's registers (2 ymm or 1 zmm per row)."""
    name = gemm_name(4, 16, 4, gemm_isa(target))
    assert name in gemm_intrinsics(target)
    sch, i1 = tiled_gmm()
    sch.tensorize(i1, name)
    if runs_here(target):
        check_numeric(sch, "GMM", target=target, **workloads.small("GMM"))
    kernel = build(sch, target=target)
    assert "<16 x float>" in kernel.source("llvm-raw")
    fmas = [line for line in kernel.source("asm").splitlines() if "vfmadd" in line]
    register = "zmm" if Target(target).vector_lanes("float32") == 16 else "ymm"
    assert fmas and all(register in line for line in fmas)


def test_tensorize_avx2_6x16_kernel():
    """BLIS's Haswell tile: 6 rows x 2 ymm of accumulators, k = 16 steps per call."""
    shape = dict(b=1, n=12, m=32, k=32)
    sch = wb.Schedule(workloads.get("GMM", **shape))
    _, i, j, k = sch.get_loops("Z")
    i0, i1 = sch.split(i, [None, 6])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 16])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.tensorize(i1, "avx2_f32_gemm_6x16x16")
    verify(sch.func)
    check_numeric(sch, "GMM", target="llvm -mcpu=znver3", **shape)  # AVX2 runs on AVX-512 too
    asm = build(sch, target="llvm -mcpu=znver3").source("asm")
    assert "zmm" not in asm and sum("vfmadd" in line and "ymm" in line for line in asm.splitlines()) >= 12


@pytest.mark.parametrize(
    "target,first,count",
    [
        ("llvm -mcpu=skylake-avx512", "avx512_f32_gemm_8x32x64", 24),
        ("llvm -mcpu=znver4", "avx512_f32_gemm_8x32x64", 24),
        ("llvm -mcpu=znver3", "avx2_f32_gemm_6x16x64", 28),
        ("llvm -mcpu=haswell", "avx2_f32_gemm_6x16x64", 28),
        ("llvm -mcpu=sandybridge", None, 0),  # AVX without FMA
        ("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1", None, 0),
        ("python", None, 0),
    ],
)
def test_gemm_intrinsics_follow_the_target(target, first, count):
    names = gemm_intrinsics(target)
    assert len(names) == count and (names[0] if names else None) == first
    lanes = Target(target).vector_lanes("float32")
    registers = 32 if lanes == 16 else 16
    for name in names:
        m, n, k = map(int, name.rsplit("_", 1)[1].split("x"))
        assert m * (n // lanes) + n // lanes + 1 <= registers  # accumulators, B row, A value
        assert TensorIntrin.get(name).desc.params[2].shape == (m, n)


def test_tensorize_block_after_decompose():
    """Tensorize a blockized block whose init was moved out first."""
    sch, i1 = tiled_gmm()
    outer = sch.blockize(i1)
    sch.decompose_reduction(outer, sch.get_loops(outer)[1])
    sch.tensorize(outer, GEMM)
    check(sch, "GMM")


def test_tensorize_bigger_tile_with_two_vectors():
    sch, i1 = tiled_gmm(8, 16, 16)
    sch.tensorize(i1, "avx512_f32_gemm_8x16x16")
    check(sch, "GMM")


def _mul2_func(stages=2, shape=(4, 8)):
    """``B = A * 2`` then ``C = B * 2`` (each its own loop nest)."""
    A = dsl.placeholder(shape, name="A")
    B = dsl.compute(shape, lambda i, j: A[i, j] * 2.0, name="B")
    C = dsl.compute(shape, lambda i, j: B[i, j] * 2.0, name="C")
    return dsl.create_func([A, C] if stages == 2 else [A, B])


@pytest.fixture
def mul2_intrin():
    """A user intrinsic written with the DSL: description ``y = x * 2`` over 4 elements, and an
    implementation that is the same stage with its loop vectorized (it holds a block)."""
    x = dsl.placeholder((4,), name="x")
    desc = dsl.create_func([x, dsl.compute((4,), lambda i: x[i] * 2.0, name="y")])
    sch = Schedule(desc)
    sch.vectorize(sch.get_loops("y")[0])
    TensorIntrin.register("test_mul2_4", desc, sch.func, override=True)
    yield "test_mul2_4"
    TensorIntrin.unregister("test_mul2_4")


def test_tensorize_user_intrinsic_twice(mul2_intrin):
    """Two blocks tensorized with one intrinsic: its block and loop variables are copied."""
    sch = Schedule(_mul2_func())
    for name in ("B", "C"):
        _, j = sch.get_loops(name)
        _, j1 = sch.split(j, [None, 4])
        sch.tensorize(j1, mul2_intrin)
    assert {"y", "y_1"} <= set(sch.index.realizes)
    verify(sch.func)
    a = np.random.default_rng(0).uniform(-1, 1, (4, 8)).astype("float32")
    for target in ("python", "llvm"):
        out = np.zeros((4, 8), "float32")
        build(sch, target=target)(a, out)
        np.testing.assert_allclose(out, a * 4, rtol=1e-6)
    from workbench.testing import check_trace_roundtrip

    check_trace_roundtrip(sch)


def test_tensorize_mismatched_tile():
    sch, i1 = tiled_gmm(ti=8)
    with pytest.raises(
        ScheduleError,
        match=r"tensorize \(argument 'block_or_loop'\): block 'Z_o' "
        r"does not match the description of tensor intrinsic "
        r"'avx512_f32_gemm_4x16x4'; first mismatch at "
        r".*extent",
    ):
        sch.tensorize(i1, GEMM)


def test_tensorize_mismatched_loop_order():
    sch, k1 = tiled_gmm(order=("k1", "i1", "j1"))
    with pytest.raises(ScheduleError, match="does not match the description"):
        sch.tensorize(k1, GEMM)


def test_tensorize_mismatched_computation(mul2_intrin):
    sch = Schedule(_mul2_func(stages=1))
    func = sch.func
    block = index(func).block("B")
    plus = block.body.with_(value=block.body.value.a + 2.0)  # B = A + 2: not the description
    sch = Schedule(replace(func, block, block.with_(body=plus)))
    _, j1 = sch.split(sch.get_loops("B")[1], [None, 4])
    with pytest.raises(ScheduleError, match="first mismatch at .*'Add'.* vs .*'Mul'"):
        sch.tensorize(j1, mul2_intrin)


def test_tensorize_unknown_intrinsic():
    sch, i1 = tiled_gmm()
    with pytest.raises(
        ScheduleError,
        match=r"\(argument 'tensor_intrin'\): no tensor intrinsic "
        r"named 'nope'; registered: avx2_f32_gemm_1x16x1, ",
    ):
        sch.tensorize(i1, "nope")


def test_tensorize_root_block():
    sch = small_schedule("GMM")
    with pytest.raises(ScheduleError, match="cannot tensorize the root block"):
        sch.tensorize("root", GEMM)


def test_tensorize_failure_leaves_schedule_unchanged():
    sch, i1 = tiled_gmm(ti=8)
    before = sch.func
    with pytest.raises(ScheduleError):
        sch.tensorize(i1, GEMM)
    assert sch.func is before


# -- the registry and the matching machinery -------------------------------------------------


def test_register_checks_the_pair():
    with pytest.raises(ValueError, match="must take the same parameters"):
        TensorIntrin.register("bad", gemm_desc(4, 16, 4), gemm_impl(4, 16, 8))
    with pytest.raises(ValueError, match="already registered"):
        TensorIntrin.register(GEMM, gemm_desc(4, 16, 4), gemm_impl(4, 16, 4))
    with_init = workloads.get("GMM", b=1, n=4, m=16, k=4)
    with pytest.raises(ValueError, match="must take the same parameters|without init"):
        TensorIntrin.register("bad", with_init, with_init)
    with pytest.raises(KeyError, match="no tensor intrinsic named 'bad'"):
        TensorIntrin.get("bad")


def test_structural_match_returns_the_correspondence():
    a, b = gemm_desc(4, 16, 4), gemm_desc(4, 16, 4)
    m = structural_match(a.root.body, b.root.body)
    assert m and m.mismatch == ""
    loops_a = [n.loop_var for n in a.loops()]
    loops_b = [n.loop_var for n in b.loops()]
    assert [m.vars[v] for v in loops_a] == loops_b
    assert [m.buffers[p] for p in (a.params[2], a.params[0])] == [b.params[2], b.params[0]]
    other = gemm_desc(4, 16, 8)
    miss = structural_match(a.root.body, other.root.body)
    assert not miss and "extent" in miss.mismatch and miss.vars == {}
    renamed = replace(b, b.block("C"), b.block("C").with_(name="update"))
    assert not structural_match(a.root.body, renamed.root.body)
    assert structural_match(a.root.body, renamed.root.body, block_names=False)
    assert isinstance(next(iter(m.vars)), Var)
