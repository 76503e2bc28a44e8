"""FP32 FMA peak of this CPU: the yardstick for "% of peak", measured in the run that uses it.

    python bench/peak.py                      # all cores, the host's vector width
    python bench/peak.py --threads 1 --width 256

One function, JIT-compiled with llvmlite (no C compiler needed): 12 independent chains of
``a = fma(a, m, c)`` on ``<lanes x float>`` vectors in a counted loop, enough chains to cover
the FMA latency on two ports. One copy runs per thread, from Python threads: a ctypes call
releases the GIL, so the copies run on all cores at once. GFLOP/s = threads x iterations x
12 chains x lanes x 2 / wall seconds. The width defaults to the target's (512 bits on AVX-512
hosts, 256 on AVX2), the width workbench's and TVM's kernels are compiled for.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

CHAINS = 12


def host_width() -> int:
    """The host target's widest vector register in bits (512 with AVX-512, 256 with AVX2)."""
    from workbench.target import Target

    return Target.host().vector_width_bits


def _fma_loop_ir(lanes: int) -> str:
    """LLVM IR of ``double fma_peak(i64 iters)``: CHAINS independent vector FMA chains."""
    from llvmlite import ir

    f32, i64 = ir.FloatType(), ir.IntType(64)
    vec = ir.VectorType(f32, lanes)
    module = ir.Module(name="fma_peak")
    fma = ir.Function(module, ir.FunctionType(vec, [vec, vec, vec]), name=f"llvm.fma.v{lanes}f32")
    fn = ir.Function(module, ir.FunctionType(ir.DoubleType(), [i64]), name="fma_peak")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    splat = lambda x: ir.Constant(vec, [x] * lanes)  # noqa: E731
    m, c = splat(0.999999), splat(1e-7)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(i64, name="i")
    # distinct start values, so no two chains are the same computation
    acc = [b.phi(vec, name=f"a{k}") for k in range(CHAINS)]
    nxt = [b.call(fma, [a, m, c]) for a in acc]
    i_next = b.add(i, ir.Constant(i64, 1))
    b.cbranch(b.icmp_signed("<", i_next, fn.args[0]), loop, done)
    i.add_incoming(ir.Constant(i64, 0), entry)
    i.add_incoming(i_next, loop)
    for k, (a, n) in enumerate(zip(acc, nxt)):
        a.add_incoming(splat(1.0 + 0.01 * k), entry)
        a.add_incoming(n, loop)
    b.position_at_end(done)
    total = nxt[0]
    for n in nxt[1:]:
        total = b.fadd(total, n)
    lane0 = b.extract_element(total, ir.Constant(ir.IntType(32), 0))
    b.ret(b.fpext(lane0, ir.DoubleType()))  # a result, so the loop is not dead code
    return str(module)


class FMAPeak:
    """The compiled microbenchmark for one vector width; :meth:`measure` runs it."""

    def __init__(self, width: int | None = None):
        from workbench.codegen.llvm.jit import jit
        from workbench.target import Target

        self.width = width or host_width()
        self.lanes = self.width // 32
        self._compiled = jit(_fma_loop_ir(self.lanes), "fma_peak", Target.host())
        self._fn = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_int64)(self._compiled.address)

    def _run(self, threads: int, iters: int) -> float:
        """Wall seconds for ``threads`` copies of ``iters`` iterations, started together."""
        start = threading.Barrier(threads + 1)

        def work():
            start.wait()
            self._fn(iters)

        pool = [threading.Thread(target=work) for _ in range(threads)]
        for t in pool:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in pool:
            t.join()
        return time.perf_counter() - t0

    def measure(self, threads: int | None = None, runs: int = 7, seconds: float = 0.2) -> list[float]:
        """GFLOP/s of ``runs`` runs on ``threads`` threads (default: all cores), each about
        ``seconds`` long."""
        threads = threads or len(os.sched_getaffinity(0))
        iters = 1 << 16
        while (dt := self._run(1, iters)) < 0.02:  # calibrate on one core
            iters *= 4
        iters = max(1, int(iters * seconds / dt))
        flop = threads * iters * CHAINS * self.lanes * 2
        return [flop / self._run(threads, iters) / 1e9 for _ in range(runs)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=None, help="default: all cores")
    p.add_argument(
        "--width",
        type=int,
        choices=(128, 256, 512),
        default=None,
        help="vector bits (default: the host target's)",
    )
    p.add_argument("--runs", type=int, default=7)
    args = p.parse_args(argv)
    peak = FMAPeak(args.width)
    threads = args.threads or len(os.sched_getaffinity(0))
    vals = peak.measure(threads, args.runs)
    print(
        f"FMA peak, {peak.width}-bit vectors, {threads} thread(s): median "
        f"{statistics.median(vals):.1f} GFLOP/s, best {max(vals):.1f} "
        f"({', '.join(f'{v:.0f}' for v in vals)})"
    )


if __name__ == "__main__":
    main()
