"""``workbench learn``: train the decision model from databases of measured records.

workbench learn --db C2D.sqlite --db TBG.sqlite --out model/
workbench tune GMM --strategy learned --model model/
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from .cost import DecisionAwareModel
from .model import DecisionModel, tasks_of
from .strategy import RANKER_FILE, LearnedSampling


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "learn",
        help="train the learned decision sampler from databases",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--db",
        action="append",
        required=True,
        metavar="PATH",
        help="a database of measured records (.sqlite or .jsonl); repeat for more",
    )
    p.add_argument("--out", required=True, help="folder to write the model into")
    p.add_argument("--target", default=None, help="only records of this target (default: all)")
    p.add_argument("--backend", default="xgb", choices=["xgb", "linear"])
    p.add_argument("--temperature", type=float, default=0.5, help="proposal temperature (below 1: sharper)")
    p.add_argument(
        "--no-ranker", action="store_true", help="do not pre-train the cost model that ranks the proposals"
    )
    p.set_defaults(fn=_cmd_learn)


def _cmd_learn(args) -> int:
    for path in args.db:
        if not os.path.exists(path):
            return _error(f"{path}: no such database")
    if not args.temperature > 0:
        return _error(f"--temperature must be positive, got {args.temperature}")
    t0 = time.monotonic()
    try:
        tasks = tasks_of(args.db, args.target)
        model = DecisionModel(backend=args.backend, temperature=args.temperature)
        model.fit(list(tasks.values()))
    except ValueError as exc:
        return _error(f"{', '.join(args.db)}: {exc}")
    model.save(args.out)
    info = model.trained_on
    print(
        f"decision model ({args.backend}) trained on {info['records']} records of "
        f"{info['tasks']} tasks ({info['rows']} decisions) in {time.monotonic() - t0:.1f} s "
        f"-> {args.out}"
    )
    if not args.no_ranker:
        t0 = time.monotonic()
        ranker = DecisionAwareModel.pretrained(args.db)
        ranker.save(os.path.join(args.out, RANKER_FILE))
        print(
            f"ranker (decision-aware cost model) pre-trained on {len(ranker.latencies)} "
            f"records in {time.monotonic() - t0:.1f} s -> {os.path.join(args.out, RANKER_FILE)}"
        )
    return 0


def load_strategy(model_dir: Any):
    """The ``LearnedSampling`` strategy for ``tune --strategy learned --model DIR``, or the
    one-line reason it cannot be made."""
    if not model_dir:
        return None, "--strategy learned needs --model DIR (train one with `workbench learn`)"
    try:
        return LearnedSampling(model_dir), None
    except (OSError, ValueError) as exc:
        return None, str(exc)


def _error(message: str) -> int:
    print(f"workbench: {message}", file=sys.stderr)
    return 2
