"""The TVMScript-like printer: every node kind, precedence, unambiguous names."""

import os
import pathlib

import pytest

import workbench as wb
import workbench.workloads as wb_workloads
from workbench.ir import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    Call,
    Cast,
    Evaluate,
    FloatImm,
    ForKind,
    IfThenElse,
    IntImm,
    IterVar,
    Max,
    Min,
    Not,
    PrimFunc,
    Range,
    Select,
    SeqStmt,
    Var,
    const,
    convert,
)
from workbench.ir.printer import expr_str, func_str, stmt_str
from workbench.ir.stmt import TRUE, make_for

MATMUL = """\
@T.prim_func
def matmul(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    # with T.block("root"):
    for i, j, k in T.grid(128, 128, 128):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]"""  # noqa: E501  (the printer's line)


def matmul(n=128):
    A = wb.placeholder((n, n), "float32", name="A")
    B = wb.placeholder((n, n), "float32", name="B")
    k = wb.reduce_axis(n, name="k")
    C = wb.compute((n, n), lambda i, j: wb.sum(A[i, k] * B[k, j], axis=k), name="C")
    return wb.create_func([A, B, C], name="matmul")


def test_matmul_prints_as_tvmscript():
    assert str(matmul()) == MATMUL


# expressions -------------------------------------------------------------------------------

x, y, z = Var("x"), Var("y"), Var("z")


@pytest.mark.parametrize(
    "build, text",
    [
        (lambda: x + y * z, "x + y * z"),
        (lambda: (x + y) * z, "(x + y) * z"),
        (lambda: x - (y - z), "x - (y - z)"),
        (lambda: (x - y) - z, "x - y - z"),
        (lambda: x * (y // z), "x * (y // z)"),
        (lambda: x // y % z, "x // y % z"),
        (lambda: x % (y * 2), "x % (y * 2)"),
        (lambda: x * -1, "x * -1"),
        (lambda: (x < y) & (y <= z), "x < y and y <= z"),
        (lambda: (x < y) | (x >= z) & (y > 2), "x < y or x >= z and y > 2"),
        (lambda: ((x < y) | (y < z)) & (z != 1), "(x < y or y < z) and z != 1"),
        (lambda: ~((x == y) | (y < z)), "not (x == y or y < z)"),
        (lambda: Not(x == y), "not x == y"),
        (lambda: (x < y) == (y < z), "(x < y) == (y < z)"),
        (lambda: Min.make(x, y + 1) + Max.make(x, 0), "T.min(x, y + 1) + T.max(x, 0)"),
        (lambda: Select(x < 4, y, z), "T.Select(x < 4, y, z)"),
        (lambda: Cast("float32", x * 2), 'T.Cast("float32", x * 2)'),
        (lambda: Call("exp", (FloatImm(1.5),)), "T.exp(T.float32(1.5))"),
        (lambda: FloatImm(float("-inf")), 'T.float32("-inf")'),
        (lambda: FloatImm(0.0, "float16"), "T.float16(0)"),
        (lambda: IntImm(7, "int64"), "T.int64(7)"),
        (lambda: const(True, "bool"), "True"),
        (lambda: const(False, "bool"), "False"),
        (lambda: Buffer("A", (4, 4))[x + 1, y], "A[x + 1, y]"),
        (lambda: Buffer("S", ())[()], "S[()]"),
        (lambda: FloatImm(2.0) / Cast("float32", x), 'T.float32(2) / T.Cast("float32", x)'),
    ],
)
def test_expression_text(build, text):
    assert expr_str(build()) == text


def test_str_of_expressions_uses_the_printer():
    assert str(x + 1) == "x + 1" and repr(x * y) == "x * y"


# names ---------------------------------------------------------------------------------------


def test_same_named_vars_get_suffixes_in_order_of_appearance():
    i1, i2, i3 = Var("i"), Var("i"), Var("i")
    assert expr_str(i1 + i2 * i1 + i3) == "i + i_1 * i + i_2"
    # suffixes skip names already taken, whichever object took them first
    j1, j2, j3 = Var("j"), Var("j"), Var("j_1")
    assert expr_str(j3 - j1 - j2) == "j_1 - j - j_2"
    assert expr_str(j1 - j2 - j3) == "j - j_1 - j_1_1"


def test_same_named_buffers_are_disambiguated():
    a1, a2 = Buffer("A", (4,)), Buffer("A", (4,))
    s = BufferStore(a1, a2[Var("i")] + a1[0], (IntImm(0),))
    assert stmt_str(s) == "A[0] = A_1[i] + A[0]"


def test_names_are_deterministic_and_per_function():
    f = matmul(16)
    assert str(f) == str(f)
    # printing a part alone restarts the name table: the second stage's loops are i_1 there
    two = wb.create_func(_two_stage(), name="two")
    text = str(two)
    assert "for i_1, j_1 in T.grid(16, 16):" in text
    second_stage = two.root.body.seq[1]
    assert stmt_str(second_stage).startswith("for i, j in T.grid(16, 16):")


def _two_stage():
    A = wb.placeholder((16, 16), name="A")
    B = wb.compute((16, 16), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((16, 16), lambda i, j: B[i, j] + 1.0, name="C")
    return [A, C]


def test_intermediate_is_allocated_in_root():
    text = str(wb.create_func(_two_stage(), name="two"))
    assert '    # with T.block("root"):\n    B = T.alloc_buffer((16, 16), "float32")\n' in text


# loops ---------------------------------------------------------------------------------------


def _store(buf, *idx):
    return BufferStore(buf, FloatImm(0.0), tuple(convert(i) for i in idx))


@pytest.mark.parametrize(
    "kind, tag, head",
    [
        (ForKind.PARALLEL, None, "for i in T.parallel(64):"),
        (ForKind.VECTORIZED, None, "for i in T.vectorized(64):"),
        (ForKind.UNROLLED, None, "for i in T.unroll(64):"),
        (ForKind.THREAD_BINDING, "threadIdx.x", 'for i in T.thread_binding(64, thread="threadIdx.x"):'),
        (ForKind.SERIAL, None, "for i in range(64):"),
    ],
)
def test_loop_kinds(kind, tag, head):
    i, A = Var("i"), Buffer("A", (64,))
    loop = make_for(i, 64, _store(A, i), kind=kind, thread_tag=tag)
    assert stmt_str(loop) == f"{head}\n    A[i] = T.float32(0)"


def test_loop_min_and_annotations_break_the_grid():
    i, j, k, A = Var("i"), Var("j"), Var("k"), Buffer("A", (64, 64, 64))
    inner = make_for(k, 4, _store(A, i, j, k), annotations={"pragma_unroll": 16, "tag": "x"})
    mid = make_for(j, 8, inner, min=2)
    loop = make_for(i, 64, mid)
    assert stmt_str(loop).splitlines()[:3] == [
        "for i in range(64):",
        "    for j in T.serial(2, 10):",
        '        for k in T.serial(4, annotations={"pragma_unroll": 16, "tag": "x"}):',
    ]


def test_symbolic_loop_min():
    n, i, A = Var("n"), Var("i"), Buffer("A", (64,))
    assert (
        stmt_str(make_for(i, 4, _store(A, i), min=n * 4)).splitlines()[0]
        == "for i in T.serial(n * 4, n * 4 + 4):"
    )


# blocks --------------------------------------------------------------------------------------


def _tiled_block():
    """for i_0, i_1: block B with vi = i_0 * 32 + i_1, a reduce iterator, predicate, attrs."""
    i0, i1, r = Var("i_0"), Var("i_1"), Var("r")
    A, B = Buffer("A", (100, 8)), Buffer("B", (100,))
    vi, vr = Var("vi"), Var("vr")
    tmp = Buffer("tmp", (4,), scope="local")
    block = Block(
        "B",
        (IterVar(vi, Range.from_extent(100), "S"), IterVar(vr, Range.from_extent(8), "R")),
        (BufferRegion(A, (Range(vi, IntImm(1)), Range.from_extent(8))),),
        (BufferRegion(B, (Range(vi, IntImm(1)),)),),
        BufferStore(B, B[vi] + A[vi, vr], (vi,)),
        init=_store(B, vi),
        alloc_buffers=(tmp,),
        annotations={"meta_schedule.unroll": 64},
    )
    realize = BlockRealize((i0 * 32 + i1, r), i0 * 32 + i1 < 100, block)
    return make_for(i0, 4, make_for(i1, 32, make_for(r, 8, realize)))


def test_block_bindings_predicate_regions_attrs_allocs():
    assert (
        stmt_str(_tiled_block())
        == """\
for i_0, i_1, r in T.grid(4, 32, 8):
    with T.block("B"):
        vi = T.axis.spatial(100, i_0 * 32 + i_1)
        vr = T.axis.reduce(8, r)
        T.where(i_0 * 32 + i_1 < 100)
        T.reads(A[vi, 0:8])
        T.writes(B[vi])
        T.block_attr({"meta_schedule.unroll": 64})
        tmp = T.alloc_buffer((4,), "float32", scope="local")
        with T.init():
            B[vi] = T.float32(0)
        B[vi] = B[vi] + A[vi, vr]"""
    )


def test_remap_only_when_iterator_spans_the_loop():
    i, vi, A = Var("i"), Var("vi"), Buffer("A", (64,))
    blk = Block("A", (IterVar(vi, Range.from_extent(32), "S"),), (), (), _store(A, vi))
    text = stmt_str(make_for(i, 32, BlockRealize((i,), TRUE, blk)))
    assert 'vi = T.axis.remap("S", [i])' in text
    # a loop of 64 bound to an iterator of 32 must show the domain
    text = stmt_str(make_for(i, 64, BlockRealize((i,), TRUE, blk)))
    assert "vi = T.axis.spatial(32, i)" in text


def test_opaque_iterator_and_offset_domain_and_symbolic_region():
    i, vi, vo, A = Var("i"), Var("vi"), Var("vo"), Buffer("A", (64,))
    blk = Block(
        "A",
        (IterVar(vi, Range.from_extent(8, min=4), "S"), IterVar(vo, Range.from_extent(4), "O")),
        (BufferRegion(A, (Range(vi * 4, IntImm(4)),)),),
        (),
        _store(A, vi),
    )
    lines = stmt_str(make_for(i, 8, BlockRealize((i + 4, i // 2), TRUE, blk))).splitlines()
    assert lines[2:5] == [
        "        vi = T.axis.spatial((4, 12), i + 4)",
        "        vo = T.axis.opaque(4, i // 2)",
        "        T.reads(A[vi * 4:vi * 4 + 4])",
    ]


def test_block_without_realize_and_explicit_root():
    vi, A = Var("vi"), Buffer("A", (8,))
    blk = Block("A", (IterVar(vi, Range.from_extent(8), "S"),), (), (), _store(A, vi))
    assert stmt_str(blk).splitlines()[:2] == ['with T.block("A"):', "    vi = T.axis.spatial(8)"]
    f = matmul(8)
    assert stmt_str(f.body).startswith('with T.block("root"):\n    T.reads()\n    T.writes()\n')


# lowered IR ----------------------------------------------------------------------------------


def test_lowered_statements():
    i, A = Var("i"), Buffer("A", (8,))
    tmp = Buffer("tmp", (8,), scope="local")
    body = SeqStmt(
        (
            Allocate(tmp, make_for(i, 8, _store(tmp, i))),
            IfThenElse(i < 4, Evaluate(Call("exp", (FloatImm(1.0),))), _store(A, i)),
            IfThenElse(Not(i < 4), _store(A, 0)),
            Allocate(tmp, _store(tmp, 1)),
        )
    )
    assert (
        stmt_str(body)
        == """\
with T.allocate((8,), "float32", scope="local") as tmp:
    for i in range(8):
        tmp[i] = T.float32(0)
if i < 4:
    T.evaluate(T.exp(T.float32(1)))
else:
    A[i] = T.float32(0)
if not i < 4:
    A[0] = T.float32(0)
tmp = T.allocate((8,), "float32", scope="local")
tmp[1] = T.float32(0)"""
    )


def test_function_attrs_and_param_scope():
    A = Buffer("A", (4,), scope="shared")
    f = PrimFunc(
        "f",
        (A,),
        BlockRealize((), TRUE, Block("root", (), (), (), _store(A, 0))),
        attrs={"tir.noalias": True},
    )
    assert func_str(f).splitlines()[1:4] == [
        'def f(A: T.Buffer((4,), "float32", scope="shared")):',
        '    T.func_attr({"tir.noalias": True})',
        '    # with T.block("root"):',
    ]


def test_unknown_node_is_a_type_error():
    with pytest.raises(TypeError, match="cannot print"):
        stmt_str(object())


# golden text of the paper's workloads (small shapes) ---------------------------------------

GOLDEN = pathlib.Path(__file__).parent / "golden"


@pytest.mark.parametrize("name", wb_workloads.PAPER_ORDER)
def test_workload_golden_text(name, request):
    """Regenerate with ``pytest tests/ir --update-golden`` (or ``WB_UPDATE_GOLDEN=1``)."""
    text = str(wb_workloads.get(name, **wb_workloads.small(name))) + "\n"
    path = GOLDEN / f"{name}.txt"
    if request.config.getoption("--update-golden") or os.environ.get("WB_UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing {path}; run pytest with --update-golden to create it"
    assert text == path.read_text()


def test_dsl_reduce_expression_prints_without_error():
    A = wb.placeholder((8, 8), name="A")
    k = wb.reduce_axis(8, name="k")
    assert str(wb.sum(A[0, k], axis=k)).startswith('Reduce("sum", A[0, k], (')
