"""``JSONDatabase``: the portable format — one JSON object per line, appended per batch.

Lines are ``{"workload": {hash, target, name, ir}}`` (once per workload, before its records)
and ``{"record": {hash, target, trace, latencies, status, error, timestamp, predicted, meta}}``.
Each batch is appended and fsync'ed before ``add`` returns. A line cut short by a kill in the
middle of a write is skipped on loading, so every batch written before it survives; so is
any other line that cannot be decoded, with a warning counting them. The first line,
``{"workbench_db": 1}``, names the format version: a newer one is refused (never rewritten),
as is a file none of whose lines is a workload or a record.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Optional

from ...errors import DatabaseError
from .base import Database, Record, WorkloadEntry, record_from_json, record_to_json

#: the first line of a file: ``{"workbench_db": FORMAT_VERSION}``; a newer one is refused
FORMAT_KEY = "workbench_db"
FORMAT_VERSION = 1


def _lock_file(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # not POSIX: appends of one write each, unlocked
        return
    fcntl.flock(fd, fcntl.LOCK_EX)


class JSONDatabase(Database, suffixes=(".jsonl", ".json")):
    """Records in a JSON-lines file, all held in memory once loaded."""

    path: str

    def __init__(self, path: str = "tuning.jsonl"):
        self.path = path
        self._lock = threading.Lock()
        self._workloads_: dict[tuple[str, str], WorkloadEntry] = {}
        self._order: list[Record] = []
        self.skipped_lines = 0
        #: the file ends in a cut-short line: the next batch must start on a new line
        self._needs_newline = False
        if os.path.exists(path):
            self._load()
        elif not os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
            raise DatabaseError(
                f"{path}: cannot create the database: "
                f"{os.path.dirname(os.path.abspath(path))} does not exist or "
                f"is not writable"
            )

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise DatabaseError(f"{self.path}: cannot read it ({exc.strerror})") from None
        self._needs_newline = bool(data) and not data.endswith(b"\n")
        known = damaged = 0
        reason = ""
        for n, raw in enumerate(data.split(b"\n"), 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
                if FORMAT_KEY in obj:
                    version = obj[FORMAT_KEY]
                    if isinstance(version, int) and version > FORMAT_VERSION:
                        raise DatabaseError(
                            f"{self.path} was written by a newer workbench (format {version}; "
                            f"this one reads {FORMAT_VERSION}): open it with that version; "
                            f"the file was left unchanged"
                        )
                elif "workload" in obj:
                    w = obj["workload"]
                    entry = WorkloadEntry(
                        str(w["hash"]), str(w["target"]), str(w.get("name", "")), str(w.get("ir", ""))
                    )
                    self._workloads_.setdefault((entry.hash, entry.target), entry)
                elif "record" in obj:
                    r = obj["record"]
                    key = (r["hash"], r["target"])
                    entry = self._workloads_.setdefault(key, WorkloadEntry(*key))
                    self._order.append(record_from_json(r, entry))
                else:
                    raise ValueError("neither a workload nor a record")
                known += 1
            except DatabaseError:
                raise
            except (ValueError, KeyError, TypeError) as exc:  # UnicodeDecodeError, JSON errors
                damaged += 1  # a write cut short by a kill, or damaged bytes
                reason = reason or f"line {n}: {str(exc)[:80]}"
        if damaged and not known:
            raise DatabaseError(
                f"{self.path} is not a workbench JSON-lines database (no line "
                f"of it is a workload or a record): give another path"
            )
        self.skipped_lines = damaged
        if damaged:
            self._skipped(damaged, reason)

    def _add(self, records: list[Record]) -> None:
        with self._lock:
            lines = []
            for rec in records:
                assert rec.workload is not None  # Database.add checked it
                key = (rec.workload.hash, rec.target)
                if key not in self._workloads_:
                    w = rec.workload
                    lines.append(
                        {"workload": {"hash": w.hash, "target": rec.target, "name": w.name, "ir": w.ir}}
                    )
                lines.append({"record": record_to_json(rec)})
            text = "".join(json.dumps(obj) + "\n" for obj in lines)
            if self._needs_newline:
                text = "\n" + text
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    _lock_file(fd)  # other processes appending to the file wait: no interleaving
                    if os.fstat(fd).st_size == 0:
                        text = json.dumps({FORMAT_KEY: FORMAT_VERSION}) + "\n" + text
                    data = text.encode("utf-8")
                    while data:
                        data = data[os.write(fd, data) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)  # releases the lock
            except OSError as exc:
                raise DatabaseError(f"{self.path}: cannot write ({exc.strerror})") from None
            self._needs_newline = False
            for rec in records:
                assert rec.workload is not None
                self._workloads_.setdefault((rec.workload.hash, rec.target), rec.workload)
                self._order.append(
                    Record(
                        rec.trace_json,
                        list(rec.latencies),
                        rec.status,
                        rec.error,
                        rec.target,
                        rec.timestamp,
                        rec.predicted,
                        self._workloads_[(rec.workload.hash, rec.target)],
                        meta=dict(rec.meta),
                    )
                )

    def _records(self, hash_: str, targets: Optional[list[str]]) -> list[Record]:
        with self._lock:
            out = [
                r
                for r in self._order
                if r.workload is not None
                and r.workload.hash == hash_
                and (targets is None or r.target in targets)
            ]
            # copies: callers set .func on what they get
            return [
                Record(
                    r.trace_json,
                    list(r.latencies),
                    r.status,
                    r.error,
                    r.target,
                    r.timestamp,
                    r.predicted,
                    r.workload,
                    meta=dict(r.meta),
                )
                for r in out
            ]

    def _workloads(self) -> list[WorkloadEntry]:
        with self._lock:
            return list(self._workloads_.values())

    def _count(self) -> int:
        return len(self._order)
