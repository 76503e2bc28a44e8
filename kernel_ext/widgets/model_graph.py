"""A whole model's graph: its fused groups (each one kernel), their operators, and each group's
share of the model's time.

``ModelGraph(model)`` or ``ModelGraph(graph)``; with ``times`` (seconds per group, in group
order: ``model.time_groups(x)``) each group is shaded by its share, red the largest, and its
label gives the time and the percentage. Graph inputs, constants and views (reshapes, which
the executor does as numpy views) are left out: an edge joins the group that writes a value to
each group that reads it. Renders to SVG through Graphviz's ``dot`` when installed, otherwise
to an HTML table with one bar per group; ``text()`` is the table as text.
"""

from __future__ import annotations

import html
from typing import Any, Optional, Sequence

import graphviz

from .trace_graph import render_svg

_TUNED_EDGE = "#2e7d32"  # a group whose task came from a database record
_DEFAULT_EDGE = "#9e9e9e"


def _heat(share: float) -> str:
    """White (no time) to red (the largest share), as a fill colour."""
    share = min(max(share, 0.0), 1.0)
    g = int(255 - 175 * share)
    return f"#ff{g:02x}{g:02x}"


class ModelGraph:
    """The fused groups of a ``workbench.graph.Graph`` (or of a ``Model``'s graph) as a graph."""

    def __init__(self, model_or_graph: Any, times: Optional[Sequence[float]] = None):
        self.model = model_or_graph if hasattr(model_or_graph, "steps") else None
        self.graph = self.model.graph if self.model is not None else model_or_graph
        self.groups = self.graph.fuse()
        self.graph.task_list()  # lowers each group: its task index
        if times is not None and len(times) != len(self.groups):
            raise ValueError(f"times: one per group ({len(self.groups)}), got {len(times)}")
        self.times = None if times is None else [float(t) for t in times]
        self.tuned = list(self.model.tuned) if self.model is not None else None
        self.digraph = self._build()

    # structure ---------------------------------------------------------------------------------
    def edges(self) -> list[tuple[int, int]]:
        """(writer group, reader group) pairs, each once; views are looked through."""
        writer: dict[str, int] = {}
        for k, g in enumerate(self.groups):
            writer[g.output] = k
        source = {n.name: n.inputs[0] for n in self.graph.nodes if n.pattern == "view"}
        out = []
        for k, g in enumerate(self.groups):
            for v in g.inputs:
                while v in source:
                    v = source[v]
                if v in writer and (writer[v], k) not in out:
                    out.append((writer[v], k))
        return out

    def shares(self) -> Optional[list[float]]:
        """Each group's fraction of the summed group times (None without times)."""
        if self.times is None:
            return None
        total = sum(self.times) or 1.0
        return [t / total for t in self.times]

    def _summary(self, k: int) -> tuple[str, str, str]:
        g = self.groups[k]
        ops = " + ".join(n.op for n in g.nodes)
        shape, dtype = self.graph.values[g.output]
        where = g.nodes[0].where.split(" (")[0] if g.nodes[0].where else ""
        return ops, f"{dtype}{list(shape)}", where

    def _build(self) -> graphviz.Digraph:
        dot = graphviz.Digraph("model", graph_attr={"rankdir": "TB", "nodesep": "0.15", "ranksep": "0.25"})
        dot.attr("node", shape="box", style="rounded,filled", fontname="Helvetica", fontsize="10")
        shares = self.shares()
        top = max(shares) if shares else 1.0
        for k in range(len(self.groups)):
            ops, out, where = self._summary(k)
            lines = [f"#{k} {ops}", out + (f"  ({where})" if where else "")]
            lines.append(f"task {self.groups[k].task}")
            fill = "#eef3fb"
            if shares is not None:
                lines.append(f"{self.times[k] * 1e3:.4f} ms · {100 * shares[k]:.1f}%")
                fill = _heat(shares[k] / top if top else 0.0)
            color = "#5c6bc0"
            if self.tuned is not None:
                color = _TUNED_EDGE if self.tuned[self.groups[k].task] else _DEFAULT_EDGE
            dot.node(f"g{k}", "\n".join(lines), fillcolor=fill, color=color, penwidth="2")
        for a, b in self.edges():
            dot.edge(f"g{a}", f"g{b}", arrowsize="0.6")
        return dot

    # renderings --------------------------------------------------------------------------------
    def _legend(self) -> str:
        parts = [f"{len(self.groups)} fused groups, {len(self.graph.task_list())} distinct tasks"]
        if self.times is not None:
            parts.append(f"{sum(self.times) * 1e3:.3f} ms in all (sum of the groups)")
        if self.tuned is not None:
            parts.append(f"{sum(self.tuned)} of {len(self.tuned)} tasks tuned (green border)")
        return "; ".join(parts)

    def _repr_html_(self) -> str:
        svg = render_svg(self.digraph)
        legend = f'<div style="font-size: 12px; color: #333;">{html.escape(self._legend())}</div>'
        if svg is not None:
            return legend + svg
        return (
            '<div style="color: #555;">Graphviz\'s <code>dot</code> is not installed: the groups as '
            "a table.</div>" + legend + self._table_html()
        )

    def _table_html(self) -> str:
        shares = self.shares()
        rows = []
        for k in range(len(self.groups)):
            ops, out, where = self._summary(k)
            cells = [str(k), html.escape(ops), html.escape(out), html.escape(where)]
            if shares is not None:
                width = int(200 * shares[k] / (max(shares) or 1.0))
                bar = (
                    f'<div style="background: {_heat(shares[k] / (max(shares) or 1.0))}; '
                    f'border: 1px solid #c62828; width: {width}px; height: 10px;"></div>'
                )
                cells += [f"{self.times[k] * 1e3:.4f} ms", f"{100 * shares[k]:.1f}%", bar]
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        head = ["#", "operators", "output", "from"] + (["time", "share", ""] if shares else [])
        return (
            '<table style="font-size: 12px;"><tr>'
            + "".join(f"<th>{h}</th>" for h in head)
            + "</tr>"
            + "".join(rows)
            + "</table>"
        )

    def text(self) -> str:
        shares = self.shares()
        out = [self._legend()]
        for k in range(len(self.groups)):
            ops, shape, where = self._summary(k)
            line = f"{k:3d}  {ops:<34} {shape:<24} {where}"
            if shares is not None:
                line = f"{line:<86} {self.times[k] * 1e3:9.4f} ms {100 * shares[k]:5.1f}%"
            out.append(line.rstrip())
        return "\n".join(out)

    def __repr__(self) -> str:
        return self.text()
