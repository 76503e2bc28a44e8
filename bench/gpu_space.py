"""GPU design-space samples, checked the three ways a machine without a GPU can: each random
sample of ``wb.generate_design_space(f, target="cuda")`` is either rejected by a postprocessor
(with its reason) or lowered to CUDA C that nvcc compiles and that, run on the emulator
(``cuda-emulate``), matches numpy.

    python bench/gpu_space.py                       # GMM and C2D (small shapes), 100 samples each
    python bench/gpu_space.py --workloads GMM SFM -n 20 --no-nvcc

Prints, per workload, the number of samples in each outcome: ``ok`` (compiled and correct),
``rejected: <postprocessor>: <reason>`` and, were there any, ``WRONG`` / ``ERROR`` (a bug).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

#: small shapes (the emulator runs every thread in numpy)
SHAPES = {
    "GMM": dict(b=1, n=32, m=32, k=32),
    "C2D": None,
    "SFM": dict(m=16, n=256),
    "NRM": dict(b=2, m=8, n=64),
}


def outcome_counts(name: str, shape: dict, n: int, nvcc: bool = True, seed: int = 0) -> collections.Counter:
    """Outcomes of ``n`` random samples of the cuda design space of workload ``name``."""
    import numpy as np

    import workbench as wb
    from workbench.space import default_postprocs, sample

    func = wb.workloads.get(name, **shape)
    inputs = wb.workloads.random_args(name, seed=seed, **shape)
    expected = wb.workloads.reference(name, **shape)(*inputs[:-1])
    spaces = wb.generate_design_space(func, target="cuda", seed=seed)
    posts = default_postprocs("cuda")
    for p in posts:
        p.initialize_with_target("cuda")
    counts: collections.Counter = collections.Counter()
    for s in range(n):
        sch, why = sample(func, spaces[s % len(spaces)], posts, seed=seed + s)
        if sch is None:
            counts["rejected: " + _reason(why)] += 1
            continue
        try:
            args = [a.copy() for a in inputs]
            wb.build(sch, target="cuda-emulate")(*args)
            if not np.allclose(args[-1], expected, rtol=1e-3, atol=1e-3):
                counts["WRONG"] += 1
                continue
            if nvcc:
                wb.build(sch, target="cuda")
            counts["ok"] += 1
        except Exception as exc:  # a bug of the space or the backend: counted, shown
            counts[f"ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:100]}"] += 1
    return counts


def _reason(why: str) -> str:
    """The postprocessor and the kind of reason, without the sample's numbers."""
    import re

    return re.sub(r"\d+", "N", why)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", nargs="+", default=["GMM", "C2D"])
    parser.add_argument("-n", type=int, default=100, help="samples per workload")
    parser.add_argument("--no-nvcc", action="store_true", help="skip the nvcc compilation")
    args = parser.parse_args(argv)
    import workbench as wb

    nvcc = not args.no_nvcc and shutil.which("nvcc") is not None
    print(f"nvcc: {'yes' if nvcc else 'no (emulator only)'}")
    for name in args.workloads:
        shape = SHAPES.get(name) or wb.workloads.small(name)
        start = time.perf_counter()
        counts = outcome_counts(name, shape, args.n, nvcc=nvcc)
        print(f"\n{name} {shape}: {args.n} samples in {time.perf_counter() - start:.0f} s")
        for key, count in counts.most_common():
            print(f"  {count:4d}  {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
