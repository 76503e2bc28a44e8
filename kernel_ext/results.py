"""HTML for tuning results: a ``Database``, a ``Record`` and the ``TuneSummary`` of a run."""

from __future__ import annotations

import html
import math
from typing import Any, Callable

from workbench.tune import Database, Record, TuneSummary

from .display import fmt_seconds, trace_html

_TABLE = 'cellpadding="4" style="border-collapse: collapse; font-size: 12px;"'


def _num(x: Any, fmt: str, unit: str = "") -> str:
    return "—" if x is None else format(x, fmt) + unit


def summary_html(summary: "TuneSummary") -> str:
    """One row per task: trials, failures, best latency, GFLOP/s, speedups."""
    rows = "".join(
        f"<tr><td>{html.escape(t.name)}</td><td>{t.trials}</td><td>{t.failed}</td>"
        f"<td>{fmt_seconds(t.best) if math.isfinite(t.best) else '—'}</td>"
        f"<td>{_num(t.gflops, '.3g')}</td><td>{_num(t.speedup, '.3g', '×')}</td>"
        f"<td>{_num(t.vs_numpy, '.3g', '×')}</td></tr>"
        for t in summary.tasks
    )
    return (
        f"<table {_TABLE}><tr><th>task</th><th>trials</th><th>failed</th><th>best</th>"
        f"<th>GFLOP/s</th><th>vs unscheduled</th><th>vs numpy</th></tr>{rows}</table>"
        f'<div style="color: #555;">{summary.measured} trials measured in '
        f"{summary.seconds:.1f} s</div>"
        + "".join(
            f'<div class="wb-warning" style="color: #b35900;">⚠ {html.escape(w)}</div>'
            for w in summary.warnings()
        )
    )


def record_html(rec: "Record") -> str:
    """A record: status and latency, then its trace."""
    name = rec.workload.name if rec.workload else "?"
    what = (
        f"{fmt_seconds(rec.latency)} (median of {len(rec.latencies)})"
        if rec.ok
        else f"{rec.status}: {html.escape(rec.error[:300])}"
    )
    return (
        f'<div style="font-weight: 600;">Record of {html.escape(name)} on '
        f"{html.escape(rec.target)}: {what}</div>{trace_html(rec.trace)}"
    )


def database_html(db: "Database") -> str:
    """Every workload of the database with its record count and best latency."""
    rows = []
    for entry in db.workloads():
        records = db.records_of(entry)
        ok = [r for r in records if r.ok]
        best = min((r.latency for r in ok), default=math.inf)
        rows.append(
            f"<tr><td>{html.escape(entry.name)}</td><td>{html.escape(entry.target)}</td>"
            f"<td>{len(records)}</td><td>{len(records) - len(ok)}</td>"
            f"<td>{fmt_seconds(best) if math.isfinite(best) else '—'}</td></tr>"
        )
    where = html.escape(str(db.path)) if db.path else "in memory"
    return (
        f'<div style="font-weight: 600;">{type(db).__name__} ({where}): {len(db)} records'
        f"</div><table {_TABLE}><tr><th>function</th><th>target</th><th>records</th>"
        f"<th>failed</th><th>best</th></tr>{''.join(rows)}</table>"
    )


def renderers() -> list[tuple[type, Callable[[Any], str]]]:
    return [(Database, database_html), (Record, record_html), (TuneSummary, summary_html)]
