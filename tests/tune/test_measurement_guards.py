"""Measuring on a shared machine: noisy candidates are re-measured once and flagged if still
noisy; a load average above our CPUs marks records, summary, progress, CLI and widget as busy.
Outliers and loads are injected, so nothing here depends on how busy the test machine is."""

import io
import os

import pytest

import workbench as wb
import workbench.tune.runner as runner_mod
from workbench.codegen.llvm.runtime import SPIN_COUNT, bound_spinning
from workbench.tune import (
    Database,
    LocalRunner,
    MeasureConfig,
    MeasureInput,
    MeasureResult,
    ProgressBar,
    Record,
    Task,
    TuneTask,
    tune,
)
from workbench.tune.runner import machine_busy, remeasure_if_noisy

from tunehelpers import gmm_space, small

SHAPE = wb.workloads.small("GMM")


def ms(*values):
    return [v * 1e-3 for v in values]


# the policy --------------------------------------------------------------------------------------
def test_steady_result_is_kept_without_measuring_again():
    first = MeasureResult("ok", ms(1.0, 1.1, 1.2))
    assert remeasure_if_noisy(first, pytest.fail, max_spread=2.0) is first
    assert not first.noisy


def test_outlier_is_measured_again_and_the_steady_retry_kept():
    first = MeasureResult("ok", ms(1.0, 1.0, 8.0), build_seconds=0.5, run_seconds=0.1)
    retry = MeasureResult("ok", ms(1.1, 1.0, 1.2), run_seconds=0.2)
    result = remeasure_if_noisy(first, lambda: retry, max_spread=2.0)
    assert result is retry and not result.noisy
    assert result.build_seconds == 0.5 and result.run_seconds == pytest.approx(0.3)


def test_still_noisy_after_the_retry_is_flagged():
    result = remeasure_if_noisy(
        MeasureResult("ok", ms(1.0, 5.0)), lambda: MeasureResult("ok", ms(1.0, 3.0)), max_spread=2.0
    )
    assert result.noisy and result.latencies == ms(1.0, 3.0)
    failed_retry = remeasure_if_noisy(
        MeasureResult("ok", ms(1.0, 5.0)), lambda: MeasureResult("timeout"), max_spread=2.0
    )
    assert failed_retry.noisy and failed_retry.latencies == ms(1.0, 5.0)


def test_failures_are_never_remeasured():
    failed = MeasureResult("run_error", error="boom")
    assert remeasure_if_noisy(failed, pytest.fail, max_spread=2.0) is failed


# the runner, with real workers and injected outliers -------------------------------------------
class ScriptedRunner(LocalRunner):
    """Runs candidates for real on its workers, then replaces each measurement's latencies by
    the next scripted list: the worker's re-run protocol is exercised, the numbers are fixed."""

    def __init__(self, script, **kw):
        super().__init__(
            workers=1,
            measure=MeasureConfig(build_timeout=20, run_timeout=10, repeat=3, min_repeat_ms=1, **kw),
        )
        self.script, self.checks = list(script), []

    def _run_once(self, worker, job, build_s, timing, run_timeout, check):
        result = super()._run_once(worker, job, build_s, timing, run_timeout, check)
        assert result.status == "ok", result.error
        self.checks.append(check)
        result.latencies = self.script.pop(0)
        return result


def scheduled(seed):
    sch = wb.Schedule(small("GMM"), seed=seed)
    gmm_space(sch)
    return sch.func


def test_runner_measures_an_outlier_again_on_the_same_kernel():
    task = Task(small("GMM"), "llvm", reference=wb.workloads.reference("GMM", **SHAPE))
    with ScriptedRunner([ms(1, 1, 9), ms(1, 1.1, 1), ms(2, 2, 2), ms(1, 5, 1), ms(1, 4, 1)]) as r:
        results = r.measure([MeasureInput(task, scheduled(s)) for s in range(3)])
        assert r.checks == [True, False, True, True, False]  # the retry skips the check
        assert not r.script
    assert [x.latencies for x in results] == [ms(1, 1.1, 1), ms(2, 2, 2), ms(1, 4, 1)]
    assert [x.noisy for x in results] == [False, False, True]


def test_max_spread_below_one_flags_every_real_measurement():
    """max / min >= 1 always: with a limit of 0.5 each candidate is re-run by its worker (a
    second real measurement of the same kernel) and flagged."""
    task = Task(small("GMM"), "llvm", reference=wb.workloads.reference("GMM", **SHAPE))
    with LocalRunner(workers=1, measure=MeasureConfig(repeat=2, min_repeat_ms=1, max_spread=0.5)) as r:
        results = r.measure([MeasureInput(task, scheduled(s)) for s in range(2)])
    assert [x.status for x in results] == ["ok", "ok"]
    assert all(x.noisy and len(x.latencies) == 2 for x in results)


# busy machine ------------------------------------------------------------------------------------
def test_machine_busy_compares_the_load_with_our_cpus():
    assert machine_busy(3.5, cores=2) and not machine_busy(1.9, cores=2)
    assert not machine_busy(None, cores=2)


@pytest.fixture
def load(monkeypatch):
    """Set the load average the runner reads after each run."""

    def set_load(value):
        monkeypatch.setattr(runner_mod, "load_average", lambda: value)

    return set_load


def _tune(db_path, **kw):
    task = TuneTask.workload("GMM", **SHAPE)
    stream = io.StringIO()
    db = tune(
        task,
        trials=4,
        num_trials_per_iter=4,
        database=db_path,
        strategy="replay_trace",
        cost_model="random",
        baseline=False,
        callbacks=[ProgressBar(stream, lines=True)],
        verbose=False,
        **({} if "runner" in kw else {"measure": MeasureConfig(min_repeat_ms=1)}),
        **kw,
    )
    return task, db, stream.getvalue()


def test_busy_tuning_is_reported_and_its_records_flagged(db_path, load):
    cores = runner_mod.host_cores()
    load(cores + 1.5)
    task, db, text = _tune(db_path)
    records = db.records(task.func, "llvm")
    assert len(records) == 4 and any(r.ok for r in records)
    assert all(r.busy and r.meta["busy"] == pytest.approx(cores + 1.5) for r in records if r.ok)
    assert f"machine busy: load {cores + 1.5:.1f} > {cores} CPUs" in text  # progress line
    assert "warning: the machine was busy" in text  # summary
    again = Database.open(db_path).records(task.func, "llvm")  # stored
    assert [r.busy for r in again] == [r.busy for r in records]


def test_quiet_tuning_says_nothing(db_path, load):
    load(0.25)
    task, db, text = _tune(db_path)
    assert not any(r.busy for r in db.records(task.func, "llvm"))
    assert "busy" not in text  # (a record may still be noisy: this machine's real noise)


def test_noisy_records_are_flagged_and_counted(db_path, load):
    load(None)  # an OS without load averages: never "busy"
    runner = LocalRunner(workers=1, measure=MeasureConfig(repeat=2, min_repeat_ms=1, max_spread=0.5))
    try:
        task, db, text = _tune(db_path, runner=runner)
    finally:
        runner.close()
    ok = [r for r in db.records(task.func, "llvm") if r.ok]
    assert ok and all(r.noisy and r.meta["noisy"] >= 1.0 for r in ok)
    assert f"warning: {len(ok)} record(s) were noisy" in text


def test_cli_tune_says_the_machine_was_busy(tmp_path, capsys, load):
    from workbench.cli import main

    load(runner_mod.host_cores() + 4.0)
    assert (
        main(
            [
                "tune",
                "GMM",
                "--small",
                "--trials",
                "2",
                "--per-iter",
                "2",
                "--db",
                str(tmp_path / "cli.sqlite"),
                "--strategy",
                "replay_trace",
                "--cost-model",
                "random",
            ]
        )
        == 0
    )
    assert "the machine was busy" in capsys.readouterr().err


def test_old_records_without_flags_read_as_clean(tmp_path):
    """The flags live in the record's JSON ``meta``: databases written before them open, and
    flags round-trip through both formats."""
    func = small("GMM")
    sch = wb.Schedule(func, seed=0)
    for path in (tmp_path / "db.sqlite", tmp_path / "db.jsonl"):
        db = Database.open(str(path))
        db.add(
            [
                Record.of(func, "llvm", sch.trace, ms(1.0)),
                Record.of(func, "llvm", sch.trace, ms(2.0), noisy=2.5, busy=3.1),
            ]
        )
        old, flagged = Database.open(str(path)).records(func, "llvm")
        assert not old.noisy and not old.busy and old.meta == {}
        assert flagged.noisy and flagged.busy and "noisy, busy" in repr(flagged)


# libgomp's waiting -------------------------------------------------------------------------------
def test_bound_spinning_respects_a_chosen_wait_policy():
    env = {}
    assert bound_spinning(env) and env == {"GOMP_SPINCOUNT": str(SPIN_COUNT)}
    for chosen in ({"OMP_WAIT_POLICY": "passive"}, {"GOMP_SPINCOUNT": "INFINITE"}):
        env = dict(chosen)
        assert not bound_spinning(env) and env == chosen


def test_workers_start_with_bounded_spinning(monkeypatch):
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    seen = {}
    real_popen = runner_mod.subprocess.Popen

    def popen(*args, env=None, **kw):
        seen.update(env)
        return real_popen(*args, env=env, **kw)

    monkeypatch.setattr(runner_mod.subprocess, "Popen", popen)
    worker = runner_mod._Worker(0)
    try:
        worker.start()
    finally:
        worker.stop()
        worker.log.close()
        os.unlink(worker.log.name)
    assert seen["GOMP_SPINCOUNT"] == str(SPIN_COUNT)
