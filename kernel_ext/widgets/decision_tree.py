"""The decisions of many traces as a tree: which values the search tried, and how fast each was.

Each sampling instruction is a level and each explored value a branch; each leaf is a measured
program coloured by its latency (green fast, red slow, grey failed). Levels are named after
what they decide (``tile j``, ``unroll_explicit``); decisions shared by every program are
listed once above the tree instead of drawn. Renders like :class:`TraceGraph` (SVG with
Graphviz's ``dot``, nested HTML lists without).
"""

from __future__ import annotations

import html
import itertools
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

import graphviz

import workbench as wb
from workbench.space import without_postproc
from workbench.tune import Database

from ..choices import decision_text, sampling_name
from ..display import fmt_seconds
from .trace_graph import render_svg


@dataclass
class _Node:
    children: dict[str, "_Node"] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)  # programs ending here (inf: failed)

    def count(self) -> int:
        return len(self.latencies) + sum(c.count() for c in self.children.values())

    def best(self) -> float:
        """The fastest latency below (failed and unmeasured programs sort last)."""
        own = [x for x in self.latencies if not math.isnan(x)]
        return min(own + [c.best() for c in self.children.values()], default=math.inf)


def _level_names(trace: "wb.Trace", func: Optional["wb.PrimFunc"]) -> list[str]:
    """A name per sampling instruction (``tile j``), from a replay of ``trace`` on ``func``;
    the output variables' names (``v5, v6``) when there is no function or it does not replay."""
    if func is not None:
        sch = wb.Schedule(func)
        try:
            trace.apply_to_schedule(sch)
        except (wb.ScheduleError, ValueError):
            pass
        else:
            return [sampling_name(sch, k) for k, inst in enumerate(sch.trace) if inst.kind.is_sampling]
    names = trace.rv_names()
    return [", ".join(names[rv] for rv in inst.outputs) for inst in trace if inst.kind.is_sampling]


def latency_color(latency: float, best: float, worst: float) -> str:
    """Green for ``best``, through yellow, to red for ``worst`` (log scale); grey if failed."""
    if not math.isfinite(latency):
        return "#bdbdbd"
    t = 0.0 if worst <= best else math.log(latency / best) / math.log(worst / best)
    t = min(max(t, 0.0), 1.0)
    r, g = (int(255 * 2 * t), 200) if t < 0.5 else (255, int(200 * (2 - 2 * t)))
    return f"#{r:02x}{g:02x}50"


def _is_record(item: Any) -> bool:
    return hasattr(item, "trace_json") and hasattr(item, "latency")


def _is_pair(item: Any) -> bool:
    """``(trace, latency)``: a trace and a number of seconds (None: failed)."""
    return (
        isinstance(item, tuple)
        and len(item) == 2
        and isinstance(item[0], wb.Trace)
        and (item[1] is None or isinstance(item[1], numbers.Real))
    )


class DecisionTree:
    """The decisions of many traces as a tree whose leaves are measured programs.

    ``items``: database records, ``(trace, latency_seconds)`` pairs, bare traces or schedules
    (not measured), or one of those alone (``DecisionTree(sch.trace)``: one program). Traces
    with different instruction sequences (different design spaces) get separate subtrees;
    chains of single branches are drawn as one edge. Levels are named after what they decide
    (``tile j``) when the function is known: ``func``, or the one that a schedule, a record or
    a schedule's trace carries (``trace.base_func``); otherwise after the variables (``v5, v6``).
    """

    def __init__(self, items: Any, title: str = "decisions", func: Optional["wb.PrimFunc"] = None):
        if isinstance(items, (wb.Trace, wb.Schedule)) or _is_record(items) or _is_pair(items):
            items = [items]
        elif not isinstance(items, Iterable) or isinstance(items, (str, bytes)):
            raise TypeError(
                f"DecisionTree expects a trace, a schedule, a database record or a "
                f"(trace, latency) pair, or a list of them; got "
                f"{type(items).__name__}"
            )
        self.title = title
        self.root = _Node()
        self.latencies: list[float] = []
        #: per design space, the decisions every program shares: [(name, value)]
        self.fixed: dict[str, list[tuple[str, str]]] = {}
        spaces: dict[tuple[str, ...], list] = {}  # skeleton -> [(trace, latency)]
        level_names: dict[tuple[str, ...], list[str]] = {}
        for item in items:
            trace, latency, item_func = self._unpack(item)
            trace = without_postproc(trace)  # postprocessing is the same for every program
            skeleton = tuple(inst.kind.name for inst in trace)
            if skeleton not in spaces:
                level_names[skeleton] = _level_names(trace, func or item_func)
            spaces.setdefault(skeleton, []).append((trace, latency))
        for n, (skeleton, programs) in enumerate(spaces.items()):
            label = f"design space {n} ({len(skeleton)} instructions)"
            paths = [[decision_text(i) for i in trace if i.kind.is_sampling] for trace, _lat in programs]
            names = level_names[skeleton]
            varying = [lv for lv in range(len(names)) if len({p[lv] for p in paths}) > 1]
            self.fixed[label] = [(names[lv], paths[0][lv]) for lv in range(len(names)) if lv not in varying]
            space_node = self.root.children.setdefault(label, _Node())
            for path, (_trace, latency) in zip(paths, programs):
                node = space_node
                for lv in varying:
                    node = node.children.setdefault(f"{names[lv]} = {path[lv]}", _Node())
                node.latencies.append(latency)
                self.latencies.append(latency)
        only = list(self.root.children.values())
        if len(only) == 1 and only[0].children:  # one design space: no need for that level
            self.root = only[0]  # (kept when all programs share every decision: the leaf)
        self.digraph = self._build()

    @classmethod
    def from_database(cls, db: Any, func: "wb.PrimFunc", target: Any = None) -> "DecisionTree":
        """Every record of ``func`` (on ``target``) in database ``db`` (or a path to one)."""
        db = Database.open(db) if not isinstance(db, Database) else db
        return cls(db.records(func, target), title=f"decisions of {func.name}", func=func)

    @staticmethod
    def _unpack(item: Any) -> tuple["wb.Trace", float, Optional["wb.PrimFunc"]]:
        if isinstance(item, wb.Trace):
            return item, math.nan, item.base_func
        if isinstance(item, wb.Schedule):
            return item.trace, math.nan, item.history[0][1]
        if _is_pair(item):
            trace, latency = item
            return trace, math.inf if latency is None else float(latency), trace.base_func
        if _is_record(item):
            return item.trace, item.latency, item.func
        what = (
            f"an instruction ({item.kind.name}): pass the trace itself, not its instructions"
            if isinstance(item, wb.Instruction)
            else type(item).__name__
        )
        raise TypeError(
            f"DecisionTree: each item must be a trace, a schedule, a database record "
            f"or a (trace, latency) pair; got {what}"
        )

    @property
    def leaves(self) -> int:
        return len(self.latencies)

    def _measured(self) -> bool:
        """Whether some program has a latency (bare traces and schedules have none)."""
        return any(math.isfinite(x) for x in self.latencies)

    def _range(self) -> tuple[float, float]:
        ok = [x for x in self.latencies if math.isfinite(x)]
        return (min(ok), max(ok)) if ok else (1.0, 1.0)

    def _leaf_label(self, node: _Node) -> tuple[str, str]:
        best, worst = self._range()
        lat = min(node.latencies)
        if math.isnan(lat):
            return "not measured", "white"
        count = f" (measured {len(node.latencies)}×)" if len(node.latencies) > 1 else ""
        text = fmt_seconds(lat) if math.isfinite(lat) else "failed"
        return text + count, latency_color(lat, best, worst)

    def _walk(self, node: _Node, parent: str, emit, ids: Iterator[int]) -> None:
        """Call ``emit(parent_id, child_id, edge_label, child)`` with single chains merged."""
        for label, child in sorted(node.children.items(), key=lambda kv: kv[1].best()):
            labels = [label]
            while len(child.children) == 1 and not child.latencies:
                ((more, child),) = child.children.items()
                labels.append(more)
            cid = f"n{next(ids)}"
            emit(parent, cid, "\n".join(labels), child)
            self._walk(child, cid, emit, ids)

    def _build(self) -> graphviz.Digraph:
        g = graphviz.Digraph(
            "decisions",
            graph_attr={"rankdir": "LR", "fontsize": "10"},
            node_attr={"fontname": "monospace", "fontsize": "10"},
            edge_attr={"fontname": "monospace", "fontsize": "9"},
        )
        g.node("root", f"{self.title}\n{self.leaves} programs", shape="box", style="rounded")

        def emit(parent: str, cid: str, label: str, child: _Node) -> None:
            if child.children:
                g.node(cid, str(child.count()), shape="circle", width="0.3", fixedsize="false")
            else:
                text, color = self._leaf_label(child)
                g.node(cid, text, shape="box", style="filled,rounded", fillcolor=color)
            g.edge(parent, cid, label=label)

        leaves: list[str] = []

        def emit_leaf_aware(parent: str, cid: str, label: str, child: _Node) -> None:
            emit(parent, cid, label, child)
            if not child.children:
                leaves.append(cid)

        self._walk(self.root, "root", emit_leaf_aware, itertools.count())
        with g.subgraph() as column:  # every program in one column, whatever its depth
            column.attr(rank="same")
            for cid in leaves:
                column.node(cid)
        return g

    def _fallback_html(self) -> str:
        """Without ``dot``: the tree as nested lists, leaves on coloured backgrounds."""

        def render(node: _Node) -> str:
            items = []
            for label, child in node.children.items():
                if child.children:
                    items.append(
                        f"<li><code>{html.escape(label)}</code> "
                        f"({child.count()} programs){render(child)}</li>"
                    )
                else:
                    text, color = self._leaf_label(child)
                    items.append(
                        f"<li><code>{html.escape(label)}</code> → "
                        f"<span style='background: {color}; padding: 0 4px;'>"
                        f"{html.escape(text)}</span></li>"
                    )
            return "<ul>" + "".join(items) + "</ul>"

        return f'<div class="wb-decision-tree-fallback">{render(self.root)}</div>'

    def _repr_html_(self) -> str:
        best, worst = self._range()
        legend = (
            (
                f'<div style="color: #555; font-size: 12px;">{self.leaves} programs; leaf colour '
                f'= measured latency, <span style="background: {latency_color(best, best, worst)}'
                f'">{fmt_seconds(best)} (best)</span> to <span style="background: '
                f'{latency_color(worst, best, worst)}">{fmt_seconds(worst)}</span>, grey: '
                f"failed</div>"
            )
            if self._measured()
            else ""
        )
        legend += "".join(
            f'<div style="color: #555; font-size: 12px;">the same in every program'
            f"{' of ' + html.escape(space) if len(self.fixed) > 1 else ''}: "
            f"{html.escape(self._fixed_text(fixed))}</div>"
            for space, fixed in self.fixed.items()
            if fixed
        )
        svg = render_svg(self.digraph)
        if svg is None:
            return (
                legend + '<div style="color: #555;">Graphviz\'s <code>dot</code> is not '
                "installed: the tree as a list.</div>" + self._fallback_html()
            )
        return f'{legend}<div class="wb-decision-tree">{svg}</div>'

    @staticmethod
    def _fixed_text(fixed: list[tuple[str, str]]) -> str:
        return ", ".join(f"{name} = {value}" for name, value in fixed)

    def text(self) -> str:
        lines = [f"{self.title}: {self.leaves} programs"]
        lines += [
            f"  the same in every program: {self._fixed_text(fixed)}"
            for fixed in self.fixed.values()
            if fixed
        ]

        def walk(node: _Node, depth: int) -> None:
            for label, child in node.children.items():
                leaf = "" if child.children else "  -> " + self._leaf_label(child)[0]
                lines.append("  " * depth + label.replace("\n", "; ") + leaf)
                walk(child, depth + 1)

        walk(self.root, 1)
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())
