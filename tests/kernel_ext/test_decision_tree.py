"""The decision tree's colours (a fixed scale, readable text), its shape (one level per
decision, shared prefixes merged) and its noise note, read from the generated SVG / HTML."""

import math
import re

import pytest

import workbench as wb
from kernel_ext import DecisionTree
from kernel_ext.widgets import decision_tree, trace_graph
from kernel_ext.widgets.decision_tree import TEXT_COLOR, contrast_ratio, latency_color

from .conftest import SMALL_GMM, tiled

needs_dot = pytest.mark.skipif(not trace_graph.dot_available(), reason="Graphviz's dot is not installed")


def measured(gmm, latencies):
    return [(tiled(gmm, seed).trace, lat) for seed, lat in enumerate(latencies)]


def test_close_latencies_get_close_colours_whatever_else_was_measured(gmm):
    """The issue's case: 31.4 vs 33.2 us were green vs red (relative to the set's range)."""
    a, b = 31.4e-6, 33.2e-6
    alone = DecisionTree(measured(gmm, [a, b]))
    with_slow = DecisionTree(measured(gmm, [a, b, 300e-6]))
    for tree in (alone, with_slow):
        assert tree.color(a) == latency_color(a, a) and tree.color(b) == latency_color(b, a)

    def rgb(c):
        return [int(c[k : k + 2], 16) for k in (1, 3, 5)]

    assert max(abs(x - y) for x, y in zip(rgb(alone.color(a)), rgb(alone.color(b)))) < 12
    # against the unscheduled function the colour of a latency is absolute: the same in any set
    base = 1e-3
    t1 = DecisionTree(measured(gmm, [a, b]), baseline=base)
    t2 = DecisionTree(measured(gmm, [b, 400e-6]), baseline=base)
    assert t1.color(b) == t2.color(b) == latency_color(b, 0.0, base)
    assert latency_color(base * 2, 1.0, base) == decision_tree.scale_color(0.0)  # slower: bottom
    assert latency_color(base / 100, 1.0, base) == decision_tree.scale_color(1.0)  # 100x: top
    assert "× faster" in t1.text()


def test_every_colour_used_has_wcag_aa_contrast(gmm):
    tree = DecisionTree(measured(gmm, [1e-4, 2e-4, 5e-4, 3e-3, None]), baseline=2e-3)
    fills = {decision_tree.scale_color(k / 20) for k in range(21)}
    fills |= {decision_tree.FAILED_FILL, decision_tree.UNMEASURED_FILL, "#ffffff"}
    for fill in fills:
        assert contrast_ratio(TEXT_COLOR, fill) >= 4.5, fill
    assert contrast_ratio(decision_tree.NOTE_COLOR, "#ffffff") >= 4.5
    # the legend's swatches as generated: every "background: X; color: Y" pair
    html = tree.legend_html()
    pairs = re.findall(r"background: (#[0-9a-f]{6}); color: (#[0-9a-f]{6})", html)
    assert len(pairs) == len(tree.legend_entries()) == 5
    assert all(contrast_ratio(fg, bg) >= 4.5 for bg, fg in pairs)
    assert contrast_ratio("#555555", "#bdbdbd") < 4.5  # the old grey-on-grey would fail this


@needs_dot
def test_svg_leaves_and_labels_are_readable(gmm):
    tree = DecisionTree(measured(gmm, [1e-4, 2e-4, 5e-4, 3e-3, None]), baseline=2e-3)
    svg = trace_graph.render_svg(tree.digraph)
    nodes = re.findall(r'<g id="node\d+" class="node">(.*?)</g>', svg, re.S)
    assert len(nodes) >= 6
    for node in nodes:
        shape = re.search(r'<(?:polygon|path|ellipse) fill="([^"]+)"', node)
        bg = "#ffffff" if shape is None or shape.group(1) == "none" else shape.group(1)  # text only: the page
        for fg in re.findall(r'<text[^>]*fill="([^"]+)"', node) or [TEXT_COLOR]:
            assert contrast_ratio(fg, bg) >= 4.5, (fg, bg)
    assert svg.count(f'fill="{TEXT_COLOR}"') >= len(nodes)  # text colour set, not left to defaults


def test_one_level_per_decision_with_shared_prefixes_merged():
    """Notebook 02's 12 samples were one fan with eight decisions per edge."""
    func = wb.workloads.get("CBR", **wb.workloads.small("CBR"))
    samples = [wb.generate_design_space(func, target="llvm", seed=seed)[0] for seed in range(12)]
    tree = DecisionTree(samples)
    (levels,) = tree.levels.values()
    assert len(levels) >= 3

    def walk(node, depth, seen):
        for label, child in node.children.items():
            assert label.count(" = ") == 1, label  # one decision per edge
            assert label.startswith(levels[depth] + " = ")
            seen.append(depth)
            walk(child, depth + 1, seen)
        if not node.children:
            assert depth == len(levels)  # every program goes through every level

    seen = []
    walk(tree.root, 0, seen)
    # shared prefixes merged: fewer nodes than programs x levels, and the first level (the
    # decision with the fewest values) has fewer branches than there are programs
    assert len(seen) < 12 * len(levels)
    assert len(tree.root.children) < 12
    # drawn: each level named once in a header row, each edge only its value
    source = tree.digraph.source
    for depth, name in enumerate(levels):
        assert f'h{depth} [label="{name} ↓"' in source
    assert f'label="{levels[0]} = ' not in source


def test_a_note_when_differences_are_within_the_noise(gmm):
    close = DecisionTree(measured(gmm, [100e-6, 102e-6, 300e-6]))
    assert close.within_noise() == [pytest.approx(102e-6)]
    assert "within the measurement noise" in close.noise_note() and "2 programs" in close.noise_note()
    assert "within the measurement noise" in close.legend_html() and "noise" in close.text()
    apart = DecisionTree(measured(gmm, [100e-6, 150e-6]))
    assert apart.noise_note() == "" and "noise" not in apart.legend_html()
    # the records' own spread over repeats sets the noise when they have one
    from workbench.tune import Record

    func = wb.workloads.get("GMM", **SMALL_GMM)
    recs = [
        Record.of(func, "llvm", tiled(func, 0).trace, [100e-6, 110e-6, 120e-6]),
        Record.of(func, "llvm", tiled(func, 1).trace, [115e-6, 120e-6, 125e-6]),
    ]
    noisy = DecisionTree(recs)
    assert noisy.noise > 0.1 and noisy.within_noise()
    assert math.isclose(DecisionTree(recs, noise=0.01).noise, 0.01)


def test_from_database_can_time_the_unscheduled_function_for_the_scale(gmm, tmp_path):
    from workbench.tune import Database, Record

    db = Database.open(tmp_path / "t.jsonl")
    db.add([Record.of(gmm, "llvm", tiled(gmm, seed).trace, [1e-6 * (seed + 1)]) for seed in range(3)])
    tree = DecisionTree.from_database(db, gmm, baseline="measure")
    assert tree.baseline is not None and tree.baseline > 0 and tree.leaves == 3
    assert "speed-up over the unscheduled function" in tree.legend_html()
