"""Running compiled kernels on a GPU through pycuda (extra ``cuda``, imported only here).

:func:`gpu_unavailable` says what is missing — pycuda, a working driver, a device — so a
machine without a GPU gets one clear sentence instead of an import error or a crash.
"""

from __future__ import annotations

import atexit
from functools import lru_cache
from typing import Any, Optional, Sequence

import numpy as np

from ..gpu.device import DeviceProgram, host_count, host_sizes


@lru_cache(maxsize=1)
def gpu_unavailable() -> Optional[str]:
    """Why kernels cannot run on a GPU here (None when they can)."""
    try:
        import pycuda.driver as drv  # optional dependency (extra cuda)
    except ImportError:
        return "pycuda is not installed (pip install 'workbench[cuda]')"
    try:
        drv.init()
    except Exception as exc:  # pycuda.driver.Error / RuntimeError: no libcuda, driver too old
        return f"the CUDA driver could not be initialised ({exc})"
    if drv.Device.count() == 0:
        return "no CUDA device is present"
    return None


@lru_cache(maxsize=1)
def _context():
    """The primary context of device 0, made current for this process (kept alive)."""
    import pycuda.driver as drv  # optional dependency (extra cuda)

    ctx = drv.Device(0).retain_primary_context()
    ctx.push()
    atexit.register(ctx.pop)
    return ctx


def device_arch() -> Optional[str]:
    """``"sm_90"`` for the GPU here, None without one."""
    if gpu_unavailable():
        return None
    import pycuda.driver as drv  # optional dependency (extra cuda)

    major, minor = drv.Device(0).compute_capability()
    return f"sm_{major}{minor}"


class Launcher:
    """A loaded cubin: ``run(arrays)`` copies the arrays in, launches every kernel of the
    program in order, copies written ones back."""

    def __init__(self, program: DeviceProgram, cubin: bytes, writes: Sequence[bool]):
        import pycuda.driver as drv  # optional dependency (extra cuda)

        _context()
        self.drv = drv
        self.program = program
        self.module = drv.module_from_buffer(cubin)
        self.functions = [self.module.get_function(k.name) for k in program.kernels]
        for fn, k in zip(self.functions, program.kernels):
            if k.dyn_shared_bytes > 48 * 1024:
                fn.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, k.dyn_shared_bytes)
        self.writes = tuple(writes)
        self.resident: Optional[dict] = None

    def upload(self, arrays: Sequence[np.ndarray]) -> dict:
        drv = self.drv
        mem: dict[Any, Any] = {}
        for buf, arr in zip(self.program.func.params, arrays):
            mem[buf] = drv.mem_alloc(max(arr.nbytes, 1))
            drv.memcpy_htod(mem[buf], arr)
        sizes = host_sizes(self.program.func, arrays)
        for buf in self.program.host_buffers:
            nbytes = max(host_count(buf, sizes) * np.dtype(buf.dtype).itemsize, 1)
            mem[buf] = drv.mem_alloc(nbytes)
            drv.memset_d8(mem[buf], 0, nbytes)
        mem["sizes"] = [np.dtype(v.dtype).type(sizes[v]) for v in self.program.func.size_vars]
        return mem

    def launch(self, mem: dict) -> None:
        for fn, k in zip(self.functions, self.program.kernels):
            fn(
                *[mem[b] for b in k.params],
                *mem["sizes"],
                block=k.block,
                grid=k.grid,
                shared=k.dyn_shared_bytes,
            )

    def run(self, *arrays: np.ndarray) -> None:
        mem = self.upload(arrays)
        self.launch(mem)
        self.drv.Context.synchronize()
        for buf, arr, w in zip(self.program.func.params, arrays, self.writes):
            if w:
                self.drv.memcpy_dtoh(arr, mem[buf])

    def timed_entry(self, arrays: Sequence[np.ndarray]) -> Any:
        """``fn()`` launching the kernels on arrays already on the GPU (what ``time`` runs)."""
        mem = self.upload(arrays)
        sync = self.drv.Context.synchronize

        def fn(*_: Any) -> None:
            self.launch(mem)
            sync()

        # (the function keeps the allocations alive)
        fn.memory = mem  # type: ignore[attr-defined]
        return fn
