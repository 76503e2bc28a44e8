"""Databases: records in, best / top-k / records / has out; durable and reloadable."""

import json
import subprocess
import sys

import pytest

import workbench as wb
from workbench.tune import Database, JSONDatabase, Record, SQLiteDatabase
from workbench.testing import check_numeric
from workbench.tune.database import trace_hash

from tunehelpers import gmm_space, small


def gmm_records(n=4):
    """(func, schedules, records) of ``n`` different GMM schedules, latencies 1..n ms."""
    func = small("GMM")
    schs = []
    seed = 0
    while len(schs) < n:
        sch = wb.Schedule(func, seed=seed)
        gmm_space(sch)
        seed += 1
        if all(trace_hash(sch.trace) != trace_hash(s.trace) for s in schs):
            schs.append(sch)
    recs = [
        Record.of(func, "llvm", s.trace, [(k + 1) * 1e-3, (k + 1) * 1e-3 + 2e-4]) for k, s in enumerate(schs)
    ]
    return func, schs, recs


@pytest.fixture(params=["sqlite", "jsonl"])
def path(request, tmp_path):
    return str(tmp_path / f"db.{request.param}")


def test_open_picks_backend_by_suffix(tmp_path):
    assert isinstance(Database.open(str(tmp_path / "a.sqlite")), SQLiteDatabase)
    assert isinstance(Database.open(str(tmp_path / "a.db")), SQLiteDatabase)
    assert isinstance(Database.open(str(tmp_path / "a.jsonl")), JSONDatabase)
    assert isinstance(Database.open(str(tmp_path / "a.json")), JSONDatabase)
    mem = Database.open(":memory:")
    assert isinstance(mem, SQLiteDatabase) and Database.open(mem) is mem


def test_queries(path):
    func, schs, recs = gmm_records(4)
    failed = Record.of(func, "llvm", schs[0].trace, [], status="timeout", error="hung")
    db = Database.open(path)
    db.add([recs[2], recs[0], failed])
    db.add([recs[3], recs[1]])
    assert len(db) == 5
    assert [r.status for r in db.records(func)] == ["ok", "ok", "timeout", "ok", "ok"]
    best = db.best(func, "llvm")
    assert best.latency == pytest.approx(1.1e-3)
    assert best.trace_hash == trace_hash(schs[0].trace)
    assert [r.latency for r in db.top_k(func, "llvm", 3)] == pytest.approx([1.1e-3, 2.1e-3, 3.1e-3])
    assert db.records(func)[2].error == "hung" and db.records(func)[2].latency == float("inf")
    assert db.has(func, "llvm", schs[3].trace)
    assert not db.has(func, "llvm -num-cores=1", schs[3].trace)  # another target, another workload
    assert db.best(func, "llvm -num-cores=1") is None
    assert db.best(small("SFM"), "llvm") is None
    wl = db.workloads()
    assert len(wl) == 1 and wl[0].name == func.name and "T.prim_func" in wl[0].ir


def test_best_schedule_rebuilds_and_matches_numpy(path):
    func, schs, recs = gmm_records(2)
    db = Database.open(path)
    db.add(recs)
    sch = db.best(func, "llvm").schedule()
    assert wb.structural_equal(sch.func, schs[0].func)
    check_numeric(sch, "GMM", target="llvm", **wb.workloads.small("GMM"))


def test_workload_key_is_structural(path):
    """Two separately built but equal functions are one workload; a different shape is not."""
    func, _, recs = gmm_records(1)
    db = Database.open(path)
    db.add(recs)
    assert db.best(small("GMM"), "llvm") is not None
    assert db.best(wb.workloads.get("GMM", b=1, n=8, m=8, k=8), "llvm") is None


def test_reopen_in_a_new_process_gives_the_same_best(path):
    func, _, recs = gmm_records(3)
    db = Database.open(path)
    db.add(recs)
    db.close()
    code = (
        f"import workbench as wb; from workbench.tune import Database\n"
        f"f = wb.workloads.get('GMM', **wb.workloads.small('GMM'))\n"
        f"r = Database.open({path!r}).best(f, 'llvm')\n"
        f"print(r.trace_hash, repr(r.latency))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    best = Database.open(path).best(func, "llvm")
    assert out.stdout.split() == [best.trace_hash, repr(best.latency)]


def test_traces_are_stored_as_json_data(tmp_path):
    """No pickles: the stored trace is the trace's JSON, readable by anything."""
    func, schs, recs = gmm_records(1)
    path = str(tmp_path / "db.jsonl")
    Database.open(path).add(recs)
    lines = [json.loads(x) for x in open(path)]
    stored = [x["record"] for x in lines if "record" in x][0]
    assert stored["trace"] == schs[0].trace.as_json()
    assert stored["latencies"] == recs[0].latencies


def test_jsonl_survives_a_line_cut_short(tmp_path):
    func, _, recs = gmm_records(3)
    path = str(tmp_path / "db.jsonl")
    Database.open(path).add(recs[:2])
    with open(path, "a") as f:
        f.write('{"record": {"hash": "abc", "tar')  # a kill in the middle of a write
    with pytest.warns(wb.errors.DatabaseWarning, match="1 damaged record"):
        db = Database.open(path)
    assert len(db) == 2 and db.skipped_lines == 1
    db.add(recs[2:])
    with pytest.warns(wb.errors.DatabaseWarning):
        again = Database.open(path)
    assert len(again) == 3 and again.skipped_lines == 1


def test_record_status_is_checked():
    func, schs, _ = gmm_records(1)
    with pytest.raises(ValueError, match="status"):
        Record.of(func, "llvm", schs[0].trace, [], status="exploded")


def test_failed_batch_leaves_nothing(tmp_path):
    """A batch is one transaction: a bad record rolls back the whole batch."""
    func, _, recs = gmm_records(2)
    db = Database.open(str(tmp_path / "db.sqlite"))
    bad = Record.of(func, "llvm", recs[1].trace_json, [1e-3])
    bad.meta = {"not json": object()}
    with pytest.raises(TypeError):
        db.add([recs[0], bad])
    assert len(db) == 0
    db.add(recs)
    assert len(db) == 2


def test_record_trace_is_parsed_once_so_its_instructions_stay_valid(path):
    """``rec.trace.with_decision(inst, v)`` takes an ``inst`` read from an earlier ``rec.trace``
    (a fresh Trace per access made that fail with "not an instruction of this trace")."""
    func, _, recs = gmm_records(1)
    db = Database.open(path)
    db.add(recs)
    best = db.best(func, "llvm")
    inst = next(i for i in best.trace.insts if i.kind.is_sampling)
    edited = best.trace.with_decision(inst, best.trace.decisions[inst])
    assert best.trace is best.trace and best.trace.base_func is func
    assert len(edited.insts) == len(best.trace.insts)
