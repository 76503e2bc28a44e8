"""How well does the cost model rank candidates it has not seen, after tens of records?

    python bench/cost_model_rank.py DIR [--workloads SFM,C1D,DEP] [--n 16,32] [--splits 10]

DIR holds MetaSchedule JSON databases, one folder per workload (``bench/out/vs_tvm/<run>/tvm``,
or any folder of them): each holds the candidates one tune measured, a realistic training set
(the search's picks, not random points). Every record is imported into workbench (its trace
replayed on the workbench function: the program TVM measured) and its features extracted once.
For each workload and each N: N records drawn at random train a model, the other records of
the workload are ranked by it, and the ranking is scored against their measured latencies:
Spearman's rho and Kendall's tau (of predicted score against throughput) and the top-8 recall
(the share of the 8 fastest among the 8 ranked best). Mean over ``--splits`` random draws.

Variants (all gradient-boosted trees on workbench's features, ``XGBModel``'s settings):

* ``reg``: regression on normalized throughput (best / latency): TVM's objective, and
  XGBModel's before this bench (``XGBModel(objective="reg:squarederror")``);
* ``rank``: the same trees with XGBoost's pairwise ranking objective (``rank:pairwise``),
  XGBModel's default now;
* ``reg+xfer`` / ``rank+xfer``: trained on the N records plus every record of the *other*
  workloads of DIR (transfer: the targets normalized per workload, the ranking pairs formed
  within a workload).

Nothing is timed: the latencies are the ones in the databases.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
from scipy import stats

from workbench.tune import XGBModel
from workbench.tune import features as wb_features
from workbench.tune.database import tvm as tvmdb


def load(directory: str):
    """(workload name, feature rows, latencies) of one TVM database's replayable records."""
    with open(os.path.join(directory, tvmdb.WORKLOAD_FILE)) as f:
        _, module = json.loads(f.readline())
    match = tvmdb.match_workload(tvmdb.module_signature(module), tvmdb.default_candidates())
    if match is None:
        return None
    name, func = match
    funcs, lat = [], []
    with open(os.path.join(directory, tvmdb.RECORD_FILE)) as f:
        for line in f:
            if not line.strip():
                continue
            _, (trace, run_secs, _target, _args) = json.loads(line)
            if not run_secs:
                continue
            try:
                sch = tvmdb.replay(tvmdb.convert_trace(trace), func)
            except tvmdb.TVMImportError:
                continue
            funcs.append(sch.func)
            lat.append(float(np.mean(run_secs)))
    return name, wb_features.extract_many(funcs), np.array(lat)


def throughput(lat: np.ndarray) -> np.ndarray:
    return lat.min() / lat


def train(x, y, qid, objective: str, seed: int):
    import xgboost as xgb

    params = dict(XGBModel(seed=seed).params, objective=objective)
    order = np.argsort(qid, kind="stable")  # a ranking objective wants each group contiguous
    d = xgb.DMatrix(x[order], label=y[order])
    if objective.startswith("rank:"):
        d.set_group(np.unique(qid[order], return_counts=True)[1])
    return xgb.train(params, d, num_boost_round=XGBModel(seed=seed).num_rounds)


def scores(pred: np.ndarray, lat: np.ndarray, k: int = 8) -> tuple[float, float, float]:
    thr = 1.0 / lat
    rho = stats.spearmanr(pred, thr).statistic
    tau = stats.kendalltau(pred, thr).statistic
    k = min(k, len(lat))
    best, picked = set(np.argsort(lat)[:k]), set(np.argsort(-pred, kind="stable")[:k])
    return float(rho), float(tau), len(best & picked) / k


VARIANTS = {
    "reg": ("reg:squarederror", False),
    "rank": ("rank:pairwise", False),
    "reg+xfer": ("reg:squarederror", True),
    "rank+xfer": ("rank:pairwise", True),
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="folder of MetaSchedule databases, one per workload")
    p.add_argument("--workloads", default="SFM,C1D,DEP", help="workloads scored (all of DIR transfer)")
    p.add_argument("--n", default="16,32", help="training records of the scored workload")
    p.add_argument("--splits", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    import xgboost as xgb

    data = {}
    for directory in tvmdb.find_databases(args.dir):
        got = load(directory)
        if got is not None:
            data[got[0]] = got[1:]
    wanted = [w.strip().upper() for w in args.workloads.split(",") if w.strip()]
    sizes = [int(n) for n in args.n.split(",")]
    print(f"# {args.dir}: " + ", ".join(f"{k} {len(v[1])} records" for k, v in data.items()))
    print(f"# mean over {args.splits} random splits: Spearman rho / Kendall tau / top-8 recall")
    head = f"{'wl':<4} {'N':>3} " + " ".join(f"{v:>22}" for v in VARIANTS)
    print(head + "\n" + "-" * len(head))
    rng = np.random.default_rng(args.seed)
    summary = {(v, n): [] for v in VARIANTS for n in sizes}
    for name in wanted:
        if name not in data:
            print(f"{name}: not in {args.dir}")
            continue
        x, lat = data[name]
        others = [(k, v) for k, v in data.items() if k != name]
        for n in sizes:
            if len(lat) < n + 8:
                continue
            cells = {v: [] for v in VARIANTS}
            for s in range(args.splits):
                order = rng.permutation(len(lat))
                tr, te = order[:n], order[n:]
                for v, (objective, xfer) in VARIANTS.items():
                    xs, ys, qs = [x[tr]], [throughput(lat[tr])], [np.zeros(n, dtype=int)]
                    if xfer:
                        for q, (_, (ox, olat)) in enumerate(others, 1):
                            xs.append(ox)
                            ys.append(throughput(olat))
                            qs.append(np.full(len(olat), q))
                    booster = train(np.vstack(xs), np.concatenate(ys), np.concatenate(qs), objective, s)
                    pred = booster.predict(xgb.DMatrix(x[te]))
                    cells[v].append(scores(pred, lat[te]))
            row = []
            for v in VARIANTS:
                m = np.nanmean(np.array(cells[v]), axis=0)
                summary[(v, n)].append(m)
                row.append(f"{m[0]:>6.2f} /{m[1]:>5.2f} /{m[2]:>5.2f}")
            print(f"{name:<4} {n:>3} " + " ".join(f"{c:>22}" for c in row), flush=True)
    for n in sizes:
        row = []
        for v in VARIANTS:
            vals = summary[(v, n)]
            m = np.mean(np.array(vals), axis=0) if vals else [np.nan] * 3
            row.append(f"{m[0]:>6.2f} /{m[1]:>5.2f} /{m[2]:>5.2f}")
        print(f"{'mean':<4} {n:>3} " + " ".join(f"{c:>22}" for c in row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
