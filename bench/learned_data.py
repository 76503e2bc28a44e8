"""Training data for the learned decision sampler (issue 17): tune the *training* workloads at
several small shapes, one SQLite database per workload, so that ``bench/learned.py`` (and
``workbench learn``) can train on them and test on the held-out workloads.

    python bench/learned_data.py --out bench/out/learned             # 8 workloads x 2 shapes
    python bench/learned_data.py --out /tmp/ld --trials 16 --workloads GRP,TBG

Each task is tuned by the evolutionary search (its first batch is random samples of the
space, the later ones the search's picks), so the databases hold both a spread of the space
and fast records. A task already complete in its database is skipped (resuming is free).
Prints per workload: seconds, records, and how many were measured while the machine was busy
(the tuner's ``busy`` flag: load average above the CPUs it could use) or noisy.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from workbench.tune import TuneTask, tune  # noqa: E402

#: the workloads the sampler learns from, each at two shapes (the held-out ones are in
#: bench/learned.py: GMM, C1D, DEP, SFM)
TRAIN_SHAPES = {
    "C2D": [
        dict(h=28, w=28, ci=16, co=32, kernel=3, stride=1, padding=1),
        dict(h=56, w=56, ci=8, co=16, kernel=3, stride=2, padding=1),
    ],
    "C3D": [
        dict(d=8, h=28, w=28, ci=3, co=16, kernel=3, stride=2, padding=1),
        dict(d=4, h=14, w=14, ci=8, co=16, kernel=3, stride=1, padding=1),
    ],
    "DIL": [
        dict(h=28, w=28, ci=8, co=16, kernel=3, stride=1, padding=2, dilation=2),
        dict(h=56, w=56, ci=3, co=32, kernel=3, stride=2, padding=2, dilation=2),
    ],
    "GRP": [
        dict(h=28, w=28, ci=32, co=64, kernel=3, stride=1, padding=1, groups=4),
        dict(h=14, w=14, ci=64, co=64, kernel=3, stride=1, padding=1, groups=8),
    ],
    "T2D": [
        dict(h=4, w=4, ci=128, co=64, kernel=4, stride=2, padding=1),
        dict(h=8, w=8, ci=64, co=32, kernel=4, stride=2, padding=1),
    ],
    "CBR": [
        dict(h=28, w=28, ci=16, co=32, kernel=3, stride=1, padding=1),
        dict(h=56, w=56, ci=3, co=16, kernel=3, stride=2, padding=1),
    ],
    "TBG": [dict(seq=64, head=4, dim=32), dict(seq=32, head=8, dim=64)],
    "NRM": [dict(b=1, m=128, n=128), dict(b=4, m=64, n=64)],
}


def generate(out_dir: str, trials: int = 48, workloads=None, seed: int = 0, log=print) -> list[str]:
    """Tune every training task into ``out_dir/<workload>.sqlite``; returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, shapes in TRAIN_SHAPES.items():
        if workloads and name not in workloads:
            continue
        path = os.path.join(out_dir, f"{name}.sqlite")
        t0 = time.monotonic()
        tasks = [TuneTask.workload(name, **shape) for shape in shapes]
        busy = noisy = 0
        for k, task in enumerate(tasks):
            db = tune(task, trials=trials, database=path, seed=seed + k, verbose=False, baseline=False)
            recs = db.records(task.func, "llvm")
            busy += sum(r.busy for r in recs)
            noisy += sum(r.noisy for r in recs)
            db.close()
        log(
            f"{name}: {len(shapes)} shapes x {trials} trials in {time.monotonic() - t0:.0f} s "
            f"({busy} records busy, {noisy} noisy) -> {path}",
            flush=True,
        )
        paths.append(path)
    return paths


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out", "learned"))
    p.add_argument("--trials", type=int, default=48, help="per task (shape)")
    p.add_argument("--workloads", help="comma-separated subset of " + ",".join(TRAIN_SHAPES))
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    generate(args.out, args.trials, args.workloads.split(",") if args.workloads else None, args.seed)


if __name__ == "__main__":
    main()
