"""The convergence plot fed by tuner events: synthetic batches, then one real (tiny) tune."""

import math

import pytest

from kernel_ext import ConvergencePlot
from workbench.tune import BatchEvent, MeasureResult
from workbench.tune.search import Candidate


def _event(trials, latencies, predicted, best, task="GMM", load=None):
    results = [
        MeasureResult("ok", [x]) if math.isfinite(x) else MeasureResult("run_error", [], "boom")
        for x in latencies
    ]
    cands = [Candidate(sch=None, predicted=p) for p in predicted]
    return BatchEvent(
        task, 0, 1, cands, results, best, None, trials, trials, 8, 1.0, 0.1, 0.9, load=load, cores=2
    )


def test_batches_extend_candidates_best_curve_and_predictions():
    plot = ConvergencePlot("test")
    plot.on_batch(_event(3, [3e-3, 1e-3, math.inf], [None, None, None], 1e-3))
    cand, best, pred = plot.figure.data
    assert list(cand.x) == [1, 2] and list(cand.y) == pytest.approx([3.0, 1.0])  # ms
    assert list(best.x) == [1, 2, 3] and list(best.y) == pytest.approx([3.0, 1.0, 1.0])
    assert list(pred.x) == []  # no prediction yet
    plot.on_batch(_event(5, [2e-3, 0.5e-3], [0.2, 0.9], 0.5e-3))
    cand, best, pred = plot.figure.data
    assert list(cand.x) == [1, 2, 4, 5]
    assert list(best.y)[-1] == pytest.approx(0.5)
    assert list(pred.x) == [0.2, 0.9] and list(pred.y) == pytest.approx([2.0, 0.5])
    assert plot.series["GMM"].failed == 1
    assert "5 trials" in plot.status.value
    assert "1 failed" in plot.text()


def test_each_task_gets_its_own_traces_and_static_table():
    plot = ConvergencePlot()
    plot.on_batch(_event(2, [1e-3, 2e-3], [None, None], 1e-3, task="A"))
    plot.on_batch(_event(1, [4e-3], [None], 4e-3, task="B"))
    assert len(plot.figure.data) == 6
    html_ = plot._repr_html_()
    assert html_.count("<tr>") == 3 and "1 ms" in html_ and "4 ms" in html_
    bundle = plot._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and "text/html" in bundle


def test_a_busy_machine_is_shown():
    """An (injected) load average above the CPUs: the status says so, and the summary warns."""
    from workbench.tune import TuneSummary

    plot = ConvergencePlot("load")
    plot.on_batch(_event(1, [1e-3], [None], 1e-3, load=1.5))  # 1.5 on 2 CPUs: fine
    assert "busy" not in plot.status.value
    plot.on_batch(_event(2, [2e-3], [None], 1e-3, load=3.7))
    assert "machine busy" in plot.status.value and "3.7" in plot.status.value
    assert "machine busy: load up to 3.7 during 1 batch(es)" in plot.text()
    plot.on_end(TuneSummary(measured=2, load=3.7, cores=2, busy_records=1))
    assert "the machine was busy" in plot.status.value


def test_a_real_tune_feeds_the_plot(gmm, ip):
    """The tuner's own events drive the figure; the database is shown as a table."""
    from kernel_ext.widgets.convergence import tune_with_plot

    plot = ConvergencePlot("real")
    db = tune_with_plot(gmm, trials=4, plot=plot, num_trials_per_iter=2, workers=1, baseline=False)
    s = plot.series[gmm.name]
    assert s.trials == [1, 2, 3, 4]
    assert len(db.records(gmm, "llvm")) == 4
    assert plot.summary is not None and plot.summary.tasks[0].trials == 4
    assert "done" in plot.status.value
    finite = [x for x in s.best if math.isfinite(x)]
    assert finite and finite == sorted(finite, reverse=True)  # the best only improves
    data, _ = ip.display_formatter.format(db)
    assert "batch_matmul_nkkm" in data["text/html"] and "<td>4</td>" in data["text/html"]
