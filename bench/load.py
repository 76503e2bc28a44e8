"""Load: tuning processes sharing one database file, and how measurement scales.

Run: ``python bench/load.py [--trials 32] [--workloads GMM C2D NRM SFM] [--small]``.

Each section is one function ``section(args) -> list[str]`` (lines to print) in ``SECTIONS``:

* :func:`concurrent_tunes` — the workloads tuned at the same time by separate ``workbench
  tune`` processes into one SQLite file. Afterwards every workload must have exactly
  ``--trials`` records (none lost: each process stops at its budget counting what is stored;
  none duplicated: distinct traces), and the file must pass ``workbench db check``. Prints per
  workload the records, distinct traces, records flagged ``busy`` (measured while the load
  average was above the CPUs: with several tuners on a few cores, most are) and each
  process's exit status and wall time, and whether the tuner's summary warned about the load.

* :func:`dask_throughput` — candidates measured per minute with 1 vs 2 local Dask workers
  (``DaskRunner`` on a ``LocalCluster``), side by side with the ``LocalRunner``.

A new section is one more function appended to ``SECTIONS``; ``--only NAME`` runs some.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from timing import cpu_model  # bench/timing.py (scripts run from bench/)

import workbench as wb
from workbench.tune import Database
from workbench.tune.database.repair import check


def concurrent_tunes(args) -> list[str]:
    path = os.path.join(args.dir, "shared.sqlite")
    procs = []
    t0 = time.monotonic()
    for name in args.workloads:
        cmd = [
            sys.executable,  # this Python's workbench, activated or not
            "-m",
            "workbench",
            "tune",
            name,
            "--trials",
            str(args.trials),
            "--per-iter",
            str(args.per_iter),
            "--workers",
            "1",
            "--db",
            path,
        ]
        if args.small:
            cmd.append("--small")
        log = open(os.path.join(args.dir, f"{name}.log"), "w+")
        procs.append((name, log, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)))
    ended: dict[str, float] = {}
    while len(ended) < len(procs):  # each process's own wall time
        for name, _, proc in procs:
            if name not in ended and proc.poll() is not None:
                ended[name] = time.monotonic() - t0
        time.sleep(0.2)
    finished = []
    for name, log, proc in procs:
        log.seek(0)
        finished.append((name, proc.returncode, ended[name], log.read()))
        log.close()
    lines = [
        f"{len(procs)} workloads tuned at once by separate processes into {path} "
        f"({args.trials} trials each, {args.per_iter} per batch, 1 worker each)",
        f"{'workload':8} {'records':>7} {'distinct':>8} {'busy':>5} {'exit':>4} "
        f"{'wall s':>7}  summary warned busy",
    ]
    db = Database.open(path)
    ok = True
    for name, status, wall, text in finished:
        shape = wb.workloads.small(name) if args.small else {}
        records = db.records(wb.workloads.get(name, **shape), "llvm")
        distinct = len({r.trace_hash for r in records})
        busy = sum(r.busy for r in records)
        warned = "the machine was busy" in text
        ok &= len(records) == args.trials == distinct and status == 0
        lines.append(
            f"{name:8} {len(records):>7} {distinct:>8} {busy:>5} {status:>4} "
            f"{wall:>7.1f}  {'yes' if warned else 'no'}"
        )
        if status != 0:
            lines.append("    " + text.strip().splitlines()[-1])
    report = check(path)
    lines.append(f"total {len(db)} records; db check: {'ok' if report.ok else report}")
    lines.append(
        "none lost, none duplicated"
        if ok and report.ok and len(db) == args.trials * len(procs)
        else "RECORDS LOST OR DUPLICATED"
    )
    return lines


def dask_throughput(args) -> list[str]:
    """Candidates measured per minute on a Dask ``LocalCluster`` of 1 and of 2 worker
    processes (one thread each), side by side: the same candidates (the first workload's
    design space, drawn once), each cluster warmed up first (its measurement processes
    started, the task sent). A ``LocalRunner`` with 1 and 2 build workers for comparison."""
    from distributed import Client, LocalCluster

    from workbench.tune import DaskRunner, LocalRunner, MeasureInput, Task

    name = args.workloads[0]
    shape = wb.workloads.small(name) if args.small else {}
    func = wb.workloads.get(name, **shape)
    seen, cands = set(), []
    for seed in range(args.trials * 4):
        for sch in wb.generate_design_space(func, seed=seed):
            key = str(sch.func)
            if key not in seen:
                seen.add(key)
                cands.append(sch.func)
        if len(cands) >= args.trials:
            break
    cands = cands[: args.trials]
    task = Task(func, "llvm", wb.workloads.reference(name, **shape))
    inputs = [MeasureInput(task, c) for c in cands]
    rows = []

    def timed(label: str, runner) -> None:
        runner.measure(inputs[:2])  # warm up
        t0 = time.monotonic()
        results = runner.measure(inputs)
        seconds = time.monotonic() - t0
        ok = sum(r.status == "ok" for r in results)
        rows.append((label, len(results), ok, seconds, 60 * len(results) / seconds, os.getloadavg()[0]))

    for workers in (1, 2):
        with LocalRunner(workers=workers) as runner:
            timed(f"LocalRunner, {workers} build worker{'s' * (workers > 1)}", runner)
    for workers in (1, 2):
        with (
            LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
            ) as cluster,
            Client(cluster) as client,
            DaskRunner(client) as runner,
        ):
            timed(f"Dask LocalCluster, {workers} worker{'s' * (workers > 1)}", runner)
    lines = [
        f"{name} {shape or '(paper shape)'}: {len(cands)} distinct candidates of its design "
        f"space, measured by each runner in one batch (after a 2-candidate warm-up)",
        f"{'runner':34} {'cands':>5} {'ok':>4} {'seconds':>8} {'per min':>8} {'load':>5}",
    ]
    for label, n, ok, seconds, rate, load in rows:
        lines.append(f"{label:34} {n:>5} {ok:>4} {seconds:>8.1f} {rate:>8.1f} {load:>5.1f}")
    dask1, dask2 = rows[2][4], rows[3][4]
    lines.append(
        f"Dask: 2 workers / 1 worker = {dask2 / dask1:.2f}x candidates per minute "
        f"(on {os.cpu_count()} CPUs shared with the load above)"
    )
    return lines


#: the sections run in order; each returns the lines it prints
SECTIONS = [concurrent_tunes, dask_throughput]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--per-iter", type=int, default=8)
    parser.add_argument("--workloads", nargs="*", default=["GMM", "C2D", "NRM", "SFM"])
    parser.add_argument("--small", action="store_true", help="each workload's small shape")
    parser.add_argument("--dir", default=None, help="where the databases go (default: a temporary directory)")
    parser.add_argument(
        "--only", nargs="*", choices=[f.__name__ for f in SECTIONS], help="run only these sections"
    )
    args = parser.parse_args()
    args.dir = args.dir or tempfile.mkdtemp(prefix="wb-load-")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at start")
    for section in SECTIONS:
        if args.only and section.__name__ not in args.only:
            continue
        print()
        for line in section(args):
            print(line)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    sys.exit(main())
