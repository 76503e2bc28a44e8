"""The python (reference) target against numpy, and ``build``'s target dispatch."""

import importlib
import math

import numpy as np
import pytest

import workbench as wb
from workbench.codegen import Kernel, build
from workbench.errors import BuildError
from workbench.ir import Block, BlockRealize, Buffer, BufferStore, ForKind, IterVar, PrimFunc, Range, Var
from workbench.ir.expr import call
from workbench.ir.stmt import TRUE, make_for

# the module, not the function ``workbench.codegen.build`` that shadows it
build_mod = importlib.import_module("workbench.codegen.build")
RNG = np.random.default_rng(0)


def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype("float32")


def root_of(stmt):
    return BlockRealize((), TRUE, Block("root", (), (), (), stmt))


def run(func, *inputs, out_shape, out_dtype="float32"):
    out = np.zeros(out_shape, out_dtype)
    build(func, "python")(*inputs, out)
    return out


def test_matmul_matches_numpy():
    A = wb.placeholder((7, 5), "float32", name="A")
    B = wb.placeholder((5, 6), "float32", name="B")
    k = wb.reduce_axis(5, name="k")
    C = wb.compute((7, 6), lambda i, j: wb.sum(A[i, k] * B[k, j], axis=k), name="C")
    func = wb.create_func([A, B, C], name="matmul")
    a, b = rand(7, 5), rand(5, 6)
    out = run(func, a, b, out_shape=(7, 6))
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-6)
    # flat row-major indexing; the accumulation reads as one
    assert "C[i * 6 + j] += A[i * 5 + k] * B[k * 6 + j]" in build(func).source()


def test_elementwise_chain_with_intermediate():
    A = wb.placeholder((4, 5), "float32", name="A")
    T = wb.compute((4, 5), lambda i, j: wb.exp(A[i, j]) * 2.0, name="T")
    B = wb.compute((4, 5), lambda i, j: wb.maximum(T[i, j] - A[i, j], 1.5), name="B")
    a = rand(4, 5)
    out = run(wb.create_func([A, B], name="chain"), a, out_shape=(4, 5))
    np.testing.assert_allclose(out, np.maximum(np.exp(a) * 2 - a, 1.5), rtol=1e-5)


def test_max_reduction_starts_from_minus_infinity():
    A = wb.placeholder((3, 8), "float32", name="A")
    k = wb.reduce_axis(8, name="k")
    M = wb.compute((3,), lambda i: wb.max(A[i, k], axis=k), name="M")
    a = rand(3, 8, lo=-9.0, hi=-1.0)  # all negative: an init of 0 would be visible
    out = run(wb.create_func([A, M], name="rowmax"), a, out_shape=(3,))
    np.testing.assert_array_equal(out, a.max(axis=1))


def test_padding_stage_with_if_then_else_feeds_a_window_sum():
    n = 5
    A = wb.placeholder((n, n), "float32", name="A")
    P = wb.compute(
        (n + 2, n + 2),
        lambda i, j: wb.if_then_else(wb.all_of(i >= 1, i < n + 1, j >= 1, j < n + 1), A[i - 1, j - 1], 0.0),
        name="P",
    )
    di, dj = wb.reduce_axis(3, name="di"), wb.reduce_axis(3, name="dj")
    S = wb.compute((n, n), lambda i, j: wb.sum(P[di + i, dj + j], axis=[di, dj]), name="S")
    a = rand(n, n)
    out = run(wb.create_func([A, S], name="box"), a, out_shape=(n, n))
    padded = np.pad(a, 1)
    expected = sum(padded[x : x + n, y : y + n] for x in range(3) for y in range(3))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


INTRINSICS = {
    "exp": (wb.exp, np.exp),
    "log": (wb.log, np.log),
    "sqrt": (wb.sqrt, np.sqrt),
    "tanh": (wb.tanh, np.tanh),
    "sigmoid": (wb.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "erf": (wb.erf, np.vectorize(math.erf)),
    "fabs": (wb.fabs, np.abs),
    "pow": (lambda x: wb.pow(x, 1.7), lambda x: np.power(x, 1.7)),
    "rsqrt": (wb.rsqrt, lambda x: 1 / np.sqrt(x)),
    "floor": (lambda x: call("floor", x), np.floor),
    "ceil": (lambda x: call("ceil", x), np.ceil),
    "sin": (lambda x: call("sin", x), np.sin),
    "cos": (lambda x: call("cos", x), np.cos),
}


@pytest.mark.parametrize("name", sorted(INTRINSICS))
def test_intrinsic_matches_numpy(name):
    ir_fn, np_fn = INTRINSICS[name]
    A = wb.placeholder((9,), "float32", name="A")
    B = wb.compute((9,), lambda i: ir_fn(A[i]), name="B")
    a = rand(9, lo=0.1, hi=3.0)
    if name in ("tanh", "sigmoid", "erf", "fabs", "floor", "ceil", "sin", "cos"):
        a = a - 1.5  # negative inputs too where the function is defined there
    out = run(wb.create_func([A, B], name=name + "_fn"), a, out_shape=(9,))
    np.testing.assert_allclose(out, np_fn(a).astype("float32"), rtol=1e-5, atol=1e-6)


def test_round_is_half_away_from_zero():
    A = wb.placeholder((7,), "float32", name="A")
    B = wb.compute((7,), lambda i: call("round", A[i]), name="B")
    a = np.array([-2.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -np.inf], "float32")
    out = run(wb.create_func([A, B], name="rnd"), a, out_shape=(7,))
    np.testing.assert_array_equal(out, [-3, -1, 1, 2, 3, 0, -np.inf])


def test_ieee_results_where_cpython_would_raise():
    A = wb.placeholder((3,), "float32", name="A")
    B = wb.compute((3,), lambda i: wb.log(A[i]) + wb.sqrt(A[i] - 1.0), name="B")
    C = wb.compute((3,), lambda i: wb.exp(A[i] * 1000.0) + 1.0 / A[i], name="C")
    a = np.array([0.0, 1.0, -1.0], "float32")
    b, c = np.zeros(3, "float32"), np.zeros(3, "float32")
    f = wb.create_func([A, B, C], name="edge")
    with np.errstate(all="ignore"):
        build(f)(a, b, c)
        np.testing.assert_array_equal(b, np.log(a) + np.sqrt(a - 1))
        np.testing.assert_array_equal(c, np.exp(a * np.float64(1000)).astype("float32") + 1 / a)


def test_integer_division_semantics_and_casts():
    A = wb.placeholder((6,), "int32", name="A")
    F = wb.placeholder((6,), "float32", name="F")
    Q = wb.compute((6,), lambda i: A[i] // 4 + A[i] % 4 * 100 + (A[i] / 4) * 10000, name="Q")
    T = wb.compute((6,), lambda i: wb.cast("int32", F[i]), name="T")
    a = np.array([-9, -4, -1, 0, 5, 11], "int32")
    f = np.array([-2.7, -0.5, 0.0, 0.5, 2.7, 9.99], "float32")
    q, t = np.zeros(6, "int32"), np.zeros(6, "int32")
    build(wb.create_func([A, F, Q, T], name="ints"))(a, f, q, t)
    trunc = (np.abs(a) // 4) * np.sign(a)  # C division rounds towards zero
    np.testing.assert_array_equal(q, a // 4 + (a % 4) * 100 + trunc * 10000)
    np.testing.assert_array_equal(t, f.astype("int32"))


def test_operator_precedence_survives_code_generation():
    A = wb.placeholder((6,), "int32", name="A")
    B = wb.placeholder((6,), "int32", name="B")
    Q = wb.compute(
        (6,),
        lambda i: (
            (A[i] - (B[i] - 3)) * (A[i] + B[i])
            - A[i] * -2 // (B[i] % 5 + 1)
            + wb.if_then_else((A[i] < B[i]) == (B[i] < 3), 100, -100)
        ),
        name="Q",
    )
    a = np.array([-7, -1, 0, 2, 5, 9], "int32")
    b = np.array([3, -4, 8, 2, -1, 0], "int32")
    out = run(wb.create_func([A, B, Q], name="prec"), a, b, out_shape=(6,), out_dtype="int32")
    expected = (a - (b - 3)) * (a + b) - (a * -2) // (b % 5 + 1) + np.where((a < b) == (b < 3), 100, -100)
    np.testing.assert_array_equal(out, expected)


def test_select_min_max_and_boolean_logic():
    A = wb.placeholder((8,), "float32", name="A")
    B = wb.compute(
        (8,),
        lambda i: wb.if_then_else(
            wb.any_of(wb.all_of(A[i] > 0.0, A[i] < 0.5), ~(A[i] > -0.5)),
            wb.minimum(A[i], 0.25),
            wb.maximum(A[i] * 3.0, -1.0),
        ),
        name="B",
    )
    a = rand(8)
    out = run(wb.create_func([A, B], name="logic"), a, out_shape=(8,))
    cond = ((a > 0) & (a < 0.5)) | ~(a > -0.5)
    np.testing.assert_allclose(out, np.where(cond, np.minimum(a, 0.25), np.maximum(a * 3, -1)))


def test_source_is_one_readable_def_with_loop_kind_notes():
    A, B = Buffer("A", (4, 8)), Buffer("B", (4, 8))
    i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")
    blk = Block(
        "B",
        (IterVar(vi, Range.from_extent(4)), IterVar(vj, Range.from_extent(8))),
        (),
        (),
        BufferStore(B, A[vi, vj] + 1.0, (vi, vj)),
    )
    nest = make_for(
        i, 4, make_for(j, 8, BlockRealize((i, j), TRUE, blk), kind=ForKind.VECTORIZED), kind=ForKind.PARALLEL
    )
    kernel = build(PrimFunc("add_one", (A, B), root_of(nest)))
    src = kernel.source()
    assert src.startswith("def add_one(A_arr, B_arr):")
    assert "for i in range(4):  # parallel" in src and "for j in range(8):  # vectorized" in src
    assert "B[i * 8 + j] = A[i * 8 + j] + 1.0" in src
    a, b = rand(4, 8), np.zeros((4, 8), "float32")
    kernel(a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_fused_loop_indices_fold_back_in_the_flat_index():
    A, B = Buffer("A", (3, 4)), Buffer("B", (3, 4))
    fused, vi, vj = Var("fused"), Var("vi"), Var("vj")
    blk = Block(
        "B",
        (IterVar(vi, Range.from_extent(3)), IterVar(vj, Range.from_extent(4))),
        (),
        (),
        BufferStore(B, A[vi, vj] * 2.0, (vi, vj)),
    )
    loop = make_for(fused, 12, BlockRealize((fused // 4, fused % 4), TRUE, blk))
    kernel = build(PrimFunc("fused_copy", (A, B), root_of(loop)))
    assert "B[fused] = A[fused] * 2.0" in kernel.source()
    a, b = rand(3, 4), np.zeros((3, 4), "float32")
    kernel(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_names_that_collide_with_the_runtime_are_renamed():
    """A function called ``exp`` whose buffer is ``sqrt`` and loop is ``min`` still works."""
    A, S = Buffer("A", (3,)), Buffer("sqrt", (3,))
    m, v = Var("min"), Var("v")
    blk = Block(
        "sqrt", (IterVar(v, Range.from_extent(3)),), (), (), BufferStore(S, wb.exp(wb.sqrt(A[v])), (v,))
    )
    a, s = rand(3, lo=0.0, hi=2.0), np.zeros(3, "float32")
    build(PrimFunc("exp", (A, S), root_of(make_for(m, 3, BlockRealize((m,), TRUE, blk)))))(a, s)
    np.testing.assert_allclose(s, np.exp(np.sqrt(a)), rtol=1e-6)


def test_build_accepts_a_schedule_like_object_and_times():
    A = wb.placeholder((4,), "float32", name="A")
    B = wb.compute((4,), lambda i: A[i] * 2.0, name="B")

    class FakeSchedule:
        func = wb.create_func([A, B], name="double")

    kernel = build(FakeSchedule(), target="python")
    assert isinstance(kernel, Kernel) and kernel.target == "python"
    assert kernel.func is FakeSchedule.func
    a, b = rand(4), np.zeros(4, "float32")
    t = kernel.time(a, b, number=2, repeat=2)
    assert 0 < t < math.inf and (t.number, t.repeat) == (2, 2)
    np.testing.assert_array_equal(b, a * 2)
    assert kernel.source("python") == kernel.source()
    with pytest.raises(ValueError, match="no source of kind 'ptx'; available: python"):
        kernel.source("ptx")


def test_build_rejects_unknown_and_unavailable_targets(monkeypatch):
    func = wb.create_func([wb.placeholder((2,), name="X")], name="nothing")
    with pytest.raises(BuildError, match="unknown target 'tpu'; known targets: python, llvm, cuda"):
        build(func, target="tpu")
    missing = ("workbench.codegen.no_such_backend", "build_llvm")
    monkeypatch.setitem(build_mod.TARGETS, "llvm", missing)
    with pytest.raises(BuildError, match="target llvm is not available: No module named"):
        build(func, target="llvm -mcpu=native")
    with pytest.raises(TypeError, match="build expects a PrimFunc or a Schedule, got int"):
        build(3)


def test_deep_loop_nest_builds_and_matches():
    """Splitting every loop of C2D three ways nests 21 loops: deeper than CPython's 20 blocks."""
    import workbench as wb
    from workbench.testing import check_numeric

    shape = wb.workloads.small("C2D")
    sch = wb.Schedule(wb.workloads.get("C2D", **shape))
    block = sch.get_block("conv2d_nhwc")
    for loop in sch.get_loops(block):
        extent = sch.get(loop).extent.value
        sch.split(loop, factors=[None, 1, extent])
    assert len(sch.get_loops(block)) == 21
    check_numeric(sch, "C2D", **shape)


# ------------------------------------------------------------------------------------------
# bounds checks and poisoned intermediates


def gather():
    A = wb.placeholder((8,), "float32", name="A")
    idx = wb.placeholder((4,), "int32", name="I")
    C = wb.compute((4,), lambda i: A[idx[i]] * 2.0, name="C")
    return wb.create_func([A, idx, C], name="gather")


@pytest.mark.parametrize(
    "bad, shown", [(9, r"A\[9\].*index 9 of dimension 0 is not in \[0, 8\)"), (-1, r"A\[-1\]")]
)
def test_an_out_of_bounds_index_is_a_clear_error_not_a_bare_index_error(bad, shown):
    # a data-dependent index: no static check can see it; a negative one would wrap silently
    kernel = build(gather(), "python")
    a = np.arange(8, dtype="float32")
    out = np.zeros(4, "float32")
    with pytest.raises(wb.BufferIndexError, match=shown) as err:
        kernel(a, np.array([1, 2, bad, 3], "int32"), out)
    assert isinstance(err.value, IndexError)
    assert (err.value.buffer, err.value.index, err.value.shape) == ("A", (bad,), (8,))
    kernel(a, np.array([1, 2, 7, 0], "int32"), out)
    np.testing.assert_array_equal(out, [2, 4, 14, 0])


def test_only_accesses_the_loops_cannot_prove_in_bounds_are_checked():
    src = build(gather(), "python").source()
    assert "A[_at(A_dims, I[i])]" in src and "A_dims = ('A', (8,), (1,))" in src
    assert "I[i]" in src and "C[i] =" in src  # proved by the loop range: plain indexing


NEVER_WRITTEN = """
from tvm.script import tir as T

@T.prim_func
def half(A: T.Buffer((4,), "DT"), C: T.Buffer((4,), "DT")):
    Tmp = T.alloc_buffer((4,), "DT")
    for i in range(2):
        with T.block("T"):
            vi = T.axis.spatial(2, i)
            Tmp[vi] = A[vi]
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
            C[vi] = Tmp[vi]
"""


@pytest.mark.parametrize("dtype, poison", [("float32", np.nan), ("int32", np.iinfo("int32").min)])
def test_intermediate_buffers_start_poisoned_not_zeroed(dtype, poison):
    # Tmp[2:] is never written: zero-filling made C[2:] look computed
    func = wb.parse(NEVER_WRITTEN.replace("DT", dtype))
    a, out = np.arange(1, 5).astype(dtype), np.zeros(4, dtype)
    build(func, "python")(a, out)
    np.testing.assert_array_equal(out, np.array([1, 2, poison, poison], dtype))
