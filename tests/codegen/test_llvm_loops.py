"""LLVM backend: loop kinds (vectorized, unrolled, parallel), intermediate buffers and guarded
memory accesses, on hand-written lowered functions."""

import multiprocessing
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from workbench.codegen.llvm import build_llvm, set_max_threads
from workbench.codegen.llvm.emitter import MAX_VECTORS_PER_CHUNK
from workbench.target import Target
from workbench.ir import (
    Allocate,
    Buffer,
    BufferStore,
    Cast,
    FloatImm,
    ForKind,
    IfThenElse,
    PrimFunc,
    Select,
    Var,
    seq,
)
from workbench.ir import expr as E
from workbench.ir.stmt import make_for
from workbench.testing import X86_TARGETS, runs_here

V, P, U = ForKind.VECTORIZED, ForKind.PARALLEL, ForKind.UNROLLED


def lowered(params, body, name="k"):
    return PrimFunc(name, tuple(params), body, {"lowered": True})


def rand(*shape, seed=0, dtype="float32"):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


# vectorized ------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", X86_TARGETS)
@pytest.mark.parametrize("n", [1, 7, 16, 24, 48, 64, 100])
def test_vectorized_extents(n, target):
    """One vector below a machine vector or up to a few whole ones, else machine-vector chunks
    and a narrower remainder, with the machine vector the target's (8 or 16 floats)."""
    A, B = Buffer("A", (n,)), Buffer("B", (n,))
    i = Var("i")
    k = build_llvm(lowered([A, B], make_for(i, n, BufferStore(B, A[i] * A[i] + 1.0, (i,)), V)), target)
    a, b = rand(n), np.zeros(n, "float32")
    if runs_here(target):
        k(a, b)
        np.testing.assert_allclose(b, a * a + 1, rtol=1e-6)
    lanes = Target(target).vector_lanes("float32")
    whole = n % lanes == 0 and n <= MAX_VECTORS_PER_CHUNK * lanes
    width = n if n < lanes or whole else lanes
    assert (f"<{width} x float>" in k.source("llvm-raw")) == (n > 1)  # 1 lane: scalar code
    if n % lanes and n > lanes:
        assert f"<{n % lanes} x float>" in k.source("llvm-raw")  # the remainder vector


def test_vectorized_access_patterns():
    """Contiguous, broadcast, strided, reversed and non-linear (gather) loads; strided store."""
    n = 32
    A, B, C = Buffer("A", (4 * n,)), Buffer("B", (n,)), Buffer("C", (2 * n,))
    i = Var("i")
    value = A[i] + A[0] + A[3 * i] + A[n - 1 - i] + A[i // 3] + Cast("float32", i) * 0.5 + B[i]
    k = build_llvm(lowered([A, B, C], make_for(i, n, BufferStore(C, value, (2 * i,)), V)))
    a, b, c = rand(4 * n), rand(n, seed=1), np.zeros(2 * n, "float32")
    k(a, b, c)
    idx = np.arange(n)
    expected = a[idx] + a[0] + a[3 * idx] + a[n - 1 - idx] + a[idx // 3] + idx * 0.5 + b
    np.testing.assert_allclose(c[::2], expected, rtol=1e-5)
    assert (c[1::2] == 0).all()
    raw = k.source("llvm-raw")
    assert "llvm.masked.gather" in raw and "llvm.masked.scatter" in raw
    assert "load <32 x float>" in raw  # A[i] and B[i] stay plain vector loads


@pytest.mark.parametrize("kind", [ForKind.SERIAL, V])
def test_indirect_index_of_narrow_unsigned_dtype(kind):
    """``X[idx[i], 1]`` with uint8 ``idx`` up to 250: the row stride (300) must not wrap."""
    n = 32
    X, I, Y = Buffer("X", (256, 300)), Buffer("idx", (n,), "uint8"), Buffer("Y", (n,))
    i = Var("i")
    k = build_llvm(lowered([X, I, Y], make_for(i, n, BufferStore(Y, X[I[i], E.IntImm(1)], (i,)), kind)))
    x, idx, y = rand(256, 300), np.arange(250, 250 - n, -1).astype("uint8"), np.zeros(n, "float32")
    k(x, idx, y)
    np.testing.assert_array_equal(y, x[idx, 1])


def test_vectorized_tail_predicate_becomes_masked_store():
    """``split`` by a non-dividing factor leaves ``if io * 16 + ii < n`` around the body."""
    n, f = 100, 16
    A, B = Buffer("A", (112,)), Buffer("B", (112,))
    io, ii = Var("io"), Var("ii")
    idx = io * f + ii
    body = IfThenElse(idx < n, BufferStore(B, A[idx] + 1.0, (idx,)))
    k = build_llvm(lowered([A, B], make_for(io, 7, make_for(ii, f, body, V))))
    a, b = rand(112), np.full(112, -7.0, "float32")
    k(a, b)
    np.testing.assert_allclose(b[:n], a[:n] + 1)
    assert (b[n:] == -7).all()  # lanes past the predicate never written
    assert "llvm.masked.store" in k.source("llvm-raw")


def test_vectorized_if_with_else_and_uniform_if():
    n = 32
    A, B, F = Buffer("A", (n,)), Buffer("B", (n,)), Buffer("F", (1,), "int32")
    i = Var("i")
    lane_if = IfThenElse(A[i] > 0.0, BufferStore(B, A[i], (i,)), BufferStore(B, -A[i] * 2.0, (i,)))
    uniform_if = IfThenElse(F[0] > 0, BufferStore(B, B[i] + 10.0, (i,)))
    k = build_llvm(lowered([A, F, B], make_for(i, n, seq(lane_if, uniform_if), V)))
    a = rand(n)
    for flag in (0, 1):
        b = np.zeros(n, "float32")
        k(a, np.array([flag], "int32"), b)
        np.testing.assert_allclose(b, np.where(a > 0, a, -2 * a) + 10 * flag, rtol=1e-6)


def test_vectorized_outer_loop_with_inner_reduction():
    """``for j vectorized: for k: C[j] += A[k] * B[k, j]`` keeps the k loop scalar."""
    n, m = 16, 9
    A, B, C = Buffer("A", (m,)), Buffer("B", (m, n)), Buffer("C", (n,))
    j, kk = Var("j"), Var("k")
    body = seq(
        BufferStore(C, FloatImm(0.0), (j,)), make_for(kk, m, BufferStore(C, C[j] + A[kk] * B[kk, j], (j,)))
    )
    k = build_llvm(lowered([A, B, C], make_for(j, n, body, V)))
    a, b, c = rand(m), rand(m, n, seed=1), np.zeros(n, "float32")
    k(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    assert "<16 x float>" in k.source("llvm-raw")


def test_unvectorizable_body_falls_back_to_loop_metadata():
    """A store to the same element from every lane (a reduction) cannot be SIMD as is."""
    n = 64
    A, S = Buffer("A", (n,)), Buffer("S", (1,))
    i = Var("i")
    zero = E.IntImm(0)
    body = seq(
        BufferStore(S, FloatImm(0.0), (zero,)), make_for(i, n, BufferStore(S, S[0] + A[i], (zero,)), V)
    )
    k = build_llvm(lowered([A, S], body))
    a, s = rand(n), np.zeros(1, "float32")
    k(a, s)
    np.testing.assert_allclose(s[0], a.sum(), rtol=1e-5)
    assert "llvm.loop.vectorize.enable" in k.source("llvm-raw")


# unrolled --------------------------------------------------------------------------------------


def test_unrolled_loop_is_copied_in_the_ir():
    A, B = Buffer("A", (4, 8)), Buffer("B", (4, 8))
    i, u = Var("i"), Var("u")
    k = build_llvm(lowered([A, B], make_for(i, 8, make_for(u, 4, BufferStore(B, A[u, i] * 3.0, (u, i)), U))))
    a, b = rand(4, 8), np.zeros((4, 8), "float32")
    k(a, b)
    np.testing.assert_allclose(b, a * 3)
    raw = k.source("llvm-raw")
    assert "for_i" in raw and "for_u" not in raw
    assert raw.count("fmul") == 4


def test_huge_unrolled_loop_uses_unroll_metadata():
    n = 5000
    A = Buffer("A", (n,))
    u = Var("u")
    k = build_llvm(lowered([A], make_for(u, n, BufferStore(A, A[u] + 1.0, (u,)), U)))
    a = rand(n)
    expected = a + 1
    k(a)
    np.testing.assert_allclose(a, expected)
    assert "llvm.loop.unroll.enable" in k.source("llvm-raw")


@pytest.mark.parametrize("explicit", [1, 0])
def test_auto_unroll_annotation(explicit):
    """``pragma_auto_unroll_max_step`` (MetaSchedule's unroll decision) unrolls the serial
    loops below it whose unrolled body fits in the step budget."""
    A = Buffer("A", (64, 4, 2))
    i, j, kk = Var("i"), Var("j"), Var("k")
    inner = make_for(j, 4, make_for(kk, 2, BufferStore(A, A[i, j, kk] * 2.0, (i, j, kk))))
    body = make_for(
        i, 64, inner, annotations={"pragma_auto_unroll_max_step": 16, "pragma_unroll_explicit": explicit}
    )
    k = build_llvm(lowered([A], body))
    a = rand(64, 4, 2)
    expected = a * 2
    k(a)
    np.testing.assert_allclose(a, expected)
    raw = k.source("llvm-raw")
    assert "for_i" in raw  # 64 x 8 statements exceed the budget: stays a loop
    if explicit:
        assert "for_j" not in raw and "for_k" not in raw and raw.count("fmul") == 8
    else:
        assert "for_j" in raw and "llvm.loop.unroll.full" in raw


# parallel --------------------------------------------------------------------------------------


@pytest.mark.parametrize("extent", [1, 2, 37, 256])
def test_parallel_loop(extent):
    A, B = Buffer("A", (extent, 24)), Buffer("B", (extent, 24))
    p, j = Var("p"), Var("j")
    k = build_llvm(
        lowered(
            [A, B],
            make_for(
                p, extent, make_for(j, 24, BufferStore(B, A[p, j] * 2.0 + Cast("float32", p), (p, j)), V), P
            ),
        ),
        "llvm -num-cores=2",
    )
    a, b = rand(extent, 24), np.zeros((extent, 24), "float32")
    k(a, b)
    np.testing.assert_allclose(b, a * 2 + np.arange(extent)[:, None], rtol=1e-6)
    assert ("wb_parallel" in k.source("llvm-raw")) == (extent > 1)


def test_nested_and_repeated_parallel_regions():
    """Only the outermost parallel loop forks; a region inside a serial loop forks each time;
    the loop's min and the captured outer variable reach the task."""
    A = Buffer("A", (5, 6, 8))
    r, p, q = Var("r"), Var("p"), Var("q")
    inner = make_for(q, 8, BufferStore(A, A[r, p, q] + Cast("float32", r * 100 + p * 10 + q), (r, p, q)), P)
    body = make_for(r, 5, make_for(p, 5, inner, P, min=1))
    k = build_llvm(lowered([A], body), "llvm -num-cores=2")
    a = np.zeros((5, 6, 8), "float32")
    k(a)
    rr, pp, qq = np.meshgrid(range(5), range(6), range(8), indexing="ij")
    np.testing.assert_array_equal(a, np.where(pp >= 1, rr * 100 + pp * 10 + qq, 0))
    raw = k.source("llvm-raw")
    assert raw.count('call void @"wb_parallel"') == 1 and "k_par1" not in raw


def test_single_core_target_runs_parallel_loops_serially():
    A = Buffer("A", (16,))
    p = Var("p")
    k = build_llvm(lowered([A], make_for(p, 16, BufferStore(A, A[p] + 1.0, (p,)), P)), "llvm -num-cores=1")
    a = np.zeros(16, "float32")
    k(a)
    assert (a == 1).all() and "wb_parallel" not in k.source("llvm-raw")


def _parallel_increment():
    A = Buffer("A", (64,))
    p = Var("p")
    return build_llvm(lowered([A], make_for(p, 64, BufferStore(A, A[p] + 1.0, (p,)), P)), "llvm -num-cores=2")


def test_thread_cap_runs_regions_on_the_calling_thread():
    kernel = _parallel_increment()
    a = np.zeros(64, "float32")
    set_max_threads(1)
    try:
        kernel(a)
    finally:
        set_max_threads(None)
    kernel(a)
    assert (a == 2).all()


def _forked_child(queue):
    a = np.zeros(64, "float32")
    with pytest.warns(RuntimeWarning, match="spawn"):
        _parallel_increment()(a)
    queue.put(float(a.sum()))


def test_forked_child_does_not_hang_on_the_thread_pool():
    """The thread pool does not survive fork: a child forked after parallel kernels ran must
    still finish (serially) instead of waiting forever for the parent's threads."""
    _parallel_increment()(np.zeros(64, "float32"))  # the pool exists in this process
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_forked_child, args=(queue,))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung in a parallel region")
    assert child.exitcode == 0 and queue.get(timeout=5) == 64


# intermediate buffers --------------------------------------------------------------------------


@pytest.mark.parametrize("size,where", [(64, "alloca"), (40000, "aligned_alloc")])
def test_global_intermediate_buffer(size, where):
    A, B = Buffer("A", (size,)), Buffer("B", (size,))
    T = Buffer("T", (size,))
    i, j = Var("i"), Var("j")
    body = Allocate(
        T,
        seq(
            make_for(i, size, BufferStore(T, A[i] * 2.0, (i,)), V),
            make_for(j, size, BufferStore(B, T[size - 1 - j] + 1.0, (j,)), P),
        ),
    )
    k = build_llvm(lowered([A, B], body))
    a, b = rand(size), np.zeros(size, "float32")
    for _ in range(2):  # heap buffers are freed and allocated again per call
        k(a, b)
        np.testing.assert_allclose(b, a[::-1] * 2 + 1, rtol=1e-6)
    assert where in k.source("llvm-raw")


@pytest.mark.parametrize("size", [8, 20000])
def test_buffer_allocated_inside_parallel_loop_is_per_task(size):
    """A per-iteration scratch buffer: on the stack, or heap once per task (not per iteration)."""
    rows = 12
    A, B = Buffer("A", (rows, size)), Buffer("B", (rows,))
    L = Buffer("L", (size,), scope="local" if size == 8 else "global")
    p, j, t = Var("p"), Var("j"), Var("t")
    body = make_for(
        p,
        rows,
        Allocate(
            L,
            seq(
                make_for(j, size, BufferStore(L, A[p, j] + 1.0, (j,)), V),
                BufferStore(B, FloatImm(0.0), (p,)),
                make_for(t, size, BufferStore(B, B[p] + L[t], (p,))),
            ),
        ),
        P,
    )
    k = build_llvm(lowered([A, B], body), "llvm -num-cores=2")
    a, b = rand(rows, size), np.zeros(rows, "float32")
    k(a, b)
    np.testing.assert_allclose(b, (a + 1).sum(axis=1), rtol=1e-4)
    raw = k.source("llvm-raw")
    task = raw[raw.index('@"k_par0_task"') :]
    task = task[: task.index("\n}")]
    assert ("aligned_alloc" in task) == (size > 8)
    assert "entry:" in task and task.index("L") < task.index("start:")  # allocated at entry


def test_local_accumulator_is_promoted_to_registers():
    """A small local buffer accessed at constant offsets must not stay in memory (SROA)."""
    n, m = 4, 64
    A, C = Buffer("A", (m, 2 * n * 16)), Buffer("C", (2 * n * 16,))
    L = Buffer("acc", (n, 32), scope="local")
    kk, u, v = Var("k"), Var("u"), Var("v")
    body = Allocate(
        L,
        seq(
            make_for(u, n, make_for(v, 32, BufferStore(L, FloatImm(0.0), (u, v)), V), U),
            make_for(
                kk,
                m,
                make_for(u, n, make_for(v, 32, BufferStore(L, L[u, v] + A[kk, u * 32 + v], (u, v)), V), U),
            ),
            make_for(u, n, make_for(v, 32, BufferStore(C, L[u, v], (u * 32 + v,)), V), U),
        ),
    )
    k = build_llvm(lowered([A, C], body))
    a, c = rand(m, 2 * n * 16), np.zeros(2 * n * 16, "float32")
    k(a, c)
    np.testing.assert_allclose(c, a.sum(axis=0), rtol=1e-4)
    assert "alloca" not in k.source("llvm")


# guarded reads ---------------------------------------------------------------------------------


def test_padding_select_reads_are_guarded():
    """``Select(in_bounds, A[i - 1], 0)``: the read at i = 0 and i = n + 1 must not happen."""
    n = 40
    A, B = Buffer("A", (n,)), Buffer("B", (n + 2,))
    i = Var("i")
    value = Select(E.And(i >= 1, i < n + 1), A[i - 1], FloatImm(0.0))
    for kind in (ForKind.SERIAL, V):
        k = build_llvm(lowered([A, B], make_for(i, n + 2, BufferStore(B, value, (i,)), kind)))
        a, b = rand(n), np.ones(n + 2, "float32")
        k(a, b)
        np.testing.assert_array_equal(b, np.concatenate([[0], a, [0]]))
    assert "llvm.masked.load" in k.source("llvm-raw")


def test_guarded_reads_never_touch_protected_pages():
    """The padded reads run on arrays fenced by PROT_NONE pages: a stray read would crash."""
    script = textwrap.dedent("""
        import ctypes, mmap, numpy as np
        from workbench.codegen.llvm import build_llvm, set_max_threads
        from workbench.ir import Buffer, BufferStore, FloatImm, ForKind, PrimFunc, Select, Var
        from workbench.ir import expr as E
        from workbench.ir.stmt import make_for
        page, n = mmap.PAGESIZE, 1024
        libc = ctypes.CDLL(None)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        mem = mmap.mmap(-1, 3 * page)
        base = ctypes.addressof(ctypes.c_char.from_buffer(mem))
        assert libc.mprotect(base, page, 0) == 0 and libc.mprotect(base + 2 * page, page, 0) == 0
        a = np.frombuffer(mem, "float32", n, offset=page)   # fills the middle page exactly
        a[:] = np.arange(n)
        A, B = Buffer("A", (n,)), Buffer("B", (n + 2,))
        i = Var("i")
        value = Select(E.And(i >= 1, i < n + 1), A[i - 1], FloatImm(0.0))
        for kind in (ForKind.SERIAL, ForKind.VECTORIZED):
            k = build_llvm(PrimFunc("k", (A, B), make_for(i, n + 2, BufferStore(B, value, (i,)),
                                                          kind), {"lowered": True}))
            b = np.zeros(n + 2, "float32")
            k(a, b)
            assert (b[1:-1] == a).all() and b[0] == 0 and b[-1] == 0
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


@pytest.mark.parametrize("guard", ["rows", "columns"])
def test_padding_guard_under_a_vectorized_loop(guard):
    """A padding Select whose condition is the same for every lane (on the rows, outside the
    vectorized loop) reads with plain vector loads from a clamped address; one that varies
    across lanes (on the columns) keeps masked loads. Both match numpy at the borders."""
    import workbench as wb

    n, m = 6, 32
    A = wb.placeholder((n, m), "float32", name="A")
    if guard == "rows":
        body = lambda i, j: wb.if_then_else(wb.all_of(i >= 1, i < n + 1), A[i - 1, j], 0.0)  # noqa: E731
        shape = (n + 2, m)
    else:
        body = lambda i, j: wb.if_then_else(wb.all_of(j >= 1, j < m + 1), A[i, j - 1], 0.0)  # noqa: E731
        shape = (n, m + 2)
    P = wb.compute(shape, body, name="P")
    sch = wb.Schedule(wb.create_func([A, P], name="pad"))
    i, j = sch.get_loops("P")
    jo, ji = sch.split(j, [None, 8])
    sch.vectorize(ji)
    kernel = wb.build(sch, target="llvm")
    a = np.random.rand(n, m).astype("float32")
    p = np.full(shape, np.nan, dtype="float32")
    kernel(a, p)
    expected = np.pad(a, ((1, 1), (0, 0)) if guard == "rows" else ((0, 0), (1, 1)))
    np.testing.assert_array_equal(p, expected)
    masked = "llvm.masked.load" in kernel.source("llvm")
    assert masked == (guard == "columns")
