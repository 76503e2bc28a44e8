"""Trace: Python text, JSON, replay, decisions, pinning, simplification."""

import json

import pytest

import workbench as wb

from workbench.ir.structural import structural_equal, structural_hash
from workbench.schedule import Schedule, Trace
from workbench.testing import check_small, check_trace_roundtrip, original_func, small_schedule

TILED_GMM = """\
b0 = sch.get_block(name="Z")
l1, l2, l3, l4 = sch.get_loops(block=b0)
v5, v6 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=4, decision=[4, 4])
l7, l8 = sch.split(loop=l2, factors=[v5, v6], preserve_unit_iters=True)
v9, v10 = sch.sample_perfect_tile(loop=l3, n=2, max_innermost_factor=4, decision=[8, 2])
l11, l12 = sch.split(loop=l3, factors=[v9, v10], preserve_unit_iters=True)
sch.reorder(l7, l11, l4, l8, l12)
l13 = sch.fuse(l1, l7, l11, preserve_unit_iters=True)
sch.parallel(loop=l13)
sch.vectorize(loop=l12)
v14 = sch.sample_categorical(candidates=[0, 16, 64], probs=[0.5, 0.25, 0.25], decision=1)
sch.annotate(block_or_loop=b0, ann_key="pragma_auto_unroll_max_step", ann_val=v14)"""


def tiled_gmm(seed=0):
    """The trace above, written as a user would (no decisions given)."""
    sch = small_schedule("GMM", seed=seed)
    b = sch.get_block("Z")
    _, i, j, k = loops = sch.get_loops(b)
    io, ii = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=4))
    jo, ji = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=4))
    sch.reorder(io, jo, k, ii, ji)
    sch.parallel(sch.fuse(loops[0], io, jo))
    sch.vectorize(ji)
    v = sch.sample_categorical([0, 16, 64], [0.5, 0.25, 0.25])
    sch.annotate(b, "pragma_auto_unroll_max_step", v)
    return sch


def test_python_text_is_tvm_style():
    sch = Trace.from_python(TILED_GMM, original_func(small_schedule("GMM")))
    assert str(sch) == sch.as_python() == TILED_GMM


def test_from_python_and_json_agree_with_the_original():
    sch = tiled_gmm()
    check_small(sch, "GMM")
    replayed = Schedule(original_func(sch))
    Trace.from_python(str(sch.trace), replayed.func).apply_to_schedule(replayed)
    assert structural_equal(replayed.func, sch.func)


def test_json_is_plain_data():
    sch = tiled_gmm()
    data = sch.trace.as_json()
    assert json.loads(json.dumps(data)) == data
    split = data["insts"][3]
    assert split == {
        "kind": "split",
        "args": {"loop": {"rv": "l2"}, "factors": [{"rv": "v5"}, {"rv": "v6"}], "preserve_unit_iters": True},
        "outputs": ["l7", "l8"],
        "multi": True,
    }
    tile = data["insts"][2]
    assert tile["decision"] == sch.get(sch.trace[2].outputs) and "pinned" not in tile
    assert Trace.from_json(json.dumps(data)).as_python() == str(sch.trace)


def test_from_json_rejects_bad_data():
    data = tiled_gmm().trace.as_json()
    with pytest.raises(ValueError, match="not a workbench trace"):
        Trace.from_json({"insts": data["insts"]})
    bad = json.loads(json.dumps(data))
    bad["insts"][0]["kind"] = "no_such_primitive"
    with pytest.raises(KeyError, match="unknown instruction kind 'no_such_primitive'"):
        Trace.from_json(bad)
    bad = json.loads(json.dumps(data))
    bad["insts"][1]["args"]["block"] = {"rv": "b99"}
    with pytest.raises(ValueError, match="uses random variable 'b99' before defining it"):
        Trace.from_json(bad)
    bad = json.loads(json.dumps(data))
    bad["insts"][1]["args"]["colour"] = 1
    with pytest.raises(ValueError, match=r"get_loops has no parameter\(s\) \['colour'\]"):
        Trace.from_json(bad)


def test_apply_to_schedule_maps_random_variables():
    sch = tiled_gmm()
    fresh = Schedule(original_func(sch))
    rv_map = sch.trace.apply_to_schedule(fresh)
    for inst in sch.trace:
        for rv in inst.outputs:
            new = rv_map[rv]
            assert type(new) is type(rv) and new in fresh.symbols
    v = sch.trace[-2].outputs[0]
    assert fresh.get(rv_map[v]) == sch.get(v) == [0, 16, 64][sch.trace[-2].decision]


def test_with_decision_changes_only_the_copy():
    sch = tiled_gmm()
    tile = sch.trace[2]
    other = sch.trace.with_decision(tile, [8, 2])
    assert sch.trace[2] is tile and other[2].decision == [8, 2]
    replayed = Schedule(original_func(sch))
    other.apply_to_schedule(replayed)
    fused, k, ii, ji = replayed.get(replayed.get_loops("Z"))
    j_tile = sch.trace[4].decision
    assert [fused.extent.value, ii.extent.value, ji.extent.value] == [8 * j_tile[0], 2, j_tile[1]]
    check_small(replayed, "GMM")


def test_resampling_under_different_seeds_gives_different_functions():
    trace = tiled_gmm().trace
    func = original_func(tiled_gmm())
    hashes = set()
    for seed in range(8):
        sch = Schedule(func, seed=seed)
        trace.apply_to_schedule(sch, decision_provider=Trace.resample)
        check_small(sch, "GMM")
        hashes.add(structural_hash(sch.func))
    assert len(hashes) > 2


def test_pinned_decisions_survive_resampling():
    original = tiled_gmm()
    trace = original.trace.copy()
    for inst in list(trace.decisions):
        trace.pin(inst)
    assert len(trace.pinned) == 3
    for seed in range(4):
        sch = Schedule(original_func(original), seed=seed)
        trace.apply_to_schedule(sch, decision_provider=lambda inst, d: pytest.fail("asked"))
        assert structural_equal(sch.func, original.func)
        assert [i.pinned for i in sch.trace] == [i.pinned for i in trace]


def test_pin_with_value_free_and_stale_handles():
    sch = tiled_gmm()
    trace = sch.trace.copy()
    tile = trace[4]
    trace.pin(tile, [8, 2])  # set and pin
    assert trace[4].decision == [8, 2] and trace[4].pinned and not sch.trace[4].pinned
    trace.free(tile)  # the old handle still finds it (same outputs)
    assert not trace[4].pinned and trace[4].decision == [8, 2]
    trace.pin(tile.outputs[0])  # by a random variable it produced
    assert trace[4].pinned
    data = trace.as_json()
    assert data["insts"][4]["pinned"] is True
    assert Trace.from_json(data)[4].pinned
    with pytest.raises(ValueError, match="samples nothing"):
        trace.pin(trace[3])


def test_only_pinned_kept_others_resampled():
    original = tiled_gmm()
    trace = original.trace.copy()
    trace.pin(2)
    seen = []

    def provider(inst, decision):
        seen.append(inst.kind.name)
        return None

    trace.apply_to_schedule(Schedule(original_func(original), seed=3), decision_provider=provider)
    assert seen == ["sample_perfect_tile", "sample_categorical"]


def test_simplified_drops_dead_queries_and_samples():
    sch = small_schedule("GMM")
    loops = sch.get_loops("Z")
    sch.sample_perfect_tile(loops[1], n=2)  # unused
    sch.get_block("Z")  # unused
    sch.sample_categorical([1, 2], [1, 1])  # unused
    sch.split(loops[2], [None, 4])
    simple = sch.trace.simplified()
    assert [i.kind.name for i in simple] == ["get_block", "get_loops", "split"]
    replayed = Schedule(original_func(sch))
    simple.apply_to_schedule(replayed)
    assert structural_equal(replayed.func, sch.func)


def test_roundtrip_with_every_loop_primitive():
    sch = tiled_gmm()
    b = sch.get_block("Z")
    u = sch.add_unit_loop(b)
    sch.unroll(u)
    sch.annotate(u, "keep", ["a", "b"])
    sch.unannotate(b, "pragma_auto_unroll_max_step")
    k = sch.get_loops(b)[1]
    sch.bind(sch.split(k, [None, 4])[1], "threadIdx.x")
    check_trace_roundtrip(sch)
    check_small(sch, "GMM")


def test_trace_format_error_is_a_workbench_error_at_the_top_level():
    """``except wb.TraceFormatError`` (and ``except wb.WorkbenchError``) catch malformed JSON."""
    with pytest.raises(wb.TraceFormatError, match="not a workbench trace") as info:
        wb.Trace.from_json('{"insts": []}')
    assert isinstance(info.value, wb.WorkbenchError) and isinstance(info.value, ValueError)
    with pytest.raises(wb.UnknownInstructionKind, match="NoSuchKind"):
        wb.Trace.from_json('{"format": "workbench.trace/1", "insts": [{"kind": "NoSuchKind"}]}')
