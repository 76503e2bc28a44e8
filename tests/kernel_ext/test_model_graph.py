"""The whole-model graph view: groups, edges through views, time shares, SVG and no-dot HTML."""

import numpy as np
import pytest

import workbench as wb
from kernel_ext import ModelGraph
from kernel_ext.widgets import trace_graph
from workbench.graph import Graph


def small_net():
    """x -> conv + bias + relu -> conv + bias + relu -> pool -> reshape (a view) -> dense."""
    rng = np.random.default_rng(0)
    g = Graph()
    v = g.add_input("x", (1, 4, 6, 6))
    for k in range(2):
        w = g.add_constant(f"w{k}", rng.standard_normal((4, 4, 3, 3)).astype("float32"))
        b = g.add_constant(f"b{k}", rng.standard_normal((4, 1, 1)).astype("float32"))
        v = g.add_node("conv2d", [v, w], stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
        v = g.add_node("relu", [g.add_node("add", [v, b])])
    v = g.add_node("reshape", [g.add_node("adaptive_avg_pool2d", [v], output_size=(1, 1))], shape=(1, 4))
    g.set_outputs([g.add_node("dense", [v, g.add_constant("fc", np.ones((3, 4), "float32"))])])
    return g


def test_groups_edges_and_shares():
    model = wb.build_model(small_net(), "llvm")
    times = model.time_groups(np.ones((1, 4, 6, 6), "float32"), runs=3)
    view = ModelGraph(model, times)
    assert len(view.groups) == 4
    assert view.edges() == [(0, 1), (1, 2), (2, 3)]  # the reshape is looked through
    assert abs(sum(view.shares()) - 1.0) < 1e-9
    text = view.text()
    assert text.splitlines()[0].startswith("4 fused groups, 3 distinct tasks; ")
    assert "0 of 3 tasks tuned" in text and "conv2d + add + relu" in text and "%" in text
    assert "->" not in text  # nodes, not the IR


def test_renders_svg_with_dot_and_a_table_without(monkeypatch):
    view = ModelGraph(small_net())  # a graph without times: no shares, no colours
    assert view.shares() is None and "ms" not in view.text()
    if trace_graph.dot_available():
        assert "<svg" in view._repr_html_()
    monkeypatch.setattr(trace_graph, "dot_available", lambda: False)
    page = view._repr_html_()
    assert "<svg" not in page and "<table" in page and "conv2d + add + relu" in page
    with pytest.raises(ValueError, match="one per group"):
        ModelGraph(small_net(), [1.0])
