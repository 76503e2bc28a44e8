"""``SQLiteDatabase``: the default database — one file, WAL journal, one commit per batch.

In WAL mode a commit is durable once ``add`` returns, even if the process is killed right
after (SIGKILL, a crash of the notebook kernel); an uncommitted batch is simply absent on
reopening. Several processes may read while one tunes. Tables::

    workloads(id, hash, target, name, ir)          UNIQUE(hash, target)
    records(id, workload_id, trace_hash, trace, latencies, latency, status, error,
            predicted, timestamp, meta)            latency: median seconds, NULL unless ok
"""
from __future__ import annotations

import json
import sqlite3
import threading
from typing import Optional

from .base import Database, Record, WorkloadEntry, func_hash, target_str, trace_hash

_SCHEMA = """
CREATE TABLE IF NOT EXISTS workloads (
    id INTEGER PRIMARY KEY, hash TEXT NOT NULL, target TEXT NOT NULL,
    name TEXT NOT NULL, ir TEXT NOT NULL, UNIQUE(hash, target));
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY, workload_id INTEGER NOT NULL REFERENCES workloads(id),
    trace_hash TEXT NOT NULL, trace TEXT NOT NULL, latencies TEXT NOT NULL, latency REAL,
    status TEXT NOT NULL, error TEXT NOT NULL, predicted REAL, timestamp REAL NOT NULL,
    meta TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS records_by_workload ON records(workload_id, latency);
"""

#: bumped when the schema changes incompatibly
SCHEMA_VERSION = 1


class SQLiteDatabase(Database):
    """Records in one SQLite file (``":memory:"`` for a throw-away database)."""

    def __init__(self, path: str = "tuning.sqlite"):
        self.path = path
        # the tuner and a UI thread may share one database object: serialize access ourselves
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
        with self._lock, self._conn:
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise ValueError(f"{path}: database schema version {version}, this workbench "
                                 f"reads version {SCHEMA_VERSION}")
            if path != ":memory:":
                self._conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL is crash-safe in WAL mode (only a power loss can drop the last commit)
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self._ids: dict[tuple[str, str], int] = {}

    def _workload_id(self, entry: WorkloadEntry) -> int:
        key = (entry.hash, entry.target)
        if key not in self._ids:
            self._conn.execute("INSERT OR IGNORE INTO workloads(hash, target, name, ir) "
                               "VALUES (?, ?, ?, ?)", (entry.hash, entry.target, entry.name,
                                                       entry.ir))
            row = self._conn.execute("SELECT id FROM workloads WHERE hash=? AND target=?",
                                     key).fetchone()
            self._ids[key] = row[0]
        return self._ids[key]

    def _add(self, records: list[Record]) -> None:
        with self._lock:
            try:
                with self._conn:  # one transaction: the whole batch or nothing
                    rows = []
                    for rec in records:
                        wid = self._workload_id(rec.workload)
                        rows.append((wid, trace_hash(rec.trace_json), json.dumps(rec.trace_json),
                                     json.dumps(rec.latencies), rec.latency if rec.ok else None,
                                     rec.status, rec.error, rec.predicted, rec.timestamp,
                                     json.dumps(rec.meta)))
                    self._conn.executemany(
                        "INSERT INTO records(workload_id, trace_hash, trace, latencies, latency, "
                        "status, error, predicted, timestamp, meta) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            except BaseException:
                self._ids.clear()  # ids inserted in the rolled-back transaction are gone
                raise

    def _records(self, hash_: str, targets: Optional[list[str]],
                 order: str = "r.id", where: str = "") -> list[Record]:
        query = ("SELECT w.hash, w.target, w.name, w.ir, r.trace, r.latencies, r.status, "
                 "r.error, r.predicted, r.timestamp, r.meta FROM records r "
                 "JOIN workloads w ON w.id = r.workload_id WHERE w.hash = ?" + where)
        params: list = [hash_]
        if targets is not None:
            query += f" AND w.target IN ({', '.join('?' * len(targets))})"
            params += targets
        with self._lock:
            rows = self._conn.execute(query + " ORDER BY " + order, params).fetchall()
        entries: dict[tuple[str, str], WorkloadEntry] = {}
        out = []
        for h, t, name, ir, trace, lat, status, error, pred, ts, meta in rows:
            entry = entries.setdefault((h, t), WorkloadEntry(h, t, name, ir))
            out.append(Record(json.loads(trace), json.loads(lat), status, error, t, ts, pred,
                              entry, meta=json.loads(meta)))
        return out

    def top_k(self, func, target, k: int) -> list[Record]:
        # the index on (workload, latency) answers this without reading every record
        out = self._records(func_hash(func), [target_str(target)],
                            order=f"r.latency, r.id LIMIT {int(k)}",
                            where=" AND r.latency IS NOT NULL")
        for rec in out:
            rec.func = func
        return out

    def trace_hashes(self, func, target) -> set[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT r.trace_hash FROM records r JOIN workloads w ON w.id = r.workload_id "
                "WHERE w.hash = ? AND w.target = ?", (func_hash(func), target_str(target)))
            return {row[0] for row in rows}

    def _workloads(self) -> list[WorkloadEntry]:
        with self._lock:
            rows = self._conn.execute("SELECT hash, target, name, ir FROM workloads ORDER BY id")
            return [WorkloadEntry(*row) for row in rows]

    def _count(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
