"""``tune`` end to end: every workload, events and summary, resuming, reloading."""

import io
import math
import subprocess
import sys

import pytest

import workbench as wb
from workbench.testing import check_numeric
from workbench.tune import BatchEvent, Database, EvolutionarySearch, ProgressBar, TuneSummary, TuneTask, tune

SMALL = {name: wb.workloads.small(name) for name in wb.workloads.names()}


class Recorder:
    def __init__(self):
        self.started, self.events, self.summary = None, [], None

    def on_start(self, tasks):
        self.started = [t.name for t in tasks]

    def on_batch(self, event):
        self.events.append(event)

    def on_end(self, summary):
        self.summary = summary


def test_every_workload_tunes_and_its_best_matches_numpy(db_path):
    tasks = [TuneTask.workload(name, **shape) for name, shape in SMALL.items()]
    rec = Recorder()
    db = tune(
        tasks,
        trials=2 * len(tasks),
        database=db_path,
        num_trials_per_iter=2,
        task_scheduler="round_robin",
        callbacks=[rec],
        baseline=False,
        strategy=EvolutionarySearch(population_size=6, num_iters=1),
    )
    assert rec.started == list(SMALL)
    assert sum(len(db.records(t.func)) for t in tasks) == 2 * len(tasks)  # trials (len(db): + re-measured)
    for task in tasks:
        best = db.best(task.func, "llvm")
        assert best is not None and best.ok, (task.name, [r.error for r in db.records(task.func)])
        check_numeric(best.schedule(), task.name, target="llvm", **SMALL[task.name])
    assert [r.name for r in rec.summary.tasks] == list(SMALL)
    assert all(r.trials == 2 for r in rec.summary.tasks)


def test_events_progress_and_summary(db_path):
    task = TuneTask.workload("GMM", **SMALL["GMM"])
    rec, seen = Recorder(), []
    stream = io.StringIO()
    db = tune(
        task,
        trials=8,
        database=db_path,
        num_trials_per_iter=4,
        strategy=EvolutionarySearch(population_size=12, num_iters=2),
        callbacks=[rec, seen.append, ProgressBar(stream, lines=True)],
    )
    assert len(rec.events) == 2 and len(seen) == 2  # a plain function: batch events
    e = rec.events[-1]
    assert isinstance(e, BatchEvent) and e.task == "GMM" and e.trials == 8 and e.budget == 8
    assert len(e.candidates) == len(e.results) == len(e.latencies) == len(e.predicted) == 4
    assert all(p is not None for p in e.predicted)  # predicted beside measured
    assert e.best == min(r.latency for r in db.records(task.func))
    assert e.best_trace is not None and e.flops == wb.workloads.flops("GMM", **SMALL["GMM"])
    assert rec.events[0].best >= e.best
    summary = rec.summary
    assert isinstance(summary, TuneSummary) and summary.measured == 8
    row = summary.tasks[0]
    # the summary's best is the pick, re-measured in alternation with the other top candidates
    assert row.best == db.best(task.func, "llvm").latency and row.final["candidates"] >= 2
    assert row.gflops == pytest.approx(e.flops / row.best / 1e9)
    assert row.baseline > 0 and row.numpy > 0 and row.speedup > 0 and row.vs_numpy > 0
    out = stream.getvalue()
    assert "8/8 GMM: best" in out and "x unsched" in out and "trials measured" in out
    assert db.records(task.func)[0].predicted is not None  # predictions are stored too


def test_resume_counts_stored_trials_and_never_remeasures(db_path):
    task = TuneTask.workload("GMM", **SMALL["GMM"])
    kw = dict(
        database=db_path,
        num_trials_per_iter=4,
        baseline=False,
        strategy=EvolutionarySearch(population_size=8, num_iters=1),
    )
    tune(task, trials=8, **kw)
    first = [(r.trace_hash, r.latencies) for r in Database.open(db_path).records(task.func)]
    tune(task, trials=12, **kw)
    db = Database.open(db_path)
    records = db.records(task.func)
    assert len(records) == 12
    assert [(r.trace_hash, r.latencies) for r in records[:8]] == first
    assert len({r.trace_hash for r in records}) == 12
    stored = len(Database.open(db_path))  # trials and their re-measurements
    tune(task, trials=12, **kw)  # budget already spent: nothing to do (not even re-measuring)
    assert len(Database.open(db_path)) == stored


def test_best_reloads_in_a_new_process(tmp_path):
    path = str(tmp_path / "gmm.jsonl")
    task = TuneTask.workload("GMM", **SMALL["GMM"])
    db = tune(task, trials=4, database=path, num_trials_per_iter=4, baseline=False, strategy="replay_trace")
    best = db.best(task.func, "llvm")
    code = (
        "import workbench as wb, workbench.tune as t\n"
        f"f = wb.workloads.get('GMM', **{SMALL['GMM']!r})\n"
        f"r = t.Database.open({path!r}).best(f, 'llvm')\n"
        "print(r.trace_hash, repr(r.latency), wb.structural_hash(r.schedule().func))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [best.trace_hash, repr(best.latency), wb.structural_hash(best.schedule().func)]


def test_a_plain_function_is_checked_against_itself(db_path):
    A = wb.placeholder((64,), name="A")
    B = wb.compute((64,), lambda i: A[i] * 2.0 + 1.0, name="B")
    func = wb.create_func([A, B], name="axpb")

    def space(sch):
        (i,) = sch.get_loops(sch.get_block("B"))
        _, inner = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
        sch.vectorize(inner)

    db = tune(
        func,
        trials=3,
        database=db_path,
        num_trials_per_iter=3,
        space=space,
        strategy="replay_trace",
        cost_model="random",
    )
    assert [r.status for r in db.records(func)] == ["ok"] * 3
    assert math.isfinite(db.best(func, "llvm").latency)


def test_a_target_this_host_cannot_run_is_refused_up_front(db_path):
    with pytest.raises(
        wb.BuildError,
        match=r"tune: cannot measure on this host: code for "
        r"'llvm -mtriple=aarch64-linux-gnu'",
    ):
        tune("GMM", target="llvm -mtriple=aarch64-linux-gnu", trials=1, database=db_path)


def test_an_emulated_tune_reports_correct_candidates_not_timings():
    """cuda-emulate checks correctness: its summary shows no ms, GFLOP/s or ratios."""
    from workbench.tune.report import TaskSummary

    rows = [TaskSummary("GMM", 8, 1, 0.16, 2 * 128**3)]
    timed = str(TuneSummary(tasks=list(rows), seconds=1.0, measured=8))
    emulated = str(TuneSummary(tasks=list(rows), seconds=1.0, measured=8, emulated=True))
    assert "best ms" in timed and "GFLOP/s" in timed
    assert "best ms" not in emulated and "GFLOP/s" not in emulated
    assert "correctness only" in emulated and emulated.splitlines()[2].split()[-1] == "7"


# pinned decisions: kept in every record, or refused with the reason ------------------------


def _small(name):
    return wb.workloads.get(name, **SMALL[name])


def _step(trace, kind):
    return next(k for k, inst in enumerate(trace) if inst.kind.name == kind)


def _tune_small(func, space, database=":memory:", trials=4):
    return tune(
        func,
        trials=trials,
        database=database,
        space=space,
        num_trials_per_iter=4,
        strategy=EvolutionarySearch(population_size=8, num_iters=1),
        cost_model="random",
        baseline=False,
    )


def _assert_pins_kept(records, pins):
    assert records
    for rec in records:
        for step, value in pins.items():
            inst = rec.trace[step]
            assert inst.pinned and inst.decision == value, (step, inst.decision, value)


def test_a_pinned_compute_location_is_in_every_record_and_a_space_that_cannot_keep_it_is_dropped():
    """The padding's compute location pinned to the innermost loop it may take: free tilings
    that make that loop a unit loop (or remove it) used to move the pin to a loop further
    out, silently, with the record still flagged pinned."""
    from workbench.schedule.primitives.compute_location import compute_location_candidates

    func = _small("C2D")
    design = wb.generate_design_space(func, target="llvm", seed=0)[0]
    step = _step(design.trace, "sample_compute_location")
    sch = wb.Schedule(func)
    rvs = wb.Trace(design.trace.insts[:step]).apply_to_schedule(sch)
    locations, _ = compute_location_candidates(sch.func, sch.get(rvs[design.trace[step].args["block"]]))
    pinned = design.trace.with_decision(step, max(locations), pinned=True)
    nowhere = design.trace.with_decision(step, max(locations) + 40, pinned=True)
    with pytest.warns(UserWarning, match=r"(?s)1 of 2 design spaces dropped.*design space 1: step \d+, "):
        db = _tune_small(func, [pinned, nowhere])
    records = db.records(func, "llvm")
    assert len(records) == 4 and all(r.ok for r in records)
    _assert_pins_kept(records, {step: max(locations)})
    free = {str([i.decision for i in r.trace if i.kind.is_sampling and not i.pinned]) for r in records}
    assert len(free) == 4  # the free decisions do vary


def test_pinned_tiles_and_categorical_are_in_every_record_despite_unpinned_records_stored():
    """The database's best traces of an earlier search without the pins seed nothing."""
    func = _small("GMM")
    design = wb.generate_design_space(func, target="llvm", seed=0)[0]
    tiles = [k for k, inst in enumerate(design.trace) if inst.kind.name == "sample_perfect_tile"]
    cat = _step(design.trace, "sample_categorical")
    pins = {tiles[1]: [2, 2, 2, 2], tiles[3]: [8, 2], cat: 2}
    pinned = design.trace.copy()
    for step, value in pins.items():
        pinned.pin(step, value)
    db = Database.open(":memory:")
    stored = [wb.Schedule(func, seed=s) for s in range(3)]
    for s in stored:  # unpinned points of the same space, recorded as very fast
        design.trace.apply_to_schedule(s, decision_provider=wb.Trace.resample)
    db.add([wb.tune.Record.of(func, "llvm", s.trace, [1e-9]) for s in stored])
    _tune_small(func, pinned, database=db, trials=3 + 4)
    new = [r for r in db.records(func, "llvm") if r.latency > 1e-9]
    assert len(new) == 4 and all(r.ok for r in new)
    _assert_pins_kept(new, pins)


@pytest.mark.parametrize(
    "kind, value, why",
    [
        ("sample_perfect_tile", [3, 5], r"multiplies to 15, not the extent"),
        ("sample_categorical", 7, r"not an index into the 4 candidates"),
    ],
)
def test_a_pin_that_cannot_be_kept_is_refused_with_the_reason(kind, value, why):
    func = _small("GMM")
    design = wb.generate_design_space(func, target="llvm", seed=0)[0]
    step = max(k for k, inst in enumerate(design.trace) if inst.kind.name == kind)
    db = Database.open(":memory:")
    refused = rf"(?s)pinned decisions cannot be kept.*step {step}, {kind}\(.*pinned to "
    with pytest.raises(ValueError, match=refused):
        _tune_small(func, design.trace.with_decision(step, value, pinned=True), database=db)
    with pytest.raises(ValueError, match=why):
        _tune_small(func, design.trace.with_decision(step, value, pinned=True), database=db)
    assert len(db) == 0
