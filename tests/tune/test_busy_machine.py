"""Tuning that survives a busy machine: busy candidates measured again when the load drops, the
pick confirmed by an interleaved re-measurement of the top candidates, stored in the database.

The perturbations are injected by a runner whose "true" latency of a candidate is a function of
its scheduled code (no timing here: the numbers are made up, so the tests are exact): during
the search it slows some candidates down, as competing work would; the final re-measurement
sees them as they are.
"""

import math

import pytest

import workbench as wb
from workbench.ir.structural import structural_hash
from workbench.tune import LocalRunner, MeasureConfig, MeasureInput, Task, TuneInterrupted
from workbench.tune.task import TuneTask
from workbench.tune.database.base import Database, Record, pick, trace_hash
from workbench.tune.runner import MeasureInterrupted, MeasureResult, Runner

from tunehelpers import crash, gmm_space, small

QUIET, BUSY = 0.1, 50.0  # 1-minute load averages (this test machine has a few CPUs, not 50)


def truth(func) -> float:
    """A candidate's made-up true latency: 100 to 400 us, fixed by its code."""
    return 1e-4 * (1 + 3 * (int(structural_hash(func, buffer_names=False)[:8], 16) % 997) / 997)


class PerturbedRunner(Runner):
    """Measures nothing: each candidate's latency is :func:`truth`, slowed ``slow`` times (and
    read under a busy load) for the candidates ``victim`` names during the first
    ``busy_calls`` batches; the load is high until then, ``final_load`` after."""

    def __init__(self, victim, slow=10.0, busy_calls=2, final_load=QUIET, **config):
        self.config = MeasureConfig(**config)
        self.victim, self.slow = victim, slow
        self.busy_calls, self.final_load = busy_calls, final_load
        self.calls = 0
        self.best_seen = math.inf
        self.interleaved: list[list[float]] = []

    def measure(self, inputs, config=None):
        self.calls += 1
        busy = self.calls <= self.busy_calls
        out = []
        for inp in inputs:
            t = truth(inp.func)
            hit = busy and self.victim(self, t)
            self.best_seen = min(self.best_seen, t)
            lat = t * (self.slow if hit else 1.0)
            out.append(MeasureResult("ok", [lat] * 3, load=BUSY if hit else QUIET))
        return out

    def measure_interleaved(self, inputs, rounds, config=None):
        self.interleaved.append([truth(i.func) for i in inputs])
        return [MeasureResult("ok", [truth(i.func)] * rounds, load=self.final_load) for i in inputs]

    def current_load(self):
        return BUSY if self.calls < self.busy_calls else self.final_load


def new_best(runner, t):
    """The victims: every candidate that would be the fastest so far (the search's own best is
    then never the truly fastest one, unless the first)."""
    return t < runner.best_seen


def tune_with(runner, trials=8, task=None, **kw):
    """Tune the small GMM (or ``task``, a TuneTask of it) with ``runner``."""
    summaries = []

    class Catch:
        def on_end(self, summary):
            summaries.append(summary)

    func = task.func if task is not None else small("GMM")
    db = wb.tune(
        task if task is not None else func,
        trials=trials,
        database=":memory:",
        runner=runner,
        strategy="replay_trace",
        cost_model="random",
        num_trials_per_iter=4,
        baseline=False,
        verbose=False,
        callbacks=[Catch()],
        **kw,
    )
    return func, db, (summaries[0] if summaries else None)


def true_best(db, func):
    trials = [r for r in db.records(func, "llvm", remeasured=True) if r.trial and r.ok]
    return min(trials, key=lambda r: truth(r.schedule().func))


def test_a_perturbed_tune_still_picks_the_truly_fastest_candidate():
    runner = PerturbedRunner(new_best, remeasure_busy=False, final_top_k=3, final_rounds=3)
    func, db, summary = tune_with(runner)
    trials = [r for r in db.records(func, "llvm", remeasured=True) if r.trial]
    assert len(trials) == 8
    fastest = true_best(db, func)
    searched = min(trials, key=lambda r: r.latency)
    assert searched.trace_hash != fastest.trace_hash  # the perturbation fooled the search
    best = db.best(func, "llvm")
    assert best.trace_hash == fastest.trace_hash
    assert best.latency == pytest.approx(truth(fastest.schedule().func))
    # stored: one record per re-measured candidate, of one final group, one value per round
    finals = [r for r in db.records(func, "llvm", remeasured=True) if r.meta.get("remeasure") == "final"]
    assert best.meta.get("remeasure") == "final"
    assert len({r.meta["final"]["group"] for r in finals}) == 1
    assert all(len(r.latencies) == 3 for r in finals)
    assert len(runner.interleaved) == 1 and len(runner.interleaved[0]) == len(finals) <= 6
    row = summary.tasks[0]
    assert row.best == pytest.approx(best.latency) and row.confirmed is True and row.final["changed"]
    assert not any("could not be confirmed" in w for w in summary.warnings())


def test_without_the_final_remeasurement_the_search_is_fooled():
    """The same perturbation with the re-measurements off: the pick is a wrong one (what the
    tuner did before), so the test above tests something."""
    runner = PerturbedRunner(new_best, remeasure_busy=False, final_top_k=0)
    func, db, _ = tune_with(runner)
    assert db.best(func, "llvm").trace_hash != true_best(db, func).trace_hash
    assert all(r.trial for r in db.records(func, "llvm", remeasured=True))


class LuckyRound(PerturbedRunner):
    """The final rounds are timed while other work holds one of the cores for seconds: every
    candidate runs 4x slow, except one truly slower candidate that met a moment with both
    cores in one round (its true time then)."""

    def measure_interleaved(self, inputs, rounds, config=None):
        truths = [truth(i.func) for i in inputs]
        lucky = max(range(len(inputs)), key=lambda j: truths[j])
        out = []
        for j, t in enumerate(truths):
            lat = [4 * t] * rounds
            if j == lucky:
                lat[1] = t
            out.append(MeasureResult("ok", lat, load=BUSY))
        self.lucky = inputs[lucky].func
        return out


@pytest.mark.parametrize("windows, fooled", [(25, False), (1, True)])
def test_one_lucky_final_round_does_not_pick_a_slower_candidate(windows, fooled):
    """A runner that times in windows (each round already its fastest window) lets the median
    round decide: a round in which a slower candidate had more cores than the others does not
    make it the pick. Timed without windows, the fastest round decides (and is fooled)."""
    runner = LuckyRound(new_best, remeasure_busy=False, final_top_k=3, final_rounds=3, windows=windows)
    func, db, _ = tune_with(runner)
    best = db.best(func, "llvm")
    finals = [r for r in db.records(func, "llvm", remeasured=True) if r.meta.get("remeasure") == "final"]
    assert {r.meta["final"]["stat"] for r in finals} == {"min" if fooled else "median"}
    truly = min(finals, key=lambda r: truth(r.schedule().func))
    assert (best.trace_hash != truly.trace_hash) == fooled
    if not fooled:
        assert best.latency == pytest.approx(4 * truth(truly.schedule().func))


def test_busy_candidates_are_measured_again_once_the_load_drops():
    """The first batch is measured under load (every candidate slowed, flagged busy); after it
    the machine is quiet: those candidates are measured again, and count with the new figure."""
    runner = PerturbedRunner(lambda r, t: True, busy_calls=1, final_top_k=0)
    func, db, summary = tune_with(runner)
    records = db.records(func, "llvm", remeasured=True)
    busy = [r for r in records if r.trial and r.busy]
    again = [r for r in records if r.meta.get("remeasure") == "busy"]
    assert len(busy) == 4 and {r.trace_hash for r in again} == {r.trace_hash for r in busy}
    for r in again:
        assert not r.busy and r.latency == pytest.approx(truth(r.schedule().func))
    assert db.best(func, "llvm").trace_hash == true_best(db, func).trace_hash
    assert summary.remeasured_busy == 4
    assert sum(r.trial for r in records) == 8  # re-measurements are not trials


def test_a_pick_that_stays_busy_is_said_to_be_unconfirmed():
    runner = PerturbedRunner(new_best, remeasure_busy=True, final_load=BUSY, final_top_k=2, final_rounds=2)
    func, db, summary = tune_with(runner)
    row = summary.tasks[0]
    assert row.confirmed is False
    assert any("could not be confirmed on a quiet machine" in w for w in summary.warnings())
    assert "could not be confirmed on a quiet machine" in str(summary)
    assert db.best(func, "llvm").trace_hash == true_best(db, func).trace_hash  # still re-ranked


def test_ctrl_c_during_the_final_remeasurement_keeps_every_trial():
    class Interrupted(PerturbedRunner):
        def measure_interleaved(self, inputs, rounds, config=None):
            raise MeasureInterrupted([None] * len(inputs))

    runner = Interrupted(new_best, remeasure_busy=False)
    db = Database.open(":memory:")
    with pytest.raises(TuneInterrupted) as info:
        wb.tune(
            small("GMM"),
            trials=8,
            database=db,
            runner=runner,
            strategy="replay_trace",
            cost_model="random",
            num_trials_per_iter=4,
            baseline=False,
            verbose=False,
        )
    assert info.value.trials == 8 and info.value.measured == 8
    records = db.records(small("GMM"), "llvm", remeasured=True)
    assert len(records) == 8 and all(r.trial for r in records)


def test_a_candidate_failing_its_remeasurement_keeps_its_record_and_is_not_picked():
    class Failing(PerturbedRunner):
        def measure_interleaved(self, inputs, rounds, config=None):
            out = super().measure_interleaved(inputs, rounds, config)
            k = min(range(len(inputs)), key=lambda i: truth(inputs[i].func))
            out[k] = MeasureResult("run_error", error="worker lost")
            return out

    runner = Failing(new_best, remeasure_busy=False, final_top_k=3, final_rounds=2)
    func, db, _ = tune_with(runner)
    finals = [r for r in db.records(func, "llvm", remeasured=True) if r.meta.get("remeasure") == "final"]
    fastest = true_best(db, func)
    assert finals and all(r.ok for r in finals)
    assert fastest.trace_hash not in {r.trace_hash for r in finals}
    assert db.best(func, "llvm").trace_hash in {r.trace_hash for r in finals}


def _rec(func, sch, latency, **meta):
    return Record.of(func, "llvm", sch.trace, [latency], **meta)


def test_pick_rules():
    func = small("GMM")
    schs = []
    for seed in range(6):
        sch = wb.Schedule(func, seed=seed)
        gmm_space(sch)
        schs.append(sch)
    hashes = {Record.of(func, "llvm", s.trace, [1.0]).trace_hash for s in schs}
    if len(hashes) < 4:
        pytest.skip("the seeds gave too few distinct schedules")
    distinct = []
    for s in schs:
        h = Record.of(func, "llvm", s.trace, [1.0]).trace_hash
        if h not in {Record.of(func, "llvm", d.trace, [1.0]).trace_hash for d in distinct}:
            distinct.append(s)
    a, b, c, d = distinct[:4]
    # a busy record measured again counts with the latest figure
    recs = [_rec(func, a, 2.0), _rec(func, b, 9.0, busy=9.0), _rec(func, b, 1.0, remeasure="busy")]
    assert pick(recs).trace_hash == recs[2].trace_hash
    recs = [_rec(func, a, 2.0), _rec(func, b, 1.0), _rec(func, b, 3.0, remeasure="busy")]
    assert pick(recs).trace_hash == recs[0].trace_hash
    # the final group decides over what it re-measured and what came before it
    final = {"remeasure": "final", "final": {"group": "g", "rounds": 2, "stat": "min"}}
    recs = [
        _rec(func, a, 1.0),  # lucky in the search
        _rec(func, b, 2.0),
        _rec(func, c, 0.5),  # not re-measured: superseded
        Record.of(func, "llvm", a.trace, [3.0, 4.0], **final),
        Record.of(func, "llvm", b.trace, [2.5, 2.2], **final),
    ]
    assert pick(recs) is recs[4] and recs[4].latency == 2.2  # the fastest round
    # a candidate measured after the final group competes
    assert pick(recs + [_rec(func, d, 3.0)]).trace_hash == recs[4].trace_hash
    assert pick(recs + [_rec(func, d, 1.5)]).latency == 1.5
    db = Database.open(":memory:")
    db.add(recs)
    assert db.best(func, "llvm").trace_hash == recs[4].trace_hash
    assert db.top_k(func, "llvm", 1)[0].latency == 0.5  # the trials' ranking is unchanged
    assert len(db.records(func, "llvm")) == 3 and len(db.records(func, "llvm", remeasured=True)) == 5


def test_local_runner_interleaves_kept_kernels_and_fails_only_a_crashing_one():
    task = Task(small("GMM"), "llvm", reference=wb.workloads.reference("GMM", **wb.workloads.small("GMM")))
    funcs = []
    for seed in range(3):
        sch = wb.Schedule(small("GMM"), seed=seed)
        gmm_space(sch)
        funcs.append(sch.func)
    funcs.insert(1, crash(funcs[0]))
    config = MeasureConfig(build_timeout=20, run_timeout=5, min_repeat_ms=2)
    with LocalRunner(workers=2, measure=config) as runner:
        results = runner.measure_interleaved([MeasureInput(task, f) for f in funcs], rounds=3)
        again = runner.measure([MeasureInput(task, funcs[0])])  # the runner still works
    assert results[1].status == "run_error" and "SIGSEGV" in results[1].error
    # the others: timed every round, or lost with the crashing kernel's worker (they ran before)
    for r in results[:1] + results[2:]:
        assert r.status == "ok" or "kernel lost" in r.error, (r.status, r.error)
    ok = [r for r in results if r.status == "ok"]
    assert ok and all(len(r.latencies) == 3 and all(0 < x < math.inf for x in r.latencies) for r in ok)
    assert again[0].status == "ok"


def test_an_initial_schedule_is_always_in_the_final_remeasurement(monkeypatch):
    """A task's initial schedule (``tune_model``'s default schedule) measured once under heavy
    load ranks below every other candidate, outside the final top-k; it is re-measured with
    them all the same, and, truly the fastest, it is the pick (before: a slower searched one)."""
    func = small("GMM")
    default = wb.Schedule(func)
    fast = structural_hash(default.func, buffer_names=False)
    real = truth
    monkeypatch.setitem(
        globals(), "truth", lambda f: 1e-5 if structural_hash(f, buffer_names=False) == fast else real(f)
    )

    class DefaultHit(PerturbedRunner):
        def measure(self, inputs, config=None):  # the first batch is busy; the default hit hardest
            self.calls += 1
            out = []
            for inp in inputs:
                t = truth(inp.func)
                lat = t * (1000 if t == 1e-5 else 1) if self.calls == 1 else t
                out.append(MeasureResult("ok", [lat] * 3, load=BUSY if self.calls == 1 else QUIET))
            return out

    runner = DefaultHit(None, remeasure_busy=False, final_top_k=1, final_rounds=2)
    _, db, _ = tune_with(runner, task=TuneTask(func, initial_schedules=(default,)))
    first = [r for r in db.records(func, "llvm", remeasured=True) if r.trial]
    assert min(first, key=lambda r: r.latency).trace_hash != trace_hash(default.trace)
    assert len(runner.interleaved) == 1 and 1e-5 in runner.interleaved[0]
    assert db.best(func, "llvm").trace_hash == trace_hash(default.trace)
