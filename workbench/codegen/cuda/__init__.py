"""The GPU backend: lowered IR -> CUDA C -> nvcc -> pycuda; and an emulator.

    >>> from workbench.recipes.gpu import gmm_shared
    >>> sch = gmm_shared(n=64, m=64, k=64)                # blocks, threads, shared memory
    >>> a, b, c = wb.workloads.random_args("GMM", n=64, m=64, k=64)
    >>> kernel = wb.build(sch, target="cuda")            # CUDA C, compiled by nvcc
    >>> print(kernel.source("cuda"))                      # the CUDA C; "ptx": the PTX
    #include <cuda_fp16.h>
    ...
    >>> kernel(a, b, c)                                   # on the GPU  # doctest: +SKIP
    >>> wb.build(sch, target="cuda-emulate")(a, b, c)     # the same kernels, run on the CPU

Both targets share one translation (:mod:`..gpu.device`: kernels, launch extents, guards,
cross-thread reductions, barriers); :mod:`.source` prints it as CUDA C (the C-family printer of
:mod:`..gpu.cfamily` with CUDA's table), :mod:`..gpu.emulate` runs it with numpy, all threads of
the grid at once, and reports the races it sees. Without a GPU,
``build(..., "cuda")`` still compiles (so a schedule is checked by nvcc) and the kernel says
what is missing — pycuda, the driver, a device — when called.
"""

from __future__ import annotations

from typing import Any, Optional, Union

import numpy as np

from ...errors import BuildError
from ...ir.func import PrimFunc
from ..gpu.device import DeviceProgram, device_program, gpu_program
from ..gpu.emulate import EmulatedProgram, GPURaceError
from ..kernel import Kernel
from ...target import Target
from ..timing import TimingResult, time_runs, timing_plan
from .compile import compile_cuda, compiler_available
from .launch import Launcher, device_arch, gpu_unavailable
from .source import cuda_source

__all__ = [
    "build_cuda",
    "build_cuda_emulate",
    "emit_cuda",
    "CUDAKernel",
    "GPURaceError",
    "gpu_unavailable",
    "device_program",
]


def _program(
    func: PrimFunc, target: Union[str, Target], kinds: tuple[str, ...]
) -> tuple[Target, PrimFunc, DeviceProgram]:
    target = Target.of(target)
    if target.kind not in kinds:
        raise BuildError(f"target {str(target)!r} is not a {' or '.join(kinds)} target")
    return (target, *gpu_program(func, target))


def emit_cuda(func: PrimFunc, target: Union[str, Target] = "cuda") -> str:
    """The CUDA C source of ``func`` (lowered first); nothing is compiled."""
    _, _, program = _program(func, target, ("cuda", "cuda-emulate"))
    return cuda_source(program)


def build_cuda(func: PrimFunc, target: Union[str, Target] = "cuda") -> "CUDAKernel":
    """Generate CUDA C for ``func``, compile it with nvcc for ``-arch`` (default: the GPU's own
    where there is one, else sm_80), and return a kernel that runs on the GPU, if any."""
    target, _, program = _program(func, target, ("cuda",))
    source = cuda_source(program)
    why = compiler_available()
    if why:
        raise BuildError(f"cannot build for {target}: {why}")
    arch = target.cuda_arch
    if "arch" not in target.options and gpu_unavailable() is None:
        arch = device_arch() or arch  # a cubin runs only on its own major architecture
        target = Target(f"{target} -arch={arch}")
    cubin = compile_cuda(source, arch, "cubin")
    return CUDAKernel(func, target, program, source, cubin)


def build_cuda_emulate(func: PrimFunc, target: Union[str, Target] = "cuda-emulate") -> Kernel:
    """``func``'s GPU kernels, run on the CPU with GPU semantics (see :mod:`.emulate`)."""
    target, _, program = _program(func, target, ("cuda-emulate", "cuda"))
    emulated = EmulatedProgram(program)
    return Kernel(
        func, target, emulated.run, {"cuda": cuda_source(program), "emulator": emulated.python_source}
    )


class CUDAKernel(Kernel):
    """A compiled CUDA kernel. Sources: ``"cuda"`` (the CUDA C, default) and ``"ptx"`` (made on
    request). Calling or timing it needs a GPU; without one it raises ``RuntimeError`` saying
    what is missing."""

    def __init__(self, func: PrimFunc, target: Target, program: DeviceProgram, source: str, cubin: bytes):
        self.program = program
        self.cubin = cubin
        self._launcher: Optional[Any] = None
        super().__init__(func, target, self._run, {"cuda": source})

    def _gpu(self):
        why = gpu_unavailable()
        if why:
            raise RuntimeError(
                f"cannot run CUDA kernel {self.func.name!r}: {why}. It was "
                f"compiled (kernel.source('cuda'), kernel.source('ptx')); "
                f"target='cuda-emulate' runs it on the CPU"
            )
        if self._launcher is None:
            self._launcher = Launcher(self.program, self.cubin, self._writes)
        return self._launcher

    def _run(self, *arrays: np.ndarray) -> None:
        self._gpu().run(*arrays)

    def time(
        self,
        *arrays: Any,
        number: Optional[int] = None,
        repeat: int = 5,
        min_repeat_ms: float = 25.0,
        warmup: int = 1,
        windows: Optional[int] = None,
    ) -> TimingResult:
        """Seconds per launch of the kernels, the arrays staying on the GPU (copies not
        counted); as :meth:`Kernel.time` otherwise (the same statistic)."""
        plan = timing_plan(number, repeat, min_repeat_ms, warmup, windows)
        self.check_args(arrays)
        fn = self._gpu().timed_entry(arrays)
        return time_runs(fn, (), **plan)

    def source(self, kind: Optional[str] = None) -> str:
        if kind == "ptx" and "ptx" not in self._sources:
            self._sources["ptx"] = compile_cuda(self._sources["cuda"], self.target.cuda_arch, "ptx").decode()
        return super().source(kind)

    @property
    def source_kinds(self) -> tuple[str, ...]:
        return ("cuda", "ptx")
