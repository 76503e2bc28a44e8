"""Tensorize: GMM with the host's micro-kernel intrinsic against the same schedule without it.

Run: ``python bench/tensorize.py [--quick]``. Measured side by side in one run on this machine
(the three contenders alternate, best of several rounds, so a busy neighbour hurts all alike).
For GMM float32 n^3 it prints the GFLOP/s of

* ``numpy``: ``matmul`` (its BLAS), on one thread like the kernels unless
  ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` say otherwise;
* ``plain``: the workload tiled for the intrinsic and nothing more: ``i, j, k`` split by the
  tile, the tile loops innermost (one thread: the comparison is about the kernel, not the
  threading);
* ``tensorized``: the very same schedule plus ``tensorize(i1, intrinsic)``, which swaps the
  tile's scalar loop nest for the intrinsic's register-blocked kernel. The intrinsic is the
  host's largest that divides the sizes (``gemm_intrinsics``): ``avx512_f32_gemm_8x32x64`` on
  AVX-512 (an 8 x 32 accumulator in zmm registers), ``avx2_f32_gemm_4x16x64`` on AVX2 + FMA;

and the ratios tensorized / plain and tensorized / numpy.
"""

from __future__ import annotations

import os
import re
import sys

# one BLAS thread, like the kernels (set before numpy loads its BLAS; the caller may override)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from workbench import workloads  # noqa: E402
from workbench.codegen.build import build  # noqa: E402
from workbench.target import Target  # noqa: E402
from workbench.schedule import Schedule  # noqa: E402
from workbench.schedule.intrinsics import gemm_intrinsics  # noqa: E402
from workbench.schedule.intrinsics.x86 import gemm_tile  # noqa: E402
from timing import side_by_side  # bench/timing.py (scripts run from bench/)


def host_intrinsic(sizes) -> str:
    """The host's largest GEMM micro-kernel whose tile divides every size."""
    for name in gemm_intrinsics(Target("llvm")):
        if all(n % t == 0 for n in sizes for t in gemm_tile(name)):
            return name
    sys.exit(f"no GEMM micro-kernel for this host ({Target('llvm').mcpu}): it needs AVX2 + FMA or AVX-512")


def gmm_schedule(n: int, intrin: str, tensorize: bool) -> Schedule:
    sch = Schedule(workloads.get("GMM", b=1, n=n, m=n, k=n), seed=0)
    _, i, j, k = sch.get_loops("Z")
    tile = gemm_tile(intrin)
    i0, i1 = sch.split(i, [None, tile[0]])
    j0, j1 = sch.split(j, [None, tile[1]])
    k0, k1 = sch.split(k, [None, tile[2]])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    if tensorize:
        sch.tensorize(i1, intrin)
    return sch


def bench_gmm(sizes, rounds: int) -> None:
    intrin = host_intrinsic(sizes)
    print(f"GMM float32 n^3, {intrin} (GFLOP/s)")
    print(f"{'n':>6} {'numpy':>8} {'plain':>8} {'tensorized':>11} {'tens/plain':>11} {'tens/numpy':>11}")
    for n in sizes:
        rng = np.random.default_rng(0)
        x = rng.uniform(-1, 1, (1, n, n)).astype("float32")
        y = rng.uniform(-1, 1, (1, n, n)).astype("float32")
        expected = x[0] @ y[0]
        kernels = [build(gmm_schedule(n, intrin, t), target="llvm") for t in (False, True)]
        outs = [np.zeros((1, n, n), "float32") for _ in range(3)]
        for kernel, out in zip(kernels, outs[1:]):
            kernel(x, y, out)
            np.testing.assert_allclose(out[0], expected, rtol=1e-3, atol=1e-3 * n**0.5)
        number = max(1, int(2e8 / n**3))
        times = side_by_side(
            [lambda: np.matmul(x[0], y[0], out=outs[0][0])]
            + [lambda k=k, o=o: k.entry(x, y, o) for k, o in zip(kernels, outs[1:])],
            rounds,
            number,
        )
        gf = [2 * n**3 / t / 1e9 for t in times]
        print(
            f"{n:>6} {gf[0]:>8.1f} {gf[1]:>8.1f} {gf[2]:>11.1f} {gf[2] / gf[1]:>11.1f} {gf[2] / gf[0]:>11.2f}"
        )
    vectors = sorted(set(re.findall(r"<\d+ x float>", kernels[1].source("llvm"))))
    print(
        f"tensorized kernel: vector types {', '.join(vectors)} in its LLVM IR, "
        f"{kernels[1].source('asm').count('vfmadd')} vfmadd instructions in its assembly"
    )


def main() -> None:
    quick = "--quick" in sys.argv
    target = Target("llvm")
    print(
        f"host: {target.mcpu}, {target.num_cores} cores, {target.vector_width_bits}-bit SIMD; "
        f"load average {os.getloadavg()[0]:.2f} (other work on the machine skews timings); "
        f"numpy BLAS threads: {os.environ['OPENBLAS_NUM_THREADS']}"
    )
    bench_gmm([256] if quick else [256, 512], rounds=3 if quick else 5)


if __name__ == "__main__":
    main()
