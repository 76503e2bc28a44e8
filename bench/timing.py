"""Timing shared by the benchmarks, and the numpy versions of the workloads they time against.

Stdlib and numpy only (no workbench import): ``bench/vs_tvm.py`` also loads this file into the
TVM virtualenv's Python, so that every framework is timed by the same loop.
"""

import math
import time

import numpy as np


def side_by_side(fns, rounds: int, number: int) -> list[float]:
    """Best mean time of each function, measured in alternation."""
    best = [float("inf")] * len(fns)
    for fn in fns:
        fn()  # warm-up
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            best[k] = min(best[k], (time.perf_counter() - t0) / number)
    return best


def time_calls(fn, repeat: int = 10, min_repeat_ms: float = 40.0, warmup: int = 3) -> list[float]:
    """Seconds per call of ``fn()``, one value per repeat: a plain Python loop of calls.

    The number of calls per repeat comes from a calibration batch (at least 5 ms), so that
    every repeat lasts ``min_repeat_ms`` or more; a repeat that still falls short (the machine
    was faster than during calibration) is run again with more calls, not kept. (Not
    ``workbench.codegen.timing.time_runs``: the TVM children run this file in TVM's virtualenv,
    where workbench is not installed; one loop must time all three frameworks alike.)
    """
    for _ in range(warmup):
        fn()
    clock, number = time.perf_counter, 1
    while True:  # calibration
        t0 = clock()
        for _ in range(number):
            fn()
        dt = clock() - t0
        if dt >= 5e-3:
            break
        number *= 4
    min_s = min_repeat_ms / 1e3
    number = max(1, math.ceil(min_s / (dt / number) * 1.05))
    out: list[float] = []
    while len(out) < repeat:
        t0 = clock()
        for _ in range(number):
            fn()
        dt = clock() - t0
        if dt < min_s:
            number = math.ceil(number * min_s / dt * 1.05)
            continue
        out.append(dt / number)
    return out


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or the platform's processor string."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown CPU"


# numpy baselines: float32, in the channels-last layouts of TVM's te workloads (te_workload), so
# that numpy, TVM and workbench read the same arrays
_as_strided = np.lib.stride_tricks.as_strided


def _im2col_conv(x, w, stride, padding):
    """N-d convolution (channels last) as one float32 GEMM over an im2col view."""
    nsp = x.ndim - 2
    ks, (ci, co) = w.shape[:nsp], w.shape[nsp:]
    xp = np.pad(x, [(0, 0)] + [(padding, padding)] * nsp + [(0, 0)])
    outs = [(s + 2 * padding - k) // stride + 1 for s, k in zip(x.shape[1:-1], ks)]
    st = xp.strides
    view = _as_strided(
        xp, (x.shape[0], *outs, *ks, ci), (st[0], *[stride * s for s in st[1:-1]], *st[1:-1], st[-1])
    )
    return (view.reshape(-1, math.prod(ks) * ci) @ w.reshape(-1, co)).reshape(x.shape[0], *outs, co)


def _depthwise(x, w, padding):
    """Nine (K x K) shifted multiply-adds."""
    _, kh, kw, _ = w.shape
    h, wd = x.shape[1:3]
    xp = np.pad(x, ((0, 0), (padding, padding), (padding, padding), (0, 0)))
    out = xp[:, :h, :wd] * w[0, 0, 0]
    for i in range(kh):
        for j in range(kw):
            if i or j:
                out += xp[:, i : i + h, j : j + wd] * w[0, i, j]
    return out


def _softmax(a):
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _norm(a):
    flat = a.reshape(a.shape[0], -1)
    return np.sqrt(np.vecdot(flat, flat))  # a BLAS dot: ~3x faster than (a * a).sum()


#: workload name -> (shape dict -> fn(*inputs) returning the output), where numpy has the
#: operation as a float32 BLAS call or a few vectorized numpy operations
NUMPY = {
    "GMM": lambda s: np.matmul,
    "TBG": lambda s: lambda q, v: np.matmul(q.transpose(0, 2, 1, 3), v.transpose(0, 2, 3, 1)),
    "C1D": lambda s: lambda x, w: _im2col_conv(x, w, s["stride"], s["padding"]),
    "C2D": lambda s: lambda x, w: _im2col_conv(x, w, s["stride"], s["padding"]),
    "DEP": lambda s: lambda x, w: _depthwise(x, w, s["padding"]),
    "NRM": lambda s: _norm,
    "SFM": lambda s: _softmax,
}
