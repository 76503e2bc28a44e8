"""The tuning database: measured records of schedules, keyed by workload and target.

A *workload* is a function up to structure (its :func:`structural_hash`, names of buffers and
variables ignored, as TVM's structural equality ignores them) compiled for one target
string: ``"llvm"`` and ``"llvm -num-cores=4"`` are different workloads. A *record* is one
measured trace of that workload: the trace as JSON data (never pickled code, so loading a
database runs nothing), the latencies of its repeats in seconds, a status, the error if any,
the cost model's prediction and when it was measured::

    db = Database.open("tuning.sqlite")          # or "tuning.jsonl"
    db.add([Record.of(func, "llvm", sch.trace, [1.2e-5, 1.1e-5])])
    rec = db.best(func, "llvm")                  # fastest "ok" record, or None
    sch = rec.schedule()                         # the trace replayed on ``func``

Backends subclass :class:`Database` and implement the five storage methods at the bottom.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence, Union

from ...target import Target
from ...errors import DatabaseWarning
from ...ir.func import PrimFunc
from ...ir.structural import structural_hash
from ...schedule import Schedule, Trace
from ...schedule.trace import JSON_FORMAT

#: the statuses a record can have; only "ok" records have meaningful latencies
STATUSES = ("ok", "build_error", "run_error", "timeout", "wrong_result")

_HASHES: "weakref.WeakKeyDictionary[PrimFunc, str]" = weakref.WeakKeyDictionary()


def func_hash(func: PrimFunc) -> str:
    """The structural hash of ``func`` without buffer names (a workload's key), cached per
    function object (functions are immutable)."""
    h = _HASHES.get(func)
    if h is None:
        h = _HASHES[func] = structural_hash(func, buffer_names=False)
    return h


_ENTRIES: "weakref.WeakKeyDictionary[PrimFunc, dict]" = weakref.WeakKeyDictionary()


def workload_entry(func: PrimFunc, target: Any) -> "WorkloadEntry":
    """The stored form of (``func``, ``target``); cached, since printing the IR takes time."""
    t = target_str(target)
    per_target = _ENTRIES.setdefault(func, {})
    if t not in per_target:
        per_target[t] = WorkloadEntry(func_hash(func), t, func.name, str(func))
    return per_target[t]


def target_str(target: Any) -> str:
    """The canonical text of a target (option order and spacing do not matter)."""
    try:
        return str(Target.of(target))
    except (ValueError, TypeError):
        return str(target)


def trace_json(trace: Any) -> dict:
    """JSON data of a ``Trace`` (or of its JSON text / data, passed through)."""
    if isinstance(trace, str):
        return json.loads(trace)
    if isinstance(trace, dict):
        return trace
    return trace.as_json()


def trace_hash(trace: Any) -> str:
    """Identity of a trace's program for deduplication: its instructions and decisions.

    Pinning flags are left out: pinning a decision does not change the program it gives.
    """
    data = trace_json(trace)
    insts = [{k: v for k, v in inst.items() if k != "pinned"} for inst in data["insts"]]
    text = json.dumps(insts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class WorkloadEntry:
    """A workload as stored: its key, the function's name and IR text (for display)."""

    hash: str
    target: str
    name: str = ""
    ir: str = ""


@dataclass
class Record:
    """One measured candidate.

    ``latencies``: seconds, one per repeat; ``latency`` is their median (``inf`` unless the
    status is ``"ok"``) — not the mean: on a busy machine a parallel kernel now and then
    waits a whole scheduler tick for a descheduled thread, and one such repeat must not
    decide the ranking. ``func`` is the workload's function when the record was obtained
    through one (needed by :meth:`schedule`); ``workload`` is the stored workload key.
    ``meta`` holds the rest as JSON data, among it two warnings the tuner sets: ``"noisy"``
    (the repeats' max / min, when still above the runner's limit after a re-measurement) and
    ``"busy"`` (the 1-minute load average, when it was above the CPUs the tuner could use).
    """

    trace_json: dict
    latencies: list[float]
    status: str = "ok"
    error: str = ""
    target: str = "llvm"
    timestamp: float = field(default_factory=time.time)
    predicted: Optional[float] = None
    workload: Optional[WorkloadEntry] = None
    func: Optional[PrimFunc] = field(default=None, repr=False, compare=False)
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"record status must be one of {STATUSES}, got {self.status!r}")

    @classmethod
    def of(
        cls,
        func: PrimFunc,
        target: Any,
        trace: Any,
        latencies: Sequence[float] = (),
        status: str = "ok",
        error: str = "",
        predicted: Optional[float] = None,
        **meta: Any,
    ) -> "Record":
        """A record of ``func`` on ``target`` (the workload entry is derived from ``func``)."""
        entry = workload_entry(func, target)
        return cls(
            trace_json(trace),
            [float(x) for x in latencies],
            status,
            error,
            entry.target,
            predicted=predicted,
            workload=entry,
            func=func,
            meta=dict(meta),
        )

    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.latencies)

    @property
    def latency(self) -> float:
        """Median of the repeats in seconds; ``inf`` for a failed candidate. A final
        interleaved re-measurement (``meta["final"]["stat"] == "min"``) counts its fastest
        round: other work only ever adds time, and on a busy machine a parallel kernel loses a
        whole scheduler tick now and then (rounds of 55 us beside rounds of 0.7 us measured on
        2 busy cores), so the fastest round is what the candidate does uncontended. With
        ``"median"`` (a runner that times in windows: each round is already its fastest window)
        the median round counts."""
        if not self.ok:
            return float("inf")
        final = self.meta.get("final")
        if isinstance(final, dict) and final.get("stat") == "min":
            return min(self.latencies)
        return statistics.median(self.latencies)

    @property
    def trial(self) -> bool:
        """Whether it is a trial of the search, not a re-measurement of one (``meta["remeasure"]``:
        a busy candidate measured again, or the final interleaved re-measurement)."""
        return "remeasure" not in self.meta

    @property
    def noisy(self) -> bool:
        """Whether its repeats disagreed even when measured again (``meta["noisy"]``)."""
        return "noisy" in self.meta

    @property
    def busy(self) -> bool:
        """Whether other work competed for the CPUs when it was measured (``meta["busy"]``)."""
        return "busy" in self.meta

    @property
    def trace(self):
        """The record's ``Trace`` (parsed from JSON once; no code is evaluated); its
        ``base_func`` is the record's function when the record was read through one. The same
        object every time, so ``rec.trace.with_decision(inst, v)`` takes an ``inst`` read from
        an earlier ``rec.trace``."""
        trace = self.__dict__.get("_trace")
        if trace is None:
            trace = self.__dict__["_trace"] = Trace.from_json(self.trace_json)
        trace.base_func = self.func  # the database sets ``func`` when a query names it
        return trace

    @property
    def trace_hash(self) -> str:
        return trace_hash(self.trace_json)

    def schedule(self, func: Optional[PrimFunc] = None, seed: Optional[int] = None):
        """A fresh ``Schedule`` of the workload with this record's trace replayed on it."""
        func = func if func is not None else self.func
        if func is None:
            raise ValueError("this record was not read through a function; pass it: rec.schedule(func)")
        sch = Schedule(func, seed=seed)
        self.trace.apply_to_schedule(sch)
        return sch

    def __repr__(self) -> str:
        what = f"{self.latency * 1e3:.4f} ms" if self.ok else f"{self.status}: {self.error[:60]}"
        what += "".join(f", {flag}" for flag in ("noisy", "busy") if flag in self.meta)
        name = self.workload.name if self.workload else "?"
        return f"<Record {name} on {self.target}: {what}>"


class Database:
    """Base class: the query API on top of a few storage methods a backend implements.

    Damaged records (bytes that are not text, text that is not JSON, fields of the wrong
    kind) are skipped with a :class:`~workbench.errors.DatabaseWarning` counting them; every
    intact record stays usable. ``damaged`` is that count so far.
    """

    path: Optional[str] = None
    damaged: int = 0

    def _skipped(self, count: int, reason: str) -> None:
        """Note ``count`` damaged records found by a read (warned once per new total)."""
        if count > self.damaged:
            self.damaged = count
            warnings.warn(
                f"{self.path}: {count} damaged record(s) skipped (first: {reason}); "
                f"the intact records are usable; `workbench db repair {self.path} "
                f"--out NEW` copies them to a new file",
                DatabaseWarning,
                stacklevel=3,
            )

    #: the backends ``open`` chooses from: file-name ending -> class, and the default class.
    #: Filled by the backends' class statements (``class JSONDatabase(Database, suffixes=...)``),
    #: so this module imports none of them; the package imports every backend.
    _backends: dict[str, type["Database"]] = {}
    _default_backend: Optional[type["Database"]] = None

    def __init_subclass__(cls, suffixes: Sequence[str] = (), default: bool = False, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        for suffix in suffixes:
            Database._backends[suffix] = cls
        if default:
            Database._default_backend = cls

    @staticmethod
    def open(path: Union[str, os.PathLike, "Database", None] = "tuning.sqlite") -> "Database":
        """Open (creating if needed) a database by file name.

        ``.jsonl`` / ``.json``: :class:`JSONDatabase`; ``":memory:"``, ``"memory"`` or None: an
        in-memory SQLite database; anything else (``.sqlite``, ``.db``, …): SQLite.
        A ``Database`` is returned unchanged.
        """
        if isinstance(path, Database):
            return path
        text = ":memory:" if path is None else os.fspath(path)
        if text == "memory":
            text = ":memory:"
        for suffix, backend in Database._backends.items():
            if text.endswith(suffix):
                return backend(text)  # type: ignore[call-arg]
        assert Database._default_backend is not None, "workbench.tune.database imports its backends"
        return Database._default_backend(text)  # type: ignore[call-arg]

    # queries ---------------------------------------------------------------------------------
    def add(self, records: Iterable[Record]) -> None:
        """Store records durably as one batch (one commit / one fsync)."""
        records = list(records)
        for rec in records:
            if rec.workload is None:
                raise ValueError("a record needs its workload: build it with Record.of(func, ...)")
        if records:
            self._add(records)

    def records(self, func: PrimFunc, target: Any = None, remeasured: bool = False) -> list[Record]:
        """Every trial of ``func`` (on ``target``, or on every target), in measurement order.

        ``remeasured``: also the tuner's re-measurements of trials (``Record.trial`` False: a
        busy candidate measured again, the final interleaved re-measurement), where they came;
        :meth:`best` takes them into account."""
        targets = [target_str(target)] if target is not None else None
        out = self._records(func_hash(func), targets)
        if not remeasured:
            out = [r for r in out if r.trial]
        for rec in out:
            rec.func = func
        return out

    def top_k(self, func: PrimFunc, target: Any, k: int) -> list[Record]:
        """The ``k`` fastest successful trials of ``func`` on ``target``, fastest first, as
        measured (re-measurements left out: :meth:`best` is the tuner's pick)."""
        good = [r for r in self.records(func, target) if r.ok]
        good.sort(key=lambda r: r.latency)
        return good[:k]

    def best(self, func: PrimFunc, target: Any = "llvm") -> Optional[Record]:
        """The tuner's pick for ``func`` on ``target``, or None if no record succeeded.

        Without re-measurements (records whose ``meta`` has ``"remeasure"``), the fastest
        successful record. With them, see :func:`pick`: the fastest of the last interleaved
        final re-measurement, unless a candidate measured since is faster; a trace measured
        again counts with its latest measurement."""
        top = self.top_k(func, target, 1)
        if not top:
            return None
        if not self._has_remeasurements(func, target):
            return top[0]
        return pick(self.records(func, target, remeasured=True))

    def _has_remeasurements(self, func: PrimFunc, target: Any) -> bool:
        """Whether any record of the workload is a re-measurement (backends may answer it
        without reading every record)."""
        return any(not r.trial for r in self.records(func, target, remeasured=True))

    def trace_hashes(self, func: PrimFunc, target: Any) -> set[str]:
        """Hashes of every trace already measured for ``func`` on ``target`` (for resuming)."""
        return {r.trace_hash for r in self.records(func, target)}

    def has(self, func: PrimFunc, target: Any, trace: Any) -> bool:
        """Whether this trace (same instructions and decisions) was measured already."""
        return trace_hash(trace) in self.trace_hashes(func, target)

    def workloads(self) -> list[WorkloadEntry]:
        """Every stored workload (hash, target, function name, IR text)."""
        return self._workloads()

    def records_of(self, entry: WorkloadEntry, remeasured: bool = False) -> list[Record]:
        """Trials (``remeasured``: and re-measurements) of a stored workload entry (when no
        function object is at hand)."""
        out = self._records(entry.hash, [entry.target])
        return out if remeasured else [r for r in out if r.trial]

    def __len__(self) -> int:
        return self._count()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path!r}: {len(self)} records>"

    def close(self) -> None:
        """Release the file (records are already durable)."""

    # storage: what a backend implements -------------------------------------------------------
    def _add(self, records: list[Record]) -> None:
        raise NotImplementedError

    def _records(self, hash_: str, targets: Optional[list[str]]) -> list[Record]:
        raise NotImplementedError

    def _workloads(self) -> list[WorkloadEntry]:
        raise NotImplementedError

    def _count(self) -> int:
        raise NotImplementedError


def latest_per_trace(records: Sequence[Record]) -> list[Record]:
    """The successful records, a trace measured several times counted once, with its latest
    measurement (re-measurements come after what they re-measure), in measurement order."""
    latest: dict[str, Record] = {}
    for rec in records:
        if rec.ok:
            latest.pop(rec.trace_hash, None)  # re-inserted: its place is the latest one's
            latest[rec.trace_hash] = rec
    return list(latest.values())


def pick(records: Sequence[Record]) -> Optional[Record]:
    """The tuner's pick among ``records`` (one workload, in measurement order).

    The last *final* re-measurement (records with ``meta["final"]``: the top candidates timed
    in alternation, round after round, so that they were compared under the same conditions)
    decides among what it re-measured; what was measured before it is superseded (it chose
    its candidates from those), what was measured after competes with its latest
    measurement. Without a final re-measurement: the fastest latest measurement of each
    trace (a candidate measured while the machine was busy and again once it was quiet
    counts with the quiet figure)."""
    group = None
    for rec in records:
        if rec.ok and isinstance(rec.meta.get("final"), dict):
            group = rec.meta["final"].get("group")
    if group is None:
        pool = latest_per_trace(records)
    else:
        last = max(i for i, r in enumerate(records) if r.ok and _group_of(r) == group)
        finals = [r for r in records if r.ok and _group_of(r) == group]
        pool = finals + latest_per_trace(records[last + 1 :])
    return min(pool, key=lambda r: r.latency) if pool else None


def _group_of(rec: Record) -> Any:
    final = rec.meta.get("final")
    return final.get("group") if isinstance(final, dict) else None


def record_to_json(rec: Record) -> dict:
    """A record's fields as JSON data (the workload by key)."""
    assert rec.workload is not None  # a stored record: Database.add checked it
    return {
        "hash": rec.workload.hash,
        "target": rec.target,
        "trace": rec.trace_json,
        "latencies": rec.latencies,
        "status": rec.status,
        "error": rec.error,
        "timestamp": rec.timestamp,
        "predicted": rec.predicted,
        "meta": rec.meta,
    }


def record_from_json(data: dict, entry: WorkloadEntry) -> Record:
    """A record from its stored JSON fields; ValueError when they are damaged."""
    if not isinstance(data, dict):
        raise ValueError("a record must be a JSON object")
    try:
        return checked_record(
            data["trace"],
            data["latencies"],
            data["status"],
            data.get("error", ""),
            data["target"],
            data.get("timestamp", 0.0),
            data.get("predicted"),
            entry,
            data.get("meta") or {},
        )
    except KeyError as exc:
        raise ValueError(f"field {exc} missing") from None


def checked_record(
    trace: Any,
    latencies: Any,
    status: Any,
    error: Any,
    target: Any,
    timestamp: Any,
    predicted: Any,
    entry: WorkloadEntry,
    meta: Any,
) -> Record:
    """A :class:`Record` from stored fields, checked for shape (never evaluated): ValueError
    naming the damaged field, so the record is skipped rather than guessed at. The trace must
    be trace JSON data; its instructions are checked when it is replayed."""
    if not (
        isinstance(trace, dict)
        and trace.get("format") == JSON_FORMAT
        and isinstance(trace.get("insts"), list)
    ):
        raise ValueError("the trace is not workbench trace data")
    if not (
        isinstance(latencies, list)
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in latencies)
    ):
        raise ValueError("latencies are not a list of numbers")
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}")
    if not isinstance(error, str) or not isinstance(target, str):
        raise ValueError("error and target must be text")
    if not isinstance(timestamp, (int, float)) or not isinstance(meta, dict):
        raise ValueError("timestamp must be a number and meta an object")
    if predicted is not None and not isinstance(predicted, (int, float)):
        raise ValueError("predicted must be a number")
    return Record(
        trace,
        [float(x) for x in latencies],
        status,
        error,
        target,
        float(timestamp),
        predicted,
        entry,
        meta=meta,
    )
