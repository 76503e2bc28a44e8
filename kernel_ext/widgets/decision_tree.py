"""The decisions of many traces as a tree: which values the search tried, and how fast each was.

Each sampling decision that differs between the programs is one level of the tree and each
value it took a branch, so programs that agree on their first decisions share that part of the
path (levels with fewer distinct values come first: more sharing near the root). Each leaf is a
measured program coloured on a fixed scale: by its speed-up over the unscheduled function when
that is known (``baseline``), else by how much slower it is than the fastest, from the fastest to
10x slower; two close latencies get close colours, whatever else was measured. When leaves
differ by less than the measurement noise the legend says so. Levels are named after what they
decide (``tile j``, ``unroll_explicit``); decisions shared by every program are listed once
above the tree instead of drawn. All text is dark on light fills (WCAG AA contrast, >= 4.5:1).
Renders like :class:`TraceGraph` (SVG with Graphviz's ``dot``, nested HTML lists without).
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
    spreads: list[float] = field(default_factory=list)  # their repeats' (max - min) / min

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


#: dark text on every fill of the widget
TEXT_COLOR = "#1a1a1a"
FAILED_FILL = "#d9d9d9"
UNMEASURED_FILL = "#ffffff"
#: the fixed colour scale, from slow to fast: light red, light amber, light yellow, light green
_STOPS = (
    (0.0, (0xF4, 0xA3, 0xA3)),
    (0.33, (0xF9, 0xCB, 0x8F)),
    (0.66, (0xF2, 0xE8, 0x9B)),
    (1.0, (0x9F, 0xDB, 0x9A)),
)
#: the scales: speed-up over the unscheduled function from 1x (or slower) to 64x (or faster);
#: without it, latency from the fastest (1x) to 10x the fastest
SPEEDUP_SCALE = (1.0, 64.0)
RELATIVE_SCALE = 10.0
#: relative difference below which two latencies are within the measurement noise (when the
#: records carry no spread of their own): repeated runs of one program on a quiet machine
#: differ by a few percent
DEFAULT_NOISE = 0.05


def scale_color(t: float) -> str:
    """The fill for position ``t`` of the fixed scale (0 slow, 1 fast), interpolated."""
    t = min(max(t, 0.0), 1.0)
    for (t0, c0), (t1, c1) in zip(_STOPS, _STOPS[1:]):
        if t <= t1:
            f = (t - t0) / (t1 - t0)
            return "#" + "".join(f"{round(a + (b - a) * f):02x}" for a, b in zip(c0, c1))
    return "#" + "".join(f"{c:02x}" for c in _STOPS[-1][1])


def latency_color(latency: float, best: float, baseline: Optional[float] = None) -> str:
    """The leaf fill of ``latency`` (seconds) on the fixed scale: against ``baseline`` (the
    unscheduled function, log scale from 1x to 64x faster) when given, else against ``best``
    (log scale from the fastest to 10x slower); grey if failed."""
    if not math.isfinite(latency):
        return FAILED_FILL
    if baseline is not None and baseline > 0:
        low, high = SPEEDUP_SCALE
        t = math.log(max(baseline / latency, low) / low) / math.log(high / low)
    else:
        t = 1.0 - math.log(max(latency / best, 1.0)) / math.log(RELATIVE_SCALE)
    return scale_color(t)


def relative_luminance(color: str) -> float:
    """WCAG 2 relative luminance of ``#rrggbb``."""
    channels = [int(color[k : k + 2], 16) / 255 for k in (1, 3, 5)]
    r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(fg: str, bg: str) -> float:
    """WCAG 2 contrast ratio of two ``#rrggbb`` colours (1 to 21; AA asks >= 4.5 for text)."""
    a, b = sorted((relative_luminance(fg), relative_luminance(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


#: secondary text: dark grey on white (8.6:1)
NOTE_COLOR = "#4a4a4a"
_NOTE_STYLE = f"color: {NOTE_COLOR}; font-size: 12px;"


def measure_unscheduled(func: "wb.PrimFunc") -> float:
    """Seconds of one run of ``func`` as written (built for llvm), the best of three."""
    import time

    kernel = wb.build(func, target="llvm")
    args = [wb.zeros([int(d) for d in b.shape], b.dtype) for b in func.params]
    kernel(*args)  # warm up: the first call pays for loading
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        kernel(*args)
        best = min(best, time.perf_counter() - t0)
    return best


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
    with different instruction sequences (different design spaces) get separate subtrees.
    Each differing decision is one level (one edge per level, never several decisions on one
    edge). Levels are named after what they decide (``tile j``) when the function is known:
    ``func``, or the one that a schedule, a record or a schedule's trace carries
    (``trace.base_func``); otherwise after the variables (``v5, v6``).

    ``baseline``: seconds of the unscheduled function; leaves are then coloured by their
    speed-up over it (``from_database(..., baseline="measure")`` times it). ``noise``: the
    relative difference taken as measurement noise (default: the records' own spread over
    their repeats, else 5%).
    """

    def __init__(
        self,
        items: Any,
        title: str = "decisions",
        func: Optional["wb.PrimFunc"] = None,
        baseline: Optional[float] = None,
        noise: Optional[float] = None,
    ):
        if isinstance(items, (wb.Trace, wb.Schedule)) or _is_record(items) or _is_pair(items):
            items = [items]
        elif not isinstance(items, Iterable) or isinstance(items, (str, bytes)):
            raise TypeError(
                f"DecisionTree expects a trace, a schedule, a database record or a "
                f"(trace, latency) pair, or a list of them; got "
                f"{type(items).__name__}"
            )
        self.title = title
        self.baseline = baseline
        self.root = _Node()
        self.latencies: list[float] = []
        spreads: list[float] = []
        #: per design space, the decisions every program shares: [(name, value)]
        self.fixed: dict[str, list[tuple[str, str]]] = {}
        #: per design space, the decisions that differ, one tree level each, root first
        self.levels: dict[str, list[str]] = {}
        spaces: dict[tuple[str, ...], list] = {}  # skeleton -> [(trace, latency)]
        level_names: dict[tuple[str, ...], list[str]] = {}
        for item in items:
            trace, latency, item_func = self._unpack(item)
            repeats = [x for x in getattr(item, "latencies", None) or [] if math.isfinite(x) and x > 0]
            spreads.append((max(repeats) - min(repeats)) / min(repeats) if len(repeats) > 1 else math.nan)
            trace = without_postproc(trace)  # postprocessing is the same for every program
            skeleton = tuple(inst.kind.name for inst in trace)
            if skeleton not in spaces:
                level_names[skeleton] = _level_names(trace, func or item_func)
            spaces.setdefault(skeleton, []).append((trace, latency, spreads[-1]))
        for n, (skeleton, programs) in enumerate(spaces.items()):
            label = f"design space {n} ({len(skeleton)} instructions)"
            paths = [[decision_text(i) for i in trace if i.kind.is_sampling] for trace, _l, _s in programs]
            names = level_names[skeleton]
            distinct = {lv: len({p[lv] for p in paths}) for lv in range(len(names))}
            # fewest values first: programs share the longest prefixes (a stable sort keeps
            # the trace's order among levels with as many values)
            varying = sorted((lv for lv in range(len(names)) if distinct[lv] > 1), key=distinct.__getitem__)
            self.fixed[label] = [(names[lv], paths[0][lv]) for lv in range(len(names)) if distinct[lv] == 1]
            self.levels[label] = [names[lv] for lv in varying]
            space_node = self.root.children.setdefault(label, _Node())
            for path, (_trace, latency, spread) in zip(paths, programs):
                node = space_node
                for lv in varying:
                    node = node.children.setdefault(f"{names[lv]} = {path[lv]}", _Node())
                node.latencies.append(latency)
                node.spreads.append(spread)
                self.latencies.append(latency)
        only = list(self.root.children.values())
        if len(only) == 1 and only[0].children:  # one design space: no need for that level
            self.root = only[0]  # (kept when all programs share every decision: the leaf)
        measured_spreads = sorted(x for x in spreads if not math.isnan(x))
        if noise is None:
            noise = measured_spreads[len(measured_spreads) // 2] if measured_spreads else DEFAULT_NOISE
        self.noise = noise
        self.digraph = self._build()

    @classmethod
    def from_database(
        cls,
        db: Any,
        func: "wb.PrimFunc",
        target: Any = None,
        baseline: Any = None,
        noise: Optional[float] = None,
    ) -> "DecisionTree":
        """Every record of ``func`` (on ``target``) in database ``db`` (or a path to one).
        ``baseline``: seconds of the unscheduled function, or ``"measure"`` to time it once
        here (llvm)."""
        db = Database.open(db) if not isinstance(db, Database) else db
        if baseline == "measure":
            baseline = measure_unscheduled(func)
        return cls(
            db.records(func, target),
            title=f"decisions of {func.name}",
            func=func,
            baseline=baseline,
            noise=noise,
        )

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

    def color(self, latency: float) -> str:
        """The fill of a leaf of ``latency`` seconds (NaN: not measured)."""
        if math.isnan(latency):
            return UNMEASURED_FILL
        return latency_color(latency, self._range()[0], self.baseline)

    def _leaf_label(self, node: _Node) -> tuple[str, str]:
        lat = min(node.latencies)
        if math.isnan(lat):
            return "not measured", UNMEASURED_FILL
        count = f" (measured {len(node.latencies)}×)" if len(node.latencies) > 1 else ""
        text = fmt_seconds(lat) if math.isfinite(lat) else "failed"
        if math.isfinite(lat) and self.baseline:
            text += (
                f", {self.baseline / lat:.1f}× faster"
                if lat < self.baseline
                else f", {lat / self.baseline:.1f}× slower"
            )
        return text + count, self.color(lat)

    def within_noise(self) -> list[float]:
        """The latencies (other than the fastest) within the noise of the fastest."""
        ok = sorted(x for x in self.latencies if math.isfinite(x))
        return [x for x in ok[1:] if x <= ok[0] * (1 + self.noise)]

    def noise_note(self) -> str:
        """A sentence when leaves differ by less than the measurement noise, else ''."""
        close = self.within_noise()
        if not close:
            return ""
        best = min(x for x in self.latencies if math.isfinite(x))
        return (
            f"{len(close) + 1} programs are within {self.noise:.0%} of the fastest ({fmt_seconds(best)} to "
            f"{fmt_seconds(max(close))}): within the measurement noise, so their order may change "
            f"from one run to the next."
        )

    def legend_entries(self) -> list[tuple[str, str]]:
        """``(text, fill)`` of the legend's colour swatches: the fixed scale's ticks."""
        if self.baseline:
            low, high = SPEEDUP_SCALE
            ticks = [low * (high / low) ** (k / 3) for k in range(4)]
            out = [
                (f"{'≤ ' if k == 0 else '≥ ' if k == 3 else ''}{x:.0f}× faster", scale_color(k / 3))
                for k, x in enumerate(ticks)
            ]
        else:
            ticks = [RELATIVE_SCALE ** (k / 3) for k in range(4)]
            out = [
                (
                    "the fastest" if k == 0 else f"{'≥ ' if k == 3 else ''}{x:.1f}× slower",
                    scale_color(1 - k / 3),
                )
                for k, x in enumerate(ticks)
            ]
        return out + [("failed", FAILED_FILL)]

    def _walk(self, node: _Node, parent: str, emit, ids: Iterator[int], depth: int = 0) -> None:
        """Call ``emit(parent_id, child_id, edge_label, child, depth)`` for every node, one
        decision per edge, fastest branches first."""
        for label, child in sorted(node.children.items(), key=lambda kv: kv[1].best()):
            cid = f"n{next(ids)}"
            emit(parent, cid, label, child, depth)
            self._walk(child, cid, emit, ids, depth + 1)

    def _build(self) -> graphviz.Digraph:
        g = graphviz.Digraph(
            "decisions",
            graph_attr={"rankdir": "LR", "fontsize": "10", "ranksep": "0.25", "nodesep": "0.08"},
            node_attr={"fontname": "monospace", "fontsize": "10", "fontcolor": TEXT_COLOR},
            edge_attr={"fontname": "monospace", "fontsize": "10", "fontcolor": TEXT_COLOR},
        )
        g.node("root", f"{self.title}\n{self.leaves} programs", shape="box", style="rounded")
        # one design space: its levels are named once, in a header row, and each edge shows
        # only the value (a name on every edge made the tree three times as wide)
        (levels,) = self.levels.values() if len(self.levels) == 1 else (None,)
        levels = levels or None  # a single program: no level to name
        leaves: list[str] = []
        columns: dict[int, list[str]] = {}

        def emit(parent: str, cid: str, label: str, child: _Node, depth: int) -> None:
            if child.children:
                g.node(
                    cid, str(child.count()), shape="circle", width="0.25", fixedsize="false", margin="0.02"
                )
            else:
                text, color = self._leaf_label(child)
                g.node(cid, text, shape="box", style="filled,rounded", fillcolor=color)
                leaves.append(cid)
            columns.setdefault(depth, []).append(cid)
            if levels is not None:
                label = label.split(" = ", 1)[1]
            g.edge(parent, cid, label=label)

        self._walk(self.root, "root", emit, itertools.count())
        if levels is not None:
            for depth, name in enumerate(levels):
                g.node(f"h{depth}", f"{name} ↓", shape="plaintext", fontname="sans-serif")
                with g.subgraph() as column:
                    column.attr(rank="same")
                    column.node(f"h{depth}")
                    for cid in columns.get(depth, []):
                        column.node(cid)
            g.node("hroot", "decision:", shape="plaintext", fontname="sans-serif")
            with g.subgraph() as column:
                column.attr(rank="same")
                column.node("hroot")
                column.node("root")
            chain = ["hroot"] + [f"h{d}" for d in range(len(levels))]
            for a, b in zip(chain, chain[1:]):
                g.edge(a, b, style="invis")
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
                        f"<span style='background: {color}; color: {TEXT_COLOR}; padding: 0 4px;'>"
                        f"{html.escape(text)}</span></li>"
                    )
            return "<ul>" + "".join(items) + "</ul>"

        return f'<div class="wb-decision-tree-fallback">{render(self.root)}</div>'

    def legend_html(self) -> str:
        """The scale, the noise note and the shared decisions, as HTML."""
        note = f'<div style="{_NOTE_STYLE}">'
        out = ""
        if self._measured():
            against = (
                "speed-up over the unscheduled function" if self.baseline else "latency against the fastest"
            )
            swatches = " ".join(
                f'<span style="background: {fill}; color: {TEXT_COLOR}; padding: 0 4px;">'
                f"{html.escape(text)}</span>"
                for text, fill in self.legend_entries()
            )
            out += f"{note}{self.leaves} programs; leaf colour = {against}, a fixed scale: {swatches}</div>"
            if self.noise_note():
                out += f"{note}≈ {html.escape(self.noise_note())}</div>"
        out += "".join(
            f"{note}the same in every program"
            f"{' of ' + html.escape(space) if len(self.fixed) > 1 else ''}: "
            f"{html.escape(self._fixed_text(fixed))}</div>"
            for space, fixed in self.fixed.items()
            if fixed
        )
        return out

    def _repr_html_(self) -> str:
        legend = self.legend_html()
        svg = render_svg(self.digraph)
        if svg is None:
            return (
                legend + f'<div style="{_NOTE_STYLE}">Graphviz\'s <code>dot</code> is not '
                "installed: the tree as a list.</div>" + self._fallback_html()
            )
        return f'{legend}<div class="wb-decision-tree">{svg}</div>'

    @staticmethod
    def _fixed_text(fixed: list[tuple[str, str]]) -> str:
        return ", ".join(f"{name} = {value}" for name, value in fixed)

    def text(self) -> str:
        lines = [f"{self.title}: {self.leaves} programs"]
        if self.noise_note():
            lines.append("  " + self.noise_note())
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
