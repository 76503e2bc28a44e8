"""Symbolic-shape workloads tuned at one size, run at ten others, beside numpy.

    python bench/symbolic.py [--trials 16] [--hint 512] [--sizes 1,7,...] [--db DIR] [--vs-specialized]

A matmul (n x 256 @ 256 x 256), a softmax and a layer norm over rows of 256, each with a symbolic
row count n, are tuned once with ``wb.tune(..., shape_hint={"n": HINT})``; the best record of the
symbolic function is built once for llvm and run at each size, checked against numpy and timed
beside it (medians of ``Kernel.time`` and of the same timer over the numpy expression). With
``--vs-specialized``, the same trace is also built for each n as a constant (the function
specialised to it) and timed beside the symbolic build: what a symbolic shape costs. On a
loaded machine the timings are noisy: compare only within one run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import workbench as wb  # noqa: E402
from workbench.codegen.timing import WINDOWS, time_runs  # noqa: E402
from workbench.tune.symbolic import specialize  # noqa: E402

COLS = 256
SIZES = (1, 3, 17, 64, 100, 129, 255, 300, 777, 1024)


def matmul() -> wb.PrimFunc:
    n = wb.var("n")
    A = wb.placeholder((n, COLS), name="A")
    W = wb.placeholder((COLS, COLS), name="W")
    k = wb.reduce_axis(COLS, "k")
    C = wb.compute((n, COLS), lambda i, j: wb.sum(A[i, k] * W[k, j], axis=k), name="C")
    return wb.create_func([A, W, C], name="matmul_n")


def softmax() -> wb.PrimFunc:
    n = wb.var("n")
    S = wb.placeholder((n, COLS), name="S")
    k1, k2 = wb.reduce_axis(COLS, "k1"), wb.reduce_axis(COLS, "k2")
    M = wb.compute((n,), lambda i: wb.max(S[i, k1], axis=k1), name="M")
    E = wb.compute((n, COLS), lambda i, j: wb.exp(S[i, j] - M[i]), name="E")
    Z = wb.compute((n,), lambda i: wb.sum(E[i, k2], axis=k2), name="Z")
    O = wb.compute((n, COLS), lambda i, j: E[i, j] / Z[i], name="O")
    return wb.create_func([S, O], name="softmax_n")


def layer_norm() -> wb.PrimFunc:
    n = wb.var("n")
    X = wb.placeholder((n, COLS), name="X")
    k1, k2 = wb.reduce_axis(COLS, "k1"), wb.reduce_axis(COLS, "k2")
    total = wb.compute((n,), lambda i: wb.sum(X[i, k1], axis=k1), name="total")
    D = wb.compute((n, COLS), lambda i, j: X[i, j] - total[i] / COLS, name="D")
    sq = wb.compute((n,), lambda i: wb.sum(D[i, k2] * D[i, k2], axis=k2), name="sq")
    Y = wb.compute((n, COLS), lambda i, j: D[i, j] / wb.sqrt(sq[i] / COLS + 1e-5), name="Y")
    return wb.create_func([X, Y], name="layer_norm_n")


def np_softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def np_layer_norm(x):
    d = x - x.mean(1, keepdims=True)
    return d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5)


def cases():
    rng = np.random.default_rng(0)
    w = rng.random((COLS, COLS), "float32")
    return [
        (matmul(), lambda n: [rng.random((n, COLS), "float32"), w], lambda a, w: a @ w),
        (softmax(), lambda n: [rng.random((n, COLS), "float32")], np_softmax),
        (layer_norm(), lambda n: [rng.random((n, COLS), "float32")], np_layer_norm),
    ]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=16)
    p.add_argument("--hint", type=int, default=512, help="the row count n to tune at")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="row counts to run at")
    p.add_argument("--db", default=None, help="folder of the tuning databases (default: a temporary one)")
    p.add_argument(
        "--vs-specialized", action="store_true", help="also time the trace built for each n as a constant"
    )
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    folder = args.db or tempfile.mkdtemp(prefix="wb-symbolic-")
    print(f"tuned at n={args.hint} ({args.trials} trials each); times are medians, noisy on a loaded machine")
    for func, make_inputs, reference in cases():
        db = wb.tune(
            func,
            trials=args.trials,
            num_trials_per_iter=min(8, args.trials),
            database=os.path.join(folder, f"{func.name}.jsonl"),
            shape_hint={"n": args.hint},
            baseline=False,
            verbose=False,
        )
        best = db.best(func)
        if best is None:
            print(f"{func.name}: no measured schedule applies to the symbolic function")
            continue
        kernel = wb.build(best.schedule(), target="llvm")
        print(f"\n{func.name}: best at n={args.hint}: {best.latency * 1e3:.4f} ms")
        spec_head = f" {'specialised ms':>15} {'sym/spec':>8}" if args.vs_specialized else ""
        print(f"{'n':>6} {'workbench ms':>13} {'numpy ms':>10} {'x numpy':>8}{spec_head}  correct")
        for n in sizes:
            inputs = make_inputs(n)
            expected = reference(*inputs)
            out = np.empty_like(expected)
            kernel(*inputs, out)
            ok = np.allclose(out, expected, rtol=1e-4, atol=1e-4)
            ours = kernel.time(*inputs, out)
            # kernel.time's statistic (each repeat its fastest ~1 ms window) on both sides
            theirs = time_runs(reference, inputs, repeat=5, min_repeat_ms=25.0, windows=WINDOWS)
            spec = ""
            if args.vs_specialized:
                fixed = wb.Schedule(specialize(func, {"n": n}))
                best.trace.apply_to_schedule(fixed)
                static = wb.build(fixed, target="llvm")
                static_out = np.empty_like(expected)
                static(*inputs, static_out)
                ok = ok and np.allclose(static_out, expected, rtol=1e-4, atol=1e-4)
                t = static.time(*inputs, static_out)
                spec = f" {t * 1e3:>15.4f} {ours / t:>8.2f}"
            print(f"{n:>6} {ours * 1e3:>13.4f} {theirs * 1e3:>10.4f} {theirs / ours:>8.2f}{spec}  {ok}")


if __name__ == "__main__":
    main()
