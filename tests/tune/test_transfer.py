"""Transfer: the cost model of a new task learns first from the database's records of other
workloads (same target), so it ranks the task's candidates before any of them is measured.

The latencies are made up from what the features can see (no timing): wider vector loops and
more parallel tasks are faster, on both workloads alike.
"""

import numpy as np
import pytest

import workbench as wb
from workbench.tune import Database, EvolutionarySearch, MeasureResult, Record, XGBModel, tuning
from workbench.tune import cost_model as cm
from workbench.tune.database.base import func_hash
from workbench.tune.runner import Runner
from workbench.tune.measure import MeasureConfig

from tunehelpers import gmm_space

pytestmark = pytest.mark.skipif(not cm.has_xgboost(), reason="xgboost not installed")

OTHER = dict(b=1, n=16, m=16, k=16)  # the workload tuned before
NEW = dict(b=2, n=32, m=16, k=8)  # the task now: another shape, another workload hash


def gmm(shape):
    return wb.workloads.get("GMM", **shape)


def schedules(shape, n):
    out = []
    for seed in range(n):
        sch = wb.Schedule(gmm(shape), seed=seed)
        gmm_space(sch)
        out.append(sch)
    return out


def fake_latency(func):
    loops = list(func.loops())
    vec = next(l.extent.value for l in loops if l.kind.value == "vectorized")
    par = next(l.extent.value for l in loops if l.kind.value == "parallel")
    return 1e-3 * (1 + 8 / vec) * (1 + 4 / par)


def other_workload_db(tmp_path, n=24):
    db = Database.open(str(tmp_path / "db.jsonl"))
    func = gmm(OTHER)
    db.add([Record.of(func, "llvm", s.trace, [fake_latency(s.func)]) for s in schedules(OTHER, n)])
    return db


def test_transfer_records_are_the_other_workloads_replayed(tmp_path):
    db = other_workload_db(tmp_path)
    new = gmm(NEW)
    cands, results = cm.transfer_records(db, "llvm", exclude=[func_hash(new)])
    assert len(cands) == 24 and all(r.status == "ok" for r in results)
    # replayed on the function parsed back from the stored text: the program that was measured
    assert [fake_latency(c.func) for c in cands] == [r.latency for r in results]
    assert cm.transfer_records(db, "llvm", exclude=[func_hash(gmm(OTHER))]) == ([], [])
    assert cm.transfer_records(db, "cuda", exclude=[func_hash(new)]) == ([], [])
    # a limit spreads over the tune: first and last record kept
    few, res = cm.transfer_records(db, "llvm", exclude=[func_hash(new)], limit=5)
    assert len(few) == 5 and res[0].latency == results[0].latency and res[-1].latency == results[-1].latency


def test_a_model_trained_on_another_workload_ranks_a_held_out_pair(tmp_path):
    db = other_workload_db(tmp_path)
    cands, results = cm.transfer_records(db, "llvm", exclude=[func_hash(gmm(NEW))])
    new = schedules(NEW, 16)
    lat = np.array([fake_latency(s.func) for s in new])
    fast, slow = new[int(lat.argmin())], new[int(lat.argmax())]
    assert fake_latency(fast.func) < fake_latency(slow.func)
    untrained = XGBModel()
    assert untrained.predict([fast, slow]).tolist() == [0.0, 0.0]  # no opinion without records
    model = XGBModel()
    model.update(cands, results)
    score_fast, score_slow = model.predict([fast, slow])
    assert score_fast > score_slow
    # over the new workload's candidates, the ranking agrees with the made-up latencies
    pred = model.predict(new)
    rho = np.corrcoef(np.argsort(np.argsort(pred)), np.argsort(np.argsort(-lat)))[0, 1]
    assert rho > 0.5


class FakeRunner(Runner):
    """Measures nothing: each candidate's latency is :func:`fake_latency` of its code."""

    def __init__(self):
        self.config = MeasureConfig(remeasure_busy=False, final_top_k=0)
        self.measured: list = []

    def measure(self, inputs, config=None):
        self.measured += [inp.func for inp in inputs]
        return [MeasureResult("ok", [fake_latency(inp.func)] * 3, load=0.0) for inp in inputs]

    def current_load(self):
        return 0.0


def test_tune_warms_the_model_up_on_other_workloads_and_never_measures_a_trace_twice(tmp_path, monkeypatch):
    db = other_workload_db(tmp_path)
    model = XGBModel()
    runner = FakeRunner()
    new = gmm(NEW)
    space = wb.tune.make_space(gmm_space, "llvm")
    common = dict(target="llvm", space=space, runner=runner, baseline=False, verbose=False)
    common["strategy"] = EvolutionarySearch(population_size=16, num_iters=1, neighbours_per_elite=4)
    wb.tune(new, trials=12, database=db, cost_model=model, num_trials_per_iter=4, **common)
    # the other workload's 24 records trained the model first, then the task's own 12
    assert len(model.groups) == 24 + 12
    assert model.groups[:24] == [func_hash(gmm(OTHER))] * 24
    assert len({r.trace_hash for r in db.records(new, "llvm")}) == 12 == len(runner.measured)
    # the first batch was already ranked by the model: scores differ
    first = db.records(new, "llvm")[:4]
    assert len({r.predicted for r in first}) > 1
    # resuming the task: its own records are not transferred again as another workload's
    model2 = XGBModel()
    wb.tune(new, trials=16, database=db, cost_model=model2, num_trials_per_iter=4, **common)
    assert model2.groups.count(func_hash(new)) == 12 + 4
    assert len({r.trace_hash for r in db.records(new, "llvm")}) == 16
    # transfer off: only the task's own records
    monkeypatch.setattr(tuning, "MAX_TRANSFER_RECORDS", 0)
    model3 = XGBModel()
    wb.tune(new, trials=20, database=db, cost_model=model3, num_trials_per_iter=4, **common)
    assert set(model3.groups) == {func_hash(new)}
