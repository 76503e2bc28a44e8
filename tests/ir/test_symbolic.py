"""Symbolic shapes in the IR: size variables, buffers over them, structural equality and hashing,
bounds verification, the printer and the reader (what TVM 0.27 prints), schedules over them."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import workbench as wb
from workbench.ir import Expr, IntImm, Var
from workbench.testing import check_trace_roundtrip


def scale(name: str = "n", dtype: str = "int32", cols: int = 64) -> wb.PrimFunc:
    n = wb.var(name, dtype)
    X = wb.placeholder((n, cols), "float32", name="X")
    Y = wb.compute((n, cols), lambda i, j: X[i, j] * 2, name="Y")
    return wb.create_func([X, Y], name="scale")


def matmul(name: str = "n") -> wb.PrimFunc:
    n = wb.var(name)
    A = wb.placeholder((n, 32), name="A")
    W = wb.placeholder((32, 16), name="W")
    k = wb.reduce_axis(32, "k")
    C = wb.compute((n, 16), lambda i, j: wb.sum(A[i, k] * W[k, j], axis=k), name="C")
    return wb.create_func([A, W, C], name="mm")


def softmax() -> wb.PrimFunc:
    n = wb.var("n")
    S = wb.placeholder((4, n), name="S")
    k1, k2 = wb.reduce_axis(n, "k1"), wb.reduce_axis(n, "k2")
    M = wb.compute((4,), lambda i: wb.max(S[i, k1], axis=k1), name="M")
    E = wb.compute((4, n), lambda i, j: wb.exp(S[i, j] - M[i]), name="E")
    Z = wb.compute((4,), lambda i: wb.sum(E[i, k2], axis=k2), name="Z")
    O = wb.compute((4, n), lambda i, j: E[i, j] / Z[i], name="O")
    return wb.create_func([S, O], name="softmax")


# ---------------------------------------------------------------------------------------------
# the IR


def test_var_is_an_int32_or_int64_size_variable():
    n, m = wb.var("n"), wb.var("m", "int64")
    assert isinstance(n, Var) and (n.dtype, m.dtype) == ("int32", "int64")
    with pytest.raises(TypeError, match="int32 or int64"):
        wb.var("x", "float32")
    with pytest.raises(ValueError, match="identifier"):
        wb.var("not a name")


def test_buffer_keeps_ints_where_static_and_exprs_where_symbolic():
    n = wb.var("n")
    static = wb.placeholder((4, IntImm(8)), name="S").buffer
    assert static.shape == (4, 8) and all(type(s) is int for s in static.shape)
    assert (static.size, static.strides(), static.alloc_size(), static.is_symbolic) == (32, (8, 1), 32, False)
    buf = wb.placeholder((n, 64), name="X").buffer
    assert buf.shape[0] is n and buf.shape[1] == 64 and buf.is_symbolic
    assert isinstance(buf.size, Expr) and str(buf.size) == "n * 64"
    assert buf.strides() == (64, 1) and str(buf.alloc_size()) == "64 * n"
    assert str(wb.placeholder((2, n), name="Z").buffer.strides()[0]) == "n"
    with pytest.raises(ValueError, match="needs a static shape, but buffer X has the symbolic shape"):
        buf.static_shape("this analysis")


def test_size_vars_in_first_appearance_order_and_reduce_axis_over_one():
    n, m = wb.var("n"), wb.var("m")
    A = wb.placeholder((4, m), name="A")
    B = wb.placeholder((n, m), name="B")
    k = wb.reduce_axis(m, "k")
    C = wb.compute((n,), lambda i: wb.sum(A[0, k] * B[i, k], axis=k), name="C")
    f = wb.create_func([A, B, C])
    assert f.size_vars == (m, n) and f.is_symbolic
    assert k.extent is m


def test_a_size_variable_no_parameter_gives_is_refused():
    n, m = wb.var("n"), wb.var("m")
    X = wb.placeholder((n,), name="X")
    T = wb.compute((m,), lambda i: X[0] + 1, name="T")
    Y = wb.compute((n,), lambda i: T[0] * X[i], name="Y")
    with pytest.raises(ValueError, match="intermediate buffer T has a dimension of size variable m"):
        wb.create_func([X, Y])
    P = wb.placeholder((n * 2,), name="P")
    Z = wb.compute((n * 2,), lambda i: P[i], name="Z")
    with pytest.raises(ValueError, match="some parameter dimension must be exactly the variable"):
        wb.create_func([P, Z])


def test_structural_equality_and_hash_map_size_vars_by_position():
    f, g = scale("n"), scale("rows")
    assert wb.structural_equal(f, g) and f.structural_hash() == g.structural_hash()
    assert not wb.structural_equal(f, scale("n", "int64"))
    assert not wb.structural_equal(f, scale("n", cols=32))
    n, m = wb.var("n"), wb.var("m")

    def two(a, b):
        A = wb.placeholder((a, b), name="A")
        return wb.create_func([A, wb.compute((a, b), lambda i, j: A[i, j] + 1, name="B")])

    assert not wb.structural_equal(two(n, m), two(n, n))  # two variables are not one
    assert wb.structural_equal(two(n, m), two(wb.var("p"), wb.var("q")))


def test_structural_hash_is_the_same_in_another_process():
    code = (
        "import workbench as wb\n"
        "n = wb.var('anything')\n"
        "X = wb.placeholder((n, 64), 'float32', name='X')\n"
        "Y = wb.compute((n, 64), lambda i, j: X[i, j] * 2, name='Y')\n"
        "print(wb.create_func([X, Y], name='scale').structural_hash())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == scale().structural_hash()


def test_bounds_verification_accepts_symbolic_accesses_and_still_checks_static_dims():
    wb.verify(matmul())  # A[vi, vk] with vi < n over extent n: in bounds
    wb.verify(softmax())
    n = wb.var("n")
    A = wb.placeholder((n, 4), name="A")
    with pytest.raises(ValueError, match=r"dimension 1 reaches 7, but A has extent 4"):
        wb.create_func([A, wb.compute((n, 8), lambda i, j: A[i, j], name="B")])


# ---------------------------------------------------------------------------------------------
# printer and reader


@pytest.mark.parametrize("make", [scale, matmul, softmax, lambda: scale("m", "int64")])
def test_print_parse_round_trip(make):
    f = make()
    text = str(f)
    assert text.splitlines()[2].strip() in ("n = T.int32()", "m = T.int64()")
    g = wb.parse(text)
    wb.assert_structural_equal(f, g)
    assert str(g) == text


def test_printed_as_tvm_prints():
    text = str(scale())
    assert 'def scale(X: T.Buffer(("n", 64), "float32"), Y: T.Buffer((n, 64), "float32")):' in text
    assert "    n = T.int32()" in text and "for i, j in T.grid(n, 64):" in text


# what TVM 0.27 prints (te.create_prim_func of a symbolic matmul; a T.match_buffer function with a
# scalar parameter; int64 size variables), read as written
TVM_MATMUL = """# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@T.prim_func(s_tir=True)
def main(A: T.Buffer(("n", 64), "float32"), B: T.Buffer((64, 32), "float32"), C: T.Buffer((n, 32), "float32")):
    n = T.int32()
    T.func_attr({"tirx.noalias": True})
    # with T.sblock("root"):
    for i, j, k in T.grid(n, 32, 64):
        with T.sblock("C"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(A[v_i, v_k], B[v_k, v_j])
            T.writes(C[v_i, v_j])
            with T.init():
                C[v_i, v_j] = T.float32(0.0)
            C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
"""  # noqa: E501  (TVM prints the signature on one line)

TVM_SCALAR_PARAM = """# from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def f(A: T.Buffer(("n", "m"), "float32"), B: T.Buffer((n, m), "float32"), m: T.int32):
    n = T.int32()
    # with T.sblock("root"):
    for i, j in T.grid(n, m):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj])
            T.writes(B[vi, vj])
            B[vi, vj] = A[vi, vj] * T.float32(2.0)
"""

MATCH_BUFFER_INT64 = """from tvm.script import tir as T

@T.prim_func
def f(a: T.handle, b: T.handle):
    n = T.int64()
    m = T.int64()
    A = T.match_buffer(a, (n, m))
    B = T.match_buffer(b, (n, m))
    for i, j in T.grid(n, m):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
"""


def test_reads_tvm_printed_symbolic_matmul_and_runs_it():
    f = wb.parse(TVM_MATMUL)
    assert [(v.name, v.dtype) for v in f.size_vars] == [("n", "int32")]
    assert f.params[2].shape[0] is f.size_vars[0]
    kernel = wb.build(f, target="llvm")
    for rows in (1, 7, 100):
        a, b = np.random.rand(rows, 64).astype("float32"), np.random.rand(64, 32).astype("float32")
        c = np.empty((rows, 32), "float32")
        kernel(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    wb.assert_structural_equal(wb.parse(str(f)), f)


def test_scalar_parameter_used_as_a_shape_becomes_a_size_variable():
    f = wb.parse(TVM_SCALAR_PARAM)
    assert [b.name for b in f.params] == ["A", "B"]  # kernels take arrays only
    assert [v.name for v in f.size_vars] == ["n", "m"]
    wb.assert_structural_equal(wb.parse(str(f)), f)


def test_match_buffer_with_int64_size_variables():
    f = wb.parse(MATCH_BUFFER_INT64)
    assert [(v.name, v.dtype) for v in f.size_vars] == [("n", "int64"), ("m", "int64")]
    a = np.random.rand(3, 5).astype("float32")
    b = np.empty_like(a)
    wb.build(f, target="llvm")(a, b)
    np.testing.assert_allclose(b, a + 1)
    wb.assert_structural_equal(wb.parse(str(f)), f)


@pytest.mark.parametrize(
    "text, message, line",
    [
        (
            'def f(A: T.Buffer((n, 4), "float32")):\n    T.evaluate(0)\n',
            "dimension n is not a declared size variable",
            2,
        ),
        (
            'def f(A: T.Buffer((4,), "float32"), m: T.int32):\n    T.evaluate(0)\n',
            "parameter m: T.int32 is a scalar parameter that no buffer shape uses",
            2,
        ),
        (
            'def f(A: T.Buffer((4,), "float32")):\n    n = T.float32()\n    T.evaluate(0)\n',
            "declares a size variable of dtype float32; size variables are int32 or int64",
            3,
        ),
        (
            'def f(A: T.Buffer((4,), "float32")):\n    n = T.int32()\n    B = T.alloc_buffer((n,))\n'
            '    for i in range(4):\n        with T.block("B"):\n            B[0] = A[i]\n',
            "intermediate buffer B has a dimension of size variable n",
            2,
        ),
        (
            'def f(A: T.Buffer(("n", 4), "float32"), m: T.float32):\n    T.evaluate(0)\n',
            "only integer ones used as buffer dimensions",
            2,
        ),
    ],
)
def test_symbolic_forms_the_reader_refuses_say_why(text, message, line):
    with pytest.raises(wb.TVMScriptError, match=message) as err:
        wb.parse("@T.prim_func\n" + text)
    assert err.value.line == line


# ---------------------------------------------------------------------------------------------
# schedules over symbolic functions (primitives on symbolic loops: tests/schedule/test_symbolic_primitives.py)


def run_matmul(target_of) -> None:
    for rows in (1, 7, 100):
        a, w = np.random.rand(rows, 32).astype("float32"), np.random.rand(32, 16).astype("float32")
        c = np.empty((rows, 16), "float32")
        wb.build(target_of, target="llvm")(a, w, c)
        np.testing.assert_allclose(c, a @ w, rtol=1e-5)


def test_schedule_of_a_symbolic_function_prints_and_fuse_reorder_work():
    sch = wb.Schedule(matmul())
    assert '"n", 32' in str(sch.func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(j, i)
    fused = sch.fuse(j, i)
    assert "for j_i_fused, k in T.grid(n * 16, 32):" in str(sch.func)
    sch.split(k, factors=[None, 8])  # a constant extent splits as ever
    run_matmul(sch)
    check_trace_roundtrip(sch)
    assert fused is not None


@pytest.mark.parametrize(
    "primitive, message",
    [
        (lambda s, i: s.split(i, factors=[8, 4]), "split .*cannot be shown to cover the extent n"),
        (lambda s, i: s.sample_perfect_tile(i, n=2), "sample_perfect_tile .*extent n, not a constant"),
        (lambda s, i: s.bind(i, "blockIdx.x"), "bind .*extent n, not a constant"),
        (
            lambda s, i: s.transform_layout(s.get_block("C"), ("write", 0), lambda a, b: (b, a)),
            "buffer C has the symbolic shape \\[n, 16\\]: transforming the layout",
        ),
    ],
)
def test_primitives_needing_a_constant_extent_raise_schedule_error_and_change_nothing(primitive, message):
    sch = wb.Schedule(matmul())
    before = str(sch.func)
    i = sch.get_loops(sch.get_block("C"))[0]
    with pytest.raises(wb.ScheduleError, match=message):
        primitive(sch, i)
    assert str(sch.func) == before


# TVM 0.27 prints an int64 size variable of te.create_prim_func as a module-level TypeVar (it
# cannot be a string dimension, which reads as int32)
TVM_TYPEVAR_INT64 = """# from typing import TypeVar
# from tvm.script import tirx as T

n = TypeVar("n")
@T.prim_func(s_tir=True)
def main(A: T.Buffer((n, 16), "float32"), B: T.Buffer((n, 16), "float32")):
    T.func_attr({"tirx.noalias": True})
    # with T.sblock("root"):
    for i, j in T.grid(n, 16):
        with T.sblock("B"):
            v_i = T.axis.spatial(n, i)
            v_j = T.axis.spatial(16, j)
            T.reads(A[v_i, v_j])
            T.writes(B[v_i, v_j])
            B[v_i, v_j] = A[v_i, v_j] + T.float32(1.0)
"""


def test_reads_the_typevar_form_tvm_prints_for_int64_size_variables():
    f = wb.parse(TVM_TYPEVAR_INT64)
    assert [(v.name, v.dtype) for v in f.size_vars] == [("n", "int64")]
    a = np.random.rand(5, 16).astype("float32")
    b = np.empty_like(a)
    wb.build(f, target="llvm")(a, b)
    np.testing.assert_allclose(b, a + 1)
    wb.assert_structural_equal(wb.parse(str(f)), f)
