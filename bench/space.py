"""Random points of each workload's default llvm design space: how many the postprocessors
reject (and why), and whether every accepted one builds with llvm and matches numpy.

    python bench/space.py                      # 200 samples of each of the 12 workloads
    python bench/space.py --samples 20 GMM C2D

Small shapes (``workloads.small``). Exit status 1 if an accepted candidate fails to build or
computes a wrong result.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time

import numpy as np

from workbench import workloads
from workbench.codegen import build
from workbench.space import PostOrderApply, sample


def run(name: str, n: int, seed: int) -> tuple[int, collections.Counter, list[str]]:
    shape = workloads.small(name)
    func = workloads.get(name, **shape)
    space = PostOrderApply()
    space.initialize_with_target("llvm")
    sketches = space.generate_design_space(func, seed=seed)
    args = workloads.random_args(name, seed=0, **shape)
    expected = workloads.reference(name, **shape)(*args[:-1])
    rejected: collections.Counter = collections.Counter()
    failures: list[str] = []
    for k in range(n):
        cand, reason = sample(func, sketches[k % len(sketches)], space.postprocs, seed=seed + k)
        if cand is None:
            rejected[reason.split(":")[0]] += 1
            continue
        out = [a.copy() for a in args]
        try:
            build(cand, target="llvm")(*out)
        except Exception as exc:  # a build failure of an accepted candidate is a finding
            failures.append(f"sample {k}: build failed: {type(exc).__name__}: {exc}")
            continue
        if not np.allclose(out[-1], expected, rtol=1e-4, atol=1e-4):
            failures.append(f"sample {k}: wrong result (max error {np.abs(out[-1] - expected).max():.3g})")
    return len(sketches), rejected, failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=workloads.names()[:12])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    opts = parser.parse_args(argv)
    print(
        f"{'workload':8} {'sketches':>8} {'samples':>7} {'rejected':>8} {'rate':>6} "
        f"{'failed':>6} {'seconds':>7}  rejection reasons"
    )
    bad = 0
    for name in opts.names:
        start = time.perf_counter()
        n_sketches, rejected, failures = run(name, opts.samples, opts.seed)
        n_rej = sum(rejected.values())
        reasons = ", ".join(f"{r} x{c}" for r, c in rejected.most_common()) or "-"
        print(
            f"{name:8} {n_sketches:8} {opts.samples:7} {n_rej:8} {n_rej / opts.samples:6.1%} "
            f"{len(failures):6} {time.perf_counter() - start:7.1f}  {reasons}",
            flush=True,
        )
        for f in failures[:3]:
            print(f"    {f}")
        bad += len(failures)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
