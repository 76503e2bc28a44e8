"""Tuning databases: ``Database.open(path)`` picks SQLite (default) or JSON lines by suffix.

Each backend names the suffixes it opens in its class statement; importing this package
imports every backend, so ``Database.open`` knows them all.
"""

from .base import STATUSES, Database, Record, WorkloadEntry, func_hash, target_str, trace_hash
from .jsonl import JSONDatabase
from .sqlite import SQLiteDatabase

__all__ = [
    "Database",
    "SQLiteDatabase",
    "JSONDatabase",
    "Record",
    "WorkloadEntry",
    "STATUSES",
    "func_hash",
    "target_str",
    "trace_hash",
]
