"""LLVM backend: every expression kind, intrinsic and dtype against numpy; kernel arguments;
sources. Each expression is compiled twice: in a serial loop (scalar code) and in a vectorized
loop (SIMD code), since the two are emitted by different paths."""

import math

import numpy as np
import pytest

from workbench.codegen.build import build
from workbench.codegen.llvm import build_llvm, emit_llvm
from workbench.target import Target
from workbench.errors import BuildError
from workbench.ir import Buffer, BufferStore, Call, Cast, ForKind, PrimFunc, Select, Var
from workbench.ir import expr as E
from workbench.ir.stmt import make_for
from workbench.testing import X86_TARGETS, runs_here

N = 37  # not a multiple of any vector width: exercises vector remainders
KINDS = [ForKind.SERIAL, ForKind.VECTORIZED]


def lowered(params, body, name="k"):
    return PrimFunc(name, tuple(params), body, {"lowered": True})


def elementwise(fn, in_dtypes, out_dtype, kind=ForKind.SERIAL, n=N, target="llvm"):
    """Kernel ``Y[i] = fn(X0[i], X1[i], ...)`` over one loop of ``kind``."""
    ins = [Buffer(f"X{k}", (n,), dt) for k, dt in enumerate(in_dtypes)]
    out = Buffer("Y", (n,), out_dtype)
    i = Var("i")
    body = make_for(i, n, BufferStore(out, fn(*[b[i] for b in ins]), (i,)), kind)
    return build_llvm(lowered([*ins, out], body), target)


def run(kernel, *inputs, out_dtype, n=N):
    out = np.zeros(n, dtype=out_dtype)
    kernel(*inputs, out)
    return out


def ints(dtype, lo=-20, hi=20, seed=0):
    return np.random.default_rng(seed).integers(lo, hi, N).astype(dtype)


def floats(dtype="float32", lo=-2.0, hi=2.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, N).astype(dtype)


# arithmetic ------------------------------------------------------------------------------------

BINARY = [
    ("add", lambda a, b: a + b, np.add),
    ("sub", lambda a, b: a - b, np.subtract),
    ("mul", lambda a, b: a * b, np.multiply),
    ("min", E.min_expr, np.minimum),
    ("max", E.max_expr, np.maximum),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "int8", "uint8"])
@pytest.mark.parametrize("name,fn,ref", BINARY, ids=[b[0] for b in BINARY])
def test_binary_arithmetic(name, fn, ref, dtype, kind):
    if dtype.startswith("float"):
        a, b = floats(dtype, seed=1), floats(dtype, seed=2)
    else:
        lo = 0 if dtype.startswith("u") else -100
        a, b = ints(dtype, lo, 100, seed=1), ints(dtype, lo, 100, seed=2)
    k = elementwise(fn, [dtype, dtype], dtype, kind)
    np.testing.assert_allclose(run(k, a, b, out_dtype=dtype), ref(a, b), rtol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_float_division_and_floor_ops(kind):
    a, b = floats(seed=1), floats(lo=0.5, hi=3.0, seed=2) * np.where(ints("int32", 0, 2) > 0, 1, -1)
    b = b.astype("float32")
    k = elementwise(lambda x, y: x / y, ["float32"] * 2, "float32", kind)
    np.testing.assert_allclose(run(k, a, b, out_dtype="float32"), a / b, rtol=1e-6)
    k = elementwise(lambda x, y: x // y, ["float32"] * 2, "float32", kind)
    np.testing.assert_allclose(run(k, a, b, out_dtype="float32"), np.floor_divide(a, b))
    k = elementwise(lambda x, y: x % y, ["float32"] * 2, "float32", kind)
    np.testing.assert_allclose(run(k, a, b, out_dtype="float32"), np.remainder(a, b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", ["int32", "int64", "int8"])
def test_floor_div_mod_negative_and_zero_divisors(dtype, kind):
    a, b = ints(dtype, seed=3), ints(dtype, -5, 6, seed=4)
    b[:3] = 0  # numpy's result for x // 0 and x % 0 is 0; the kernel must not trap
    with np.errstate(all="ignore"):
        for fn, ref in ((lambda x, y: x // y, np.floor_divide), (lambda x, y: x % y, np.remainder)):
            k = elementwise(fn, [dtype, dtype], dtype, kind)
            np.testing.assert_array_equal(run(k, a, b, out_dtype=dtype), ref(a, b))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("divisor", [1, 2, 8, 3, 7, -4, -3])
def test_floor_div_mod_by_constants(divisor, kind):
    a = ints("int32", -50, 50, seed=5)
    for fn, ref in ((lambda x: x // divisor, np.floor_divide), (lambda x: x % divisor, np.remainder)):
        k = elementwise(fn, ["int32"], "int32", kind)
        np.testing.assert_array_equal(run(k, a, out_dtype="int32"), ref(a, divisor))


def test_integer_true_division_truncates_like_c():
    a, b = ints("int32", seed=6), ints("int32", -5, 6, seed=7)
    b[0] = 0
    k = elementwise(lambda x, y: E.Div(x, y), ["int32", "int32"], "int32")
    with np.errstate(all="ignore"):
        expected = np.where(b == 0, 0, np.trunc(a / np.where(b == 0, 1, b))).astype("int32")
    np.testing.assert_array_equal(run(k, a, b, out_dtype="int32"), expected)


def test_int64_min_divided_by_minus_one_does_not_trap():
    lo = np.iinfo(np.int64).min
    a = np.full(N, lo, dtype="int64")
    b = np.full(N, -1, dtype="int64")
    for fn, expected in ((lambda x, y: x // y, lo), (lambda x, y: x % y, 0)):
        k = elementwise(fn, ["int64", "int64"], "int64")
        assert (run(k, a, b, out_dtype="int64") == expected).all()


def test_small_int_arithmetic_wraps_like_numpy():
    a, b = np.full(N, 120, "int8"), np.full(N, 10, "int8")
    k = elementwise(lambda x, y: x + y, ["int8", "int8"], "int8")
    np.testing.assert_array_equal(run(k, a, b, out_dtype="int8"), a + b)


# comparisons and logic -------------------------------------------------------------------------

COMPARISONS = [
    ("lt", E.LT, np.less),
    ("le", E.LE, np.less_equal),
    ("gt", E.GT, np.greater),
    ("ge", E.GE, np.greater_equal),
    ("eq", E.EQ, np.equal),
    ("ne", E.NE, np.not_equal),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
@pytest.mark.parametrize("name,node,ref", COMPARISONS, ids=[c[0] for c in COMPARISONS])
def test_comparisons_into_bool_buffers(name, node, ref, dtype, kind):
    a = ints(dtype, 0, 4, seed=8)
    b = ints(dtype, 0, 4, seed=9)
    k = elementwise(lambda x, y: node(x, y), [dtype, dtype], "bool", kind)
    np.testing.assert_array_equal(run(k, a, b, out_dtype="bool"), ref(a, b))


def test_nan_compares_unequal():
    a = np.full(N, np.nan, "float32")
    k = elementwise(lambda x, y: E.NE(x, y), ["float32", "float32"], "bool")
    assert run(k, a, a, out_dtype="bool").all()


@pytest.mark.parametrize("kind", KINDS)
def test_and_or_not_select_on_bool_buffers(kind):
    p, q = ints("int32", 0, 2, seed=10).astype(bool), ints("int32", 0, 2, seed=11).astype(bool)
    a, b = floats(seed=12), floats(seed=13)
    k = elementwise(lambda x, y: E.And(x, y), ["bool", "bool"], "bool", kind)
    np.testing.assert_array_equal(run(k, p, q, out_dtype="bool"), p & q)
    k = elementwise(lambda x, y: E.Or(x, E.Not(y)), ["bool", "bool"], "bool", kind)
    np.testing.assert_array_equal(run(k, p, q, out_dtype="bool"), p | ~q)
    k = elementwise(lambda c, x, y: Select(c, x, y), ["bool", "float32", "float32"], "float32", kind)
    np.testing.assert_array_equal(run(k, p, a, b, out_dtype="float32"), np.where(p, a, b))


# casts -----------------------------------------------------------------------------------------

CASTS = [
    ("float32", "int32", lambda: floats(lo=-100, hi=100)),
    ("int32", "float32", lambda: ints("int32", -1000, 1000)),
    ("int64", "int32", lambda: ints("int64") + np.int64(2**33)),
    ("int32", "int8", lambda: ints("int32", -1000, 1000)),
    ("uint8", "int32", lambda: ints("uint8", 0, 255)),
    ("int8", "uint8", lambda: ints("int8")),
    ("int32", "uint32", lambda: ints("int32")),
    ("uint32", "float64", lambda: ints("uint32", 0, 2**31) * np.uint32(2)),
    ("float32", "bool", lambda: np.where(ints("int32", 0, 2) > 0, floats(), 0).astype("float32")),
    ("bool", "float32", lambda: ints("int32", 0, 2).astype(bool)),
    ("float64", "float32", lambda: floats("float64")),
    ("float32", "float16", lambda: floats()),
    ("float16", "float64", lambda: floats("float16")),
    ("int32", "int64", lambda: ints("int32")),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("src,dst,make", CASTS, ids=[f"{c[0]}-{c[1]}" for c in CASTS])
def test_casts_match_numpy_astype(src, dst, make, kind):
    x = make()
    k = elementwise(lambda v: Cast(dst, v), [src], dst, kind)
    np.testing.assert_array_equal(run(k, x, out_dtype=dst), x.astype(dst))


# intrinsics ------------------------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=["float64"])
INTRINSICS = [
    ("exp", lambda x: np.exp(x), (-2, 2)),
    ("log", np.log, (0.1, 4)),
    ("sqrt", np.sqrt, (0.0, 4)),
    ("rsqrt", lambda x: 1 / np.sqrt(x), (0.1, 4)),
    ("tanh", np.tanh, (-3, 3)),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), (-6, 6)),
    ("fabs", np.abs, (-2, 2)),
    ("abs", np.abs, (-2, 2)),
    ("erf", _erf, (-2, 2)),
    ("floor", np.floor, (-3, 3)),
    ("ceil", np.ceil, (-3, 3)),
    ("sin", np.sin, (-3, 3)),
    ("cos", np.cos, (-3, 3)),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op,ref,domain", INTRINSICS, ids=[t[0] for t in INTRINSICS])
def test_intrinsics(op, ref, domain, dtype, kind):
    x = floats(dtype, *domain, seed=14)
    k = elementwise(lambda v: Call(op, (v,)), [dtype], dtype, kind)
    rtol = 2e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(run(k, x, out_dtype=dtype), ref(x.astype("float64")), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("kind", KINDS)
def test_pow_and_round_and_int_abs(kind):
    x, y = floats(lo=0.1, hi=3, seed=15), floats(lo=-2, hi=2, seed=16)
    k = elementwise(lambda a, b: Call("pow", (a, b)), ["float32"] * 2, "float32", kind)
    np.testing.assert_allclose(run(k, x, y, out_dtype="float32"), np.power(x, y), rtol=1e-5)
    halves = (np.arange(N) - N // 2).astype("float32") / 2  # ..., -0.5, 0, 0.5, 1.0, 1.5 ...
    k = elementwise(lambda a: Call("round", (a,)), ["float32"], "float32", kind)
    expected = np.sign(halves) * np.floor(np.abs(halves) + 0.5)  # halves away from zero (C)
    np.testing.assert_array_equal(run(k, halves, out_dtype="float32"), expected)
    i = ints("int32", seed=17)
    k = elementwise(lambda a: Call("abs", (a,)), ["int32"], "int32", kind)
    np.testing.assert_array_equal(run(k, i, out_dtype="int32"), np.abs(i))


def test_exp_uses_vector_math_or_llvm_intrinsics_and_erf_calls_libm():
    from workbench.codegen.llvm import vector_math

    k = elementwise(
        lambda v: Call("exp", (v,)) + Call("erf", (v,)), ["float32"], "float32", ForKind.VECTORIZED, n=16
    )
    raw = k.source("llvm-raw")
    bits = vector_math.register_bits(k.target, "exp", "float32")
    if bits:  # whole registers through libmvec (x86-64 glibc hosts)
        assert "v_expf" in raw and "llvm.exp.v16f32" not in raw
    else:
        assert "llvm.exp.v16f32" in raw
    assert '@"erff"' in raw


def test_float16_arithmetic():
    a, b = floats("float16", seed=18), floats("float16", seed=19)
    k = elementwise(lambda x, y: x * y + x, ["float16", "float16"], "float16", ForKind.VECTORIZED)
    np.testing.assert_allclose(run(k, a, b, out_dtype="float16"), a * b + a, rtol=2e-3, atol=2e-3)


# kernels: arguments, sources, dispatch -------------------------------------------------------


@pytest.fixture(scope="module")
def scale_kernel():
    return elementwise(lambda x: x * 2.0, ["float32"], "float32", ForKind.VECTORIZED)


def test_bad_arguments_raise_clear_errors(scale_kernel):
    x, y = floats(), np.zeros(N, "float32")
    with pytest.raises(TypeError, match="takes 2 arrays"):
        scale_kernel(x)
    with pytest.raises(TypeError, match="'X0' has dtype float64"):
        scale_kernel(x.astype("float64"), y)
    with pytest.raises(ValueError, match=r"'Y' has shape \(36,\)"):
        scale_kernel(x, y[:-1].copy())
    with pytest.raises(ValueError, match="not C-contiguous"):
        scale_kernel(np.zeros(2 * N, "float32")[::2], y)
    with pytest.raises(TypeError, match="numpy.ndarray"):
        scale_kernel(list(x), y)
    y.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        scale_kernel(x, y)
    out = np.zeros(N, "float32")
    scale_kernel(x, out)  # still usable after the rejected calls
    np.testing.assert_array_equal(out, x * 2)


def test_sources_show_vector_ir_and_assembly(scale_kernel):
    assert set(scale_kernel.source_kinds) == {"llvm", "llvm-raw", "asm"}
    lanes = scale_kernel.target.vector_lanes("float32")  # the host's: 16 (AVX-512), 8 (AVX2)
    assert f"<{lanes} x float>" in scale_kernel.source("llvm-raw")
    assert "x float>" in scale_kernel.source("llvm")  # the optimizer kept it vectorized
    assert "k_packed" in scale_kernel.source("asm")
    assert scale_kernel.source() == scale_kernel.source("llvm")


@pytest.mark.parametrize("target", X86_TARGETS)
def test_vector_code_has_the_targets_width(target):
    """Built for AVX2 (8 lanes, ymm) and AVX-512 (16 lanes, zmm): run where the host can."""
    kernel = elementwise(lambda x: x * 2.0 + 1.0, ["float32"], "float32", ForKind.VECTORIZED, target=target)
    x = floats()
    if runs_here(target):
        np.testing.assert_allclose(run(kernel, x, out_dtype="float32"), x * 2 + 1, rtol=1e-6)
    bits = Target(target).vector_width_bits
    assert f"<{bits // 32} x float>" in kernel.source("llvm-raw")
    asm = kernel.source("asm")
    assert "k_packed" in asm and set(kernel.source_kinds) == {"llvm", "llvm-raw", "asm"}
    assert ("zmm" in asm) == (bits == 512) and "ymm" in asm


def test_timing_runs_the_kernel(scale_kernel):
    x, y = floats(), np.zeros(N, "float32")
    t = scale_kernel.time(x, y, number=3, repeat=2)
    assert 0 < t < math.inf and (t.number, t.repeat) == (3, 2)
    np.testing.assert_array_equal(y, x * 2)


def test_build_dispatches_llvm_targets_and_rejects_gpu_loops():
    A, B = Buffer("A", (8,)), Buffer("B", (8,))
    i = Var("i")
    func = lowered([A, B], make_for(i, 8, BufferStore(B, A[i] + 1.0, (i,))))
    k = build(func, "llvm -num-cores=1")
    a, b = np.arange(8, dtype="float32"), np.zeros(8, "float32")
    k(a, b)
    np.testing.assert_array_equal(b, a + 1)
    assert str(k.target) == "llvm -num-cores=1"
    bound = lowered(
        [A, B], make_for(i, 8, BufferStore(B, A[i], (i,)), ForKind.THREAD_BINDING, thread_tag="threadIdx.x")
    )
    with pytest.raises(BuildError, match="threadIdx.x"):
        build_llvm(bound)
    with pytest.raises(BuildError, match="not an 'llvm' target"):
        build_llvm(func, "cuda")


def test_emit_llvm_gives_unoptimized_text():
    A = Buffer("A", (4,))
    i = Var("i")
    text = emit_llvm(lowered([A], make_for(i, 4, BufferStore(A, E.FloatImm(1.0), (i,))), "fill"))
    assert 'define i32 @"fill"(ptr noalias %"A")' in text and "fill_packed" in text


# ------------------------------------------------------------------------------------------
# check_bounds: the debug build


def test_check_bounds_catches_what_only_a_run_time_check_can():
    import workbench as wb

    A = wb.placeholder((8,), "float32", name="A")
    idx = wb.placeholder((2, 2), "int32", name="I")
    C = wb.compute((2, 2), lambda i, j: A[idx[i, j]] + 1.0, name="C")
    func = wb.create_func([A, idx, C], name="gather")  # data-dependent: passes the static check
    a, out = np.arange(8, dtype="float32"), np.zeros((2, 2), "float32")
    kernel = build(func, "llvm", check_bounds=True)
    for bad in (8, -3):
        with pytest.raises(
            wb.BufferIndexError, match=rf"reads A\[{bad}\].*dimension 0 is not in \[0, 8\)"
        ) as err:
            kernel(a, np.array([[0, 1], [bad, 2]], "int32"), out)
        assert isinstance(err.value, IndexError) and err.value.index == (bad,)
    kernel(a, np.array([[0, 1], [7, 2]], "int32"), out)  # the record was reset: runs again
    np.testing.assert_array_equal(out, [[1, 2], [8, 3]])
    assert "_oob" not in build(func, "llvm").source("llvm-raw")  # the default build is unchanged


def test_check_bounds_reports_a_store_with_all_its_indices():
    A, B = Buffer("A", (4, 3)), Buffer("B", (4, 3))
    i, j = Var("i"), Var("j")
    body = make_for(i, 4, make_for(j, 3, BufferStore(B, A[i, j], (i, j + 1))))
    kernel = build_llvm(lowered([A, B], body), check_bounds=True)
    from workbench.errors import BufferIndexError

    with pytest.raises(
        BufferIndexError, match=r"writes B\[0, 3\].*index 3 of dimension 1 is not in \[0, 3\)"
    ):
        kernel(np.ones((4, 3), "float32"), np.zeros((4, 3), "float32"))


def test_check_bounds_keeps_guarded_padding_reads_and_scheduled_loops_correct():
    import workbench as wb

    kw = wb.workloads.small("C2D")
    func = wb.workloads.get("C2D", **kw)
    args = wb.workloads.random_args("C2D", seed=0, **kw)
    expected = wb.workloads.reference("C2D", **kw)(*args[:-1])
    sch = wb.Schedule(func)
    loops = sch.get_loops(sch.get_block("conv2d_nhwc"))
    sch.parallel(loops[1])
    sch.vectorize(loops[3])  # the debug build runs them as scalar serial loops
    kernel = build(sch, "llvm", check_bounds=True)
    kernel(*args)
    np.testing.assert_allclose(args[-1], expected, rtol=1e-4, atol=1e-4)


def test_check_bounds_poisons_intermediates_and_is_llvm_or_python_only():
    import workbench as wb

    text = """
from tvm.script import tir as T

@T.prim_func
def half(A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
    Tmp = T.alloc_buffer((4,), "float32")
    for i in range(2):
        with T.block("T"):
            vi = T.axis.spatial(2, i)
            Tmp[vi] = A[vi]
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
            C[vi] = Tmp[vi]
"""
    func = wb.parse(text)
    out = np.zeros(4, "float32")
    build(func, "llvm", check_bounds=True)(np.ones(4, "float32"), out)
    np.testing.assert_array_equal(out, [1, 1, np.nan, np.nan])
    with pytest.raises(BuildError, match="check_bounds is supported by the python and llvm targets"):
        build(func, "cuda", check_bounds=True)
