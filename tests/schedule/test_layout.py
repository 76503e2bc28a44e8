"""set_scope, storage_align, transform_layout, transform_block_layout, decompose_padding and
index maps: numeric equality (python and llvm), trace round-trips, the IR, every rule."""

import json

import numpy as np
import pytest

import workbench as wb
from workbench import workloads
from workbench.errors import ScheduleError
from workbench.ir import dsl
from workbench.ir.index_map import IndexMap
from workbench.ir.stmt import REDUCE, SPATIAL
from workbench.ir.verify import verify
from workbench.schedule import Schedule
from workbench.ir.buffer import Buffer
from workbench.ir.expr import Var
from workbench.testing import check_numeric, check_small, check_trace_roundtrip, small_schedule

from .tvm_port import check_after, check_refused, check_same_numbers

OTHER = Buffer("other", (1,), "int32")
UNKNOWN = Var("n")


def check_both(sch, name):
    """Valid IR, python result + trace round-trip, llvm result."""
    verify(sch.func)
    check_small(sch, name)
    check_numeric(sch, name, target="llvm", **workloads.small(name))


def alloc(sch, name):
    return next(b for b in sch.func.root.alloc_buffers if b.name == name)


def failing(sch, call, match):
    before = sch.func
    with pytest.raises(ScheduleError, match=match):
        call(sch)
    assert sch.func is before


# ------------------------------------------------------------------------------------------
# index maps


@pytest.mark.parametrize(
    "text",
    [
        "lambda i, j: (i // 16, j, i % 16)",
        "lambda i: (i * 4 + 3 - (2 - i),)",
        "lambda n, h: ((n * 16 + h) // 8, (n * 16 + h) % 8)",
        "lambda i, j: (i - -3, 0 - j)",
        "lambda i, j: (j, i)",
    ],
)
def test_index_map_text_round_trips(text):
    imap = IndexMap.parse(text)
    assert str(imap) == text
    again = IndexMap.from_func(eval(text))  # the text is also the Python that builds it
    assert str(again) == text


def test_index_map_parse_accepts_spacing_and_parentheses():
    assert str(IndexMap.parse("lambda i:(i)*2+1")) == "lambda i: (i * 2 + 1,)"
    assert str(IndexMap.parse("lambda i, j: i * (j + 1)")) == "lambda i, j: (i * (j + 1),)"


@pytest.mark.parametrize(
    "text, match",
    [
        ("i, j: (i, j)", "expected 'lambda'"),
        ("lambda i: (k,)", "unknown name"),
        ("lambda i: (i ** 2,)", "unexpected"),
        ("lambda i: (i / 2,)", "cannot read"),
        ("lambda i: (i // 0,)", "positive integer"),
        ("lambda i, i: (i,)", "distinct"),
    ],
)
def test_index_map_parse_rejects(text, match):
    with pytest.raises(ValueError, match=match):
        IndexMap.parse(text)


def test_index_map_analyses():
    split = IndexMap.parse("lambda i: (i // 16, i % 16)")
    assert split.map_shape((32,)) == (2, 16) and split.is_injective((32,))
    assert split.map_shape((20,)) == (2, 16)  # padded
    assert not IndexMap.parse("lambda i, j: (i + j,)").is_injective((3, 4))
    fused_split = IndexMap.parse("lambda i, j: ((i * 16 + j) // 8, (i * 16 + j) % 8)")
    inverse, shape = fused_split.inverse((4, 16))
    assert shape == (8, 8) and str(inverse) == "lambda v0, v1: (v0 // 2, v1 + v0 % 2 * 8)"
    with pytest.raises(ValueError, match="not a bijective"):
        split.inverse((20,))
    with pytest.raises(ValueError, match="not a bijective"):
        IndexMap.parse("lambda i: (i * 2,)").inverse((4,))


# ------------------------------------------------------------------------------------------
# set_scope


@pytest.mark.parametrize(
    "name, block, scope",
    [
        ("SFM", "T_softmax_exp", "local"),
        ("SFM", "T_softmax_maxelem", "shared"),
        ("C2D", "PadInput", "shared"),
        ("CBR", "bn_mul", "local"),
    ],
)
def test_set_scope(name, block, scope):
    sch = small_schedule(name)
    sch.set_scope(block, 0, scope)
    buf = sch.get(sch.get_block(block)).writes[0].buffer
    assert buf.scope == scope and buf.name == f"{block}_{scope}"
    assert buf in sch.func.root.alloc_buffers
    check_both(sch, name)


def test_set_scope_of_a_cache_by_name_and_same_scope_is_a_no_op():
    sch = small_schedule("GMM")
    cache = sch.cache_read("Z", 0, "shared")
    sch.set_scope(cache, "X_shared", "local")
    assert sch.get(cache).writes[0].buffer.scope == "local"
    before = sch.func
    sch.set_scope(cache, 0, "local")
    assert sch.func is before
    check_both(sch, "GMM")


def test_set_scope_rules():
    sch = small_schedule("SFM")
    failing(sch, lambda s: s.set_scope("T_softmax_norm", 0, "local"), "parameter of")
    failing(sch, lambda s: s.set_scope("T_softmax_exp", 0, "l1"), "unknown storage scope")
    failing(sch, lambda s: s.set_scope("T_softmax_exp", 1, "local"), "not an index")
    failing(sch, lambda s: s.set_scope("T_softmax_exp", "B", "local"), "no buffer named")


# ------------------------------------------------------------------------------------------
# storage_align


@pytest.mark.parametrize(
    "name, block, axis, factor, offset, strides",
    [
        ("SFM", "T_softmax_exp", 0, 8, 3, (19, 1)),
        ("CBR", "bn_mul", 2, 8, 1, (144, 36, 9, 1)),
        ("C2D", "PadInput", -2, 4, 0, (400, 40, 4, 1)),
    ],
)
def test_storage_align(name, block, axis, factor, offset, strides):
    sch = small_schedule(name)
    sch.storage_align(block, 0, axis, factor, offset)
    assert sch.get(sch.get_block(block)).writes[0].buffer.strides() == strides
    check_both(sch, name)


def test_storage_align_again_replaces_the_axis_alignment():
    sch = small_schedule("CBR")
    sch.storage_align("bn_mul", 0, 1, 8, 1)
    sch.storage_align("bn_mul", 0, 1, 4, 0)
    sch.storage_align("bn_mul", 0, 2, 8, 2)
    assert alloc(sch, "bn_mul").align == ((1, 4, 0), (2, 8, 2))
    check_both(sch, "CBR")


@pytest.mark.parametrize(
    "args, match",
    [
        ((0, 1, 8, 0), "innermost"),
        ((0, -1, 8, 0), "innermost"),
        ((0, 2, 8, 0), "out of range"),
        ((0, -3, 8, 0), "out of range"),
        ((0, 0, 0, 0), "positive"),
        ((0, 0, 8, 8), r"offset must be in \[0"),
        ((0, 0, 8, -1), r"offset must be in \[0"),
        ((0, 0.5, 8, 0), "expected an int"),
    ],
)
def test_storage_align_rules(args, match):
    failing(small_schedule("SFM"), lambda s: s.storage_align("T_softmax_exp", *args), match)


def test_storage_align_refuses_parameters():
    failing(small_schedule("SFM"), lambda s: s.storage_align("T_softmax_norm", 0, 0, 8, 0), "parameter of")


# ------------------------------------------------------------------------------------------
# transform_layout


def test_transform_layout_of_the_padded_input_c2d():
    sch = small_schedule("C2D")
    sch.decompose_padding("PadInput", sch.get_loops("PadInput")[0])
    sch.transform_layout("conv2d_nhwc", ("read", 0), lambda n, h, w, c: (n, c, h, w))
    assert alloc(sch, "PadInput").shape == (1, 3, 10, 10)
    text = str(sch.trace)
    assert "index_map=lambda n, h, w, c: (n, c, h, w)" in text and 'buffer=("read", 0)' in text
    check_both(sch, "C2D")


def test_transform_layout_of_the_padded_input_t2d_blocked():
    sch = small_schedule("T2D")
    sch.transform_layout("PadInput", 0, lambda n, h, w, c: (n, h, w // 5, c, w % 5))
    assert alloc(sch, "PadInput").shape == (1, 5, 1, 2, 5)
    check_both(sch, "T2D")


def test_transform_layout_with_padding_needs_and_writes_pad_value():
    sch = small_schedule("SFM")
    failing(
        sch,
        lambda s: s.transform_layout("T_softmax_exp", ("write", 0), lambda i, j: (i // 3, j, i % 3)),
        "give a pad_value",
    )
    sch.transform_layout("T_softmax_exp", ("write", 0), lambda i, j: (i // 3, j, i % 3), pad_value=0.0)
    assert alloc(sch, "T_softmax_exp").shape == (3, 16, 3)
    assert sch.get(sch.get_child_blocks(sch.get_block("root"))[0]).name == "T_softmax_exp_pad"
    check_both(sch, "SFM")


def test_transform_layout_of_a_cache_by_name_json_holds_the_text():
    sch = small_schedule("GMM")
    sch.cache_read("Z", 0, "shared")
    sch.transform_layout("Z", "X_shared", "lambda b, i, k: (b, k // 4, i, k % 4)")
    assert alloc(sch, "X_shared").shape == (1, 4, 16, 4)
    args = json.loads(json.dumps(sch.trace.as_json()))["insts"][-1]["args"]
    assert args["index_map"] == "lambda b, i, k: (b, k // 4, i, k % 4)"
    check_both(sch, "GMM")


def test_transform_layout_cbr_chain():
    sch = small_schedule("CBR")
    sch.transform_layout("bias_add", ("write", 0), lambda n, h, w, c: (c, n, h, w))
    sch.transform_layout("bn_mul", ("read", 0), lambda c, n, h, w: (n, h * 4 + w, c))
    assert alloc(sch, "bias_add").shape == (1, 16, 4)
    check_both(sch, "CBR")


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda s: s.transform_layout("T_softmax_exp", 0, lambda i, j: (i,)), "same place"),
        (lambda s: s.transform_layout("T_softmax_exp", 0, lambda i: (i,)), "takes 1 indices"),
        (lambda s: s.transform_layout("T_softmax_exp", 0, lambda i, j: (i - 1, j)), "non-negative"),
        (lambda s: s.transform_layout("T_softmax_exp", 0, "lambda i, j: (i, j"), "expected"),
        (lambda s: s.transform_layout("T_softmax_exp", 0, 42), "expected an index map"),
        (
            lambda s: s.transform_layout(
                "T_softmax_exp", 0, lambda i, j: (i // 3, j, i % 3), pad_value="zero"
            ),
            "pad_value must be a number",
        ),
        (
            lambda s: s.transform_layout("T_softmax_exp", 0, lambda i, j: (i // 3, j, i % 3), pad_value=True),
            "pad_value must be a number",
        ),
        (lambda s: s.transform_layout("T_softmax_exp", ("read", 5), lambda i, j: (j, i)), "not an index"),
    ],
)
def test_transform_layout_rules(call, match):
    failing(small_schedule("SFM"), call, match)


# ------------------------------------------------------------------------------------------
# transform_block_layout


def test_transform_block_layout_sfm():
    sch = small_schedule("SFM")
    sch.transform_block_layout("T_softmax_exp", lambda i, j: (i * 16 + j,))
    sch.transform_block_layout("T_softmax_norm", lambda i, j: (j, i))
    sch.transform_block_layout("T_softmax_maxelem", lambda i, k: (i, k // 4, k % 4))
    maxelem = sch.get(sch.get_block("T_softmax_maxelem"))
    assert [iv.iter_type for iv in maxelem.iter_vars] == [SPATIAL, REDUCE, REDUCE]
    assert [l.extent.value for l in sch.get(sch.get_loops("T_softmax_exp"))] == [128]
    check_both(sch, "SFM")


def test_transform_block_layout_gmm_and_cbr():
    sch = small_schedule("GMM")
    sch.transform_block_layout("Z", lambda b, i, j, k: (i // 4, j, b, i % 4, k))
    check_both(sch, "GMM")
    sch = small_schedule("CBR")
    sch.transform_block_layout("bias_add", lambda n, h, w, c: (n * 64 + h * 16 + w * 4 + c,))
    sch.transform_block_layout(
        "Conv2dOutput", lambda n, h, w, c, ry, rx, rc: (h, w, n, c, ry * 9 + rx * 3 + rc)
    )
    check_both(sch, "CBR")


@pytest.mark.parametrize(
    "setup, call, match",
    [
        (None, lambda s: s.transform_block_layout("T_softmax_exp", lambda i, j: (i,)), "not a bijective"),
        (
            None,
            lambda s: s.transform_block_layout("T_softmax_exp", lambda i, j: (i * 2 + j,)),
            "not a bijective",
        ),
        (
            None,
            lambda s: s.transform_block_layout("T_softmax_maxelem", lambda i, k: (i * 16 + k,)),
            "mixes iterators",
        ),
        (None, lambda s: s.transform_block_layout("T_softmax_exp", lambda i: (i,)), "takes 1"),
        (
            lambda s: s.split(s.get_loops("T_softmax_exp")[1], [None, 4]),
            lambda s: s.transform_block_layout("T_softmax_exp", lambda i, j: (j, i)),
            "one by one",
        ),
        (
            lambda s: s.compute_at("T_softmax_maxelem", s.get_loops("T_softmax_exp")[0]),
            lambda s: s.transform_block_layout("T_softmax_exp", lambda i, j: (j, i)),
            "holds other statements",
        ),
    ],
)
def test_transform_block_layout_rules(setup, call, match):
    sch = small_schedule("SFM")
    if setup is not None:
        setup(sch)
    failing(sch, call, match)


# ------------------------------------------------------------------------------------------
# decompose_padding


@pytest.mark.parametrize("name, block", [("C2D", "PadInput"), ("T2D", "PadInput"), ("CBR", "PaddedInput")])
@pytest.mark.parametrize("at", [0, 1, 3])
def test_decompose_padding(name, block, at):
    sch = small_schedule(name)
    shape = sch.get(sch.get_block(block)).writes[0].buffer.shape
    loop = sch.get_loops(block)[at]
    const = sch.decompose_padding(block, loop)
    assert sch.get(const).name == f"{block}_pad_const"
    assert sch.get(const).reads == ()
    inner = sch.get(sch.get_block(block))
    assert [iv.dom.extent.value for iv in inner.iter_vars] == [shape[0], shape[1] - 2, shape[2] - 2, shape[3]]
    # the in-bound loops shrank; the constant block's loops start at `at`
    assert [l.extent.value for l in sch.get(sch.get_loops(block))][at:] == [
        shape[0],
        shape[1] - 2,
        shape[2] - 2,
        shape[3],
    ][at:]
    assert len(sch.get_loops(const)) == 4
    check_both(sch, name)


def padding_func(cond, pad=0.0):
    A = dsl.placeholder((8, 8), "float32", name="A")
    B = dsl.compute((8, 8), lambda i, j: dsl.if_then_else(cond(i, j), A[i, j], pad), name="B")
    return dsl.create_func([A, B])


@pytest.mark.parametrize(
    "cond, pad, match",
    [
        (lambda i, j: i >= 0, 0.0, "always holds"),
        (lambda i, j: i >= 9, 0.0, "never holds"),
        (lambda i, j: i + j < 8, 0.0, "not a bound on one iterator"),
        (lambda i, j: i != 3, 0.0, "not a bound on one iterator"),
    ],
)
def test_decompose_padding_pattern_rules(cond, pad, match):
    sch = Schedule(padding_func(cond, pad))
    failing(sch, lambda s: s.decompose_padding("B", s.get_loops("B")[0]), match)


def test_decompose_padding_other_rules():
    A = dsl.placeholder((8,), "float32", name="A")
    B = dsl.compute((8,), lambda i: dsl.if_then_else(i >= 1, A[i], A[0]), name="B")
    sch = Schedule(dsl.create_func([A, B]))
    failing(sch, lambda s: s.decompose_padding("B", s.get_loops("B")[0]), "not a constant")
    sch = small_schedule("C2D")
    failing(sch, lambda s: s.decompose_padding("PadInput", s.get_loops("conv2d_nhwc")[0]), "is not above")
    failing(
        sch,
        lambda s: s.decompose_padding("conv2d_nhwc", s.get_loops("conv2d_nhwc")[0]),
        "not a complete block",
    )
    sch = small_schedule("SFM")
    failing(
        sch,
        lambda s: s.decompose_padding("T_softmax_exp", s.get_loops("T_softmax_exp")[0]),
        "not a store of an if_then_else",
    )


def test_decompose_padding_after_split_keeps_a_predicate():
    """Loops that do not bind an iterator directly keep their extent; a predicate guards."""
    sch = small_schedule("C2D")
    _, i1, i2, _ = sch.get_loops("PadInput")
    sch.split(i1, [None, 4])
    sch.split(i2, [3, None])
    sch.decompose_padding("PadInput", sch.get_loops("PadInput")[0])
    assert [l.extent.value for l in sch.get(sch.get_loops("PadInput"))] == [1, 3, 4, 3, 4, 3]
    assert "<" in str(sch.index.realizes["PadInput"].predicate)
    check_both(sch, "C2D")


# ------------------------------------------------------------------------------------------
# transform_layout: TVM's cases (test_tir_schedule_transform_layout.py) in our words. A
# parameter changes layout as in TVM: the kernel then takes its arrays in the new layout.

TWO_ELEMENTWISE = """
@T.prim_func
def two(A: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    B = T.alloc_buffer((32, 32), "float32")
    for i, j in T.grid(32, 32):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
"""

TWO_ELEMENTWISE_NEW_A = """
@T.prim_func
def two(A: T.Buffer((2, 2, 16, 16), "float32"), C: T.Buffer((32, 32), "float32")):
    B = T.alloc_buffer((32, 32), "float32")
    for i, j in T.grid(32, 32):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi // 16, vj // 16, vi % 16, vj % 16] * T.float32(2)
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
"""

TWO_ELEMENTWISE_NEW_C = """
@T.prim_func
def two(A: T.Buffer((32, 32), "float32"), C: T.Buffer((2, 2, 16, 16), "float32")):
    B = T.alloc_buffer((32, 32), "float32")
    for i, j in T.grid(32, 32):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi // 16, vj // 16, vi % 16, vj % 16] = B[vi, vj] + T.float32(1)
"""


def packed(m, n):
    return m // 16, n // 16, m % 16, n % 16


def relayout(array, index_map, shape, fill=0):
    """``array`` in the layout ``index_map`` gives (numpy; ``fill`` in the padding)."""
    out = np.full(shape, fill, dtype=array.dtype)
    out[tuple(np.broadcast_to(x, array.shape) for x in index_map(*np.indices(array.shape)))] = array
    return out


def run_both(before, after_func, arrays, relaid):
    """Run ``before`` on ``arrays`` and ``after_func`` on them relaid out (``relaid``: index
    -> (index_map, new shape, fill)); the results agree once relaid out the same way."""
    want = [a.copy() for a in arrays]
    wb.build(wb.parse(before), target="llvm")(*want)
    got = [relayout(a, *relaid[k]) if k in relaid else a.copy() for k, a in enumerate(arrays)]
    wb.build(after_func, target="llvm")(*got)
    for k, (g, w) in enumerate(zip(got, want)):
        expect = relayout(w, *relaid[k]) if k in relaid else w
        np.testing.assert_allclose(g, expect, rtol=1e-6, err_msg=f"argument {k}")


def check_param_layout(before, steps, after, relaid, dtype="float32"):
    sch = wb.Schedule(wb.parse(before))
    steps(sch)
    wb.assert_structural_equal(sch.func, wb.parse(after))
    check_trace_roundtrip(sch)
    rng = np.random.default_rng(0)
    arrays = [rng.integers(-50, 50, size=p.shape).astype(p.dtype) for p in wb.parse(before).params]
    run_both(before, sch.func, arrays, relaid)
    return sch


@pytest.mark.parametrize("by_name", [False, True])
def test_transform_layout_of_an_input_parameter(by_name):
    def steps(sch):
        if by_name:
            sch.transform_layout("B", "A", packed)
        else:
            sch.transform_layout(sch.get_block("B"), ("read", 0), packed)

    sch = check_param_layout(TWO_ELEMENTWISE, steps, TWO_ELEMENTWISE_NEW_A, {0: (packed, (2, 2, 16, 16))})
    assert [p.shape for p in sch.func.params] == [(2, 2, 16, 16), (32, 32)]
    kernel = wb.build(sch, target="llvm")
    with pytest.raises(ValueError, match="A"):  # arrays in the old layout no longer fit
        kernel(np.zeros((32, 32), "float32"), np.zeros((32, 32), "float32"))


@pytest.mark.parametrize("by_name", [False, True])
def test_transform_layout_of_an_output_parameter(by_name):
    def steps(sch):
        if by_name:
            sch.transform_layout("C", "C", packed)
        else:
            sch.transform_layout(sch.get_block("C"), ("write", 0), packed)

    check_param_layout(TWO_ELEMENTWISE, steps, TWO_ELEMENTWISE_NEW_C, {1: (packed, (2, 2, 16, 16))})


def test_transform_layout_of_a_written_parameter_with_padding_pads_only_the_padding():
    """TVM's test_padded_transform_without_loop: the function writes one element of A; the
    pad value goes to the padding (a block at the end), the caller's other elements stay."""
    before = """
@T.prim_func
def main(A: T.Buffer((14,), "int32")):
    with T.block("root"):
        with T.block("block"):
            T.reads()
            T.writes(A[0])
            A[0] = 0
"""
    after = """
@T.prim_func
def main(A: T.Buffer((4, 4), "int32")):
    with T.block("root"):
        with T.block("block"):
            T.reads()
            T.writes(A[0, 0])
            A[0, 0] = 0
        for ax0, ax1 in T.grid(4, 4):
            with T.block("A_pad"):
                vax0, vax1 = T.axis.remap("SS", [ax0, ax1])
                T.where(14 <= ax1 + ax0 * 4)
                A[vax0, vax1] = 5
"""

    def quad(i):
        return i // 4, i % 4

    sch = check_param_layout(
        before, lambda s: s.transform_layout("block", "A", quad, pad_value=5), after, {0: (quad, (4, 4), 5)}
    )
    out = np.full((4, 4), -1, "int32")
    wb.build(sch, target="llvm")(out)
    assert out.tolist() == [[0, -1, -1, -1], [-1, -1, -1, -1], [-1, -1, -1, -1], [-1, -1, 5, 5]]


def test_transform_layout_of_a_written_parameter_with_padding_after_a_loop():
    """TVM's test_index_map_dtype_legalize (int32 here): A[58] written in a loop, laid out
    as (8, 8) with padding."""
    before = """
@T.prim_func
def main(A: T.Buffer((58,), "int32")):
    for i in range(58):
        with T.block("block"):
            vi = T.axis.remap("S", [i])
            A[vi] = vi
"""
    after = """
@T.prim_func
def main(A: T.Buffer((8, 8), "int32")):
    for i in range(58):
        with T.block("block"):
            vi = T.axis.remap("S", [i])
            A[vi // 8, vi % 8] = vi
    for ax0, ax1 in T.grid(8, 8):
        with T.block("A_pad"):
            vax0, vax1 = T.axis.remap("SS", [ax0, ax1])
            T.where(58 <= ax1 + ax0 * 8)
            A[vax0, vax1] = 0
"""

    def split8(h):
        return h // 8, h % 8

    check_param_layout(
        before,
        lambda s: s.transform_layout(s.get_block("block"), "A", split8, pad_value=0),
        after,
        {0: (split8, (8, 8), 0)},
    )


def test_transform_layout_of_a_read_parameter_with_padding_adds_nothing():
    """TVM's test_padded_transform_of_input_creates_assumption: TVM records a T.assume that
    the caller filled the padding with the pad value; the function never reads it, so
    workbench adds no block (and the padding may hold anything)."""
    before = """
@T.prim_func
def main(A: T.Buffer((14,), "int32"), B: T.Buffer((14,), "int32")):
    for i in range(14):
        with T.block("block"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi]
"""
    after = """
@T.prim_func
def main(A: T.Buffer((4, 4), "int32"), B: T.Buffer((14,), "int32")):
    for i in range(14):
        with T.block("block"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi // 4, vi % 4]
"""

    def quad(i):
        return i // 4, i % 4

    check_param_layout(
        before, lambda s: s.transform_layout("block", "A", quad, pad_value=42), after, {0: (quad, (4, 4), 99)}
    )


def test_transform_layout_with_a_sampled_tile_size():
    """TVM's test_transform_layout_with_sampling: the map uses two sampled integers; the trace
    keeps them (JSON and Python), and a replay with other decisions follows them."""
    sch = wb.Schedule(wb.parse(TWO_ELEMENTWISE))
    block = sch.get_block("B")
    _, j = sch.get_loops(block)
    _, v1, v2 = sch.sample_perfect_tile(j, n=3, decision=[2, 4, 4])
    sch.transform_layout(block, ("write", 0), lambda i, j: (i, j // (v1 * v2), j % (v1 * v2)))
    assert alloc(sch, "B").shape == (32, 2, 16)
    assert "index_map=lambda i, j: (i, j // (v4 * v5), j % (v4 * v5))" in str(sch.trace)
    args = json.loads(json.dumps(sch.trace.as_json()))["insts"][-1]["args"]
    assert args["index_map"] == [
        "lambda i, j: (i, j // (_0 * _1), j % (_0 * _1))",
        [{"rv": "v4"}, {"rv": "v5"}],
    ]
    check_trace_roundtrip(sch)
    check_same_numbers(sch.func, TWO_ELEMENTWISE)
    other = wb.Schedule(wb.parse(TWO_ELEMENTWISE))
    sampling = next(i for i in sch.trace.insts if i.kind.name == "sample_perfect_tile")
    sch.trace.with_decision(sampling, [4, 2, 4]).apply_to_schedule(other)
    assert alloc(other, "B").shape == (32, 4, 8)


def test_transform_layout_with_an_index_dependent_pad_value():
    """TVM's test_padded_transform_non_constant_value: ``pad_value=lambda i, j: i + j`` is a
    value per element of the new layout (TVM writes it in the producer's if_then_else,
    workbench in the pad block that fills the buffer first)."""
    before = """
@T.prim_func
def main(A: T.Buffer((14,), "int32"), C: T.Buffer((14,), "int32")):
    B = T.alloc_buffer((14,), "int32")
    for i in range(14):
        with T.block("block"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi]
    for i in range(14):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi]
"""
    after = """
@T.prim_func
def main(A: T.Buffer((14,), "int32"), C: T.Buffer((14,), "int32")):
    B = T.alloc_buffer((4, 4), "int32")
    for ax0, ax1 in T.grid(4, 4):
        with T.block("B_pad"):
            vax0, vax1 = T.axis.remap("SS", [ax0, ax1])
            B[vax0, vax1] = vax0 + vax1
    for i in range(14):
        with T.block("block"):
            vi = T.axis.remap("S", [i])
            B[vi // 4, vi % 4] = A[vi]
    for i in range(14):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi // 4, vi % 4]
"""

    def steps(sch):
        sch.transform_layout("block", "B", lambda i: (i // 4, i % 4), pad_value=lambda i, j: i + j)

    sch = check_after(before, steps, after)
    assert "pad_value=lambda i, j: (i + j,)" in str(sch.trace)
    # written to an output parameter, the padding holds the values
    sch = wb.Schedule(wb.parse(before))
    sch.transform_layout("C", "C", lambda i: (i // 4, i % 4), pad_value=lambda i, j: i * 10 + j)
    check_trace_roundtrip(sch)
    a, c = np.arange(14, dtype="int32"), np.full((4, 4), -1, "int32")
    wb.build(sch, target="llvm")(a, c)
    assert c.ravel().tolist() == list(range(14)) + [32, 33]


@pytest.mark.parametrize(
    "call, match",
    [
        # TVM's test_pad_value_may_not_reference_other_buffer
        (
            lambda s: s.transform_layout(
                "block", "B", lambda i: (i // 4, i % 4), pad_value=lambda i, j: OTHER[0]
            ),
            "pad_value must be",
        ),
        (
            lambda s: s.transform_layout("block", "B", lambda i: (i // 4, i % 4), pad_value=lambda i: i),
            "takes the 2 indices",
        ),
        (
            lambda s: s.transform_layout("block", "B", lambda i: (i // 4, i % 4), pad_value="zero"),
            "pad_value must be",
        ),
        # a written parameter whose padding is not a padded split: (i + 1) // 8 is not one
        (
            lambda s: s.transform_layout("block", "A", lambda i: ((i + 1) // 8, (i + 1) % 8), pad_value=0),
            "padding elements only",
        ),
        (lambda s: s.transform_layout("block", "B", lambda i: (i // UNKNOWN,)), "neither a parameter"),
    ],
)
def test_transform_layout_pad_and_parameter_rules(call, match):
    before = """
@T.prim_func
def main(A: T.Buffer((14,), "int32")):
    B = T.alloc_buffer((14,), "int32")
    for i in range(14):
        with T.block("block"):
            vi = T.axis.remap("S", [i])
            B[vi] = vi
            A[vi] = vi
"""
    check_refused(before, call, match)


def test_transform_block_layout_with_a_sampled_tile_size():
    sch = wb.Schedule(wb.parse(TWO_ELEMENTWISE))
    block = sch.get_block("B")
    _, j = sch.get_loops(block)
    _, v = sch.sample_perfect_tile(j, n=2, decision=[4, 8])
    sch.transform_block_layout(block, lambda i, j: (i, j // v, j % v))
    assert [l.extent.value for l in sch.get(sch.get_loops(block))] == [32, 4, 8]
    assert "index_map=lambda i, j: (i, j // v4, j % v4)" in str(sch.trace)
    check_trace_roundtrip(sch)
    check_same_numbers(sch.func, TWO_ELEMENTWISE)
