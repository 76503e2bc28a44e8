"""Faulty candidates fail alone, with their reason; a killed tuner loses no committed batch."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import workbench as wb
from workbench.space import Postproc, ScheduleFn
from workbench.tune import Database, MeasureConfig, TuneTask, tune

import tunehelpers  # noqa: F401  (registers the inject_fault primitive)

FAULT_NAMES = {0: "ok", 1: "run_error", 2: "timeout", 3: "wrong_result"}


def fault_space(sch):
    """3 tilings of j (extent 4) x 4 fault kinds: 12 points."""
    _, _, j, _ = sch.get_loops(sch.get_block("Z"))
    sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=4))
    sch.sample_categorical(candidates=[0, 1, 2, 3], probs=[0.25, 0.25, 0.25, 0.25])


class InjectFault(Postproc):
    """A user postprocessor that breaks the candidate as its sampled fault kind says."""

    def apply(self, sch):
        inst = next(i for i in sch.trace.insts if i.kind.name == "sample_categorical")
        sch.inject_fault(inst.args["candidates"][inst.decision])
        return True


def fault_of(record):
    inst = next(i for i in record.trace.insts if i.kind.name == "sample_categorical")
    return inst.args["candidates"][inst.decision]


def test_segfault_hang_and_wrong_result_are_recorded_while_tuning_goes_on(db_path):
    task = TuneTask.workload("GMM", b=1, n=4, m=4, k=4)
    space = ScheduleFn(fault_space, postprocs=["disallow_dynamic_loop", InjectFault()])
    db = tune(
        task,
        trials=12,
        database=db_path,
        space=space,
        num_trials_per_iter=6,
        strategy="replay_trace",
        cost_model="random",
        measure=MeasureConfig(run_timeout=1.5),
        baseline=False,
    )
    records = db.records(task.func)
    assert len(records) == 12  # the whole space was measured
    for rec in records:
        assert rec.status == FAULT_NAMES[fault_of(rec)], (rec.status, rec.error)
    reasons = {rec.status: rec.error for rec in records}
    assert "SIGSEGV" in reasons["run_error"]
    assert "longer than 1.5 s" in reasons["timeout"]
    assert "elements differ" in reasons["wrong_result"]
    assert fault_of(db.best(task.func, "llvm")) == 0


CHILD = """
import workbench as wb
from workbench.tune import TuneTask, tune
tune(TuneTask.workload("GMM", **wb.workloads.small("GMM")), trials=400, database={path!r},
     num_trials_per_iter=4, strategy="replay_trace", cost_model="random", verbose=False)
"""


def count(path):
    try:
        with sqlite3.connect(path, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_sigkill_mid_run_then_resume_loses_nothing(db_path):
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(path=db_path)])
    try:
        deadline = time.monotonic() + 120
        while count(db_path) < 8 and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.2)
        assert count(db_path) >= 8, "the tuning process committed nothing"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    task = TuneTask.workload("GMM", **wb.workloads.small("GMM"))
    before = Database.open(db_path).records(task.func)
    assert len(before) % 4 == 0  # whole batches only
    n = len(before)
    db = tune(
        task,
        trials=n + 4,
        database=db_path,
        num_trials_per_iter=4,
        strategy="replay_trace",
        cost_model="random",
        baseline=False,
    )
    after = db.records(task.func)
    assert len(after) == n + 4
    assert [(r.trace_hash, r.latencies) for r in after[:n]] == [(r.trace_hash, r.latencies) for r in before]
    assert len({r.trace_hash for r in after}) == n + 4
