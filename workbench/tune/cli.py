"""The ``workbench tune``, ``best``, ``import-tvm`` and ``export-tvm`` subcommands.

workbench tune GMM --trials 64                    tune at the paper shape into tuning.sqlite
workbench tune all --small --trials 8             every workload, small shapes, 8 trials each
workbench tune C2D --shape h=28 w=28 --db c2d.jsonl
workbench tune GMM --dask tcp://host:8786         measure on Dask workers (docs/distributed.md)
workbench best GMM                                the best schedule's IR and trace
workbench import-tvm records_zen3/ --db t.sqlite  import TVM MetaSchedule JSON databases
workbench export-tvm GMM --db t.sqlite [--all]    the best trace as TVM Python
workbench db check t.sqlite                       is the file intact? (records, damage)
workbench db repair t.sqlite --out fixed.sqlite   copy every intact record to a new file
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, Optional

from .. import workloads
from ..cli_args import UsageError, positive_int, shape_kwargs
from ..target import Target
from ..errors import DatabaseError
from .dask_runner import DaskRunner
from .database import Database
from .database import tvm as tvmdb
from .database.base import func_hash
from .database.repair import check, repair
from .learned.cli import add_parsers as add_learn_parsers
from .learned.cli import load_strategy
from .task import TuneTask
from .tuning import TuneInterrupted, tune


def target_arg(text: str) -> Target:
    """argparse type: a target workbench understands (``llvm -num-cores=4``, ``cuda``), parsed
    once here; the tuner and the database take the object."""
    try:
        return Target(text)
    except (ValueError, TypeError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parsers(sub: Any) -> None:
    """Register the subcommands on ``sub``."""
    p = sub.add_parser(
        "tune",
        help="tune a workload (or all) into a database",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", help="a workload name, or 'all'")
    p.add_argument("--trials", type=positive_int, default=64, help="measured trials per workload")
    p.add_argument("--target", type=target_arg, default="llvm")
    p.add_argument("--db", default="tuning.sqlite", help="database file (.sqlite or .jsonl)")
    p.add_argument("--shape", nargs="*", metavar="KEY=INT", help="shape overrides")
    p.add_argument("--small", action="store_true", help="each workload's small test shape")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--strategy",
        default="evolutionary",
        choices=["evolutionary", "replay_trace", "replay_func", "learned"],
    )
    p.add_argument("--model", help="decision model folder for --strategy learned (from `workbench learn`)")
    p.add_argument("--cost-model", default="xgb", choices=["xgb", "random"])
    p.add_argument("--per-iter", type=positive_int, default=16, help="candidates per measured batch")
    p.add_argument("--workers", type=positive_int, default=None, help="build/run worker processes")
    p.add_argument(
        "--dask",
        metavar="ADDRESS",
        default=None,
        help="measure on the workers of a Dask scheduler (tcp://host:8786); see docs/distributed.md",
    )
    p.set_defaults(fn=_cmd_tune)

    p = sub.add_parser("best", help="print the best schedule found for a workload")
    p.add_argument("name")
    p.add_argument("--target", type=target_arg, default="llvm")
    p.add_argument("--db", default="tuning.sqlite")
    p.add_argument("--shape", nargs="*", metavar="KEY=INT")
    p.add_argument("--small", action="store_true")
    p.set_defaults(fn=_cmd_best)
    add_tvm_parsers(sub)
    add_learn_parsers(sub)

    p = sub.add_parser("db", help="check a database file, or copy its intact records")
    dbsub = p.add_subparsers(dest="db_command", required=True)
    q = dbsub.add_parser("check", help="read every record and say what is damaged")
    q.add_argument("path")
    q.set_defaults(fn=_cmd_db_check)
    q = dbsub.add_parser("repair", help="copy every intact record to a new database")
    q.add_argument("path")
    q.add_argument("--out", required=True, help="the new database (.sqlite or .jsonl)")
    q.set_defaults(fn=_cmd_db_repair)


def _cmd_db_check(args) -> int:
    report = check(args.path)
    print(report)
    return 0 if report.ok else 1


def _cmd_db_repair(args) -> int:
    print(repair(args.path, args.out))
    return 0


def _tasks(args):
    shape = shape_kwargs(args.shape)
    if shape and args.name == "all":
        raise UsageError("--shape applies to one workload; use --small with 'all'")
    try:
        names = workloads.names() if args.name == "all" else [workloads.lookup(args.name).name]
        return [
            TuneTask.workload(n, **{**(workloads.small(n) if args.small else {}), **shape}) for n in names
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None


def _cmd_tune(args) -> int:
    import os
    import shlex
    import signal
    import threading

    tasks = _tasks(args)
    strategy = args.strategy
    if strategy == "learned":
        strategy, problem = load_strategy(args.model)
        if problem:
            return _user_error(problem)
    db = Database.open(args.db)  # a damaged or unwritable file: one line, before any work
    runner = None
    if args.dask:
        try:
            runner = DaskRunner(args.dask)
        except (ImportError, ConnectionError, TypeError, ValueError) as exc:
            return _user_error(exc)
    previous_sigterm = None
    if threading.current_thread() is threading.main_thread():
        # `kill -INT` stops a tune even when its shell started it with SIGINT ignored (a
        # background job of a script)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        # SIGTERM (`kill`, `timeout`, a batch system's time limit) stops it as Ctrl-C does:
        # passed on as SIGINT, so the finished records are committed the same way
        previous_sigterm = signal.signal(signal.SIGTERM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
    try:
        tune(
            tasks,
            target=args.target,
            trials=args.trials * len(tasks),
            database=db,
            seed=args.seed,
            strategy=strategy,
            cost_model=args.cost_model,
            num_trials_per_iter=args.per_iter,
            workers=args.workers,
            verbose=True,
            task_scheduler="round_robin" if args.name == "all" else "gradient",
            runner=runner,
        )
    except TuneInterrupted as stop:
        stop.resume = shlex.join(["workbench", *getattr(args, "argv", ["tune", args.name])])
        print(f"workbench: {stop}", file=sys.stderr)
        return 130
    finally:
        if runner is not None:
            runner.close()
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)
    ok = all(db.best(t.func, args.target) is not None for t in tasks)
    print(f"records in {args.db}: {len(db)}")
    if args.strategy == "learned" and strategy.drawn:
        print(
            f"learned sampler: {100 * strategy.rejection_rate:.0f}% of {strategy.drawn} "
            f"proposals rejected by replay or the postprocessors (and redrawn)"
        )
    return 0 if ok else 1


def _cmd_best(args) -> int:
    task = _tasks(args)[0]
    db, problem = _open_db(args.db, must_exist=True)
    if problem:
        return _user_error(problem)
    rec = db.best(task.func, args.target)
    if rec is None:
        n = len(db.records(task.func, args.target))
        print(
            f"no successful record of {task.name} {task.shape or ''} on {args.target} in "
            f"{args.db} ({n} records){_same_name_elsewhere(db, task.func)}"
        )
        return 1
    sch = rec.schedule()
    rate = ""
    if task.flops and math.isfinite(rec.latency):
        rate = f", {task.flops / rec.latency / 1e9:.1f} GFLOP/s"
    print(
        f"# {task.name} on {rec.target}: {rec.latency * 1e3:.4f} ms{rate} "
        f"(best of {len(db.records(task.func, args.target))} records in {args.db})"
    )
    print(sch.func)
    print("\n# trace")
    print(sch.trace)
    return 0


def _same_name_elsewhere(db, func) -> str:
    """A hint when a file holds records of workloads named like ``func`` under other keys:
    another shape or target, or keys of a workbench before 2026-11-25 (names and a reduction's
    reads entered the key then)."""
    key = func_hash(func)
    others = [e for e in db.workloads() if e.name == func.name and e.hash != key]
    if not others:
        return ""
    n = sum(len(db.records_of(e)) for e in others)
    return (
        f"; it holds {n} records of {len(others)} other workload(s) named {func.name!r}: another "
        f"shape or target, or written by a workbench before 2026-11-25, whose workload keys differ"
    )


# ------------------------------------------------------------------------------------------
# TVM MetaSchedule databases: workbench import-tvm / export-tvm


def add_tvm_parsers(sub: Any) -> None:
    """``import-tvm DIR [--db OUT]`` and ``export-tvm WL [--db PATH] [--all]``."""
    p = sub.add_parser(
        "import-tvm",
        help="import TVM MetaSchedule tuning records",
        description="Import a TVM MetaSchedule JSON database (a directory with "
        "database_workload.json and database_tuning_record.json, or a directory "
        "of such directories): each record's trace is converted, replayed on the "
        "matching workbench workload and stored with TVM's run time.",
    )
    p.add_argument("dir", help="TVM database directory, or a directory of them")
    p.add_argument("--db", default="tuning.sqlite", help="workbench database to add to")
    p.add_argument(
        "--target",
        default=None,
        help="store the records under this target (default: TVM's, e.g. 'llvm -mcpu=znver3 -num-cores=2')",
    )
    p.set_defaults(fn=_cmd_import_tvm)

    p = sub.add_parser(
        "export-tvm",
        help="print a workload's best trace as TVM Python",
        description="Print the tuner's pick for a workload (db.best) as Python for TVM "
        "0.27 (run it with `sch`, a tvm.s_tir.Schedule of the same te_workload "
        "function).",
    )
    p.add_argument("name")
    p.add_argument("--db", default="tuning.sqlite")
    p.add_argument("--target", default=None, help="only records of this target (default: any)")
    p.add_argument(
        "--all",
        action="store_true",
        help="every successful record: the pick (db.best), then the rest by latency",
    )
    p.add_argument("--shape", nargs="*", metavar="KEY=INT")
    p.add_argument("--small", action="store_true")
    p.set_defaults(fn=_cmd_export_tvm)


def _user_error(message: Any) -> int:
    print(f"workbench: {message}", file=sys.stderr)
    return 2


def _open_db(path: str, must_exist: bool):
    """The database at ``path``, or the one-line reason it cannot be opened."""
    import os

    if must_exist and not os.path.exists(path):
        return None, f"{path}: no such database"
    try:
        db = Database.open(path)
    except DatabaseError as exc:
        return None, str(exc)
    return db, None


def _cmd_import_tvm(args) -> int:
    target = None
    try:
        tvmdb.find_databases(args.dir)
        if args.target is not None:
            target = Target(args.target)
    except (tvmdb.TVMImportError, ValueError) as exc:
        return _user_error(exc)
    db, problem = _open_db(args.db, must_exist=False)
    if problem:
        return _user_error(problem)
    with db:
        report = tvmdb.import_tvm(args.dir, db, target=target)
        total = len(db)
    for error in report.errors:
        print(f"workbench: {error}", file=sys.stderr)
    if not report.workloads:
        return 2
    for w in report.workloads:
        best = f"best {w.best * 1e3:.4f} ms" if w.best is not None else "none replayed"
        dup = f", {w.duplicates} already stored" if w.duplicates else ""
        print(
            f"{w.name:5s} {w.imported:4d} imported {w.failed:4d} failed{dup}  {best}"
            f"  on {w.target or '?'}  ({w.source})"
        )
        for line, reason in w.failures[:3]:
            print(f"      record {line}: {reason}")
    print(f"records in {args.db}: {total}")
    return 1 if report.failed or report.errors else 0


def _best_of(db: Any, func: Any, target: Optional[str]) -> Any:
    """``db.best`` on ``target``, or over every target the workload has records on (the fastest
    of their picks)."""
    if target is not None:
        return db.best(func, target)
    picks = [db.best(func, t) for t in dict.fromkeys(r.target for r in db.records(func) if r.ok)]
    picks = [p for p in picks if p is not None]
    return min(picks, key=lambda r: r.latency) if picks else None


def _cmd_export_tvm(args) -> int:
    try:
        name = workloads.lookup(args.name).name
        shape = {**(workloads.small(name) if args.small else {}), **shape_kwargs(args.shape)}
        func = workloads.get(name, **shape)
    except (KeyError, TypeError) as exc:
        return _user_error(str(exc).strip("'\""))
    db, problem = _open_db(args.db, must_exist=True)
    if problem:
        return _user_error(problem)
    with db:
        records = sorted((r for r in db.records(func, args.target) if r.ok), key=lambda r: r.latency)
        # the tuner's pick first (db.best: after a busy tune, the final interleaved
        # re-measurement's winner), not the trial that was fastest as first measured
        best = _best_of(db, func, args.target) if records else None
    if best is not None:
        records = [best] + [r for r in records if r.trace_hash != best.trace_hash]
    if not records:
        where = f" on {args.target}" if args.target else ""
        print(f"workbench: no successful record of {name} {shape or ''}{where} in {args.db}", file=sys.stderr)
        return 1
    for k, rec in enumerate(records if args.all else records[:1]):
        origin = " (imported from TVM)" if rec.meta.get("source") == "tvm" else ""
        try:
            text = tvmdb.to_tvm_python(rec)
        except ValueError as exc:
            print(f"workbench: record {k}: {exc}", file=sys.stderr)
            return 1
        print(
            ("\n" if k else "") + f"# {name} on {rec.target}: {rec.latency * 1e3:.4f} ms"
            f"{origin}; sch: a tvm.s_tir.Schedule of the same workload"
        )
        print(text)
    return 0
