"""The ``workbench tune`` and ``workbench best`` subcommands.

    workbench tune GMM --trials 64                    tune at the paper shape into tuning.sqlite
    workbench tune all --small --trials 8             every workload, small shapes, 8 trials each
    workbench tune C2D --shape h=28 w=28 --db c2d.jsonl
    workbench best GMM                                the best schedule's IR and trace
"""
from __future__ import annotations

import argparse
import math
from typing import Any


def add_parsers(sub: Any, shape_kwargs) -> None:
    """Register the subcommands on ``sub`` (``shape_kwargs`` parses ``--shape k=v`` pairs)."""
    p = sub.add_parser("tune", help="tune a workload (or all) into a database",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", help="a workload name, or 'all'")
    p.add_argument("--trials", type=int, default=64, help="measured trials per workload")
    p.add_argument("--target", default="llvm")
    p.add_argument("--db", default="tuning.sqlite", help="database file (.sqlite or .jsonl)")
    p.add_argument("--shape", nargs="*", metavar="KEY=INT", help="shape overrides")
    p.add_argument("--small", action="store_true", help="each workload's small test shape")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--strategy", default="evolutionary",
                   choices=["evolutionary", "replay_trace", "replay_func"])
    p.add_argument("--cost-model", default="xgb", choices=["xgb", "random"])
    p.add_argument("--per-iter", type=int, default=16, help="candidates per measured batch")
    p.add_argument("--workers", type=int, default=None, help="build/run worker processes")
    p.set_defaults(fn=lambda a: _cmd_tune(a, shape_kwargs))

    p = sub.add_parser("best", help="print the best schedule found for a workload")
    p.add_argument("name")
    p.add_argument("--target", default="llvm")
    p.add_argument("--db", default="tuning.sqlite")
    p.add_argument("--shape", nargs="*", metavar="KEY=INT")
    p.add_argument("--small", action="store_true")
    p.set_defaults(fn=lambda a: _cmd_best(a, shape_kwargs))


def _tasks(args, shape_kwargs):
    from .. import workloads
    from .task import TuneTask
    names = workloads.names() if args.name == "all" else [workloads.lookup(args.name).name]
    shape = shape_kwargs(args.shape)
    if shape and args.name == "all":
        raise SystemExit("--shape applies to one workload; use --small with 'all'")
    return [TuneTask.workload(n, **{**(workloads.small(n) if args.small else {}), **shape})
            for n in names]


def _cmd_tune(args, shape_kwargs) -> int:
    from .tuning import tune
    tasks = _tasks(args, shape_kwargs)
    db = tune(tasks, target=args.target, trials=args.trials * len(tasks), database=args.db,
              seed=args.seed, strategy=args.strategy, cost_model=args.cost_model,
              num_trials_per_iter=args.per_iter, workers=args.workers, verbose=True,
              task_scheduler="round_robin" if args.name == "all" else "gradient")
    ok = all(db.best(t.func, args.target) is not None for t in tasks)
    print(f"records in {args.db}: {len(db)}")
    return 0 if ok else 1


def _cmd_best(args, shape_kwargs) -> int:
    from .database import Database
    task = _tasks(args, shape_kwargs)[0]
    db = Database.open(args.db)
    rec = db.best(task.func, args.target)
    if rec is None:
        n = len(db.records(task.func, args.target))
        print(f"no successful record of {task.name} {task.shape or ''} on {args.target} in "
              f"{args.db} ({n} records)")
        return 1
    sch = rec.schedule()
    rate = ""
    if task.flops and math.isfinite(rec.latency):
        rate = f", {task.flops / rec.latency / 1e9:.1f} GFLOP/s"
    print(f"# {task.name} on {rec.target}: {rec.latency * 1e3:.4f} ms{rate} "
          f"(best of {len(db.records(task.func, args.target))} records in {args.db})")
    print(sch.func)
    print("\n# trace")
    print(sch.trace)
    return 0
