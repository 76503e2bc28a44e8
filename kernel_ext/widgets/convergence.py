"""The live convergence plot: what the search measured, batch by batch.

A :class:`ConvergencePlot` is a ``wb.tune`` callback (``on_start`` / ``on_batch`` /
``on_end`` / ``on_interrupt``, fed :class:`workbench.tune.BatchEvent`). It draws, per task, every measured
candidate and the best latency so far against the trial number, and the cost model's
predicted score against the measured latency (a good model puts the fast candidates on the
right), and says when the machine was busy with other work while a batch was measured (its
timings are then suspect). Points are placed by the event's trial counter, so a tuning session
resumed from a database continues the curve where it stopped (``add_records`` draws the stored
trials first), and a re-run cell simply makes a new plot: no state is shared between plots.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

import ipywidgets as widgets
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.target import Target
from workbench.tune import Database, TuneTask, tune

from ..display import fmt_seconds
from ..results import summary_html
from .base import WorkbenchWidget

_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


@dataclass
class TaskSeries:
    """What the plot holds for one task (latencies in seconds; inf for a failed trial)."""

    name: str
    trials: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    predicted: list[Optional[float]] = field(default_factory=list)
    best: list[float] = field(default_factory=list)  # best so far, one per trial
    first_trace: int = 0  # index of its first plotly trace

    @property
    def failed(self) -> int:
        return sum(not math.isfinite(x) for x in self.latencies)

    def add(self, trial: int, latency: float, predicted: Optional[float]) -> None:
        self.trials.append(trial)
        self.latencies.append(latency)
        self.predicted.append(predicted)
        self.best.append(min(latency, self.best[-1]) if self.best else latency)


class ConvergencePlot(WorkbenchWidget):
    """Best latency vs trials, every candidate, predicted vs measured — updated live.

    >>> plot = ConvergencePlot()
    >>> print(plot.text())              # what a terminal shows
    tuning: no trial yet
    >>> display(plot)                   # in a notebook: the live plot  # doctest: +SKIP
    >>> db = wb.tune(func, trials=32, callbacks=[plot])   # doctest: +SKIP
    """

    def __init__(self, title: str = "tuning"):
        self.title = title
        self.series: dict[str, TaskSeries] = {}
        self.summary: Any = None
        self.busy_batches = 0
        self.max_load: Optional[float] = None
        fig = make_subplots(
            rows=1,
            cols=2,
            column_widths=[0.6, 0.4],
            horizontal_spacing=0.1,
            subplot_titles=("latency of each measured candidate", "cost model: predicted vs measured"),
        )
        fig.update_layout(
            height=380,
            margin=dict(l=60, r=20, t=60, b=50),
            title=title,
            legend=dict(orientation="h", y=-0.2),
            template="plotly_white",
        )
        fig.update_xaxes(title_text="trial", row=1, col=1)
        fig.update_yaxes(title_text="latency (ms, log)", type="log", row=1, col=1)
        fig.update_xaxes(title_text="predicted score (higher = predicted faster)", row=1, col=2)
        fig.update_yaxes(title_text="measured latency (ms, log)", type="log", row=1, col=2)
        self.figure = go.FigureWidget(fig)
        self.status = widgets.HTML(value=self._status_text("waiting for the first batch"))
        self.widget = widgets.VBox([self.status, self.figure])
        self.widget.add_class("wb-convergence")

    # the tuner's callback interface ----------------------------------------------------------
    def on_start(self, tasks: Sequence[Any]) -> None:
        names = ", ".join(t.name for t in tasks)
        self.status.value = self._status_text(f"tuning {names} …")

    def on_batch(self, event: Any) -> None:
        """One measured batch (``workbench.tune.BatchEvent``)."""
        first = event.trials - len(event.results) + 1
        self.add(event.task, range(first, event.trials + 1), event.latencies, event.predicted)
        text = (
            f"{event.task}: {event.trials} trials ({event.total_trials}/{event.budget} in "
            f"all), best {fmt_seconds(event.best)}, {event.elapsed:.0f} s"
        )
        if event.busy:
            self.busy_batches += 1
            self.max_load = max(event.load, self.max_load or 0.0)
        self.status.value = self._status_text(text) + self._busy_html()

    def on_end(self, summary: Any) -> None:
        self.summary = summary
        self.status.value = self._status_text("done") + _summary_html(summary)  # warns itself

    def on_interrupt(self, stop: Any) -> None:
        """Ctrl-C / "interrupt kernel" (``workbench.tune.TuneInterrupted``)."""
        self.status.value = (
            self._status_text(
                f"interrupted after {stop.trials} trials; {stop.records} records in {stop.path or 'memory'}"
            )
            + self._busy_html()
        )

    # feeding it -----------------------------------------------------------------------------
    def add_records(self, records: Sequence[Any], task: Optional[str] = None) -> None:
        """Draw stored database records (in measurement order) as trials 1, 2, …"""
        if not records:
            return
        name = task or (records[0].workload.name if records[0].workload else "task")
        start = len(self._series(name).trials) + 1
        self.add(
            name,
            range(start, start + len(records)),
            [r.latency for r in records],
            [r.predicted for r in records],
        )

    def add(
        self,
        task: str,
        trials: Sequence[int],
        latencies: Sequence[float],
        predicted: Sequence[Optional[float]],
    ) -> None:
        """Append measured trials of ``task`` and redraw its traces."""
        s = self._series(task)
        for t, lat, p in zip(trials, latencies, predicted):
            s.add(t, float(lat), p)
        ok = [(t, x * 1e3) for t, x in zip(s.trials, s.latencies) if math.isfinite(x)]
        best = [(t, x * 1e3) for t, x in zip(s.trials, s.best) if math.isfinite(x)]
        pred = [(p, x * 1e3) for p, x in zip(s.predicted, s.latencies) if p is not None and math.isfinite(x)]
        data = self.figure.data
        with self.figure.batch_update():
            for offset, points in enumerate((ok, best, pred)):
                trace = data[s.first_trace + offset]
                trace.x = [a for a, _b in points]
                trace.y = [b for _a, b in points]

    def _series(self, task: str) -> TaskSeries:
        if task not in self.series:
            color = _COLORS[len(self.series) % len(_COLORS)]
            self.series[task] = TaskSeries(task, first_trace=len(self.figure.data))
            self.figure.add_scatter(
                x=[],
                y=[],
                mode="markers",
                name=f"{task}: candidates",
                marker=dict(color=color, size=6, opacity=0.45),
                row=1,
                col=1,
            )
            self.figure.add_scatter(
                x=[],
                y=[],
                mode="lines",
                name=f"{task}: best so far",
                line=dict(color=color, width=2.5, shape="hv"),
                row=1,
                col=1,
            )
            self.figure.add_scatter(
                x=[],
                y=[],
                mode="markers",
                name=f"{task}: predicted",
                marker=dict(color=color, size=6, symbol="diamond"),
                row=1,
                col=2,
                showlegend=False,
            )
        return self.series[task]

    def _busy_html(self) -> str:
        if not self.busy_batches:
            return ""
        return (
            '<div class="wb-busy" style="color: #b35900;">⚠ machine busy: 1-minute load '
            f"average up to {self.max_load:.1f} during {self.busy_batches} batch(es); "
            "their timings include waiting for other work</div>"
        )

    # static renderings ------------------------------------------------------------------------
    def _status_text(self, text: str) -> str:
        return f'<div style="color: #333;"><b>{html.escape(self.title)}</b>: {html.escape(text)}</div>'

    def _repr_html_(self) -> str:
        """A table per task (for front ends without widgets); the figure itself needs them."""
        rows = "".join(
            f"<tr><td>{html.escape(s.name)}</td><td>{len(s.trials)}</td><td>{s.failed}</td>"
            f"<td>{fmt_seconds(s.best[-1]) if s.best else '—'}</td>"
            f"<td>{' → '.join(fmt_seconds(x) for x in _milestones(s.best))}</td></tr>"
            for s in self.series.values()
        )
        body = (
            f"<table><tr><th>task</th><th>trials</th><th>failed</th><th>best</th>"
            f"<th>best so far, over the trials</th></tr>{rows}</table>"
        )
        return f'<div class="wb-convergence">{self.status.value}{body}</div>'

    def text(self) -> str:
        lines = [
            f"{s.name}: {len(s.trials)} trials, {s.failed} failed, best "
            f"{fmt_seconds(s.best[-1]) if s.best else '-'}"
            for s in self.series.values()
        ]
        if self.busy_batches:
            lines.append(f"machine busy: load up to {self.max_load:.1f} during {self.busy_batches} batch(es)")
        return "\n".join(lines) or f"{self.title}: no trial yet"


def _milestones(best: list[float]) -> list[float]:
    """The distinct finite values of a best-so-far curve (where it improved)."""
    out: list[float] = []
    for x in best:
        if math.isfinite(x) and (not out or x < out[-1]):
            out.append(x)
    return out


def _summary_html(summary: Any) -> str:
    return summary_html(summary)


def tune_with_plot(
    func: Any,
    target: Union[str, Target] = "llvm",
    trials: int = 16,
    database: Any = None,
    seed: int = 0,
    plot: Optional[ConvergencePlot] = None,
    **tune_args: Any,
) -> Any:
    """``wb.tune`` with a live :class:`ConvergencePlot` displayed above; returns the database.

    ``func``: a PrimFunc or a workload name; ``database``: a path or a Database (None: a
    temporary in-memory one); other arguments go to ``wb.tune`` (``space=panel.space()`` …).
    """
    from IPython.display import display

    target = Target.of(target)  # parsed once: the database and tune() take the object
    task = TuneTask.workload(func) if isinstance(func, str) else func
    the_func = task.func if isinstance(task, TuneTask) else task
    db = Database.open(database if database is not None else ":memory:")
    plot = plot or ConvergencePlot(f"tuning {the_func.name} on {target}")
    plot.add_records(
        db.records(the_func, target), task=task.name if isinstance(task, TuneTask) else the_func.name
    )
    display(plot)
    tune_args.setdefault("verbose", False)
    return tune(task, target=target, trials=trials, database=db, seed=seed, callbacks=[plot], **tune_args)
