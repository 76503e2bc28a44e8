"""How much ``kernel.time()`` moves between calls: medians of 10 calls for a few kernels.

Run: ``python bench/timing_stability.py [--calls 10] [--min-repeat-ms 25]``. For GMM-128
hand-scheduled (parallel, vectorized: ``bench/codegen.py``'s ``primitives`` schedule), GMM-128
unscheduled and NRM (default shapes), each built once, prints the median of each of ``calls``
``kernel.time()`` calls (5 repeats each, number chosen so a repeat lasts ``min-repeat-ms``),
then across the calls: min, max and (max - min) / min of the medians, and the largest
within-call spread (max / min of one call's repeats). The goal: within 5 % across calls on a
quiet machine. The 1-minute load average is printed before and after: on a busy machine the
numbers say more about the neighbours than about the kernels.

A second kernel is built between the calls of the first kernel (``--build-between``) to check
that timing does not depend on what else the process did.
"""

from __future__ import annotations

import argparse
import os

from codegen import gmm_primitives  # bench/codegen.py (scripts run from bench/)
from timing import cpu_model  # bench/timing.py

from workbench import workloads
from workbench.codegen.build import build


def kernels():
    gmm = workloads.random_args("GMM", seed=0)
    nrm = workloads.random_args("NRM", seed=0)
    return [
        ("GMM-128 scheduled", build(gmm_primitives(128).func, "llvm"), gmm),
        ("GMM-128 unscheduled", build(workloads.get("GMM"), "llvm"), gmm),
        ("NRM", build(workloads.get("NRM"), "llvm"), nrm),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--min-repeat-ms", type=float, default=25.0)
    parser.add_argument("--build-between", action="store_true", help="build another kernel before each call")
    args = parser.parse_args()
    todo = kernels()  # loads libgomp, with a bounded spin unless the environment chose
    wait = {k: os.environ[k] for k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY") if k in os.environ}
    print(
        f"# {cpu_model()}, {len(os.sched_getaffinity(0))} CPUs, libgomp waiting: "
        f"{' '.join(f'{k}={v}' for k, v in wait.items()) or 'default'}"
    )
    print(f"# 1-min load before: {os.getloadavg()[0]:.2f}")
    print(
        f"{'kernel':<20} {'medians of each call (ms)':<50} {'min':>8} {'max':>8} {'across':>7} {'within':>7}"
    )
    for name, kernel, data in todo:
        medians, within = [], []
        for _ in range(args.calls):
            if args.build_between:
                build(workloads.get("SFM"), "llvm")
            t = kernel.time(*data, min_repeat_ms=args.min_repeat_ms)
            medians.append(t)
            within.append(t.spread)
        lo, hi = min(medians), max(medians)
        shown = " ".join(f"{m * 1e3:.4g}" for m in medians)
        print(
            f"{name:<20} {shown:<50} {lo * 1e3:>8.4f} {hi * 1e3:>8.4f} "
            f"{(hi - lo) / lo * 100:>6.1f}% {max(within):>6.2f}x"
        )
    print(f"# 1-min load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
