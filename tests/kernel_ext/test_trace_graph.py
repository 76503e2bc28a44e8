"""Trace graphs and decision trees: graph structure, and both renderings (SVG and no-dot)."""

import math

import pytest

import workbench as wb
from kernel_ext import DecisionTree, TraceGraph
from kernel_ext.widgets import decision_tree, trace_graph

from .conftest import tiled


def test_edges_follow_random_variables(space):
    graph = TraceGraph(space)
    edges = {(a, b): rvs for a, b, rvs in graph.edges()}
    kinds = [inst.kind.name for inst in space.trace]
    tile = kinds.index("sample_perfect_tile")
    split = kinds.index("split")
    assert edges[(tile, split)] == ["v5", "v6"]  # the tile sizes flow into the split
    assert (0, 1) in edges and edges[(0, 1)] == ["b0"]  # get_block -> get_loops
    assert len(graph.digraph.body) > len(space.trace)  # nodes and edges


def test_sampling_nodes_list_candidates_with_the_choice_highlighted(space):
    graph = TraceGraph(space)
    k = next(k for k, inst in enumerate(space.trace) if inst.kind.name == "sample_categorical")
    label = graph._sampling_label(k)
    chosen = space.trace[k].args["candidates"][space.trace[k].decision]
    assert label.count("<TD") == 5  # the call, what it decides, three candidates
    assert f"<B>{chosen}  (p=" in label
    tile = next(k for k, inst in enumerate(space.trace) if inst.kind.name == "sample_perfect_tile")
    assert f"<B>{space.trace[tile].decision}</B>" in graph._sampling_label(tile)


def test_trace_with_func_is_replayed_for_candidates(space, gmm):
    read_back = wb.Trace.from_json(space.trace.as_json())
    graph = TraceGraph(read_back, func=gmm)
    assert all(graph.choices.values())
    assert all(TraceGraph(space.trace).choices.values())  # a schedule's trace knows its func
    bare = TraceGraph(read_back)
    assert all(c == [] for c in bare.choices.values())
    assert "decision" in bare.text()


def test_renders_svg_with_dot_and_a_table_without(space, monkeypatch):
    graph = TraceGraph(space)
    if trace_graph.dot_available():
        assert "<svg" in graph._repr_html_()
    monkeypatch.setattr(trace_graph, "dot_available", lambda: False)
    fallback = graph._repr_html_()
    assert "<svg" not in fallback and "wb-trace-graph-fallback" in fallback
    assert fallback.count("<tr>") == len(space.trace) + 1


def test_decision_tree_groups_shared_prefixes_and_colours_leaves(gmm, monkeypatch):
    items = [(tiled(gmm, seed).trace, 1e-4 * (1 + seed % 3)) for seed in range(8)]
    items.append((tiled(gmm, 0).trace, None))  # a failed measurement
    tree = DecisionTree(items)
    assert tree.leaves == 9
    assert tree.root.count() == 9
    (levels,) = tree.levels.values()  # the traces know gmm: levels named after loops
    assert set(levels) <= {"tile i", "tile i_1", "unroll_explicit"}
    first = set(tree.root.children)
    assert all(label.startswith(levels[0] + " = ") for label in first)
    text = tree.text()
    assert "100 µs" in text and "300 µs" in text
    assert tree.root.best() == pytest.approx(1e-4)
    monkeypatch.setattr(trace_graph, "dot_available", lambda: False)
    fallback = tree._repr_html_()
    assert "wb-decision-tree-fallback" in fallback
    assert decision_tree.latency_color(1e-4, 1e-4) in fallback  # the fastest: the scale's top
    assert decision_tree.latency_color(math.inf, 1) == decision_tree.FAILED_FILL


def test_levels_are_named_after_loops_and_constant_levels_are_set_aside(gmm):
    base = tiled(gmm, 0).trace
    tile_i = next(k for k, inst in enumerate(base) if inst.kind.name == "sample_perfect_tile")
    variants = [base.with_decision(tile_i, d) for d in ([2, 8], [4, 4], [8, 2])]
    tree = DecisionTree([(t, 1e-4 * (n + 1)) for n, t in enumerate(variants)], func=gmm)
    assert sorted(tree.root.children) == ["tile i = [2, 8]", "tile i = [4, 4]", "tile i = [8, 2]"]
    (fixed,) = tree.fixed.values()  # the other two decisions agree everywhere
    assert [name for name, _v in fixed] == ["tile i_1", "unroll_explicit"]
    assert "the same in every program: tile i_1 = " in tree.text()


def test_decision_tree_takes_a_trace_a_schedule_a_record_or_lists_of_them(space, gmm):
    """``DecisionTree(trace)`` used to iterate the trace's instructions as records."""
    from workbench.tune import Record

    one = DecisionTree(space.trace)
    assert one.leaves == 1 and math.isnan(one.latencies[0])
    (fixed,) = one.fixed.values()  # a single program: every decision is fixed
    assert [name for name, _v in fixed] == ["tile i", "tile i_1", "unroll_explicit"]
    assert "not measured" in one.text() and "leaf colour" not in one._repr_html_()
    assert DecisionTree(space).fixed == one.fixed
    traces = [tiled(gmm, seed).trace for seed in range(4)]
    assert DecisionTree(traces).leaves == DecisionTree(tuple(traces)).leaves == 4
    assert DecisionTree([tiled(gmm, seed) for seed in range(4)]).leaves == 4
    record = Record.of(gmm, "llvm", space.trace, [2e-4])
    for tree in (DecisionTree(record), DecisionTree([record]), DecisionTree((space.trace, 2e-4))):
        assert tree.leaves == 1 and tree.latencies == [pytest.approx(2e-4)]
        assert "200 µs" in tree.text()
    read_back = DecisionTree(wb.Trace.from_json(space.trace.as_json()))  # no function known
    (fixed,) = read_back.fixed.values()
    assert fixed[0][0] == "v5, v6"
    with pytest.raises(TypeError, match=r"an instruction \(get_block\): pass the trace itself"):
        DecisionTree(list(space.trace))
    with pytest.raises(TypeError, match="DecisionTree expects a trace"):
        DecisionTree(3)
