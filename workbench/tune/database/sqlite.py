"""``SQLiteDatabase``: the default database — one file, WAL journal, one commit per batch.

In WAL mode a commit is durable once ``add`` returns, even if the process is killed right
after (SIGKILL, a crash of the notebook kernel); an uncommitted batch is simply absent on
reopening. Several processes may read while others tune, and several tuning processes may add
to one file: a writer waits for another's commit (``busy_timeout``) and a batch that still
finds the file locked is retried whole. Tables::

    workloads(id, hash, target, name, ir)          UNIQUE(hash, target)
    records(id, workload_id, trace_hash, trace, latencies, latency, status, error,
            predicted, timestamp, meta)            latency: median seconds, NULL unless ok

Opening checks the file first — SQLite's header, the schema version (``PRAGMA user_version``;
a newer one is refused and never rewritten), that it is not another program's database, and
``PRAGMA quick_check`` — and raises :class:`~workbench.errors.DatabaseError` saying what is
wrong and what to do. A record whose fields cannot be decoded is skipped with a warning.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from typing import Any, Callable, Optional
from urllib.parse import quote

from ...errors import DatabaseError
from .base import Database, Record, WorkloadEntry, checked_record, func_hash, target_str, trace_hash

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
_TABLES = {"workloads", "records"}
_HEADER = b"SQLite format 3\x00"
#: seconds a writer waits for another process's transaction (SQLite's busy_timeout)
BUSY_TIMEOUT = 30.0
#: whole-batch retries when SQLite still answers "locked" / "busy" after the busy timeout
BUSY_RETRIES = 5

_RECORD_COLUMNS = (
    "r.id, w.hash, w.target, w.name, w.ir, r.trace, r.latencies, r.status, "
    "r.error, r.predicted, r.timestamp, r.meta"
)


def check_header(path: str) -> None:
    """DatabaseError unless ``path`` is absent, empty or starts with SQLite's header."""
    if os.path.isdir(path):
        raise DatabaseError(f"{path} is a directory, not a database file")
    try:
        with open(path, "rb") as f:
            head = f.read(len(_HEADER))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise DatabaseError(f"{path}: cannot read it ({exc.strerror})") from None
    if head and head != _HEADER:
        raise DatabaseError(
            f"{path} is not a SQLite database (its first bytes are not "
            f"SQLite's header): give another path, or a .jsonl name for a "
            f"JSON-lines database"
        )


def connect(path: str, readonly: bool = False) -> sqlite3.Connection:
    """A connection that returns text columns as bytes (decoded, and checked, by us)."""
    if path != ":memory:":
        check_header(path)
    try:
        if readonly:
            conn = sqlite3.connect(
                f"file:{quote(os.path.abspath(path))}?mode=ro",
                uri=True,
                timeout=BUSY_TIMEOUT,
                check_same_thread=False,
            )
        else:
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, check_same_thread=False)
    except sqlite3.Error as exc:
        where = os.path.dirname(os.path.abspath(path))
        raise DatabaseError(
            f"{path}: cannot open the database ({exc}); check that {where} exists and is writable"
        ) from None
    conn.text_factory = bytes
    return conn


def text(value: Any) -> Any:
    """A column's value with text decoded (UnicodeDecodeError, a ValueError, if damaged)."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


def decode_record(row: tuple, entries: dict) -> Record:
    """A Record from a row of ``_RECORD_COLUMNS``; ValueError naming what is damaged."""
    _, h, t, name, ir, trace, lat, status, error, pred, ts, meta = row
    h, t = text(h), text(t)
    key = (h, t)
    if key not in entries:
        entries[key] = WorkloadEntry(h, t, name.decode("utf-8", "replace"), ir.decode("utf-8", "replace"))
    try:
        fields = [
            json.loads(text(trace)),
            json.loads(text(lat)),
            text(status),
            text(error),
            t,
            ts,
            pred,
            entries[key],
            json.loads(text(meta)),
        ]
    except (TypeError, AttributeError):
        raise ValueError("a field has the wrong type") from None
    return checked_record(*fields)


def quick_check_lines(rows: list[str]) -> list[str]:
    """``PRAGMA quick_check``'s answer as one problem per line (its headings left out)."""
    lines = [ln.strip() for row in rows for ln in row.splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("***")]


def busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and any(w in str(exc) for w in ("locked", "busy"))


class SQLiteDatabase(Database, default=True):
    """Records in one SQLite file (``":memory:"`` for a throw-away database); ``readonly``:
    never write (inspection of a file that must not change)."""

    def __init__(self, path: str = "tuning.sqlite", readonly: bool = False):
        self.path = path
        self.readonly = readonly
        # the tuner and a UI thread may share one database object: serialize access ourselves
        self._lock = threading.Lock()
        self._damaged_ids: set[int] = set()
        self._ids: dict[tuple[str, str], int] = {}
        self._conn = connect(path, readonly)
        try:
            self._retry(self._prepare)
        except BaseException:
            self._conn.close()
            raise

    def _prepare(self) -> None:
        with self._lock:
            conn = self._conn
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version > SCHEMA_VERSION:
                    raise DatabaseError(
                        f"{self.path} was written by a newer workbench (database schema "
                        f"{version}; this one reads {SCHEMA_VERSION}): open it with that "
                        f"version; the file was left unchanged"
                    )
                tables = {
                    text(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                }
                if tables and not _TABLES <= tables:
                    raise DatabaseError(
                        f"{self.path} is a SQLite database but not a workbench one (tables: "
                        f"{', '.join(sorted(tables))}): give another path"
                    )
                problems = [text(r[0]) for r in conn.execute("PRAGMA quick_check(5)")]
                if problems != ["ok"]:
                    raise DatabaseError(
                        f"{self.path} is damaged (SQLite's quick_check: "
                        f"{'; '.join(quick_check_lines(problems)[:2])}): "
                        f"`workbench db repair {self.path} --out NEW` copies every intact "
                        f"record to a new file"
                    )
                if self.readonly:
                    return
                with conn:
                    if self.path != ":memory:":
                        conn.execute("PRAGMA journal_mode=WAL")
                    # NORMAL is crash-safe in WAL mode (a power loss can drop the last commit)
                    conn.execute("PRAGMA synchronous=NORMAL")
                    if not _TABLES <= tables:
                        conn.executescript(_SCHEMA)
                    if version != SCHEMA_VERSION:
                        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            except sqlite3.DatabaseError as exc:
                if busy(exc):
                    raise
                raise self._damage(exc) from None

    def _damage(self, exc: BaseException) -> DatabaseError:
        return DatabaseError(
            f"{self.path} is damaged or not a database ({exc}): `workbench db "
            f"check {self.path}` says more; `workbench db repair {self.path} "
            f"--out NEW` copies every intact record to a new file"
        )

    def _retry(self, fn: Callable[[], Any]) -> Any:
        """``fn()``, again after a pause when another process held the file past the busy
        timeout (SQLite answers some conflicts at once, without waiting)."""
        for attempt in range(BUSY_RETRIES + 1):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not busy(exc) or attempt == BUSY_RETRIES:
                    raise (
                        DatabaseError(f"{self.path}: {exc} (another process kept it locked)")
                        if busy(exc)
                        else self._damage(exc)
                    ) from None
                time.sleep(0.05 * 2**attempt)

    def _query(self, sql: str, params: Any = ()) -> list:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:
                if busy(exc):
                    raise
                raise self._damage(exc) from None

    def _workload_id(self, entry: WorkloadEntry) -> int:
        key = (entry.hash, entry.target)
        if key not in self._ids:
            self._conn.execute(
                "INSERT OR IGNORE INTO workloads(hash, target, name, ir) VALUES (?, ?, ?, ?)",
                (entry.hash, entry.target, entry.name, entry.ir),
            )
            row = self._conn.execute("SELECT id FROM workloads WHERE hash=? AND target=?", key).fetchone()
            self._ids[key] = row[0]
        return self._ids[key]

    def _add(self, records: list[Record]) -> None:
        if self.readonly:
            raise DatabaseError(f"{self.path} was opened read-only")
        self._retry(lambda: self._add_once(records))

    def _add_once(self, records: list[Record]) -> None:
        with self._lock:
            try:
                with self._conn:  # one transaction: the whole batch or nothing
                    # take the write lock first: a read-then-write transaction could meet a
                    # newer commit of another process and fail without waiting
                    self._conn.execute("BEGIN IMMEDIATE")
                    rows = []
                    for rec in records:
                        assert rec.workload is not None  # Database.add checked it
                        wid = self._workload_id(rec.workload)
                        rows.append(
                            (
                                wid,
                                trace_hash(rec.trace_json),
                                json.dumps(rec.trace_json),
                                json.dumps(rec.latencies),
                                rec.latency if rec.ok else None,
                                rec.status,
                                rec.error,
                                rec.predicted,
                                rec.timestamp,
                                json.dumps(rec.meta),
                            )
                        )
                    self._conn.executemany(
                        "INSERT INTO records(workload_id, trace_hash, trace, latencies, latency, "
                        "status, error, predicted, timestamp, meta) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        rows,
                    )
            except BaseException:
                self._ids.clear()  # ids inserted in the rolled-back transaction are gone
                raise

    def _decode(self, rows: list) -> list[Record]:
        """Records of ``rows``; damaged ones skipped, counted and warned about."""
        entries: dict[tuple[str, str], WorkloadEntry] = {}
        out, reason = [], ""
        for row in rows:
            try:
                out.append(decode_record(row, entries))
            except ValueError as exc:
                if row[0] not in self._damaged_ids:
                    reason = reason or f"record {row[0]}: {exc}"
                self._damaged_ids.add(row[0])
        if reason:
            self._skipped(len(self._damaged_ids), reason)
        return out

    def _records(
        self, hash_: str, targets: Optional[list[str]], order: str = "r.id", where: str = ""
    ) -> list[Record]:
        query = (
            f"SELECT {_RECORD_COLUMNS} FROM records r "
            "JOIN workloads w ON w.id = r.workload_id WHERE w.hash = ?" + where
        )
        params: list = [hash_]
        if targets is not None:
            query += f" AND w.target IN ({', '.join('?' * len(targets))})"
            params += targets
        return self._decode(self._query(query + " ORDER BY " + order, params))

    def top_k(self, func, target, k: int) -> list[Record]:
        # the index on (workload, latency) answers this without reading every record; a
        # damaged record among the first k is skipped and the next one read
        limit = int(k)
        while True:
            out = self._records(
                func_hash(func),
                [target_str(target)],
                order=f"r.latency, r.id LIMIT {limit}",
                where=" AND r.latency IS NOT NULL AND r.meta NOT LIKE '%\"remeasure\"%'",
            )
            if len(out) >= k or len(out) + len(self._damaged_ids) < limit:
                break
            limit *= 4
        for rec in out[:k]:
            rec.func = func
        return out[:k]

    def _has_remeasurements(self, func, target) -> bool:
        rows = self._query(
            "SELECT 1 FROM records r JOIN workloads w ON w.id = r.workload_id "
            "WHERE w.hash = ? AND w.target = ? AND r.meta LIKE '%\"remeasure\"%' LIMIT 1",
            (func_hash(func), target_str(target)),
        )
        return bool(rows)

    def trace_hashes(self, func, target) -> set[str]:
        rows = self._query(
            "SELECT r.trace_hash FROM records r JOIN workloads w ON w.id = r.workload_id "
            "WHERE w.hash = ? AND w.target = ?",
            (func_hash(func), target_str(target)),
        )
        return {row[0].decode("utf-8", "replace") for row in rows}

    def _workloads(self) -> list[WorkloadEntry]:
        rows = self._query("SELECT hash, target, name, ir FROM workloads ORDER BY id")
        return [WorkloadEntry(*(v.decode("utf-8", "replace") for v in row)) for row in rows]

    def _count(self) -> int:
        return self._query("SELECT COUNT(*) FROM records")[0][0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
