"""Damaged, foreign and newer databases: a DatabaseError that says what to do, or every intact
record with a warning counting the damaged ones; `db check` / `db repair`; nothing executed."""

import json
import os
import random
import re
import sqlite3
import warnings

import pytest

import workbench as wb
from workbench.cli import main
from workbench.errors import DatabaseWarning
from workbench.tune import Database, Record
from workbench.tune.database.repair import check, repair

from test_database import gmm_records


def write_db(path, n=4):
    func, schs, recs = gmm_records(n)
    with Database.open(path) as db:
        db.add(recs)
    if path.endswith(".sqlite"):  # everything in the main file, as a copied file would be
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return func, recs


def damage(path, offset, size=200, seed=0):
    data = bytearray(open(path, "rb").read())
    offset = min(offset, len(data) - size)
    data[offset : offset + size] = random.Random(seed).randbytes(size)
    open(path, "wb").write(bytes(data))


def open_damaged(path, func):
    """(records read, warnings' damaged count) or the DatabaseError raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DatabaseWarning)
        try:
            db = Database.open(path)
            records = db.records(func)
            best = db.best(func, "llvm")
        except wb.DatabaseError as exc:
            return exc
    counts = [w.message for w in caught if issubclass(w.category, DatabaseWarning)]
    return records, best, counts


@pytest.mark.parametrize("suffix", ["sqlite", "jsonl"])
@pytest.mark.parametrize("part", range(7))
def test_damage_at_several_offsets(tmp_path, suffix, part):
    """200 random bytes at the start of the file, then at the end of each seventh of it (the
    SQLite file: 7 pages of 4 KiB that fill from their end, so every page's cells: the
    schema, the tables and the index)."""
    path = str(tmp_path / f"t.{suffix}")
    func, recs = write_db(path)
    size = os.path.getsize(path)
    damage(path, size * (part + 1) // 7 - 250 if part else 0, seed=part)
    got = open_damaged(path, func)
    report = None
    if isinstance(got, wb.DatabaseError):
        text = str(got)
        assert path in text and ("repair" in text or "not a" in text), text
    else:
        records, best, warned = got
        assert len(records) <= 4
        intact = {r.trace_hash for r in recs}
        assert {r.trace_hash for r in records} <= intact
        if len(records) < 4:  # some lost: a warning counts them (JSON lines: the
            # damaged lines, and a random newline makes two of one)
            assert warned
            counted = int(re.search(r"(\d+) damaged record", str(warned[-1])).group(1))
            lost = 4 - len(records)
            assert counted == lost or (suffix == "jsonl" and counted > lost)
        if records:  # every intact record usable: the best is among them
            assert best is not None and best.latency == min(r.latency for r in records)
            best.schedule()
    try:
        report = repair(path, str(tmp_path / f"fixed.{suffix}"))
    except wb.DatabaseError as exc:  # the header itself is gone: nothing to repair
        assert part == 0 and "not a" in str(exc)
        return
    fixed = Database.open(report.copied_to)
    assert len(fixed) == report.intact <= 4 and report.intact + report.damaged >= 4
    assert {r.trace_hash for r in fixed.records(func)} <= {r.trace_hash for r in recs}
    assert check(report.copied_to).ok


def test_undecodable_record_skipped_with_count(tmp_path):
    """The issue's case: bytes that are not UTF-8 in a record's trace."""
    path = str(tmp_path / "t.sqlite")
    func, recs = write_db(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE records SET trace = CAST(X'FFFE7B' AS TEXT) WHERE id = 2")
        conn.execute("UPDATE records SET meta = 'not json' WHERE id = 3")
    with pytest.warns(DatabaseWarning, match="2 damaged record"):
        db = Database.open(path)
        records = db.records(func)
    assert [r.trace_hash for r in records] == [recs[0].trace_hash, recs[3].trace_hash]
    assert db.best(func, "llvm").trace_hash == recs[0].trace_hash and db.damaged == 2
    report = check(path)
    assert (report.intact, report.damaged, report.ok) == (2, 2, False)
    assert "record 2" in report.first_damage


def test_best_of_damaged_top_record_is_the_next_one(tmp_path):
    path = str(tmp_path / "t.sqlite")
    func, recs = write_db(path)
    with sqlite3.connect(path) as conn:  # the fastest record (1 ms) is damaged
        conn.execute("UPDATE records SET latencies = '[1e-3,' WHERE id = 1")
    with pytest.warns(DatabaseWarning):
        best = Database.open(path).best(func, "llvm")
    assert best.trace_hash == recs[1].trace_hash


def test_not_a_database_foreign_and_newer(tmp_path):
    text = tmp_path / "notes.sqlite"
    text.write_text("hello\n" * 100)
    with pytest.raises(wb.DatabaseError, match="not a SQLite database"):
        Database.open(str(text))
    foreign = str(tmp_path / "other.sqlite")
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT)")
    with pytest.raises(wb.DatabaseError, match="not a workbench one.*accounts"):
        Database.open(foreign)
    newer = str(tmp_path / "newer.sqlite")
    write_db(newer)
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 99")
    before = open(newer, "rb").read()
    with pytest.raises(wb.DatabaseError, match="newer workbench.*schema 99"):
        Database.open(newer)
    assert open(newer, "rb").read() == before  # never rewritten
    jsonl = str(tmp_path / "newer.jsonl")
    with open(jsonl, "w") as f:
        f.write(json.dumps({"workbench_db": 7}) + "\n")
    with pytest.raises(wb.DatabaseError, match="newer workbench.*format 7"):
        Database.open(jsonl)
    lines = str(tmp_path / "other.jsonl")
    with open(lines, "w") as f:
        f.write('{"user": 1}\n{"user": 2}\n')
    with pytest.raises(wb.DatabaseError, match="not a workbench JSON-lines"):
        Database.open(lines)


@pytest.mark.parametrize("suffix", ["sqlite", "jsonl"])
def test_code_in_a_trace_field_is_never_run(tmp_path, suffix):
    """A database is data: a trace field holding Python (its as_python text, or code that
    would leave a mark) is skipped as damaged, and nothing runs."""
    path = str(tmp_path / f"t.{suffix}")
    func, recs = write_db(path, 2)
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('pwned')\n" + recs[0].trace.as_python()
    if suffix == "sqlite":
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE records SET trace = ? WHERE id = 1", (json.dumps(code),))
    else:
        lines = open(path).read().splitlines()
        k = next(i for i, line in enumerate(lines) if '"record"' in line)
        obj = json.loads(lines[k])
        obj["record"]["trace"] = code
        lines[k] = json.dumps(obj)
        open(path, "w").write("\n".join(lines) + "\n")
    with pytest.warns(DatabaseWarning, match="not workbench trace data"):
        db = Database.open(path)
        records = db.records(func)
        best = db.best(func, "llvm")
    assert [r.trace_hash for r in records] == [recs[1].trace_hash]
    best.schedule()
    check(path)
    main(["db", "repair", path, "--out", str(tmp_path / f"fixed.{suffix}")])
    assert not marker.exists()


def test_trace_with_unknown_primitive_is_refused_not_run(tmp_path):
    path = str(tmp_path / "t.sqlite")
    func, recs = write_db(path, 1)
    data = recs[0].trace_json
    bad = {**data, "insts": [{"kind": "__import__('os').system('true')", "args": {}, "outputs": []}]}
    with Database.open(path) as db:
        db.add([Record.of(func, "llvm", bad, [5e-4])])
    rec = Database.open(path).best(func, "llvm")  # stored as data; replaying it refuses
    with pytest.raises(Exception) as info:
        rec.schedule()
    assert "__import__" in str(info.value)


def test_cli_check_and_repair(tmp_path, capsys):
    path = str(tmp_path / "t.sqlite")
    func, recs = write_db(path)
    assert main(["db", "check", path]) == 0
    assert "ok: 4 intact record(s) of 1 workload(s), 0 damaged" in capsys.readouterr().out
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE records SET status = 'exploded' WHERE id = 4")
    assert main(["db", "check", path]) == 1
    assert "3 intact record(s)" in capsys.readouterr().out
    out = str(tmp_path / "fixed.jsonl")
    assert main(["db", "repair", path, "--out", out]) == 0
    assert f"copied the 3 intact record(s) to {out}" in capsys.readouterr().out
    assert len(Database.open(out)) == 3
    assert main(["db", "repair", path, "--out", out]) == 2  # never overwrites
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "exists" in err[0]
    with pytest.warns(DatabaseWarning):
        assert main(["best", "GMM", "--small", "--db", path]) == 0


def test_library_never_runs_trace_text(tmp_path, monkeypatch):
    """Trace.from_python (the one documented way to run trace text) is never called on data
    the library reads: opening, querying, replaying, resuming a tune, check and repair."""
    from workbench.schedule import Trace
    from workbench.tune import TuneTask, tune

    def refuse(*args, **kwargs):
        raise AssertionError("the library ran trace text")

    monkeypatch.setattr(Trace, "from_python", staticmethod(refuse))
    for suffix in ("sqlite", "jsonl"):
        path = str(tmp_path / f"t.{suffix}")
        func, recs = write_db(path, 2)
        db = Database.open(path)
        db.best(func, "llvm").schedule()
        check(path)
        repair(path, str(tmp_path / f"fixed.{suffix}"))
    task = TuneTask.workload("GMM", **wb.workloads.small("GMM"))
    tune(
        task,
        trials=3,
        database=str(tmp_path / "t.sqlite"),
        num_trials_per_iter=1,
        strategy="replay_trace",
        cost_model="xgb",
        verbose=False,
        baseline=False,
    )
    with pytest.raises(ValueError):  # a JSON trace holding Python is not trace data
        Trace.from_json(json.dumps(recs[0].trace.as_python()))
