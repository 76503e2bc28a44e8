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
   sampler (32 trials; its proposals ranked by a DecisionAwareModel pre-trained on the training
   databases), the learned sampler without that ranker (16), evolutionary search (64), random
   search (32) and the evolutionary search seeded by the learned sampler (32): best latency
   after 10 and 32 measurements and
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

from workbench.tune import (  # noqa: E402  (after the path set-up above)
    EvolutionarySearch,
    MeasureResult,
    ReplayFunc,
    TuneTask,
    XGBModel,
    tune,
)
from workbench.tune.learned import (  # noqa: E402
    DecisionAwareModel,
    DecisionModel,
    LearnedSampling,
    rank_metrics,
    tasks_of,
)
from workbench.tune.learned.model import tilings  # noqa: E402
from learned_data import generate  # noqa: E402

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
            cands = (
                tilings(word.extent, word.n, word.max_inner)
                if word.kind == "tile"
                else list(range(len(word.candidates)))
            )
            if word.decision not in cands or len(cands) > 600:
                continue
            p = model.probabilities(
                sentence.workload,
                sentence.target,
                sentence.words[:k],
                word,
                cands,
                k,
                len(sentence.words),
                temperature=1.0,
            )
            gains.append(math.log2(max(p[cands.index(word.decision)], 1e-300)) + math.log2(len(cands)))
    return (float(np.mean(gains)) if gains else float("nan")), len(gains)


def choose_model(data_paths):
    by_workload = {os.path.basename(p).split(".")[0]: tasks_of([p]) for p in data_paths}
    print(
        "\n## 2. model choice: leave one training workload out; bits per decision gained "
        "over uniform on its fast records (higher is better; 0 = uniform)"
    )
    print(
        f"{'held out':<9}" + "".join(f"{b:>10}" for b in ("xgb", "linear")) + f"{'decisions':>11}"
        f"{'train s xgb':>12}{'lin':>6}"
    )
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
        print(
            f"{held:<9}" + "".join(f"{m:>10.2f}" for m, _ in row) + f"{row[0][1]:>11}"
            f"{secs[0]:>12.1f}{secs[1]:>6.1f}",
            flush=True,
        )
    means = {b: float(np.mean(v)) for b, v in totals.items()}
    print(f"{'mean':<9}" + "".join(f"{means[b]:>10.2f}" for b in ("xgb", "linear")))
    return max(means, key=means.get), means


# 3. tuning -----------------------------------------------------------------------------------


def run(name, label, strategy, trials, out_dir, seed):
    task = TuneTask.workload(name)
    path = os.path.join(out_dir, f"{name}-{label}.sqlite")
    t0 = time.monotonic()
    db = tune(
        task,
        trials=trials,
        database=path,
        seed=seed,
        strategy=strategy,
        num_trials_per_iter=16,
        verbose=False,
        baseline=False,
    )
    recs = db.records(task.func, "llvm")
    curve = list(np.minimum.accumulate([r.latency for r in recs])) if recs else []
    info = {
        "curve": curve,
        "busy": sum(r.busy for r in recs),
        "noisy": sum(r.noisy for r in recs),
        "seconds": time.monotonic() - t0,
        "records": recs,
        "func": task.func,
        "strategy": strategy,
    }
    db.close()
    return info


def best_after(curve, k):
    return curve[min(k, len(curve)) - 1] if curve else math.inf


def trials_to(curve, goal):
    for k, best in enumerate(curve, 1):
        if best <= goal:
            return str(k)
    return f">{len(curve)}"


def tune_held_out(names, model, ranker, out_dir, seed):
    print(
        "\n## 3. held-out workloads (paper shapes); ms as measured while tuning; L = learned "
        "sampler with its pre-trained ranker, L-noR = without, evo+L = evolutionary search "
        "seeded by L"
    )
    cols = [
        ("L", "learned", 32),
        ("L-noR", "learned_noranker", 16),
        ("evo", "evo", 64),
        ("rand", "rand", 32),
        ("evo+L", "evo_learned_init", 32),
    ]
    head = (
        f"{'wl':<4} "
        + " ".join(f"{c + '@10':>10} {'@' + str(n):>8}" for c, _, n in cols)
        + " | trials to 95% of evo@64: "
        + " ".join(f"{c:>6}" for c, _, _ in cols)
        + "  rej%  busy/noisy"
    )
    print(head + "\n" + "-" * len(head), flush=True)
    runs = {}
    for name in names:
        learned = LearnedSampling(model, ranker=copy.deepcopy(ranker))
        plain = LearnedSampling(model, ranker=False)
        strategies = {
            "L": learned,
            "L-noR": plain,
            "evo": EvolutionarySearch(),
            "rand": ReplayFunc(),
            "evo+L": EvolutionarySearch(init_sampler=LearnedSampling(model, ranker=False)),
        }
        r = {c: run(name, label, strategies[c], n, out_dir, seed) for c, label, n in cols}
        runs[name] = r
        goal = best_after(r["evo"]["curve"], 64) / 0.95

        def ms(v):
            return f"{v * 1e3:.4f}" if math.isfinite(v) else "-"

        rej = learned.rejection_rate if learned.drawn else float("nan")
        flags = "/".join(str(sum(x[f] for x in r.values())) for f in ("busy", "noisy"))
        total = sum(len(x["records"]) for x in r.values())
        print(
            f"{name:<4} "
            + " ".join(
                f"{ms(best_after(r[c]['curve'], 10)):>10} {ms(best_after(r[c]['curve'], n)):>8}"
                for c, _, n in cols
            )
            + f" | {'':>25}"
            + " ".join(f"{trials_to(r[c]['curve'], goal):>6}" for c, _, _ in cols)
            + f"  {100 * rej:4.0f}  {flags} of {total}",
            flush=True,
        )
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


def cost_models(runs, pretrained, splits=5, seed=0):
    print(
        "\n## 4. cost models on held-out records: Spearman rho / top-16 recall, trained on N "
        "records of the workload, tested on its other records (mean of "
        f"{splits} random splits)"
    )
    print(f"(pre-training set: {len(pretrained.latencies)} records of the training databases)")
    variants = {
        "before: XGBModel": lambda: XGBModel(seed=seed),
        "after: +decisions, rank": lambda: DecisionAwareModel(seed=seed),
        "after: +decisions, rank, pre-trained": "prior",
    }
    head = f"{'wl':<4} {'N':>3}  " + "  ".join(f"{v:>38}" for v in variants)
    print(head + "\n" + "-" * len(head), flush=True)
    rng = np.random.default_rng(seed)
    summary = {v: {n: [] for n in (16, 32, 64)} for v in variants}
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
            cells.append(
                f"{np.mean([a for a, _ in vals]):>6.2f} / {np.mean([b for _, b in vals]):>4.2f}"
                if vals
                else "-"
            )
        print(f"{'all':<4} {n:>3}  " + "  ".join(f"{c:>38}" for c in cells))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--data",
        default=os.path.join(HERE, "out", "learned"),
        help="training databases (generated when empty)",
    )
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
    t0 = time.monotonic()
    ranker = DecisionAwareModel.pretrained(data)
    print(
        f"ranker: DecisionAwareModel pre-trained on {len(ranker.latencies)} records in "
        f"{time.monotonic() - t0:.1f} s"
    )
    runs = tune_held_out(args.workloads.split(","), model, ranker, args.out, args.seed)
    cost_models(runs, ranker)
    print(f"\n# load average {os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
