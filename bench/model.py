"""Whole models: import a zoo model, tune it with a small budget, time it beside PyTorch eager.

Run: ``python bench/model.py [--quick] [--models resnet18,mobilenet_v2,bert_layer]
[--trials N]``. For each model (batch 1, full size; ``--quick``: the tiny test variants) it
imports through ``torch.export``, checks the untuned build against PyTorch (rtol/atol 1e-3),
times the untuned build (default schedules), tunes ``--trials`` candidates over all tasks into
a temporary database, builds from it, checks again and times it, and times PyTorch eager on
the same machine with the same number of threads. Printed: each latency and the ratios
workbench / PyTorch, in one run. Needs the optional extra ``torch``.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

import numpy as np
import torch

import workbench as wb
from workbench.codegen.timing import time_runs
from workbench.graph import zoo

QUICK = zoo.TINY


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def check(model, x, ref, what):
    (out,) = model(x)
    err = float(np.max(np.abs(out - ref)))
    if not np.allclose(out, ref, rtol=1e-3, atol=1e-3):
        raise SystemExit(f"{what}: output differs from PyTorch (max abs error {err:.3g})")
    return err


def bench(name: str, quick: bool, trials: int, workers) -> dict:
    module, example = zoo.get(name, **(QUICK[name] if quick else {}))
    x = example[0].numpy()
    with torch.no_grad():
        ref = module(*example).numpy()
        eager = float(time_runs(lambda: module(*example), (), repeat=5, warmup=1, min_repeat_ms=50.0))
    t0 = time.monotonic()
    graph = wb.from_torch(module, example)
    import_s = time.monotonic() - t0
    tasks = graph.task_list()
    t0 = time.monotonic()
    untuned = wb.build_model(graph, "llvm")
    build_s = time.monotonic() - t0
    err0 = check(untuned, x, ref, f"{name} untuned")
    t_untuned = float(untuned.time(x, repeat=3, min_repeat_ms=50.0))
    row = dict(
        name=name,
        groups=len(graph.groups),
        tasks=len(tasks),
        import_s=import_s,
        build_s=build_s,
        eager=eager,
        untuned=t_untuned,
        err=err0,
    )
    if trials:
        with tempfile.TemporaryDirectory() as d:
            t0 = time.monotonic()
            db = wb.tune_model(
                graph, "llvm", trials=trials, database=os.path.join(d, "m.sqlite"), workers=workers
            )
            row["tune_s"] = time.monotonic() - t0
            tuned = wb.build_model(graph, "llvm", db)
            row["hits"] = sum(tuned.tuned)
            row["err_tuned"] = check(tuned, x, ref, f"{name} tuned")
            row["tuned"] = float(tuned.time(x, repeat=3, min_repeat_ms=50.0))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the tiny test variants")
    ap.add_argument("--models", default="resnet18,resnet34,mobilenet_v2,bert_layer")
    ap.add_argument("--trials", type=int, default=None, help="tuning budget over all tasks per model")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    trials = args.trials if args.trials is not None else (16 if args.quick else 64)
    print(
        f"CPU: {cpu_model()}; torch {torch.__version__} with {torch.get_num_threads()} threads; "
        f"{os.cpu_count()} cores; trials per model: {trials}; load average {os.getloadavg()[0]:.2f}"
    )
    rows = [bench(n, args.quick, trials, args.workers) for n in args.models.split(",")]
    head = f"{'model':<14}{'groups':>7}{'tasks':>6}{'eager ms':>10}{'untuned ms':>12}{'x eager':>9}"
    if trials:
        head += f"{'tuned ms':>10}{'x eager':>9}{'hits':>6}{'tune s':>8}"
    print(head)
    for r in rows:
        line = (
            f"{r['name']:<14}{r['groups']:>7}{r['tasks']:>6}{r['eager'] * 1e3:>10.3f}"
            f"{r['untuned'] * 1e3:>12.3f}{r['untuned'] / r['eager']:>9.2f}"
        )
        if trials:
            line += (
                f"{r['tuned'] * 1e3:>10.3f}{r['tuned'] / r['eager']:>9.2f}"
                f"{r['hits']:>4}/{r['tasks']:<2}{r['tune_s']:>7.0f}"
            )
        print(line)
    print("x eager: workbench latency / PyTorch eager latency (below 1: workbench is faster)")
    print(
        f"load average at the end {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores (above the cores, "
        "parallel kernels wait for descheduled threads: docs/design.md 'Spinning threads, bounded')"
    )


if __name__ == "__main__":
    main()
