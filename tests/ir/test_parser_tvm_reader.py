"""The reader over what TVM 0.27 prints: let bindings, int64 index arithmetic, hints and call
forms of arithmetic, neutral buffer keywords, modules of several functions, and a precise
error (line, column, construct) for what the IR does not model."""

import json
import pathlib

import numpy as np
import pytest

import workbench as wb
from workbench.testing import check_trace_roundtrip

DATA = pathlib.Path(__file__).parent.parent / "data" / "tvm" / "reader_programs.json"
PROGRAMS = json.loads(DATA.read_text())["programs"]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_tvm_schedule_test_program_parses_and_round_trips(name):
    read = wb.parse(PROGRAMS[name])
    wb.assert_structural_equal(wb.parse(str(read)), read)


def _run(func, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(s).astype("float32") for s in shapes]
    wb.build(func, target="llvm")(*args)
    return args


HEAD = "from tvm.script import tirx as T\n\n@T.prim_func(s_tir=True)\n"


def test_let_binding_is_substituted_and_computes_the_same():
    with_let = wb.parse(
        HEAD
        + """def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            lo: T.float32 = T.float32(-0.5)
            d: T.let[T.float32] = A[vi, vj] * T.float32(2.0)
            B[vi, vj] = T.max(d, lo) + d
"""
    )
    plain = wb.parse(
        HEAD
        + """def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.max(A[vi, vj] * T.float32(2.0), T.float32(-0.5)) + A[vi, vj] * T.float32(2.0)
"""
    )
    wb.assert_structural_equal(with_let, plain)
    a, b = _run(with_let, (8, 8), (8, 8))
    np.testing.assert_allclose(b, np.maximum(2 * a, -0.5) + 2 * a, rtol=1e-6)


def test_let_whose_buffer_is_stored_before_its_use_is_refused_at_the_use():
    text = (
        HEAD
        + """def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.sblock("B"):
            vi = T.axis.spatial(8, i)
            old: T.let[T.float32] = B[vi]
            B[vi] = A[vi]
            B[vi] = B[vi] + old
"""
    )
    with pytest.raises(wb.TVMScriptError, match="let old reads B, which line 9 stores to") as err:
        wb.parse(text)
    assert (err.value.line, err.value.col) == (10, 29)


INT64 = (
    HEAD
    + """def f(A: T.Buffer((T.int64(16), T.int64(4)), "float32"),
      B: T.Buffer((T.int64(16), T.int64(4)), "float32")):
    C = T.sblock_alloc_buffer((T.int64(16), T.int64(4)), elem_offset=T.int64(0))
    for i, j in T.grid(T.int64(16), T.int64(4)):
        with T.sblock("C"):
            vi = T.axis.spatial(T.int64(16), i)
            vj = T.axis.spatial(T.int64(4), j)
            C[vi, vj] = A[vi, vj] + T.float32(1.0)
    for i in range(T.int64(16)):
        for j in range(T.int64(4)):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(i * T.int64(4) + j < T.int64(64))
                B[vi, vj] = C[vi, T.Cast("int64", vj) + T.int64(0)] * T.float32(2.0)
"""
)
INT32 = (
    HEAD
    + """def f(A: T.Buffer((16, 4), "float32"), B: T.Buffer((16, 4), "float32")):
    C = T.sblock_alloc_buffer((16, 4))
    for i, j in T.grid(16, 4):
        with T.sblock("C"):
            vi = T.axis.spatial(16, i)
            vj = T.axis.spatial(4, j)
            C[vi, vj] = A[vi, vj] + T.float32(1.0)
    for i in range(16):
        for j in range(4):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where(i * 4 + j < 64)
                B[vi, vj] = C[vi, vj + 0] * T.float32(2.0)
"""
)


def test_int64_shapes_extents_and_indices_read_as_the_int32_program():
    f64, f32 = wb.parse(INT64), wb.parse(INT32)
    wb.assert_structural_equal(f64, f32)
    a, b = _run(f64, (16, 4), (16, 4))
    np.testing.assert_allclose(b, (a + 1) * 2, rtol=1e-6)
    sch = wb.Schedule(f64)
    sch.compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("B"))[0])
    check_trace_roundtrip(sch)


def test_int64_data_keeps_its_dtype():
    f = wb.parse(
        HEAD
        + """def f(A: T.Buffer((4,), "int64"), B: T.Buffer((4,), "int64")):
    for i in range(T.int64(4)):
        with T.sblock("B"):
            vi = T.axis.spatial(T.int64(4), i)
            B[vi] = A[vi] * T.int64(3) + T.int64(5000000000)
"""
    )
    a = np.arange(4, dtype="int64")
    b = np.zeros(4, "int64")
    wb.build(f, target="llvm")(a, b)
    np.testing.assert_array_equal(b, a * 3 + 5000000000)


def test_likely_scan_and_call_forms_of_arithmetic():
    f = wb.parse(
        HEAD
        + """def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.sblock("B"):
            vi = T.axis.spatial(8, T.Add(i, 0))
            vj = T.axis.scan(8, T.Mul(j, 1))
            B[vi, vj] = T.if_then_else(T.likely(T.FloorMod(vi, 2) == 0), T.Max(A[vi, vj], T.float32(0.0)),
                                       T.Min(A[T.FloorDiv(vi, 1), vj], T.Sub(T.float32(0.0), T.float32(1.0))))
"""
    )
    block = f.block("B")
    assert [iv.iter_type for iv in block.iter_vars] == [wb.ir.SPATIAL, wb.ir.OPAQUE]
    a, b = _run(f, (8, 8), (8, 8))
    rows = (np.arange(8) % 2 == 0)[:, None]
    np.testing.assert_allclose(b, np.where(rows, np.maximum(a, 0), np.minimum(a, -1)), rtol=1e-6)


@pytest.mark.parametrize(
    "keywords, ok",
    [
        ('elem_offset=0, offset_factor=1, strides=(4, 1), align=64, buffer_type="default"', True),
        ("axis_separators=[]", True),
        ("strides=(8, 1)", False),
        ("elem_offset=4", False),
        ("axis_separators=[1]", False),
        ('buffer_type="auto"', False),
    ],
)
def test_buffer_keywords_accepted_only_where_they_change_nothing(keywords, ok):
    text = (
        HEAD
        + f"""def f(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    C = T.sblock_alloc_buffer((4, 4), "float32", {keywords})
    for i, j in T.grid(4, 4):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj]
    for i, j in T.grid(4, 4):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = C[vi, vj]
"""
    )
    if ok:
        assert wb.parse(text).root.alloc_buffers[0].shape == (4, 4)
    else:
        key = keywords.split("=")[0]
        expected = f"T.sblock_alloc_buffer C: {key}=.* is not supported"
        with pytest.raises(wb.TVMScriptError, match=expected) as err:
            wb.parse(text)
        assert err.value.line == 5


def _body(line):
    return (
        HEAD
        + f"""def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            {line}
"""
    )


@pytest.mark.parametrize(
    "line, col, message",
    [
        (
            'T.evaluate(T.tvm_access_ptr(T.type_annotation("float32"), A.data, 0, 16, 1))',
            24,
            "T.tvm_access_ptr is an opaque intrinsic",
        ),
        ('T.call_extern("void", "f", A.data)', 13, "T.call_extern is an opaque intrinsic"),
        ("T.evaluate(A.data)", 24, r"A.data \(the buffer's raw data\) is an opaque access"),
        ("Ab = T.match_buffer(A[vi], (1,))", 13, r"T.match_buffer inside a block \(Ab as a view of A\[vi\]"),
        ("n = T.int32()", 13, "declares a size variable, which belongs at the top of the function"),
        ("B[vi] = T.q_multiply_shift_per_axis(A[vi])", 21, "T.q_multiply_shift_per_axis is an opaque"),
    ],
)
def test_unmodelled_constructs_are_named_at_their_line_and_column(line, col, message):
    with pytest.raises(wb.TVMScriptError, match=message) as err:
        wb.parse(_body(line))
    assert (err.value.line, err.value.col) == (8, col)


def test_symbolic_shapes_are_read_and_unused_scalars_refused():
    # every form TVM writes; the full round trips are in tests/ir/test_symbolic.py
    text = HEAD + "def f(a: T.handle):\n    n = T.int32()\n    A = T.match_buffer(a, (n, 4))\n"
    text += "    T.evaluate(0)\n"
    assert [v.name for v in wb.parse(text).size_vars] == ["n"]
    f = wb.parse(HEAD + 'def f(A: T.Buffer(("n", 4), "float32")):\n    T.evaluate(0)\n')
    assert str(f.params[0].shape[0]) == "n"
    with pytest.raises(wb.TVMScriptError, match="scalar parameter that no buffer shape uses") as err:
        wb.parse(HEAD + 'def f(A: T.Buffer((4,), "float32"), m: T.int32):\n    T.evaluate(0)\n')
    assert (err.value.line, err.value.col) == (4, 37)


MODULE = """from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def scale(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in range(64):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i)
                B[vi] = A[vi] * T.float32(2.0)

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in range(64):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i)
                B[vi] = A[vi] + T.float32(1.0)
"""


def test_module_of_several_functions_parses_prints_and_compares():
    mod = wb.parse(MODULE)
    assert isinstance(mod, wb.IRModule) and list(mod) == ["scale", "main"] and len(mod) == 2
    assert mod["scale"].name == "scale" and isinstance(mod["main"], wb.PrimFunc)
    again = wb.parse(str(mod))
    assert wb.structural_equal(again, mod) and again.structural_hash() == mod.structural_hash()
    other = wb.parse(MODULE.replace("T.float32(1.0)", "T.float32(3.0)"))
    assert not wb.structural_equal(other, mod)
    with pytest.raises(KeyError, match="no function named 'nope'"):
        mod["nope"]
    # one function in a module stays a PrimFunc
    single = MODULE.split("    @T.prim_func(s_tir=True)\n    def main")[0]
    assert isinstance(wb.parse(single), wb.PrimFunc)


def test_schedule_of_a_module_works_on_main_then_on_another_function():
    mod = wb.parse(MODULE)
    sch = wb.Schedule(mod)
    assert sch.func.name == "main"
    b = sch.get_block("B", func_name="scale")
    assert sch.func.name == "scale"
    sch.split(sch.get_loops(b)[0], factors=[None, 8])
    assert sch.mod["main"] is mod["main"] and len(list(sch.mod["scale"].loops())) == 2
    a = np.random.default_rng(0).standard_normal(64).astype("float32")
    out = np.zeros(64, "float32")
    wb.build(sch.mod["scale"], target="llvm")(a, out)
    np.testing.assert_allclose(out, 2 * a, rtol=1e-6)
    # the trace names the function: it replays on a fresh schedule of the module
    replay = wb.Schedule(mod)
    wb.Trace.from_json(sch.trace.as_json()).apply_to_schedule(replay)
    wb.assert_structural_equal(replay.mod, sch.mod)
    # random variables belong to their function
    sch.work_on("main")
    assert sch.func is mod["main"]
    with pytest.raises(wb.ScheduleError, match="belongs to function 'scale'.*work_on"):
        sch.get_loops(b)
    sch.work_on("scale")
    assert len(sch.get_loops(b)) == 2
    before = sch.mod
    with pytest.raises(wb.ScheduleError, match="no function named 'nope'"):
        sch.work_on("nope")
    with pytest.raises(wb.ScheduleError, match="no block named 'X' in main"):
        sch.get_block("X", func_name="main")
    assert wb.structural_equal(sch.mod, before) and sch.func.name == "scale"
