"""Structural equality and hashing: equal modulo names, different on any real change."""

import subprocess
import sys

import pytest

import workbench as wb
import workbench.workloads as wb_workloads
from workbench.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    FloatImm,
    ForKind,
    IntImm,
    IterVar,
    PrimFunc,
    Range,
    Var,
    const,
)
from workbench.ir.functor import replace_buffers
from workbench.ir.stmt import TRUE, make_for, seq
from workbench.ir.structural import assert_structural_equal, structural_equal, structural_hash


def matmul(n=16, names=("i", "j", "k"), dtype="float32", cname="C"):
    A = wb.placeholder((n, n), dtype, name="A")
    B = wb.placeholder((n, n), dtype, name="B")
    k = wb.reduce_axis(n, name=names[2])
    C = wb.compute((n, n), lambda *ij: wb.sum(A[ij[0], k] * B[k, ij[1]], axis=k), name=cname)
    return wb.create_func([A, B, C], name="matmul")


def two_stage(n=16, mid="B", scale=2.0, scope="global"):
    """A -> B (intermediate, renamed to ``mid``, in ``scope``) -> C; blocks stay "B", "C"."""
    A = wb.placeholder((n,), name="A")
    B = wb.compute((n,), lambda i: A[i] * scale, name="B")
    C = wb.compute((n,), lambda i: B[i] + 1.0, name="C")
    f = wb.create_func([A, C], name="two")
    old = f.root.alloc_buffers[0]
    return f.with_body(replace_buffers(f.body, {old: old.with_(name=mid, scope=scope)}))


def store_loop(i=None, extent=8, value=0.0, kind=ForKind.SERIAL, buf=None, dtype="float32"):
    i = i or Var("i")
    buf = buf or Buffer("A", (8,), dtype)
    return make_for(i, extent, BufferStore(buf, const(value, dtype), (i,)), kind=kind)


# equality -----------------------------------------------------------------------------------


def test_renamed_variables_are_equal():
    a, b = matmul(names=("i", "j", "k")), matmul(names=("x", "y", "r"))
    assert str(a) != str(b)
    assert structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b)
    assert_structural_equal(a, b)


def test_intermediate_buffer_names_are_ignored_but_param_names_are_not():
    a, b = two_stage(mid="B"), two_stage(mid="Tmp")
    assert "Tmp = T.alloc_buffer" in str(b) and structural_equal(a, b)
    A1, A2 = Buffer("A", (8,)), Buffer("X", (8,))
    body = lambda buf: BlockRealize((), TRUE, Block("root", (), (), (), store_loop(buf=buf)))
    assert not structural_equal(PrimFunc("f", (A1,), body(A1)), PrimFunc("f", (A2,), body(A2)))


def test_function_name_is_a_label():
    f = matmul()
    assert structural_equal(f, PrimFunc("other", f.params, f.body, f.attrs))


def test_block_names_are_compared():
    assert not structural_equal(matmul(cname="C"), matmul(cname="D"))


@pytest.mark.parametrize(
    "a, b",
    [
        (lambda: store_loop(extent=8), lambda: store_loop(extent=4)),
        (lambda: store_loop(value=0.0), lambda: store_loop(value=1.0)),
        (lambda: store_loop(kind=ForKind.SERIAL), lambda: store_loop(kind=ForKind.PARALLEL)),
        (lambda: store_loop(dtype="float32"), lambda: store_loop(dtype="float16")),
        (lambda: IntImm(1, "int32"), lambda: IntImm(1, "int64")),
        (lambda: IntImm(1, "int32"), lambda: IntImm(1, "bool")),
        (lambda: FloatImm(0.0), lambda: FloatImm(-0.0)),
        (lambda: Var("x") + 1, lambda: Var("x") - 1),
        (lambda: matmul(16), lambda: matmul(8)),
        (lambda: two_stage(scale=2.0), lambda: two_stage(scale=3.0)),
        (lambda: two_stage(), lambda: two_stage(scope="local")),
    ],
)
def test_real_changes_are_not_equal(a, b):
    x, y = a(), b()
    assert not structural_equal(x, y)
    assert structural_hash(x) != structural_hash(y)


def test_thread_tags_and_annotations():
    i, A = Var("i"), Buffer("A", (8,))
    base = lambda **kw: make_for(i, 8, BufferStore(A, FloatImm(0.0), (i,)), **kw)
    tx = base(kind=ForKind.THREAD_BINDING, thread_tag="threadIdx.x")
    ty = base(kind=ForKind.THREAD_BINDING, thread_tag="threadIdx.y")
    assert not structural_equal(tx, ty)
    # annotation dicts compare as plain values, insertion order ignored
    a1 = base(annotations={"x": 1, "y": [1, 2]})
    a2 = base(annotations={"y": [1, 2], "x": 1})
    a3 = base(annotations={"x": True, "y": [1, 2]})
    assert structural_equal(a1, a2) and structural_hash(a1) == structural_hash(a2)
    assert not structural_equal(a1, a3)


def test_variable_binding_structure_matters():
    x, y = Var("x"), Var("y")
    assert structural_equal(x + y, Var("a") + Var("b"))
    assert not structural_equal(x + x, x + y)
    # free variables: mapped by position by default, by identity on request
    assert not structural_equal(x + 1, y + 1, map_free_vars=False)
    assert structural_equal(x + 1, x + 1, map_free_vars=False)
    i, j, A = Var("i"), Var("j"), Buffer("A", (8,))
    assert structural_equal(store_loop(i, buf=A), store_loop(j, buf=A), map_free_vars=False)
    assert not structural_equal(store_loop(i), store_loop(i), map_free_vars=False)  # two A's


def test_loop_var_bound_twice_in_siblings_matches_distinct_vars():
    i, j, k = Var("i"), Var("j"), Var("k")
    A = Buffer("A", (8,))
    same = (store_loop(i, buf=A), store_loop(i, buf=A))
    distinct = (store_loop(j, buf=A), store_loop(k, buf=A))
    assert structural_equal(seq(*same), seq(*distinct))


def test_nan_constants_are_equal():
    assert structural_equal(FloatImm(float("nan")), FloatImm(float("nan")))


def test_ranges_itervars_regions_and_buffers():
    v, w = Var("v"), Var("w")
    assert structural_equal(Range(IntImm(0), IntImm(4)), Range.from_extent(4))
    assert structural_equal(IterVar(v, Range.from_extent(4), "S"), IterVar(w, Range.from_extent(4), "S"))
    assert not structural_equal(IterVar(v, Range.from_extent(4), "S"), IterVar(w, Range.from_extent(4), "R"))
    A = Buffer("A", (4, 4))
    assert structural_equal(BufferRegion.full(A), BufferRegion.full(A.with_()))
    assert not structural_equal(Buffer("A", (4,)), Buffer("B", (4,)))
    assert structural_equal(Buffer("A", (4,)), Buffer("A", (4,)))
    assert not structural_equal(Buffer("A", (4,)), Buffer("A", (4,), scope="local"))


def test_different_node_types_are_not_equal():
    assert not structural_equal(Var("x"), IntImm(0))
    assert not structural_equal(store_loop(), BufferStore(Buffer("A", (8,)), FloatImm(0.0), (IntImm(0),)))


def test_unsupported_annotation_value_is_a_type_error():
    with pytest.raises(TypeError, match="annotation value"):
        structural_hash(
            make_for(
                Var("i"),
                4,
                BufferStore(Buffer("A", (4,)), FloatImm(0.0), (IntImm(0),)),
                annotations={"x": object()},
            )
        )


# deep trees, assertion message, cross-process stability -------------------------------------


def _deep_nest(depth):
    A = Buffer("A", (2,))
    vars_ = [Var(f"i{d}") for d in range(depth)]
    body = BufferStore(A, FloatImm(1.0), (vars_[-1] % 2,))
    for v in reversed(vars_):
        body = make_for(v, 2, body)
    return body


def test_deep_nests_do_not_hit_the_recursion_limit():
    a, b = _deep_nest(400), _deep_nest(400)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # the walk is iterative: it must not need the stack
    try:
        assert structural_equal(a, b)
        assert structural_hash(a) == structural_hash(b)
    finally:
        sys.setrecursionlimit(limit)


def test_assert_structural_equal_reports_path_and_both_forms():
    with pytest.raises(AssertionError) as err:
        assert_structural_equal(store_loop(extent=8), store_loop(extent=4))
    msg = str(err.value)
    assert "For.extent" in msg and "8" in msg and "4" in msg
    assert "for i in range(8):" in msg and "for i in range(4):" in msg


def test_hash_is_equal_iff_structurally_equal_on_examples():
    nodes = [
        matmul(16),
        matmul(16, names=("a", "b", "c")),
        matmul(8),
        matmul(16, dtype="float16"),
        two_stage(),
        two_stage(mid="M"),
        two_stage(scale=0.5),
        store_loop(),
        store_loop(extent=3),
    ]
    for x in nodes:
        for y in nodes:
            assert (structural_hash(x) == structural_hash(y)) == structural_equal(x, y)


def test_hash_is_stable_across_processes():
    code = (
        "from tests.ir.test_structural import matmul, two_stage;"
        "from workbench.ir.structural import structural_hash;"
        "print(structural_hash(matmul()), structural_hash(two_stage()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
        cwd=_repo_root(),
    )
    assert out.stdout.split() == [structural_hash(matmul()), structural_hash(two_stage())]


def _repo_root():
    import pathlib

    return str(pathlib.Path(__file__).resolve().parents[2])


def test_paper_workloads_hash_deterministically_and_distinctly():
    small = {n: wb_workloads.small(n) for n in wb_workloads.PAPER_ORDER}
    hashes = {n: structural_hash(wb_workloads.get(n, **small[n])) for n in small}
    assert all(structural_hash(wb_workloads.get(n, **small[n])) == h for n, h in hashes.items())
    assert len(set(hashes.values())) == len(hashes)
