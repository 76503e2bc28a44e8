"""``JSONDatabase``: the portable format — one JSON object per line, appended per batch.

Lines are ``{"workload": {hash, target, name, ir}}`` (once per workload, before its records)
and ``{"record": {hash, target, trace, latencies, status, error, timestamp, predicted, meta}}``.
Each batch is appended and fsync'ed before ``add`` returns. A line cut short by a kill in the
middle of a write is skipped on loading, so every batch written before it survives.
"""
from __future__ import annotations

import json
import os
import threading
from typing import Optional

from .base import (Database, Record, WorkloadEntry, record_from_json, record_to_json)


class JSONDatabase(Database):
    """Records in a JSON-lines file, all held in memory once loaded."""

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

    def _load(self) -> None:
        with open(self.path, "r", encoding="utf-8") as f:
            text = f.read()
        self._needs_newline = bool(text) and not text.endswith("\n")
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                self.skipped_lines += 1  # a write cut short by a kill
                continue
            if "workload" in obj:
                w = obj["workload"]
                entry = WorkloadEntry(w["hash"], w["target"], w.get("name", ""), w.get("ir", ""))
                self._workloads_.setdefault((entry.hash, entry.target), entry)
            elif "record" in obj:
                r = obj["record"]
                key = (r["hash"], r["target"])
                entry = self._workloads_.setdefault(key, WorkloadEntry(*key))
                self._order.append(record_from_json(r, entry))

    def _add(self, records: list[Record]) -> None:
        with self._lock:
            lines = []
            for rec in records:
                key = (rec.workload.hash, rec.target)
                if key not in self._workloads_:
                    w = rec.workload
                    lines.append({"workload": {"hash": w.hash, "target": rec.target,
                                               "name": w.name, "ir": w.ir}})
                lines.append({"record": record_to_json(rec)})
            text = "".join(json.dumps(obj) + "\n" for obj in lines)
            if self._needs_newline:
                text = "\n" + text
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            self._needs_newline = False
            for rec in records:
                self._workloads_.setdefault((rec.workload.hash, rec.target), rec.workload)
                self._order.append(Record(rec.trace_json, list(rec.latencies), rec.status, rec.error,
                                      rec.target, rec.timestamp, rec.predicted,
                                      self._workloads_[(rec.workload.hash, rec.target)],
                                      meta=dict(rec.meta)))

    def _records(self, hash_: str, targets: Optional[list[str]]) -> list[Record]:
        with self._lock:
            out = [r for r in self._order
                   if r.workload.hash == hash_ and (targets is None or r.target in targets)]
            # copies: callers set .func on what they get
            return [Record(r.trace_json, list(r.latencies), r.status, r.error, r.target,
                           r.timestamp, r.predicted, r.workload, meta=dict(r.meta)) for r in out]

    def _workloads(self) -> list[WorkloadEntry]:
        with self._lock:
            return list(self._workloads_.values())

    def _count(self) -> int:
        return len(self._order)
