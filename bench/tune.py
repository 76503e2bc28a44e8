"""Tuning benchmark: every workload at the paper's shape, evolutionary vs random search at equal
trials, side by side with numpy (TVM MetaSchedule side by side in one run: bench/vs_tvm.py).

    python bench/tune.py                                   # all workloads, 64 trials (long)
    python bench/tune.py --workloads GMM,C1D,SFM
    python bench/tune.py --small --trials 8                # a quick smoke run
    python bench/tune.py --workloads GMM --strategies evolutionary --peak   # % of the FMA peak

For each workload it prints: the best latency found by each strategy (as measured while tuning,
and re-timed side by side with numpy at the end, medians of interleaved rounds), GFLOP/s, the
speed-up over the unscheduled function, the ratio to numpy where numpy has the operation (a
float32 BLAS call or a few vectorized numpy ops), evolutionary / random, and tuning seconds per
trial. Then the search engine's own speed on GMM's space: candidates proposed, validated and
scored per second, and overhead (all but building and running) per measured trial.
``--peak``: the FMA peak of this CPU (``bench/peak.py``, all cores) is measured before the first
tune and after each workload's re-timing, and each workload's re-timed GFLOP/s is also given as
a share of the highest peak measured (a peak run that other work slowed would flatter the share).
``--load N``: N busy loops (normal priority) compete for the cores while each workload is tuned,
and are stopped before its re-timing and the peak runs: a tune on a busy machine, judged by what
its pick does on a quiet one (run the bench itself at normal priority: real-time priority would
keep the loops off the cores).
Not part of CI: absolute times mean nothing across machines; compare within one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import workbench as wb  # noqa: E402
from workbench.tune import (
    EvolutionarySearch,
    LocalRunner,
    MeasureConfig,
    MeasureInput,
    ReplayFunc,  # noqa: E402
    Task,
    TuneTask,
    tune,
)
from workbench.tune.worker import time_entry  # noqa: E402
from timing import NUMPY  # noqa: E402  (bench/timing.py: scripts run from bench/)

STRATEGIES = {"evolutionary": EvolutionarySearch, "random": ReplayFunc}


class Collect:
    """Callback: tuner-measured best after each batch, time spent searching and measuring."""

    def __init__(self):
        self.curve, self.search_s, self.measure_s, self.summary = [], 0.0, 0.0, None

    def on_batch(self, e):
        self.curve.append((e.trials, e.best))
        self.search_s += e.search_seconds
        self.measure_s += e.measure_seconds

    def on_end(self, summary):
        self.summary = summary


def tune_one(name, shape, strategy, args, workdir):
    task = TuneTask.workload(name, **shape)
    strat = STRATEGIES[strategy]()
    col = Collect()
    db_path = os.path.join(workdir, f"{name}-{strategy}.sqlite")
    t0 = time.monotonic()
    db = tune(
        task,
        trials=args.trials,
        database=db_path,
        seed=args.seed,
        strategy=strat,
        num_trials_per_iter=args.per_iter,
        callbacks=[col],
        verbose=args.verbose,
        baseline=strategy == "evolutionary",
    )
    wall = time.monotonic() - t0
    best = db.best(task.func, "llvm")
    return {
        "task": task,
        "best": best,
        "wall": wall,
        "trials": len(db.records(task.func)),
        "failed": sum(not r.ok for r in db.records(task.func)),
        "curve": col.curve,
        "search_s": col.search_s,
        "measure_s": col.measure_s,
        "stats": strat.ctx.stats,
        "summary": col.summary.tasks[0] if col.summary else None,
    }


def _normal_priority():
    if hasattr(os, "sched_setscheduler"):  # not real-time, even when the bench runs under chrt
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


@contextlib.contextmanager
def busy_loops(n):
    """``n`` processes spinning on the CPUs (competing work) while the block runs."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=_normal_priority)
        for _ in range(n)
    ]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def retime(name, shape, runs, rounds=5):
    """Seconds of each tuned best and of numpy, in interleaved rounds: the minimum over all
    repeats (and, in the JSON output, the median). The minimum, because on a shared machine a
    parallel kernel often loses whole scheduler ticks to other processes; the least disturbed
    repeat is the comparable figure for every contender alike.

    Our kernels run in a measurement worker (checked against the reference there), numpy in
    this process: each framework's threads (libgomp's, OpenBLAS's spinning ones) then never
    compete with the other's while it is timed.
    """
    task = Task(wb.workloads.get(name, **shape), "llvm", wb.workloads.reference(name, **shape))
    keys = [k for k, run in runs.items() if run["best"] is not None]
    inputs = [MeasureInput(task, runs[k]["best"].schedule().func) for k in keys]
    numpy_fn = NUMPY[name](wb.workloads.lookup(name).shape(**shape)) if name in NUMPY else None
    arrays, outputs, _ = task.data()
    np_args = [a for j, a in enumerate(arrays) if j not in outputs]
    samples = {k: [] for k in keys + (["numpy"] if numpy_fn else [])}
    with LocalRunner(workers=1, measure=MeasureConfig(run_timeout=120, repeat=5, min_repeat_ms=50)) as runner:
        for _ in range(rounds):
            for k, res in zip(keys, runner.measure(inputs)):
                if res.status != "ok":
                    raise RuntimeError(f"{name} {k}: the tuned best failed on re-timing: {res.error}")
                samples[k] += res.latencies
            if numpy_fn:
                samples["numpy"] += time_entry(numpy_fn, np_args, number=1, repeat=5, min_repeat_ms=50)
    return (
        {k: float(np.min(v)) for k, v in samples.items()},
        {k: float(np.median(v)) for k, v in samples.items()},
    )


def fmt_ms(s):
    return f"{s * 1e3:.4f}" if s is not None and math.isfinite(s) else "-"


def fmt(x, spec=".2f"):
    return format(x, spec) if x is not None and math.isfinite(x) else "-"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default="all", help="comma-separated names, or all")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--per-iter", type=int, default=16)
    p.add_argument("--strategies", default="evolutionary,random")
    p.add_argument("--small", action="store_true", help="small shapes (smoke run)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="write the figures as JSON")
    p.add_argument("--verbose", action="store_true", help="progress bars")
    p.add_argument("--peak", action="store_true", help="measure the FMA peak; GFLOP/s as %% of it")
    p.add_argument("--load", type=int, default=0, help="busy loops competing while tuning (not re-timing)")
    args = p.parse_args(argv)
    peak, peaks = None, []
    if args.peak:
        from peak import FMAPeak  # bench/peak.py

        peak = FMAPeak()
        peaks += peak.measure(runs=3)
    names = wb.workloads.names() if args.workloads == "all" else args.workloads.split(",")
    strategies = args.strategies.split(",")
    workdir = tempfile.mkdtemp(prefix="wb-bench-tune-")
    print(
        f"# {args.trials} trials per workload and strategy, batches of {args.per_iter}, "
        f"{os.cpu_count()} cores{f', {args.load} busy loops while tuning' if args.load else ''}; "
        f"databases in {workdir}",
        flush=True,
    )
    rows = []
    print(HEAD + "\n" + "-" * len(HEAD), flush=True)
    for name in names:
        shape = wb.workloads.small(name) if args.small else {}
        with busy_loops(args.load):
            runs = {s: tune_one(name, shape, s, args, workdir) for s in strategies}
        final, medians = retime(name, shape, runs)
        for strategy, run in runs.items():
            run["median_s"] = medians.get(strategy)
        run_numpy_median = medians.get("numpy")
        rows.append((name, shape, runs, {**final, "numpy_median": run_numpy_median}))
        report_row(rows[-1])
        if peak is not None:
            peaks += peak.measure(runs=3)
    summarize(rows, args)
    if peaks:
        top = max(peaks)
        print(
            f"FMA peak ({peak.width}-bit vectors, all cores), highest of {len(peaks)} runs in this "
            f"bench run: {top:.1f} GFLOP/s (runs: {', '.join(f'{v:.0f}' for v in peaks)})"
        )
        for name, _shape, runs, final in rows:
            evo, ours = runs.get("evolutionary"), final.get("evolutionary")
            if evo and ours:
                gflops = evo["task"].flops / ours / 1e9
                print(f"{name}: {gflops:.1f} GFLOP/s re-timed = {100 * gflops / top:.1f} % of the FMA peak")


HEAD = (
    f"{'wl':<4} {'tuned ms':>9} {'evo ms':>9} {'rand ms':>9} {'evo/rand':>8} {'GFLOP/s':>8} {'x unsch':>8} "
    f"{'np ms':>8} {'ours/np':>7} {'s/trial':>7}"
)


def report_row(row):
    name, shape, runs, final = row
    evo = runs.get("evolutionary")
    ours = final.get("evolutionary")
    flops = evo["task"].flops if evo else None
    unsched = evo["summary"].baseline if evo and evo["summary"] else None
    tuned = evo["best"].latency if evo and evo["best"] else None
    print(
        f"{name:<4} {fmt_ms(tuned):>9} {fmt_ms(ours):>9} {fmt_ms(final.get('random')):>9} "
        f"{fmt(ours / final['random'] if ours and final.get('random') else None):>8} "
        f"{fmt(flops / ours / 1e9 if flops and ours else None, '.1f'):>8} "
        f"{fmt(unsched / ours if unsched and ours else None):>8} "
        f"{fmt_ms(final.get('numpy')):>8} "
        f"{fmt(ours / final['numpy'] if ours and final.get('numpy') else None):>7} "
        f"{fmt(evo['wall'] / max(evo['trials'], 1) if evo else None):>7}",
        flush=True,
    )


def summarize(rows, args):
    print(
        "\ncolumns: tuned ms = evolutionary best as measured while tuning; evo ms, rand ms, "
        "np ms = re-timed side by side at the end (best of 5 interleaved rounds); "
        "evo/rand = best of evolutionary / best of random search (ReplayFunc) at "
        "equal trials, re-timed side by side; x unsch = unscheduled / evo; "
        "ours/np: latency ratio (below 1: ours faster); s/trial = tuning wall seconds per "
        "measured trial"
    )
    ratios = [
        r[3]["evolutionary"] / r[3]["random"] for r in rows if r[3].get("evolutionary") and r[3].get("random")
    ]
    if ratios:
        geo = math.exp(np.mean(np.log(ratios)))
        print(
            f"evolutionary / random, geometric mean over {len(ratios)} workloads: {geo:.3f} (goal: below 1)"
        )
    for name, shape, _runs, final in rows:
        if name == "GMM" and final.get("evolutionary") and final.get("numpy"):
            print(
                f"GMM {'small' if shape else '128'}: ours / numpy = "
                f"{final['evolutionary'] / final['numpy']:.3f} (goal: at most 1)"
            )
    evo_runs = [r[2]["evolutionary"] for r in rows if "evolutionary" in r[2]]
    if evo_runs:
        trials = sum(r["trials"] for r in evo_runs)
        wall = sum(r["wall"] for r in evo_runs)
        overhead = sum(r["wall"] - r["measure_s"] for r in evo_runs)
        print(
            f"tuning wall time per trial: {wall / trials:.2f} s; overhead beyond building "
            f"and running: {overhead / trials:.2f} s per trial"
        )
    gmm = next((r[2]["evolutionary"] for r in rows if r[0] == "GMM" and "evolutionary" in r[2]), None)
    if gmm is not None:
        st = gmm["stats"]
        print(
            f"search engine on GMM's space: {st.proposed / st.seconds:.0f} candidates "
            f"proposed/s, {st.valid / st.seconds:.0f} validated/s, {st.scored / st.seconds:.0f} "
            f"scored/s ({st.proposed} proposed, {st.valid} valid, {st.scored} scored in "
            f"{st.seconds:.1f} s of search)"
        )
    if args.out:
        data = {
            name: {
                "shape": shape,
                **{k: (v * 1e3 if v else None) for k, v in final.items()},
                "runs": {
                    s: {
                        "tuner_best_ms": r["best"].latency * 1e3 if r["best"] else None,
                        "retimed_median_ms": (r["median_s"] * 1e3 if r.get("median_s") else None),
                        "wall_s": r["wall"],
                        "trials": r["trials"],
                        "failed": r["failed"],
                        "search_s": r["search_s"],
                        "measure_s": r["measure_s"],
                        "curve_ms": [(t, b * 1e3) for t, b in r["curve"]],
                    }
                    for s, r in runs.items()
                },
            }
            for name, shape, runs, final in rows
        }
        with open(args.out, "w") as f:
            json.dump(data, f, indent=1)
        print(f"figures written to {args.out}")


if __name__ == "__main__":
    main()
