"""Calling a built kernel from Python: microseconds per call, today's path against the old one.

Run: ``python bench/call_overhead.py [--number N] [--rounds R]``. For trivial LLVM kernels of 1
to 4 arrays (4 floats each: the kernel itself takes nanoseconds), prints the time per call of

* ``kernel(*arrays)``: the argument checks and the call in native code
  (:mod:`workbench.codegen.llvm.pycall`: a builtin function CPython calls directly);
* ``kernel.entry(*arrays)``: what ``kernel.time`` and the tuner's workers time (no checks);
* the old path, rebuilt here as it was: ``Kernel.check_args`` in Python, then a ctypes call
  with an array of ``a.ctypes.data`` pointers;

measured side by side in one run (alternated, best of the rounds: ``bench/timing.py``), minus
the cost of the empty ``lambda`` that wraps each call. The goal: at most 3 µs for 4 arrays.
"""

from __future__ import annotations

import argparse
import ctypes
import os

import numpy as np

import workbench as wb
from timing import cpu_model, side_by_side  # bench/timing.py (scripts run from bench/)


def trivial_kernel(n: int):
    """A kernel of ``n`` float32[4] arrays: the last is the sum of the others (or its index)."""
    ins = [wb.placeholder((4,), "float32", name=f"A{k}") for k in range(n - 1)]
    if ins:
        out = wb.compute((4,), lambda i: sum((a[i] for a in ins[1:]), ins[0][i]), name="C")
    else:
        out = wb.compute((4,), lambda i: wb.cast("float32", i), name="C")
    return wb.build(wb.create_func(ins + [out], name=f"args{n}"), "llvm")


def old_call(kernel):
    """``kernel(*arrays)`` as it was: full Python checks, ctypes with ``a.ctypes.data``."""
    cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(kernel._compiled.address)
    args_t = ctypes.c_void_p * len(kernel.func.params)

    def call(*arrays):
        kernel.check_args(arrays)
        if cfunc(args_t(*[a.ctypes.data for a in arrays])):
            raise MemoryError("kernel could not allocate its intermediate buffers")

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000, help="calls per measurement")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"# {cpu_model()}, {len(os.sched_getaffinity(0))} CPUs, 1-min load {load:.2f}")
    print(
        "# microseconds per call (the empty lambda around each call subtracted); best of "
        f"{args.rounds} rounds of {args.number} calls"
    )
    print(f"{'arrays':>6} {'kernel()':>9} {'entry()':>8} {'old path':>9} {'old / new':>9}")
    for n in range(1, 5):
        kernel = trivial_kernel(n)
        arrays = [np.ones(4, "float32") for _ in range(n)]
        old = old_call(kernel)
        entry = kernel.entry
        if kernel._fast is None:
            print("  (the native fast path is unavailable here: kernel() is the Python path)")
        empty, new, timed, before = side_by_side(
            [lambda: None, lambda: kernel(*arrays), lambda: entry(*arrays), lambda: old(*arrays)],
            rounds=args.rounds,
            number=args.number,
        )
        new_us, entry_us, old_us = ((t - empty) * 1e6 for t in (new, timed, before))
        print(f"{n:>6} {new_us:>9.2f} {entry_us:>8.2f} {old_us:>9.2f} {old_us / new_us:>8.1f}x")


if __name__ == "__main__":
    main()
