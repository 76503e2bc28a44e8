"""set_scope, storage_align, transform_layout, transform_block_layout, decompose_padding and
index maps: numeric equality (python and llvm), trace round-trips, the IR, every rule."""

import json

import pytest

from workbench import workloads
from workbench.errors import ScheduleError
from workbench.ir import dsl
from workbench.ir.index_map import IndexMap
from workbench.ir.stmt import REDUCE, SPATIAL
from workbench.ir.verify import verify
from workbench.schedule import Schedule
from workbench.testing import check_numeric, check_small, small_schedule


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
        (lambda s: s.transform_layout("T_softmax_norm", ("write", 0), lambda i, j: (j, i)), "parameter of"),
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
