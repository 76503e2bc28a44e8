"""Same schedules, two compilers: TVM's tuning records built by TVM and by workbench, timed
side by side in one run. This isolates code generation from search.

    python bench/same_schedule.py DIR [--top 8] [--rounds 3] [--workloads GMM,NRM]
    python bench/same_schedule.py bench/out/vs_tvm/<run>/tvm          # what vs_tvm.py tuned
    python bench/same_schedule.py OTHER_DIR    # any folder of TVM databases, e.g. another day's

DIR holds MetaSchedule JSON databases, one folder per workload (``GMM/``, ...). For each
workload the ``--top`` records with the lowest run time TVM recorded are taken; each is

* built by TVM (``bench/_tvm_records.py``, run by the TVM virtualenv's Python: the record's
  trace applied to TVM's ``te_workload`` function, ``tvm.compile`` for this host);
* imported into workbench (``workbench.tune.database.tvm``: the trace converted and replayed,
  as ``workbench import-tvm`` does) and built by ``wb.build``;

then both are timed on the same inputs with the same Python loop of calls
(``timing.time_calls``), in fresh child processes interleaved over ``--rounds`` rounds, and
every output is checked against the float64 numpy reference. Printed per workload: the fastest
record built by each compiler (best of the set), the TVM-best record's time in both, and the
median over the records of workbench/TVM, under a header with the CPU model; then a histogram of
the per-record ratios workbench/TVM (``results.json`` keeps every record's times). Ratios are
between figures of this run only.

``--baseline SRC`` also builds every record with the workbench of another source tree (a third
child, ``PYTHONPATH=SRC``, timed in the same rounds), for a before/after of a code-generation
change side by side, e.g. ``git archive HEAD~1 workbench | tar -x -C /tmp/base``
(the folder that holds the ``workbench`` package).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import numpy as np

from timing import cpu_model, time_calls  # bench/timing.py (scripts run from bench/)
from vs_tvm import WORKLOADS, check, find_tvm_python, run_child, write_inputs

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", nargs="?", help="folder of MetaSchedule databases, one per workload")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--top", type=int, default=8, help="records per workload (TVM's fastest)")
    p.add_argument(
        "--records",
        default="",
        help="only these ranks among the --top, e.g. 13,32 (to re-time a few outliers)",
    )
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--mcpu", default="", help="LLVM CPU both compile for (default: the host's)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--min-repeat-ms", type=float, default=20.0)
    p.add_argument("--tvm-python", default=None)
    p.add_argument("--work-dir", default=None)
    p.add_argument(
        "--baseline",
        default=None,
        help="another workbench source tree (e.g. a git worktree of the commit before a change), "
        "built and timed too, in the same rounds: a before/after of workbench's code generation",
    )
    p.add_argument("--_child", help=argparse.SUPPRESS)
    p.add_argument("--_jobs", help=argparse.SUPPRESS)
    p.add_argument("--_data", help=argparse.SUPPRESS)
    p.add_argument("--_kind", default="wb", help=argparse.SUPPRESS)
    p.add_argument("--_source", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.names = [n.strip().upper() for n in args.workloads.split(",") if n.strip()]
    args.ranks = {int(r) for r in args.records.split(",") if r.strip()}
    return args


def select_jobs(root: str, names, top: int, ranks=frozenset()) -> list[dict]:
    """The ``top`` records of each workload with the lowest mean run time TVM recorded (only
    those ranked in ``ranks`` when it is not empty)."""
    jobs = []
    for name in names:
        path = os.path.join(root, name, "database_tuning_record.json")
        if not os.path.exists(path):
            continue
        recs = []
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                _, (trace, run_secs, *_) = json.loads(line)
                secs = [float(s) for s in run_secs or []]
                if secs and all(s < 1e9 for s in secs):
                    recs.append((statistics.fmean(secs), trace))
        recs.sort(key=lambda r: r[0])
        for rank, (secs, trace) in enumerate(recs[:top]):
            if ranks and rank not in ranks:
                continue
            jobs.append({"workload": name, "rank": rank, "tvm_tuner_s": secs, "trace": trace})
    return jobs


def child_wb(args) -> dict:
    """Import each job's trace into workbench, build, check and time it."""
    if args._source:  # the baseline's workbench, ahead of this tree's (vs_tvm put it first)
        sys.path.insert(0, args._source)
    import workbench as wb
    from workbench.tune.database import tvm as tvmdb

    with open(args._jobs) as f:
        jobs = json.load(f)
    with open(os.path.join(args._data, "manifest.json")) as f:
        manifest = json.load(f)
    target = f"llvm -num-cores={args.threads}" + (f" -mcpu={args.mcpu}" if args.mcpu else "")
    out = {"workbench": os.path.dirname(wb.__file__), "results": []}
    for k, job in enumerate(jobs):
        name, entry = job["workload"], manifest[job["workload"]]
        arrays = [wb.aligned(np.load(os.path.join(args._data, p))) for p in entry["params"]]
        for o in entry["outputs"]:
            arrays[o].fill(np.nan)
        try:
            sch = tvmdb.replay(tvmdb.convert_trace(job["trace"]), wb.workloads.get(name))
            kernel = wb.build(sch, target)
            kernel(*arrays)
        except Exception as exc:  # report it, go on with the next record
            out["results"].append({"error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        for j, o in enumerate(entry["outputs"]):
            np.save(os.path.join(args._data, f"{name}.{args._kind}{k}.out{j}.npy"), arrays[o])
        entry_fn = kernel.entry
        out["results"].append(
            {"samples": time_calls(lambda: entry_fn(*arrays), args.repeat, args.min_repeat_ms)}
        )
    return out


def main(argv=None):
    args = parse_args(argv)
    if args._child in ("wb", "base"):
        print(json.dumps(child_wb(args)))
        return 0
    if not args.dir or not os.path.isdir(args.dir):
        print(f"same_schedule.py: {args.dir!r} is not a folder of MetaSchedule databases", file=sys.stderr)
        return 2
    tvm_py = find_tvm_python(args.tvm_python)  # prints how to install TVM and exits 2 if none
    work = args.work_dir or os.path.join(HERE, "out", "same_schedule")
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    jobs = select_jobs(args.dir, args.names, args.top, args.ranks)
    names = sorted({j["workload"] for j in jobs}, key=args.names.index)
    if not jobs:
        print(f"same_schedule.py: no tuning records for {args.names} under {args.dir}", file=sys.stderr)
        return 2
    jobs_path = os.path.join(work, "jobs.json")
    with open(jobs_path, "w") as f:
        json.dump(jobs, f)
    refs = write_inputs(names, data, seed=0)
    env = dict(os.environ, TVM_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads))
    common = [
        "--repeat",
        str(args.repeat),
        "--min-repeat-ms",
        str(args.min_repeat_ms),
        "--threads",
        str(args.threads),
    ] + (["--mcpu", args.mcpu] if args.mcpu else [])
    cmds = {
        "tvm": [tvm_py, os.path.join(HERE, "_tvm_records.py"), jobs_path, data] + common,
        "wb": [
            sys.executable,
            os.path.abspath(__file__),
            "--_child",
            "wb",
            "--_jobs",
            jobs_path,
            "--_data",
            data,
        ]
        + common,
    }
    if args.baseline:  # the same child, importing the baseline tree's workbench
        source = ["--_source", os.path.abspath(args.baseline)]
        cmds["base"] = cmds["wb"][:3] + ["base"] + cmds["wb"][4:] + ["--_kind", "base"] + source
    samples = {kind: [[] for _ in jobs] for kind in cmds}
    errors = {kind: [None] * len(jobs) for kind in cmds}
    print(
        f"# {cpu_model()}, {args.threads} threads, code for "
        f"{args.mcpu or 'the host CPU'}; {len(jobs)} TVM records "
        f"({args.top} per workload) from {args.dir}",
        flush=True,
    )
    for rd in range(args.rounds):
        print(f"  round {rd + 1}/{args.rounds}: builds by {', '.join(cmds)}", flush=True)
        for kind, cmd in cmds.items():
            out = run_child(cmd, env)
            if rd == 0 and "workbench" in out:
                print(f"    {kind}: {out['workbench']}", flush=True)
            if "error" in out:
                print(f"    {kind} child failed: {out['error'][-300:]}", flush=True)
                continue
            for k, r in enumerate(out["results"]):
                if "error" in r:
                    errors[kind][k] = r["error"]
                else:
                    samples[kind][k] += r["samples"]
    report(args, jobs, names, samples, errors, data, refs, work)
    return 0


def report(args, jobs, names, samples, errors, data, refs, work) -> None:
    med = {kind: [statistics.median(s) * 1e3 if s else None for s in samples[kind]] for kind in samples}
    ok = {
        kind: [
            check(data, j["workload"], f"{kind}{k}", refs[j["workload"]])["ok"]
            if med[kind][k] is not None
            else False
            for k, j in enumerate(jobs)
        ]
        for kind in samples
    }
    print(
        f"\n{'WL':4s} {'recs':>4s} {'wb ok':>5s} {'tvm ok':>6s} {'best wb ms':>10s} "
        f"{'best TVM ms':>11s} {'best wb/TVM':>11s} {'#0 wb ms':>9s} {'#0 TVM ms':>9s} "
        f"{'#0 wb/TVM':>9s} {'median wb/TVM':>13s}"
    )
    table = {}
    for name in names:
        ks = [k for k, j in enumerate(jobs) if j["workload"] == name]
        both = [k for k in ks if med["wb"][k] and med["tvm"][k] and ok["wb"][k] and ok["tvm"][k]]
        best_wb = min((med["wb"][k] for k in ks if med["wb"][k] and ok["wb"][k]), default=None)
        best_tvm = min((med["tvm"][k] for k in ks if med["tvm"][k] and ok["tvm"][k]), default=None)
        first = ks[0]
        ratios = [med["wb"][k] / med["tvm"][k] for k in both]
        row = {
            "records": len(ks),
            "wb_ok": sum(ok["wb"][k] for k in ks),
            "tvm_ok": sum(ok["tvm"][k] for k in ks),
            "best_wb_ms": best_wb,
            "best_tvm_ms": best_tvm,
            "best_ratio": best_wb / best_tvm if best_wb and best_tvm else None,
            "first_wb_ms": med["wb"][first],
            "first_tvm_ms": med["tvm"][first],
            "first_ratio": (med["wb"][first] / med["tvm"][first] if first in both else None),
            "median_ratio": statistics.median(ratios) if ratios else None,
            "errors": {kind: [errors[kind][k] for k in ks if errors[kind][k]] for kind in errors},
        }
        table[name] = row

        def f(x, spec=".4f"):
            return "-" if x is None else format(x, spec)

        print(
            f"{name:4s} {row['records']:4d} {row['wb_ok']:5d} {row['tvm_ok']:6d} "
            f"{f(best_wb):>10s} {f(best_tvm):>11s} {f(row['best_ratio'], '.2f'):>11s} "
            f"{f(row['first_wb_ms']):>9s} {f(row['first_tvm_ms']):>9s} "
            f"{f(row['first_ratio'], '.2f'):>9s} {f(row['median_ratio'], '.2f'):>13s}"
        )
        for kind, errs in row["errors"].items():
            if errs:
                print(f"     {kind} failed on {len(errs)}: {errs[0]}")
    records = per_record(jobs, med, ok)
    for kind in ("wb", "base"):
        if kind in samples:
            print_histogram(records, kind, names)
    best = [r["best_ratio"] for r in table.values() if r["best_ratio"]]
    if best:
        geo = float(np.exp(np.mean(np.log(best))))
        print(f"best-of-set wb/TVM: geometric mean {geo:.3f} over {len(best)} workloads, max {max(best):.3f}")
    with open(os.path.join(work, "results.json"), "w") as fh:
        json.dump(
            {
                "cpu": cpu_model(),
                "threads": args.threads,
                "dir": args.dir,
                "baseline": args.baseline,
                "workloads": table,
                "records": records,
            },
            fh,
            indent=1,
        )


#: upper edges of the histogram's bins of per-record ratios (the last bin is open)
BINS = (0.5, 0.8, 0.9, 1.0, 1.1, 1.2, 1.5, 2.0, 5.0)


def per_record(jobs, med, ok) -> list[dict]:
    """Each record's median ms per compiler (None: failed or wrong) and its ratios to TVM's."""
    out = []
    for k, job in enumerate(jobs):
        row = {"workload": job["workload"], "rank": job["rank"], "tvm_tuner_ms": job["tvm_tuner_s"] * 1e3}
        for kind in med:
            row[f"{kind}_ms"] = med[kind][k] if ok[kind][k] else None
        for kind in med:
            if kind != "tvm":
                a, b = row[f"{kind}_ms"], row["tvm_ms"]
                row[f"{kind}_ratio"] = a / b if a and b else None
        out.append(row)
    return out


def print_histogram(records, kind, names) -> None:
    """Counts of per-record ``kind``/TVM ratios per bin, per workload and in all."""
    labels = [f"<{BINS[0]}"] + [f"{a}-{b}" for a, b in zip(BINS, BINS[1:])] + [f">={BINS[-1]}"]

    def bin_of(r):
        return next((i for i, edge in enumerate(BINS) if r < edge), len(BINS))

    print(f"\nper-record {kind}/TVM ratio (same record, both compilers), counts per bin:")
    print(f"{'WL':4s} " + " ".join(f"{x:>7s}" for x in labels) + f" {'n':>4s} {'>1.2':>5s}")
    rows = [(n, [r for r in records if r["workload"] == n]) for n in names] + [("all", records)]
    for name, recs in rows:
        counts = [0] * (len(BINS) + 1)
        ratios = [r[f"{kind}_ratio"] for r in recs if r.get(f"{kind}_ratio")]
        for r in ratios:
            counts[bin_of(r)] += 1
        over = sum(r > 1.2 for r in ratios)
        print(f"{name:4s} " + " ".join(f"{c:7d}" for c in counts) + f" {len(ratios):4d} {over:5d}")
    slow = sorted(
        (r for r in records if (r.get(f"{kind}_ratio") or 0) > 1.2), key=lambda r: -r[f"{kind}_ratio"]
    )
    for r in slow[:20]:
        print(
            f"     slower than 1.2x: {r['workload']} #{r['rank']} {kind} {r[f'{kind}_ms']:.4f} ms, "
            f"TVM {r['tvm_ms']:.4f} ms ({r[f'{kind}_ratio']:.2f}x)"
        )


if __name__ == "__main__":
    sys.exit(main())
