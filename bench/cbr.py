"""CBR (conv2d NHWC + bias + batch-norm + ReLU) scheduled by hand, Ansor style, at the paper shape.

Run: ``python bench/cbr.py [--quick]``. Every kernel is checked against the numpy reference,
then all are timed side by side in one run (alternating rounds, best mean of each), and the
ratios are printed:

* ``unscheduled``: the workload as the DSL writes it (six stages, serial loops) through llvm;
* ``fused``: the compute-location primitives only: the padding inlined (``compute_inline``),
  the four epilogue stages folded into one (``reverse_compute_inline``) and computed per output
  tile of the tiled conv (``reverse_compute_at``), the rows parallel, the channels vectorized;
* ``fused+cache``: the same with the conv accumulating in a ``local`` buffer (``cache_write``)
  whose write-back computes the epilogue, and its init split off (``decompose_reduction``);
  run only when those primitives are registered;
* ``numpy``: the workload's numpy reference (float64 matmuls per kernel tap, numpy's BLAS).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from workbench import workloads
from workbench.codegen.build import build
from workbench.target import Target
from workbench.schedule import REGISTRY, Schedule
from timing import side_by_side  # bench/timing.py (scripts run from bench/)

#: output columns x channels per tile; the channels are the SIMD lanes, two host vectors wide
#: (4 x 2 accumulator vectors: 32 channels with AVX-512, 16 with AVX2)
X_TILE, F_TILE = 4, 2 * Target("llvm").vector_lanes("float32")


def fuse_epilogue(sch: Schedule) -> None:
    """Inline the padding and fold bias_add, bn_mul, bn_add and the ReLU into one block
    (``bias_add``, writing the output)."""
    sch.compute_inline(sch.get_block("PaddedInput"))
    for name in ("compute", "bn_add", "bn_mul"):
        sch.reverse_compute_inline(sch.get_block(name))


def tile_conv(sch: Schedule, conv):
    """Rows in parallel; per (row, column tile, channel tile): the reduction loops, then an
    X_TILE x F_TILE register-sized tile, columns unrolled, channels vectorized."""
    nn, yy, xx, ff, ry, rx, rc = sch.get_loops(conv)
    xo, xi = sch.split(xx, [None, X_TILE])
    fo, fi = sch.split(ff, [None, F_TILE])
    sch.reorder(yy, xo, fo, ry, rx, rc, xi, fi)
    sch.parallel(sch.fuse(nn, yy))
    sch.unroll(xi)
    sch.vectorize(fi)
    return fo, ry


def fused(func) -> Schedule:
    sch = Schedule(func, seed=0)
    fuse_epilogue(sch)
    fo, _ = tile_conv(sch, sch.get_block("Conv2dOutput"))
    epilogue = sch.get_block("bias_add")
    sch.reverse_compute_at(epilogue, fo)
    sch.vectorize(sch.get_loops(epilogue)[-1])
    return sch


def fused_cached(func) -> Schedule:
    sch = Schedule(func, seed=0)
    fuse_epilogue(sch)
    conv = sch.get_block("Conv2dOutput")
    write_back = sch.cache_write(conv, 0, "local")
    sch.reverse_compute_inline(sch.get_block("bias_add"))  # the epilogue joins the write-back
    fo, ry = tile_conv(sch, conv)
    sch.reverse_compute_at(write_back, fo)
    sch.decompose_reduction(conv, ry)  # the init's loops copy the tile's kinds
    sch.vectorize(sch.get_loops(write_back)[-1])
    return sch


def main() -> None:
    quick = "--quick" in sys.argv
    target = Target("llvm")
    shape = workloads.lookup("CBR").shape()
    func = workloads.get("CBR")
    args = workloads.random_args("CBR", seed=0)
    reference = workloads.reference("CBR")
    expected = reference(*args[:-1])
    print(
        f"host: {target.mcpu}, {target.num_cores} cores; load average "
        f"{os.getloadavg()[0]:.2f} (other work on the machine skews timings)"
    )
    print(f"CBR at the paper shape {shape}, {workloads.flops('CBR') / 1e9:.2f} GFLOP")
    variants = {"unscheduled": func, "fused": fused(func)}
    if {"cache_write", "decompose_reduction"} <= set(REGISTRY):
        variants["fused+cache"] = fused_cached(func)
    kernels = {}
    for name, what in variants.items():
        t0 = time.perf_counter()
        kernels[name] = build(what, target="llvm")
        out = np.zeros_like(args[-1])
        kernels[name](*args[:-1], out)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4, err_msg=name)
        print(f"  {name:12s} built in {time.perf_counter() - t0:5.2f} s, matches numpy")
    outs = {name: np.zeros_like(args[-1]) for name in kernels}
    fns = [lambda: reference(*args[:-1])]
    fns += [lambda k=k, o=outs[n]: k(*args[:-1], o) for n, k in kernels.items()]
    times = side_by_side(fns, rounds=3 if quick else 7, number=1 if quick else 3)
    t_numpy, rest = times[0], dict(zip(kernels, times[1:]))
    print(f"{'kernel':14s} {'ms':>8s} {'unscheduled / it':>17s} {'numpy / it':>11s}")
    print(f"{'numpy':14s} {t_numpy * 1e3:8.2f} {rest['unscheduled'] / t_numpy:17.2f} {1.0:11.2f}")
    for name, t in rest.items():
        print(f"{name:14s} {t * 1e3:8.2f} {rest['unscheduled'] / t:17.2f} {t_numpy / t:11.2f}")


if __name__ == "__main__":
    main()
