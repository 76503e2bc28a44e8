"""GPU kernels through pycuda, checked against numpy, timed beside cuBLAS (cupy or torch).

    python bench/gpu.py                 # the hand GPU schedules at bench shapes, plus a short tune
    python bench/gpu.py --trials 0      # no tune

Where a GPU is at hand (pycuda installed, a driver, a device), for each hand schedule of
:mod:`workbench.recipes.gpu` it builds the kernel for the GPU's own architecture,
runs it once against the workload's numpy reference, then times it (``kernel.time``: the
kernels only, the arrays staying on the GPU) beside the vendor library doing the same work —
cuBLAS through ``cupy.matmul`` or ``torch.matmul`` (whichever is installed) for the matrix
multiplies; the other workloads have no vendor counterpart here and print none. Then it tunes
GMM for ``--trials`` trials on the GPU and times the best record the same way.

Everything is measured side by side in one run on one GPU; it prints the GPU and the host CPU.
Elsewhere it prints why there is no GPU and exits 0.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workbench as wb  # noqa: E402
from workbench.codegen.cuda import gpu_unavailable  # noqa: E402
from workbench.recipes import gpu as S  # noqa: E402

#: label -> (workload, schedule function, shape); GMM is the paper's 1024^3
CASES = {
    "GMM shared tiles": ("GMM", S.gmm_shared, dict(b=1, n=1024, m=1024, k=1024)),
    "GMM-FP16 wmma": ("GMM-FP16", S.gmm_wmma, dict(n=1024, m=1024, k=1024)),
    "C2D shared tile": (
        "C2D",
        S.c2d_shared,
        dict(n=1, h=56, w=56, ci=64, co=64, kernel=3, stride=1, padding=1),
    ),
    "SFM cross-thread": ("SFM", S.sfm_cross_thread, dict(m=256, n=256)),
    "NRM cross-thread": ("NRM", S.nrm_cross_thread, dict(b=256, m=256, n=256)),
}


def vendor_matmul(a: np.ndarray, b: np.ndarray):
    """(name, seconds per call) of cuBLAS multiplying ``a @ b``, through cupy or torch; None
    when neither is installed."""
    try:
        import cupy as cp

        da, db = cp.asarray(a), cp.asarray(b)
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        cp.matmul(da, db)
        n = 20
        start.record()
        for _ in range(n):
            cp.matmul(da, db)
        stop.record()
        stop.synchronize()
        return "cuBLAS (cupy)", cp.cuda.get_elapsed_time(start, stop) / 1e3 / n
    except ImportError:
        pass
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        da, db = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        torch.matmul(da, db)
        torch.cuda.synchronize()
        n = 20
        t0 = time.perf_counter()
        for _ in range(n):
            torch.matmul(da, db)
        torch.cuda.synchronize()
        return "cuBLAS (torch)", (time.perf_counter() - t0) / n
    except ImportError:
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=32, help="trials of the GMM tune (0: none)")
    args = ap.parse_args()
    why = gpu_unavailable()
    if why is not None:
        print(
            f"bench/gpu.py: no GPU here ({why}); nothing measured. "
            f"python bench/gpu_space.py checks the GPU path without one (nvcc + emulator)."
        )
        return 0
    from timing import cpu_model  # bench/timing.py
    from workbench.codegen.cuda.launch import device_arch
    import pycuda.driver as drv

    arch = device_arch()
    target = f"cuda -arch={arch}"
    print(f"GPU: {drv.Device(0).name()} ({arch}); host CPU: {cpu_model()}")
    print(f"{'kernel':22s} {'shape':38s} {'ms':>9s} {'GFLOP/s':>9s}  vendor")
    for label, (name, fn, shape) in CASES.items():
        kernel = wb.build(fn(**shape), target=target)
        data = wb.workloads.random_args(name, seed=0, **shape)
        kernel(*data)
        expected = wb.workloads.reference(name, **shape)(*data[:-1])
        np.testing.assert_allclose(
            data[-1], expected, rtol=2e-3, atol=2e-3, err_msg=f"{label}: wrong result on the GPU"
        )
        t = kernel.time(*data)
        rate = f"{wb.workloads.flops(name, **shape) / t / 1e9:9.1f}"
        vendor = ""
        if name in ("GMM", "GMM-FP16"):
            a, b = data[0].reshape(data[0].shape[-2:]), data[1].reshape(data[1].shape[-2:])
            found = vendor_matmul(a, b)
            vendor = (
                "cupy/torch not installed"
                if found is None
                else f"{found[0]}: {found[1] * 1e3:.4f} ms, ours / theirs = {t / found[1]:.2f}"
            )
        print(f"{label:22s} {str(shape):38s} {t * 1e3:9.4f} {rate}  {vendor}")
    if args.trials:
        shape = CASES["GMM shared tiles"][2]
        func = wb.workloads.get("GMM", **shape)
        with tempfile.TemporaryDirectory() as tmp:
            db = wb.tune(
                func, target=target, trials=args.trials, database=os.path.join(tmp, "gpu.sqlite"), seed=0
            )
            rec = db.best(func, target=target)
            if rec is None:
                print(f"tune: no successful record in {args.trials} trials")
            else:
                kernel = wb.build(rec.schedule(), target=target)
                data = wb.workloads.random_args("GMM", seed=0, **shape)
                kernel(*data)
                np.testing.assert_allclose(
                    data[-1],
                    wb.workloads.reference("GMM", **shape)(*data[:-1]),
                    rtol=2e-3,
                    atol=2e-3,
                    err_msg="tuned GMM: wrong result",
                )
                print(f"tuned GMM ({args.trials} trials): {kernel.time(*data) * 1e3:.4f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
