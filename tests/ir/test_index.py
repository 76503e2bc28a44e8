"""The function index and path-copying replacement every primitive is built on."""

import pytest

from workbench.errors import InternalError
from workbench.ir.expr import IntImm, Var
from workbench.ir.stmt import Evaluate, For, SeqStmt, make_for
from workbench.ir.index import index, replace, replace_all
from workbench.testing import elementwise_func, shared_loop_func, small_schedule


def test_index_tables():
    func = shared_loop_func()
    idx = index(func)
    assert index(func) is idx  # cached per function object
    assert list(idx.realizes) == ["root", "B", "C"]
    i, j = idx.loops_above(idx.block("B"))
    assert [l.loop_var.name for l in (i, j)] == ["i", "j"]
    assert idx.loops[i.loop_var] is i and idx.parent[j] is i.body and isinstance(i.body, SeqStmt)
    assert idx.scope(idx.block("B")) is func.root and idx.scope(func.body) is None
    assert [r.block.name for r in idx.child_realizes(i)] == ["B", "C"]
    assert [r.block.name for r in idx.child_realizes(func.root)] == ["B", "C"]
    assert [r.block.name for r in idx.realizes_under(func.body)] == ["B", "C"]
    ranges = idx.var_ranges(idx.realizes["B"])
    assert {v.name: r.extent.value for v, r in ranges.items()} == {"i": 4, "j": 8}
    assert idx.order[func.body] == 0 and idx.order[idx.realizes["B"]] < idx.order[idx.realizes["C"]]


def test_replace_copies_only_the_path():
    func = shared_loop_func()
    idx = index(func)
    i, j = idx.loops_above(idx.block("B"))
    c_nest = i.body.seq[1]
    new_j = j.with_(extent=j.extent)
    out = replace(func, j, new_j)
    out_idx = index(out)
    assert out_idx.loops[j.loop_var] is new_j
    assert out_idx.loops[i.loop_var] is not i  # the path is rebuilt
    assert out_idx.loops[i.loop_var].body.seq[1] is c_nest  # the sibling is shared
    assert out.params == func.params and index(func).loops[j.loop_var] is j


def test_replace_remove_and_splice():
    func = shared_loop_func()
    idx = index(func)
    i = idx.loops_above(idx.block("B"))[0]
    first, second = i.body.seq
    removed = replace(func, first, None)
    assert index(removed).loops[i.loop_var].body is index(removed).loops[second.loop_var]
    u = Var("u")
    spliced = replace(func, first, SeqStmt((Evaluate(IntImm(0)), first)))
    assert len(index(spliced).loops[i.loop_var].body.seq) == 3
    both = replace_all(func, {first: None, second: make_for(u, 1, second)})
    assert isinstance(index(both).loops[i.loop_var].body, For)


def test_replace_errors_are_internal():
    func = elementwise_func()
    other = shared_loop_func()
    with pytest.raises(InternalError, match="not a statement of elementwise"):
        replace(func, index(other).realizes["B"], None)
    with pytest.raises(InternalError, match="cannot remove the root block"):
        replace(func, func.body, None)
    loop = index(func).loops_above(index(func).block("B"))[0]
    with pytest.raises(InternalError, match="cannot remove the body of a For"):
        replace(func, loop.body, None)


def test_schedule_steps_share_untouched_blocks():
    sch = small_schedule("SFM")
    before = index(sch.func).realizes["T_softmax_exp"]
    sch.split(sch.get_loops("T_softmax_norm")[1], [None, 4])
    assert index(sch.func).realizes["T_softmax_exp"] is before
