"""CPU code generation: hand-scheduled GMM against numpy, parallel-region overhead, compile time.

Run: ``python bench/codegen.py [--quick]``. Everything is measured side by side in one run on
this machine (numpy and the kernel alternate, best of several rounds, so a busy neighbour hurts
both alike). Printed:

* GMM (float32, n^3 for n = 128, 512, 1024): GFLOP/s of numpy's ``matmul`` (its BLAS, all
  threads) and of four kernels, with the throughput ratio kernel / numpy:
  - ``primitives``: the workload scheduled with split / reorder / fuse / parallel / vectorize /
    unroll only: parallel column panels two SIMD vectors wide, row tiles inside, a register
    tile (8 x 32 with AVX-512, 4 x 16 with AVX2: rows unrolled, columns as SIMD lanes) under
    the k loop, accumulating in C;
  - ``+cache_write local``: the same, accumulating in a ``cache_write(.., "local")`` buffer
    written back under the row-tile loop (``reverse_compute_at``); lowering compacts it to a
    register tile allocated in that loop (:mod:`workbench.codegen.compaction`);
  - ``(whole)``: that schedule lowered with ``compact=False``: the local buffer stays n x n at
    the root, on the heap — what compaction buys;
  - ``micro-kernel``: a lowered loop nest written by hand with what the cache / reduction
    primitives will produce: B packed into contiguous panels, a register-tile "local"
    accumulator (promoted to registers), C written once.
* the overhead of one parallel region (fork + join on the thread pool), in microseconds;
* compile time per kernel (lower + emit + optimize + JIT).

The issue's goal: ``primitives`` at 1024^3 reaches at least 0.7x numpy's throughput.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

from workbench import workloads
from workbench.codegen.build import build
from workbench.codegen.llvm import build_llvm
from workbench.codegen.lower import lower
from workbench.target import Target
from workbench.ir import Allocate, Buffer, BufferStore, FloatImm, ForKind, IntImm, PrimFunc, Var, seq
from workbench.ir.stmt import make_for
from workbench.schedule import Schedule
from timing import side_by_side  # bench/timing.py (scripts run from bench/)

#: register tile, two host SIMD vectors wide: 8 rows x 2 zmm = 16 of the 32 AVX-512 registers,
#: 4 rows x 2 ymm = 8 of the 16 AVX2 ones
COLS = 2 * Target("llvm").vector_lanes("float32")
ROWS = 8 if Target("llvm").vector_width_bits >= 512 else 4


def gmm_primitives(n: int) -> Schedule:
    """GMM scheduled with loop primitives only."""
    sch = Schedule(workloads.get("GMM", b=1, n=n, m=n, k=n), seed=0)
    block = sch.get_child_blocks(sch.get_block("root"))[0]
    b, i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, ROWS])
    jo, ji = sch.split(j, [None, COLS])
    sch.reorder(jo, io, k, ii, ji)  # a thread keeps its column panel of Y in cache
    sch.parallel(sch.fuse(b, jo))
    sch.unroll(ii)
    sch.vectorize(ji)
    return sch


def gmm_cache_write(n: int) -> Schedule:
    """``gmm_primitives`` accumulating in a local cache written back per row tile."""
    sch = Schedule(workloads.get("GMM", b=1, n=n, m=n, k=n), seed=0)
    block = sch.get_child_blocks(sch.get_block("root"))[0]
    writeback = sch.cache_write(block, 0, "local")
    b, i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, ROWS])
    jo, ji = sch.split(j, [None, COLS])
    sch.reorder(jo, io, k, ii, ji)
    sch.reverse_compute_at(writeback, io)
    sch.parallel(sch.fuse(b, jo))
    sch.unroll(ii)
    sch.vectorize(ji)
    sch.vectorize(sch.get_loops(writeback)[-1])
    return sch


def gmm_micro_kernel(n: int) -> PrimFunc:
    """The lowered nest of a packed, register-accumulating GMM (``Z = X @ Y``, batch 1)."""
    X, Y, Z = Buffer("X", (1, n, n)), Buffer("Y", (1, n, n)), Buffer("Z", (1, n, n))
    packed = Buffer("Y_packed", (n // COLS, n, COLS))
    acc = Buffer("acc", (ROWS, COLS), scope="local")
    pj, pk, pc = Var("pj"), Var("pk"), Var("pc")
    pack = make_for(
        pj,
        n // COLS,
        make_for(
            pk,
            n,
            make_for(
                pc, COLS, BufferStore(packed, Y[0, pk, pj * COLS + pc], (pj, pk, pc)), ForKind.VECTORIZED
            ),
        ),
        ForKind.PARALLEL,
    )
    io, jo, k, ii, jj = Var("io"), Var("jo"), Var("k"), Var("ii"), Var("jj")
    row, col = io * ROWS + ii, jo * COLS + jj

    def tile(body):
        return make_for(ii, ROWS, make_for(jj, COLS, body, ForKind.VECTORIZED), ForKind.UNROLLED)

    update = BufferStore(acc, acc[ii, jj] + X[0, row, k] * packed[jo, k, jj], (ii, jj))
    nest = make_for(
        io,
        n // ROWS,
        make_for(
            jo,
            n // COLS,
            Allocate(
                acc,
                seq(
                    tile(BufferStore(acc, FloatImm(0.0), (ii, jj))),
                    make_for(k, n, tile(update)),
                    tile(BufferStore(Z, acc[ii, jj], (IntImm(0), row, col))),
                ),
            ),
        ),
        ForKind.PARALLEL,
    )
    return PrimFunc("gmm_micro_kernel", (X, Y, Z), Allocate(packed, seq(pack, nest)), {"lowered": True})


def timed_build(what):
    t0 = time.perf_counter()
    kernel = build(what, "llvm") if isinstance(what, Schedule) else build_llvm(what)
    return kernel, time.perf_counter() - t0


def bench_gmm(sizes, rounds):
    names = ["primitives", "+cache_write local", "(whole)", "micro-kernel"]
    print("GMM float32 n^3 (GFLOP/s; ratio = kernel / numpy throughput)")
    print(
        f"{'n':>6} {'numpy':>8}"
        + "".join(f" {name:>{max(len(name), 7)}} {'ratio':>5}" for name in names)
        + f" {'compile s':>10}"
    )
    compile_times = []
    for n in sizes:
        rng = np.random.default_rng(0)
        x = rng.uniform(-1, 1, (1, n, n)).astype("float32")
        y = rng.uniform(-1, 1, (1, n, n)).astype("float32")
        kernels = [
            timed_build(gmm_primitives(n)),
            timed_build(gmm_cache_write(n)),
            timed_build(lower(gmm_cache_write(n).func, compact=False)),
            timed_build(gmm_micro_kernel(n)),
        ]
        compile_times += [t for _, t in kernels]
        outs = [np.zeros((1, n, n), "float32") for _ in range(len(kernels) + 1)]
        expected = x[0] @ y[0]
        for (kernel, _), out in zip(kernels, outs[1:]):
            kernel(x, y, out)
            np.testing.assert_allclose(out[0], expected, rtol=1e-3, atol=1e-3 * n**0.5)
        number = max(1, int(1e10 / n**3))  # ~0.1 s per round at 200 GFLOP/s
        times = side_by_side(
            [lambda: np.matmul(x[0], y[0], out=outs[0][0])]
            + [lambda k=k, o=o: k.entry(x, y, o) for (k, _), o in zip(kernels, outs[1:])],
            rounds,
            number,
        )
        gf = [2 * n**3 / t / 1e9 for t in times]
        print(
            f"{n:>6} {gf[0]:>8.1f}"
            + "".join(f" {g:>{max(len(name), 7)}.1f} {g / gf[0]:>5.2f}" for name, g in zip(names, gf[1:]))
            + " "
            + "/".join(f"{t:.2f}" for _, t in kernels)
        )
    return compile_times


def bench_parallel_overhead(rounds):
    """(time of R regions - time of the same loops run serially) / R."""
    cores = Target("llvm").num_cores
    regions = 2000
    A = Buffer("A", (cores,))
    r, p = Var("r"), Var("p")

    def kernel(kind):
        body = make_for(r, regions, make_for(p, cores, BufferStore(A, A[p] + 1.0, (p,)), kind))
        return build_llvm(PrimFunc("regions", (A,), body, {"lowered": True}))

    par, ser = kernel(ForKind.PARALLEL), kernel(ForKind.SERIAL)
    a = np.zeros(cores, "float32")
    t_par, t_ser = side_by_side([lambda: par.entry(a), lambda: ser.entry(a)], rounds, 5)
    overhead = (t_par - t_ser) / regions * 1e6
    print(
        f"parallel region overhead: {overhead:.2f} us per region "
        f"({cores} threads, workbench pool wb_parallel, {regions} regions per call)"
    )


def bench_compile(gmm_times):
    times = []
    for name in workloads.names():
        times.append(timed_build(workloads.get(name))[1])  # paper shapes, unscheduled
    print(
        f"compile time per kernel: GMM kernels {statistics.median(gmm_times) * 1e3:.0f} ms "
        f"median; the 12 workloads unscheduled: median {statistics.median(times) * 1e3:.0f} ms,"
        f" max {max(times) * 1e3:.0f} ms"
    )


def main() -> None:
    quick = "--quick" in sys.argv
    target = Target("llvm")
    print(
        f"host: {target.mcpu}, {target.num_cores} cores, {target.vector_width_bits}-bit SIMD; "
        f"load average {os.getloadavg()[0]:.2f} (other work on the machine skews timings)"
    )
    gmm_times = bench_gmm([128, 512] if quick else [128, 512, 1024], rounds=3 if quick else 7)
    bench_parallel_overhead(rounds=3 if quick else 10)
    bench_compile(gmm_times)


if __name__ == "__main__":
    main()
