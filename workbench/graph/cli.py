"""The ``workbench tune-model`` command: a model of the zoo imported, its tasks tuned into one
database, built from it and run beside PyTorch eager in the same process.

    workbench tune-model resnet18 --tiny --trials 64
"""

from __future__ import annotations

import inspect
import sys
import time
from typing import Any

import numpy as np

from ..cli_args import UsageError, positive_int
from ..codegen.timing import WINDOWS, time_runs
from ..tune.cli import _user_error, target_arg
from ..tune.database import Database
from ..tune.tuning import TuneInterrupted
from .executor import build_model, tune_model
from .frontend import from_torch


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "tune-model",
        help="tune a zoo model's tasks into a database, then run it beside PyTorch eager",
        description=(
            "Import a model of workbench.graph.zoo through torch.export (needs the extra 'torch'), "
            "tune its fused tasks with the task scheduler into one database (resumable), build "
            "it from the database (a default schedule where a task has no record), check it "
            "against PyTorch and time both in this process."
        ),
    )
    p.add_argument("model", help="resnet18, resnet34, mobilenet_v2 or bert_layer")
    p.add_argument(
        "--trials",
        type=int,
        default=None,
        help="measured trials over all tasks (default 64 per task; 0: no tuning)",
    )
    p.add_argument("--database", "--db", dest="db", default="model.sqlite", help="database file")
    p.add_argument("--target", type=target_arg, default="llvm")
    p.add_argument("--tiny", action="store_true", help="the tiny variant the tests use (zoo.TINY)")
    p.add_argument(
        "--size",
        nargs="*",
        metavar="KEY=VALUE",
        help="size options of the model (width=8 image=32 classes=10; hidden=64 seq=16 ...)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--strategy", default="evolutionary", choices=["evolutionary", "replay_trace", "replay_func"]
    )
    p.add_argument("--cost-model", default="xgb", choices=["xgb", "random"])
    p.add_argument("--per-iter", type=positive_int, default=None, help="candidates per measured batch")
    p.add_argument("--workers", type=positive_int, default=None, help="build/run worker processes")
    p.set_defaults(fn=_cmd_tune_model)


def _model_size(name: str, tiny: bool, pairs) -> dict:
    """The zoo function's keyword arguments from ``--tiny`` and ``--size``, checked against its
    signature (a misspelt key is a user error, not a TypeError deep in torch)."""
    from .zoo import MODELS, TINY  # the zoo imports torch, an optional extra

    if name not in MODELS:
        raise UsageError(f"unknown model {name!r}; the zoo has {', '.join(MODELS)}")
    known = list(inspect.signature(MODELS[name]).parameters)
    size = dict(TINY[name]) if tiny else {}
    for p in pairs or ():
        key, sep, text = p.partition("=")
        if not sep or key not in known:
            raise UsageError(f"--size expects key=value with a key of {name} ({', '.join(known)}), got {p!r}")
        try:
            value: Any = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise UsageError(f"--size {key}: expected a number, got {text!r}") from None
        if value <= 0:
            raise UsageError(f"--size {key}: expected a positive number, got {text!r}")
        size[key] = value
    return size


def _cmd_tune_model(args) -> int:
    try:
        import torch  # the optional extra 'torch'
    except ImportError:
        return _user_error("tune-model needs PyTorch, the optional extra 'torch' (pip install torch==2.13.0)")
    from . import zoo  # imports torch: only once it is known to be there

    if args.trials is not None and args.trials < 0:
        raise UsageError(f"--trials: expected 0 or more, got {args.trials}")
    size = _model_size(args.model, args.tiny, args.size)
    try:
        module, example = zoo.get(args.model, **size)
    except (TypeError, ValueError, RuntimeError) as exc:  # sizes that do not make a model
        raise UsageError(f"{args.model} {size}: {str(exc).splitlines()[0]}") from None
    graph = from_torch(module, example)
    tasks = graph.task_list()
    print(
        f"{args.model} {size or '(full size)'}: {len(graph.nodes)} operators, "
        f"{len(graph.fuse())} fused groups, {len(tasks)} tasks"
    )
    db = Database.open(args.db)
    trials = 64 * len(tasks) if args.trials is None else args.trials
    t0 = time.monotonic()
    if trials:
        try:
            tune_model(
                graph,
                args.target,
                trials=trials,
                database=db,
                seed=args.seed,
                strategy=args.strategy,
                cost_model=args.cost_model,
                num_trials_per_iter=args.per_iter,
                workers=args.workers,
                verbose=True,
            )
        except TuneInterrupted as stop:
            print(f"workbench: {stop}", file=sys.stderr)
            return 130
    tune_s = time.monotonic() - t0
    model = build_model(graph, args.target, db)
    inputs = [t.numpy() for t in example]
    with torch.no_grad():
        ref = module(*example).numpy()
        # the statistic of model.time below (each repeat its fastest ~1 ms window)
        eager = float(
            time_runs(lambda: module(*example), (), repeat=5, warmup=1, min_repeat_ms=50.0, windows=WINDOWS)
        )
    (out,) = model(*inputs)
    err = float(np.max(np.abs(out - ref)))
    ok = bool(np.allclose(out, ref, rtol=1e-3, atol=1e-3))
    ours = float(model.time(*inputs))
    print(f"{'task':<36}{'weight':>7}  {'best record':>12}")
    for task, rec in zip(tasks, model.records):
        best = f"{rec.latency * 1e3:.4f} ms" if rec is not None else "no record"
        print(f"{task.name:<36}{task.weight:>7}  {best:>12}")
    print(
        f"tasks from {args.db}: {sum(model.tuned)} of {len(tasks)}; "
        f"tuning {trials} trials took {tune_s:.1f} s"
    )
    print(
        f"{args.model}: workbench {ours * 1e3:.3f} ms, PyTorch eager {eager * 1e3:.3f} ms "
        f"({torch.get_num_threads()} threads): {ours / eager:.2f}x eager; "
        f"output {'matches' if ok else 'DIFFERS FROM'} PyTorch (max abs error {err:.2g})"
    )
    return 0 if ok else 1
