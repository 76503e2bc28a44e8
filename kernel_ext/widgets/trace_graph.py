"""Graphviz view of a trace as a data-flow graph (``DecisionTree`` shows many traces).

``TraceGraph``: each instruction is a node (its line of trace Python), each random variable an
edge from the instruction that made it to those that use it; a sampling instruction lists its
possible values with the chosen one highlighted.

Both graph views render to SVG through Graphviz's ``dot`` when it is installed (``apt-get install
graphviz``) and to plain HTML otherwise; ``.digraph`` is the ``graphviz.Digraph`` either way.
"""

from __future__ import annotations

import html
import re
import shutil
import textwrap
from typing import Any, Optional, Union

import graphviz

import workbench as wb

from workbench.schedule.instruction import py_value

from ..choices import Choice, decision_text, describe_sampling, sampling_choices
from ..highlight import code_html

#: how many candidates a sampling node lists (the chosen one always among them)
SHOWN_CANDIDATES = 5
_CHOSEN_BG = "#ffd54f"
_SAMPLING_BG = "#e3f2fd"
_QUERY_BG = "#f5f5f5"


def dot_available() -> bool:
    """Whether Graphviz's ``dot`` program is on the PATH (SVG rendering needs it)."""
    return shutil.which("dot") is not None


def render_svg(digraph: graphviz.Digraph) -> Optional[str]:
    """The graph as inline SVG markup, or None when ``dot`` is missing or fails."""
    if not dot_available():
        return None
    try:
        svg = digraph.pipe(format="svg", encoding="utf-8")
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError):
        return None
    svg = svg[svg.find("<svg") :]  # drop the XML prolog and doctype: it is embedded in HTML
    # One CSS pixel per point (10 pt labels read as 10 px) at most: a graph wider than the page
    # (the output area, a docs column) is scaled down to its width, never wider, keeping its
    # aspect ratio (the viewBox scales; height follows).
    svg = re.sub(r'(<svg[^>]*?\b(?:width|height)="[\d.]+)pt"', r'\1px"', svg, count=1)
    svg = re.sub(r'(<svg[^>]*?\b(?:width|height)="[\d.]+)pt"', r'\1px"', svg, count=1)
    return svg.replace("<svg ", f'<svg style="{FIT_STYLE}" ', 1) + "\n"


#: how an SVG graph fits the page: never wider than its container, scaled down evenly
FIT_STYLE = "max-width: 100%; height: auto;"


def compact_line(inst: Any, names: dict) -> str:
    """An instruction as short text: ``l7, l8 = split(l2, [v5, v6])`` — arguments left at
    their defaults are dropped, the first argument is positional, the decision is left out."""
    parts = []
    for n, p in enumerate(inst.kind.params):
        value = inst.args[p.name]
        if p.kind == p.VAR_POSITIONAL:
            parts.extend(py_value(v, names) for v in value)
        elif p.default is p.empty or value != p.default:
            text = py_value(value, names)
            parts.append(text if n == 0 else f"{p.name}={text}")
    outs = ", ".join(names[rv] for rv in inst.outputs)
    return f"{outs + ' = ' if outs else ''}{inst.kind.name}({', '.join(parts)})"


def _shown(choices: list[Choice], decision: Any) -> tuple[list[Choice], int]:
    """A window of at most SHOWN_CANDIDATES choices around the chosen one; how many are hidden."""
    if len(choices) <= SHOWN_CANDIDATES:
        return choices, 0
    at = next((i for i, c in enumerate(choices) if c.decision == decision), 0)
    start = min(max(at - SHOWN_CANDIDATES // 2, 0), len(choices) - SHOWN_CANDIDATES)
    return choices[start : start + SHOWN_CANDIDATES], len(choices) - SHOWN_CANDIDATES


class TraceGraph:
    """A trace as a graph. Give a ``Schedule`` (candidates are listed from its history), or a
    ``Trace`` with the ``func`` it applies to (it is replayed; by default the function the
    trace knows, ``trace.base_func``), or a bare ``Trace`` read from JSON (then only the decisions
    are known)."""

    def __init__(
        self, trace_or_schedule: Union["wb.Schedule", "wb.Trace"], func: Optional["wb.PrimFunc"] = None
    ):
        self.schedule: Optional[wb.Schedule] = None
        if isinstance(trace_or_schedule, wb.Schedule):
            self.schedule = trace_or_schedule
        elif func is not None:
            self.schedule = wb.Schedule(func)
            trace_or_schedule.apply_to_schedule(self.schedule)
        elif trace_or_schedule.base_func is not None:
            try:  # the trace's own function: show candidates when it still replays
                sch = wb.Schedule(trace_or_schedule.base_func)
                trace_or_schedule.apply_to_schedule(sch)
                self.schedule = sch
            except (wb.ScheduleError, ValueError):
                pass
        self.trace = self.schedule.trace if self.schedule is not None else trace_or_schedule
        names = self.trace.rv_names()
        self.lines = [compact_line(inst, names) for inst in self.trace]
        self.choices = {
            k: sampling_choices(self.schedule, k) if self.schedule is not None else []
            for k, inst in enumerate(self.trace)
            if inst.kind.is_sampling
        }
        self.digraph = self._build()

    def edges(self) -> list[tuple[int, int, list[str]]]:
        """``(producer step, consumer step, names of the random variables passed)``."""
        names = self.trace.rv_names()
        made_by = {rv: k for k, inst in enumerate(self.trace) for rv in inst.outputs}
        out: dict[tuple[int, int], list[str]] = {}
        for k, inst in enumerate(self.trace):
            for rv in dict.fromkeys(inst.inputs):  # each variable once, in order
                if rv in made_by:
                    out.setdefault((made_by[rv], k), []).append(names[rv])
        return [(a, b, rvs) for (a, b), rvs in out.items()]

    def _sampling_label(self, k: int) -> str:
        inst = self.trace[k]
        line = html.escape(self.lines[k])
        shown, hidden = _shown(self.choices[k], inst.decision)
        cells = (
            "".join(
                f'<TD BGCOLOR="{_CHOSEN_BG}"><B>{html.escape(c.label)}</B></TD>'
                if c.decision == inst.decision
                else f"<TD>{html.escape(c.label)}</TD>"
                for c in shown
            )
            or f'<TD BGCOLOR="{_CHOSEN_BG}"><B>{html.escape(decision_text(inst))}</B></TD>'
        )
        more = f"<TD>… {hidden} more</TD>" if hidden else ""
        pin = " (pinned)" if inst.pinned else ""
        width = max(len(shown), 1) + (1 if hidden else 0)
        about = (
            f'<TR><TD COLSPAN="{width}" BGCOLOR="{_SAMPLING_BG}"><I>'
            f"{html.escape(describe_sampling(self.schedule, k))}</I></TD></TR>"
            if self.schedule is not None
            else ""
        )
        return (
            f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">'
            f'<TR><TD COLSPAN="{width}" BGCOLOR="{_SAMPLING_BG}">{k}: {line}{pin}</TD></TR>'
            f"{about}"
            f"<TR>{cells}{more}</TR></TABLE>>"
        )

    def _build(self) -> graphviz.Digraph:
        g = graphviz.Digraph(
            "trace",
            graph_attr={"rankdir": "TB", "fontsize": "10"},
            node_attr={
                "shape": "box",
                "fontname": "monospace",
                "fontsize": "10",
                "style": "rounded,filled",
                "fillcolor": "white",
            },
            edge_attr={"fontname": "monospace", "fontsize": "9", "color": "#607d8b"},
        )
        for k, inst in enumerate(self.trace):
            if inst.kind.is_sampling:
                g.node(f"i{k}", self._sampling_label(k), shape="plaintext", style="")
            else:
                fill = _QUERY_BG if inst.kind.is_pure else "white"
                # graphviz centres each line of a label ("\\l" ends a left-aligned one)
                text = (
                    "\\l".join(textwrap.wrap(f"{k}: {self.lines[k]}", 56, subsequent_indent="    ")) + "\\l"
                )
                g.node(f"i{k}", text, fillcolor=fill)
        for a, b, rvs in self.edges():
            g.edge(f"i{a}", f"i{b}", label=", ".join(rvs))
        # one instruction per rank, in trace order: the data flow alone puts every get_block /
        # get_loops output side by side (a CBR trace was 5400 px wide); as a column the graph
        # stays about one page wide, and the page's width scales what remains
        for k in range(len(self.trace) - 1):
            g.edge(f"i{k}", f"i{k + 1}", style="invis", weight="10")
        return g

    def _fallback_html(self) -> str:
        """Without ``dot``: the instructions as a table, inputs by step, candidates listed."""
        producers: dict[int, list[str]] = {}
        for a, b, rvs in self.edges():
            producers.setdefault(b, []).append(f"{', '.join(rvs)} ← step {a}")
        rows = []
        for k, inst in enumerate(self.trace):
            cand = ""
            if inst.kind.is_sampling:
                shown, hidden = _shown(self.choices[k], inst.decision)
                cand = (
                    " ".join(
                        f"<b style='background: {_CHOSEN_BG}'>{html.escape(c.label)}</b>"
                        if c.decision == inst.decision
                        else html.escape(c.label)
                        for c in shown
                    )
                    or f"<b>{html.escape(decision_text(inst))}</b>"
                )
                cand += f" … {hidden} more" if hidden else ""
                cand += " (pinned)" if inst.pinned else ""
            rows.append(
                f"<tr><td>{k}</td><td>{code_html(self.lines[k])}</td>"
                f"<td>{html.escape('; '.join(producers.get(k, [])))}</td><td>{cand}</td></tr>"
            )
        return (
            '<table class="wb-trace-graph-fallback"><tr><th>step</th><th>instruction</th>'
            "<th>inputs from</th><th>decision (chosen in bold)</th></tr>" + "".join(rows) + "</table>"
        )

    def _repr_html_(self) -> str:
        svg = render_svg(self.digraph)
        if svg is None:
            return (
                '<div style="color: #555;">Graphviz\'s <code>dot</code> is not installed: '
                "the trace graph as a table.</div>" + self._fallback_html()
            )
        return f'<div class="wb-trace-graph">{svg}</div>'

    def text(self) -> str:
        out = []
        for k, inst in enumerate(self.trace):
            mark = f"   <- decision {decision_text(inst)}" if inst.kind.is_sampling else ""
            out.append(f"{k:3d}: {self.lines[k]}{mark}")
        return "\n".join(out)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())
