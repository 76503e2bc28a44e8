"""Learned sampling (issue 17) on workloads held out from training, side by side in one run.

    python bench/learned.py                         # generate data if missing, train, tune, table
    python bench/learned.py --workloads GMM,C1D --data /tmp/ld

1. Training data: the databases of ``bench/learned_data.py`` (8 workloads x 2 small shapes,
   tuned on this machine; generated first when ``--data`` has none).
2. Model choice: leave one training workload out, train on the other seven, and score the
   held-out workload's fast records (its top 20 %): bits per decision gained over uniform
   sampling (log2 p_model - log2 p_uniform of the decision the fast record made; tilings and
   categoricals — a compute location's valid set needs the live schedule), for the xgboost
   and the logistic-regression backend.
3. Tuning each held-out workload (GMM, C1D, DEP, SFM at the paper's shapes) with the learned
   sampler (32 trials), evolutionary search (64), random search (32) and the evolutionary
   search seeded by the learned sampler (32): best latency after 10 and 32 measurements and
   the trials each needs to reach 95 % of evolutionary search's 64-trial best (``>N``: not
   within its N). Latencies are as measured while tuning (busy/noisy records counted).
4. Cost models on held-out records: rank correlation (Spearman) and top-16 recall of
   ``XGBModel`` (before: program features, regression) and ``DecisionAwareModel`` (after:
   + decisions, pairwise ranking; and + pre-training on the training databases) when trained
   on 16 / 32 / 64 records of a held-out workload and tested on its other records (mean of 5
   random splits).

The tuning databases stay in ``--out`` (default bench/out/learned_bench): running again
reuses finished runs (a tune resumes from its database) and re-prints the table.
"""
from __future__ import annotations

import argparse
import copy
import glob
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import workbench as wb  # noqa: E402
from workbench.tune import (Database, EvolutionarySearch, MeasureResult, ReplayFunc,  # noqa: E402
                            TuneTask, XGBModel, tune)
from workbench.tune.database.base import func_hash  # noqa: E402
from workbench.tune.learned import (DecisionAwareModel, DecisionModel,  # noqa: E402
                                    LearnedSampling, rank_metrics, tasks_of)
from workbench.tune.learned.model import tilings  # noqa: E402
from learned_data import TRAIN_SHAPES, generate  # noqa: E402

HELD_OUT = ["GMM", "C1D", "DEP", "SFM"]


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


# 2. model choice ------------------------------------------------------------------------------

def uniform_size(word) -> int:
    if word.kind == "tile":
        return len(tilings(word.extent, word.n, word.max_inner))
    return len(word.candidates)


def bits_gained(model: DecisionModel, records, top_fraction=0.2) -> tuple[float, int]:
    """Mean log2 p_model - log2 p_uniform over the tile/categorical decisions of the fast
    records (the top ``top_fraction`` of the task)."""
    lat = np.array([r[1] for r in records])
    ok = np.isfinite(lat)
    cut = np.quantile(lat[ok], top_fraction)
    gains = []
    for sentence, latency in records:
        if latency > cut:
            continue
        for k, word in enumerate(sentence.words):
            if word.kind == "loc":
                continue
            cands = (tilings(word.extent, word.n, word.max_inner) if word.kind == "tile"
                     else list(range(len(word.candidates))))
            if word.decision not in cands or len(cands) > 600:
                continue
            p = model.probabilities(sentence.workload, sentence.target, sentence.words[:k],
                                    word, cands, k, len(sentence.words), temperature=1.0)
            gains.append(math.log2(max(p[cands.index(word.decision)], 1e-300))
                         + math.log2(len(cands)))
    return (float(np.mean(gains)) if gains else float("nan")), len(gains)


def choose_model(data_paths):
    by_workload = {os.path.basename(p).split(".")[0]: tasks_of([p]) for p in data_paths}
    print("\n## 2. model choice: leave one training workload out; bits per decision gained "
          "over uniform on its fast records (higher is better; 0 = uniform)")
    print(f"{'held out':<9}" + "".join(f"{b:>10}" for b in ("xgb", "linear")) + f"{'decisions':>11}"
          f"{'train s xgb':>12}{'lin':>6}")
    totals = {"xgb": [], "linear": []}
    for held, tasks in by_workload.items():
        train = [recs for w, t in by_workload.items() if w != held for recs in t.values()]
        test = list(tasks.values())
        row, secs = [], []
        for backend in ("xgb", "linear"):
            t0 = time.monotonic()
            model = DecisionModel(backend=backend).fit(train)
            secs.append(time.monotonic() - t0)
            scores = [bits_gained(model, recs) for recs in test]
            n = sum(c for _, c in scores)
            mean = sum(g * c for g, c in scores if c) / max(n, 1)
            totals[backend].append(mean)
            row.append((mean, n))
        print(f"{held:<9}" + "".join(f"{m:>10.2f}" for m, _ in row) + f"{row[0][1]:>11}"
              f"{secs[0]:>12.1f}{secs[1]:>6.1f}", flush=True)
    means = {b: float(np.mean(v)) for b, v in totals.items()}
    print(f"{'mean':<9}" + "".join(f"{means[b]:>10.2f}" for b in ("xgb", "linear")))
    return max(means, key=means.get), means


# 3. tuning -----------------------------------------------------------------------------------

def run(name, label, strategy, trials, out_dir, seed):
    task = TuneTask.workload(name)
    path = os.path.join(out_dir, f"{name}-{label}.sqlite")
    t0 = time.monotonic()
    db = tune(task, trials=trials, database=path, seed=seed, strategy=strategy,
              num_trials_per_iter=16, verbose=False, baseline=False)
    recs = db.records(task.func, "llvm")
    curve = list(np.minimum.accumulate([r.latency for r in recs])) if recs else []
    info = {"curve": curve, "busy": sum(r.busy for r in recs), "noisy": sum(r.noisy for r in recs),
            "seconds": time.monotonic() - t0, "records": recs, "func": task.func,
            "strategy": strategy}
    db.close()
    return info


def best_after(curve, k):
    return curve[min(k, len(curve)) - 1] if curve else math.inf


def trials_to(curve, goal):
    for k, best in enumerate(curve, 1):
        if best <= goal:
            return str(k)
    return f">{len(curve)}"


def tune_held_out(names, model, out_dir, seed):
    print("\n## 3. held-out workloads (paper shapes); ms as measured while tuning")
    head = (f"{'wl':<4} {'learned@10':>10} {'@32':>8} {'evo@10':>8} {'@32':>8} {'@64':>8} "
            f"{'rand@10':>8} {'@32':>8} {'evo+L@10':>9} {'@32':>8} | trials to 95% of evo@64: "
            f"{'learned':>7} {'evo':>4} {'rand':>5} {'evo+L':>5}  rej%  busy/noisy")
    print(head + "\n" + "-" * len(head), flush=True)
    runs = {}
    for name in names:
        learned = LearnedSampling(model)
        seeded = LearnedSampling(model)
        r = {"evo": run(name, "evo", EvolutionarySearch(), 64, out_dir, seed),
             "rand": run(name, "rand", ReplayFunc(), 32, out_dir, seed),
             "learned": run(name, "learned", learned, 32, out_dir, seed),
             "evoL": run(name, "evo_learned_init", EvolutionarySearch(init_sampler=seeded), 32,
                         out_dir, seed)}
        runs[name] = r
        goal = best_after(r["evo"]["curve"], 64) / 0.95
        ms = lambda v: f"{v * 1e3:.4f}" if math.isfinite(v) else "-"  # noqa: E731
        rej = learned.rejection_rate if learned.drawn else float("nan")
        flags = "/".join(str(sum(x[f] for x in r.values())) for f in ("busy", "noisy"))
        total = sum(len(x["records"]) for x in r.values())
        print(f"{name:<4} {ms(best_after(r['learned']['curve'], 10)):>10} "
              f"{ms(best_after(r['learned']['curve'], 32)):>8} "
              f"{ms(best_after(r['evo']['curve'], 10)):>8} {ms(best_after(r['evo']['curve'], 32)):>8} "
              f"{ms(best_after(r['evo']['curve'], 64)):>8} "
              f"{ms(best_after(r['rand']['curve'], 10)):>8} {ms(best_after(r['rand']['curve'], 32)):>8} "
              f"{ms(best_after(r['evoL']['curve'], 10)):>9} {ms(best_after(r['evoL']['curve'], 32)):>8} | "
              f"{'':>24}{trials_to(r['learned']['curve'], goal):>7} "
              f"{trials_to(r['evo']['curve'], goal):>4} {trials_to(r['rand']['curve'], goal):>5} "
              f"{trials_to(r['evoL']['curve'], goal):>5}  {100 * rej:4.0f}  {flags} of {total}",
              flush=True)
    return runs


# 4. cost models ------------------------------------------------------------------------------

def measured(records, func):
    cands, results = [], []
    for rec in records:
        try:
            sch = rec.schedule(func)
        except Exception:
            continue
        cands.append(sch)
        results.append(MeasureResult(rec.status, rec.latencies, rec.error))
    return cands, results


def prior_records(data_paths, limit_per_task=48):
    """Schedules and results of the training databases (their functions rebuilt from the
    shapes bench/learned_data.py tuned)."""
    funcs = {}
    for name, shapes in TRAIN_SHAPES.items():
        for shape in shapes:
            f = wb.workloads.get(name, **shape)
            funcs[func_hash(f)] = f
    cands, results = [], []
    for path in data_paths:
        db = Database.open(path)
        for entry in db.workloads():
            func = funcs.get(entry.hash)
            if func is None:
                continue
            c, r = measured(db.records(func, entry.target)[:limit_per_task], func)
            cands += c
            results += r
        db.close()
    return cands, results


def cost_models(runs, data_paths, splits=5, seed=0):
    print("\n## 4. cost models on held-out records: Spearman rho / top-16 recall, trained on N "
          "records of the workload, tested on its other records (mean of "
          f"{splits} random splits)")
    prior = prior_records(data_paths)
    print(f"(pre-training set: {len(prior[0])} records of the training databases)")
    variants = {
        "before: XGBModel": lambda: XGBModel(seed=seed),
        "after: +decisions, rank": lambda: DecisionAwareModel(seed=seed),
        "after: +decisions, rank, pre-trained": "prior",
    }
    head = f"{'wl':<4} {'N':>3}  " + "  ".join(f"{v:>38}" for v in variants)
    print(head + "\n" + "-" * len(head), flush=True)
    rng = np.random.default_rng(seed)
    summary = {v: {n: [] for n in (16, 32, 64)} for v in variants}
    pretrained = None
    for name, r in runs.items():
        recs = [rec for x in r.values() for rec in x["records"]]
        cands, results = measured(recs, r["evo"]["func"])
        lat = np.array([res.latency for res in results])
        for n in (16, 32, 64):
            if len(cands) < n + 16:
                continue
            scores = {v: [] for v in variants}
            for _ in range(splits):
                order = rng.permutation(len(cands))
                train, test = order[:n], order[n:]
                for v, make in variants.items():
                    if make == "prior":
                        if pretrained is None:
                            pretrained = DecisionAwareModel(seed=seed)
                            pretrained.pretrain(*prior)
                        model = copy.deepcopy(pretrained)
                    else:
                        model = make()
                    model.update([cands[i] for i in train], [results[i] for i in train])
                    pred = model.predict([cands[i] for i in test])
                    scores[v].append(rank_metrics(pred, lat[test], k=16))
            cells = []
            for v in variants:
                rho = float(np.nanmean([s[0] for s in scores[v]]))
                rec16 = float(np.nanmean([s[1] for s in scores[v]]))
                summary[v][n].append((rho, rec16))
                cells.append(f"{rho:>6.2f} / {rec16:>4.2f}")
            print(f"{name:<4} {n:>3}  " + "  ".join(f"{c:>38}" for c in cells), flush=True)
    print("mean:")
    for n in (16, 32, 64):
        cells = []
        for v in variants:
            vals = summary[v][n]
            cells.append(f"{np.mean([a for a, _ in vals]):>6.2f} / {np.mean([b for _, b in vals]):>4.2f}"
                         if vals else "-")
        print(f"{'all':<4} {n:>3}  " + "  ".join(f"{c:>38}" for c in cells))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=os.path.join(HERE, "out", "learned"),
                   help="training databases (generated when empty)")
    p.add_argument("--out", default=os.path.join(HERE, "out", "learned_bench"))
    p.add_argument("--workloads", default=",".join(HELD_OUT))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip-choice", action="store_true", help="skip section 2")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    load = os.getloadavg()[0]
    print(f"# {cpu_model()}, {os.cpu_count()} CPUs, load average {load:.1f} at start")
    data = sorted(glob.glob(os.path.join(args.data, "*.sqlite")))
    if not data:
        print(f"## 1. generating training data into {args.data}", flush=True)
        data = generate(args.data)
    print(f"## 1. training data: {', '.join(os.path.basename(d) for d in data)}")
    backend = "xgb"
    if not args.skip_choice:
        backend, _ = choose_model(data)
    t0 = time.monotonic()
    model = DecisionModel.train(data, backend=backend)
    print(f"\ndecision model: {model} trained in {time.monotonic() - t0:.1f} s")
    runs = tune_held_out(args.workloads.split(","), model, args.out, args.seed)
    cost_models(runs, data)
    print(f"\n# load average {os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
