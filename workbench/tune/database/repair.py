"""Check a database file, and copy what is intact of a damaged one to a new file.

    report = check("tuning.sqlite")                  # what is wrong, how many records are intact
    report = repair("tuning.sqlite", "fixed.sqlite")  # the intact records, in a new database

The CLI's ``workbench db check PATH`` and ``workbench db repair PATH --out NEW``. Reading never
writes the damaged file. A SQLite file whose pages are damaged is read row by row, so a bad
page costs only the rows on it; a record whose fields cannot be decoded is left out. Files that
are not workbench databases, or come from a newer workbench, raise
:class:`~workbench.errors.DatabaseError` (there is nothing to repair).
"""

from __future__ import annotations

import os
import sqlite3
import warnings
from dataclasses import dataclass, field

from ...errors import DatabaseError, DatabaseWarning
from .base import Database, Record
from .jsonl import JSONDatabase
from .sqlite import _TABLES, SCHEMA_VERSION, check_header, connect, decode_record, quick_check_lines, text

#: row-by-row reading of a damaged table stops after this many missing ids in a row
_MAX_GAP = 10000


@dataclass
class CheckReport:
    """What :func:`check` / :func:`repair` found in ``path``."""

    path: str
    problems: list[str] = field(default_factory=list)  # about the file (SQLite's checks)
    workloads: int = 0
    intact: int = 0  # records read and decoded
    damaged: int = 0  # records (or lines, or rows) that could not be
    first_damage: str = ""
    copied_to: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems and not self.damaged

    def __str__(self) -> str:
        lines = [
            f"{self.path}: {'ok' if self.ok else 'damaged'}: {self.intact} intact "
            f"record(s) of {self.workloads} workload(s), {self.damaged} damaged"
        ]
        lines += [f"  {p}" for p in self.problems]
        if self.first_damage:
            lines.append(f"  first damaged: {self.first_damage}")
        if self.copied_to:
            lines.append(f"copied the {self.intact} intact record(s) to {self.copied_to}")
        elif not self.ok:
            lines.append(
                f"`workbench db repair {self.path} --out NEW` copies the intact records to a new file"
            )
        return "\n".join(lines)


def _rows(conn: sqlite3.Connection, table: str, cols: str) -> tuple[list, int]:
    """Every readable row of ``table`` and how many ids could not be read."""
    try:
        return conn.execute(f"SELECT {cols} FROM {table} ORDER BY id").fetchall(), 0
    except sqlite3.DatabaseError:
        pass
    try:  # the rightmost path of the b-tree may still be intact
        top = conn.execute(f"SELECT max(id) FROM {table}").fetchone()[0]
    except sqlite3.DatabaseError:
        top = None
    out, unreadable, gap, k = [], 0, 0, 0
    while (k < top) if top is not None else gap < _MAX_GAP:
        k += 1
        try:
            row = conn.execute(f"SELECT {cols} FROM {table} WHERE id = ?", (k,)).fetchone()
        except sqlite3.DatabaseError:
            unreadable += 1
            continue
        gap = gap + 1 if row is None else 0
        if row is not None:
            out.append(row)
    return out, unreadable


def _salvage_sqlite(path: str, report: CheckReport) -> list[Record]:
    check_header(path)
    conn = connect(path, readonly=True)
    try:
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(f"{path}: SQLite cannot read it at all ({exc})") from None
        if version > SCHEMA_VERSION:
            raise DatabaseError(
                f"{path} was written by a newer workbench (database schema "
                f"{version}; this one reads {SCHEMA_VERSION}): open it with "
                f"that version"
            )
        try:
            tables = {text(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError:
            tables = set(_TABLES)  # its schema page is damaged: try the tables anyway
        if not _TABLES <= tables:
            raise DatabaseError(
                f"{path} is a SQLite database but not a workbench one "
                f"(tables: {', '.join(sorted(tables)) or 'none'})"
            )
        try:
            problems = [text(r[0]) for r in conn.execute("PRAGMA quick_check(5)")]
        except sqlite3.DatabaseError as exc:
            problems = [str(exc)]
        if problems != ["ok"]:
            report.problems += [f"SQLite's quick_check: {p}" for p in quick_check_lines(problems)]
        wrows, lost_w = _rows(conn, "workloads", "id, hash, target, name, ir")
        rrows, lost_r = _rows(
            conn, "records", "id, workload_id, trace, latencies, status, error, predicted, timestamp, meta"
        )
    finally:
        conn.close()
    workloads: dict[int, tuple] = {}
    for wid, h, t, name, ir in wrows:
        try:
            workloads[wid] = (text(h), text(t), name, ir)
        except ValueError:
            lost_w += 1
    entries: dict = {}
    records: list[Record] = []
    ids = [row[0] for row in rrows]
    # records are never deleted: ids missing below the largest one were on damaged pages
    lost_r = max(lost_r, (max(ids) - len(ids)) if ids else 0)
    report.damaged += lost_r
    if lost_r:
        report.first_damage = f"{lost_r} record row(s) on unreadable pages"
    for rid, wid, *fields in rrows:
        try:
            if wid not in workloads:
                raise ValueError(f"its workload (id {wid}) is lost")
            h, t, name, ir = workloads[wid]
            records.append(decode_record((rid, h.encode(), t.encode(), name, ir, *fields), entries))
        except ValueError as exc:
            report.damaged += 1
            report.first_damage = report.first_damage or f"record {rid}: {exc}"
    report.workloads = len(workloads)
    if lost_w:
        report.problems.append(f"{lost_w} workload row(s) unreadable")
    return records


def _salvage_jsonl(path: str, report: CheckReport) -> list[Record]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DatabaseWarning)
        db = JSONDatabase(path)
    report.damaged = db.skipped_lines
    if caught:
        report.first_damage = str(caught[0].message).split("(first: ", 1)[-1].split(");")[0]
    report.workloads = len(db.workloads())
    return [r for e in db.workloads() for r in db.records_of(e)]


def _salvage(path: str) -> tuple[CheckReport, list[Record]]:
    if not os.path.isfile(path):
        raise DatabaseError(f"{path}: no such database file")
    report = CheckReport(path)
    salvage = _salvage_jsonl if path.endswith((".jsonl", ".json")) else _salvage_sqlite
    records = salvage(path, report)
    report.intact = len(records)
    return report, records


def check(path: str) -> CheckReport:
    """Read every record of the database file ``path`` (changing nothing) and report."""
    return _salvage(os.fspath(path))[0]


def repair(path: str, out: str) -> CheckReport:
    """Copy every intact record of ``path`` into a new database ``out`` (SQLite or JSON lines
    by its name, as :meth:`Database.open`); ``path`` itself is left as it is."""
    path, out = os.fspath(path), os.fspath(out)
    if os.path.exists(out):
        raise DatabaseError(f"{out} exists: repair writes a new file; give another --out")
    report, records = _salvage(path)
    new = Database.open(out)
    try:
        new.add(records)
    finally:
        new.close()
    report.copied_to = out
    return report


__all__ = ["CheckReport", "check", "repair"]
